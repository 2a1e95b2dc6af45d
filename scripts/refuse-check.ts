// refuse-check: would this table be used here, by both readers? The TS guard
// reads decode_gemm.json (the scripts' route), the C route of the library reads
// decode_gemm.route beside it (an engine's); each says its verdict in one line
// (entries kept, entries dropped and why, or why it is refused), and when they
// differ a third line names the first disagreement (entry, bucket).
//   tsx scripts/refuse-check.ts [--table file] [--backend cpu|cuda|hip] [--json]
// The table defaults to tables/<arch>/<device>/decode_gemm.json of the library
// loaded; --table may name either form.
// Exit 0 only when both use the table and route every entry and bucket alike;
// 3 otherwise (refused, no table, no .route, or a disagreement); 2 on bad
// usage or no loadable library.
import { asUsage, EXIT, isMainModule, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { BACKENDS, parseBackend, openKpick } from '../lib/ffi.ts';
import type { Build } from '../lib/guard.ts';
import { buildOf } from '../lib/route.ts';
import { defaultTablePath } from '../lib/table.ts';
import { readBoth, type TwoReaders } from '../lib/two-readers.ts';

const OPTIONS = {
  table: { flag: '--table <file>', help: 'table to check: decode_gemm.json, or a compact decode_gemm.route (default: tables/<arch>/<device>/decode_gemm.json of the library loaded)' },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables, for the default --table', default: 'tables' },
  backend: { flag: '--backend <name>', help: `library to check against: ${BACKENDS.join(', ')} (default: $KPICK_BACKEND, else the first GPU build that loads, else cpu)` },
  json: { flag: '--json', help: 'the verdict as one JSON line on stdout' },
  quiet: { flag: '--quiet', help: 'say nothing when the table is used (refusals still print their line)' },
} satisfies Record<string, OptionSpec>;

export interface RefuseCheckArgs {
  table: string | null;
  tablesDir: string;
  backend: string | null;
  json: boolean;
  quiet: boolean;
}

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

function jsonOf(both: TwoReaders, build: Build) {
  const verdict = both.json.verdict;
  return {
    table: both.json.file,
    kind: verdict.kind,
    used: verdict.used,
    line: verdict.line,
    kept: verdict.kind === 'used' ? verdict.kept.length : 0,
    dropped: verdict.kind === 'used' ? verdict.dropped : [],
    route: both.route,
    agree: both.agree,
    disagreement: both.disagreement,
    identity: build.identity,
  };
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const kpick = openKpick(args.backend);
  const build = buildOf(kpick);
  const both = readBoth(kpick, build, args.table ?? defaultTablePath(args.tablesDir, build.identity), process.env);
  const used = both.json.verdict.used && both.agree;
  if (!used || !args.quiet) {
    say(both.json.verdict.line);
    say(both.route.line);
  }
  if (both.disagreement !== null) say(both.disagreement);
  if (args.json) printJsonLine(jsonOf(both, build));
  return used ? EXIT.ok : EXIT.refused;
}

if (isMainModule(import.meta.url)) void runMain('refuse-check', () => main(process.argv.slice(2)));
