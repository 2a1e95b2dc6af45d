// The sweep job: a plan of lib/sweep.ts measured into a store on the library
// loaded, under the store's lock, resuming what the store already holds for
// this build; progress and a summary on stderr, records as JSON lines.
import { asUsage, EXIT, printJsonLine, Progress, say, warn } from './cli.ts';
import { openKpick } from './ffi.ts';
import { describeIdentity, identityFromInfo } from './identity.ts';
import type { Linear } from './models.ts';
import type { Bucket, Dtype } from './schema.ts';
import { shardTag, type Shard } from './shard.ts';
import { formatWarning, measuredKeys, readStore, StoreLock, StoreWriter, writerKey } from './store.ts';
import { runSweep, selectCandidates } from './sweep.ts';

/** What a sweep job measures and where it writes: scripts/sweep.ts's options. */
export interface SweepJob {
  model: string | null;
  linears: Linear[];
  rows: Bucket[];
  dtypes: Dtype[];
  store: string;
  candidates: string[] | undefined;
  samples: number;
  rounds: number;
  copies: number;
  /** SweepPlan.placements; undefined: DEFAULT_GPU_PLACEMENTS on a GPU, one on the CPU */
  placements?: number;
  seed: number | undefined;
  shard: Shard | undefined;
  /** SweepPlan.budgetUs: undefined, every round runs */
  budgetUs?: number;
  backend: string | undefined;
  json: boolean;
  quiet: boolean;
}

/** A GPU sweep's buffer placements by default: three, so that one placement that
 * slows a kernel holds a third of its samples, below the median. */
export const DEFAULT_GPU_PLACEMENTS = 3;

/**
 * The sweep job (scripts/sweep.ts, and the main job's sweep step): the plan
 * measured into the store under its lock, resuming what the store holds;
 * records as JSON lines on request, a summary on stderr.
 */
export function sweepJob(args: SweepJob): number {
  const human = !args.quiet;
  // the library first: a bad environment stops here, before the store is touched
  const kpick = openKpick(args.backend);
  // the shard names the writer: its files, and the store lock it holds
  const tag = args.shard === undefined ? undefined : shardTag(args.shard);
  const lock = asUsage(() => StoreLock.acquire(args.store, writerKey('sweep', tag)));
  let writer: StoreWriter;
  try {
    writer = asUsage(() => StoreWriter.open(args.store, 'sweep', tag));
  } catch (err) {
    lock.release();
    throw err;
  }
  // A sweep killed before the finally leaves its lock: the next one sees the
  // pid is dead and takes it over.
  try {
    const identity = identityFromInfo(kpick.info());
    const space = kpick.candidates();
    const candidates = asUsage(() => selectCandidates(space, args.candidates));

    const existing = readStore(args.store);
    for (const w of existing.warnings) warn(`skipped store ${w.line === 0 ? 'file' : 'line'} ${formatWarning(w)}`);
    const part = args.shard === undefined ? '' : ` (shard ${args.shard.index} of ${args.shard.count})`;
    if (human) say(`sweep${part}: ${describeIdentity(identity)} from ${kpick.path}`);

    const progress = new Progress(human && !args.json);
    const summary = runSweep(
      kpick,
      {
        identity,
        linears: args.linears,
        dtypes: args.dtypes,
        rows: args.rows,
        candidates,
        space,
        samples: args.samples,
        rounds: args.rounds,
        copies: args.copies,
        placements: args.placements ?? (identity.backend === 'cpu' ? 1 : DEFAULT_GPU_PLACEMENTS),
        seed: args.seed,
        done: measuredKeys(existing.records, identity),
        shard: args.shard,
        budgetUs: args.budgetUs,
      },
      {
        record(record) {
          const stored = writer.append(record);
          if (args.json) printJsonLine(stored);
        },
        progress: (done, total, label) => progress.update(done, total, label),
      },
    );
    progress.end();
    if (human && summary.noCandidates.length > 0) {
      say(`sweep: this build has no candidate for ${summary.noCandidates.join(', ')}: left out (a HIP build has no moe default and no fp8 row)`);
    }
    if (human) {
      const where = summary.written > 0 ? ` to ${writer.file}` : '';
      say(
        `sweep: wrote ${summary.written} records${where}; skipped ${summary.skipped} already in the store` +
          `; ${summary.failed} failed, ${summary.parityFailed} failed parity`,
      );
    }
    return EXIT.ok;
  } finally {
    writer.close();
    lock.release();
  }
}
