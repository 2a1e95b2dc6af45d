// parity: check every runnable candidate on every decode linear at every rows
// bucket against the fp64 reference (and its bitwise class head), on fresh
// random inputs per problem. Exit 0 when all pass, 1 naming every failure.
//   tsx scripts/parity.ts --model Qwen3-0.6B --rows 1,4 --dtype bf16,fp16
// The job itself is lib/parity-run.ts.
import { EXIT, asUsage, isMainModule, optionInt, optionText, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { parseBackend } from '../lib/ffi.ts';
import { linearsOf, parseDtypes, parseRows } from '../lib/models.ts';
import * as opt from '../lib/options.ts';
import type { ColumnMode } from '../lib/parity.ts';
import { parityJob, type ParityJob } from '../lib/parity-run.ts';

const COLUMN_MODES: readonly ColumnMode[] = ['auto', 'full', 'sampled'];

export const OPTIONS = {
  model: opt.model(),
  shapes: opt.shapes('check'),
  rows: opt.rows('1,4'),
  dtype: opt.dtype('bf16,fp16'),
  candidates: opt.candidates(),
  seeds: { flag: '--seeds <n>', help: 'problems (fresh random inputs) per shape and dtype', default: 1 },
  columns: { flag: '--columns <mode>', help: 'reference columns: auto (all for small problems, else a sample), full, sampled', default: 'auto' },
  store: opt.store("also append each check to this store as a 'parity' record"),
  backend: opt.backend(),
  json: opt.json('print each check as one JSON line on stdout'),
  quiet: opt.quiet('no progress or summary on stderr (FAIL lines still print)'),
} satisfies Record<string, OptionSpec>;

export type ParityArgs = ParityJob;

/** Parses argv (without node and the script); null when --help was printed. Throws UsageError. */
export function parseParityArgs(argv: readonly string[]): ParityArgs | null {
  const cli = scriptCli('parity', {
    summary: 'check every runnable candidate against the fp64 reference and its bitwise class',
    usage: '--model <name> [options]',
    examples: ['tsx scripts/parity.ts --model Qwen3-0.6B --rows 1,4 --dtype bf16,fp16', 'KPICK_LIB=build/libkpick-cpu-test.so tsx scripts/parity.ts --model tiny --rows 1'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return null;
  return asUsage(() => {
    const linears = linearsOf(optionText(o, 'model'), optionText(o, 'shapes'));
    const columns = optionText(o, 'columns', OPTIONS.columns.default) as string;
    if (!(COLUMN_MODES as readonly string[]).includes(columns)) throw new Error(`--columns must be one of ${COLUMN_MODES.join(', ')}, got '${columns}'`);
    const backend = parseBackend(optionText(o, 'backend'));
    return {
      linears,
      rows: parseRows(optionText(o, 'rows', OPTIONS.rows.default) as string),
      dtypes: parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default) as string),
      candidates: opt.candidateList(optionText(o, 'candidates')),
      seeds: optionInt(o, 'seeds', OPTIONS.seeds.default, 1, 1000),
      columns: columns as ColumnMode,
      store: optionText(o, 'store'),
      backend,
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseParityArgs(argv);
  return args === null ? EXIT.ok : parityJob(args);
}

if (isMainModule(import.meta.url)) void runMain('parity', () => main(process.argv.slice(2)));
