// The step's word on a table pick: pure functions over step records
// (scripts/step-verify.ts), applied by promote after the kernel rule
// (lib/promote.ts).
//
// The sweep times each candidate alone, after a producer shaped as the norm
// before it. A decode step puts it elsewhere: after a gated linear, before
// attention, beside kernels that launch early under PDL. On the H200 the
// table's picks at rows 4-8 ran 3-35 % slower in the step than in the sweep
// where cuBLASLt ran -5 to +20 % (bench/results/h200-2026-12-02-step-sweep-
// 1b4d171), so a pick the sweep found 7 % faster could make the step slower.
// A step record times the step at c rows with the table's route as it is and
// with one linear moved back to its class default, in interleaved rounds.
//
// The rule: a pick is vetoed, and its entry keeps the default, when some step
// record of it shows the step with the default faster past the noise (the
// one-sided rank test of lib/stats.ts on the rounds' medians, p < NOISE_P, as
// promote's noise check), and none shows the step with the pick faster past
// it. A step record applies to the entry of its shape and rows bucket whose
// choice and default are the record's pick and default: a record of another
// pick (the table since re-promoted) says nothing about this one and is left
// out with a warning.
//
// Alternatives (step-verify --alternatives): where the step is slower with the
// pick, or the kernel rule kept the default, step-verify may time the sweep's
// runners-up in its place, each against the default (records marked
// `alternative`). A runner-up is a candidate of the
// entry the sweep found faster than the default, with parity passed and nothing
// that bars it whatever its margin (a looser parity bar, more graph nodes:
// lib/promote.ts). A vetoed entry, or one the kernel rule kept on the default
// (a runner-up below the gate or within the sweep's noise), takes the
// alternative whose records show the step faster than with the default past
// the noise (and none slower), the one with the largest gain; else it keeps
// the default. So the step may pick a runner-up the sweep's gate did not, but
// only on the step's own evidence.
// promote's --pdl-rows cut holds for runners-up too: a candidate that chains
// with PDL (the store's records say which) is no runner-up past those rows.
import { byText, isEligible, looserBar, moreNodes, NOISE_P, percent } from './promote.ts';
import type { StepRecord, TableEntry } from './schema.ts';
import { entryKey, shapeId } from './shape-key.ts';
import { median, rankTest } from './stats.ts';

/** What one step record says about its pick. */
export interface StepJudgement {
  /** median over the rounds of the step with the pick, and with the default */
  pickUs: number;
  defaultUs: number;
  /** pickUs / defaultUs - 1: above 0, the pick makes the step slower */
  change: number;
  /** the rank test's p that the step with the default is faster, and that the step with the pick is */
  pDefaultFaster: number;
  pPickFaster: number;
  verdict: 'slower' | 'faster' | 'within noise';
}

export function judgeStep(r: Pick<StepRecord, 'pick_us' | 'default_us'>): StepJudgement {
  const pickUs = median(r.pick_us);
  const defaultUs = median(r.default_us);
  const pDefaultFaster = rankTest(r.default_us, r.pick_us).p;
  const pPickFaster = rankTest(r.pick_us, r.default_us).p;
  const verdict = pDefaultFaster < NOISE_P ? 'slower' : pPickFaster < NOISE_P ? 'faster' : 'within noise';
  return { pickUs, defaultUs, change: pickUs / defaultUs - 1, pDefaultFaster, pPickFaster, verdict };
}

/** One line: where it was timed and what the step said. */
export function stepLine(r: StepRecord, j: StepJudgement = judgeStep(r)): string {
  const p = j.verdict === 'faster' ? j.pPickFaster : j.pDefaultFaster;
  return (
    `${r.model} c=${r.c} ${r.linear}: step ${j.pickUs.toFixed(1)} us with ${r.pick}, ${j.defaultUs.toFixed(1)} us with ${r.default} ` +
    `(${percent(j.change)}, ${j.verdict}${j.verdict === 'within noise' ? '' : `, p ${p.toPrecision(2)}`} over ${r.pick_us.length} rounds)`
  );
}

/** Which candidates chain with PDL, and the most rows they are picked at (promote's --pdl-rows). */
export interface PdlCut {
  pdlRows: number;
  pdl: ReadonlySet<string>;
}

/**
 * The runners-up of an entry a step may time in place of its choice: eligible
 * candidates other than the choice and the default, faster than the default
 * in the sweep, that no rule bars whatever their margin (nor the --pdl-rows
 * cut, given one); fastest first, at most `limit`.
 */
export function stepAlternatives(e: TableEntry, limit: number, cut: PdlCut | null = null): string[] {
  const def = e.candidates[e.default];
  if (!def || !isEligible(def)) return [];
  return Object.entries(e.candidates)
    .filter(([name, c]) => name !== e.choice && name !== e.default && isEligible(c))
    .filter(([, c]) => (c.median_us as number) < (def.median_us as number))
    .filter(([, c]) => looserBar(e.op, e.dtype, c, def) === null && moreNodes(e.op, c, def) === null)
    .filter(([name]) => cut === null || e.bucket <= cut.pdlRows || !cut.pdl.has(name))
    .sort(([a, x], [b, y]) => (x.median_us as number) - (y.median_us as number) || byText(a, b))
    .slice(0, limit)
    .map(([name]) => name);
}

/** Of a vetoed entry's alternative records, the runner-up the step is faster with past the noise (none slower), the largest gain first. */
function stepPick(e: TableEntry, records: readonly StepRecord[], cut: PdlCut | null): { name: string; r: StepRecord; j: StepJudgement } | null {
  const allowed = new Set(stepAlternatives(e, Infinity, cut));
  const byName = new Map<string, { r: StepRecord; j: StepJudgement }[]>();
  for (const r of records) {
    if (r.default !== e.default || !allowed.has(r.pick)) continue;
    byName.set(r.pick, [...(byName.get(r.pick) ?? []), { r, j: judgeStep(r) }]);
  }
  let best: { name: string; r: StepRecord; j: StepJudgement } | null = null;
  for (const [name, judged] of byName) {
    if (judged.some((x) => x.j.verdict === 'slower')) continue;
    for (const x of judged) {
      if (x.j.verdict === 'faster' && (best === null || x.j.change < best.j.change)) best = { name, ...x };
    }
  }
  return best;
}

/**
 * The entries with the step's verdicts applied (a vetoed entry keeps its
 * default, or takes the runner-up its alternative records show faster; an
 * entry kept on its default may take such a runner-up too; the reason says
 * why and what the kernel rule had said), and a warning per record that
 * matches no entry's pick.
 */
export function applyStepVerdicts(entries: readonly TableEntry[], records: readonly StepRecord[], cut: PdlCut | null = null): { entries: TableEntry[]; vetoed: number; stepPicked: number; vetoedMoved: number; warnings: string[] } {
  const byEntry = new Map<string, StepRecord[]>();
  for (const r of records) {
    const key = entryKey(r, r.rows);
    byEntry.set(key, [...(byEntry.get(key) ?? []), r]);
  }
  const warnings: string[] = [];
  let vetoed = 0;
  let stepPicked = 0; // entries moved to a runner-up, whether their pick was vetoed or the rule had kept the default
  let vetoedMoved = 0; // of those, the vetoed picks
  const vetoes: StepRecord[] = []; // the worst record of each veto, for vetoSharing
  const out = entries.map((e) => {
    const key = entryKey(e, e.bucket);
    const all = byEntry.get(key);
    if (!all) return e;
    byEntry.delete(key); // what stays in byEntry matches no entry
    const alternatives = all.filter((r) => r.alternative === true);
    const mine = all.filter((r) => r.alternative !== true);
    const applies = mine.filter((r) => r.pick === e.choice && r.default === e.default);
    for (const r of mine.filter((x) => !applies.includes(x))) {
      warnings.push(`step record ${r.model} c=${r.c} ${r.linear} timed ${r.pick} against ${r.default}; ${e.dtype} ${shapeId(e)} bucket ${e.bucket} now has ${e.choice} (default ${e.default}): not applied`);
    }
    if (e.choice === e.default) { /* the kernel rule kept the default: a runner-up may still serve the step faster */
      const alt = stepPick(e, alternatives, cut);
      if (!alt) return e;
      stepPicked++;
      return { ...e, choice: alt.name, reason: `picked in the step: ${stepLine(alt.r, alt.j)}; the kernel alone: ${e.reason}` };
    }
    const judged = applies.map((r) => ({ r, j: judgeStep(r) }));
    const slower = judged.filter((x) => x.j.verdict === 'slower');
    if (slower.length === 0 || judged.some((x) => x.j.verdict === 'faster')) return e;
    vetoed++;
    const worst = slower.reduce((a, b) => (b.j.change > a.j.change ? b : a));
    vetoes.push(worst.r);
    const alt = stepPick(e, alternatives, cut);
    if (alt) {
      stepPicked++;
      vetoedMoved++;
      return { ...e, choice: alt.name, reason: `picked in the step: ${stepLine(alt.r, alt.j)}; the sweep's pick made it slower: ${stepLine(worst.r, worst.j)}; the kernel alone: ${e.reason}` };
    }
    return { ...e, choice: e.default, reason: `kept: the step is faster with the default: ${stepLine(worst.r, worst.j)}; the kernel alone: ${e.reason}` };
  });
  warnings.push(...vetoSharing(vetoes));
  for (const rs of byEntry.values()) {
    for (const r of rs) warnings.push(`step record ${r.model} c=${r.c} ${r.linear} (${r.dtype} ${shapeId(r)} bucket ${r.rows}) matches no table entry: not applied`);
  }
  return { entries: out, vetoed, stepPicked, vetoedMoved, warnings };
}

/**
 * A warning per step (model, dtype, c) where picks of two or more linears were
 * vetoed: each was timed against the table's whole step with the others in
 * place, so one pair's interaction vetoes both (on the H200, Qwen3-4B c=16's
 * .pdl gate_up and .pdl down: either one reverted sped the step up 9-12 %),
 * and reverting both may give up a pick the step could keep.
 */
export function vetoSharing(vetoes: readonly StepRecord[]): string[] {
  const bySt = new Map<string, StepRecord[]>();
  for (const r of vetoes) {
    const key = `${r.model} ${r.weights} c=${r.c}`;
    bySt.set(key, [...(bySt.get(key) ?? []), r]);
  }
  return [...bySt.entries()]
    .filter(([, rs]) => rs.length > 1)
    .map(([key, rs]) => `step ${key}: ${rs.length} picks vetoed on one table step (${rs.map((r) => `${r.linear} ${r.pick}`).join(', ')}): each was timed with the others in place, so their slowdowns may share one cause`);
}
