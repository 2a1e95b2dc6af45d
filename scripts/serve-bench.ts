// serve-bench: decode-step throughput of a real model's shapes (random weights,
// every layer its own), the default route against this machine's table route,
// on the same weights and prompts, at several concurrencies; plus greedy token
// identity between the two routes. The engine is lib/serve.ts, the job
// lib/serve-bench.ts.
//   tsx scripts/serve-bench.ts --model Qwen3-0.6B [--c 1,4,8,16,32,64] [--json]
// Before anything is timed, every non-linear op of the step is checked against
// fp64 on this backend (and with --check-step, one whole step of each route).
// Exit 0 when the bench ran and greedy tokens were identical or every
// difference is explained; 1 when a difference is not (or a check or a native
// call failed); 2 on bad usage, including a model that does not fit in memory
// (the line names what would).
import { asUsage, EXIT, isMainModule, optionInt, optionText, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { parseBackend } from '../lib/ffi.ts';
import { modelNames } from '../lib/models.ts';
import * as opt from '../lib/options.ts';
import { MAX_POSITIONS, MAX_ROWS } from '../lib/schema.ts';
import { parseConcurrency } from '../lib/serve.ts';
import { serveBenchJob, type ServeBenchJob } from '../lib/serve-bench.ts';

export const OPTIONS = {
  model: opt.model(`model preset (required): ${modelNames().join(', ')}`),
  layers: opt.layers(),
  c: { flag: '--c <list>', help: `concurrencies (rows per step), comma separated, each 1..${MAX_ROWS}`, default: '1,4,8,16,32,64' },
  context: { flag: '--context <n>', help: 'KV-cache positions filled before the first step (the prompt)', default: 256 },
  steps: { flag: '--steps <n>', help: 'decode steps per timed run', default: 100 },
  runs: { flag: '--runs <n>', help: 'timed runs per arm per lane (two lanes, in opposite orders)', default: 3 },
  identitySteps: { flag: '--identity-steps <n>', help: 'greedy steps both routes decode and compare; 0 skips', default: 256 },
  table: { flag: '--table <file>', help: "the table route's table (default: <tables-dir>/<arch>/<device>/decode_gemm.json of the library loaded)" },
  tablesDir: opt.tablesDir('root of the per-device tables, for the default --table'),
  backend: opt.backend(),
  dtype: { flag: '--dtype <type>', help: 'bf16, fp16 or fp8 (the layer linears and the experts of a moe model in e4m3 with row scales; lm_head, the router, embedding, norms, attention and KV in bf16)', default: 'bf16' },
  seed: opt.seed(),
  memLimit: opt.memLimit(),
  checkStep: { flag: '--check-step', help: 'before timing, check one whole step of each route at the smallest --c against an fp64 forward on the host (slow on big models: try --layers 2)' },
  json: opt.json('a setup line, then one JSON line per concurrency on stdout'),
  quiet: opt.quiet('no table or progress on stderr (errors and warnings still print)'),
} satisfies Record<string, OptionSpec>;

function makeCli() {
  return scriptCli(
    'serve-bench',
    {
      summary: 'decode-step tok/s of a model, default route vs table route, and greedy token identity',
      usage: '--model <name> [--c 1,4,8,16,32,64] [--layers n] [--steps n] [--runs n] [--table file] [--json]',
      examples: [
        'tsx scripts/serve-bench.ts --model Qwen3-0.6B',
        'tsx scripts/serve-bench.ts --model Llama-3.1-8B --c 1,8,64 --steps 50 --json | jq -c "{c, ratio}"',
        'tsx scripts/serve-bench.ts --model tiny --layers 2 --backend cpu --c 1,4 --steps 8 --identity-steps 16',
      ],
    },
    OPTIONS,
  );
}

export type ServeBenchArgs = ServeBenchJob;

/** Parses argv (without node and the script); null when --help or --version was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): ServeBenchArgs | null {
  const o = parseWithCac(makeCli(), argv);
  if (o === null) return null;
  return asUsage(() => {
    const { model, dtype } = opt.modelAndDtype(o, OPTIONS.dtype.default);
    const backend = parseBackend(optionText(o, 'backend'));
    const context = optionInt(o, 'context', OPTIONS.context.default, 0, MAX_POSITIONS - 1);
    const steps = optionInt(o, 'steps', OPTIONS.steps.default, 1, MAX_POSITIONS);
    const identitySteps = optionInt(o, 'identitySteps', OPTIONS.identitySteps.default, 0, MAX_POSITIONS);
    const positions = context + Math.max(steps, identitySteps);
    if (positions > MAX_POSITIONS) {
      throw new Error(`--context ${context} plus ${Math.max(steps, identitySteps)} new tokens is ${positions} positions; at most ${MAX_POSITIONS}`);
    }
    const { table, tablesDir } = opt.tableChoice(o, OPTIONS.tablesDir.default);
    return {
      model,
      layers: optionInt(o, 'layers', model.layers, 1, model.layers),
      concurrency: parseConcurrency(optionText(o, 'c', OPTIONS.c.default) as string),
      context,
      steps,
      runs: optionInt(o, 'runs', OPTIONS.runs.default, 1, 1000),
      identitySteps,
      table,
      tablesDir,
      backend,
      dtype,
      seed: optionInt(o, 'seed', OPTIONS.seed.default, 0, Number.MAX_SAFE_INTEGER),
      memLimit: opt.parseMemLimit(o),
      checkStep: o.checkStep === true,
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  return args === null ? EXIT.ok : serveBenchJob(args);
}

if (isMainModule(import.meta.url)) void runMain('serve-bench', () => main(process.argv.slice(2)));
