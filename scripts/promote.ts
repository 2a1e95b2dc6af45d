// promote: pool one or more stores of one machine and build into the per-device
// table, tables/<arch>/<device>/decode_gemm.json, merged into the table already
// there (entries the records do not cover stay). The rule is lib/promote.ts,
// the job lib/promote-job.ts.
//   tsx scripts/promote.ts --store stores/a [--store stores/b] [--gate 0.02] [--pdl-rows 128] [--identity tag] [--replace] [--out file] [--json] [--quiet]
//   tsx scripts/promote.ts --route-only --table tables/.../decode_gemm.json   (after a hand edit of the JSON)
// Exit 0 when written; 2 on bad usage, a missing or empty store, an unknown
// --identity, a refused table in the way or an unwritable output (nothing is
// written then); 3 when --route-only is given a table the JSON reader refuses.
import { EXIT, isMainModule, optionFraction, optionInt, optionText, parseWithCac, runMain, UsageError, scriptCli, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { DEFAULT_GATE, DEFAULT_PDL_ROWS } from '../lib/promote.ts';
import { promoteJob, type PromoteJob } from '../lib/promote-job.ts';
import { MAX_ROWS } from '../lib/schema.ts';

export const OPTIONS = {
  store: opt.pooledStores(),
  gate: opt.gate('least gain over the default to leave it, 0..1', DEFAULT_GATE),
  pdlRows: { flag: '--pdl-rows <n>', help: 'largest rows bucket where a .pdl candidate may be picked (lib/promote.ts says why)', default: DEFAULT_PDL_ROWS },
  identity: { flag: '--identity <tag>', help: "which build's records to promote when a store holds several (the tags are listed; default: the newest record's)" },
  replace: { flag: '--replace', help: 'start the table afresh instead of merging into the one there' },
  out: { flag: '--out <file>', help: 'table file to write (default: <tables-dir>/<arch>/<device>/decode_gemm.json)' },
  tablesDir: opt.tablesDir(),
  routeOnly: { flag: '--route-only', help: 'compile the .route of --table again from its JSON (after a hand edit of `choice`); nothing else' },
  table: { flag: '--table <file>', help: 'with --route-only: the JSON table' },
  json: opt.json('one JSON line per entry on stdout'),
  quiet: opt.quiet('no summary on stderr (errors and warnings still print)'),
} satisfies Record<string, OptionSpec>;

export type PromoteArgs = PromoteJob;

function makeCli() {
  return scriptCli('promote', {
    summary: 'pool stores of one machine and build into its per-device table, merged into the one there (+ compact route and HTML report beside it)',
    usage: '--store <dir> [--store <dir>] [--gate 0.02] [--pdl-rows 128] [--identity tag] [--replace] [--out file] [--json] [--quiet] | --route-only --table <file>',
    examples: [
      'tsx scripts/promote.ts --store stores/h200',
      'tsx scripts/promote.ts --store stores/a --store stores/b --gate 0.05 --out /tmp/decode_gemm.json --json',
      'tsx scripts/promote.ts --route-only --table tables/sm_90/nvidia-h200/decode_gemm.json',
    ],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): PromoteArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null) return null;
  const json = options.json === true;
  const quiet = options.quiet === true;
  if (options.routeOnly === true) {
    const table = optionText(options, 'table');
    if (table === undefined) throw new UsageError('--route-only needs --table <file> (the JSON table to compile)');
    const stray = ['store', 'gate', 'pdlRows', 'identity', 'replace', 'out'].filter((o) => options[o] !== undefined && options[o] !== (OPTIONS[o as keyof typeof OPTIONS] as OptionSpec).default);
    if (stray.length > 0) throw new UsageError(`--route-only takes only --table (not --${stray[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)})`);
    return { routeOnly: true, table, json, quiet };
  }
  if (options.table !== undefined) throw new UsageError('--table goes with --route-only');
  const stores = opt.storeDirs(options);
  const gate = optionFraction(options, 'gate', OPTIONS.gate.default);
  const identity = optionText(options, 'identity') ?? null;
  if (identity !== null && !/^[0-9a-f]{1,12}$/.test(identity)) throw new UsageError(`--identity must be a tag of up to 12 hex digits (promote lists them), got '${identity}'`);
  return {
    routeOnly: false,
    stores,
    gate,
    pdlRows: optionInt(options, 'pdlRows', OPTIONS.pdlRows.default, 0, MAX_ROWS),
    identity,
    replace: options.replace === true,
    out: optionText(options, 'out') ?? null,
    tablesDir: optionText(options, 'tablesDir', OPTIONS.tablesDir.default) ?? OPTIONS.tablesDir.default,
    json,
    quiet,
  };
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  return args === null ? EXIT.ok : promoteJob(args);
}

if (isMainModule(import.meta.url)) void runMain('promote', () => main(process.argv.slice(2)));
