// prune-report: which rows of the space never mattered in pooled sweeps. Each
// candidate's median on every problem (build, shape, rows, routing) against the
// fastest there; a row never within the gate of it anywhere, and no class's
// default, nor any --table's choice, is listed to drop at the next re-sweep
// (lib/prune.ts holds the rule).
// Pool two or more sweeps (of this build or earlier ones) so one noisy run
// decides nothing. A bitwise class head (space.def's class column) is listed
// like any row: drop it only with its class, or name another head.
//   tsx bench/prune-report.ts --store stores/h200 --store old-stores/h200 [--table decode_gemm.json ...] [--gate 0.02] [--json]
// A table on stderr (the rows to drop, then the count line); one JSON line per row with --json.
import { EXIT, isMainModule, optionAll, optionFraction, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, warn, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { rowUse } from '../lib/prune.ts';
import { readStoreFolders } from '../lib/store.ts';
import { identityKey } from '../lib/identity.ts';
import { readTable } from '../lib/table.ts';

const OPTIONS = {
  store: opt.pooledStores(),
  table: { flag: '--table <file>', help: 'a table promoted from these stores: its choices are kept; repeat for several' },
  gate: opt.gate('how far above a problem\'s fastest a row may time and still count as mattering, 0..1', 0.02),
  json: opt.json('one JSON line per row on stdout'),
} satisfies Record<string, OptionSpec>;

export function main(argv: readonly string[]): number {
  const cli = scriptCli('prune-report', {
    summary: 'rows of the space that no pooled sweep timed within the gate of the best: candidates to drop',
    usage: '--store <dir> [--store <dir>] [--table <file>] [--gate 0.02] [--json]',
    examples: ['tsx bench/prune-report.ts --store stores/h200 --store /tmp/old/stores/h200 --gate 0.02'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const stores = opt.storeDirs(o);
  const gate = optionFraction(o, 'gate', OPTIONS.gate.default);
  const tables = optionAll(o, 'table');
  const picked = new Set<string>();
  for (const file of tables) {
    const read = readTable(file);
    if ('error' in read) throw new UsageError(read.error);
    for (const e of read.table.entries) picked.add(e.choice);
  }
  const records = readStoreFolders(stores, warn);
  const builds = new Set(records.map((r) => identityKey(r.identity))).size;
  const rows = rowUse(records, gate, picked);
  for (const r of rows) {
    if (o.json === true) printJsonLine({ kind: 'row', ...r, closest: Number.isFinite(r.closest) ? r.closest : null });
    if (r.verdict === 'drop') say(`drop ${r.candidate.padEnd(34)} ${String(r.problems).padStart(5)} problems, closest x${r.closest.toFixed(3)} of the best`);
  }
  const count = (v: string) => rows.filter((r) => r.verdict === v).length;
  say(`prune-report: ${rows.length} rows over ${builds} build(s) of ${stores.length} store(s), gate ${gate}: ${count('keep')} keep, ${count('drop')} drop, ${count('untimed')} never timed`);
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('prune-report', () => main(process.argv.slice(2)));
