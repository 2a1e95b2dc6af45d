// fleet: pool the fleet-check summaries of many nodes (scripts/check.ts
// --quick, one JSON line each) and flag the odd node: pick timings past the
// bounds, a parity failure, a refused table, an identity unlike the fleet's.
//   tsx scripts/fleet.ts node-*.jsonl          (or summaries on stdin: ... | tsx scripts/fleet.ts)
// Exit 0 when no node is flagged, 1 when any is (each named with its shapes),
// 2 on bad usage or input that is not a summary.
import { readFileSync } from 'node:fs';
import { colorsFor, EXIT, isMainModule, optionText, parseWithCacArgs, printJsonLine, runMain, say, scriptCli, stdin, UsageError, warn, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { DEFAULT_BOUNDS, parseSummaries, poolFleet } from '../lib/fleet.ts';
import { parseBound } from '../lib/fleet-check.ts';

export const OPTIONS = {
  maxGeomean: { flag: '--max-geomean <x>', help: "flag a node past this geomean of measured/recorded over its picks", default: DEFAULT_BOUNDS.geomean },
  maxRatio: { flag: '--max-ratio <x>', help: 'flag a node when any pick is past this measured/recorded', default: DEFAULT_BOUNDS.entry },
  json: opt.json('one JSON line per node on stdout'),
  quiet: opt.quiet('only flagged nodes on stderr'),
} satisfies Record<string, OptionSpec>;

export async function main(argv: readonly string[]): Promise<number> {
  const cli = scriptCli('fleet', {
    summary: "pool many nodes' fleet-check summaries and flag the odd node",
    usage: '[summary.jsonl ...] [--max-geomean 1.1] [--max-ratio 1.25] [--json]',
    examples: ['tsx scripts/fleet.ts logs/fleet-*.jsonl', 'cat */fleet.jsonl | tsx scripts/fleet.ts --max-ratio 1.5 --json'],
  }, OPTIONS);
  const o = parseWithCacArgs(cli, argv);
  if (o === null) return EXIT.ok;
  const bounds = {
    geomean: parseBound(optionText(o.options, 'maxGeomean'), '--max-geomean', DEFAULT_BOUNDS.geomean),
    entry: parseBound(optionText(o.options, 'maxRatio'), '--max-ratio', DEFAULT_BOUNDS.entry),
  };
  const sources = o.args.length === 0 ? ['-'] : o.args;
  const summaries = [];
  for (const source of sources) {
    let text: string;
    try {
      text = source === '-' ? stdin.read() : readFileSync(source, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${source === '-' ? 'stdin' : source}: ${(err as Error).message}`);
    }
    const parsed = parseSummaries(text, source === '-' ? 'stdin' : source);
    if (parsed.errors.length > 0) throw new UsageError(parsed.errors[0] + (parsed.errors.length > 1 ? ` (and ${parsed.errors.length - 1} more)` : ''));
    summaries.push(...parsed.summaries);
  }
  if (summaries.length === 0) throw new UsageError('no fleet-check summaries to pool');
  const pooled = poolFleet(summaries, bounds);
  for (const node of pooled.repeated) warn(`node ${node} has several summaries; the last one counts`);
  const c = colorsFor(process.stderr);
  const flagged = pooled.nodes.filter((n) => n.flags.length > 0);
  for (const n of pooled.nodes) {
    if (o.options.json === true) printJsonLine({ kind: 'fleet-node', ...n, flagged: n.flags.length > 0 });
    const g = n.geomean_ratio === null ? '-' : n.geomean_ratio.toFixed(3);
    const w = n.worst_ratio === null ? '-' : n.worst_ratio.toFixed(3);
    if (n.flags.length === 0 && o.options.quiet === true) continue;
    say(`${n.flags.length === 0 ? c.green('ok     ') : c.red('FLAGGED')} ${n.node} (${n.device}): ${n.entries} picks, geomean x${g}, worst x${w}`);
    for (const f of n.flags) say(`        ${f}`);
  }
  say(`fleet: ${pooled.nodes.length} nodes, ${flagged.length} flagged (bounds: geomean ${bounds.geomean}, any pick ${bounds.entry})` +
    (flagged.length > 0 ? `: ${flagged.map((n) => n.node).join(', ')}` : ''));
  return flagged.length > 0 ? EXIT.failed : EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('fleet', () => main(process.argv.slice(2)));
