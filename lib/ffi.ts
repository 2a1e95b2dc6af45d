// Typed bindings of libkpick-<backend>.so (hip-lib/include/kpick.h) via koffi:
// the one loader (loadKpick, openKpick) and the one status check (Kpick.check)
// of every native call, through the one binding table of lib/ffi-types.ts.
// NativeRoute (here) and NativeModels (lib/model-ffi.ts) call through the Kpick
// they are given, so all three share one loaded library and its state.
//
// Who owns native memory:
// - The library owns every problem, model and DeviceBuffer (weights, inputs,
//   outputs, KV caches, graphs, backend state). A Problem, Model or
//   DeviceBuffer wraps one handle; its free() releases it, and any later call
//   on it is refused by the library ("not a live ... handle"), never a crash;
//   linear() and moe() refuse a freed DeviceBuffer here, since the CPU library
//   takes any address as memory.
//   Nothing frees them on garbage collection: a script frees what it made.
// - The caller owns every JS array passed in: data comes back through typed
//   arrays that this module (or the caller) allocates with exactly the size
//   the library checks, and that the library only reads or writes during the call.
// - The last-error string belongs to the library; check() copies it at once.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi, { type LibraryHandle } from 'koffi';
import {
  ABI_FACTS,
  BINDINGS,
  BUFFER_CODES,
  DTYPE_CODES,
  NUMERIC_NAMES,
  OP_CODES,
  ROUTING_CODES,
  STATUS_NAMES,
  Status,
  type BindingName,
  type RawCandidate,
  type RawInfo,
  type Routing,
} from './ffi-types.ts';
import { UsageError } from './cli.ts';
import { activationDtype, MAX_EXPERTS, MAX_ROWS, MAX_TOPK, moeWeightBytes, OPS, takesDtype, weightBytes, type Dtype, type Numeric, type Op } from './schema.ts';

export type { Dtype, Numeric, Op, Routing };
export { activationDtype, moeWeightBytes, takesDtype, weightBytes };

export const BACKENDS = ['cpu', 'cuda', 'hip'] as const;
export type Backend = (typeof BACKENDS)[number];
/** GPU builds the embedded default tries, in order, before the cpu build. */
const GPU_PREFERENCE: readonly Backend[] = ['cuda', 'hip'];

export const DEFAULT_BUILD_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'build');

/** --backend's value: undefined (the best build) or one of BACKENDS; throws naming them. */
export function parseBackend(text: string | undefined): Backend | undefined {
  if (text === undefined) return undefined;
  if (!(BACKENDS as readonly string[]).includes(text)) throw new Error(`--backend must be one of ${BACKENDS.join(', ')}, got '${text}'`);
  return text as Backend;
}

/** A library call returned a non-OK status; message is kpick_last_error(). */
export class KpickError extends Error {
  readonly status: number;
  readonly call: string;
  constructor(call: string, status: number, message: string) {
    super(message || `${call} failed: ${STATUS_NAMES[status] ?? `status ${status}`}`);
    this.name = 'KpickError';
    this.status = status;
    this.call = call;
  }
  get statusName(): string {
    return STATUS_NAMES[this.status] ?? `status ${this.status}`;
  }
}

/**
 * No library could be loaded; message lists every path tried and why (or
 * names the bad KPICK_BACKEND). A bad environment: exit 2, like bad usage.
 */
export class KpickLoadError extends UsageError {
  readonly tried: readonly { path: string; why: string }[];
  constructor(tried: { path: string; why: string }[], message?: string) {
    const list = tried.map((t) => `${t.path}: ${t.why}`).join('; ');
    super(message ?? `no usable libkpick (tried ${list})`);
    this.name = 'KpickLoadError';
    this.tried = tried;
  }
}

/** kpick_info with JS names: the strings and counts as the library reports them. */
export interface Info extends Pick<RawInfo, 'backend' | 'arch' | 'device' | 'runtime' | 'blas' | 'compiler' | 'space' | 'abi' | 'warp' | 'units'> {
  pdl: boolean;
  memFree: number;
  memTotal: number;
  llcBytes: number;
}

export interface Candidate {
  id: number;
  name: string;
  family: string;
  /** family parameters by name, e.g. { R: 4, U: 2 } */
  params: Record<string, number>;
  op: Op;
  /** declared graph nodes per call */
  nodes: number;
  /** the class head whose output this must match byte for byte (its own name for the head), or null */
  bitwiseWith: string | null;
  isDefault: boolean;
  rowsMin: number;
  rowsMax: number;
  stackBound: boolean;
  pdl: boolean;
  available: boolean;
  /** numeric class: which dtypes it takes (takesDtype) and which parity bar judges it */
  numeric: Numeric;
}

export interface ProblemSpec {
  op: Op;
  dtype: Dtype;
  n: number;
  k: number;
  /** rows x is generated with; setRows picks the active rows 1..mMax */
  mMax: number;
  /** rotating weight copies; 0 or absent: the library picks > 8x LLC */
  copies?: number;
  seed: number | bigint;
  /** op moe only: experts, top-k, and how the routing is drawn (default uniform) */
  experts?: number;
  topk?: number;
  routing?: Routing;
}

type NativeFn = (...args: unknown[]) => unknown;
type Native = Record<BindingName, NativeFn>;

function bind(lib: LibraryHandle): Native {
  const fns = {} as Native;
  for (const [name, [result, args]] of Object.entries(BINDINGS)) {
    fns[name as BindingName] = lib.func(name, result, [...args]) as NativeFn;
  }
  return fns;
}

function toNumber(x: number | bigint): number {
  return typeof x === 'bigint' ? Number(x) : x;
}

/** The C integer types of the binding table, by the values each holds. */
const INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32_t: [-(2n ** 31n), 2n ** 31n - 1n],
  int64_t: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64_t: [0n, 2n ** 64n - 1n],
};

/** Does value fit the C integer type (a name of INT_RANGES) as it is, without koffi wrapping or truncating it? */
export function fitsCInt(type: keyof typeof INT_RANGES, value: unknown): boolean {
  const range = INT_RANGES[type]!;
  const int = typeof value === 'bigint' ? value : Number.isInteger(value) ? BigInt(value as number) : null;
  return int !== null && int >= range[0] && int <= range[1];
}

const shown = (value: unknown) => (typeof value === 'number' || typeof value === 'bigint' ? String(value) : typeof value === 'string' ? JSON.stringify(value) : typeof value);

/**
 * What koffi would alter rather than refuse, refused before any native call:
 * an integer argument that is not an integer or lies outside its C type (koffi
 * wraps an int32 modulo 2^32 and truncates a fraction: -(2^32 - 5) samples
 * reached kpick_time as 5), a number where a pointer goes (koffi takes it for
 * an address; the handles koffi gives back are bigints, which the library
 * checks), and a C string that is not a string, or holds a NUL (C reads it up
 * to there).
 */
function checkArgs(call: BindingName, args: readonly unknown[]): void {
  (BINDINGS[call][1] as readonly unknown[]).forEach((type, i) => {
    const value = args[i];
    const range = typeof type === 'string' ? INT_RANGES[type] : undefined;
    if (range) {
      if (!fitsCInt(type as string, value)) {
        throw new RangeError(`${call}: argument ${i + 1} (${type}) must be an integer in ${range[0]}..${range[1]}, got ${shown(value)}`);
      }
    } else if (type === 'const char *' ? !(typeof value === 'string' || value === null) : typeof value === 'number') {
      throw new TypeError(`${call}: argument ${i + 1} is a pointer${typeof type === 'string' ? ` (${type})` : ''}, got ${shown(value)}`);
    } else if (typeof value === 'string' && value.includes('\0')) {
      throw new TypeError(`${call}: argument ${i + 1} holds a NUL character, where C would end it: ${shown(value)}`);
    }
  });
}

/** One loaded library. */
export class Kpick {
  readonly path: string;
  private readonly native: Native;
  private candidateList: Candidate[] | null = null;

  constructor(path: string, native: Native) {
    this.path = path;
    this.native = native;
  }

  /**
   * Throws KpickError with the library's own message (kpick_last_error, read
   * at once) on a non-OK status: the one status check of every native call.
   */
  check(call: BindingName, status: unknown): void {
    if (status === Status.OK) return;
    const message = String(this.native.kpick_last_error() ?? '');
    throw new KpickError(call, Number(status), message);
  }

  /** Calls one entry point of the binding table through checkArgs() and check(). */
  call(name: BindingName, ...args: unknown[]): void {
    checkArgs(name, args);
    this.check(name, this.native[name](...args));
  }

  info(): Info {
    const raw = {} as RawInfo;
    this.call('kpick_get_info', raw);
    return {
      backend: raw.backend,
      arch: raw.arch,
      device: raw.device,
      runtime: raw.runtime,
      blas: raw.blas,
      compiler: raw.compiler,
      space: raw.space,
      abi: raw.abi,
      warp: raw.warp,
      units: raw.units,
      pdl: raw.pdl !== 0,
      memFree: toNumber(raw.mem_free),
      memTotal: toNumber(raw.mem_total),
      llcBytes: toNumber(raw.llc_bytes),
    };
  }

  /** Every candidate of the space, described; the space is fixed per library. */
  candidates(): Candidate[] {
    if (this.candidateList) return this.candidateList;
    const count = [0];
    this.call('kpick_candidate_count', count);
    const raws: RawCandidate[] = [];
    for (let id = 0; id < (count[0] ?? 0); id++) {
      const raw = {} as RawCandidate;
      this.call('kpick_candidate_describe', id, raw);
      raws.push(raw);
    }
    this.candidateList = raws.map((raw, id) => {
      const names = raw.param_names.split(',').filter((s) => s.length > 0);
      const params: Record<string, number> = {};
      names.forEach((name, i) => (params[name] = raw.params[i] ?? 0));
      const head = raw.bitwise_with >= 0 ? raws[raw.bitwise_with] : undefined;
      return {
        id,
        name: raw.name,
        family: raw.family,
        params,
        op: OPS.find((op) => OP_CODES[op] === raw.op) ?? 'linear',
        nodes: raw.nodes,
        bitwiseWith: head ? head.name : null,
        isDefault: raw.is_default !== 0,
        rowsMin: raw.rows_min,
        rowsMax: raw.rows_max,
        stackBound: raw.stack_bound !== 0,
        pdl: raw.pdl !== 0,
        available: raw.available !== 0,
        numeric: NUMERIC_NAMES[raw.numeric] ?? 'w16a16',
      } satisfies Candidate;
    });
    return this.candidateList;
  }

  /** The candidate named name; KpickError when the space has none. */
  candidate(name: string): Candidate {
    const id = [0];
    this.call('kpick_candidate_find', name, id);
    const found = this.candidates()[id[0] ?? -1];
    if (!found) throw new KpickError('kpick_candidate_find', Status.E_ARG, `no candidate with id ${id[0]}`);
    return found;
  }

  /** e4m3 codes of fp32 values (round to nearest even, saturating at +-448) */
  e4m3Encode(values: Float32Array): Uint8Array {
    // the library reads values.length floats: another array would be read past its end
    if (!(values instanceof Float32Array)) throw new TypeError('e4m3Encode: values must be a Float32Array');
    // koffi passes an empty array as NULL: nothing to encode
    if (values.length === 0) return new Uint8Array(0);
    const codes = new Uint8Array(Math.max(1, values.length));
    this.call('kpick_e4m3_encode', values, codes, values.length);
    return codes.subarray(0, values.length);
  }

  /** the values of e4m3 codes (0x7F and 0xFF: NaN) */
  e4m3Decode(codes: Uint8Array): Float32Array {
    if (!(codes instanceof Uint8Array)) throw new TypeError('e4m3Decode: codes must be a Uint8Array');
    if (codes.length === 0) return new Float32Array(0);
    const values = new Float32Array(Math.max(1, codes.length));
    this.call('kpick_e4m3_decode', codes, values, codes.length);
    return values.subarray(0, codes.length);
  }

  /** The fp8 weight buffer (codes, then scales) of bf16 w[rows][k], as kpick_linear takes it. */
  fp8Pack(w: Uint16Array, rows: number, k: number): Uint8Array {
    // the library reads rows * k elements of w, whatever it holds
    if (!(w instanceof Uint16Array)) throw new TypeError('fp8Pack: w must be a Uint16Array of bf16 weights');
    if (w.length !== rows * k) throw new RangeError(`fp8Pack: w holds ${w.length} elements, a ${rows} x ${k} weight is ${rows * k}`);
    const out = new Uint8Array(weightBytes('fp8', rows, k));
    this.call('kpick_fp8_pack', w, rows, k, out, out.byteLength);
    return out;
  }

  createProblem(spec: ProblemSpec): Problem {
    const out: unknown[] = [null];
    if (spec.op === 'moe') {
      this.call(
        'kpick_problem_create_moe',
        DTYPE_CODES[spec.dtype] ?? -1,
        spec.experts ?? 0,
        spec.topk ?? 0,
        spec.n,
        spec.k,
        spec.mMax,
        ROUTING_CODES[spec.routing ?? 'uniform'] ?? -1,
        spec.copies ?? 0,
        BigInt(spec.seed),
        out,
      );
      return new Problem(this, out[0], spec);
    }
    this.call(
      'kpick_problem_create',
      OP_CODES[spec.op] ?? -1,
      DTYPE_CODES[spec.dtype] ?? -1,
      spec.n,
      spec.k,
      spec.mMax,
      spec.copies ?? 0,
      BigInt(spec.seed),
      out,
    );
    return new Problem(this, out[0], spec);
  }
}

/**
 * createProblem for a shape the user named (sweep, parity): sizes the library
 * refuses (a weight too large) are bad input, a UsageError (exit 2), not a
 * failed check.
 */
export function problemOfInput(kpick: Kpick, spec: ProblemSpec): Problem {
  try {
    return kpick.createProblem(spec);
  } catch (err) {
    if (err instanceof KpickError && err.status === Status.E_ARG) throw new UsageError(err.message);
    throw err;
  }
}

/** One problem owned by the library: random x and rotating weight copies. */
export class Problem {
  readonly op: Op;
  readonly dtype: Dtype;
  readonly n: number;
  readonly k: number;
  readonly mMax: number;
  readonly seed: bigint;
  readonly copies: number;
  /** op moe: experts, top-k and routing; 0, 0 and null otherwise */
  readonly experts: number;
  readonly topk: number;
  readonly routing: Routing | null;
  private handle: unknown;
  private m: number;
  private readonly lib: Kpick;

  constructor(lib: Kpick, handle: unknown, spec: ProblemSpec) {
    this.lib = lib;
    this.handle = handle;
    this.op = spec.op;
    this.dtype = spec.dtype;
    this.n = spec.n;
    this.k = spec.k;
    this.mMax = spec.mMax;
    this.seed = BigInt(spec.seed);
    this.experts = spec.op === 'moe' ? (spec.experts ?? 0) : 0;
    this.topk = spec.op === 'moe' ? (spec.topk ?? 0) : 0;
    this.routing = spec.op === 'moe' ? (spec.routing ?? 'uniform') : null;
    this.m = spec.mMax;
    const copies = [0];
    lib.call('kpick_problem_copies', handle, copies);
    this.copies = copies[0] ?? 0;
  }

  /** active rows */
  get rows(): number {
    return this.m;
  }

  get freed(): boolean {
    return this.handle === null;
  }

  /** Rows of the weight: 2N for the gated op (gate then up); moe: 3N per expert (W_gate_up, then W_down as [K, N]). */
  get weightRows(): number {
    return this.op === 'gated' ? 2 * this.n : this.op === 'moe' ? 3 * this.n * this.experts : this.n;
  }

  /** Bytes of weight copy 0 (moe: W_gate_up, then W_down from moeWeightBytes(...).gateUp). */
  get weightBytes(): number {
    if (this.op !== 'moe') return weightBytes(this.dtype, this.weightRows, this.k);
    const { gateUp, down } = moeWeightBytes(this.dtype, this.experts, this.n, this.k);
    return gateUp + down;
  }

  /** Columns of y: N, or K for moe (its output is the hidden size). */
  get outCols(): number {
    return this.op === 'moe' ? this.k : this.n;
  }

  setRows(m: number): void {
    this.lib.call('kpick_set_rows', this.handle, m);
    this.m = m;
  }

  supports(id: number): boolean {
    const out = [0];
    this.lib.call('kpick_supports', this.handle, id, out);
    return out[0] === 1;
  }

  /** Fill y with 0xFFFF, so an element a kernel never writes stays visible. */
  poison(): void {
    this.lib.call('kpick_poison', this.handle);
  }

  run(id: number, copy = 0): void {
    this.lib.call('kpick_run', this.handle, id, copy);
  }

  /** nsamples timings of one call, microseconds, rotating weight copies */
  time(id: number, nsamples: number): Float64Array {
    // never empty: koffi passes an empty array as NULL, which would hide the real complaint
    const us = new Float64Array(Math.max(1, nsamples));
    this.lib.call('kpick_time', this.handle, id, nsamples, us);
    return us;
  }

  /** the read floor: streams the same weight bytes with the same rotation */
  timeFloor(nsamples: number): Float64Array {
    const us = new Float64Array(Math.max(1, nsamples));
    this.lib.call('kpick_time_floor', this.handle, nsamples, us);
    return us;
  }

  countNodes(id: number): number {
    const out = [0];
    this.lib.call('kpick_count_nodes', this.handle, id, out);
    return out[0] ?? 0;
  }

  /** y[rows, outCols] as raw 16-bit elements */
  downloadY(out = new Uint16Array(this.m * this.outCols)): Uint16Array {
    return this.download('y', out);
  }

  /** moe: the expert ids [rows, topk] of the active rows */
  downloadExpertIds(out = new Int32Array(this.m * this.topk)): Int32Array {
    this.lib.call('kpick_download', this.handle, BUFFER_CODES.expert_ids, out, out.byteLength);
    return out;
  }

  /** moe: the routing weights [rows, topk] of the active rows */
  downloadExpertWeights(out = new Float32Array(this.m * this.topk)): Float32Array {
    this.lib.call('kpick_download', this.handle, BUFFER_CODES.expert_weights, out, out.byteLength);
    return out;
  }

  /** x[rows, K] as raw 16-bit elements */
  downloadX(out = new Uint16Array(this.m * this.k)): Uint16Array {
    return this.download('x', out);
  }

  /** weight copy 0, [weightRows, K] (16-bit dtypes) */
  downloadW(out = new Uint16Array(this.weightRows * this.k)): Uint16Array {
    return this.download('w', out);
  }

  /** weight copy 0 as bytes: fp8's codes then scales (kpick.h KPICK_FP8); moe: W_gate_up's, then W_down's */
  downloadWeightBytes(out = new Uint8Array(this.weightBytes)): Uint8Array {
    return this.download('w', out);
  }

  /**
   * fp64 reference of y for weight copy 0 at the active rows, laid out
   * [rows][cols.length]; cols null means every column.
   */
  reference(cols: readonly number[] | null, out?: Float64Array): Float64Array {
    // koffi passes an empty array as NULL, which means "every column": refuse it here
    if (cols !== null && cols.length === 0) throw new RangeError('reference: cols is empty (null means every column)');
    // a BigInt64Array wraps 2^64 to 0: the library checks the columns it is given
    const bad = cols === null ? -1 : cols.findIndex((c) => !Number.isSafeInteger(c));
    if (bad >= 0) throw new RangeError(`reference: cols[${bad}] must be an integer, got ${cols![bad]}`);
    // the library writes count doubles, so count is of a Float64Array
    if (out !== undefined && !(out instanceof Float64Array)) throw new TypeError('reference: out must be a Float64Array');
    const ncols = cols === null ? this.outCols : cols.length;
    const y = out ?? new Float64Array(this.m * ncols);
    const colArray = cols === null ? null : BigInt64Array.from(cols, (c) => BigInt(c));
    this.lib.call('kpick_reference', this.handle, colArray, ncols, y, y.length);
    return y;
  }

  /** Releases the library's memory; later calls fail with "not a live problem handle". */
  free(): void {
    const handle = this.handle;
    this.handle = null;
    this.lib.call('kpick_problem_free', handle);
  }

  private download<T extends Uint16Array | Uint8Array>(which: keyof typeof BUFFER_CODES, out: T): T {
    this.lib.call('kpick_download', this.handle, BUFFER_CODES[which], out, out.byteLength);
    return out;
  }
}

export interface LoadOptions {
  /** a library path; default $KPICK_LIB */
  lib?: string;
  /** cpu | cuda | hip; default $KPICK_BACKEND */
  backend?: string;
  /** where build/libkpick-<backend>.so live */
  buildDir?: string;
}

/** The ABI facts where the library differs from ABI_FACTS, "" when none does. */
function abiMismatch(native: Native): string {
  const differ: string[] = [];
  for (const [name, mine] of Object.entries(ABI_FACTS)) {
    const theirs = [0];
    const status = native.kpick_abi_value(name, theirs);
    if (status !== Status.OK) differ.push(`${name}: unknown to the library`);
    else if (Number(theirs[0]) !== mine) differ.push(`${name} ${theirs[0]} there, ${mine} here`);
  }
  return differ.join(', ');
}

/** Opens one path: load, bind, init, ABI check. Returns the reason it failed. */
function tryOpen(path: string): Kpick | string {
  if (!existsSync(path)) return 'no such file';
  let lib: LibraryHandle;
  try {
    lib = koffi.load(path);
  } catch (err) {
    return `load failed: ${(err as Error).message}`;
  }
  let native: Native;
  try {
    native = bind(lib);
  } catch (err) {
    lib.unload();
    return `${(err as Error).message}: not a library of ABI ${ABI_FACTS.version} (rebuild with make)`;
  }
  try {
    const status = native.kpick_init();
    if (status !== Status.OK) {
      const why = String(native.kpick_last_error() ?? '') || STATUS_NAMES[Number(status)] || `status ${status}`;
      lib.unload();
      return `kpick_init failed: ${why}`;
    }
    // the layout and limits first: a struct of another size must never be passed in
    const differ = abiMismatch(native);
    if (differ) {
      lib.unload();
      return `ABI differs from this binding (${differ}): rebuild with make`;
    }
    return new Kpick(path, native);
  } catch (err) {
    lib.unload();
    return (err as Error).message;
  }
}

/**
 * Loads the library: $KPICK_LIB (a path) first, else $KPICK_BACKEND ->
 * build/libkpick-<backend>.so, else the first GPU build (cuda, then hip)
 * whose kpick_init succeeds, else the cpu build.
 */
export function loadKpick(options: LoadOptions = {}): Kpick {
  const libPath = options.lib ?? (process.env.KPICK_LIB || undefined);
  const backend = options.backend ?? (process.env.KPICK_BACKEND || undefined);
  const buildDir = options.buildDir ?? DEFAULT_BUILD_DIR;
  let paths: string[];
  if (libPath !== undefined) {
    paths = [resolve(libPath)];
  } else if (backend !== undefined) {
    if (!(BACKENDS as readonly string[]).includes(backend)) {
      const from = options.backend !== undefined ? '--backend' : 'KPICK_BACKEND';
      throw new KpickLoadError([], `${from} must be one of ${BACKENDS.join(', ')}, got '${backend}'`);
    }
    paths = [join(buildDir, `libkpick-${backend}.so`)];
  } else {
    paths = [...GPU_PREFERENCE, 'cpu'].map((b) => join(buildDir, `libkpick-${b}.so`));
  }
  const tried: { path: string; why: string }[] = [];
  for (const path of paths) {
    const opened = tryOpen(path);
    if (typeof opened !== 'string') return opened;
    tried.push({ path, why: opened });
  }
  throw new KpickLoadError(tried);
}

/**
 * The library a script runs on: loadKpick, and with a backend named (--backend)
 * a library of another backend is refused too (KPICK_LIB may name any build):
 * exit 2 through lib/cli.ts, with the path and what it is.
 */
export function openKpick(backend?: string | null, options: Omit<LoadOptions, 'backend'> = {}): Kpick {
  const kpick = loadKpick(backend == null ? options : { ...options, backend });
  const got = kpick.info().backend;
  if (backend != null && got !== backend) throw new UsageError(`--backend ${backend}, but ${kpick.path} is a ${got} build`);
  return kpick;
}

// ---- the route entry points (kpick.h, hip-lib/src/common/route.c) ----
// Called through the Kpick they are given: one loaded library, one route state.

/**
 * Memory allocated through the library for kpick_linear (device memory on a
 * GPU, host memory on the CPU): its size is known to both sides.
 */
export class DeviceBuffer {
  constructor(
    /** the pointer, opaque to JS */
    readonly ptr: unknown,
    readonly bytes: number,
  ) {}
}

/**
 * The DeviceBuffers alloc() made that free() has not released. The CPU backend
 * takes any address as host memory, so a freed (or made-up) buffer must never
 * reach kpick_linear: it would write where the buffer was.
 */
const liveBuffers = new WeakSet<DeviceBuffer>();
const checkLive = (name: string, mem: unknown) => {
  if (mem instanceof DeviceBuffer && !liveBuffers.has(mem)) throw new TypeError(`${name} is not a live DeviceBuffer (freed, or not made by alloc())`);
};

/** What kpick_linear reads and writes: a host array (the CPU backend) or a DeviceBuffer (any backend). */
/** x and y: 16-bit elements; W: 16-bit elements, or fp8's packed bytes (a Uint8Array) */
export type LinearMemory = Uint16Array | Uint8Array | DeviceBuffer;

/** The routing inputs of a moe call: expert ids (int32) and weights (fp32), [m, topk]. */
export type IdsMemory = Int32Array | DeviceBuffer;
export type WeightsMemory = Float32Array | DeviceBuffer;
type AnyMemory = LinearMemory | IdsMemory | WeightsMemory;

const bytesOf = (m: AnyMemory) => (m instanceof DeviceBuffer ? m.bytes : m.byteLength);
const pointerOf = (m: AnyMemory) => (m instanceof DeviceBuffer ? m.ptr : m);

/** n, k in 1..2^24 and m in 1..MAX_ROWS, as integers: what the route takes. */
function checkDims(m: number, n: number, k: number): void {
  const int = (x: number, lo: number, hi: number) => Number.isSafeInteger(x) && x >= lo && x <= hi;
  if (!int(m, 1, MAX_ROWS)) throw new RangeError(`m must be an integer in 1..${MAX_ROWS}, got ${m}`);
  if (!int(n, 1, 1 << 24)) throw new RangeError(`n must be an integer in 1..${1 << 24}, got ${n}`);
  if (!int(k, 1, 1 << 24)) throw new RangeError(`k must be an integer in 1..${1 << 24}, got ${k}`);
}

/**
 * The byte counts one call reads and writes, checked against the memory
 * given before any native call: a short array or buffer is a RangeError here,
 * never a write past its end.
 */
export function checkLinearMemory(op: Op, x: LinearMemory, w: LinearMemory, y: LinearMemory, m: number, n: number, k: number, dtype: Dtype = 'bf16'): void {
  if (op === 'moe') throw new TypeError('the moe op takes NativeRoute.moe (experts, routing), not linear()');
  checkDims(m, n, k);
  const need = { x: m * k * 2, w: weightBytes(dtype, op === 'gated' ? 2 * n : n, k), y: m * n * 2 };
  for (const [name, mem] of [['x', x], ['w', w], ['y', y]] as const) {
    const host = mem instanceof Uint16Array || (name === 'w' && mem instanceof Uint8Array);
    if (!(mem instanceof DeviceBuffer || host)) throw new TypeError(`${name} must be a Uint16Array${name === 'w' ? ', a Uint8Array' : ''} or a DeviceBuffer`);
    checkLive(name, mem);
    if (bytesOf(mem) < need[name]) throw new RangeError(`${name} holds ${bytesOf(mem)} bytes, the call needs ${need[name]} (m=${m}, n=${n}, k=${k}${op === 'gated' ? ', gated' : ''})`);
  }
}

/** One moe call's shape (kpick.h, KPICK_OP_MOE): m rows, E experts, top-k, N intermediate, K hidden. */
export interface MoeShape {
  m: number;
  experts: number;
  topk: number;
  n: number;
  k: number;
}

/** The memory of one moe call. */
export interface MoeMemory {
  x: LinearMemory;
  wGateUp: LinearMemory;
  wDown: LinearMemory;
  ids: IdsMemory;
  weights: WeightsMemory;
  y: LinearMemory;
}

/**
 * A moe call's sizes and memory, checked before any native call: each array or
 * buffer must be of its type and hold the bytes the call reads or writes.
 */
export function checkMoeMemory(mem: MoeMemory, s: MoeShape, dtype: Dtype = 'bf16'): void {
  checkDims(s.m, s.n, s.k);
  const int = (x: number, lo: number, hi: number) => Number.isSafeInteger(x) && x >= lo && x <= hi;
  if (!int(s.experts, 1, MAX_EXPERTS)) throw new RangeError(`experts must be an integer in 1..${MAX_EXPERTS}, got ${s.experts}`);
  if (!int(s.topk, 1, Math.min(MAX_TOPK, s.experts))) throw new RangeError(`topk must be an integer in 1..${Math.min(MAX_TOPK, s.experts)}, got ${s.topk}`);
  const w = moeWeightBytes(dtype, s.experts, s.n, s.k);
  const need = { x: s.m * s.k * 2, wGateUp: w.gateUp, wDown: w.down, ids: s.m * s.topk * 4, weights: s.m * s.topk * 4, y: s.m * s.k * 2 };
  const types = { x: Uint16Array, wGateUp: Uint16Array, wDown: Uint16Array, ids: Int32Array, weights: Float32Array, y: Uint16Array } as const;
  for (const name of Object.keys(need) as (keyof MoeMemory)[]) {
    const m = mem[name];
    const weight = name === 'wGateUp' || name === 'wDown';
    // fp8 weights may come as bytes, as linear() takes them
    if (!(m instanceof DeviceBuffer || m instanceof types[name] || (weight && m instanceof Uint8Array))) {
      throw new TypeError(`${name} must be a ${types[name].name}${weight ? ', a Uint8Array' : ''} or a DeviceBuffer`);
    }
    checkLive(name, m);
    if (bytesOf(m) < need[name]) throw new RangeError(`${name} holds ${bytesOf(m)} bytes, the moe call needs ${need[name]} (m=${s.m}, experts=${s.experts}, topk=${s.topk}, n=${s.n}, k=${s.k})`);
  }
}

/** The C route of one loaded library: what an engine without Node calls. */
export class NativeRoute {
  constructor(private readonly kpick: Kpick) {}

  private call(name: BindingName, ...args: unknown[]): void {
    this.kpick.call(name, ...args);
  }

  /** Loads the table at file (null: none); say prints the verdict on stderr. */
  load(file: string | null, say = false): void {
    this.call('kpick_route_load', file, say ? 1 : 0);
  }

  verdict(): string {
    const buf = Buffer.alloc(16384);
    this.call('kpick_route_verdict', buf, buf.length);
    return buf.toString('utf8', 0, buf.indexOf(0));
  }

  status(): { used: boolean; kept: number; dropped: number } {
    const used = [0], kept = [0], dropped = [0];
    this.call('kpick_route_status', used, kept, dropped);
    return { used: used[0] === 1, kept: kept[0] ?? 0, dropped: dropped[0] ?? 0 };
  }

  /** The candidate id the route picks for one call. */
  lookup(op: Op, dtype: Dtype, n: number, k: number, m: number): number {
    const id = [-1];
    this.call('kpick_route_lookup', OP_CODES[op] ?? -1, DTYPE_CODES[dtype] ?? -1, n, k, m, id);
    return id[0] ?? -1;
  }

  /** The candidate id the route picks for one moe call. */
  lookupMoe(dtype: Dtype, experts: number, topk: number, n: number, k: number, m: number): number {
    const id = [-1];
    this.call('kpick_route_lookup_moe', DTYPE_CODES[dtype] ?? -1, experts, topk, n, k, m, id);
    return id[0] ?? -1;
  }

  /** The moe op through the route (kpick_moe), returning when y is complete. */
  moe(dtype: Dtype, mem: MoeMemory, s: MoeShape): void {
    checkMoeMemory(mem, s, dtype);
    const p = pointerOf;
    this.call('kpick_moe', DTYPE_CODES[dtype] ?? -1, p(mem.x), p(mem.wGateUp), p(mem.wDown), p(mem.ids), p(mem.weights), p(mem.y), s.m, s.experts, s.topk, s.n, s.k, null);
    if (mem.y instanceof DeviceBuffer) this.sync(mem.y);
  }

  /**
   * y = x . W^T (gated: silu(x.Wg^T) * (x.Wu^T)) through the route, returning
   * when y is complete. Host arrays serve the CPU backend; DeviceBuffers any.
   */
  linear(op: Op, dtype: Dtype, x: LinearMemory, w: LinearMemory, y: LinearMemory, m: number, n: number, k: number): void {
    checkLinearMemory(op, x, w, y, m, n, k, dtype);
    this.call('kpick_linear', OP_CODES[op] ?? -1, DTYPE_CODES[dtype] ?? -1, pointerOf(x), pointerOf(w), pointerOf(y), m, n, k, null);
    if (y instanceof DeviceBuffer) this.sync(y);
  }

  /** linear() as a decode step runs it: captured into a graph, launched `replays` times. */
  linearGraph(op: Op, dtype: Dtype, x: LinearMemory, w: LinearMemory, y: LinearMemory, m: number, n: number, k: number, replays = 1): void {
    checkLinearMemory(op, x, w, y, m, n, k, dtype);
    if (!(Number.isInteger(replays) && replays >= 1 && replays <= 1000)) throw new RangeError(`replays must be an integer in 1..1000, got ${replays}`);
    this.call('kpick_linear_graph', OP_CODES[op] ?? -1, DTYPE_CODES[dtype] ?? -1, pointerOf(x), pointerOf(w), pointerOf(y), m, n, k, replays);
  }

  /** `bytes` of memory kpick_linear takes on this backend; free() it. */
  alloc(bytes: number): DeviceBuffer {
    if (!(Number.isSafeInteger(bytes) && bytes > 0)) throw new RangeError(`bytes must be a positive integer, got ${bytes}`);
    const out: unknown[] = [null];
    this.call('kpick_buffer_alloc', bytes, out);
    const buf = new DeviceBuffer(out[0], bytes);
    liveBuffers.add(buf);
    return buf;
  }

  /** A buffer holding a copy of `data`. */
  allocFrom(data: Uint16Array | Uint8Array): DeviceBuffer {
    const buf = this.alloc(Math.max(2, data.byteLength));
    if (data.byteLength > 0) this.upload(buf, data);
    return buf;
  }

  free(buf: DeviceBuffer): void {
    liveBuffers.delete(buf);
    this.call('kpick_buffer_free', buf.ptr);
  }

  upload(buf: DeviceBuffer, data: Uint16Array | Uint8Array, offset = 0): void {
    // koffi passes an empty array as NULL, which the library would call a null src
    if (data.byteLength === 0) throw new RangeError('upload: data is empty (a copy is 1 byte or more)');
    this.call('kpick_buffer_upload', buf.ptr, offset, data, data.byteLength);
  }

  /** The buffer's first out.length elements (from byte offset) into out. */
  download(buf: DeviceBuffer, out: Uint16Array, offset = 0): Uint16Array {
    if (out.byteLength === 0) throw new RangeError('download: out is empty (a copy is 1 byte or more)');
    this.call('kpick_buffer_download', buf.ptr, offset, out, out.byteLength);
    return out;
  }

  /** Waits for the work before a read of buf: a one-element copy is ordered after it. */
  private sync(buf: DeviceBuffer): void {
    this.download(buf, new Uint16Array(1));
  }
}
