// The options several scripts share, declared once: flag, help and default.
// A script's table picks these (some with its own default or help) and adds
// its own; lib/cli.ts's declareOptions puts them on the command.
import { statSync } from 'node:fs';
import { optionAll, optionText, UsageError, type OptionSpec } from './cli.ts';
import { BACKENDS } from './ffi.ts';
import { findModel, modelNames, parseDtypes, type ModelPreset } from './models.ts';
import type { Dtype } from './schema.ts';

export const backend = (): OptionSpec => ({
  flag: '--backend <name>',
  help: `${BACKENDS.join(' | ')} (default: $KPICK_BACKEND, else the best build; $KPICK_LIB wins)`,
});

export const model = (help = `model preset: ${modelNames().join(', ')}`) => ({ flag: '--model <name>', help } satisfies OptionSpec);

/** --shapes: what the script does with them ('measure', 'check') */
export const shapes = (verb: string) => ({ flag: '--shapes <list>', help: `linear shapes NxK to ${verb} instead of the model's, e.g. 4096x4096,1024x4096` } satisfies OptionSpec);

export const rows = (fallback: string) => ({ flag: '--rows <list>', help: 'rows buckets M', default: fallback } satisfies OptionSpec);

export const dtype = (fallback: string) => ({ flag: '--dtype <list>', help: 'bf16, fp16, fp8 (e4m3 weights with a scale per row, bf16 x and y), comma separated', default: fallback } satisfies OptionSpec);

export const candidates = () => ({ flag: '--candidates <list>', help: 'candidate names or globs, comma separated (default: all)' } satisfies OptionSpec);

export const store = (help: string) => ({ flag: '--store <dir>', help } satisfies OptionSpec);

/** --store, repeatable, for the scripts that pool stores (promote, prune-report, family-ab) */
export const pooledStores = () => store('store folder to pool; repeat to pool several (required)');

/** The folders of pooledStores: at least one, else a usage error. */
export function storeDirs(o: Parsed): string[] {
  const stores = optionAll(o, 'store');
  if (stores.length === 0) throw new UsageError('give at least one --store <dir>');
  return stores;
}

export const tablesDir = (help = 'root of the per-device tables') => ({ flag: '--tables-dir <dir>', help, default: 'tables' } satisfies OptionSpec);

/** A decode model built from a preset (serve-bench, step-verify): its layers, seed and memory. */
export const layers = () => ({ flag: '--layers <n>', help: "decoder layers to build (default: all of the model's)" } satisfies OptionSpec);
export const seed = () => ({ flag: '--seed <n>', help: 'seed of the weights and prompts', default: 1 } satisfies OptionSpec);
export const memLimit = () => ({ flag: '--mem-limit <GiB>', help: 'use at most this much memory (default: all that is free)' } satisfies OptionSpec);

/** The timing options of a sweep (and of the main job's sweep step). */
export const samples = (fallback: number) => ({ flag: '--samples <n>', help: 'timings per candidate per round', default: fallback } satisfies OptionSpec);
export const rounds = (help = 'rounds; each visits every candidate, order rotated', fallback = 3) => ({ flag: '--rounds <n>', help, default: fallback } satisfies OptionSpec);
export const copies = () => ({ flag: '--copies <n>', help: 'rotating weight copies; 0: the library picks > 8x the LLC', default: 0 } satisfies OptionSpec);

/** --gate: what the gate fraction means to this script */
export const gate = (help: string, fallback: number) => ({ flag: '--gate <fraction>', help, default: fallback } satisfies OptionSpec);

/** bench/gpu/kernel-trace.c's output, which the trace readers (step-trace, moe-trace) take */
export const trace = () => ({ flag: '--trace <file>', help: "kernel-trace.c's output (required)" } satisfies OptionSpec);
export const json = (help: string) => ({ flag: '--json', help, default: false } satisfies OptionSpec);

export const quiet = (help: string) => ({ flag: '--quiet', help, default: false } satisfies OptionSpec);

/** A comma list of candidate names or globs, as --candidates takes it; undefined: all. */
export function candidateList(text: string | undefined): string[] | undefined {
  return text?.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

// ---- the decode model's options (serve-bench, step-verify), parsed once ----

type Parsed = Parameters<typeof optionText>[0];

/** --model (required) and --dtype (one type the preset takes); throws the usage line. */
export function modelAndDtype(o: Parsed, dtypeDefault: string): { model: ModelPreset; dtype: Dtype } {
  const name = optionText(o, 'model');
  if (name === undefined) throw new Error('--model <name> is required');
  const model = findModel(name);
  const dtypes = parseDtypes(optionText(o, 'dtype', dtypeDefault) as string);
  if (dtypes.length !== 1) throw new Error('--dtype takes one type: bf16, fp16 or fp8');
  return { model, dtype: dtypes[0]! };
}

/** --mem-limit in GiB, as bytes; null when not given. */
export function parseMemLimit(o: Parsed): number | null {
  const text = optionText(o, 'memLimit');
  if (text === undefined) return null;
  const gib = /^\d*\.?\d+$/.test(text) ? Number(text) : NaN;
  if (!(gib > 0)) throw new Error(`--mem-limit must be a positive number of GiB, got '${text}'`);
  return gib * 1024 ** 3;
}

/** Throws "<flag> <file>: not a file" unless file names a regular file (a folder, a device or nothing is not one). */
export function regularFile(flag: string, file: string): void {
  if (!statSync(file, { throwIfNoEntry: false })?.isFile()) throw new Error(`${flag} ${file}: not a file`);
}

/**
 * --table (null: the default path under --tables-dir) and --tables-dir. A table
 * named on the command line must be a file: a typo would otherwise run a whole
 * benchmark on the defaults (a missing default table is a fresh machine's case).
 */
export function tableChoice(o: Parsed, tablesDirDefault: string): { table: string | null; tablesDir: string } {
  const table = optionText(o, 'table') ?? null;
  if (table === '') throw new Error('--table needs a file');
  if (table !== null) regularFile('--table', table);
  const tablesDir = optionText(o, 'tablesDir', tablesDirDefault) as string;
  if (tablesDir === '') throw new Error('--tables-dir needs a folder');
  return { table, tablesDir };
}
