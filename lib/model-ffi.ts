// The decode model (kpick.h, "decode model"; hip-lib/src/common/model.h lists
// its files): what serve-bench runs. Called through the Kpick it is given (the
// one binding table of lib/ffi-types.ts, the one check of lib/ffi.ts), so it
// shares that library's process-wide state (init, the backend's scratch and streams).
//
// Memory ownership (lib/ffi.ts says it for the whole binding):
// - The library owns a model (weights, KV cache, activations, captured graphs);
//   Model.free() releases it, and any later call on it is refused by the
//   library ("not a live model handle"), never a crash.
// - The caller owns every array passed in; the library writes tokens and step
//   times only during the call.
import type { ModelPreset } from './models.ts';
import { DTYPE_CODES, type BindingName } from './ffi-types.ts';
import { fitsCInt, type Kpick } from './ffi.ts';
import { LINEAR_KINDS, type Dtype } from './schema.ts';

export { LINEAR_KINDS };
export type LinearKind = (typeof LINEAR_KINDS)[number];

/** The kinds an fp8 model holds in fp8: its layer linears and routed experts. */
const FP8_KINDS: readonly LinearKind[] = ['qkv', 'o', 'gate_up', 'down', 'experts'];

/**
 * The dtype of one linear kind's weights in a model of dtype: an fp8 model's
 * layer linears and experts are fp8, its lm_head and router bf16, as fp8
 * checkpoints keep them (model.h kp_kind_dtype).
 */
export function kindDtype(dtype: Dtype, kind: LinearKind): Dtype {
  return dtype === 'fp8' && !FP8_KINDS.includes(kind) ? 'bf16' : dtype;
}

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
  /** routed experts and top-k of a moe model; 0 and 0 for a dense one */
  experts: number;
  topk: number;
}

export interface SelfCheck {
  op: DecodeOp;
  dtype: Dtype;
  /** max |out - ref| / max |ref| against fp64 (argmax, embed: the fraction of wrong elements) */
  relErr: number;
  tol: number;
  pass: boolean;
}

/** The int32 fields of kpick_model_dims by their JS names: koffi would wrap 2^32 + 64 to 64 and truncate 64.5. */
const INT_DIMS = ['hidden', 'intermediate', 'heads', 'kvHeads', 'headDim', 'vocab', 'layers', 'maxBatch', 'context', 'maxNew', 'experts', 'topk'] as const;

function rawDims(d: ModelDims): Record<string, number> {
  for (const name of INT_DIMS) {
    const x = d[name];
    if (!fitsCInt('int32_t', x)) throw new RangeError(`dims.${name} must be an integer, got ${x}`);
  }
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
    experts: d.experts,
    topk: d.topk,
  };
}

/** The decode-model entry points of one loaded library. */
export class NativeModels {
  constructor(readonly kpick: Kpick) {}

  /** One entry point through Kpick.check: KpickError with the library's message on a non-OK status. */
  call(name: BindingName, ...args: unknown[]): void {
    this.kpick.call(name, ...args);
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
