// refuse-check: would this table be used here, by both readers? The TS guard
// reads decode_gemm.json (the scripts' route), the C route of the library reads
// decode_gemm.route beside it (an engine's); each says its verdict in one line
// (entries kept, entries dropped and why, or why it is refused), and when they
// differ a third line names the first disagreement (entry, bucket).
//   tsx scripts/refuse-check.ts [--table file] [--backend cpu|cuda|hip] [--json]
// The table defaults to tables/<arch>/<device>/decode_gemm.json of the library
// loaded; --table may name either form. The job is lib/refuse-check.ts.
// Exit 0 only when both use the table and route every entry and bucket alike;
// 3 otherwise (refused, no table, no .route, or a disagreement); 2 on bad
// usage or no loadable library.
import { asUsage, EXIT, isMainModule, optionText, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { BACKENDS, parseBackend } from '../lib/ffi.ts';
import * as opt from '../lib/options.ts';
import { refuseCheckJob, type RefuseCheckJob } from '../lib/refuse-check.ts';

const OPTIONS = {
  table: { flag: '--table <file>', help: 'table to check: decode_gemm.json, or a compact decode_gemm.route (default: tables/<arch>/<device>/decode_gemm.json of the library loaded)' },
  tablesDir: opt.tablesDir('root of the per-device tables, for the default --table'),
  backend: { flag: '--backend <name>', help: `library to check against: ${BACKENDS.join(', ')} (default: $KPICK_BACKEND, else the first GPU build that loads, else cpu)` },
  json: opt.json('the verdict as one JSON line on stdout'),
  quiet: opt.quiet('say nothing when the table is used (refusals still print their line)'),
} satisfies Record<string, OptionSpec>;

export type RefuseCheckArgs = RefuseCheckJob;

function makeCli() {
  return scriptCli('refuse-check', {
    summary: 'would this table be used here? exit 0, or one line why not (exit 3)',
    usage: '[--table file] [--backend cpu|cuda|hip] [--json] [--quiet]',
    examples: ['tsx scripts/refuse-check.ts', 'tsx scripts/refuse-check.ts --table tables/sm_90/nvidia-h200/decode_gemm.json --backend cuda --json'],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): RefuseCheckArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null) return null;
  const backend = asUsage(() => parseBackend(optionText(options, 'backend'))) ?? null;
  const table = optionText(options, 'table') ?? null;
  return {
    table,
    tablesDir: optionText(options, 'tablesDir', OPTIONS.tablesDir.default) ?? OPTIONS.tablesDir.default,
    backend,
    json: options.json === true,
    quiet: options.quiet === true,
  };
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  return args === null ? EXIT.ok : refuseCheckJob(args);
}

if (isMainModule(import.meta.url)) void runMain('refuse-check', () => main(process.argv.slice(2)));
