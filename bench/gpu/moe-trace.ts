// moe-trace: moe.wgmma's five nodes (plan, gather, gate/up, down, combine) from
// bench/gpu/kernel-trace.c's trace of a run that launches them (a sweep of a moe
// preset under the tracer), per tile, grid and (--up-split) routing, as medians
// (lib/moe-trace.ts). A table on stderr; one JSON line per group with --json.
//   tsx bench/gpu/moe-trace.ts --trace t/trace.txt --up-split 120 --json
import { asUsage, EXIT, isMainModule, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../../lib/cli.ts';
import * as opt from '../../lib/options.ts';
import { groupMoeLaunches, MOE_NODES, moeLaunches } from '../../lib/moe-trace.ts';
import { readTraceFile } from '../../lib/step-trace.ts';

const OPTIONS = {
  trace: opt.trace(),
  upSplit: { flag: '--up-split <us>', help: 'group launches apart by whether gate/up ran under this many us (uniform and skewed routing read different experts); default: no split' },
  json: opt.json('one JSON line per group on stdout'),
} satisfies Record<string, OptionSpec>;

export function main(argv: readonly string[]): number {
  const cli = scriptCli('moe-trace', "moe.wgmma's nodes from a kernel trace", OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const args = asUsage(() => {
    const trace = optionText(o, 'trace');
    if (!trace) throw new Error('--trace is required');
    const splitText = optionText(o, 'upSplit');
    const upSplit = splitText === undefined ? null : Number(splitText);
    if (upSplit !== null && !(upSplit > 0)) throw new Error('--up-split must be a positive number of us');
    return { trace, upSplit };
  });
  const { launches, skipped } = moeLaunches(readTraceFile(args.trace));
  if (launches.length === 0) throw new UsageError(`${args.trace}: no moe.wgmma launch (plan, gather, gate/up, down, combine)`);
  say(`| tile | grid | side | launches | ${MOE_NODES.join(' | ')} | span | gaps |`);
  say(`|${' --- |'.repeat(MOE_NODES.length + 6)}`);
  for (const g of groupMoeLaunches(launches, args.upSplit)) {
    if (o.json === true) printJsonLine({ kind: 'moe_nodes', ...g });
    const f = (v: number) => v.toFixed(1);
    say(`| ${g.tile} | ${g.grid.join('x')} | ${g.side ?? '-'} | ${g.launches} | ${MOE_NODES.map((n) => f(g.us[n])).join(' | ')} | ${f(g.span)} | ${f(g.gaps)} |`);
  }
  say(`moe-trace: ${launches.length} launches, ${skipped} plan kernel(s) began no whole launch; us, medians`);
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('moe-trace', () => main(process.argv.slice(2)));
