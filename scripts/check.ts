// check: the main job (`npm start`). On the embedded default backend (a GPU
// build when one is present and starts, else the CPU), sweep, parity and
// promote the decode linears of one model into this machine's table, then say
// what was picked and why, and whether the table would be used here.
//   tsx scripts/check.ts [--model Qwen3-0.6B] [--rows 1,2,4,8] [--store dir] [--quiet]
// Each step is the job of the script of the same name, called in this process:
// lib/sweep-job.ts, lib/parity-run.ts, lib/promote-job.ts, lib/refuse-check.ts.
//
// --quick is the fleet check instead (lib/fleet-check.ts): the table that would load
// here (or --table) has each pick's parity checked and its time measured
// afresh against the table's recorded median; one JSON summary line on stdout
// for scripts/fleet.ts to pool. Exit 0 pass, 1 flagged, 3 table refused.
//   tsx scripts/check.ts --quick [--table file] [--node name] > node.jsonl
import * as path from 'node:path';
import { asUsage, EXIT, flagOf, isMainModule, optionInt, optionText, parseWithCac, runMain, say, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { parseBackend } from '../lib/ffi.ts';
import { DEFAULT_BOUNDS } from '../lib/fleet.ts';
import { parseBound, quickCheck, type QuickTarget } from '../lib/fleet-check.ts';
import { findModel, linearsOf, parseDtypes, parseRows } from '../lib/models.ts';
import * as opt from '../lib/options.ts';
import { parityJob } from '../lib/parity-run.ts';
import { DEFAULT_GATE, DEFAULT_PDL_ROWS } from '../lib/promote.ts';
import { promoteJob } from '../lib/promote-job.ts';
import { refuseCheckJob } from '../lib/refuse-check.ts';
import { readStore } from '../lib/store.ts';
import { contenderKey, timedThrough } from '../lib/sweep.ts';
import { sweepJob } from '../lib/sweep-job.ts';

/** Timed time a rows bucket of the main job may spend past MIN_SAMPLES samples each (lib/sweep.ts budgetUs): a quick per-machine check. */
const ROWS_BUDGET_US = 2e6;

export const OPTIONS = {
  model: { ...opt.model('model preset whose decode linears are tuned'), default: 'Qwen3-0.6B' },
  rows: opt.rows('1,2,4,8'),
  dtype: opt.dtype('bf16'),
  store: opt.store('store folder (default: a new stores/check-<time>; name an old one to resume it)'),
  samples: opt.samples(3),
  rounds: opt.rounds('rounds, candidates interleaved in each'),
  copies: opt.copies(),
  tablesDir: opt.tablesDir(),
  backend: opt.backend(),
  json: opt.json('the promoted entries as JSON lines on stdout'),
  quiet: opt.quiet('only errors and the final summary'),
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
  quick: QuickTarget | null;
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
    parseBackend(optionText(o, 'backend'));
    // the fleet check's options mean nothing to the main job: say so rather than ignore them
    if (o.quick !== true) {
      const quickOnly = (['table', 'node', 'maxGeomean', 'maxRatio'] as const).filter((k) => o[k] !== undefined);
      if (quickOnly.length > 0) throw new Error(`${quickOnly.map(flagOf).join(', ')}: only with --quick (the fleet check)`);
    } else {
      // nor the main job's to the fleet check, which probes the table's own entries
      const mainOnly = (['model', 'rows', 'dtype', 'store'] as const).filter((k) => o[k] !== undefined);
      if (mainOnly.length > 0) throw new Error(`${mainOnly.map(flagOf).join(', ')}: not with --quick (the fleet check probes the entries of the table)`);
    }
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

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseCheckArgs(argv);
  if (args === null) return EXIT.ok;
  if (args.quick !== null) return quickCheck(args, args.quick);
  const common = { linears: linearsOf(args.model, undefined), rows: parseRows(args.rows), dtypes: parseDtypes(args.dtype), candidates: undefined, backend: args.backend, json: false, quiet: args.quiet };
  const steps: [string, () => Promise<number> | number][] = [
    ['sweep', () => sweepJob({ ...common, model: args.model, store: args.store, samples: args.samples, rounds: args.rounds, copies: args.copies, seed: undefined, shard: undefined, budgetUs: ROWS_BUDGET_US })],
    // a second input set for every candidate the sweep timed to the end (one it
    // stopped early cannot be picked; the sweep checked its parity already)
    ['parity', () => {
      const contenders = timedThrough(readStore(args.store).records);
      return parityJob({ ...common, seeds: 1, columns: 'auto', store: undefined, only: (c) => contenders.has(contenderKey(c)) });
    }],
    // promote's summary is the job's answer: printed even under --quiet
    ['promote', () => promoteJob({ routeOnly: false, stores: [args.store], gate: DEFAULT_GATE, pdlRows: DEFAULT_PDL_ROWS, identity: null, replace: false, out: null, tablesDir: args.tablesDir, json: args.json, quiet: false })],
    ['refuse-check', () => refuseCheckJob({ table: null, tablesDir: args.tablesDir, backend: args.backend ?? null, json: false, quiet: false })],
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
