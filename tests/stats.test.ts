import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { geomean, mad, median, quantile } from '../lib/stats.ts';

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

test.run();
