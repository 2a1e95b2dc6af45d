// The step's veto (lib/step-verdict.ts) on synthetic step records and table
// entries: every expected verdict follows from the rounds given, not from a
// measurement. Also the StepRecord schema and the steps/ folder of a store.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { StepRecord, STORE_VERSION, type CandidateResult, type TableEntry } from '../lib/schema.ts';
import { applyStepVerdicts, judgeStep, stepAlternatives, stepLine } from '../lib/step-verdict.ts';
import { readStore, readSteps, STEPS_DIR, StoreWriter } from '../lib/store.ts';
import { buildTable } from '../lib/table.ts';
import { evenSamples, problem, SYNTHETIC_IDENTITY } from './helpers/synthetic-records.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-step-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** A step record of linear `o` (linear 64x64, bucket 4) with the given rounds. */
function step(pick_us: number[], default_us: number[], over: Partial<StepRecord> = {}): StepRecord {
  return {
    v: STORE_VERSION,
    kind: 'step',
    identity: SYNTHETIC_IDENTITY,
    model: 'tiny',
    layers: 2,
    weights: 'bf16',
    c: 4,
    linear: 'o',
    op: 'linear',
    dtype: 'bf16',
    n: 64,
    k: 64,
    rows: 4,
    pick: 'rowblk.r2',
    default: 'plain',
    route: { qkv: 'plain', o: 'rowblk.r2' },
    steps: 16,
    pick_us,
    default_us,
    at: '2026-12-02T08:00:00.000Z',
    ...over,
  };
}

function entry(over: Partial<TableEntry> = {}): TableEntry {
  return { op: 'linear', dtype: 'bf16', n: 64, k: 64, bucket: 4, default: 'plain', choice: 'rowblk.r2', reason: 'picked rowblk.r2: +25.0 % over plain', floor_us: null, candidates: {}, ...over };
}

const SLOW = [1010, 1011, 1012, 1013, 1014, 1015, 1016];
const FAST = [1000, 1001, 1002, 1003, 1004, 1005, 1006];

test('judgeStep: the step with the default faster in every round is "slower", and the change is the medians\'', () => {
  const j = judgeStep(step(SLOW, FAST));
  assert.is(j.verdict, 'slower');
  assert.is(j.pickUs, 1013);
  assert.is(j.defaultUs, 1003);
  assert.ok(Math.abs(j.change - (1013 / 1003 - 1)) < 1e-12);
  assert.ok(j.pDefaultFaster < 0.01 && j.pPickFaster > 0.5);
  assert.is(judgeStep(step(FAST, SLOW)).verdict, 'faster');
  // interleaved rounds: neither side is faster past the noise
  assert.is(judgeStep(step([1000, 1003, 1004, 1007, 1008, 1011, 1012], [1001, 1002, 1005, 1006, 1009, 1010, 1013])).verdict, 'within noise');
});

test('stepLine names the model, c, linear, both steps, the change and the rounds', () => {
  assert.is(stepLine(step(SLOW, FAST)), 'tiny c=4 o: step 1013.0 us with rowblk.r2, 1003.0 us with plain (+1.0 %, slower, p 0.00029 over 7 rounds)');
});

test('a pick the step shows slower is vetoed: the entry keeps the default and says why, with the kernel rule\'s reason', () => {
  const { entries, vetoed, warnings } = applyStepVerdicts([entry()], [step(SLOW, FAST)]);
  assert.is(vetoed, 1);
  assert.equal(warnings, []);
  assert.is(entries[0]!.choice, 'plain');
  assert.is(entries[0]!.reason, 'kept: the step is faster with the default: tiny c=4 o: step 1013.0 us with rowblk.r2, 1003.0 us with plain (+1.0 %, slower, p 0.00029 over 7 rounds); the kernel alone: picked rowblk.r2: +25.0 % over plain');
});

test('a pick the step shows faster, or within noise, keeps its place untouched', () => {
  for (const r of [step(FAST, SLOW), step([1000, 1003, 1004, 1007, 1008, 1011, 1012], [1001, 1002, 1005, 1006, 1009, 1010, 1013])]) {
    const { entries, vetoed } = applyStepVerdicts([entry()], [r]);
    assert.is(vetoed, 0);
    assert.equal(entries[0], entry());
  }
});

test('two models disagree past the noise: the pick stays (the kernel rule decides)', () => {
  const { entries, vetoed } = applyStepVerdicts([entry()], [step(SLOW, FAST), step(FAST, SLOW, { model: 'tiny-2' })]);
  assert.is(vetoed, 0);
  assert.is(entries[0]!.choice, 'rowblk.r2');
});

test('of two slower records the reason quotes the larger change', () => {
  const worse = step(SLOW.map((x) => x + 20), FAST, { c: 3 });
  const { entries } = applyStepVerdicts([entry()], [step(SLOW, FAST), worse]);
  assert.match(entries[0]!.reason, /^kept: the step is faster with the default: tiny c=3 o: step 1033\.0 us/);
});

test('records of another pick, or of no entry, are left out with a warning each', () => {
  const other = step(SLOW, FAST, { pick: 'rowblk.r4' });
  const nowhere = step(SLOW, FAST, { n: 128 });
  const { entries, vetoed, warnings } = applyStepVerdicts([entry()], [other, nowhere]);
  assert.is(vetoed, 0);
  assert.is(entries[0]!.choice, 'rowblk.r2');
  assert.equal(warnings, [
    'step record tiny c=4 o timed rowblk.r4 against plain; bf16 linear/64/64 bucket 4 now has rowblk.r2 (default plain): not applied',
    'step record tiny c=4 o (bf16 linear/128/64 bucket 4) matches no table entry: not applied',
  ]);
  // another bucket is another entry
  assert.is(applyStepVerdicts([entry({ bucket: 8 })], [step(SLOW, FAST)]).vetoed, 0);
});

/** A timed candidate of an entry: median us, parity, nodes, numeric class. */
function cand(median_us: number, over: Partial<CandidateResult> = {}): CandidateResult {
  return { median_us, p25_us: median_us, p75_us: median_us, samples: 15, nodes: 1, params: {}, parity: 'pass', rel_err: 0, stack_bound: false, status: 'ok', ...over };
}

/** The entry of the step records above, its sweep: plain 100 us, the pick 80, runners-up rowblk.r4 85 and threads.t2 90. */
function swept(over: Partial<TableEntry> = {}): TableEntry {
  return entry({
    candidates: { plain: cand(100), 'rowblk.r2': cand(80), 'rowblk.r4': cand(85), 'threads.t2': cand(90), 'splitk.s4': cand(120) },
    ...over,
  });
}

test("stepAlternatives: the sweep's runners-up faster than the default, fastest first, at most the limit", () => {
  assert.equal(stepAlternatives(swept(), 5), ['rowblk.r4', 'threads.t2']);
  assert.equal(stepAlternatives(swept(), 1), ['rowblk.r4']);
  assert.equal(stepAlternatives(swept(), 0), []);
});

test('stepAlternatives with a --pdl-rows cut: a PDL runner-up only at rows up to it (the entry is bucket 4)', () => {
  const pdl = new Set(['rowblk.r4']);
  assert.equal(stepAlternatives(swept(), 5, { pdlRows: 2, pdl }), ['threads.t2']);
  assert.equal(stepAlternatives(swept(), 5, { pdlRows: 4, pdl }), ['rowblk.r4', 'threads.t2']);
});

test('stepAlternatives leaves out what the kernel rule bars whatever the margin: failed parity, more nodes, a looser parity bar', () => {
  const barred = swept({
    candidates: {
      plain: cand(100),
      'rowblk.r2': cand(80),
      'rowblk.r4': cand(85, { parity: 'fail' }),
      'threads.t2': cand(86, { nodes: 2 }),
      'w8a8.plain': cand(87, { numeric: 'w8a8' }),
      'rowblk.r8': cand(88, { status: 'failed', median_us: null }),
      'splitk.s4': cand(95),
    },
  });
  assert.equal(stepAlternatives(barred, 5), ['splitk.s4']);
  assert.equal(stepAlternatives(swept({ candidates: {} }), 5), [], 'no default timing, no runner-up');
});

test('a vetoed pick moves to the runner-up its alternative records show faster than the default, the largest gain first', () => {
  const alt = (name: string, pick_us: number[]) => step(pick_us, FAST.map((x) => x + 20), { pick: name, alternative: true });
  const { entries, vetoed, stepPicked, warnings } = applyStepVerdicts(
    [swept()],
    [step(SLOW, FAST), alt('rowblk.r4', FAST.map((x) => x + 10)), alt('threads.t2', FAST)],
  );
  assert.equal(warnings, []);
  assert.is(vetoed, 1);
  assert.is(stepPicked, 1);
  assert.is(entries[0]!.choice, 'threads.t2');
  assert.match(entries[0]!.reason, /^picked in the step: tiny c=4 o: step 1003\.0 us with threads\.t2, 1023\.0 us with plain \(-2\.0 %, faster/);
  assert.match(entries[0]!.reason, /the sweep's pick made it slower: tiny c=4 o: step 1013\.0 us with rowblk\.r2/);
});


test('a runner-up that chains with PDL is taken only at rows up to the --pdl-rows cut', () => {
  const alt = (name: string, pick_us: number[]) => step(pick_us, FAST.map((x) => x + 20), { pick: name, alternative: true });
  const records = [step(SLOW, FAST), alt('rowblk.r4', FAST.map((x) => x + 10)), alt('threads.t2', FAST)];
  const pdl = new Set(['threads.t2']);
  assert.is(applyStepVerdicts([swept()], records, { pdlRows: 4, pdl }).entries[0]!.choice, 'threads.t2', 'bucket 4 is within the cut');
  assert.is(applyStepVerdicts([swept()], records, { pdlRows: 2, pdl }).entries[0]!.choice, 'rowblk.r4', 'past the cut: the next runner-up the step is faster with');
  assert.is(applyStepVerdicts([swept()], records.slice(0, 1).concat(records[2]!), { pdlRows: 2, pdl }).entries[0]!.choice, 'plain', 'past the cut with no other runner-up: the default');
});
test('a vetoed pick keeps the default when no runner-up is faster past the noise, or one record of it is slower', () => {
  const alt = (name: string, pick_us: number[], default_us: number[], over: Partial<StepRecord> = {}) => step(pick_us, default_us, { pick: name, alternative: true, ...over });
  const noisy = [1000, 1003, 1004, 1007, 1008, 1011, 1012], noisy2 = [1001, 1002, 1005, 1006, 1009, 1010, 1013];
  for (const alts of [
    [alt('rowblk.r4', SLOW, FAST)],
    [alt('rowblk.r4', noisy, noisy2)],
    [alt('rowblk.r4', FAST, SLOW), alt('rowblk.r4', SLOW, FAST, { model: 'tiny-2' })],
    [alt('rowblk.r8', FAST, SLOW)], // not a runner-up of this entry's sweep
    [alt('rowblk.r4', FAST, SLOW, { default: 'rowblk.r2' })], // timed against another default
  ]) {
    const { entries, vetoed, stepPicked } = applyStepVerdicts([swept()], [step(SLOW, FAST), ...alts]);
    assert.is(vetoed, 1);
    assert.is(stepPicked, 0);
    assert.is(entries[0]!.choice, 'plain');
  }
});

test('an entry the kernel rule kept on the default takes a runner-up the step shows faster; without one it stays as it was', () => {
  const kept = swept({ choice: 'plain', reason: 'kept: best rowblk.r2 +1.2 %, below gate 2.0 %' });
  const faster = step(FAST, SLOW, { pick: 'rowblk.r2', alternative: true });
  const { entries, vetoed, stepPicked, warnings } = applyStepVerdicts([kept], [faster]);
  assert.equal(warnings, []);
  assert.is(vetoed, 0);
  assert.is(stepPicked, 1);
  assert.is(entries[0]!.choice, 'rowblk.r2');
  assert.is(entries[0]!.reason, 'picked in the step: tiny c=4 o: step 1003.0 us with rowblk.r2, 1013.0 us with plain (-1.0 %, faster, p 0.00029 over 7 rounds); the kernel alone: kept: best rowblk.r2 +1.2 %, below gate 2.0 %');
  for (const r of [step(SLOW, FAST, { pick: 'rowblk.r2', alternative: true }), step(FAST, SLOW, { pick: 'splitk.s4', alternative: true })]) {
    const same = applyStepVerdicts([kept], [r]);
    assert.is(same.stepPicked, 0);
    assert.equal(same.entries[0], kept, `${r.pick}: slower in the step, or never faster than the default in the sweep`);
  }
});


test('the counts keep apart vetoed picks kept on the default, vetoed picks moved, and kept entries moved to a runner-up', () => {
  const alt = (pick: string, n: number) => step(FAST, SLOW, { pick, alternative: true, n });
  const vetoedKept = swept({ n: 32 }), vetoedMoved = swept({ n: 64 });
  const kept = swept({ n: 128, choice: 'plain', reason: 'kept: best rowblk.r2 +1.2 %, below gate 2.0 %' });
  const { vetoed, stepPicked, vetoedMoved: moved } = applyStepVerdicts(
    [vetoedKept, vetoedMoved, kept],
    [step(SLOW, FAST, { n: 32 }), step(SLOW, FAST, { n: 64 }), alt('threads.t2', 64), alt('rowblk.r2', 128)],
  );
  assert.is(vetoed, 2, 'two picks make the step slower');
  assert.is(moved, 1, 'one of them moved to a runner-up');
  assert.is(stepPicked, 2, 'the vetoed one and the kept one moved');
});

test('picks of two linears vetoed on one table step are named together in a warning; one veto a step, or vetoes of two steps, are not', () => {
  const a = swept({ n: 32 }), b = swept({ n: 64 });
  const both = applyStepVerdicts([a, b], [step(SLOW, FAST, { n: 32, linear: 'o' }), step(SLOW, FAST, { n: 64, linear: 'down' })]);
  assert.is(both.vetoed, 2);
  assert.equal(both.warnings, ['step tiny bf16 c=4: 2 picks vetoed on one table step (o rowblk.r2, down rowblk.r2): each was timed with the others in place, so their slowdowns may share one cause']);
  const apart = applyStepVerdicts([a, b], [step(SLOW, FAST, { n: 32 }), step(SLOW, FAST, { n: 64, c: 8 })]);
  assert.is(apart.vetoed, 2);
  assert.equal(apart.warnings, []);
  assert.equal(applyStepVerdicts([a, b], [step(SLOW, FAST, { n: 32 }), step(FAST, SLOW, { n: 64 })]).warnings, []);
});
test('alternative records change nothing where the pick is not vetoed', () => {
  const { entries, stepPicked } = applyStepVerdicts([swept()], [step(FAST, SLOW), step(FAST, SLOW.map((x) => x + 50), { pick: 'rowblk.r4', alternative: true })]);
  assert.is(stepPicked, 0);
  assert.equal(entries[0], swept());
});

test('the schema: a record needs rounds on both sides, a pick other than its default, and the moe key only on moe', () => {
  assert.ok(v.safeParse(StepRecord, step(SLOW, FAST)).success);
  assert.ok(v.safeParse(StepRecord, step(SLOW, FAST, { alternative: true })).success, 'a runner-up\'s record');
  for (const bad of [step([], FAST), step(SLOW, []), step(SLOW, FAST, { pick: 'plain' }), step(SLOW, FAST, { experts: 8, topk: 2 }), { ...step(SLOW, FAST), kind: 'candidate' }]) {
    assert.not.ok(v.safeParse(StepRecord, bad).success, JSON.stringify(bad).slice(0, 120));
  }
});

test('a store keeps step records in steps/: readSteps reads them, readStore never sees them, a bad line is a warning', () => {
  const dir = join(scratch, 'store');
  const w = StoreWriter.open(join(dir, STEPS_DIR), 'step');
  w.appendStep(step(SLOW, FAST));
  assert.throws(() => w.appendStep(step([], FAST)), /refusing to store an invalid record/);
  w.close();
  writeFileSync(join(dir, STEPS_DIR, 'step-bad.jsonl'), '{"kind":"step"}\n');
  const read = readSteps(dir);
  assert.is(read.records.length, 1);
  assert.equal(read.records[0], step(SLOW, FAST));
  assert.is(read.warnings.length, 1);
  assert.equal(readStore(dir), { records: [], warnings: [] });
  mkdirSync(join(scratch, 'plain-store'));
  assert.equal(readSteps(join(scratch, 'plain-store')), { records: [], warnings: [] });
});

test('buildTable applies the step records of its own build only', () => {
  const records = problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]);
  const at = records[0]!;
  const mine = step(SLOW, FAST, { op: at.op, dtype: at.dtype, n: at.n, k: at.k, rows: at.rows });
  const theirs = { ...mine, identity: { ...SYNTHETIC_IDENTITY, space: 'another' } };
  const kept = buildTable(records, { gate: 0.02, created: new Date(0), steps: [theirs] });
  assert.ok(!('error' in kept));
  assert.is(kept.table.entries[0]!.choice, 'rowblk.r2');
  assert.is(kept.vetoed, 0);
  assert.ok(kept.warnings.includes('1 step record(s) of another build left out'));
  const vetoed = buildTable(records, { gate: 0.02, created: new Date(0), steps: [mine, theirs] });
  assert.ok(!('error' in vetoed));
  assert.is(vetoed.table.entries[0]!.choice, 'plain');
  assert.is(vetoed.vetoed, 1);
});

test('buildTable: a runner-up the store marks as chaining with PDL stays out past --pdl-rows, as the kernel rule keeps it out', () => {
  const records = problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r4', pdl: true, samples_us: evenSamples(90, 0.02) }], { rows: 4 });
  const at = records[0]!;
  const alt = step(FAST, SLOW, { op: at.op, dtype: at.dtype, n: at.n, k: at.k, rows: 4, pick: 'rowblk.r4', alternative: true });
  const cut = buildTable(records, { gate: 0.02, pdlRows: 2, created: new Date(0), steps: [alt] });
  assert.ok(!('error' in cut));
  assert.is(cut.table.entries[0]!.choice, 'plain');
  assert.match(cut.table.entries[0]!.reason, /PDL is picked only at rows <= 2/);
  assert.is(cut.stepPicked, 0);
  const within = buildTable(records, { gate: 0.02, pdlRows: 4, created: new Date(0), steps: [alt] });
  assert.ok(!('error' in within));
  assert.is(within.table.entries[0]!.choice, 'rowblk.r4');
});

test.run();
