// The parity run: every runnable candidate on every linear, dtype and rows
// bucket, on fresh random inputs per problem (seeds problems per shape and
// dtype), against the fp64 reference and its bitwise class head. A candidate
// the library fails to run is a failed check with its reason, never a crash.
import { randomInt } from 'node:crypto';
import { asUsage, colorsFor, EXIT, printJsonLine, Progress, say, UsageError } from './cli.ts';
import { KpickError, openKpick, problemOfInput, takesDtype, type Candidate, type Kpick } from './ffi.ts';
import { describeIdentity, identityFromInfo } from './identity.ts';
import { linearsForDtype, type Linear } from './models.ts';
import { ParityChecker, computeReference, referenceColumns, type ColumnMode } from './parity.ts';
import { storeRecord } from './record.ts';
import type { Bucket, Dtype, Identity, Parity, StoreRecord } from './schema.ts';
import { StoreWriter } from './store.ts';
import { moeFields, shapeText } from './shape-key.ts';
import type { Routing } from './ffi.ts';
import { selectCandidates, type Contender } from './sweep.ts';

export interface ParityPlan {
  identity: Identity;
  linears: readonly Linear[];
  dtypes: readonly Dtype[];
  rows: readonly Bucket[];
  /** the candidates to check (each op takes its own) */
  candidates: readonly Candidate[];
  /** every candidate of the space: class heads for the bitwise check */
  space: readonly Candidate[];
  /** problems (fresh random inputs) per shape and dtype */
  seeds: number;
  columns: ColumnMode;
  /** check only these (problem, rows, candidate); undefined: every candidate everywhere */
  only?: (c: Contender) => boolean;
}

/** One check of one candidate on one problem at one rows bucket. */
export interface ParityCheck {
  candidate: string;
  op: Linear['op'];
  dtype: Dtype;
  n: number;
  k: number;
  /** op moe only: experts, top-k, and the routing the problem drew */
  experts?: number;
  topk?: number;
  routing?: Routing;
  rows: Bucket;
  seed: number;
  /** 'all', or how many columns the reference sampled */
  columns: string;
  /** false when the library failed to run it */
  ran: boolean;
  parity: Parity;
}

export interface ParityEvents {
  /** each check, with its store record (kind 'parity') */
  check(check: ParityCheck, record: StoreRecord): void;
  progress?(done: number, total: number, label: string): void;
}

export interface ParitySummary {
  checks: number;
  /** the failed checks, in the order run */
  failures: ParityCheck[];
  /** distinct candidates checked */
  candidates: number;
  /** "bf16 lm_head 2048x256 m=1" of each problem whose reference sampled columns (first seed) */
  sampled: string[];
}

export function failLine(c: ParityCheck): string {
  const routing = c.routing ? ` (${c.routing} routing)` : '';
  return `FAIL ${c.candidate} ${c.op} ${c.dtype} ${shapeText(c)}${routing} m=${c.rows}: ${c.parity.reason}`;
}

function checkOne(checker: ParityChecker, cand: Candidate): { ran: boolean; parity: Parity } {
  try {
    return { ran: true, parity: checker.check(cand) };
  } catch (err) {
    if (!(err instanceof KpickError)) throw err;
    return { ran: false, parity: { status: 'fail', rel_err: null, bitwise: null, reason: `run failed: ${err.message}` } };
  }
}

/** Runs the plan; each check goes to events.check in the order run. */
export function runParity(kpick: Kpick, plan: ParityPlan, events: ParityEvents): ParitySummary {
  const summary: ParitySummary = { checks: 0, failures: [], candidates: 0, sampled: [] };
  const names = new Set<string>();
  const mMax = Math.max(...plan.rows);
  const total = plan.dtypes.reduce((n, dtype) => n + linearsForDtype(plan.linears, dtype).length, 0) * plan.seeds;
  let done = 0;
  for (const dtype of plan.dtypes) {
    for (const linear of linearsForDtype(plan.linears, dtype)) {
      const ofOp = plan.candidates.filter((c) => c.op === linear.op && takesDtype(c, dtype));
      // an op this build has no candidate of in dtype makes no problem (a HIP build has no moe default and no fp8 row)
      if (!ofOp.some((c) => c.available)) {
        done += plan.seeds;
        continue;
      }
      // a moe problem's routing matters to its kernels: each seed checks the uniform and the skewed one
      const routings: (Routing | undefined)[] = linear.op === 'moe' ? ['uniform', 'skewed'] : [undefined];
      for (let s = 0; s < plan.seeds; s++) {
        events.progress?.(done, total, `${dtype} ${linear.name} ${linear.op} ${shapeText(linear)}`);
        for (const routing of routings) {
          const seed = randomInt(0, 2 ** 47);
          const moe = moeFields(linear);
          // the reference reads weight copy 0 only: one copy is enough
          const problem = problemOfInput(kpick, { op: linear.op, dtype, n: linear.n, k: linear.k, ...moe, routing, mMax, copies: 1, seed });
          try {
            for (const rows of plan.rows) {
              problem.setRows(rows);
              const cols = referenceColumns(problem, plan.columns, seed % 2 ** 31);
              const columns = cols === null ? 'all' : `${cols.length} of ${problem.outCols}`;
              if (cols !== null && s === 0 && routing !== 'skewed') summary.sampled.push(`${dtype} ${linear.name} ${shapeText(linear)} m=${rows}`);
              const checker = new ParityChecker(problem, computeReference(problem, cols), plan.space);
              const site = { identity: plan.identity, op: linear.op, dtype, n: linear.n, k: linear.k, ...moe, rows, copies: problem.copies, seed };
              for (const cand of ofOp) {
                if (!cand.available || !problem.supports(cand.id)) continue;
                if (plan.only && !plan.only({ op: linear.op, dtype, n: linear.n, k: linear.k, ...moe, rows, candidate: cand.name })) continue;
                const { ran, parity } = checkOne(checker, cand);
                const check: ParityCheck = { candidate: cand.name, op: linear.op, dtype, n: linear.n, k: linear.k, ...moe, ...(routing ? { routing } : {}), rows, seed, columns, ran, parity };
                summary.checks++;
                names.add(cand.name);
                if (parity.status === 'fail') summary.failures.push(check);
                const outcome = { status: ran ? 'ok' : 'failed', reason: ran ? '' : parity.reason, parity, nodes: null, samples: [] } as const;
                events.check(check, storeRecord(site, 'parity', outcome, cand));
              }
            }
          } finally {
            problem.free();
          }
        }
        done++;
      }
    }
  }
  summary.candidates = names.size;
  return summary;
}

/** What a parity job checks and where it reports: scripts/parity.ts's options. */
export interface ParityJob {
  linears: Linear[];
  rows: Bucket[];
  dtypes: Dtype[];
  /** names or globs; undefined: all */
  candidates: string[] | undefined;
  seeds: number;
  columns: ColumnMode;
  /** also append each check to this store */
  store: string | undefined;
  /** check only these (problem, rows, candidate); undefined: all */
  only?: (c: Contender) => boolean;
  backend: string | undefined;
  json: boolean;
  quiet: boolean;
}

/**
 * The parity job (scripts/parity.ts, and the main job's parity step): the run
 * on the library loaded, FAIL lines and a summary on stderr, checks as JSON
 * lines or store records. Exit 0 when all pass, 1 when any fails.
 */
export function parityJob(args: ParityJob): number {
  const human = !args.quiet;
  const writer = args.store === undefined ? null : asUsage(() => StoreWriter.open(args.store as string, 'parity'));
  try {
    const kpick = openKpick(args.backend);
    const info = kpick.info();
    const identity = identityFromInfo(info);
    const space = kpick.candidates();
    const candidates = asUsage(() => selectCandidates(space, args.candidates));
    if (human) say(`parity: ${describeIdentity(identity)} from ${kpick.path}`);

    const progress = new Progress(human && !args.json);
    const plan = { identity, linears: args.linears, dtypes: args.dtypes, rows: args.rows, candidates, space, seeds: args.seeds, columns: args.columns, only: args.only };
    const summary = runParity(kpick, plan, {
      check(check, record) {
        if (check.parity.status === 'fail') {
          progress.end();
          say(colorsFor(process.stderr).red(failLine(check)));
        }
        if (args.json) printJsonLine({ ...check, ...check.parity, parity: undefined });
        writer?.append(record);
      },
      progress: (done, total, label) => progress.update(done, total, label),
    });
    progress.end();

    if (human) {
      if (summary.sampled.length > 0) {
        say(`parity: the reference sampled columns (first, last, evenly spread, a few random) for ${summary.sampled.join(', ')}; --columns full checks all`);
      }
      const failed = [...new Set(summary.failures.map((f) => f.candidate))];
      const { checks, failures } = summary;
      say(`parity: ${checks} checks of ${summary.candidates} candidates; ${checks - failures.length} pass, ${failures.length} fail` + (failed.length > 0 ? ` (${failed.join(', ')})` : ''));
      if (writer && writer.written > 0) say(`parity: wrote ${writer.written} records to ${writer.file}`);
    }
    if (summary.checks === 0) throw new UsageError('no candidate could run any of these problems: nothing was checked');
    return summary.failures.length > 0 ? EXIT.failed : EXIT.ok;
  } finally {
    writer?.close();
  }
}
