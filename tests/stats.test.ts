import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { geomean, mad, median, neighbourMedians, quantile, rankTest } from '../lib/stats.ts';

test('median of an odd count is the middle value, of an even count the mean of the two middle ones', () => {
  assert.is(median([5, 1, 3]), 3);
  assert.is(median([4, 1, 3, 2]), 2.5);
  assert.is(median([7]), 7);
});

test('quantile interpolates linearly between closest ranks (type 7)', () => {
  const xs = [4, 1, 3, 2];
  assert.is(quantile(xs, 0.25), 1.75);
  assert.is(quantile(xs, 0.75), 3.25);
  assert.is(quantile(xs, 0), 1);
  assert.is(quantile(xs, 1), 4);
  assert.is(quantile([10, 20, 30, 40, 50], 0.25), 20);
});

test('quantile does not reorder the caller array and accepts typed arrays', () => {
  const xs = new Float64Array([3, 1, 2]);
  assert.is(quantile(xs, 0.5), 2);
  assert.equal(Array.from(xs), [3, 1, 2]);
});

test('quantile refuses an empty input, NaN values and q outside [0, 1]', () => {
  assert.throws(() => quantile([], 0.5), /no values/);
  assert.throws(() => median([1, NaN]), /NaN/);
  assert.throws(() => quantile([1, 2], 1.5), /\[0, 1\]/);
  assert.throws(() => quantile([1, 2], -0.1), /\[0, 1\]/);
});

test('neighbourMedians: a lone spike goes (a floor of 7.31 us between 5.1 us ones), a rise stays, an end takes the mean of its pair', () => {
  assert.equal(neighbourMedians([5.07, 5.11, 7.31, 5.10, 5.11]), [5.09, 5.11, 5.11, 5.11, 5.105]);
  assert.equal(neighbourMedians([6, 6, 6, 9, 9, 9]), [6, 6, 6, 9, 9, 9]);
  assert.equal(neighbourMedians([4]), [4]);
  assert.equal(neighbourMedians([]), []);
});

test('mad is the median absolute deviation from the median, unscaled', () => {
  assert.is(mad([1, 1, 2, 2, 4, 6, 9]), 1);
  assert.is(mad([5, 5, 5]), 0);
  assert.throws(() => mad([]), /no values/);
});

test('geomean is the n-th root of the product, for positive values only', () => {
  assert.ok(Math.abs(geomean([1, 4, 16]) - 4) < 1e-12);
  assert.ok(Math.abs(geomean([2, 8]) - 4) < 1e-12);
  assert.throws(() => geomean([1, 0]), /positive/);
  assert.throws(() => geomean([1, -2]), /positive/);
  assert.throws(() => geomean([]), /no values/);
});

test('rankTest: exact p of the rank orders, one-sided: 1 of 252 orders puts all five below, 2 of 252 give 24 of 25 pairs', () => {
  assert.equal(rankTest([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]), { u: 25, p: 1 / 252 });
  assert.equal(rankTest([1, 2, 3, 4, 6], [5, 7, 8, 9, 10]), { u: 24, p: 2 / 252 });
  assert.is(rankTest([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]).p, 1);
});

test('rankTest: ranks, not values: moving the outliers further leaves p as it was', () => {
  const a = [10, 11, 12, 13, 500, 14, 15];
  const b = [20, 21, 22, 600, 23, 24, 25];
  const far = (xs: number[]) => xs.map((x) => (x > 100 ? x * 1e6 : x));
  assert.equal(rankTest(far(a), far(b)), rankTest(a, b));
  assert.ok(rankTest(a, b).p < 0.01);
});

test('rankTest: ties count half a pair and use the normal approximation; all tied is no evidence', () => {
  const t = rankTest([1, 2, 2, 3, 4], [2, 5, 6, 7, 8]);
  assert.is(t.u, 22); // 1: 5 pairs, each 2: 4 and a tie, 3 and 4: 4 each
  assert.ok(t.p > 0.005 && t.p < 0.03, `p ${t.p}`);
  assert.is(rankTest([3, 3, 3], [3, 3, 3]).p, 1);
  assert.throws(() => rankTest([], [1]), /no values/);
});

test.run();
