// serve-bench's engine: a decode step of a real model's shapes with random
// weights (lib/model-ffi.ts), run on two routes over the same weights and
// prompts -- the defaults (no table) and the table -- at several concurrencies.
//   memory    the model's bytes (from the library) against free memory, and
//             what would fit when it does not
//   arms      each route's candidate per linear kind at a concurrency
//   timing    lanes in opposite orders (default then table, table then
//             default), several timed runs of many steps each
//   summary   median tok/s, step p50 and p90, stalled runs counted (kept)
//   identity  both routes decode the same sequences greedily; the first step
//             where tokens differ, and whether the routes' candidates explain it
import type { Candidate, Kpick } from './ffi.ts';
import { kindDtype, LINEAR_KINDS, type LinearKind, type Model, type ModelDims, type NativeModels } from './model-ffi.ts';
import { decodeLinears, type ModelPreset } from './models.ts';
import type { Route } from './route.ts';
import { MAX_ROWS, type Dtype } from './schema.ts';
import { median, quantile } from './stats.ts';

export const ARMS = ['default', 'table'] as const;
export type ArmName = (typeof ARMS)[number];

/** A run whose median step is over this many times its lane's median is stalled. */
export const STALL_FACTOR = 1.5;
/** The ratio below which the table route is reported as slower than the default. */
export const RATIO_FLOOR = 0.98;

/**
 * What the presets of lib/models.ts leave out and a step needs: whether
 * lm_head shares the embedding table (tie_word_embeddings) and the rotary base
 * (rope_theta), from the same published config.json files.
 */
const EXTRAS: Record<string, { tied: boolean; ropeTheta: number }> = {
  'Llama-3.1-8B': { tied: false, ropeTheta: 500000 },
  'Qwen3-8B': { tied: false, ropeTheta: 1000000 },
  'Qwen3-4B': { tied: true, ropeTheta: 1000000 },
  'Qwen3-1.7B': { tied: true, ropeTheta: 1000000 },
  'Qwen3-0.6B': { tied: true, ropeTheta: 1000000 },
  tiny: { tied: false, ropeTheta: 10000 },
  'Qwen3-30B-A3B': { tied: false, ropeTheta: 1000000 },
  'Mixtral-8x7B-v0.1': { tied: false, ropeTheta: 1000000 },
  'tiny-moe': { tied: false, ropeTheta: 10000 },
};
/** A preset without extras: untied (the larger memory estimate). */
const DEFAULT_EXTRAS = { tied: false, ropeTheta: 1000000 };

export interface StepShape {
  layers: number;
  maxBatch: number;
  context: number;
  maxNew: number;
  dtype: Dtype;
}

export function dimsOf(model: ModelPreset, shape: StepShape): ModelDims {
  const extras = EXTRAS[model.name] ?? DEFAULT_EXTRAS;
  return {
    dtype: shape.dtype,
    hidden: model.hidden,
    intermediate: model.intermediate,
    heads: model.heads,
    kvHeads: model.kvHeads,
    headDim: model.headDim,
    vocab: model.vocab,
    layers: shape.layers,
    tied: extras.tied,
    maxBatch: shape.maxBatch,
    context: shape.context,
    maxNew: shape.maxNew,
    rmsEps: model.rmsEps,
    ropeTheta: extras.ropeTheta,
    experts: model.moe?.experts ?? 0,
    topk: model.moe?.topk ?? 0,
  };
}

/** "1,4,8" -> concurrencies, each 1..MAX_ROWS, ascending, no repeats. */
export function parseConcurrency(text: string | number): number[] {
  const items = String(text)
    .split(',')
    .map((s) => s.trim());
  if (items.some((s) => s === '')) throw new Error(`--c must be a comma-separated list of concurrencies, got '${text}'`);
  const values = items.map((item) => {
    const c = /^\d+$/.test(item) ? Number(item) : NaN;
    if (!(c >= 1 && c <= MAX_ROWS)) throw new Error(`--c '${item}' is not an integer in 1..${MAX_ROWS}`);
    return c;
  });
  return [...new Set(values)].sort((a, b) => a - b);
}

// ---- memory ------------------------------------------------------------------

const GIB = 1024 ** 3;
/** bytes as GiB, or MiB below one GiB */
export const gib = (bytes: number): string => (bytes >= GIB ? `${(bytes / GIB).toFixed(2)} GiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`);

export type Fit = { fits: true; bytes: number } | { fits: false; bytes: number; message: string };

/**
 * Whether dims fit in `budget` bytes; when not, one line naming what would:
 * the most layers at this batch (--layers), or the largest batch with every
 * layer (--c). `budgetNote` says where the budget comes from.
 */
export function checkFit(native: NativeModels, model: ModelPreset, dims: ModelDims, budget: number, budgetNote: string): Fit {
  const bytes = native.bytes(dims);
  if (bytes <= budget) return { fits: true, bytes };
  let layers = 0;
  for (let l = dims.layers - 1; l >= 1 && layers === 0; l--) if (native.bytes({ ...dims, layers: l }) <= budget) layers = l;
  let batch = 0;
  for (let b = dims.maxBatch - 1; b >= 1 && batch === 0; b--) if (native.bytes({ ...dims, maxBatch: b }) <= budget) batch = b;
  const options = [layers > 0 ? `--layers ${layers}` : null, batch > 0 ? `--c up to ${batch} (all ${dims.layers} layers)` : null].filter((x) => x !== null);
  const advice = options.length > 0 ? `would fit: ${options.join(', or ')}` : 'nothing would fit: the embedding and lm_head alone are too large';
  const what = `${model.name} (${dims.layers} layers, batch ${dims.maxBatch}, ${dims.context + dims.maxNew} positions)`;
  return { fits: false, bytes, message: `${what} needs ${gib(bytes)}, ${gib(budget)} ${budgetNote}; ${advice}` };
}

// ---- arms --------------------------------------------------------------------

export interface ArmRoute {
  /** candidate name per linear kind the model has (a dense model: no router or experts; a moe model: no gate_up or down) */
  names: Partial<Record<LinearKind, string>>;
  /** candidate ids in LINEAR_KINDS order, what the library takes */
  ids: Int32Array;
}

/** The candidate of each linear of `model` that `route` picks at c rows. */
export function routeArm(route: Route, kpick: Kpick, model: ModelPreset, dtype: Dtype, c: number): ArmRoute {
  const linears = decodeLinears(model);
  const names: Partial<Record<LinearKind, string>> = {};
  const ids = new Int32Array(LINEAR_KINDS.length);
  LINEAR_KINDS.forEach((kind, i) => {
    const linear = linears.find((l) => l.name === kind);
    // a kind the model lacks (a dense model's router, a moe model's gate_up): -1, which the library ignores there
    if (!linear) {
      ids[i] = -1;
      return;
    }
    const name = route.lookup(linear.op, kindDtype(dtype, kind), linear.n, linear.k, c, linear.experts, linear.topk);
    if (name === null) throw new Error(`this build has no default candidate for the ${linear.op} op`);
    names[kind] = name;
    ids[i] = kpick.candidate(name).id;
  });
  return { names, ids };
}

export interface Difference {
  kind: LinearKind;
  default: string;
  table: string;
  /** the table's candidate claims byte-identical output to the default's (same bitwise class) */
  bitwise: boolean;
}

/** The linear kinds on which the two routes run different candidates. */
export function differences(a: ArmRoute, b: ArmRoute, space: readonly Candidate[]): Difference[] {
  const byName = new Map(space.map((c) => [c.name, c]));
  // both arms route one model: a kind it lacks is absent from both
  return LINEAR_KINDS.filter((k) => a.names[k] !== b.names[k]).map((kind) => {
    const def = a.names[kind] ?? '-';
    const table = b.names[kind] ?? '-';
    const d = byName.get(def);
    const t = byName.get(table);
    const bitwise = d !== undefined && t !== undefined && t.bitwiseWith !== null && t.bitwiseWith === d.bitwiseWith;
    return { kind, default: def, table, bitwise };
  });
}

// ---- timing ------------------------------------------------------------------

export interface TimedRun {
  /** 0: default then table; 1: table then default */
  lane: number;
  run: number;
  arm: ArmName;
  us: Float64Array;
}

export const LANE_ORDERS: readonly (readonly ArmName[])[] = [
  ['default', 'table'],
  ['table', 'default'],
];

/** Every lane, run and arm, in lane order; onRun is told before each. */
export function timeLanes(
  model: Model,
  ids: Record<ArmName, Int32Array>,
  c: number,
  steps: number,
  runs: number,
  onRun: (done: number, total: number, label: string) => void = () => {},
): TimedRun[] {
  const out: TimedRun[] = [];
  const total = LANE_ORDERS.length * runs * ARMS.length;
  LANE_ORDERS.forEach((order, lane) => {
    for (let run = 0; run < runs; run++) {
      for (const arm of order) {
        onRun(out.length, total, `c=${c} lane ${order.join('-')} run ${run + 1}/${runs} ${arm}`);
        out.push({ lane, run, arm, us: model.time(ids[arm], c, steps) });
      }
    }
  });
  return out;
}

export interface ArmSummary {
  /** median over runs of c * steps / run time */
  tokPerS: number;
  stepP50Us: number;
  stepP90Us: number;
  runs: number;
  /** runs whose median step is over STALL_FACTOR x their lane's median step (kept in every figure) */
  stalled: number;
  /** "lane-run" of each stalled run */
  stalledRuns: string[];
}

export function summarizeArm(timed: readonly TimedRun[], arm: ArmName, c: number): ArmSummary {
  const mine = timed.filter((t) => t.arm === arm);
  if (mine.length === 0) throw new Error(`no timed runs of the ${arm} arm`);
  const steps = mine.flatMap((t) => Array.from(t.us));
  const stalledRuns: string[] = [];
  for (const lane of new Set(mine.map((t) => t.lane))) {
    const inLane = mine.filter((t) => t.lane === lane);
    const laneMedian = median(inLane.flatMap((t) => Array.from(t.us)));
    for (const t of inLane) if (median(t.us) > STALL_FACTOR * laneMedian) stalledRuns.push(`${lane + 1}-${t.run + 1}`);
  }
  const tok = mine.map((t) => (c * t.us.length * 1e6) / t.us.reduce((s, x) => s + x, 0));
  return {
    tokPerS: median(tok),
    stepP50Us: quantile(steps, 0.5),
    stepP90Us: quantile(steps, 0.9),
    runs: mine.length,
    stalled: stalledRuns.length,
    stalledRuns,
  };
}

// ---- greedy identity -----------------------------------------------------------

/** The tokens of `steps` greedy steps from the prompt state of `seed`, one array per step. */
export function decodeGreedy(model: Model, ids: Int32Array, c: number, steps: number, seed: number, onStep: (done: number) => void = () => {}): Int32Array[] {
  model.reset(seed);
  const out: Int32Array[] = [];
  for (let s = 0; s < steps; s++) {
    out.push(Int32Array.from(model.step(ids, c)));
    onStep(s + 1);
  }
  return out;
}

export interface IdentityResult {
  steps: number;
  status: 'identical' | 'explained' | 'failed';
  /** 0-based step of the first differing token, or null */
  firstDiffStep: number | null;
  /** rows whose sequences differ anywhere */
  rowsDiverged: number;
  differences: Difference[];
  /** one line: why the status is what it is */
  why: string;
}

/**
 * Compares two greedy sequences. A difference is explained only when every
 * linear the routes differ on runs a candidate outside the default's bitwise
 * class (tolerance parity): such kernels may round differently, and one
 * rounding can flip a near-tie argmax. Otherwise it is a failure: the routes
 * are the same, or a candidate that claims identical bits did not give them.
 */
export function judgeIdentity(a: readonly Int32Array[], b: readonly Int32Array[], diffs: readonly Difference[]): IdentityResult {
  if (a.length !== b.length) throw new Error(`the arms decoded ${a.length} and ${b.length} steps`);
  const steps = a.length;
  let first: number | null = null;
  const rows = new Set<number>();
  for (let s = 0; s < steps; s++) {
    const x = a[s]!;
    const y = b[s]!;
    if (x.length !== y.length) throw new Error(`step ${s}: the arms decoded ${x.length} and ${y.length} rows`);
    for (let r = 0; r < x.length; r++) {
      if (x[r] !== y[r]) {
        first ??= s;
        rows.add(r);
      }
    }
  }
  const base = { steps, firstDiffStep: first, rowsDiverged: rows.size, differences: [...diffs] };
  if (first === null) return { ...base, status: 'identical', why: `greedy tokens identical for ${steps} steps` };
  const at = `tokens differ from step ${first} (${rows.size} of ${a[0]!.length} rows)`;
  const list = (ds: readonly Difference[]) => ds.map((d) => `${d.kind} ${d.table} vs ${d.default}`).join(', ');
  if (diffs.length === 0) return { ...base, status: 'failed', why: `${at}, yet both routes run the same candidates: the step is not deterministic` };
  const claimed = diffs.filter((d) => d.bitwise);
  if (claimed.length > 0) return { ...base, status: 'failed', why: `${at}, yet ${list(claimed)} claim${claimed.length === 1 ? 's' : ''} bitwise-identical output` };
  return { ...base, status: 'explained', why: `${at}; explained: every differing linear runs a tolerance-class candidate (${list(diffs)})` };
}

// ---- one concurrency, end to end -------------------------------------------------

export interface RowResult {
  c: number;
  routes: Record<ArmName, ArmRoute>;
  arms: Record<ArmName, ArmSummary> | null;
  /** table tok/s over default tok/s */
  ratio: number | null;
  identity: IdentityResult | null;
}

export interface RowPlan {
  c: number;
  steps: number;
  runs: number;
  identitySteps: number;
  seed: number;
}

/** Identity first (it resets), then the timed lanes, at one concurrency. */
export function benchRow(
  model: Model,
  routes: Record<ArmName, ArmRoute>,
  space: readonly Candidate[],
  plan: RowPlan,
  progress: (done: number, total: number, label: string) => void = () => {},
): RowResult {
  const { c, steps, runs, identitySteps, seed } = plan;
  const idWork = 2 * identitySteps;
  const timeWork = LANE_ORDERS.length * runs * ARMS.length;
  const total = idWork + timeWork;
  let identity: IdentityResult | null = null;
  if (identitySteps > 0) {
    const seqs = ARMS.map((arm, i) =>
      decodeGreedy(model, routes[arm].ids, c, identitySteps, seed, (done) => progress(i * identitySteps + done, total, `c=${c} identity ${arm} step ${done}/${identitySteps}`)),
    );
    identity = judgeIdentity(seqs[0]!, seqs[1]!, differences(routes.default, routes.table, space));
  }
  let arms: Record<ArmName, ArmSummary> | null = null;
  let ratio: number | null = null;
  if (runs > 0) {
    const ids = { default: routes.default.ids, table: routes.table.ids };
    const timed = timeLanes(model, ids, c, steps, runs, (done, _t, label) => progress(idWork + done, total, label));
    arms = { default: summarizeArm(timed, 'default', c), table: summarizeArm(timed, 'table', c) };
    ratio = arms.table.tokPerS / arms.default.tokPerS;
  }
  return { c, routes, arms, ratio, identity };
}
