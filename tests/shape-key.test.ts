import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { byShape, expertBytes, moeFields, shapeId, shapeText, weightBytes } from '../lib/shape-key.ts';

const linear = { op: 'linear', n: 4096, k: 1024 } as const;
const gated = { op: 'gated', n: 3072, k: 1024 } as const;
const moe = { op: 'moe', n: 768, k: 2048, experts: 128, topk: 8 } as const;
const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

test('a dense shape is NxK; a moe shape adds its experts and top-k, in the words route.c writes', () => {
  assert.is(shapeText(linear), '4096x1024');
  assert.is(shapeText(moe), '768x2048 E128 top8');
  assert.is(shapeId(linear), 'linear/4096/1024');
  assert.is(shapeId(moe), 'moe/768/2048/128/8');
  assert.not.equal(shapeId(moe), shapeId({ ...moe, topk: 4 }), 'another top-k is another key');
  assert.not.equal(shapeId(moe), shapeId({ ...moe, experts: 64 }), 'another E is another key');
});

test('moeFields gives experts and top-k to a moe record or entry and nothing to a dense one', () => {
  assert.equal(moeFields(moe), { experts: 128, topk: 8 });
  assert.equal(moeFields({ ...linear, experts: 8, topk: 2 } as never), {});
  assert.equal(JSON.stringify({ ...moeFields(gated) }), '{}');
});

test('weight bytes: W (twice N for gated); a moe call at most min(E, rows x top-k) experts of 3NK', () => {
  assert.is(weightBytes(linear), 4096 * 1024 * 2);
  assert.is(weightBytes(gated), 2 * 3072 * 1024 * 2);
  assert.is(expertBytes(moe), 3 * 768 * 2048 * 2);
  assert.is(weightBytes(moe, 1), 8 * expertBytes(moe));
  assert.is(weightBytes(moe, 4), 32 * expertBytes(moe));
  assert.is(weightBytes(moe, 64), 128 * expertBytes(moe), 'never more than all experts');
});

test('byShape orders by op, then experts and top-k, then N and K', () => {
  const list = [moe, { ...moe, topk: 4 }, gated, linear, { ...linear, n: 1024 }, { ...moe, experts: 8, topk: 2 }];
  assert.equal(list.sort((a, b) => byShape(a, b, byText)).map(shapeText), [
    '3072x1024',
    '1024x1024',
    '4096x1024',
    '768x2048 E8 top2',
    '768x2048 E128 top4',
    '768x2048 E128 top8',
  ]);
});

test.run();
