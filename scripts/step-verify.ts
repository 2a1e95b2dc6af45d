// step-verify: each pick of this machine's table timed in the whole decode
// step of a model (random weights, as serve-bench), against the same step with
// that linear on its class default, in interleaved rounds; one step record per
// pick into <store>/steps/. promote then keeps the default wherever the step
// is faster with it (lib/step-verdict.ts). The job is lib/step-verify.ts.
//   tsx scripts/step-verify.ts --model Llama-3.1-8B --store stores/h200 [--c 1,2,4,8,16,32,64,128]
// Exit 0 when every record was written (whatever they say), 1 when a native
// call failed, 2 on bad usage (a model that does not fit says what would),
// 3 when the guard refuses the table.
import { asUsage, EXIT, isMainModule, optionInt, optionText, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { parseBackend } from '../lib/ffi.ts';
import { modelNames } from '../lib/models.ts';
import * as opt from '../lib/options.ts';
import { BUCKETS, MAX_POSITIONS, MAX_ROWS } from '../lib/schema.ts';
import { parseConcurrency } from '../lib/serve.ts';
import { stepVerifyJob, type StepVerifyJob } from '../lib/step-verify.ts';

export const OPTIONS = {
  model: opt.model(`model preset (required): ${modelNames().join(', ')}`),
  store: opt.store('the store whose steps/ folder gets the records (required): the one the table was promoted from'),
  layers: opt.layers(),
  c: { flag: '--c <list>', help: `concurrencies (rows per step), comma separated, each 1..${MAX_ROWS}: a bucket's largest rows`, default: BUCKETS.join(',') },
  context: { flag: '--context <n>', help: 'KV-cache positions filled before the first step', default: 256 },
  steps: { flag: '--steps <n>', help: 'decode steps a timing (a round takes their median)', default: 16 },
  rounds: { flag: '--rounds <n>', help: 'interleaved rounds of the route and each variant', default: 7 },
  alternatives: { flag: '--alternatives <n>', help: "where the step is slower with a pick, or an entry is kept on the default, time up to n of the sweep's runners-up in its place, each against the default", default: 0 },
  table: { flag: '--table <file>', help: 'the table to verify (default: <tables-dir>/<arch>/<device>/decode_gemm.json of the library loaded)' },
  tablesDir: opt.tablesDir('root of the per-device tables, for the default --table'),
  backend: opt.backend(),
  dtype: { flag: '--dtype <type>', help: "the model's weights: bf16, fp16 or fp8", default: 'bf16' },
  seed: opt.seed(),
  memLimit: opt.memLimit(),
  json: opt.json('one JSON line per step record on stdout, with its verdict'),
  quiet: opt.quiet('no progress or summary on stderr (errors and warnings still print)'),
} satisfies Record<string, OptionSpec>;

/** Parses argv (without node and the script); null when --help or --version was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): StepVerifyJob | null {
  const cli = scriptCli(
    'step-verify',
    {
      summary: "time each pick of the table in the whole decode step, against its default; records for promote",
      usage: '--model <name> --store <dir> [--c 1,2,4,8] [--layers n] [--rounds n] [--steps n] [--alternatives n] [--table file] [--json]',
      examples: [
        'tsx scripts/step-verify.ts --model Llama-3.1-8B --store stores/h200',
        'tsx scripts/step-verify.ts --model tiny --layers 2 --backend cpu --c 1,4 --rounds 5 --steps 2 --store stores/cpu',
      ],
    },
    OPTIONS,
  );
  const o = parseWithCac(cli, argv);
  if (o === null) return null;
  return asUsage(() => {
    const { model, dtype } = opt.modelAndDtype(o, OPTIONS.dtype.default);
    const store = optionText(o, 'store');
    if (store === undefined || store === '') throw new Error('--store <dir> is required');
    const context = optionInt(o, 'context', OPTIONS.context.default, 0, MAX_POSITIONS - 1);
    const steps = optionInt(o, 'steps', OPTIONS.steps.default, 1, MAX_POSITIONS);
    if (context + steps > MAX_POSITIONS) throw new Error(`--context ${context} plus ${steps} steps is ${context + steps} positions; at most ${MAX_POSITIONS}`);
    const { table, tablesDir } = opt.tableChoice(o, OPTIONS.tablesDir.default);
    return {
      model,
      layers: optionInt(o, 'layers', model.layers, 1, model.layers),
      concurrency: parseConcurrency(optionText(o, 'c', OPTIONS.c.default) as string),
      context,
      steps,
      // the rank test needs 5 a side before a verdict can pass its level
      rounds: optionInt(o, 'rounds', OPTIONS.rounds.default, 5, 1000),
      alternatives: optionInt(o, 'alternatives', OPTIONS.alternatives.default, 0, 16),
      table,
      tablesDir,
      store,
      backend: parseBackend(optionText(o, 'backend')),
      dtype,
      seed: optionInt(o, 'seed', OPTIONS.seed.default, 0, Number.MAX_SAFE_INTEGER),
      memLimit: opt.parseMemLimit(o),
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  return args === null ? EXIT.ok : stepVerifyJob(args);
}

if (isMainModule(import.meta.url)) void runMain('step-verify', () => main(process.argv.slice(2)));
