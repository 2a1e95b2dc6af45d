// check: the main job (`npm start`). On the embedded default backend (a GPU
// build when one is present and starts, else the CPU), sweep, parity and
// promote the decode linears of one model into this machine's table, then say
// what was picked and why, and whether the table would be used here.
//   tsx scripts/check.ts [--model Qwen3-0.6B] [--rows 1,2,4,8] [--store dir] [--quiet]
// Each step is the script of the same name, run in this process.
import * as path from 'node:path';
import { asUsage, EXIT, isMainModule, optionInt, optionText, parseWithCac, runMain, say, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { findModel, parseDtypes, parseRows } from '../lib/models.ts';
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
}

/** Parses argv (without node and the script); null when --help was printed. */
export function parseCheckArgs(argv: readonly string[], now = new Date()): CheckArgs | null {
  const cli = scriptCli('check', {
    summary: 'the main job: sweep, parity and promote one model on this machine, then summarise',
    usage: '[--model Qwen3-0.6B] [--rows 1,2,4,8] [--store dir]',
    examples: ['npm start', 'npm start -- --model Qwen3-1.7B --rows 1,4,16'],
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
  };
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseCheckArgs(argv);
  if (args === null) return EXIT.ok;
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
