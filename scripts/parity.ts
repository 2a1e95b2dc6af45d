// parity: check every runnable candidate on every decode linear at every rows
// bucket against the fp64 reference (and its bitwise class head), on fresh
// random inputs per problem. Exit 0 when all pass, 1 naming every failure.
//   tsx scripts/parity.ts --model Qwen3-0.6B --rows 1,4 --dtype bf16,fp16
import { randomInt } from 'node:crypto';
import {
  EXIT,
  asUsage,
  Progress,
  UsageError,
  colorsFor,
  isMainModule,
  optionInt,
  optionText,
  parseWithCac,
  printJsonLine,
  runMain,
  say,
  scriptCli,
  type OptionSpec,
} from '../lib/cli.ts';
import { BACKENDS, parseBackend, KpickError, openKpick, type Candidate, type Dtype, type Problem } from '../lib/ffi.ts';
import { describeIdentity, identityFromInfo } from '../lib/identity.ts';
import { decodeLinears, findModel, linearsOf, modelNames, parseDtypes, parseRows, parseShapes, uniqueShapes, type Bucket, type Linear } from '../lib/models.ts';
import { ParityChecker, computeReference, referenceColumns, type ColumnMode } from '../lib/parity.ts';
import { STORE_VERSION, type Identity, type Parity, type StoreRecord } from '../lib/schema.ts';
import { StoreWriter } from '../lib/store.ts';
import { selectCandidates } from '../lib/sweep.ts';

const COLUMN_MODES: readonly ColumnMode[] = ['auto', 'full', 'sampled'];

export const OPTIONS = {
  model: { flag: '--model <name>', help: `model preset: ${modelNames().join(', ')}` },
  shapes: { flag: '--shapes <list>', help: "linear shapes NxK to check instead of the model's" },
  rows: { flag: '--rows <list>', help: 'rows buckets M', default: '1,4' },
  dtype: { flag: '--dtype <list>', help: 'bf16, fp16 or both', default: 'bf16,fp16' },
  candidates: { flag: '--candidates <list>', help: 'candidate names or globs, comma separated (default: all)' },
  seeds: { flag: '--seeds <n>', help: 'problems (fresh random inputs) per shape and dtype', default: 1 },
  columns: {
    flag: '--columns <mode>',
    help: 'reference columns: auto (all for small problems, else a sample), full, sampled',
    default: 'auto',
  },
  store: { flag: '--store <dir>', help: "also append each check to this store as a 'parity' record" },
  backend: { flag: '--backend <name>', help: `${BACKENDS.join(' | ')} (default: $KPICK_BACKEND, else the best build; $KPICK_LIB wins)` },
  json: { flag: '--json', help: 'print each check as one JSON line on stdout', default: false },
  quiet: { flag: '--quiet', help: 'no progress or summary on stderr (FAIL lines still print)', default: false },
} satisfies Record<string, OptionSpec>;

export interface ParityArgs {
  linears: Linear[];
  rows: Bucket[];
  dtypes: Dtype[];
  candidates: string[] | undefined;
  seeds: number;
  columns: ColumnMode;
  store: string | undefined;
  backend: string | undefined;
  json: boolean;
  quiet: boolean;
}

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
      candidates: optionText(o, 'candidates')?.split(',').map((s) => s.trim()).filter((s) => s !== ''),
      seeds: optionInt(o, 'seeds', OPTIONS.seeds.default, 1, 1000),
      columns: columns as ColumnMode,
      store: optionText(o, 'store'),
      backend,
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

/** One check of one candidate on one problem at one rows bucket. */
interface Check {
  candidate: string;
  op: Linear['op'];
  dtype: Dtype;
  n: number;
  k: number;
  rows: Bucket;
  seed: number;
  /** 'all', or how many columns the reference sampled */
  columns: string;
  /** false when the library failed to run it */
  ran: boolean;
  parity: Parity;
}

function failLine(c: Check): string {
  return `FAIL ${c.candidate} ${c.op} ${c.dtype} ${c.n}x${c.k} m=${c.rows}: ${c.parity.reason}`;
}

function checkOne(checker: ParityChecker, cand: Candidate): { ran: boolean; parity: Parity } {
  try {
    return { ran: true, parity: checker.check(cand) };
  } catch (err) {
    if (!(err instanceof KpickError)) throw err;
    return { ran: false, parity: { status: 'fail', rel_err: null, bitwise: null, reason: `run failed: ${err.message}` } };
  }
}

function toRecord(c: Check, identity: Identity, cand: Candidate, copies: number): StoreRecord {
  return {
    v: STORE_VERSION,
    kind: 'parity',
    identity,
    op: c.op,
    dtype: c.dtype,
    n: c.n,
    k: c.k,
    rows: c.rows,
    candidate: c.candidate,
    params: { ...cand.params },
    nodes_declared: cand.nodes,
    nodes: null,
    is_default: cand.isDefault,
    stack_bound: cand.stackBound,
    pdl: cand.pdl,
    status: c.ran ? 'ok' : 'failed',
    reason: c.ran ? '' : c.parity.reason,
    samples_us: [],
    copies,
    parity: c.parity,
    seed: c.seed,
    at: new Date().toISOString(),
  };
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseParityArgs(argv);
  if (args === null) return EXIT.ok;
  const human = !args.quiet;
  const writer = args.store === undefined ? null : asUsage(() => StoreWriter.open(args.store as string, 'parity'));
  try {
    const kpick = openKpick(args.backend);
    const info = kpick.info();
    const identity = identityFromInfo(info);
    const space = kpick.candidates();
    const candidates = asUsage(() => selectCandidates(space, args.candidates));
    if (human) say(`parity: ${describeIdentity(identity)} from ${kpick.path}`);

    const checks: Check[] = [];
    const failures: Check[] = [];
    const sampledNotes: string[] = [];
    const mMax = Math.max(...args.rows);
    const totalProblems = args.dtypes.length * args.linears.length * args.seeds;
    const progress = new Progress(human && !args.json);
    let problemsDone = 0;
    for (const dtype of args.dtypes) {
      for (const linear of args.linears) {
        const ofOp = candidates.filter((c) => c.op === linear.op);
        for (let s = 0; s < args.seeds; s++) {
          progress.update(problemsDone, totalProblems, `${dtype} ${linear.name} ${linear.op} ${linear.n}x${linear.k}`);
          const seed = randomInt(0, 2 ** 47);
          // the reference reads weight copy 0 only: one copy is enough
          const problem: Problem = kpick.createProblem({ op: linear.op, dtype, n: linear.n, k: linear.k, mMax, copies: 1, seed });
          try {
            for (const rows of args.rows) {
              problem.setRows(rows);
              const cols = referenceColumns(problem, args.columns, seed % 2 ** 31);
              const columns = cols === null ? 'all' : `${cols.length} of ${linear.n}`;
              if (cols !== null && s === 0) sampledNotes.push(`${dtype} ${linear.name} ${linear.n}x${linear.k} m=${rows}`);
              const checker = new ParityChecker(problem, computeReference(problem, cols), space);
              for (const cand of ofOp) {
                if (!cand.available || !problem.supports(cand.id)) continue;
                const { ran, parity } = checkOne(checker, cand);
                const check: Check = { candidate: cand.name, op: linear.op, dtype, n: linear.n, k: linear.k, rows, seed, columns, ran, parity };
                checks.push(check);
                if (parity.status === 'fail') {
                  failures.push(check);
                  progress.end();
                  say(colorsFor(process.stderr).red(failLine(check)));
                }
                if (args.json) printJsonLine({ ...check, ...parity, parity: undefined });
                writer?.append(toRecord(check, identity, cand, problem.copies));
              }
            }
          } finally {
            problem.free();
          }
          problemsDone++;
        }
      }
    }
    progress.end();

    if (human) {
      if (sampledNotes.length > 0) {
        say(`parity: the reference sampled columns (first, last, evenly spread, a few random) for ${sampledNotes.join(', ')}; --columns full checks all`);
      }
      const failed = [...new Set(failures.map((f) => f.candidate))];
      const names = new Set(checks.map((c) => c.candidate));
      say(
        `parity: ${checks.length} checks of ${names.size} candidates; ${checks.length - failures.length} pass, ${failures.length} fail` +
          (failed.length > 0 ? ` (${failed.join(', ')})` : ''),
      );
      if (writer && writer.written > 0) say(`parity: wrote ${writer.written} records to ${writer.file}`);
    }
    if (checks.length === 0) throw new UsageError('no candidate could run any of these problems: nothing was checked');
    return failures.length > 0 ? EXIT.failed : EXIT.ok;
  } finally {
    writer?.close();
  }
}

if (isMainModule(import.meta.url)) void runMain('parity', () => main(process.argv.slice(2)));
