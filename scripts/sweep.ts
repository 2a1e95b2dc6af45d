// sweep: time every candidate on every decode linear of a model (or given
// shapes) at every rows bucket, with parity and node counts, into a store.
// Resumes: what the store already holds for this build is not measured again.
//   tsx scripts/sweep.ts --model Qwen3-0.6B --rows 1,2,4,8 --store stores/x
import {
  EXIT,
  asUsage,
  Progress,
  UsageError,
  isMainModule,
  optionInt,
  optionText,
  parseWithCac,
  printJsonLine,
  runMain,
  say,
  scriptCli,
  warn,
  type OptionSpec,
} from '../lib/cli.ts';
import { BACKENDS, parseBackend, openKpick, type Dtype } from '../lib/ffi.ts';
import { describeIdentity, identityFromInfo } from '../lib/identity.ts';
import { decodeLinears, findModel, linearsOf, modelNames, parseDtypes, parseRows, parseShapes, uniqueShapes, type Bucket, type Linear } from '../lib/models.ts';
import { StoreLock, StoreWriter, formatWarning, measuredKeys, readStore, writerKey } from '../lib/store.ts';
import { joinShardValue, parseShard, shardTag, type Shard } from '../lib/shard.ts';
import { runSweep, selectCandidates } from '../lib/sweep.ts';

export const OPTIONS = {
  model: { flag: '--model <name>', help: `model preset: ${modelNames().join(', ')}` },
  shapes: { flag: '--shapes <list>', help: "linear shapes NxK to measure instead of the model's, e.g. 4096x4096,1024x4096" },
  rows: { flag: '--rows <list>', help: 'rows buckets M', default: '1,2,4,8' },
  dtype: { flag: '--dtype <list>', help: 'bf16, fp16 or both', default: 'bf16' },
  store: { flag: '--store <dir>', help: 'store folder, created if missing (required)' },
  candidates: { flag: '--candidates <list>', help: 'candidate names or globs, comma separated (default: all)' },
  samples: { flag: '--samples <n>', help: 'timings per candidate per round', default: 5 },
  rounds: { flag: '--rounds <n>', help: 'rounds; each visits every candidate, order rotated', default: 3 },
  copies: { flag: '--copies <n>', help: 'rotating weight copies; 0: the library picks > 8x the LLC', default: 0 },
  seed: { flag: '--seed <n>', help: 'input seed (default: a fresh random one per problem)' },
  shard: { flag: '--shard <i/n>', help: 'measure only shard i (0-based) of n of the plan, into a file of its own (deploy/ runs one per GPU)' },
  backend: { flag: '--backend <name>', help: `${BACKENDS.join(' | ')} (default: $KPICK_BACKEND, else the best build; $KPICK_LIB wins)` },
  json: { flag: '--json', help: 'print each record as one JSON line on stdout', default: false },
  quiet: { flag: '--quiet', help: 'no progress or summary on stderr', default: false },
} satisfies Record<string, OptionSpec>;

export interface SweepArgs {
  model: string | null;
  linears: Linear[];
  rows: Bucket[];
  dtypes: Dtype[];
  store: string;
  candidates: string[] | undefined;
  samples: number;
  rounds: number;
  copies: number;
  seed: number | undefined;
  shard: Shard | undefined;
  backend: string | undefined;
  json: boolean;
  quiet: boolean;
}

/** Parses argv (without node and the script); null when --help was printed. Throws UsageError. */
export function parseSweepArgs(argv: readonly string[]): SweepArgs | null {
  const cli = scriptCli('sweep', {
    summary: 'time every candidate on every decode linear and rows bucket into a store; resumes',
    usage: '--model <name> --store <dir> [options]',
    examples: ['tsx scripts/sweep.ts --model Qwen3-0.6B --rows 1,2,4,8 --store stores/cpu', 'tsx scripts/sweep.ts --shapes 4096x4096,1024x3072 --rows 1,16 --dtype bf16,fp16 --store stores/x --json | jq -c .candidate', 'CUDA_VISIBLE_DEVICES=1 tsx scripts/sweep.ts --model Qwen3-8B --store stores/x --shard 1/2'],
  }, OPTIONS);
  const o = parseWithCac(cli, joinShardValue(argv));
  if (o === null) return null;
  return asUsage(() => {
    const shardText = optionText(o, 'shard');
    const model = optionText(o, 'model') ?? null;
    const linears = linearsOf(model ?? undefined, optionText(o, 'shapes'));
    const store = optionText(o, 'store');
    if (store === undefined) throw new Error('--store <dir> is required');
    const candidates = optionText(o, 'candidates')?.split(',').map((s) => s.trim()).filter((s) => s !== '');
    const seedText = optionText(o, 'seed');
    const backend = parseBackend(optionText(o, 'backend'));
    return {
      model,
      linears,
      rows: parseRows(optionText(o, 'rows', OPTIONS.rows.default) as string),
      dtypes: parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default) as string),
      store,
      candidates,
      samples: optionInt(o, 'samples', OPTIONS.samples.default, 1, 100000),
      rounds: optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000),
      copies: optionInt(o, 'copies', OPTIONS.copies.default, 0, 4096),
      seed: seedText === undefined ? undefined : optionInt(o, 'seed', 0, 0, Number.MAX_SAFE_INTEGER),
      shard: shardText === undefined ? undefined : parseShard(shardText),
      backend,
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseSweepArgs(argv);
  if (args === null) return EXIT.ok;
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
    const info = kpick.info();
    if (args.backend !== undefined && info.backend !== args.backend) {
      throw new UsageError(`--backend ${args.backend}, but ${kpick.path} is a ${info.backend} build`);
    }
    const identity = identityFromInfo(info);
    const space = kpick.candidates();
    const candidates = asUsage(() => selectCandidates(space, args.candidates));

    const existing = readStore(args.store);
    for (const w of existing.warnings) warn(`skipped store line ${formatWarning(w)}`);
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
        seed: args.seed,
        done: measuredKeys(existing.records, identity),
        shard: args.shard,
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

if (isMainModule(import.meta.url)) void runMain('sweep', () => main(process.argv.slice(2)));
