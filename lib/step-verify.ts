// The step-verify job (scripts/step-verify.ts): each pick of a table timed in
// the whole decode step, where the sweep cannot see it: the step runs the
// table's route at c rows as it is and with one linear moved back to its class
// default, in interleaved rounds, and appends one step record per pick to the
// store's steps/ folder. promote reads them (lib/step-verdict.ts says the rule).
import { join } from 'node:path';
import { asUsage, colorsFor, EXIT, printJsonLine, Progress, say, UsageError, warn } from './cli.ts';
import { openKpick } from './ffi.ts';
import { kindDtype, LINEAR_KINDS, NativeModels, type LinearKind, type Model } from './model-ffi.ts';
import { decodeLinears, type ModelPreset } from './models.ts';
import { bucketOf, buildOf, loadRoute } from './route.ts';
import { STORE_VERSION, type Dtype, type StepRecord } from './schema.ts';
import { checkFit, dimsOf, gib, routeArm, type ArmRoute } from './serve.ts';
import { median } from './stats.ts';
import { judgeStep, stepLine } from './step-verdict.ts';
import { STEPS_DIR, StoreLock, StoreWriter } from './store.ts';
import { defaultTablePath } from './table.ts';

/** What step-verify builds, times and stores: scripts/step-verify.ts's options. */
export interface StepVerifyJob {
  model: ModelPreset;
  layers: number;
  concurrency: number[];
  context: number;
  /** decode steps a timing; the round's sample is their median */
  steps: number;
  rounds: number;
  table: string | null;
  tablesDir: string;
  store: string;
  backend: string | undefined;
  dtype: Dtype;
  seed: number;
  memLimit: number | null;
  json: boolean;
  quiet: boolean;
}

/** The route's linears that differ from the default's at one c: what a step record is kept for. */
export function picksToVerify(table: ArmRoute, defaults: ArmRoute): LinearKind[] {
  return LINEAR_KINDS.filter((k) => table.names[k] !== undefined && table.names[k] !== defaults.names[k]);
}

/** The table route's ids with one linear on the default's candidate. */
export function withDefault(table: ArmRoute, defaults: ArmRoute, kind: LinearKind): Int32Array {
  const ids = Int32Array.from(table.ids);
  const i = LINEAR_KINDS.indexOf(kind);
  ids[i] = defaults.ids[i]!;
  return ids;
}

/**
 * rounds x (the route, then each variant): each timing is `steps` decode steps
 * and gives its median; the starting variant rotates each round, so none is
 * always timed first (after the clocks' idle). Returns per variant (index 0:
 * the route) the rounds' medians, in round order.
 */
export function timeRounds(model: Model, variants: readonly Int32Array[], c: number, steps: number, rounds: number, onTiming: (done: number, total: number) => void = () => {}): number[][] {
  const out = variants.map(() => [] as number[]);
  const total = rounds * variants.length;
  let done = 0;
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < variants.length; j++) {
      const v = (j + r) % variants.length;
      onTiming(done++, total);
      out[v]!.push(median(model.time(variants[v]!, c, steps)));
    }
  }
  return out;
}

export function stepVerifyJob(args: StepVerifyJob): number {
  const human = !args.quiet;
  const kpick = openKpick(args.backend);
  const info = kpick.info();
  const build = buildOf(kpick);
  const native = new NativeModels(kpick);

  const tablePath = args.table ?? defaultTablePath(args.tablesDir, build.identity);
  const tableRoute = loadRoute(tablePath, build, process.env);
  // a table the guard refuses has nothing to verify: say why, as refuse-check does
  if (!tableRoute.verdict.used) {
    say(colorsFor(process.stderr).red(`step-verify: no table to verify: ${tableRoute.verdict.line}`));
    return EXIT.refused;
  }
  const defaults = loadRoute(null, build, process.env);
  const plans = args.concurrency.map((c) => {
    const table = routeArm(tableRoute, kpick, args.model, args.dtype, c);
    const def = routeArm(defaults, kpick, args.model, args.dtype, c);
    return { c, table, def, kinds: picksToVerify(table, def) };
  });

  const maxBatch = args.concurrency[args.concurrency.length - 1]!;
  const dims = dimsOf(args.model, { layers: args.layers, maxBatch, context: args.context, maxNew: args.steps, dtype: args.dtype });
  const budget = args.memLimit === null ? info.memFree : Math.min(args.memLimit, info.memFree);
  const fit = checkFit(native, args.model, dims, budget, args.memLimit !== null && args.memLimit < info.memFree ? 'usable (--mem-limit)' : 'free');
  if (!fit.fits) throw new UsageError(fit.message);

  // the store is opened before anything is timed: an unwritable one fails here; one
  // step-verify at a time per store, as one sweep (two would slow each other's steps)
  const stepsDir = join(args.store, STEPS_DIR);
  const lock = asUsage(() => StoreLock.acquire(stepsDir, 'step'));
  let writer: StoreWriter;
  try {
    writer = asUsage(() => StoreWriter.open(stepsDir, 'step'));
  } catch (err) {
    lock.release();
    throw err;
  }
  if (human) {
    say(tableRoute.verdict.line);
    say(`step-verify: ${args.model.name}, ${args.layers} of ${args.model.layers} layers, ${args.dtype}; ${args.rounds} rounds x ${args.steps} steps a timing; ${info.backend} ${info.device}; ${gib(fit.bytes)}`);
  }
  const linears = decodeLinears(args.model);
  const progress = new Progress(human);
  if (human) progress.update(0, 1, `creating the model (${gib(fit.bytes)})`);
  let model: Model | null = null;
  let slower = 0;
  try {
    model = native.create(dims, args.seed);
    for (const plan of plans) {
      if (plan.kinds.length === 0) {
        progress.end();
        if (human) say(`c=${plan.c}: the table routes every linear as the default does: nothing to verify`);
        continue;
      }
      const variants = [plan.table.ids, ...plan.kinds.map((k) => withDefault(plan.table, plan.def, k))];
      const timed = timeRounds(model, variants, plan.c, args.steps, args.rounds, (done, total) => progress.update(done, total, `c=${plan.c}: ${plan.kinds.join(', ')}`));
      progress.end();
      plan.kinds.forEach((kind, i) => {
        const linear = linears.find((l) => l.name === kind)!;
        const record = writer.appendStep({
          v: STORE_VERSION,
          kind: 'step',
          identity: build.identity,
          model: args.model.name,
          layers: args.layers,
          weights: args.dtype,
          c: plan.c,
          linear: kind,
          op: linear.op,
          dtype: kindDtype(args.dtype, kind),
          n: linear.n,
          k: linear.k,
          ...(linear.op === 'moe' ? { experts: linear.experts, topk: linear.topk } : {}),
          rows: bucketOf(plan.c),
          pick: plan.table.names[kind]!,
          default: plan.def.names[kind]!,
          route: Object.fromEntries(Object.entries(plan.table.names)),
          steps: args.steps,
          pick_us: timed[0]!,
          default_us: timed[i + 1]!,
          at: new Date().toISOString(),
        });
        const j = judgeStep(record);
        if (j.verdict === 'slower') slower++;
        if (args.json) printJsonLine({ ...record, verdict: j.verdict, change: j.change, p_default_faster: j.pDefaultFaster, p_pick_faster: j.pPickFaster });
        if (human) say(stepLine(record, j));
      });
    }
  } finally {
    progress.end();
    model?.free();
    writer.close();
    lock.release();
  }
  if (human) say(`step-verify: ${writer.written} step record(s) in ${writer.file}${writer.written === 0 ? ' (none: removed)' : ''}; ${slower} pick(s) make the step slower (promote keeps the default there)`);
  if (writer.written === 0) warn('no table pick differs from the default at these concurrencies');
  return EXIT.ok;
}
