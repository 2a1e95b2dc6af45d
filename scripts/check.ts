// check: the main job (`npm start`). On the embedded default backend (a GPU
// build when one is present and starts, else the CPU), sweep, parity and
// promote the decode linears of one model into this machine's table, then say
// what was picked and why, and whether the table would be used here.
//   tsx scripts/check.ts [--model Qwen3-0.6B] [--rows 1,2,4,8] [--store dir] [--quiet]
// Each step is the script of the same name, run in this process.
//
// --quick is the fleet check instead (lib/fleet.ts): the table that would load
// here (or --table) has each pick's parity checked and its time measured
// afresh against the table's recorded median; one JSON summary line on stdout
// for scripts/fleet.ts to pool. Exit 0 pass, 1 flagged, 3 table refused.
//   tsx scripts/check.ts --quick [--table file] [--node name] > node.jsonl
import * as path from 'node:path';
import { asUsage, colorsFor, EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../lib/cli.ts';
import { openKpick } from '../lib/ffi.ts';
import { DEFAULT_BOUNDS, nodeName, nodeSummary, probeEntries, refusedSummary, shapeLabel, type Bounds } from '../lib/fleet.ts';
import { guardTable } from '../lib/guard.ts';
import { findModel, parseDtypes, parseRows } from '../lib/models.ts';
import { buildOf } from '../lib/route.ts';
import { defaultTablePath, readTable } from '../lib/table.ts';
import { main as parityMain } from './parity.ts';
import { main as promoteMain } from './promote.ts';
import { main as refuseCheckMain } from './refuse-check.ts';
import { main as sweepMain } from './sweep.ts';

export const OPTIONS = {
  model: { flag: '--model <name>', help: 'model preset whose decode linears are tuned', default: 'Qwen3-0.6B' },
  rows: { flag: '--rows <list>', help: 'rows buckets M', default: '1,2,4,8' },
  dtype: { flag: '--dtype <list>', help: 'bf16, fp16 or both', default: 'bf16' },
  store: { flag: '--store <dir>', help: 'store folder (default: a new stores/check-<time>; name an old one to resume it)' },
  samples: { flag: '--samples <n>', help: 'timings per candidate per round', default: 3 },
  rounds: { flag: '--rounds <n>', help: 'rounds, candidates interleaved in each', default: 3 },
  copies: { flag: '--copies <n>', help: 'rotating weight copies; 0: the library picks > 8x the LLC', default: 0 },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables', default: 'tables' },
  backend: { flag: '--backend <name>', help: 'cpu | cuda | hip (default: $KPICK_BACKEND, else the best build)' },
  json: { flag: '--json', help: 'the promoted entries as JSON lines on stdout', default: false },
  quiet: { flag: '--quiet', help: 'only errors and the final summary', default: false },
  quick: { flag: '--quick', help: "fleet check: the table's picks, parity and time against its recorded medians; one JSON summary on stdout", default: false },
  table: { flag: '--table <file>', help: '--quick: the table to probe (default: the one that would load here)' },
  node: { flag: '--node <name>', help: '--quick: node name in the summary (default: host name, + /gpu<n> under CUDA_/HIP_VISIBLE_DEVICES)' },
  maxGeomean: { flag: '--max-geomean <x>', help: "--quick: flag the node past this geomean of measured/recorded", default: DEFAULT_BOUNDS.geomean },
  maxRatio: { flag: '--max-ratio <x>', help: '--quick: flag the node when any entry is past this measured/recorded', default: DEFAULT_BOUNDS.entry },
} satisfies Record<string, OptionSpec>;

export interface CheckArgs {
  model: string;
  rows: string;
  dtype: string;
  store: string;
  samples: number;
  rounds: number;
  copies: number;
  tablesDir: string;
  backend: string | undefined;
  json: boolean;
  quiet: boolean;
  /** set for --quick: the fleet check */
  quick: { table: string | undefined; node: string | undefined; bounds: Bounds } | null;
}

/** A ratio bound: a number past 1 (below it every healthy node would be flagged). */
export function parseBound(text: string | undefined, flag: string, fallback: number): number {
  if (text === undefined) return fallback;
  const value = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 1 && value <= 100)) throw new UsageError(`${flag} must be a ratio in 1..100, got '${text}'`);
  return value;
}

/** Parses argv (without node and the script); null when --help was printed. */
export function parseCheckArgs(argv: readonly string[], now = new Date()): CheckArgs | null {
  const cli = scriptCli('check', {
    summary: 'the main job: sweep, parity and promote one model on this machine, then summarise',
    usage: '[--model Qwen3-0.6B] [--rows 1,2,4,8] [--store dir]',
    examples: ['npm start', 'npm start -- --model Qwen3-1.7B --rows 1,4,16', 'tsx scripts/check.ts --quick --node gpu-07 >> fleet.jsonl'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return null;
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  // validate here, so bad input stops the job before any step runs
  asUsage(() => {
    findModel(optionText(o, 'model', OPTIONS.model.default)!);
    parseRows(optionText(o, 'rows', OPTIONS.rows.default)!);
    parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default)!);
  });
  return {
    model: optionText(o, 'model', OPTIONS.model.default)!,
    rows: optionText(o, 'rows', OPTIONS.rows.default)!,
    dtype: optionText(o, 'dtype', OPTIONS.dtype.default)!,
    store: optionText(o, 'store') ?? path.join('stores', `check-${stamp}`),
    samples: optionInt(o, 'samples', OPTIONS.samples.default, 1, 1000),
    rounds: optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000),
    copies: optionInt(o, 'copies', OPTIONS.copies.default, 0, 4096),
    tablesDir: optionText(o, 'tablesDir', OPTIONS.tablesDir.default)!,
    backend: optionText(o, 'backend'),
    json: o.json === true,
    quiet: o.quiet === true,
    quick: o.quick === true
      ? {
          table: optionText(o, 'table'),
          node: optionText(o, 'node'),
          bounds: {
            geomean: parseBound(optionText(o, 'maxGeomean'), '--max-geomean', DEFAULT_BOUNDS.geomean),
            entry: parseBound(optionText(o, 'maxRatio'), '--max-ratio', DEFAULT_BOUNDS.entry),
          },
        }
      : null,
  };
}

/** The fleet check: probe the table's picks, print one summary line; exit 0, 1 flagged, 3 refused. */
function quickCheck(args: CheckArgs, quick: NonNullable<CheckArgs['quick']>): number {
  if (quick.table?.endsWith('.route')) throw new UsageError('--table: the fleet check needs the JSON table (it holds the recorded medians), not the compact .route');
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
  const kept = new Set(verdict.kept.map((e) => `${e.op}/${e.dtype}/${e.n}/${e.k}/${e.bucket}/${e.choice}`));
  const entries = table.table.entries.filter((e) => kept.has(`${e.op}/${e.dtype}/${e.n}/${e.k}/${e.bucket}/${e.choice}`));
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

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseCheckArgs(argv);
  if (args === null) return EXIT.ok;
  if (args.quick !== null) return quickCheck(args, args.quick);
  const backend = args.backend === undefined ? [] : ['--backend', args.backend];
  const quiet = args.quiet ? ['--quiet'] : [];
  const steps: [string, () => Promise<number> | number][] = [
    ['sweep', () => sweepMain(['--model', args.model, '--rows', args.rows, '--dtype', args.dtype, '--store', args.store,
      '--samples', String(args.samples), '--rounds', String(args.rounds), '--copies', String(args.copies), ...backend, ...quiet])],
    ['parity', () => parityMain(['--model', args.model, '--rows', args.rows, '--dtype', args.dtype, '--seeds', '1', ...backend, ...quiet])],
    // promote's summary is the job's answer: printed even under --quiet
    ['promote', () => promoteMain(['--store', args.store, '--tables-dir', args.tablesDir, ...(args.json ? ['--json'] : [])])],
    ['refuse-check', () => refuseCheckMain(['--tables-dir', args.tablesDir, ...backend])],
  ];
  const started = Date.now();
  for (const [name, step] of steps) {
    if (!args.quiet) say(`== check: ${name}`);
    const code = await step();
    if (code !== EXIT.ok) {
      say(`check: ${name} exited ${code}; stopping (store: ${args.store})`);
      return code;
    }
  }
  say(`check: done in ${((Date.now() - started) / 1000).toFixed(0)} s; store ${args.store}`);
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('check', () => main(process.argv.slice(2)));
