// lib/step-verify.ts's pieces: which linears of a route get a step record, the
// route with one linear on its default, and the interleaved rounds, on a
// stand-in for the native model (the job itself: tests/script-step-verify.test.ts).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LINEAR_KINDS, type Model } from '../lib/model-ffi.ts';
import type { ArmRoute } from '../lib/serve.ts';
import { picksToVerify, timeRounds, withDefault } from '../lib/step-verify.ts';

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
