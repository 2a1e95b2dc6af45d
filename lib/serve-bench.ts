// The serve-bench job (scripts/serve-bench.ts): decode-step throughput of a
// model's shapes, the default route against this machine's table route, on
// the same weights and prompts, at several concurrencies, plus greedy token
// identity between the two. The engine is lib/serve.ts.
import { colorsFor, EXIT, printJsonLine, Progress, say, UsageError, warn } from './cli.ts';
import { activationDtype, openKpick } from './ffi.ts';
import { DECODE_OPS, NativeModels, type Model, type SelfCheck } from './model-ffi.ts';
import type { ModelPreset } from './models.ts';
import type { Dtype } from './schema.ts';
import { buildOf, loadRoute } from './route.ts';
import { ARMS, benchRow, checkFit, dimsOf, gib, routeArm, type ArmName, type ArmRoute, type RowResult } from './serve.ts';
import { HEADER, humanRow, line, routeLine, rowJson } from './serve-report.ts';
import { defaultTablePath } from './table.ts';

/** What serve-bench builds, runs and reports: scripts/serve-bench.ts's options. */
export interface ServeBenchJob {
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

/** One whole step of each route from the prompt state, against its fp64 forward on the host. */
function checkSteps(model: Model, routes: Record<ArmName, ArmRoute>, c: number, seed: number, say: (label: string) => unknown) {
  return ARMS.map((arm) => {
    say(`checking one step of the ${arm} route against fp64 on the host`);
    model.reset(seed);
    return { arm, ...model.check(routes[arm].ids, c) };
  });
}

/**
 * The serve-bench job: both routes on one model of random weights, the
 * non-linear ops (and, asked, one whole step) checked against fp64 first,
 * then each concurrency timed and its greedy tokens compared.
 */
export function serveBenchJob(args: ServeBenchJob): number {
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
  // the non-linear ops run in the activations' dtype (bf16 in an fp8 model)
  const checks: SelfCheck[] = DECODE_OPS.map((op) => native.selfcheck(op, activationDtype(args.dtype), args.seed));
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
