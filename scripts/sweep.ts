// sweep: time every candidate on every decode linear of a model (or given
// shapes) at every rows bucket, with parity and node counts, into a store.
// Resumes: what the store already holds for this build is not measured again.
// The job itself is lib/sweep-job.ts.
//   tsx scripts/sweep.ts --model Qwen3-0.6B --rows 1,2,4,8 --store stores/x
import { EXIT, asUsage, isMainModule, optionInt, optionText, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { parseBackend } from '../lib/ffi.ts';
import { linearsOf, modelNames, parseDtypes, parseRows } from '../lib/models.ts';
import * as opt from '../lib/options.ts';
import { joinShardValue, parseShard } from '../lib/shard.ts';
import { sweepJob, type SweepJob } from '../lib/sweep-job.ts';

export const OPTIONS = {
  model: opt.model(`model preset, or several comma-separated (swept by this one process): ${modelNames().join(', ')}`),
  shapes: opt.shapes('measure'),
  rows: opt.rows('1,2,4,8'),
  dtype: opt.dtype('bf16'),
  store: opt.store('store folder, created if missing (required)'),
  candidates: opt.candidates(),
  samples: opt.samples(5),
  rounds: opt.rounds(),
  copies: opt.copies(),
  placements: { flag: '--placements <n>', help: 'buffer placements each rows bucket is timed over, its rounds shared among them (default: 3 on a GPU, 1 on the CPU; at most --rounds count)' },
  seed: { flag: '--seed <n>', help: 'input seed (default: a fresh random one per problem)' },
  shard: { flag: '--shard <i/n>', help: 'measure only shard i (0-based) of n of the plan, into a file of its own (deploy/ runs one per GPU)' },
  backend: opt.backend(),
  json: opt.json('print each record as one JSON line on stdout'),
  quiet: opt.quiet('no progress or summary on stderr'),
} satisfies Record<string, OptionSpec>;

export type SweepArgs = SweepJob;

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
    const candidates = opt.candidateList(optionText(o, 'candidates'));
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
      placements: optionText(o, 'placements') === undefined ? undefined : optionInt(o, 'placements', 1, 1, 16),
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
  return args === null ? EXIT.ok : sweepJob(args);
}

if (isMainModule(import.meta.url)) void runMain('sweep', () => main(process.argv.slice(2)));
