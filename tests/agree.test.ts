import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { compareChoices, conflicting, tablesAgree } from '../lib/agree.ts';
import type { CandidateResult, Table, TableEntry } from '../lib/schema.ts';

const cand = (median: number): CandidateResult => ({
  median_us: median, p25_us: median, p75_us: median, samples: 15, nodes: 1, params: {}, parity: 'pass', rel_err: 0, stack_bound: false, status: 'ok',
});

/** An entry of 4096x4096 at `bucket` choosing `choice`, with these candidate medians. */
function entry(bucket: 1 | 2 | 4, choice: string, medians: Record<string, number>): TableEntry {
  return {
    op: 'linear', dtype: 'bf16', n: 4096, k: 4096, bucket, default: 'blaslt', choice, reason: '', floor_us: 5,
    candidates: Object.fromEntries(Object.entries(medians).map(([name, m]) => [name, cand(m)])),
  };
}

function table(entries: TableEntry[]): Table {
  return {
    format: 1,
    identity: { backend: 'cuda', arch: 'sm_90', device: 'NVIDIA H200', runtime: 'r', blas: 'b', compiler: 'c', space: 's' },
    created: '2026-12-01T00:00:00.000Z', gate: { min_gain: 0.02 }, entries,
  };
}

test('the same choice agrees', () => {
  const rows = compareChoices(table([entry(1, 'x', { x: 10, y: 12 })]), table([entry(1, 'x', { x: 11, y: 12 })]), 0.02);
  assert.equal(rows.map((r) => r.agreement), ['same']);
  assert.ok(tablesAgree(rows));
});

test("different choices agree within the gate only when each table times the other's pick within it", () => {
  // a: x 10.0, y 10.1 (y 1 % slower); b: y 10.0, x 10.15 (x 1.5 % slower)
  const close = compareChoices(table([entry(1, 'x', { x: 10, y: 10.1 })]), table([entry(1, 'y', { x: 10.15, y: 10 })]), 0.02);
  assert.is(close[0]!.agreement, 'within-gate');
  assert.ok(Math.abs(close[0]!.a_ratio! - 1.01) < 1e-12 && Math.abs(close[0]!.b_ratio! - 1.015) < 1e-12);
  assert.ok(tablesAgree(close));
  // b finds a's pick 5 % slower: they differ
  const far = compareChoices(table([entry(1, 'x', { x: 10, y: 10.1 })]), table([entry(1, 'y', { x: 10.5, y: 10 })]), 0.02);
  assert.is(far[0]!.agreement, 'differ');
  assert.not.ok(tablesAgree(far));
  // a pick the other table never timed cannot be shown close
  const untimed = compareChoices(table([entry(1, 'x', { x: 10 })]), table([entry(1, 'y', { x: 10, y: 10 })]), 0.02);
  assert.equal([untimed[0]!.agreement, untimed[0]!.a_ratio], ['differ', null]);
});

test('conflict tells a gap at the gate, timed alike by both runs, from two runs that timed the picks apart', () => {
  // both runs time y about 2 % faster than x; a kept x at 1.9 %, b moved to y at 2.1 %: strict verdict differ, no conflict
  const atGate = compareChoices(table([entry(1, 'x', { x: 10, y: 9.81 })]), table([entry(1, 'y', { x: 10.21, y: 10 })]), 0.02);
  assert.is(atGate[0]!.agreement, 'differ');
  assert.ok(Math.abs(atGate[0]!.conflict! - 0.981 * 1.021) < 1e-12);
  assert.equal(conflicting(atGate, 0.02), []);
  // a times x 1 % faster, b times y 4 % faster: the runs disagree by 5 %
  const apart = compareChoices(table([entry(1, 'x', { x: 10, y: 10.1 })]), table([entry(1, 'y', { x: 10.4, y: 10 })]), 0.02);
  assert.equal(conflicting(apart, 0.02).map((r) => r.b), ['y']);
  // a pick one table never timed is counted apart: nothing shows the runs alike
  const untimed = compareChoices(table([entry(1, 'x', { x: 10 })]), table([entry(1, 'y', { x: 10, y: 10 })]), 0.02);
  assert.equal([untimed[0]!.conflict, conflicting(untimed, 0.02).length], [null, 1]);
  assert.not.ok(tablesAgree(atGate), 'the verdict stays strict');
});

test('an entry in one table only is named and breaks agreement', () => {
  const rows = compareChoices(table([entry(1, 'x', { x: 1 }), entry(2, 'x', { x: 1 })]), table([entry(1, 'x', { x: 1 }), entry(4, 'x', { x: 1 })]), 0.02);
  assert.equal(rows.map((r) => [r.bucket, r.agreement]), [[1, 'same'], [2, 'only-a'], [4, 'only-b']]);
  assert.not.ok(tablesAgree(rows));
});

test('moe entries pair by E and top-k too: another top-k is another entry', () => {
  const moe = (topk: number, choice: string): TableEntry => ({ ...entry(1, choice, { [choice]: 10 }), op: 'moe', experts: 8, topk });
  const rows = compareChoices(table([moe(2, 'x')]), table([moe(2, 'x'), moe(1, 'y')]), 0.02);
  assert.equal(rows.map((r) => [r.topk, r.agreement]), [[2, 'same'], [1, 'only-b']]);
});

test.run();
