// Runs a script of scripts/ in this process, as its command line would:
// main(argv) through lib/cli.ts's runScript (so a thrown error is its one red
// line and its exit code), with stdout and stderr captured, stdin handed in,
// the repository as the working folder, and the environment of the call set
// for the call only. Like a pipe, the streams are no TTY and NO_COLOR is set.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runScript, stdin } from '../../lib/cli.ts';
import { main as moeRoutings } from '../../bench/moe-routings.ts';
import { main as pruneReport } from '../../bench/prune-report.ts';
import { main as familyAb } from '../../bench/family-ab.ts';
import { main as tableBench } from '../../bench/table-bench.ts';
import { main as agree } from '../../scripts/agree.ts';
import { main as check } from '../../scripts/check.ts';
import { main as fleet } from '../../scripts/fleet.ts';
import { main as info } from '../../scripts/info.ts';
import { main as parity } from '../../scripts/parity.ts';
import { main as promote } from '../../scripts/promote.ts';
import { main as refuseCheck } from '../../scripts/refuse-check.ts';
import { main as report } from '../../scripts/report.ts';
import { main as serveBench } from '../../scripts/serve-bench.ts';
import { main as stepVerify } from '../../scripts/step-verify.ts';
import { main as sweep } from '../../scripts/sweep.ts';

// imported here, not by path at run time: one instance of every module (an
// error class from a second copy of lib/cli.ts would not be a UsageError)
const MAINS: Record<string, (argv: readonly string[]) => Promise<number> | number> = {
  agree, check, fleet, info, parity, promote, 'refuse-check': refuseCheck, report, 'serve-bench': serveBench, 'step-verify': stepVerify, sweep,
  'bench/table-bench': tableBench, 'bench/moe-routings': moeRoutings, 'bench/prune-report': pruneReport, 'bench/family-ab': familyAb,
};

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Variables a test never inherits from the shell it runs in; give them in env to set them. */
const CLEARED = ['KPICK_LIB', 'KPICK_BACKEND', 'KPICK_FORCE', 'KPICK_NO_BLASLT', 'CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES', 'FORCE_COLOR', 'DEBUG'];

export interface ScriptRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout then stderr */
  out: string;
}

export interface RunOptions {
  /** set for the call (undefined: unset); restored after */
  env?: Record<string, string | undefined>;
  /** what stdin reads */
  input?: string;
}

type Write = typeof process.stdout.write;

function capture(stream: NodeJS.WriteStream, into: string[]): () => void {
  const write = stream.write;
  const hadTty = Object.getOwnPropertyDescriptor(stream, 'isTTY');
  stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    done?.();
    return true;
  }) as Write;
  Object.defineProperty(stream, 'isTTY', { value: false, configurable: true, writable: true });
  return () => {
    stream.write = write;
    if (hadTty) Object.defineProperty(stream, 'isTTY', hadTty);
    else delete (stream as { isTTY?: boolean }).isTTY;
  };
}

/** `tsx scripts/<script>.ts ...argv`, in process: e.g. run('sweep', ['--model', 'tiny', ...]); 'bench/table-bench' for that one. */
export async function run(script: string, argv: readonly string[], options: RunOptions = {}): Promise<ScriptRun> {
  const name = script.replace(/^scripts\//, '').replace(/\.ts$/, '');
  const main = MAINS[name];
  if (main === undefined) throw new Error(`no script ${name} in tests/helpers/run-script.ts`);
  const env: Record<string, string | undefined> = { NO_COLOR: '1', ...Object.fromEntries(CLEARED.map((k) => [k, undefined])), ...options.env };
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const setEnv = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  const cwd = process.cwd();
  const read = stdin.read;
  const stdout: string[] = [];
  const stderr: string[] = [];
  setEnv(env);
  process.chdir(ROOT);
  if (options.input !== undefined) stdin.read = () => options.input as string;
  const restoreOut = capture(process.stdout, stdout);
  const restoreErr = capture(process.stderr, stderr);
  let code: number;
  try {
    code = await runScript(name, () => main(argv));
  } finally {
    restoreErr();
    restoreOut();
    stdin.read = read;
    process.chdir(cwd);
    setEnv(saved);
  }
  const out = stdout.join('');
  const err = stderr.join('');
  return { code, stdout: out, stderr: err, out: out + err };
}
