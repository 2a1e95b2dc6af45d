// family-ab: would a family of rows change the table? The pooled stores are
// promoted with the family's records and without them, by promote's own rule,
// and compared (lib/family-ab.ts): the entries whose choice the family takes,
// and per rows bucket how many choices are the family's and the choices' time
// over the read floor (geomean) with and without it. For a dev patch's A/B:
// sweep the patched build into a store, then ask this on any machine.
//   tsx bench/family-ab.ts --store stores/ab --family '/^blaslt\.sk/' [--gate 0.02] [--json]
// A table on stderr; with --json one line per changed entry (kind "change") and per bucket (kind "bucket").
import { EXIT, isMainModule, optionFraction, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, warn, type OptionSpec } from '../lib/cli.ts';
import { familyAB, familyTest } from '../lib/family-ab.ts';
import * as opt from '../lib/options.ts';
import { readStoreFolders } from '../lib/store.ts';

const OPTIONS = {
  store: opt.pooledStores(),
  family: { flag: '--family <rows>', help: 'the rows to judge: /regex/ over row names, or comma separated globs (required)' },
  gate: opt.gate('promote\'s gate: the least gain over the default that moves an entry, 0..1', 0.02),
  json: opt.json('one JSON line per changed entry and per rows bucket on stdout'),
} satisfies Record<string, OptionSpec>;

const num = (x: number | null) => (x === null ? '-' : x.toFixed(3));

export function main(argv: readonly string[]): number {
  const cli = scriptCli('family-ab', {
    summary: 'the table promoted from the stores with a family of rows and without it, compared',
    usage: '--store <dir> [--store <dir>] --family </regex/|globs> [--gate 0.02] [--json]',
    examples: ["tsx bench/family-ab.ts --store stores/ab --family '/^wgmma\\.m64\\.t4\\.s[48]/'"],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const stores = opt.storeDirs(o);
  const spec = optionText(o, 'family');
  if (spec === undefined) throw new UsageError('give --family </regex/|globs>');
  const inFamily = familyTest(spec);
  if ('error' in inFamily) throw new UsageError(inFamily.error);
  const gate = optionFraction(o, 'gate', OPTIONS.gate.default);
  const ab = familyAB(readStoreFolders(stores, warn), inFamily, gate);
  if ('error' in ab) throw new UsageError(ab.error);
  for (const c of ab.changes) {
    if (o.json === true) printJsonLine({ kind: 'change', ...c });
    say(`${c.key.padEnd(36)} ${c.with.padEnd(26)} ${c.with_us.toFixed(2).padStart(9)} us over ${c.without.padEnd(26)} ${c.without_us.toFixed(2).padStart(9)} us: x${(c.without_us / c.with_us).toFixed(3)}`);
  }
  say('| rows | entries | the family\'s | choice / floor with it | without it |');
  say('| --- | --- | --- | --- | --- |');
  for (const b of ab.buckets) {
    if (o.json === true) printJsonLine({ kind: 'bucket', ...b });
    say(`| ${b.bucket} | ${b.entries} | ${b.picked} | ${num(b.with_floor)} | ${num(b.without_floor)} |`);
  }
  say(`family-ab: ${ab.records} records of the family; it takes ${ab.changes.length} of ${ab.buckets.reduce((s, b) => s + b.entries, 0)} entries (gate ${gate})`);
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('family-ab', () => main(process.argv.slice(2)));
