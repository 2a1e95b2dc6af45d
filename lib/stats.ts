// Summary statistics of timing samples. Each function refuses an empty input
// rather than inventing a value.

function requireValues(values: ArrayLike<number>, what: string): number[] {
  if (values.length === 0) throw new RangeError(`${what} of no values`);
  const out = Array.from(values);
  if (out.some((x) => Number.isNaN(x))) throw new RangeError(`${what} of a NaN value`);
  return out;
}

/**
 * The q-quantile, 0 <= q <= 1, by linear interpolation between the closest
 * ranks (position q*(n-1) in the sorted values; Hyndman & Fan type 7, the
 * default of R and NumPy).
 */
export function quantile(values: ArrayLike<number>, q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile must be in [0, 1], got ${q}`);
  const sorted = requireValues(values, 'quantile').sort((a, b) => a - b);
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export function median(values: ArrayLike<number>): number {
  return quantile(values, 0.5);
}

/** Median absolute deviation from the median, unscaled. */
export function mad(values: ArrayLike<number>): number {
  const m = median(values);
  return median(Array.from(values, (x) => Math.abs(x - m)));
}

/** Geometric mean of positive values, computed in log space. */
export function geomean(values: ArrayLike<number>): number {
  const xs = requireValues(values, 'geomean');
  if (xs.some((x) => !(x > 0))) throw new RangeError('geomean needs positive values');
  return Math.exp(xs.reduce((sum, x) => sum + Math.log(x), 0) / xs.length);
}
