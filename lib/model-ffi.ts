// Bindings of the decode model (kpick.h, "decode model"; hip-lib/src/common/model.c):
// what serve-bench runs. Bound on the library file a Kpick loaded, so they share
// its process-wide state (init, the backend's scratch and streams).
//
// Memory ownership:
// - The library owns a model (weights, KV cache, activations, captured graphs);
//   Model.free() releases it, and any later call on it is refused by the
//   library ("not a live model handle"), never a crash.
// - The caller owns every array passed in; the library writes tokens and step
//   times only during the call.
import type { ModelPreset } from './models.ts';
import koffi from 'koffi';
import { DTYPE_CODES, STATUS_NAMES, Status } from './ffi-types.ts';
import { KpickError, type Dtype, type Kpick } from './ffi.ts';

/** enum kpick_linear_kind: the order of a candidate list */
export const LINEAR_KINDS = ['qkv', 'o', 'gate_up', 'down', 'lm_head'] as const;
export type LinearKind = (typeof LINEAR_KINDS)[number];

/** enum kpick_decode_op */
export const DECODE_OPS = ['add_rmsnorm', 'rope_append', 'attention', 'argmax', 'embed'] as const;
export type DecodeOp = (typeof DECODE_OPS)[number];

/** kpick_model_dims, with JS names: a preset's shape plus what one run needs. */
export interface ModelDims extends Pick<ModelPreset, 'hidden' | 'intermediate' | 'heads' | 'kvHeads' | 'headDim' | 'vocab' | 'layers' | 'rmsEps'> {
  dtype: Dtype;
  /** lm_head is the embedding table */
  tied: boolean;
  /** rows of a step: the largest concurrency */
  maxBatch: number;
  /** KV positions a reset fills (the prompt) */
  context: number;
  /** steps a reset (or a timed run) leaves room for */
  maxNew: number;
  ropeTheta: number;
}

export interface SelfCheck {
  op: DecodeOp;
  dtype: Dtype;
  /** max |out - ref| / max |ref| against fp64 (argmax, embed: the fraction of wrong elements) */
  relErr: number;
  tol: number;
  pass: boolean;
}

const KpickModelDims = koffi.struct('kpick_model_dims', {
  dtype: 'int32_t',
  hidden: 'int32_t',
  intermediate: 'int32_t',
  heads: 'int32_t',
  kv_heads: 'int32_t',
  head_dim: 'int32_t',
  vocab: 'int32_t',
  layers: 'int32_t',
  tied: 'int32_t',
  max_batch: 'int32_t',
  context: 'int32_t',
  max_new: 'int32_t',
  rms_eps: 'float',
  rope_theta: 'float',
});
const ModelHandle = koffi.pointer('kpick_model', koffi.opaque());
const dimsPtr = koffi.pointer(KpickModelDims);

const SIGNATURES = {
  kpick_last_error: ['const char *', []],
  kpick_model_bytes: ['int', [dimsPtr, koffi.out(koffi.pointer('int64_t'))]],
  kpick_model_create: ['int', [dimsPtr, 'uint64_t', koffi.out(koffi.pointer(ModelHandle))]],
  kpick_model_free: ['int', [ModelHandle]],
  kpick_model_reset: ['int', [ModelHandle, 'uint64_t']],
  kpick_model_step: ['int', [ModelHandle, 'const int32_t *', 'int32_t', 'int32_t *']],
  kpick_model_time: ['int', [ModelHandle, 'const int32_t *', 'int32_t', 'int32_t', 'double *']],
  kpick_model_check: ['int', [ModelHandle, 'const int32_t *', 'int32_t', koffi.out(koffi.pointer('double')), koffi.out(koffi.pointer('double'))]],
  kpick_decode_selfcheck: [
    'int',
    ['int32_t', 'int32_t', 'uint64_t', 'int32_t', koffi.out(koffi.pointer('double')), koffi.out(koffi.pointer('double'))],
  ],
} as const;
type Name = keyof typeof SIGNATURES;
type NativeFn = (...args: unknown[]) => unknown;

function rawDims(d: ModelDims): Record<string, number> {
  return {
    dtype: DTYPE_CODES[d.dtype] ?? -1,
    hidden: d.hidden,
    intermediate: d.intermediate,
    heads: d.heads,
    kv_heads: d.kvHeads,
    head_dim: d.headDim,
    vocab: d.vocab,
    layers: d.layers,
    tied: d.tied ? 1 : 0,
    max_batch: d.maxBatch,
    context: d.context,
    max_new: d.maxNew,
    rms_eps: d.rmsEps,
    rope_theta: d.ropeTheta,
  };
}

/** The decode-model entry points of one loaded library. */
export class NativeModels {
  private readonly fns: Record<Name, NativeFn>;

  constructor(readonly kpick: Kpick) {
    const lib = koffi.load(kpick.path);
    this.fns = Object.fromEntries(
      Object.entries(SIGNATURES).map(([name, [result, args]]) => [name, lib.func(name, result, [...args]) as NativeFn]),
    ) as Record<Name, NativeFn>;
  }

  /** Throws KpickError with the library's message on a non-OK status. */
  call(name: Name, ...args: unknown[]): void {
    const status = Number(this.fns[name](...args));
    if (status === Status.OK) return;
    const message = String(this.fns.kpick_last_error() ?? '');
    throw new KpickError(name, status, message || `${name} failed: ${STATUS_NAMES[status] ?? `status ${status}`}`);
  }

  /** Bytes of memory kpick_model_create would need for dims (weights, cache, activations, reserve). */
  bytes(dims: ModelDims): number {
    const out = [0];
    this.call('kpick_model_bytes', rawDims(dims), out);
    return Number(out[0]);
  }

  create(dims: ModelDims, seed: number | bigint): Model {
    const out: unknown[] = [null];
    this.call('kpick_model_create', rawDims(dims), BigInt(seed), out);
    return new Model(this, out[0], dims);
  }

  /** One non-linear op of this backend on random data against fp64; corrupt perturbs its input. */
  selfcheck(op: DecodeOp, dtype: Dtype, seed: number | bigint, corrupt = false): SelfCheck {
    const relErr = [0];
    const tol = [0];
    this.call('kpick_decode_selfcheck', DECODE_OPS.indexOf(op), DTYPE_CODES[dtype] ?? -1, BigInt(seed), corrupt ? 1 : 0, relErr, tol);
    const r = Number(relErr[0]);
    const t = Number(tol[0]);
    return { op, dtype, relErr: r, tol: t, pass: Number.isFinite(r) && r <= t };
  }
}

/** One decode model owned by the library. */
export class Model {
  private handle: unknown;

  constructor(
    private readonly native: NativeModels,
    handle: unknown,
    readonly dims: ModelDims,
  ) {
    this.handle = handle;
  }

  get freed(): boolean {
    return this.handle === null;
  }

  /** Prompt state from seed: KV positions 0..context-1, one random token per row, position at context. */
  reset(seed: number | bigint): void {
    this.native.call('kpick_model_reset', this.handle, BigInt(seed));
  }

  /**
   * The arguments every step-like call passes, checked before the native call
   * (the library reads LINEAR_KINDS.length candidates, whatever the array holds).
   */
  private checkStep(cands: Int32Array, batch: number): void {
    if (!(cands instanceof Int32Array) || cands.length !== LINEAR_KINDS.length) {
      throw new RangeError(`cands must be an Int32Array of ${LINEAR_KINDS.length} candidate ids (${LINEAR_KINDS.join(', ')}), got ${cands?.length ?? cands}`);
    }
    if (!(Number.isInteger(batch) && batch >= 1 && batch <= this.dims.maxBatch)) {
      throw new RangeError(`batch must be an integer in 1..${this.dims.maxBatch} (the model's maxBatch), got ${batch}`);
    }
  }

  /** One greedy step of the first `batch` rows with one candidate id per linear kind; the picked tokens. */
  step(cands: Int32Array, batch: number): Int32Array {
    this.checkStep(cands, batch);
    const tokens = new Int32Array(Math.max(1, batch));
    this.native.call('kpick_model_step', this.handle, cands, batch, tokens);
    return tokens.subarray(0, batch);
  }

  /** `steps` timed steps from the context position, microseconds each. */
  time(cands: Int32Array, batch: number, steps: number): Float64Array {
    this.checkStep(cands, batch);
    if (!(Number.isInteger(steps) && steps >= 1 && steps <= this.dims.maxNew)) {
      throw new RangeError(`steps must be an integer in 1..${this.dims.maxNew} (the model's maxNew), got ${steps}`);
    }
    const us = new Float64Array(Math.max(1, steps));
    this.native.call('kpick_model_time', this.handle, cands, batch, steps, us);
    return us.subarray(0, Math.max(0, steps));
  }

  /**
   * One step like step() (it advances the state), then the same step in fp64 on
   * the host from the model's own weights and cache: every buffer the step left
   * (each layer's cache slots, the last layer's qkv, attention, gate_up, down,
   * the final norm, residual and logits) against it, relative to its largest value.
   */
  check(cands: Int32Array, batch: number): { relErr: number; tol: number; pass: boolean } {
    this.checkStep(cands, batch);
    const relErr = [0];
    const tol = [0];
    this.native.call('kpick_model_check', this.handle, cands, batch, relErr, tol);
    const r = Number(relErr[0]);
    const t = Number(tol[0]);
    return { relErr: r, tol: t, pass: Number.isFinite(r) && r <= t };
  }

  /** Releases the library's memory; later calls fail with "not a live model handle". */
  free(): void {
    const handle = this.handle;
    this.handle = null;
    this.native.call('kpick_model_free', handle);
  }
}
