// The C types of hip-lib/include/kpick.h, named once for koffi. Field order and
// sizes must match the header exactly: koffi lays structs out by C rules.
import koffi from 'koffi';

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

/** enum kpick_op, enum kpick_dtype, enum kpick_buffer */
export const OP_CODES = { linear: 0, gated: 1 } as const;
export const DTYPE_CODES = { bf16: 0, fp16: 1 } as const;
export const BUFFER_CODES = { y: 0, x: 1, w: 2 } as const;

/** KPICK_ABI_VERSION this binding was written against */
export const ABI_VERSION = 1;

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
});

/** kpick_problem *: an opaque handle, a BigInt address on the JS side */
export const ProblemHandle = koffi.pointer('kpick_problem', koffi.opaque());

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
}

/**
 * Every entry point: name -> [result, argument types]. One table, so a change
 * of kpick.h is a change of one line here.
 */
export const BINDINGS = {
  kpick_init: ['int', []],
  kpick_abi: ['int', [koffi.out(koffi.pointer('int32_t')), koffi.out(koffi.pointer('int32_t')), koffi.out(koffi.pointer('int32_t'))]],
  kpick_last_error: ['const char *', []],
  kpick_get_info: ['int', [koffi.out(koffi.pointer(KpickInfo))]],
  kpick_candidate_count: ['int', [koffi.out(koffi.pointer('int32_t'))]],
  kpick_candidate_describe: ['int', ['int32_t', koffi.out(koffi.pointer(KpickCandidate))]],
  kpick_candidate_find: ['int', ['const char *', koffi.out(koffi.pointer('int32_t'))]],
  kpick_problem_create: [
    'int',
    ['int32_t', 'int32_t', 'int64_t', 'int64_t', 'int32_t', 'int32_t', 'uint64_t', koffi.out(koffi.pointer(ProblemHandle))],
  ],
  kpick_problem_free: ['int', [ProblemHandle]],
  kpick_problem_copies: ['int', [ProblemHandle, koffi.out(koffi.pointer('int32_t'))]],
  kpick_set_rows: ['int', [ProblemHandle, 'int32_t']],
  kpick_supports: ['int', [ProblemHandle, 'int32_t', koffi.out(koffi.pointer('int32_t'))]],
  kpick_poison: ['int', [ProblemHandle]],
  kpick_run: ['int', [ProblemHandle, 'int32_t', 'int32_t']],
  kpick_time: ['int', [ProblemHandle, 'int32_t', 'int32_t', 'double *']],
  kpick_time_floor: ['int', [ProblemHandle, 'int32_t', 'double *']],
  kpick_count_nodes: ['int', [ProblemHandle, 'int32_t', koffi.out(koffi.pointer('int32_t'))]],
  kpick_download: ['int', [ProblemHandle, 'int32_t', 'void *', 'int64_t']],
  kpick_reference: ['int', [ProblemHandle, 'const int64_t *', 'int32_t', 'double *', 'int64_t']],
} as const;

export type BindingName = keyof typeof BINDINGS;
