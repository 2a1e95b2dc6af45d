// Parity: is a candidate's output right? On one problem at its active rows:
// poison y, run the candidate on weight copy 0, download y, then
//   - any element still 0xFFFF was never written        -> fail
//   - any NaN or Inf                                     -> fail
//   - relative Frobenius error against the fp64 reference above the bar of the
//     candidate's numeric class (the dtype's own for w16a16)          -> fail
//   - a member of a bitwise class whose bytes differ from the class head's -> fail
// The reference may cover a sample of the columns (always the first and the
// last) so that large shapes stay quick; the other checks see every element.
import type { Candidate, Problem } from './ffi.ts';
import { activationDtype, type Dtype, type Numeric, type Op, type Parity } from './schema.ts';

/** Relative Frobenius error allowed per 16-bit dtype (fp32 accumulation of K products). */
export const PARITY_BAR: Readonly<Record<'bf16' | 'fp16', number>> = { bf16: 1e-2, fp16: 2e-3 };
/**
 * The fp8 classes' bars (KPICK_PARITY_BAR_W8A16 / _W8A8 of kpick.h), against
 * the fp64 product of the bf16 x and the dequantized W. W8A16 adds to it what
 * bf16 adds (fp32 sums, a bf16 y): bf16's bar. W8A8 quantizes x per row to
 * e4m3 first, and that error is part of what it is judged by: 2.5e-2 to
 * 2.7e-2 (linear), 3.4e-2 to 4.0e-2 (gated) on the CPU's uniform data.
 */
export const CLASS_BAR: Readonly<Record<Exclude<Numeric, 'w16a16'>, number>> = { w8a16: 1e-2, w8a8: 6e-2 };
/**
 * W8A8 on the moe op (KPICK_PARITY_BAR_W8A8_MOE): two quantized GEMMs in a
 * chain, x quantized before gate/up and each pair's h again before down, so
 * the activation error enters twice: 3.4e-2 to 5.8e-2 (mean 4.2e-2) over 72
 * tiny-moe problems on the CPU. Wrong weights, scales or experts still miss
 * it by far (a row's scale is 0.5x to 2x its neighbour's).
 */
export const MOE_W8A8_BAR = 9e-2;

/** The bar a candidate of a numeric class is judged by on a problem of op and dtype. */
export function parityBar(dtype: Dtype, numeric: Numeric, op: Op = 'linear'): number {
  if (numeric === 'w8a8' && op === 'moe') return MOE_W8A8_BAR;
  if (numeric !== 'w16a16') return CLASS_BAR[numeric];
  return PARITY_BAR[activationDtype(dtype)];
}
/** What kpick_poison writes: a NaN in bf16 and fp16 that no kernel produces. */
export const POISON_BITS = 0xffff;
/** Largest reference (multiply-adds) computed over every column in 'auto' mode. */
export const FULL_REFERENCE_MAX_MACS = 1 << 26;
/** Columns of a sampled reference: evenly spread ones, plus a few random ones. */
export const SAMPLED_EVEN_COLUMNS = 512;
export const SAMPLED_RANDOM_COLUMNS = 8;

export type ColumnMode = 'auto' | 'full' | 'sampled';

/** mulberry32: a small seeded generator, so a sample is reproducible from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Sorted distinct columns of 0..n-1: SAMPLED_EVEN_COLUMNS evenly spread
 * (first and last included) and SAMPLED_RANDOM_COLUMNS random ones; null
 * (every column) when that would be all of them anyway.
 */
export function sampleColumns(n: number, seed: number): number[] | null {
  if (n <= SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS) return null;
  const cols = new Set<number>();
  for (let i = 0; i < SAMPLED_EVEN_COLUMNS; i++) cols.add(Math.round((i * (n - 1)) / (SAMPLED_EVEN_COLUMNS - 1)));
  const next = rng(seed);
  while (cols.size < SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS) cols.add(Math.floor(next() * n));
  return [...cols].sort((a, b) => a - b);
}

/** Which columns a reference of this problem covers under a mode. */
export function referenceColumns(problem: Problem, mode: ColumnMode, seed: number): number[] | null {
  if (mode === 'full') return null;
  if (mode === 'auto') {
    // moe: every routed pair's gate/up (2NK) and one down column (N) per output column
    const macs = problem.op === 'moe'
      ? problem.rows * problem.topk * problem.n * problem.k * 3
      : problem.rows * problem.n * problem.k * (problem.op === 'gated' ? 2 : 1);
    if (macs <= FULL_REFERENCE_MAX_MACS) return null;
  }
  return sampleColumns(problem.op === 'moe' ? problem.k : problem.n, seed);
}

/** The fp64 reference of one problem at its active rows. */
export interface Reference {
  rows: number;
  /** the columns covered, or null for all of y's (N; K for moe) */
  cols: number[] | null;
  /** [rows][cols.length or N] */
  values: Float64Array;
}

export function computeReference(problem: Problem, cols: number[] | null): Reference {
  return { rows: problem.rows, cols, values: problem.reference(cols) };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function bf16ToNumber(bits: number): number {
  u32[0] = bits << 16;
  return f32[0] as number;
}

export function fp16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** The decoder of y's elements (fp8's y is bf16). */
export function decoderOf(dtype: Dtype): (bits: number) => number {
  return dtype === 'fp16' ? fp16ToNumber : bf16ToNumber;
}

/**
 * Relative Frobenius error of y (all N columns, as numbers, or as raw bits with
 * their decoder) against a reference; only the reference's columns are read.
 */
export function relativeError(y: ArrayLike<number>, n: number, ref: Reference, decode: (bits: number) => number = (x) => x): number {
  const ncols = ref.cols === null ? n : ref.cols.length;
  let num = 0;
  let den = 0;
  for (let m = 0; m < ref.rows; m++) {
    for (let j = 0; j < ncols; j++) {
      const col = ref.cols === null ? j : (ref.cols[j] as number);
      const want = ref.values[m * ncols + j] as number;
      const diff = decode(y[m * n + col] as number) - want;
      num += diff * diff;
      den += want * want;
    }
  }
  if (den === 0) return num === 0 ? 0 : Infinity;
  return Math.sqrt(num / den);
}

/** Exponent bits that mark NaN and Inf, per dtype of y (fp8's y is bf16). */
const NON_FINITE_MASK: Readonly<Record<Dtype, number>> = { bf16: 0x7f80, fp16: 0x7c00, fp8: 0x7f80 };

/** Unwritten (still the poison) and non-finite elements, in one pass over the bits. */
export function scanOutput(y: Uint16Array, dtype: Dtype): { unwritten: number; nonFinite: number } {
  const mask = NON_FINITE_MASK[dtype];
  let unwritten = 0;
  let nonFinite = 0;
  for (let i = 0; i < y.length; i++) {
    const bits = y[i] as number;
    if (bits === POISON_BITS) unwritten++;
    else if ((bits & mask) === mask) nonFinite++;
  }
  return { unwritten, nonFinite };
}

export function formatError(x: number): string {
  return x.toExponential(1).replace('.0e', 'e');
}

/**
 * Checks candidates on one problem at its active rows against one reference.
 * Native failures (KpickError) propagate: they are the caller's to record.
 */
export class ParityChecker {
  readonly problem: Problem;
  readonly reference: Reference;
  private readonly byName: ReadonlyMap<string, Candidate>;
  private readonly headOutputs = new Map<string, Uint16Array>();

  constructor(problem: Problem, reference: Reference, candidates: readonly Candidate[]) {
    if (reference.rows !== problem.rows) {
      throw new Error(`reference is for ${reference.rows} rows, the problem has ${problem.rows} active`);
    }
    this.problem = problem;
    this.reference = reference;
    this.byName = new Map(candidates.map((c) => [c.name, c]));
  }

  /** y of one candidate on weight copy 0, after poisoning */
  output(cand: Candidate): Uint16Array {
    this.problem.poison();
    this.problem.run(cand.id, 0);
    return this.problem.downloadY();
  }

  check(cand: Candidate): Parity {
    const y = this.output(cand);
    // a class head's output is what its members are compared with
    if (cand.bitwiseWith === cand.name) this.headOutputs.set(cand.name, y);
    const reasons: string[] = [];
    const { unwritten, nonFinite } = scanOutput(y, this.problem.dtype);
    if (unwritten > 0) reasons.push(`${unwritten} of ${y.length} elements unwritten`);

    let relErr: number | null = null;
    if (unwritten === 0) {
      if (nonFinite > 0) {
        reasons.push(`${nonFinite} of ${y.length} elements NaN or Inf`);
      } else {
        relErr = relativeError(y, this.problem.outCols, this.reference, decoderOf(this.problem.dtype));
        const bar = parityBar(this.problem.dtype, cand.numeric, this.problem.op);
        if (!(relErr <= bar)) reasons.push(`rel_err ${formatError(relErr)} > ${formatError(bar)}`);
      }
    }

    const bitwise = this.compareWithHead(cand, y, reasons);
    return {
      status: reasons.length === 0 ? 'pass' : 'fail',
      rel_err: relErr !== null && Number.isFinite(relErr) ? relErr : null,
      bitwise,
      reason: reasons.join('; '),
    };
  }

  /** null when there is nothing to compare: no class, the head itself, or a head that cannot run here. */
  private compareWithHead(cand: Candidate, y: Uint16Array, reasons: string[]): boolean | null {
    if (cand.bitwiseWith === null || cand.bitwiseWith === cand.name) return null;
    const head = this.byName.get(cand.bitwiseWith);
    if (!head) throw new Error(`${cand.name} claims the class of '${cand.bitwiseWith}', which is not in the space`);
    if (!this.problem.supports(head.id)) return null;
    let headY = this.headOutputs.get(head.name);
    if (!headY) {
      headY = this.output(head);
      this.headOutputs.set(head.name, headY);
    }
    const a = new Uint8Array(y.buffer, y.byteOffset, y.byteLength);
    const b = new Uint8Array(headY.buffer, headY.byteOffset, headY.byteLength);
    let differing = 0;
    if (!Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b)) for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) differing++;
    if (differing > 0) reasons.push(`differs from ${head.name} in ${differing} bytes`);
    return differing === 0;
  }
}
