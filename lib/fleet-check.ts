// The fleet check of one node (scripts/check.ts --quick): the table that would
// load here has each pick's parity checked and its time measured afresh
// against the table's recorded median; one JSON summary line on stdout for
// scripts/fleet.ts to pool. Exit 0 pass, 1 flagged, 3 table refused.
import { asUsage, colorsFor, EXIT, printJsonLine, say, UsageError } from './cli.ts';
import { openKpick } from './ffi.ts';
import { nodeName, nodeSummary, probeEntries, refusedSummary, shapeLabel, type Bounds } from './fleet.ts';
import { guardTable } from './guard.ts';
import { buildOf } from './route.ts';
import { defaultTablePath, readTable } from './table.ts';
import { regularFile } from './options.ts';
import { shapeId } from './shape-key.ts';
import type { KeptEntry } from './guard.ts';

/** How a fleet check times the picks, on which library. */
export interface QuickCheck {
  samples: number;
  rounds: number;
  copies: number;
  tablesDir: string;
  backend: string | undefined;
  quiet: boolean;
}

/** Which table it probes, the node's name, and the bounds it is held to. */
export interface QuickTarget {
  table: string | undefined;
  node: string | undefined;
  bounds: Bounds;
}

/** A ratio bound: a number past 1 (below it every healthy node would be flagged). */
export function parseBound(text: string | undefined, flag: string, fallback: number): number {
  if (text === undefined) return fallback;
  const value = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 1 && value <= 100)) throw new UsageError(`${flag} must be a ratio in 1..100, got '${text}'`);
  return value;
}

/** The fleet check: probe the table's picks, print one summary line; exit 0, 1 flagged, 3 refused. */
export function quickCheck(args: QuickCheck, quick: QuickTarget): number {
  if (quick.table?.endsWith('.route')) throw new UsageError('--table: the fleet check needs the JSON table (it holds the recorded medians), not the compact .route');
  // a table named here must be a file: a typo is bad usage, not a node without a table (refused, exit 3)
  if (quick.table !== undefined) asUsage(() => regularFile('--table', quick.table!));
  const kpick = openKpick(args.backend);
  const build = buildOf(kpick);
  const file = quick.table ?? defaultTablePath(args.tablesDir, build.identity);
  const input = { node: nodeName(quick.node), identity: build.identity, table: file, bounds: quick.bounds, at: new Date() };
  const verdict = guardTable(file, build);
  const table = verdict.used ? readTable(file) : null;
  if (!verdict.used || table === null || 'error' in table) {
    const why = !verdict.used ? verdict.line : table !== null && 'error' in table ? table.error : 'unreadable';
    printJsonLine(refusedSummary(input, why));
    say(`check --quick: ${input.node.node}: ${why}`);
    return EXIT.refused;
  }
  // entries the guard dropped (a choice not in this build ...) are not probed
  const keyOf = (e: KeptEntry) => `${e.dtype}/${shapeId(e)}/${e.bucket}/${e.choice}`;
  const kept = new Set(verdict.kept.map(keyOf));
  const entries = table.table.entries.filter((e) => kept.has(keyOf(e)));
  const probed = probeEntries(kpick, entries, { samples: args.samples, rounds: args.rounds, copies: args.copies, seed: 1 });
  const summary = nodeSummary(input, probed);
  printJsonLine(summary);
  if (!args.quiet) {
    for (const e of probed) {
      const times = e.measured_us === null ? 'not timed' : `${e.measured_us.toFixed(2)} us vs ${e.recorded_us?.toFixed(2) ?? '-'} us recorded, x${e.ratio?.toFixed(3) ?? '-'}`;
      say(`${shapeLabel(e).padEnd(30)} ${e.choice.padEnd(22)} ${times}  parity ${e.parity}`);
    }
  }
  const c = colorsFor(process.stderr);
  const g = summary.geomean_ratio === null ? '-' : summary.geomean_ratio.toFixed(3);
  say(`check --quick: ${summary.node} (${summary.device}): ${summary.verdict === 'pass' ? c.green('pass') : c.red('FLAGGED')}; ${probed.length} entries, geomean x${g} of recorded`);
  for (const f of summary.flags) say(`  ${f}`);
  return summary.verdict === 'pass' ? EXIT.ok : EXIT.failed;
}
