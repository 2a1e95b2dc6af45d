// The sweep engine: every candidate on every shape, dtype and rows bucket,
// one StoreRecord each. Per (dtype, shape) one problem (one weight fill) at
// the largest rows; per rows bucket: parity on a sampled reference, node
// count, then timing in rounds that visit every candidate and the read floor
// in an order rotated each round, so drift hits them all alike (on the CPU
// each sample is a round of its own, see visitsOf). On a GPU the rounds are
// also spread over buffer placements: problems of one seed allocated side by
// side, round r on placement r mod P, because where the buffers sit moves some
// kernels by up to 7 % (cuBLASLt's above all: bench/results/h200-2026-12-01-
// repeat-afa419c), and a sweep on one placement made near-tie picks flip
// between processes. A sample is
// what kpick_time gives: on a GPU the call's served cost after a kernel that
// writes its input, as a decode step runs it (README, "How a candidate is timed").
import { randomInt } from 'node:crypto';
import { KpickError, problemOfInput, takesDtype, type Candidate, type Kpick, type Problem } from './ffi.ts';
import { globRegExp } from './glob.ts';
import { linearsForDtype, type Linear } from './models.ts';
import { ParityChecker, computeReference, referenceColumns } from './parity.ts';
import { FLOOR, storeRecord, type RecordSite } from './record.ts';
import { bucketLow, type Bucket, type Dtype, type Identity, type Parity, type StoreRecord } from './schema.ts';
import { planUnits, shardKeys, unitKey, type Shard } from './shard.ts';
import { moeFields, shapeId, shapeText, type ShapeKey } from './shape-key.ts';
import { MIN_SAMPLES } from './promote.ts';
import { median } from './stats.ts';
import { recordKey } from './store.ts';
import { rotate } from './time-rounds.ts';

export { FLOOR };

export interface SweepPlan {
  identity: Identity;
  linears: readonly Linear[];
  dtypes: readonly Dtype[];
  rows: readonly Bucket[];
  /** the candidates to measure (each op takes its own) */
  candidates: readonly Candidate[];
  /** every candidate of the space: class heads for the bitwise check */
  space: readonly Candidate[];
  samples: number;
  rounds: number;
  /** rotating weight copies; 0: the library picks > 8x LLC */
  copies: number;
  /** buffer placements a rows bucket's rounds are spread over (problems of one seed
   * allocated side by side, round r on placement r mod P); undefined: 1 */
  placements?: number;
  /** input seed of every problem; undefined: a fresh random one per problem */
  seed?: number;
  /** record keys already in the store for this identity: not measured again */
  done: ReadonlySet<string>;
  /** measure only this shard's part of the plan (lib/shard.ts); undefined: all of it */
  shard?: Shard;
  /**
   * Timed microseconds a rows bucket may spend before its rounds stop, once every
   * runnable candidate has MIN_SAMPLES samples; undefined: every round runs. The
   * main job sets it so a slow backend's largest shapes (a CPU's lm_head at 8
   * rows: half a second a call) stop at what promote's noise check needs.
   */
  budgetUs?: number;
}

export interface SweepEvents {
  record(record: StoreRecord): void;
  progress?(done: number, total: number, label: string): void;
}

export interface SweepSummary {
  /** records written */
  written: number;
  /** records skipped because the store already had them */
  skipped: number;
  /** records with status failed */
  failed: number;
  /** records whose parity failed */
  parityFailed: number;
  /** shapes left out: no candidate of their op in this build (a HIP build has no moe default, none offers fp8 there) */
  noCandidates: string[];
}

/** Candidates whose name matches one of the globs (* and ?); every glob must match one. */
export function selectCandidates(all: readonly Candidate[], globs: readonly string[] | undefined): Candidate[] {
  if (!globs || globs.length === 0) return [...all];
  const patterns = globs.map((glob) => ({ glob, re: globRegExp(glob) }));
  for (const { glob, re } of patterns) {
    if (!all.some((c) => re.test(c.name))) {
      throw new Error(`no candidate matches '${glob}'; this space has ${all.map((c) => c.name).join(', ')}`);
    }
  }
  return all.filter((c) => patterns.some(({ re }) => re.test(c.name)));
}

/**
 * How the timing of a group is cut: `rounds` visits of `samples` calls each.
 * On the CPU every sample is a round of its own (the same count of samples):
 * a visit there costs nothing but its calls, and a burst of another process's
 * work then slows one sample of several candidates, not several samples of one,
 * which the noise check of promote can tell from a real gain. A GPU visit
 * captures and replays a graph, so there the samples of a round stay together.
 */
export function visitsOf(backend: string, samples: number, rounds: number): { samples: number; rounds: number } {
  return backend === 'cpu' ? { samples: 1, rounds: samples * rounds } : { samples, rounds };
}

interface Group {
  dtype: Dtype;
  linear: Linear;
  rows: Bucket;
  /** moe: the skewed routing's pass (absent: uniform) */
  routing?: StoreRecord['routing'];
  /** candidates of the op not yet in the store */
  todo: Candidate[];
  floor: boolean;
}

function label(g: Pick<Group, 'dtype' | 'linear' | 'rows' | 'routing'>): string {
  const shape = shapeText(g.linear);
  const name = g.linear.name === shape ? '' : `${g.linear.name} `;
  return `${g.dtype} ${name}${g.linear.op} ${shape}${g.routing ? ` ${g.routing}` : ''} m=${g.rows}`;
}

/**
 * The routings a problem is timed under: a moe problem under both that its
 * inputs draw, uniform (a trained router spreading rows) and skewed (rows
 * sharing a hot set of experts), so that promote ranks a moe candidate on both
 * (lib/promote.ts); every other op has none.
 */
export function routingsOf(linear: Pick<Linear, 'op'>): StoreRecord['routing'][] {
  return linear.op === 'moe' ? [undefined, 'skewed'] : [undefined];
}

const NOT_RUN: Parity = { status: 'skipped', rel_err: null, bitwise: null, reason: 'not run' };

/** What one candidate yields in one group before its record is written. */
interface Measure {
  cand: Candidate;
  status: StoreRecord['status'];
  reason: string;
  parity: Parity;
  nodes: number | null;
  samples: number[];
  /** timing stopped early: it cannot beat the default (see hopeless) */
  stopped: boolean;
}

/** How far a candidate's fastest sample must sit above the default's median before its timing stops. */
export const STOP_MARGIN = 0.1;
/** How the record of a candidate whose timing stopped early begins its reason. */
export const STOPPED = 'timing stopped after';

/** One candidate on one problem and rows bucket, as timedThrough keys it. */
export interface Contender extends ShapeKey {
  dtype: Dtype;
  rows: Bucket;
  candidate: string;
}
export const contenderKey = (c: Contender): string => `${c.op} ${c.dtype} ${shapeText(c)} m=${c.rows} ${c.candidate}`;

/** The candidates the store's records timed to the end (ok, not stopped early), keyed per problem and rows: the ones promote may pick there. */
export function timedThrough(records: readonly StoreRecord[]): Set<string> {
  return new Set(records.filter((r) => r.kind === 'candidate' && r.status === 'ok' && !r.reason.startsWith(STOPPED)).map(contenderKey));
}

/** Has a rows bucket spent its budget, with every candidate still timed at MIN_SAMPLES or more? */
function overBudget(timed: readonly Measure[], budgetUs: number): boolean {
  let spent = 0;
  for (const m of timed) {
    if (!m.stopped && m.samples.length < MIN_SAMPLES) return false;
    for (const t of m.samples) spent += t;
  }
  return spent > budgetUs;
}

/**
 * Once both have MIN_SAMPLES samples, a candidate whose fastest sample is still
 * more than STOP_MARGIN above the default's median cannot pass promote's gate
 * (its median would have to fall 10 % below its own best), so timing it further
 * spends the sweep's time on a sure loser: on a CPU, the slow candidates of the
 * large shapes were most of `npm start`. Its record keeps the samples taken.
 */
export function hopeless(cand: readonly number[], def: readonly number[]): boolean {
  if (cand.length < MIN_SAMPLES || def.length < MIN_SAMPLES) return false;
  return Math.min(...cand) > median(def) * (1 + STOP_MARGIN);
}

function failure(err: unknown, during: string): string {
  if (err instanceof KpickError) return `${during}: ${err.message}`;
  throw err;
}

/** Runs the plan; records go to events.record in the order measured. */
export function runSweep(kpick: Kpick, plan: SweepPlan, events: SweepEvents): SweepSummary {
  const key = (g: Pick<Group, 'dtype' | 'linear' | 'rows' | 'routing'>, candidate: string) =>
    recordKey({ identity: plan.identity, op: g.linear.op, dtype: g.dtype, n: g.linear.n, k: g.linear.k, ...moeFields(g.linear), rows: g.rows, candidate, routing: g.routing });

  // the shard's part comes from the full plan, before the store is consulted
  const mine = plan.shard === undefined ? null : shardKeys(planUnits(plan), plan.shard);
  const groups: Group[] = [];
  const noCandidates: string[] = [];
  let skipped = 0;
  for (const dtype of plan.dtypes) {
    for (const linear of linearsForDtype(plan.linears, dtype)) {
      const ofOp = plan.candidates.filter((c) => c.op === linear.op && takesDtype(c, dtype));
      // no problem of an op this build has no candidate of in dtype can be made (kpick_problem_create and _moe refuse)
      if (!plan.space.some((c) => c.op === linear.op && takesDtype(c, dtype) && c.available)) {
        noCandidates.push(`${dtype} ${linear.name} ${linear.op} ${shapeText(linear)}`);
        continue;
      }
      // a routing's rows together: its problems are made once for them
      for (const routing of routingsOf(linear)) {
        for (const rows of plan.rows) {
          if (mine !== null && !mine.has(unitKey(dtype, linear, rows))) continue;
          const g = { dtype, linear, rows, ...(routing ? { routing } : {}) };
          const todo = ofOp.filter((c) => !plan.done.has(key(g, c.name)));
          const floor = !plan.done.has(key(g, FLOOR));
          skipped += ofOp.length - todo.length + (floor ? 0 : 1);
          if (todo.length > 0 || floor) groups.push({ ...g, todo, floor });
        }
      }
    }
  }

  const total = groups.reduce((sum, g) => sum + g.todo.length + (g.floor ? 1 : 0), 0);
  const summary: SweepSummary = { written: 0, skipped, failed: 0, parityFailed: 0, noCandidates };
  const emit = (record: StoreRecord) => {
    events.record(record);
    summary.written++;
    if (record.status === 'failed') summary.failed++;
    if (record.parity.status === 'fail') summary.parityFailed++;
  };

  const cut = visitsOf(plan.identity.backend, plan.samples, plan.rounds);
  // each placement needs a round of its own
  const placements = Math.max(1, Math.min(plan.placements ?? 1, cut.rounds));
  let problems: Problem[] = [];
  let problemOf = '';
  const freeAll = () => {
    for (const p of problems) p.free();
    problems = [];
  };
  try {
    for (const g of groups) {
      const which = `${g.dtype}:${shapeId(g.linear)}:${g.routing ?? 'uniform'}`;
      if (which !== problemOf) {
        freeAll();
        const mMax = Math.max(...groups.filter((o) => o.dtype === g.dtype && o.linear === g.linear).map((o) => o.rows));
        const spec = {
          op: g.linear.op,
          dtype: g.dtype,
          n: g.linear.n,
          k: g.linear.k,
          ...(g.linear.op === 'moe' ? { experts: g.linear.experts, topk: g.linear.topk, routing: g.routing ?? ('uniform' as const) } : {}),
          mMax,
          seed: plan.seed ?? randomInt(0, 2 ** 47),
        };
        problemOf = which;
        problems.push(problemOfInput(kpick, { ...spec, copies: plan.copies }));
        // the same data and rotation again, on other pages (allocated while the first lives)
        while (problems.length < placements) problems.push(kpick.createProblem({ ...spec, copies: problems[0]!.copies }));
      }
      const base = summary.written;
      const groupSize = g.todo.length + (g.floor ? 1 : 0);
      events.progress?.(base, total, label(g));
      measureGroup(problems, g, plan, cut, emit, (fraction) =>
        events.progress?.(base + Math.floor(fraction * groupSize), total, label(g)),
      );
    }
  } finally {
    freeAll();
  }
  return summary;
}

function measureGroup(
  problems: readonly Problem[],
  g: Group,
  plan: SweepPlan,
  cut: { samples: number; rounds: number },
  emit: (record: StoreRecord) => void,
  progress: (fraction: number) => void,
): void {
  // parity, support and nodes on the first placement: the others hold the same data
  const problem = problems[0]!;
  for (const p of problems) p.setRows(g.rows);
  const measures: Measure[] = g.todo.map((cand) => {
    const m: Measure = { cand, status: 'ok', reason: '', parity: NOT_RUN, nodes: null, samples: [], stopped: false };
    if (!cand.available) {
      m.status = 'unsupported';
      m.reason = 'not built for this target';
      return m;
    }
    // the route sends every m of the bucket to its entry's choice: a candidate
    // that cannot take the bucket's fewest rows must not become that choice
    const low = bucketLow(g.rows);
    if (cand.rowsMin > low) {
      m.status = 'unsupported';
      m.reason = `takes rows ${cand.rowsMin}..${cand.rowsMax}, not all of bucket ${g.rows} (m=${low}..${g.rows})`;
      return m;
    }
    try {
      if (!problem.supports(cand.id)) {
        m.status = 'unsupported';
        m.reason = `cannot run ${g.linear.op} ${shapeText(g.linear)} at m=${g.rows}`;
      }
    } catch (err) {
      m.status = 'failed';
      m.reason = failure(err, 'supports');
    }
    return m;
  });
  const runnable = () => measures.filter((m) => m.status === 'ok');

  // parity first, on a sampled reference computed once for the group
  if (runnable().length > 0) {
    const reference = computeReference(problem, referenceColumns(problem, 'sampled', Number(problem.seed % 2n ** 31n)));
    const checker = new ParityChecker(problem, reference, plan.space);
    for (const m of runnable()) {
      try {
        m.parity = checker.check(m.cand);
      } catch (err) {
        m.status = 'failed';
        m.reason = failure(err, 'parity run');
      }
    }
  }
  for (const m of runnable()) {
    try {
      m.nodes = problem.countNodes(m.cand.id);
    } catch (err) {
      m.status = 'failed';
      m.reason = failure(err, 'count nodes');
    }
  }

  // timing rounds: each visits every runnable candidate and the floor, rotated
  const floorSamples: number[] = [];
  let floorFailure = '';
  const def = measures.find((m) => m.cand.isDefault);
  for (let round = 0; round < cut.rounds; round++) {
    if (def && def.status === 'ok') {
      for (const m of runnable()) {
        if (m === def || m.stopped || !hopeless(m.samples, def.samples)) continue;
        m.stopped = true;
        m.reason = `${STOPPED} ${m.samples.length} samples: its fastest is over ${Math.round(STOP_MARGIN * 100)} % slower than the default's median`;
      }
    }
    const here = problems[round % problems.length]!;
    const visits: (Measure | typeof FLOOR)[] = [...runnable().filter((m) => !m.stopped), ...(g.floor && !floorFailure ? [FLOOR] : [])];
    for (const visit of rotate(visits, round)) {
      if (visit === FLOOR) {
        try {
          floorSamples.push(...here.timeFloor(cut.samples));
        } catch (err) {
          floorFailure = failure(err, 'time floor');
        }
        continue;
      }
      try {
        visit.samples.push(...here.time(visit.cand.id, cut.samples));
      } catch (err) {
        visit.status = 'failed';
        visit.reason = failure(err, 'time');
        visit.samples = [];
      }
    }
    progress((round + 1) / cut.rounds);
    if (plan.budgetUs !== undefined && overBudget(runnable(), plan.budgetUs)) break;
  }

  const site: RecordSite = {
    identity: plan.identity,
    op: g.linear.op,
    dtype: g.dtype,
    n: g.linear.n,
    k: g.linear.k,
    ...moeFields(g.linear),
    rows: g.rows,
    copies: problem.copies,
    ...(problems.length > 1 ? { placements: problems.length } : {}),
    ...(g.routing ? { routing: g.routing } : {}),
    seed: Number(problem.seed),
  };
  for (const m of measures) emit(storeRecord(site, 'candidate', m, m.cand));
  if (g.floor) {
    const floor = { status: floorFailure ? 'failed' : 'ok', reason: floorFailure, parity: NOT_RUN, nodes: null, samples: floorSamples } as const;
    emit(storeRecord(site, 'floor', floor));
  }
}
