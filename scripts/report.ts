// report: a table (or stores, promoted in memory) as one self-contained HTML
// page: a chart per shape against the read floor and ceiling, the picks and
// parity failures marked, the route against the default per bucket.
//   tsx scripts/report.ts --table tables/x86_64/my-cpu/decode_gemm.json
//   tsx scripts/report.ts --store stores/a --store stores/b --out report.html
// With --store nothing but the page is written: the table is built in memory.
// Exit 0 when written; 2 on bad usage, an unreadable or invalid table, a
// missing or empty store, mixed identities or an unwritable output.
import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import { EXIT, isMainModule, optionAll, optionFraction, optionText, parseWithCac, printJsonLine, runMain, say, UsageError, warn, scriptCli, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { bucketSummaries, MAX_CHARTED, METRICS, parityFailures, readCeiling, reportPathFor, shapeGroups, writeReport, type Metric } from '../lib/html-report.ts';
import { chooseIdentity, DEFAULT_GATE } from '../lib/promote.ts';
import type { Table } from '../lib/schema.ts';
import { readStoreFolders } from '../lib/store.ts';
import { buildTable, readTable } from '../lib/table.ts';

const OPTIONS = {
  table: { flag: '--table <file>', help: 'table to report (decode_gemm.json)' },
  store: { flag: '--store <dir>', help: 'instead of --table: stores to pool and promote in memory; repeat to pool several' },
  out: { flag: '--out <file>', help: 'page to write (default: beside --table as .html; report.html with --store)' },
  gate: opt.gate('with --store: least gain over the default to leave it, 0..1', DEFAULT_GATE),
  metric: { flag: '--metric <unit>', help: `y axis of the charts: ${METRICS.join(' or ')}`, default: 'gbps' },
  maxCharted: { flag: '--max-charted <n>', help: 'candidates drawn per chart (the default, picks and parity failures always are); the rest are listed', default: MAX_CHARTED },
  json: opt.json('one JSON line on stdout: the page written and what it shows'),
  quiet: opt.quiet('no summary on stderr (errors and warnings still print)'),
} satisfies Record<string, OptionSpec>;

export type ReportSource = { kind: 'table'; file: string } | { kind: 'store'; dirs: string[]; gate: number };

export interface ReportArgs {
  source: ReportSource;
  out: string;
  metric: Metric;
  maxCharted: number;
  json: boolean;
  quiet: boolean;
}

function makeCli() {
  return scriptCli('report', {
    summary: 'write a table as one self-contained HTML page (inline SVG charts, no network)',
    usage: '--table <file> | --store <dir> [--store <dir>] [--out page.html] [--metric gbps|us] [--json]',
    examples: ['tsx scripts/report.ts --table tables/x86_64/my-cpu/decode_gemm.json', 'tsx scripts/report.ts --store stores/a --store stores/b --out report.html --metric us'],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help or --version was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): ReportArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null || options.version === true) return null;
  const stores = optionAll(options, 'store');
  const table = optionText(options, 'table');
  if ((table === undefined) === (stores.length === 0)) throw new UsageError('give either --table <file> or --store <dir> (not both)');
  if (table === '') throw new UsageError('--table needs a file');
  const metric = optionText(options, 'metric', OPTIONS.metric.default) as string;
  if (!(METRICS as readonly string[]).includes(metric)) throw new UsageError(`--metric must be one of ${METRICS.join(', ')}, got '${metric}'`);
  const gate = optionFraction(options, 'gate', OPTIONS.gate.default);
  if (table !== undefined && options.gate !== undefined) throw new UsageError('--gate applies to --store only: a table keeps the gate it was built with');
  const source: ReportSource = table !== undefined ? { kind: 'table', file: table } : { kind: 'store', dirs: stores, gate };
  const out = optionText(options, 'out') ?? (table !== undefined ? reportPathFor(table) : 'report.html');
  if (out === '') throw new UsageError('--out needs a file');
  return {
    source,
    out,
    metric: metric as Metric,
    maxCharted: maxCharted(options),
    json: options.json === true,
    quiet: options.quiet === true,
  };
}

function maxCharted(options: Record<string, unknown>): number {
  const text = optionText(options, 'maxCharted', OPTIONS.maxCharted.default) as string;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 1 && value <= 1000)) throw new UsageError(`--max-charted must be an integer in 1..1000, got '${text}'`);
  return value;
}


/** The table to report and a line saying where it came from. */
function loadSource(source: ReportSource): { table: Table; label: string } {
  if (source.kind === 'table') {
    const read = readTable(source.file);
    if ('error' in read) throw new UsageError(read.error);
    return { table: read.table, label: source.file };
  }
  // a store resumed after a rebuild holds two builds' records: the newest build's, the others counted
  const chosen = chooseIdentity(readStoreFolders(source.dirs, warn));
  if ('error' in chosen) throw new UsageError(chosen.error);
  for (const s of chosen.skipped) warn(`skipped ${s.count} records of another build, identity ${s.tag} (${s.differs})`);
  const built = buildTable(chosen.records, { gate: source.gate, created: new Date() });
  if ('error' in built) throw new UsageError(built.error);
  for (const w of built.warnings) warn(w);
  return { table: built.table, label: `store ${source.dirs.join(', ')} (promoted in memory, not written)` };
}

/** The page never replaces what it reports: the table, or a record file of a store. */
function refuseInputAsOut(out: string, source: ReportSource): void {
  const stat = (f: string) => {
    try {
      return statSync(f);
    } catch {
      return undefined; // not there (or unreachable): not an input; the write says why it cannot write
    }
  };
  const same = (a: string, b: string) => {
    const [x, y] = [stat(a), stat(b)];
    return x !== undefined && y !== undefined && x.dev === y.dev && x.ino === y.ino;
  };
  const input = source.kind === 'table' ? same(out, source.file) : out.endsWith('.jsonl') && source.dirs.some((d) => same(dirname(out), d));
  if (input) throw new UsageError(`--out ${out} is ${source.kind === 'table' ? 'the table' : 'a file of the store'}: refusing to replace it, nothing written`);
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const { table, label } = loadSource(args.source);
  refuseInputAsOut(args.out, args.source);
  const written = writeReport(table, args.out, { metric: args.metric, source: label, maxCharted: args.maxCharted });
  if ('error' in written) throw new UsageError(written.error);
  const shapes = shapeGroups(table).length;
  const failures = parityFailures(table.entries).length;
  const ceiling = readCeiling(table);
  if (!args.quiet) {
    const ceilingText = ceiling ? `read ceiling ${ceiling.gbps.toFixed(1)} GB/s` : 'no read floor';
    say(`wrote ${args.out}: ${shapes} shapes, ${table.entries.length} entries, ${failures} parity failures, ${ceilingText}`);
  }
  if (args.json) {
    printJsonLine({
      out: args.out,
      source: label,
      metric: args.metric,
      shapes,
      entries: table.entries.length,
      parity_failures: failures,
      ceiling_gbps: ceiling?.gbps ?? null,
      buckets: bucketSummaries(table).map((s) => ({ ...s, bucket: s.bucket === 0 ? 'all' : s.bucket })),
    });
  }
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('report', () => main(process.argv.slice(2)));
