// Every data format kpick reads or writes, as valibot schemas: parse at the
// edge (store lines, table files), trust inside.
import * as v from 'valibot';

export const STORE_VERSION = 1;
export const TABLE_FORMAT = 1;
export const BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128] as const;
/** Activation rows of one call, 1..MAX_ROWS: the largest bucket (KPICK_MAX_ROWS of kpick.h, checked at load). */
export const MAX_ROWS: number = Math.max(...BUCKETS);
/** KV positions of a decode model, context + new tokens (KPICK_MAX_POSITIONS, checked at load). */
export const MAX_POSITIONS = 8192;
/** Experts of a moe call, 1..MAX_EXPERTS, and its top-k, 1..MAX_TOPK (KPICK_MAX_EXPERTS, KPICK_MAX_TOPK, checked at load). */
export const MAX_EXPERTS = 1024;
export const MAX_TOPK = 32;
export const OPS = ['linear', 'gated', 'moe'] as const;
export const DTYPES = ['bf16', 'fp16', 'fp8'] as const;
/**
 * How a candidate computes (kpick.h enum kpick_numeric): w16a16 takes bf16 and
 * fp16; w8a16 (fp8 weights dequantized, bf16 x) and w8a8 (x quantized per row
 * to e4m3 first) take fp8 alone. Each class has its own parity bar (lib/parity.ts),
 * the moe op's fp8 candidates included.
 */
export const NUMERICS = ['w16a16', 'w8a16', 'w8a8'] as const;

const Name = v.pipe(v.string(), v.minLength(1), v.maxLength(200));
const Dim = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1 << 24));
const Micros = v.pipe(v.number(), v.finite(), v.minValue(0));
/** The identity's toolchain line: kpick_info.compiler is char[256] (kpick.h) and a
 * .route header value holds 255 bytes (route.h KP_ROUTE_MAX_VALUE); nvcc, the
 * wgmma pass's flags and the host compiler's vendor build fill over 200. */
export const COMPILER_MAX = 255;

export const Op = v.pipe(v.picklist(OPS), v.description('linear: y = x.W^T; gated: silu(x.Wg^T) * (x.Wu^T); moe: routed experts (kpick.h)'));
export const Dtype = v.pipe(v.picklist(DTYPES), v.description('element type of x, W and y; fp8: W in e4m3 with a scale per row, x and y bf16'));
export const Numeric = v.pipe(v.picklist(NUMERICS), v.description("the candidate's numeric class"));
export const Bucket = v.pipe(v.picklist(BUCKETS), v.description('rows bucket M'));
export type Op = v.InferOutput<typeof Op>;
export type Dtype = v.InferOutput<typeof Dtype>;
export type Numeric = v.InferOutput<typeof Numeric>;

/**
 * Does a candidate of this numeric class compute problems of dtype? The fp8
 * classes take fp8 alone, w16a16 (also: no class given) bf16 and fp16
 * (space.h kp_row_takes).
 */
export function takesDtype(c: { numeric?: Numeric }, dtype: Dtype): boolean {
  return ((c.numeric ?? 'w16a16') !== 'w16a16') === (dtype === 'fp8');
}

/** The 16-bit type of x and y: the dtype, or bf16 for fp8. */
export function activationDtype(dtype: Dtype): 'bf16' | 'fp16' {
  return dtype === 'fp16' ? 'fp16' : 'bf16';
}

/** Bytes of one weight of rows x k: 2 an element, or fp8's codes and scales (KPICK_FP8_W_BYTES of kpick.h). */
export function weightBytes(dtype: Dtype, rows: number, k: number): number {
  return dtype === 'fp8' ? Math.ceil((rows * k) / 16) * 16 + 4 * rows : 2 * rows * k;
}
/** Bytes of a moe op's W_gate_up ([E * 2N, K]) and W_down ([E * K, N]): one weight each (moe.h). */
export function moeWeightBytes(dtype: Dtype, experts: number, n: number, k: number): { gateUp: number; down: number } {
  return { gateUp: weightBytes(dtype, experts * 2 * n, k), down: weightBytes(dtype, experts * k, n) };
}
/** a rows bucket: 1, 2, 4 ... MAX_ROWS */
export type Bucket = v.InferOutput<typeof Bucket>;

/** The fewest rows a bucket's entry routes: bucket 1 takes m = 1, bucket b > 1 takes m = b/2 + 1 .. b. */
export function bucketLow(bucket: Bucket): number {
  return bucket === 1 ? 1 : bucket / 2 + 1;
}

/** E and top-k of a moe key: given on op moe (both), absent on linear and gated. */
const Experts = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_EXPERTS), v.description('moe: experts E of the layer')));
const Topk = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_TOPK), v.description('moe: experts per row (top-k)')));
/** The rule every keyed format shares: experts and topk on moe only, topk <= experts. */
const moeKeyOk = (o: { op: string; experts?: number; topk?: number }) =>
  o.op === 'moe' ? o.experts !== undefined && o.topk !== undefined && o.topk <= o.experts : o.experts === undefined && o.topk === undefined;
const MOE_KEY = 'experts and topk are given on op moe (topk <= experts) and on no other op';
/** The shape of a keyed format (store record, table entry, fleet entry), its rows bucket aside: one list, spread into each. */
const SHAPE_KEY = { op: Op, dtype: Dtype, n: Dim, k: Dim, experts: Experts, topk: Topk };

export const Identity = v.strictObject({
  backend: v.pipe(Name, v.description('cpu | cuda | hip')),
  arch: v.pipe(Name, v.description('x86_64, sm_90, gfx942 ...')),
  device: v.pipe(Name, v.description('device or CPU name')),
  runtime: v.pipe(Name, v.description('runtime library version actually loaded')),
  blas: v.pipe(Name, v.description('BLAS library version actually loaded, or none')),
  compiler: v.pipe(v.string(), v.minLength(1), v.maxLength(COMPILER_MAX), v.description('toolchain and flags')),
  space: v.pipe(Name, v.description('token of space.def and the kernel sources')),
});
export type Identity = v.InferOutput<typeof Identity>;

export const Parity = v.strictObject({
  status: v.pipe(v.picklist(['pass', 'fail', 'skipped']), v.description('fp64 / bitwise check result')),
  rel_err: v.pipe(v.nullable(v.pipe(v.number(), v.minValue(0))), v.description('relative Frobenius error; null when not computed or NaN')),
  bitwise: v.pipe(v.nullable(v.boolean()), v.description('byte-identical to its class head; null when it claims no class')),
  reason: v.pipe(v.string(), v.description('why it failed, empty when it passed')),
});
export type Parity = v.InferOutput<typeof Parity>;

const Params = v.record(v.string(), v.number());

/** One line of a store file: one candidate (or the read floor) on one problem. */
export const StoreRecord = v.pipe(v.strictObject({
  v: v.literal(STORE_VERSION),
  kind: v.pipe(v.picklist(['candidate', 'floor', 'parity']), v.description('a candidate timing, the read floor, or a parity check alone (no samples; scripts/parity.ts --store)')),
  identity: Identity,
  ...SHAPE_KEY,
  rows: Bucket,
  candidate: v.pipe(Name, v.description('space name; "floor" for the read floor')),
  params: Params,
  nodes_declared: v.pipe(v.number(), v.integer(), v.minValue(0)),
  nodes: v.pipe(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(0))), v.description('measured by capturing one call')),
  is_default: v.boolean(),
  stack_bound: v.boolean(),
  pdl: v.pipe(v.boolean(), v.description("launched with programmatic dependent launch: the library's KF_PDL flag (space.def), as the describer reports it")),
  numeric: v.optional(v.pipe(Numeric, v.description('numeric class (KF_W8A* in space.def); absent in records written before fp8: w16a16'))),
  status: v.pipe(v.picklist(['ok', 'unsupported', 'failed']), v.description('failed candidates are kept with their reason')),
  reason: v.string(),
  samples_us: v.array(Micros),
  copies: v.pipe(v.number(), v.integer(), v.minValue(0)),
  placements: v.optional(v.pipe(v.number(), v.integer(), v.minValue(2), v.description('buffer placements the samples were spread over (problems of one seed allocated side by side); absent: one'))),
  routing: v.optional(v.pipe(v.picklist(['skewed']), v.description('moe: timed under skewed routing (rows share a hot set of experts); absent: uniform, as every moe record before this field'))),
  parity: Parity,
  seed: v.pipe(v.number(), v.integer(), v.minValue(0)),
  at: v.pipe(v.string(), v.isoTimestamp()),
}), v.check((o) => moeKeyOk(o), MOE_KEY));
export type StoreRecord = v.InferOutput<typeof StoreRecord>;

/** enum kpick_linear_kind: the linears of a decode step, in the order of a candidate list (a dense model runs gate_up and down, a moe model router and experts) */
export const LINEAR_KINDS = ['qkv', 'o', 'gate_up', 'down', 'lm_head', 'router', 'experts'] as const;

/**
 * One line of a store's steps/ folder (scripts/step-verify.ts): a table pick
 * timed in the whole decode step. The step runs the table's route at c rows
 * twice over, once as it is and once with this linear on its class default,
 * in interleaved rounds; each round adds the median step of each. promote
 * (lib/step-verdict.ts) keeps the default where the step with it is faster.
 */
export const StepRecord = v.pipe(v.strictObject({
  v: v.literal(STORE_VERSION),
  kind: v.literal('step'),
  identity: Identity,
  model: v.pipe(Name, v.description('the preset whose step was timed')),
  layers: v.pipe(v.number(), v.integer(), v.minValue(1), v.description('decoder layers built')),
  weights: v.pipe(Dtype, v.description("the model's --dtype")),
  c: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_ROWS), v.description('rows a step (concurrency)')),
  linear: v.pipe(v.picklist(LINEAR_KINDS), v.description('which linear of the step')),
  ...SHAPE_KEY,
  rows: Bucket,
  pick: v.pipe(Name, v.description("the table's choice for this linear at c; of an alternative record, the runner-up timed in its place")),
  default: v.pipe(Name, v.description('its class default')),
  alternative: v.optional(v.pipe(v.boolean(), v.description("true: a runner-up of the sweep timed in the linear's place, where the table's choice made the step slower or the table kept the default (step-verify --alternatives)"))),
  route: v.pipe(v.record(v.string(), Name), v.description("the table route's candidate of every linear of the step at c")),
  steps: v.pipe(v.number(), v.integer(), v.minValue(1), v.description('decode steps a timing; a sample is their median')),
  pick_us: v.pipe(v.array(Micros), v.minLength(1), v.description('median step us a round, the route as it is (an alternative record: with this linear on the runner-up)')),
  default_us: v.pipe(v.array(Micros), v.minLength(1), v.description('median step us a round, this linear on the default')),
  at: v.pipe(v.string(), v.isoTimestamp()),
}), v.check((o) => moeKeyOk(o), MOE_KEY), v.check((o) => o.pick !== o.default, 'a step record compares a pick with a different default'));
export type StepRecord = v.InferOutput<typeof StepRecord>;

export const CandidateResult = v.strictObject({
  median_us: v.nullable(Micros),
  p25_us: v.nullable(Micros),
  p75_us: v.nullable(Micros),
  samples: v.pipe(v.number(), v.integer(), v.minValue(0)),
  nodes: v.pipe(v.number(), v.integer(), v.minValue(0)),
  params: Params,
  parity: v.picklist(['pass', 'fail', 'skipped']),
  rel_err: v.nullable(v.pipe(v.number(), v.minValue(0))),
  stack_bound: v.boolean(),
  status: v.picklist(['ok', 'unsupported', 'failed']),
  numeric: v.optional(Numeric),
});
export type CandidateResult = v.InferOutput<typeof CandidateResult>;

export const TableEntry = v.pipe(v.strictObject({
  ...SHAPE_KEY,
  bucket: Bucket,
  default: v.pipe(Name, v.description('the class default candidate of this op')),
  choice: v.pipe(Name, v.description('the candidate the route uses; edit to move a shape')),
  reason: v.pipe(v.string(), v.description('why it was picked or kept')),
  floor_us: v.pipe(v.nullable(Micros), v.description('per-shape read floor, same rotation')),
  candidates: v.record(Name, CandidateResult),
}), v.check((o) => moeKeyOk(o), MOE_KEY));
export type TableEntry = v.InferOutput<typeof TableEntry>;

export const Table = v.strictObject({
  format: v.pipe(v.number(), v.integer(), v.description('table format version')),
  identity: Identity,
  created: v.pipe(v.string(), v.isoTimestamp()),
  gate: v.strictObject({
    min_gain: v.pipe(v.number(), v.minValue(0), v.maxValue(1)),
    pdl_rows: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description('largest rows bucket where a .pdl candidate may be picked'))),
  }),
  entries: v.array(TableEntry),
});
export type Table = v.InferOutput<typeof Table>;

/** One probed table entry of a fleet check (scripts/check.ts --quick). */
export const FleetEntry = v.pipe(v.strictObject({
  ...SHAPE_KEY,
  bucket: Bucket,
  choice: Name,
  recorded_us: v.pipe(v.nullable(Micros), v.description("the table's median of the choice")),
  measured_us: v.pipe(v.nullable(Micros), v.description('the median measured now; null when it could not run')),
  ratio: v.pipe(v.nullable(v.pipe(v.number(), v.finite(), v.minValue(0))), v.description('measured / recorded')),
  parity: v.picklist(['pass', 'fail']),
  reason: v.pipe(v.string(), v.description('why parity failed or the choice could not run; empty otherwise')),
}), v.check((o) => moeKeyOk(o), MOE_KEY));
export type FleetEntry = v.InferOutput<typeof FleetEntry>;

/** One node's fleet check: one JSON line, pooled across nodes by scripts/fleet.ts. */
export const FleetSummary = v.strictObject({
  kind: v.literal('fleet-check'),
  node: v.pipe(Name, v.description('--node, else the host name (+ /gpu<visible> under CUDA_ or HIP_VISIBLE_DEVICES)')),
  host: Name,
  device: v.pipe(Name, v.description("the library's device name (no index or UUID)")),
  visible: v.pipe(v.nullable(v.string()), v.description('CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES, as set')),
  identity: Identity,
  table: v.string(),
  entries: v.array(FleetEntry),
  geomean_ratio: v.nullable(v.pipe(v.number(), v.finite(), v.minValue(0))),
  worst_ratio: v.nullable(v.pipe(v.number(), v.finite(), v.minValue(0))),
  bounds: v.strictObject({ geomean: v.number(), entry: v.number() }),
  verdict: v.pipe(v.picklist(['pass', 'flagged', 'refused']), v.description('refused: the table would not load here')),
  flags: v.pipe(v.array(v.string()), v.description('one line per reason the node is flagged')),
  at: v.pipe(v.string(), v.isoTimestamp()),
});
export type FleetSummary = v.InferOutput<typeof FleetSummary>;

/** valibot issues as one line: `path: message; path: message`. */
export function issuesLine(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .slice(0, 3)
    .map((i) => `${v.getDotPath(i) ?? '(root)'}: ${i.message}`)
    .join('; ');
}
