// promote: pool one or more stores of one machine and build into the per-device
// table, tables/<arch>/<device>/decode_gemm.json. The rule is lib/promote.ts.
//   tsx scripts/promote.ts --store stores/a [--store stores/b] [--gate 0.02] [--pdl-rows 128] [--out file] [--json] [--quiet]
// Exit 0 when written; 2 on bad usage, a missing or empty store, mixed
// identities or an unwritable output (nothing is written then).
import { colorsFor, EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, UsageError, warn, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { DEFAULT_GATE, DEFAULT_PDL_ROWS } from '../lib/promote.ts';
import { reportPathFor, writeReport } from '../lib/html-report.ts';
import { entryJson, summaryLines } from '../lib/report.ts';
import { routePathFor, writeCompactRoute } from '../lib/route.ts';
import { readStoreFolders } from '../lib/store.ts';
import { buildTable, defaultTablePath, writeTable } from '../lib/table.ts';

export const OPTIONS = {
  store: { flag: '--store <dir>', help: 'store folder to pool; repeat to pool several (required)' },
  gate: { flag: '--gate <fraction>', help: 'least gain over the default to leave it, 0..1', default: DEFAULT_GATE },
  pdlRows: { flag: '--pdl-rows <n>', help: 'largest rows bucket where a .pdl candidate may be picked (lib/promote.ts says why)', default: DEFAULT_PDL_ROWS },
  out: { flag: '--out <file>', help: 'table file to write (default: <tables-dir>/<arch>/<device>/decode_gemm.json)' },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables', default: 'tables' },
  json: { flag: '--json', help: 'one JSON line per entry on stdout' },
  quiet: { flag: '--quiet', help: 'no summary on stderr (errors and warnings still print)' },
} satisfies Record<string, OptionSpec>;

export interface PromoteArgs {
  stores: string[];
  gate: number;
  pdlRows: number;
  out: string | null;
  tablesDir: string;
  json: boolean;
  quiet: boolean;
}

function makeCli() {
  return scriptCli('promote', {
    summary: 'pool stores of one machine and build into its per-device table (+ compact route and HTML report beside it)',
    usage: '--store <dir> [--store <dir>] [--gate 0.02] [--pdl-rows 128] [--out file] [--json] [--quiet]',
    examples: ['tsx scripts/promote.ts --store stores/h200', 'tsx scripts/promote.ts --store stores/a --store stores/b --gate 0.03 --json | jq .choice'],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): PromoteArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null) return null;
  const rawStores = options.store;
  const stores = (Array.isArray(rawStores) ? rawStores : rawStores === undefined ? [] : [rawStores]).map((s) => {
    if (typeof s !== 'string' && typeof s !== 'number') throw new UsageError('--store needs a folder');
    return String(s);
  });
  if (stores.length === 0) throw new UsageError('give at least one --store <dir>');
  const gateText = optionText(options, 'gate', OPTIONS.gate.default) ?? String(OPTIONS.gate.default);
  const gate = /^\d*\.?\d+(e-?\d+)?$/i.test(gateText) ? Number(gateText) : Number.NaN;
  if (!(gate >= 0 && gate <= 1)) throw new UsageError(`--gate must be a fraction in 0..1, got '${gateText}'`);
  return {
    stores,
    gate,
    pdlRows: optionInt(options, 'pdlRows', OPTIONS.pdlRows.default, 0, 128),
    out: optionText(options, 'out') ?? null,
    tablesDir: optionText(options, 'tablesDir', OPTIONS.tablesDir.default) ?? OPTIONS.tablesDir.default,
    json: options.json === true,
    quiet: options.quiet === true,
  };
}


export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const built = buildTable(readStoreFolders(args.stores, warn), { gate: args.gate, pdlRows: args.pdlRows, created: new Date() });
  if ('error' in built) throw new UsageError(built.error);
  for (const w of built.warnings) warn(w);
  const out = args.out ?? defaultTablePath(args.tablesDir, built.table.identity);
  const written = writeTable(out, built.table);
  if ('error' in written) throw new UsageError(written.error);
  // The compact route (what the C router reads) and the report sit beside the
  // table; the table is already written, so a failure here only warns.
  for (const extra of [writeCompactRoute(built.table, routePathFor(out)), writeReport(built.table, reportPathFor(out))]) {
    if ('error' in extra) warn(extra.error);
    else if (!args.quiet) say(`wrote ${extra.path}`);
  }
  if (!args.quiet) for (const line of summaryLines(built.table, { path: out, colors: colorsFor(process.stderr) })) say(line);
  if (args.json) for (const entry of built.table.entries) printJsonLine(entryJson(entry));
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('promote', () => main(process.argv.slice(2)));
