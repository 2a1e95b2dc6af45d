// agree: do two tables of one machine pick alike? Per entry: same, within the
// gate (each table times the other's pick less than the gate slower than its
// own), differ, or in one table only. lib/agree.ts holds the rule.
//   tsx scripts/agree.ts --table tables-shard/.../decode_gemm.json --table tables-one/.../decode_gemm.json
// Exit 0 when every entry agrees, 1 when any differs or is in one table only, 2 on bad usage.
import { EXIT, isMainModule, optionAll, optionFraction, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { compareChoices, conflicting, tablesAgree } from '../lib/agree.ts';
import { DEFAULT_GATE } from '../lib/promote.ts';
import type { Table } from '../lib/schema.ts';
import { readTable } from '../lib/table.ts';
import { shapeText } from '../lib/shape-key.ts';

export const OPTIONS = {
  table: { flag: '--table <file>', help: 'a table; give exactly two' },
  gate: opt.gate('how much slower the other pick may time and still agree, 0..1', DEFAULT_GATE),
  json: opt.json('one JSON line per entry on stdout'),
  quiet: opt.quiet('only the verdict line on stderr, not each entry that is not the same'),
} satisfies Record<string, OptionSpec>;

export function main(argv: readonly string[]): number {
  const cli = scriptCli('agree', {
    summary: 'compare the choices of two tables of one machine, entry by entry',
    usage: '--table a.json --table b.json [--gate 0.02] [--json] [--quiet]',
    examples: ['tsx scripts/agree.ts --table a/decode_gemm.json --table b/decode_gemm.json --json'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const files = optionAll(o, 'table');
  if (files.length !== 2) throw new UsageError(`give exactly two --table files, got ${files.length}`);
  const gate = optionFraction(o, 'gate', OPTIONS.gate.default);
  const [a, b] = files.map((f): Table => {
    const read = readTable(f);
    if ('error' in read) throw new UsageError(read.error);
    return read.table;
  }) as [Table, Table];
  const rows = compareChoices(a, b, gate);
  const count = (what: string) => rows.filter((r) => r.agreement === what).length;
  for (const r of rows) {
    if (o.json === true) printJsonLine({ kind: 'agreement', ...r });
    if (r.agreement !== 'same' && o.quiet !== true) {
      const ratios = r.a_ratio === null || r.b_ratio === null ? '' : ` (other pick x${r.a_ratio.toFixed(3)} in a, x${r.b_ratio.toFixed(3)} in b; conflict x${(r.conflict as number).toFixed(3)})`;
      say(`${r.agreement.padEnd(11)} ${r.dtype} ${r.op} ${shapeText(r)} m=${r.bucket}: a ${r.a ?? '-'}, b ${r.b ?? '-'}${ratios}`);
    }
  }
  const agree = tablesAgree(rows);
  const apart = conflicting(rows, gate).length;
  say(`agree: ${rows.length} entries: ${count('same')} same, ${count('within-gate')} within the gate ${gate}, ${count('differ')} differ ` +
    `(${apart} timed apart past the gate, ${count('differ') - apart} a gap at the gate split by it), ` +
    `${count('only-a') + count('only-b')} in one table only: ${agree ? 'the tables agree' : 'the tables DISAGREE'}`);
  return agree ? EXIT.ok : EXIT.failed;
}

if (isMainModule(import.meta.url)) void runMain('agree', () => main(process.argv.slice(2)));
