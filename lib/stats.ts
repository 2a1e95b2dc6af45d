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

/** Each value replaced by the median of itself and its neighbours (a running median of three; an end's window is two): a lone spike goes, a trend stays. */
export function neighbourMedians(values: readonly number[]): number[] {
  return values.map((_, i) => median(values.slice(Math.max(0, i - 1), i + 2)));
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

/**
 * One-sided Mann-Whitney rank test: how likely, were both sets of samples
 * drawn from one distribution, a count of pairs (a < b, ties counting half)
 * at least as large as the one observed. Small p: `a` tends to be smaller.
 * Ranks make it indifferent to how far an outlier lies, so a few samples
 * slowed by another process weigh as a few samples, not as their time. Exact
 * (every arrangement of the ranks counted) when no value is shared and the
 * sets are small; else the normal approximation with the tie correction and
 * a continuity correction.
 */
export function rankTest(a: ArrayLike<number>, b: ArrayLike<number>): { u: number; p: number } {
  const xs = requireValues(a, 'rankTest');
  const ys = requireValues(b, 'rankTest');
  const m = xs.length;
  const n = ys.length;
  let u = 0;
  for (const x of xs) for (const y of ys) u += x < y ? 1 : x === y ? 0.5 : 0;
  const all = [...xs, ...ys].sort((p, q) => p - q);
  const ties: number[] = [];
  for (let i = 0; i < all.length; ) {
    let j = i + 1;
    while (j < all.length && all[j] === all[i]) j++;
    if (j - i > 1) ties.push(j - i);
    i = j;
  }
  if (ties.length === 0 && m * n <= 10_000) {
    const counts = arrangementsByU(m, n);
    let above = 0;
    for (let k = Math.ceil(u); k <= m * n; k++) above += counts[k]!;
    const total = counts.reduce((s, c) => s + c, 0);
    return { u, p: Math.min(1, above / total) };
  }
  const size = m + n;
  const tieTerm = ties.reduce((s, t) => s + t * t * t - t, 0) / (size * (size - 1));
  const sd = Math.sqrt(((m * n) / 12) * (size + 1 - tieTerm));
  if (!(sd > 0)) return { u, p: 1 };
  const z = (u - (m * n) / 2 - 0.5) / sd;
  return { u, p: Math.min(1, upperNormalTail(z)) };
}

/**
 * How many of the C(m+n, m) orders of two untied sets give each count u of
 * (a < b) pairs: the coefficients of the Gaussian binomial [m+n choose m] in
 * q, built as the product over i = 1..m of (1 - q^(n+i)) / (1 - q^i).
 */
function arrangementsByU(m: number, n: number): number[] {
  let poly = [1];
  for (let i = 1; i <= m; i++) {
    const size = poly.length + n + i - i; // degree grows by n
    const times = new Array<number>(size).fill(0);
    for (let d = 0; d < poly.length; d++) {
      times[d]! += poly[d]!;
      if (d + n + i < size) times[d + n + i]! -= poly[d]!;
    }
    for (let d = i; d < size; d++) times[d]! += times[d - i]!; // divide by (1 - q^i)
    poly = times;
  }
  return poly;
}

/** P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26: error below 1.5e-7). */
function upperNormalTail(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erfc = poly * Math.exp(-x * x);
  return z >= 0 ? erfc / 2 : 1 - erfc / 2;
}
