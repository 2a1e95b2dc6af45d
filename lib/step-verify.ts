// The step-verify job (scripts/step-verify.ts): each pick of a table timed in
// the whole decode step, where the sweep cannot see it: the step runs the
// table's route at c rows as it is and with one linear moved back to its class
// default, in interleaved rounds, and appends one step record per pick to the
// store's steps/ folder. Where the step is slower with a pick, or the table
// keeps the default while the sweep found a runner-up faster (below its gate or
// noise), it may then time up to --alternatives of the sweep's runners-up in
// its place, each against the default (records marked `alternative`). promote
// reads them (lib/step-verdict.ts says the rule).
import { join } from 'node:path';
import { asUsage, colorsFor, EXIT, printJsonLine, Progress, say, UsageError, warn } from './cli.ts';
import { openKpick } from './ffi.ts';
import { kindDtype, LINEAR_KINDS, NativeModels, type LinearKind, type Model } from './model-ffi.ts';
import { decodeLinears, type ModelPreset } from './models.ts';
import { bucketOf, buildOf, loadRoute } from './route.ts';
import { STORE_VERSION, type Dtype, type StepRecord, type TableEntry } from './schema.ts';
import { checkFit, dimsOf, gib, routeArm, type ArmRoute } from './serve.ts';
import { entryKey } from './shape-key.ts';
import { median } from './stats.ts';
import { judgeStep, stepAlternatives, stepLine, type PdlCut } from './step-verdict.ts';
import { STEPS_DIR, StoreLock, StoreWriter } from './store.ts';
import { defaultTablePath, readTable } from './table.ts';

/** What step-verify builds, times and stores: scripts/step-verify.ts's options. */
export interface StepVerifyJob {
  model: ModelPreset;
  layers: number;
  concurrency: number[];
  context: number;
  /** decode steps a timing; the round's sample is their median */
  steps: number;
  rounds: number;
  /** runners-up timed in place of a pick the step is slower with (0: none) */
  alternatives: number;
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
  return withCandidate(table, kind, defaults.ids[LINEAR_KINDS.indexOf(kind)]!);
}

/** The table route's ids with one linear on candidate `id`. */
export function withCandidate(table: ArmRoute, kind: LinearKind, id: number): Int32Array {
  const ids = Int32Array.from(table.ids);
  ids[LINEAR_KINDS.indexOf(kind)] = id;
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

/** One timed comparison of a step record: this linear on `pick` (the route as it is, or a runner-up) against it on the default. */
export interface StepTiming {
  kind: LinearKind;
  pick: string;
  pickUs: number[];
  defaultUs: number[];
  alternative: boolean;
}

/** What verifyAt times at one c: the route, the default's, and which linears differ. */
export interface StepPlan {
  c: number;
  table: ArmRoute;
  def: ArmRoute;
  kinds: LinearKind[];
}

/**
 * One c's picks timed in the step, in interleaved rounds; then, for each pick
 * the step is slower with and each linear the table keeps on the default, its
 * runners-up (name and candidate id, fastest first) each in its place against
 * the default, in rounds of their own. The timings in that order: the picks',
 * then each slower pick's runners-up, then the kept linears'.
 */
export function verifyAt(
  model: Pick<Model, 'time'>,
  plan: StepPlan,
  steps: number,
  rounds: number,
  runnersUp: (kind: LinearKind) => { name: string; id: number }[],
  onTiming: (done: number, total: number, what: string) => void = () => {},
): StepTiming[] {
  const variants = [plan.table.ids, ...plan.kinds.map((k) => withDefault(plan.table, plan.def, k))];
  const timed = plan.kinds.length === 0 ? [] : timeRounds(model as Model, variants, plan.c, steps, rounds, (done, total) => onTiming(done, total, plan.kinds.join(', ')));
  const out: StepTiming[] = plan.kinds.map((kind, i) => ({ kind, pick: plan.table.names[kind]!, pickUs: timed[0]!, defaultUs: timed[i + 1]!, alternative: false }));
  const slower = out.filter((x) => judgeStep({ pick_us: x.pickUs, default_us: x.defaultUs }).verdict === 'slower').map((x) => x.kind);
  const kept = LINEAR_KINDS.filter((k) => plan.table.names[k] !== undefined && plan.table.names[k] === plan.def.names[k]);
  for (const kind of [...slower, ...kept]) {
    const alts = runnersUp(kind);
    if (alts.length === 0) continue;
    const altTimed = timeRounds(
      model as Model,
      [...alts.map((a) => withCandidate(plan.table, kind, a.id)), withDefault(plan.table, plan.def, kind)],
      plan.c, steps, rounds,
      (done, total) => onTiming(done, total, `${kind}'s runners-up ${alts.map((a) => a.name).join(', ')}`),
    );
    alts.forEach((a, i) => out.push({ kind, pick: a.name, pickUs: altTimed[i]!, defaultUs: altTimed[alts.length]!, alternative: true }));
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
  // the entries behind the route, for the sweep's runners-up (--alternatives)
  const entries = new Map<string, TableEntry>();
  let cut: PdlCut | null = null; // the table's --pdl-rows: promote would not take a PDL runner-up past it, so none is timed
  if (args.alternatives > 0) {
    const read = readTable(tablePath);
    if ('error' in read) throw new UsageError(`--alternatives needs the table's entries: ${read.error}`);
    for (const e of read.table.entries) entries.set(entryKey(e, e.bucket), e);
    const pdlRows = read.table.gate.pdl_rows;
    if (pdlRows !== undefined) cut = { pdlRows, pdl: new Set(kpick.candidates().filter((c) => c.pdl).map((c) => c.name)) };
  }
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
  const write = (plan: StepPlan, kind: LinearKind, pick: string, pickUs: number[], defaultUs: number[], alternative: boolean): StepRecord => {
    const linear = linears.find((l) => l.name === kind)!;
    return writer.appendStep({
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
      pick,
      default: plan.def.names[kind]!,
      ...(alternative ? { alternative: true } : {}),
      route: Object.fromEntries(Object.entries(plan.table.names)),
      steps: args.steps,
      pick_us: pickUs,
      default_us: defaultUs,
      at: new Date().toISOString(),
    });
  };
  const report = (record: StepRecord) => {
    const j = judgeStep(record);
    if (args.json) printJsonLine({ ...record, verdict: j.verdict, change: j.change, p_default_faster: j.pDefaultFaster, p_pick_faster: j.pPickFaster });
    if (human) say(`${record.alternative ? 'runner-up: ' : ''}${stepLine(record, j)}`);
    return j;
  };
  try {
    model = native.create(dims, args.seed);
    for (const plan of plans) {
      if (plan.kinds.length === 0 && args.alternatives === 0) {
        progress.end();
        if (human) say(`c=${plan.c}: the table routes every linear as the default does: nothing to verify`);
        continue;
      }
      const runnersUp = (kind: LinearKind) => {
        const linear = linears.find((l) => l.name === kind)!;
        const entry = entries.get(entryKey({ op: linear.op, dtype: kindDtype(args.dtype, kind), n: linear.n, k: linear.k, experts: linear.experts, topk: linear.topk }, bucketOf(plan.c)));
        return entry ? stepAlternatives(entry, args.alternatives, cut).map((name) => ({ name, id: kpick.candidate(name).id })) : [];
      };
      const timings = verifyAt(model, plan, args.steps, args.rounds, runnersUp, (done, total, what) => progress.update(done, total, `c=${plan.c}: ${what}`));
      progress.end();
      for (const t of timings) {
        const j = report(write(plan, t.kind, t.pick, t.pickUs, t.defaultUs, t.alternative));
        if (!t.alternative && j.verdict === 'slower') slower++;
      }
    }
  } finally {
    progress.end();
    model?.free();
    writer.close();
    lock.release();
  }
  const where = args.alternatives > 0 ? 'promote keeps the default there, or a runner-up the step is faster with' : 'promote keeps the default there';
  if (human) say(`step-verify: ${writer.written} step record(s) in ${writer.file}${writer.written === 0 ? ' (none: removed)' : ''}; ${slower} pick(s) make the step slower (${where})`);
  if (writer.written === 0) warn('no table pick differs from the default at these concurrencies');
  return EXIT.ok;
}
