// serve-bench: decode-step throughput of a real model's shapes (random weights,
// every layer its own), the default route against this machine's table route,
// on the same weights and prompts, at several concurrencies; plus greedy token
// identity between the two routes. The engine is lib/serve.ts.
//   tsx scripts/serve-bench.ts --model Qwen3-0.6B [--c 1,4,8,16,32,64] [--json]
// Before anything is timed, every non-linear op of the step is checked against
// fp64 on this backend (and with --check-step, one whole step of each route). Exit 0 when the bench ran and greedy tokens were
// identical or every difference is explained; 1 when a difference is not (or
// a check or a native call failed); 2 on bad usage, including a model that
// does not fit in memory (the line names what would).
import {
  asUsage,
  colorsFor,
  EXIT,
  isMainModule,
  optionInt,
  optionText,
  parseWithCac,
  printJsonLine,
  Progress,
  runMain,
  say,
  scriptCli,
  UsageError,
  warn,
  type OptionSpec,
} from '../lib/cli.ts';
import { BACKENDS, parseBackend, openKpick, type Dtype } from '../lib/ffi.ts';
import { DECODE_OPS, LINEAR_KINDS, NativeModels, type Model, type SelfCheck } from '../lib/model-ffi.ts';
import { findModel, modelNames, parseDtypes, type ModelPreset } from '../lib/models.ts';
import { buildOf, loadRoute } from '../lib/route.ts';
import { ARMS, benchRow, checkFit, dimsOf, gib, parseConcurrency, RATIO_FLOOR, routeArm, type ArmName, type ArmRoute, type ArmSummary, type RowResult } from '../lib/serve.ts';
import { MAX_POSITIONS, MAX_ROWS } from '../lib/schema.ts';
import { defaultTablePath } from '../lib/table.ts';


export const OPTIONS = {
  model: { flag: '--model <name>', help: `model preset (required): ${modelNames().join(', ')}` },
  layers: { flag: '--layers <n>', help: "decoder layers to build (default: all of the model's)" },
  c: { flag: '--c <list>', help: `concurrencies (rows per step), comma separated, each 1..${MAX_ROWS}`, default: '1,4,8,16,32,64' },
  context: { flag: '--context <n>', help: 'KV-cache positions filled before the first step (the prompt)', default: 256 },
  steps: { flag: '--steps <n>', help: 'decode steps per timed run', default: 100 },
  runs: { flag: '--runs <n>', help: 'timed runs per arm per lane (two lanes, in opposite orders)', default: 3 },
  identitySteps: { flag: '--identity-steps <n>', help: 'greedy steps both routes decode and compare; 0 skips', default: 256 },
  table: { flag: '--table <file>', help: "the table route's table (default: <tables-dir>/<arch>/<device>/decode_gemm.json of the library loaded)" },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables, for the default --table', default: 'tables' },
  backend: { flag: '--backend <name>', help: `${BACKENDS.join(' | ')} (default: $KPICK_BACKEND, else the best build; $KPICK_LIB wins)` },
  dtype: { flag: '--dtype <type>', help: 'bf16 or fp16', default: 'bf16' },
  seed: { flag: '--seed <n>', help: 'seed of the weights and prompts', default: 1 },
  memLimit: { flag: '--mem-limit <GiB>', help: 'use at most this much memory (default: all that is free)' },
  checkStep: { flag: '--check-step', help: 'before timing, check one whole step of each route at the smallest --c against an fp64 forward on the host (slow on big models: try --layers 2)' },
  json: { flag: '--json', help: 'a setup line, then one JSON line per concurrency on stdout' },
  quiet: { flag: '--quiet', help: 'no table or progress on stderr (errors and warnings still print)' },
} satisfies Record<string, OptionSpec>;

export interface ServeBenchArgs {
  model: ModelPreset;
  layers: number;
  concurrency: number[];
  context: number;
  steps: number;
  runs: number;
  identitySteps: number;
  table: string | null;
  tablesDir: string;
  backend: string | undefined;
  dtype: Dtype;
  seed: number;
  /** bytes, or null: all free memory */
  memLimit: number | null;
  checkStep: boolean;
  json: boolean;
  quiet: boolean;
}

function makeCli() {
  return scriptCli(
    'serve-bench',
    {
      summary: 'decode-step tok/s of a model, default route vs table route, and greedy token identity',
      usage: '--model <name> [--c 1,4,8,16,32,64] [--layers n] [--steps n] [--runs n] [--table file] [--json]',
      examples: [
        'tsx scripts/serve-bench.ts --model Qwen3-0.6B',
        'tsx scripts/serve-bench.ts --model Llama-3.1-8B --c 1,8,64 --steps 50 --json | jq -c "{c, ratio}"',
        'tsx scripts/serve-bench.ts --model tiny --layers 2 --backend cpu --c 1,4 --steps 8 --identity-steps 16',
      ],
    },
    OPTIONS,
  );
}

/** Parses argv (without node and the script); null when --help or --version was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): ServeBenchArgs | null {
  const o = parseWithCac(makeCli(), argv);
  if (o === null) return null;
  return asUsage(() => {
    const name = optionText(o, 'model');
    if (name === undefined) throw new Error('--model <name> is required');
    const model = findModel(name);
    const backend = parseBackend(optionText(o, 'backend'));
    const dtypes = parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default) as string);
    if (dtypes.length !== 1) throw new Error('--dtype takes one type: bf16 or fp16');
    const context = optionInt(o, 'context', OPTIONS.context.default, 0, MAX_POSITIONS - 1);
    const steps = optionInt(o, 'steps', OPTIONS.steps.default, 1, MAX_POSITIONS);
    const identitySteps = optionInt(o, 'identitySteps', OPTIONS.identitySteps.default, 0, MAX_POSITIONS);
    const positions = context + Math.max(steps, identitySteps);
    if (positions > MAX_POSITIONS) {
      throw new Error(`--context ${context} plus ${Math.max(steps, identitySteps)} new tokens is ${positions} positions; at most ${MAX_POSITIONS}`);
    }
    const memText = optionText(o, 'memLimit');
    const memGib = memText === undefined ? null : /^\d*\.?\d+$/.test(memText) ? Number(memText) : NaN;
    if (memGib !== null && !(memGib > 0)) throw new Error(`--mem-limit must be a positive number of GiB, got '${memText}'`);
    const table = optionText(o, 'table') ?? null;
    if (table === '') throw new Error('--table needs a file');
    const tablesDir = optionText(o, 'tablesDir', OPTIONS.tablesDir.default) as string;
    if (tablesDir === '') throw new Error('--tables-dir needs a folder');
    return {
      model,
      layers: optionInt(o, 'layers', model.layers, 1, model.layers),
      concurrency: parseConcurrency(optionText(o, 'c', OPTIONS.c.default) as string),
      context,
      steps,
      runs: optionInt(o, 'runs', OPTIONS.runs.default, 1, 1000),
      identitySteps,
      table,
      tablesDir,
      backend,
      dtype: dtypes[0]!,
      seed: optionInt(o, 'seed', OPTIONS.seed.default, 0, Number.MAX_SAFE_INTEGER),
      memLimit: memGib === null ? null : memGib * 1024 ** 3,
      checkStep: o.checkStep === true,
      json: o.json === true,
      quiet: o.quiet === true,
    };
  });
}

// ---- output ------------------------------------------------------------------

const fmt = (x: number, digits = 1) => x.toFixed(digits);

function armJson(s: ArmSummary | null, route: ArmRoute) {
  return {
    tok_s: s?.tokPerS ?? null,
    step_p50_us: s?.stepP50Us ?? null,
    step_p90_us: s?.stepP90Us ?? null,
    runs: s?.runs ?? 0,
    stalled: s?.stalled ?? 0,
    stalled_runs: s?.stalledRuns ?? [],
    route: route.names,
  };
}

function rowJson(args: ServeBenchArgs, r: RowResult) {
  const id = r.identity;
  return {
    kind: 'row',
    model: args.model.name,
    layers: args.layers,
    dtype: args.dtype,
    context: args.context,
    c: r.c,
    steps: args.steps,
    default: armJson(r.arms?.default ?? null, r.routes.default),
    table: armJson(r.arms?.table ?? null, r.routes.table),
    ratio: r.ratio,
    below_floor: r.ratio !== null && r.ratio < RATIO_FLOOR,
    identity:
      id === null
        ? null
        : { steps: id.steps, status: id.status, first_diff_step: id.firstDiffStep, rows_diverged: id.rowsDiverged, differences: id.differences, why: id.why },
  };
}

const HEADER = ['c', 'default tok/s', 'table tok/s', 'ratio', 'default p50/p90 µs', 'table p50/p90 µs', 'stalled', 'identity'];
const WIDTHS = [4, 14, 12, 8, 19, 17, 8, 0];
const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? ` ${c}` : c.padStart(WIDTHS[i]!))).join(' ');

function humanRow(r: RowResult): string {
  const colors = colorsFor(process.stderr);
  const a = r.arms;
  const p = (s: ArmSummary) => `${fmt(s.stepP50Us, 0)} / ${fmt(s.stepP90Us, 0)}`;
  const ratio = r.ratio === null ? '-' : `${r.ratio.toFixed(3)}x`;
  const id = r.identity;
  const idText = id === null ? 'skipped' : id.status === 'identical' ? 'identical' : id.status === 'explained' ? `differs @${id.firstDiffStep} (explained)` : `DIFFERS @${id.firstDiffStep}`;
  return line([
    String(r.c),
    a ? fmt(a.default.tokPerS) : '-',
    a ? fmt(a.table.tokPerS) : '-',
    r.ratio !== null && r.ratio < RATIO_FLOOR ? colors.yellow(ratio) : ratio,
    a ? p(a.default) : '-',
    a ? p(a.table) : '-',
    a ? `${a.default.stalled}/${a.table.stalled}` : '-',
    id?.status === 'failed' ? colors.red(idText) : idText,
  ]);
}

/** "qkv gemv.rpb4.u8 (default blaslt), ..." or that the routes agree. */
function routeLine(r: RowResult): string {
  const d = r.routes.default.names;
  const t = r.routes.table.names;
  const moved = LINEAR_KINDS.filter((k) => d[k] !== t[k]).map((k) => `${k} ${t[k]} (default ${d[k]})`);
  return `c=${r.c} table route: ${moved.length > 0 ? moved.join(', ') : `the defaults (${LINEAR_KINDS.map((k) => d[k]).join(', ')})`}`;
}

/** One whole step of each route from the prompt state, against its fp64 forward on the host. */
function checkSteps(model: Model, routes: Record<ArmName, ArmRoute>, c: number, seed: number, say: (label: string) => unknown) {
  return ARMS.map((arm) => {
    say(`checking one step of the ${arm} route against fp64 on the host`);
    model.reset(seed);
    return { arm, ...model.check(routes[arm].ids, c) };
  });
}

// ---- main ----------------------------------------------------------------------

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const human = !args.quiet;
  const kpick = openKpick(args.backend);
  const info = kpick.info();
  const build = buildOf(kpick);
  const space = kpick.candidates();
  const native = new NativeModels(kpick);

  // the two routes: the defaults, and the table the guard lets in (or its verdict why not)
  const tablePath = args.table ?? defaultTablePath(args.tablesDir, build.identity);
  const defaults = loadRoute(null, build, process.env);
  const tableRoute = loadRoute(tablePath, build, process.env);
  const routes = args.concurrency.map((c) => {
    const pair: Record<ArmName, ArmRoute> = {
      default: routeArm(defaults, kpick, args.model, args.dtype, c),
      table: routeArm(tableRoute, kpick, args.model, args.dtype, c),
    };
    return pair;
  });

  // memory, before anything is allocated
  const maxBatch = args.concurrency[args.concurrency.length - 1]!;
  const dims = dimsOf(args.model, { layers: args.layers, maxBatch, context: args.context, maxNew: Math.max(args.steps, args.identitySteps), dtype: args.dtype });
  const budget = args.memLimit === null ? info.memFree : Math.min(args.memLimit, info.memFree);
  const note = args.memLimit !== null && args.memLimit < info.memFree ? 'usable (--mem-limit)' : 'free';
  const fit = checkFit(native, args.model, dims, budget, note);
  if (!fit.fits) throw new UsageError(fit.message);

  // every non-linear op of the step against fp64 on this backend, before any timing
  const checks: SelfCheck[] = DECODE_OPS.map((op) => native.selfcheck(op, args.dtype, args.seed));
  const bad = checks.filter((c) => !c.pass);
  if (bad.length > 0) {
    throw new Error(`decode ops failed their fp64 check: ${bad.map((c) => `${c.op} rel err ${c.relErr.toExponential(2)} > ${c.tol.toExponential(2)}`).join('; ')}`);
  }

  if (human) say(tableRoute.verdict.line);
  if (!tableRoute.verdict.used) warn('the table route is the default route: both arms run the same candidates');
  if (args.json) {
    printJsonLine({
      kind: 'setup',
      model: args.model.name,
      layers: args.layers,
      dtype: args.dtype,
      context: args.context,
      concurrency: args.concurrency,
      steps: args.steps,
      runs: args.runs,
      identity_steps: args.identitySteps,
      seed: args.seed,
      library: kpick.path,
      identity: build.identity,
      table: { path: tablePath, kind: tableRoute.verdict.kind, used: tableRoute.verdict.used, line: tableRoute.verdict.line },
      bytes: fit.bytes,
      budget,
      selfcheck: checks.map((c) => ({ op: c.op, rel_err: c.relErr, tol: c.tol, pass: c.pass })),
    });
  }
  if (human) {
    say(
      `serve-bench: ${args.model.name}, ${args.layers} of ${args.model.layers} layers, ${args.dtype}, context ${args.context}; ` +
        `2 lanes x ${args.runs} runs x ${args.steps} steps per arm; identity ${args.identitySteps} steps; ` +
        `${info.backend} ${info.device}; ${gib(fit.bytes)} of ${gib(budget)}`,
    );
  }

  const progress = new Progress(human);
  if (human) progress.update(0, 1, `creating the model (${gib(fit.bytes)})`);
  const model = native.create(dims, args.seed);
  const results: RowResult[] = [];
  try {
    const stepChecks = args.checkStep ? checkSteps(model, routes[0]!, args.concurrency[0]!, args.seed + 1, (label) => human && progress.update(0, 1, label)) : [];
    progress.end();
    const badSteps = stepChecks.filter((c) => !c.pass);
    if (args.json && stepChecks.length > 0) {
      printJsonLine({ kind: 'step-check', c: args.concurrency[0], checks: stepChecks.map((c) => ({ arm: c.arm, rel_err: c.relErr, tol: c.tol, pass: c.pass })) });
    }
    if (human) for (const c of stepChecks) say(`step check (${c.arm} route, c=${args.concurrency[0]}): rel err ${c.relErr.toExponential(2)}, tol ${c.tol.toExponential(2)}: ${c.pass ? 'pass' : 'FAIL'}`);
    if (badSteps.length > 0) throw new Error(`the decode step of the ${badSteps.map((c) => c.arm).join(' and ')} route differs from its fp64 forward`);
    if (human) {
      progress.end();
      say(line(HEADER));
    }
    args.concurrency.forEach((c, i) => {
      const row = benchRow(model, routes[i]!, space, { c, steps: args.steps, runs: args.runs, identitySteps: args.identitySteps, seed: args.seed + 1 }, (done, total, label) =>
        progress.update(done, total, label),
      );
      progress.end();
      results.push(row);
      if (args.json) printJsonLine(rowJson(args, row));
      if (human) say(humanRow(row));
    });
  } finally {
    progress.end();
    model.free();
  }

  if (human) {
    for (const r of results) say(routeLine(r));
    for (const r of results) if (r.identity && r.identity.status !== 'identical') say(`c=${r.c} identity: ${r.identity.why}`);
    const stalled = results.reduce((n, r) => n + (r.arms ? ARMS.reduce((m, a) => m + r.arms![a].stalled, 0) : 0), 0);
    if (stalled > 0) say(`stalled runs (median step over 1.5x its lane's): ${stalled}, kept in every figure above`);
  }
  const failed = results.filter((r) => r.identity?.status === 'failed');
  for (const r of failed) say(colorsFor(process.stderr).red(`serve-bench: c=${r.c}: ${r.identity!.why}`));
  return failed.length > 0 ? EXIT.failed : EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('serve-bench', () => main(process.argv.slice(2)));
