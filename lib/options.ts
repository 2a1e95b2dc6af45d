// The options several scripts share, declared once: flag, help and default.
// A script's table picks these (some with its own default or help) and adds
// its own; lib/cli.ts's declareOptions puts them on the command.
import type { OptionSpec } from './cli.ts';
import { BACKENDS } from './ffi.ts';
import { modelNames } from './models.ts';

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

export const tablesDir = (help = 'root of the per-device tables') => ({ flag: '--tables-dir <dir>', help, default: 'tables' } satisfies OptionSpec);

/** The timing options of a sweep (and of the main job's sweep step). */
export const samples = (fallback: number) => ({ flag: '--samples <n>', help: 'timings per candidate per round', default: fallback } satisfies OptionSpec);
export const rounds = (help = 'rounds; each visits every candidate, order rotated', fallback = 3) => ({ flag: '--rounds <n>', help, default: fallback } satisfies OptionSpec);
export const copies = () => ({ flag: '--copies <n>', help: 'rotating weight copies; 0: the library picks > 8x the LLC', default: 0 } satisfies OptionSpec);

/** --gate: what the gate fraction means to this script */
export const gate = (help: string, fallback: number) => ({ flag: '--gate <fraction>', help, default: fallback } satisfies OptionSpec);

export const json = (help: string) => ({ flag: '--json', help, default: false } satisfies OptionSpec);

export const quiet = (help: string) => ({ flag: '--quiet', help, default: false } satisfies OptionSpec);

/** A comma list of candidate names or globs, as --candidates takes it; undefined: all. */
export function candidateList(text: string | undefined): string[] | undefined {
  return text?.split(',').map((s) => s.trim()).filter((s) => s !== '');
}
