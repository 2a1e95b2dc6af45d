// What every script shares: named exit codes, one red error line (stack only
// under DEBUG), JSON lines on stdout, human text and progress on stderr, and
// cac option tables declared once with their defaults and help.
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cac, type CAC, type Command } from 'cac';
import pc from 'picocolors';

// The one exit-code rule of every script:
export const EXIT = {
  ok: 0,
  /** the job ran and found a failure (parity fail, native error) */
  failed: 1,
  /** bad usage or a bad environment: unknown option, model or rows, an
   * unwritable store, no loadable library (every path tried is named),
   * KPICK_BACKEND naming no backend */
  usage: 2,
  /** a table was refused (refuse-check, promote --route-only) */
  refused: 3,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Bad input from the command line or the environment: exit 2 (KpickLoadError of lib/ffi.ts is one). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Runs a parse or check of user input: any error it throws becomes a UsageError (exit 2). */
export function asUsage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw err instanceof UsageError ? err : new UsageError((err as Error).message);
  }
}

/** Colours for one stream: only on a TTY, never under NO_COLOR. */
export function colorsFor(stream: NodeJS.WriteStream): ReturnType<typeof pc.createColors> {
  const enabled = Boolean(stream.isTTY) && !('NO_COLOR' in process.env);
  return pc.createColors(enabled);
}

/** Where a script reads stdin ('-'): one seam, so a script run in process can be handed its input. */
export const stdin = {
  read(): string {
    return readFileSync(0, 'utf8');
  },
};

/** One JSON value per line on stdout, for pipelines. */
export function printJsonLine(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** Human text on stderr, so stdout stays clean for JSON lines. */
export function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

export function warn(line: string): void {
  say(colorsFor(process.stderr).yellow(`warning: ${line}`));
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * Runs a script's main and returns its exit code, owning its errors: a red
 * one-line message on stderr and a named code; the stack only when DEBUG is
 * set. It never exits the process, so a test can call it in process.
 */
export async function runScript(name: string, main: () => Promise<number> | number): Promise<number> {
  try {
    return await main();
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    say(colorsFor(process.stderr).red(`${name}: ${oneLine(error.message)}`));
    if (process.env.DEBUG) say(error.stack ?? '');
    return error instanceof UsageError ? EXIT.usage : EXIT.failed;
  }
}

/** Set when the script's output could not be written (a full disk): the job fails, whatever main returns. */
let outputLost = false;

/**
 * Errors writing a script's output. A reader that leaves early (`| head -1`)
 * closes the pipe: what the script writes there afterwards is dropped, with no
 * stack trace, and the job runs on to its own exit code (a sweep is not cut
 * short by its reader). Any other error on stdout (a full disk) is one red
 * line and exit 1: the output is lost. Human text lost on stderr fails nothing.
 */
function onWriteErrors(name: string): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') return;
    outputLost = true;
    process.exitCode = EXIT.failed;
    say(colorsFor(process.stderr).red(`${name}: cannot write stdout: ${oneLine(err.message)}`));
  });
  process.stderr.on('error', () => {});
}

/** runScript for a script started by node: its code becomes the process's exit code. */
export async function runMain(name: string, main: () => Promise<number> | number): Promise<void> {
  onWriteErrors(name);
  const code = await runScript(name, main);
  process.exitCode = outputLost && code === EXIT.ok ? EXIT.failed : code;
}

/** True when this module file is the script node was started with. */
export function isMainModule(importMetaUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(importMetaUrl));
  } catch {
    return false;
  }
}

/** One option of a script: its cac flag, help text and default. */
export interface OptionSpec {
  /** e.g. '--rows <list>' or '--json' */
  flag: string;
  help: string;
  default?: string | number | boolean;
}

/** Declares every option of a table on a cac command, with "(default: x)" in the help. */
export function declareOptions(command: Command | CAC, options: Record<string, OptionSpec>): void {
  for (const spec of Object.values(options)) {
    const shown = spec.default === undefined || spec.default === false ? '' : ` (default: ${spec.default})`;
    command.option(spec.flag, `${spec.help}${shown}`);
  }
}

/** What a script's --help says besides its options. */
export interface ScriptDoc {
  summary: string;
  usage: string;
  /** full command lines, shown under Examples */
  examples: readonly string[];
}

/** The version of package.json, for --version. */
export function packageVersion(): string {
  const file = fileURLToPath(new URL('../package.json', import.meta.url));
  return String((JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version ?? 'unknown');
}

/**
 * A cac for a script of one job: the options of the table, --help with the
 * usage and examples, and --version. Parse it with parseWithCac. (A plain
 * usage string is accepted too, for a script with nothing more to say.)
 */
export function scriptCli(name: string, doc: ScriptDoc | string, options: Record<string, OptionSpec>): CAC {
  const { summary, usage, examples } = typeof doc === 'string' ? { summary: '', usage: doc, examples: [] } : doc;
  const cli = cac(name);
  const command = cli.command('', summary).usage(usage);
  for (const example of examples) command.example(`  ${example}`);
  declareOptions(command, options);
  cli.help();
  cli.version(packageVersion());
  return cli;
}

/**
 * Option values exactly as typed. mri (inside cac) turns "0x4" and "2e0" into
 * numbers and reads "-1" as a flag; the scripts validate the text instead, so
 * every value-taking option is handed over as written ("--rows -1" included:
 * the value of a flag that takes one is the next argument, whatever it is).
 * An empty value is refused here, naming the option.
 */
function rawValues(cli: CAC, argv: readonly string[]): { argv: string[]; raw: Map<string, string[]> } {
  const valued = new Set<string>();
  for (const o of [...cli.globalCommand.options, ...cli.commands.flatMap((c) => c.options)]) if (o.rawName.includes('<')) for (const n of o.names) valued.add(n);
  const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
  const out: string[] = [];
  const raw = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const m = /^--([^=]+)(=(.*))?$/s.exec(arg);
    if (!m || !valued.has(camel(m[1]!))) {
      if (arg === '') throw new UsageError('an empty argument: every option names its value (--table <file>, not --table "")');
      out.push(arg);
      continue;
    }
    let value: string | undefined = m[3];
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`--${m[1]} needs a value`);
      value = argv[++i]!;
    }
    if (value === '') throw new UsageError(`--${m[1]} needs a value, got an empty one`);
    const name = camel(m[1]!);
    raw.set(name, [...(raw.get(name) ?? []), value]);
    out.push(`--${m[1]}=${value}`);
  }
  return { argv: out, raw };
}

/**
 * Parses argv (without node and the script) against a cac whose global
 * command holds the options. Returns null when --help was printed; throws
 * UsageError on an unknown option, a missing or empty value or a stray
 * argument. Values of options that take one are the text as typed (a string,
 * or an array of strings when repeated): never numbers.
 */
export function parseWithCac(cli: CAC, argv: readonly string[]): Record<string, unknown> | null {
  let options: Record<string, unknown>;
  const { argv: prepared, raw } = rawValues(cli, argv);
  try {
    const parsed = cli.parse(['node', cli.name || 'script', ...prepared], { run: false });
    options = parsed.options;
    if (options.help || options.version) return null;
    const command = cli.matchedCommand ?? cli.globalCommand;
    command.checkUnknownOptions();
    command.checkOptionValue();
    command.checkUnusedArgs();
    // what follows `--` is arguments too: stray here, not dropped
    const rest = (options['--'] as unknown[] | undefined) ?? [];
    if (rest.length > 0) throw new Error(`Unused args: ${rest.map((a) => `\`${String(a)}\``).join(', ')}`);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  for (const [name, values] of raw) options[name] = values.length === 1 ? values[0] : values;
  return options;
}

/** parseWithCac for a script that also takes positional arguments (files): those come back as `args`. */
export function parseWithCacArgs(cli: CAC, argv: readonly string[]): { options: Record<string, unknown>; args: string[] } | null {
  let parsed;
  const { argv: prepared, raw } = rawValues(cli, argv);
  try {
    parsed = cli.parse(['node', cli.name || 'script', ...prepared], { run: false });
    if (parsed.options.help || parsed.options.version) return null;
    const command = cli.matchedCommand ?? cli.globalCommand;
    command.checkUnknownOptions();
    command.checkOptionValue();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  for (const [name, values] of raw) parsed.options[name] = values.length === 1 ? values[0] : values;
  // files after `--` are files too (one named like an option, say)
  return { options: parsed.options, args: [...parsed.args, ...((parsed.options['--'] as unknown[] | undefined) ?? [])].map(String) };
}

/** Reads an option as text: cac (mri) turns "8" into a number, "1,2" stays text. */
export function optionText(options: Record<string, unknown>, name: string, fallback?: string | number): string | undefined {
  const value = options[name] ?? fallback;
  if (value === undefined || value === true || value === false) {
    if (value === true) throw new UsageError(`${flagOf(name)} needs a value`);
    return undefined;
  }
  if (Array.isArray(value)) throw new UsageError(`${flagOf(name)} was given more than once`);
  return String(value);
}

/** Every value of an option that may repeat (--store a --store b), as text, in order; none when absent. */
export function optionAll(options: Record<string, unknown>, name: string): string[] {
  const value = options[name];
  return (Array.isArray(value) ? value : value === undefined ? [] : [value]).map((s) => {
    if (typeof s !== 'string' && typeof s !== 'number') throw new UsageError(`--${name} needs a value`);
    return String(s);
  });
}

/** Reads an option as a fraction in 0..1, plain decimal ("0.02", ".5", "1"). */
export function optionFraction(options: Record<string, unknown>, name: string, fallback: number): number {
  const text = optionText(options, name, fallback) ?? '';
  const value = /^\d*\.?\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(value >= 0 && value <= 1)) throw new UsageError(`${flagOf(name)} must be a fraction in 0..1, got '${text}'`);
  return value;
}

/** cac's camelCase key back to the flag: "pdlRows" -> "--pdl-rows". */
export function flagOf(name: string): string {
  return `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** Reads an option as a decimal integer in [min, max]: no sign, hex or exponent forms. */
export function optionInt(options: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const text = optionText(options, name, fallback) ?? String(fallback);
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) throw new UsageError(`${flagOf(name)} must be an integer in ${min}..${max}, got '${text}'`);
  return value;
}

/**
 * Progress on stderr: "12/80 label ETA 1m20s", when enabled. On a terminal it
 * is redrawn in place; into a pipe or a file (a log, CI) it is a line when the
 * phase changes (the label with its numbers masked: "step 3/256" and "step 4/256"
 * are one phase) or every `pipeEverySeconds`, so a long run shows where it is
 * without a line per update.
 */
export class Progress {
  private readonly started: number;
  private readonly enabled: boolean;
  private readonly inPlace: boolean;
  private readonly write: (text: string) => void;
  private readonly now: () => number;
  private readonly pipeEveryMs: number;
  private drawn = false;
  private lastPhase: string | null = null;
  private lastLineAt = 0;

  constructor(
    enabled: boolean,
    io: { inPlace?: boolean; write?: (text: string) => void; now?: () => number; pipeEverySeconds?: number } = {},
  ) {
    this.enabled = enabled;
    this.inPlace = io.inPlace ?? Boolean(process.stderr.isTTY);
    this.write = io.write ?? ((text) => process.stderr.write(text));
    this.now = io.now ?? Date.now;
    this.pipeEveryMs = (io.pipeEverySeconds ?? 10) * 1000;
    this.started = this.now();
  }

  update(done: number, total: number, label: string): void {
    if (!this.enabled) return;
    const at = this.now();
    const elapsed = (at - this.started) / 1000;
    const eta = done > 0 && total > done ? ` ETA ${formatSeconds((elapsed / done) * (total - done))}` : '';
    if (!this.inPlace) {
      const phase = label.replace(/\d+/g, '#');
      if (phase !== this.lastPhase || at - this.lastLineAt >= this.pipeEveryMs) {
        this.write(`${done}/${total} ${label} (${formatSeconds(elapsed)}${eta})\n`);
        this.lastPhase = phase;
        this.lastLineAt = at;
      }
      return;
    }
    const dim = colorsFor(process.stderr).dim;
    this.write(`\r\x1b[K${done}/${total} ${label}${dim(eta)}`);
    this.drawn = true;
  }

  /** Clears the progress line so the next text starts clean. */
  end(): void {
    if (this.drawn) this.write('\r\x1b[K');
    this.drawn = false;
  }
}

export function formatSeconds(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
