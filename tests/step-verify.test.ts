// lib/step-verify.ts's pieces: which linears of a route get a step record, the
// route with one linear on its default, and the interleaved rounds, on a
// stand-in for the native model (the job itself: tests/script-step-verify.test.ts).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LINEAR_KINDS, type Model } from '../lib/model-ffi.ts';
import type { ArmRoute } from '../lib/serve.ts';
import { picksToVerify, timeRounds, verifyAt, withCandidate, withDefault } from '../lib/step-verify.ts';

/** A route of a dense model: ids 1..5 for qkv, o, gate_up, down, lm_head (-1 for the moe kinds). */
function route(names: Partial<Record<(typeof LINEAR_KINDS)[number], string>>, ids: number[]): ArmRoute {
  return { names, ids: Int32Array.from(ids) };
}
const DEFAULTS = route({ qkv: 'blaslt', o: 'blaslt', gate_up: 'gated.blaslt', down: 'blaslt', lm_head: 'blaslt' }, [0, 0, 10, 0, 0, -1, -1]);
const TABLE = route({ qkv: 'mma.w4.u16.pdl', o: 'blaslt', gate_up: 'gated.mma.w2.u8.pdl', down: 'mma.w8.u16.pdl', lm_head: 'blaslt' }, [3, 0, 12, 4, 0, -1, -1]);

test('picksToVerify: the linears whose candidate differs from the default, in the library\'s order', () => {
  assert.equal(picksToVerify(TABLE, DEFAULTS), ['qkv', 'gate_up', 'down']);
  assert.equal(picksToVerify(DEFAULTS, DEFAULTS), []);
});

test('withDefault: the table route with one linear on the default\'s id, the route itself untouched', () => {
  assert.equal(Array.from(withDefault(TABLE, DEFAULTS, 'gate_up')), [3, 0, 10, 4, 0, -1, -1]);
  assert.equal(Array.from(TABLE.ids), [3, 0, 12, 4, 0, -1, -1]);
});

test('withCandidate: the table route with one linear on a given id', () => {
  assert.equal(Array.from(withCandidate(TABLE, 'down', 7)), [3, 0, 12, 7, 0, -1, -1]);
});

/** A stand-in model whose step takes 1000 us plus what its gate_up and down ids add. */
function stepModel(cost: Record<number, number>): Model {
  return { time: (ids: Int32Array) => Float64Array.from([0, 1, 2].map((x) => 1000 + (cost[ids[2]!] ?? 0) + (cost[ids[3]!] ?? 0) + x)) } as unknown as Model;
}
const PLAN = { c: 4, table: TABLE, def: DEFAULTS, kinds: picksToVerify(TABLE, DEFAULTS) };

test('verifyAt: each pick against the default, then the runners-up of the picks the step is slower with and of the linears kept on the default', () => {
  // gate_up's pick (12) makes the step 20 us slower than the default (10); its runners-up 13 and 14 make it 10 us faster and 5 slower
  const asked: string[] = [];
  const timings = verifyAt(stepModel({ 10: 0, 12: 20, 13: -10, 14: 5 }), PLAN, 3, 7, (kind) => {
    asked.push(kind);
    return kind === 'gate_up' ? [{ name: 'gated.mma.w4.u8', id: 13 }, { name: 'gated.wgmma.m64.t4.s1', id: 14 }] : [];
  });
  assert.equal(asked, ['gate_up', 'o', 'lm_head'], 'runners-up of the pick the step is slower with, then of the linears on the default');
  assert.equal(timings.map((t) => [t.kind, t.pick, t.alternative]), [
    ['qkv', 'mma.w4.u16.pdl', false], ['gate_up', 'gated.mma.w2.u8.pdl', false], ['down', 'mma.w8.u16.pdl', false],
    ['gate_up', 'gated.mma.w4.u8', true], ['gate_up', 'gated.wgmma.m64.t4.s1', true],
  ]);
  const gu = timings.filter((t) => t.kind === 'gate_up');
  assert.equal(gu.map((t) => t.pickUs[0]), [1021, 991, 1006]); // the route has gate_up on 12; a runner-up in its place
  assert.equal(gu.map((t) => t.defaultUs[0]), [1001, 1001, 1001]);
  // no pick slower: runners-up asked for the kept linears only
  const kept: string[] = [];
  verifyAt(stepModel({ 10: 0, 12: -5 }), PLAN, 3, 7, (kind) => (kept.push(kind), []));
  assert.equal(kept, ['o', 'lm_head']);
  // a route all on the defaults: no pick timed, the kept linears' runners-up still are
  const calls: number[] = [];
  const model = { time: (ids: Int32Array) => (calls.push(ids[1]!), Float64Array.of(1000 + (ids[1] === 9 ? -10 : 0))) } as unknown as Model;
  const all = verifyAt(model, { c: 4, table: DEFAULTS, def: DEFAULTS, kinds: [] }, 1, 5, (kind) => (kind === 'o' ? [{ name: 'mma.w4.u8', id: 9 }] : []));
  assert.equal(all.map((t) => [t.kind, t.pick, t.alternative, t.pickUs[0], t.defaultUs[0]]), [['o', 'mma.w4.u8', true, 990, 1000]]);
  assert.is(calls.length, 10, 'five rounds of the runner-up and the route');
});

test('timeRounds: every variant once a round, the first one rotating, each sample the median of its steps', () => {
  const order: number[] = [];
  // a stand-in for the native model: variant v's steps take 100 v + (1, 2, 30) us
  const model = { time: (ids: Int32Array, c: number, steps: number) => {
    assert.is(c, 4);
    assert.is(steps, 3);
    order.push(ids[0]!);
    return Float64Array.from([1, 30, 2].map((x) => 100 * ids[0]! + x));
  } } as unknown as Model;
  const variants = [0, 1, 2].map((v) => Int32Array.of(v));
  const out = timeRounds(model, variants, 4, 3, 3);
  assert.equal(order, [0, 1, 2, 1, 2, 0, 2, 0, 1]);
  assert.equal(out, [[2, 2, 2], [102, 102, 102], [202, 202, 202]]);
});

test.run();
