// The binding of hip-lib/include/kpick.h, declared once: its C types (field
// order and sizes exactly the header's: koffi lays structs out by C rules) and
// every entry point as one table. lib/ffi.ts loads a library through it and
// refuses one whose ABI facts (ABI_FACTS) differ; lib/model-ffi.ts and
// NativeRoute call through the same loaded table.
import koffi, { type TypeObject } from 'koffi';
import { MAX_EXPERTS, MAX_POSITIONS, MAX_ROWS, MAX_TOPK } from './schema.ts';

/** enum kpick_status */
export const Status = {
  OK: 0,
  E_ARG: 1,
  E_NOMEM: 2,
  E_UNSUPPORTED: 3,
  E_DEVICE: 4,
  E_STATE: 5,
} as const;

export const STATUS_NAMES: Record<number, string> = {
  0: 'ok',
  1: 'bad argument',
  2: 'out of memory',
  3: 'unsupported',
  4: 'device error',
  5: 'not initialised',
};

/** enum kpick_op, enum kpick_dtype, enum kpick_buffer, enum kpick_routing */
export const OP_CODES = { linear: 0, gated: 1, moe: 2 } as const;
export const DTYPE_CODES = { bf16: 0, fp16: 1, fp8: 2 } as const;
/** enum kpick_numeric, in code order */
export const NUMERIC_NAMES = ['w16a16', 'w8a16', 'w8a8'] as const;
export const BUFFER_CODES = { y: 0, x: 1, w: 2, expert_ids: 3, expert_weights: 4 } as const;
export const ROUTING_CODES = { uniform: 0, skewed: 1 } as const;
export type Routing = keyof typeof ROUTING_CODES;

/** KPICK_ABI_VERSION this binding was written against */
export const ABI_VERSION = 3;

export const KpickInfo = koffi.struct('kpick_info', {
  backend: koffi.array('char', 16),
  arch: koffi.array('char', 64),
  device: koffi.array('char', 128),
  runtime: koffi.array('char', 64),
  blas: koffi.array('char', 64),
  compiler: koffi.array('char', 256),
  space: koffi.array('char', 48),
  abi: 'int32_t',
  warp: 'int32_t',
  units: 'int32_t',
  pdl: 'int32_t',
  mem_free: 'int64_t',
  mem_total: 'int64_t',
  llc_bytes: 'int64_t',
});

export const KpickCandidate = koffi.struct('kpick_candidate', {
  name: koffi.array('char', 48),
  family: koffi.array('char', 16),
  param_names: koffi.array('char', 32),
  params: koffi.array('int32_t', 3, 'Array'),
  op: 'int32_t',
  nodes: 'int32_t',
  bitwise_with: 'int32_t',
  is_default: 'int32_t',
  rows_min: 'int32_t',
  rows_max: 'int32_t',
  stack_bound: 'int32_t',
  pdl: 'int32_t',
  available: 'int32_t',
  numeric: 'int32_t',
});

export const KpickModelDims = koffi.struct('kpick_model_dims', {
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
  experts: 'int32_t',
  topk: 'int32_t',
});

/** Opaque handles (kpick_problem *, kpick_model *): addresses JS never reads. */
export const ProblemHandle = koffi.pointer('kpick_problem', koffi.opaque());
export const ModelHandle = koffi.pointer('kpick_model', koffi.opaque());

/**
 * What kpick_abi_value must report for this binding to pass anything in: the
 * version, the size of every struct the table below passes, and the limits
 * lib/schema.ts mirrors. A library that differs in any is refused at load.
 */
export const ABI_FACTS: Readonly<Record<string, number>> = {
  version: ABI_VERSION,
  kpick_info: koffi.sizeof(KpickInfo),
  kpick_candidate: koffi.sizeof(KpickCandidate),
  kpick_model_dims: koffi.sizeof(KpickModelDims),
  KPICK_MAX_ROWS: MAX_ROWS,
  KPICK_MAX_POSITIONS: MAX_POSITIONS,
  KPICK_MAX_EXPERTS: MAX_EXPERTS,
  KPICK_MAX_TOPK: MAX_TOPK,
};

/** The raw struct values as koffi decodes them. */
export interface RawInfo {
  backend: string;
  arch: string;
  device: string;
  runtime: string;
  blas: string;
  compiler: string;
  space: string;
  abi: number;
  warp: number;
  units: number;
  pdl: number;
  mem_free: number | bigint;
  mem_total: number | bigint;
  llc_bytes: number | bigint;
}

export interface RawCandidate {
  name: string;
  family: string;
  param_names: string;
  params: number[];
  op: number;
  nodes: number;
  bitwise_with: number;
  is_default: number;
  rows_min: number;
  rows_max: number;
  stack_bound: number;
  pdl: number;
  available: number;
  numeric: number;
}

const out = (type: string | TypeObject) => koffi.out(koffi.pointer(type));
const i32 = 'int32_t';
const i64 = 'int64_t';
const linearArgs = [i32, i32, 'void *', 'void *', 'void *', i32, i64, i64];
const dimsIn = koffi.pointer(KpickModelDims);

/**
 * Every entry point of kpick.h: name -> [result, argument types], in the
 * header's order. One table, so a change of kpick.h is a change of one line here.
 */
export const BINDINGS = {
  kpick_init: ['int', []],
  kpick_abi_value: ['int', ['const char *', out(i64)]],
  kpick_last_error: ['const char *', []],
  kpick_get_info: ['int', [out(KpickInfo)]],
  kpick_candidate_count: ['int', [out(i32)]],
  kpick_candidate_describe: ['int', [i32, out(KpickCandidate)]],
  kpick_candidate_find: ['int', ['const char *', out(i32)]],
  kpick_problem_create: ['int', [i32, i32, i64, i64, i32, i32, 'uint64_t', out(ProblemHandle)]],
  kpick_problem_create_moe: ['int', [i32, i32, i32, i64, i64, i32, i32, i32, 'uint64_t', out(ProblemHandle)]],
  kpick_problem_free: ['int', [ProblemHandle]],
  kpick_problem_copies: ['int', [ProblemHandle, out(i32)]],
  kpick_set_rows: ['int', [ProblemHandle, i32]],
  kpick_supports: ['int', [ProblemHandle, i32, out(i32)]],
  kpick_poison: ['int', [ProblemHandle]],
  kpick_run: ['int', [ProblemHandle, i32, i32]],
  kpick_time: ['int', [ProblemHandle, i32, i32, 'double *']],
  kpick_time_floor: ['int', [ProblemHandle, i32, 'double *']],
  kpick_count_nodes: ['int', [ProblemHandle, i32, out(i32)]],
  kpick_download: ['int', [ProblemHandle, i32, 'void *', i64]],
  kpick_reference: ['int', [ProblemHandle, 'const int64_t *', i32, 'double *', i64]],
  // fp8 conversions
  kpick_e4m3_encode: ['int', ['const float *', 'uint8_t *', i64]],
  kpick_e4m3_decode: ['int', ['const uint8_t *', 'float *', i64]],
  kpick_fp8_pack: ['int', ['const uint16_t *', i64, i64, 'void *', i64]],
  // the route
  kpick_route_load: ['int', ['const char *', i32]],
  kpick_route_verdict: ['int', ['char *', i32]],
  kpick_route_status: ['int', [out(i32), out(i32), out(i32)]],
  kpick_route_lookup: ['int', [i32, i32, i64, i64, i32, out(i32)]],
  kpick_route_lookup_moe: ['int', [i32, i32, i32, i64, i64, i32, out(i32)]],
  kpick_linear: ['int', [...linearArgs, 'void *']],
  kpick_moe: ['int', [i32, 'void *', 'void *', 'void *', 'void *', 'void *', 'void *', i32, i32, i32, i64, i64, 'void *']],
  kpick_linear_graph: ['int', [...linearArgs, i32]],
  // caller buffers
  kpick_buffer_alloc: ['int', [i64, out('void *')]],
  kpick_buffer_free: ['int', ['void *']],
  kpick_buffer_upload: ['int', ['void *', i64, 'void *', i64]],
  kpick_buffer_download: ['int', ['void *', i64, 'void *', i64]],
  // the decode model
  kpick_model_bytes: ['int', [dimsIn, out(i64)]],
  kpick_model_create: ['int', [dimsIn, 'uint64_t', out(ModelHandle)]],
  kpick_model_free: ['int', [ModelHandle]],
  kpick_model_reset: ['int', [ModelHandle, 'uint64_t']],
  kpick_model_step: ['int', [ModelHandle, 'const int32_t *', i32, 'int32_t *']],
  kpick_model_time: ['int', [ModelHandle, 'const int32_t *', i32, i32, 'double *']],
  kpick_model_check: ['int', [ModelHandle, 'const int32_t *', i32, out('double'), out('double')]],
  kpick_decode_selfcheck: ['int', [i32, i32, 'uint64_t', i32, out('double'), out('double')]],
} as const satisfies Record<string, readonly [string, readonly unknown[]]>;

export type BindingName = keyof typeof BINDINGS;
