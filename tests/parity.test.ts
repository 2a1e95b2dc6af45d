import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_BUILD_DIR, loadKpick, takesDtype, type Dtype, type Kpick, type Op, type Problem } from '../lib/ffi.ts';
import {
  CLASS_BAR,
  FULL_REFERENCE_MAX_MACS,
  PARITY_BAR,
  parityBar,
  ParityChecker,
  SAMPLED_EVEN_COLUMNS,
  SAMPLED_RANDOM_COLUMNS,
  bf16ToNumber,
  computeReference,
  fp16ToNumber,
  referenceColumns,
  relativeError,
  sampleColumns,
} from '../lib/parity.ts';

const real = loadKpick({ lib: join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const testing = loadKpick({ lib: join(DEFAULT_BUILD_DIR, 'libkpick-cpu-test.so') });

function withProblem<T>(kpick: Kpick, spec: { op: Op; dtype: Dtype; n: number; k: number; m: number }, fn: (p: Problem) => T): T {
  const p = kpick.createProblem({ op: spec.op, dtype: spec.dtype, n: spec.n, k: spec.k, mMax: spec.m, copies: 1, seed: 1234 });
  try {
    return fn(p);
  } finally {
    p.free();
  }
}

test('the parity bars are the ones kpick.h gives C callers (KPICK_PARITY_BAR_*)', () => {
  const header = readFileSync(new URL('../hip-lib/include/kpick.h', import.meta.url), 'utf8');
  const bar = (dtype: string) => Number(new RegExp(`#define KPICK_PARITY_BAR_${dtype} (\\S+)`).exec(header)?.[1]);
  assert.equal({ bf16: bar('BF16'), fp16: bar('FP16') }, PARITY_BAR);
  assert.equal({ w8a16: bar('W8A16'), w8a8: bar('W8A8') }, CLASS_BAR);
});

test('a candidate is judged by its numeric class: the dtype for w16a16, its own bar for the fp8 classes', () => {
  assert.is(parityBar('bf16', 'w16a16'), PARITY_BAR.bf16);
  assert.is(parityBar('fp16', 'w16a16'), PARITY_BAR.fp16);
  assert.is(parityBar('fp8', 'w8a16'), CLASS_BAR.w8a16);
  assert.is(parityBar('fp8', 'w8a8'), CLASS_BAR.w8a8);
  assert.ok(CLASS_BAR.w8a16 < CLASS_BAR.w8a8, 'quantizing x too is allowed more error');
});

test('bf16 and fp16 decode exactly, and the poison pattern is NaN in both', () => {
  assert.is(bf16ToNumber(0x3f80), 1);
  assert.is(bf16ToNumber(0xc000), -2);
  assert.is(bf16ToNumber(0x7f80), Infinity);
  assert.is(fp16ToNumber(0x3c00), 1);
  assert.is(fp16ToNumber(0xc000), -2);
  assert.is(fp16ToNumber(0x3555), 0.333251953125);
  assert.is(fp16ToNumber(0x0001), 2 ** -24);
  assert.is(fp16ToNumber(0x7c00), Infinity);
  assert.is(fp16ToNumber(0xfc00), -Infinity);
  assert.ok(Number.isNaN(fp16ToNumber(0xffff)));
  assert.ok(Number.isNaN(bf16ToNumber(0xffff)));
});

test('relativeError is the Frobenius norm of the difference over that of the reference, on the covered columns', () => {
  // y is [2 rows][3 cols]; the reference covers columns 0 and 2
  const y = [1, 100, 2, 3, 100, 4];
  const ref = { rows: 2, cols: [0, 2], values: new Float64Array([1, 2, 3, 5]) };
  assert.ok(Math.abs(relativeError(y, 3, ref) - Math.sqrt(1 / (1 + 4 + 9 + 25))) < 1e-15);
  const full = { rows: 1, cols: null, values: new Float64Array([3, 4]) };
  assert.is(relativeError([3, 4], 2, full), 0);
  assert.is(relativeError([0, 0], 2, { rows: 1, cols: null, values: new Float64Array([0, 0]) }), 0);
});

test('a sample of columns has the first, the last, evenly spread ones and a few random ones', () => {
  const n = 151936;
  const cols = sampleColumns(n, 5);
  assert.ok(cols);
  assert.is(cols.length, SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS);
  assert.is(cols[0], 0);
  assert.is(cols[cols.length - 1], n - 1);
  assert.ok(cols.every((c, i) => i === 0 || c > (cols[i - 1] as number)), 'sorted and distinct');
  assert.ok(cols.every((c) => Number.isInteger(c) && c >= 0 && c < n));
  assert.equal(sampleColumns(n, 5), cols, 'the same seed samples the same columns');
  assert.not.equal(sampleColumns(n, 6), cols, 'another seed other random columns');
  assert.is(sampleColumns(SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS, 1), null, 'small N: every column');
});

test('auto mode covers every column of a small problem and samples a large one', () => {
  const fake = (n: number, k: number, rows: number) => ({ n, k, rows, op: 'linear' }) as unknown as Problem;
  assert.is(referenceColumns(fake(1024, 1024, 8), 'auto', 1), null);
  const big = fake(151936, 1024, 8);
  assert.ok(big.rows * big.n * big.k > FULL_REFERENCE_MAX_MACS);
  assert.is(referenceColumns(big, 'auto', 1)?.length, SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS);
  assert.is(referenceColumns(big, 'full', 1), null);
  assert.is(referenceColumns(fake(4096, 64, 1), 'sampled', 1)?.length, SAMPLED_EVEN_COLUMNS + SAMPLED_RANDOM_COLUMNS);
});

test('every shipped CPU candidate passes, bf16, fp16 and fp8, full and sampled reference', () => {
  const space = real.candidates();
  for (const dtype of ['bf16', 'fp16', 'fp8'] as const) {
    for (const op of ['linear', 'gated'] as const) {
      withProblem(real, { op, dtype, n: 600, k: 96, m: 3 }, (p) => {
        for (const cols of [null, sampleColumns(p.n, 9)]) {
          const checker = new ParityChecker(p, computeReference(p, cols), space);
          const ofDtype = space.filter((c) => c.op === op && takesDtype(c, dtype));
          assert.ok(ofDtype.length >= 3, `${op} ${dtype}: ${ofDtype.length} candidates`);
          for (const cand of ofDtype) {
            const parity = checker.check(cand);
            assert.is(parity.status, 'pass', `${cand.name} ${dtype}: ${parity.reason}`);
            assert.is(parity.reason, '');
            assert.ok(parity.rel_err !== null && parity.rel_err <= parityBar(dtype, cand.numeric), `${cand.name}: ${parity.rel_err}`);
            const member = cand.bitwiseWith !== null && cand.bitwiseWith !== cand.name;
            assert.is(parity.bitwise, member ? true : null, cand.name);
          }
        }
      });
    }
  }
});

test('fp8: W8A16 is within bf16 error of the fp64 reference; W8A8 carries its activation quantization, over the W8A16 bar', () => {
  const space = real.candidates();
  const errOf = (op: Op, name: string) =>
    withProblem(real, { op, dtype: 'fp8', n: 256, k: 1024, m: 4 }, (p) => new ParityChecker(p, computeReference(p, null), space).check(real.candidate(name)));
  for (const [op, prefix] of [['linear', ''], ['gated', 'gated.']] as const) {
    const w8a16 = errOf(op, `${prefix}w8a16.plain`);
    const w8a8 = errOf(op, `${prefix}w8a8.plain`);
    assert.ok(w8a16.rel_err !== null && w8a16.rel_err < 4e-3, `${op} w8a16 ${w8a16.rel_err}`);
    // e4m3 keeps 3 mantissa bits of x: its error dwarfs the bf16 output rounding
    assert.ok(w8a8.rel_err !== null && w8a8.rel_err > CLASS_BAR.w8a16 && w8a8.rel_err <= CLASS_BAR.w8a8, `${op} w8a8 ${w8a8.rel_err}`);
  }
});

test('a 16-bit candidate cannot run an fp8 problem, nor an fp8 one a bf16 problem', () => {
  for (const [dtype, name] of [['fp8', 'plain'], ['bf16', 'w8a16.plain']] as const) {
    withProblem(real, { op: 'linear', dtype, n: 16, k: 32, m: 1 }, (p) => {
      assert.is(p.supports(real.candidate(name).id), false, `${name} on ${dtype}`);
      assert.throws(() => p.run(real.candidate(name).id), /cannot run op 0 dtype/);
    });
  }
});

function checkTest(name: string, dtype: Dtype = 'bf16') {
  return withProblem(testing, { op: 'linear', dtype, n: 96, k: 64, m: 2 }, (p) => {
    const space = testing.candidates();
    const checker = new ParityChecker(p, computeReference(p, null), space);
    return checker.check(testing.candidate(name));
  });
}

test('test.wrong fails on the relative error against the fp64 reference', () => {
  for (const dtype of ['bf16', 'fp16'] as const) {
    const parity = checkTest('test.wrong', dtype);
    assert.is(parity.status, 'fail');
    assert.ok(parity.rel_err !== null && parity.rel_err > PARITY_BAR[dtype]);
    assert.match(parity.reason, new RegExp(`^rel_err \\d(\\.\\d)?e-\\d+ > ${dtype === 'bf16' ? '1e-2' : '2e-3'}$`));
  }
});

test('test.bits passes the tolerance but fails the byte compare with its class head', () => {
  const parity = checkTest('test.bits');
  assert.is(parity.status, 'fail');
  assert.ok(parity.rel_err !== null && parity.rel_err <= PARITY_BAR.bf16, 'within tolerance: only the bitwise check can catch it');
  assert.is(parity.bitwise, false);
  assert.match(parity.reason, /^differs from plain in \d+ bytes$/);
});

test('test.unwritten fails naming how many elements were never written', () => {
  const parity = checkTest('test.unwritten');
  assert.is(parity.status, 'fail');
  assert.match(parity.reason, /^\d+ of 192 elements unwritten$/);
  assert.is(parity.rel_err, null);
});

test('test.nan fails naming the NaN or Inf elements', () => {
  const parity = checkTest('test.nan');
  assert.is(parity.status, 'fail');
  assert.match(parity.reason, /^\d+ of 192 elements NaN or Inf$/);
  assert.is(parity.rel_err, null);
});

test('test.w8a16.row0 (row 0\'s scale on every row) fails the W8A16 bar: the benchmark\'s fp8 rows differ in range', () => {
  const parity = checkTest('test.w8a16.row0', 'fp8');
  assert.is(parity.status, 'fail');
  assert.ok(parity.rel_err !== null && parity.rel_err > CLASS_BAR.w8a16, String(parity.rel_err));
  assert.match(parity.reason, /^rel_err \S+ > 1e-2$/);
  assert.is(checkTest('w8a16.plain', 'fp8').status, 'pass', 'the right kernel on the same problem');
});

test('the real candidates of the test build still pass beside the wrong ones', () => {
  for (const name of ['plain', 'rowblk.r4', 'splitk.s4']) assert.is(checkTest(name).status, 'pass', name);
});

test('a reference for other rows than the active ones is refused', () => {
  withProblem(real, { op: 'linear', dtype: 'bf16', n: 16, k: 16, m: 4 }, (p) => {
    const ref = computeReference(p, null);
    p.setRows(2);
    assert.throws(() => new ParityChecker(p, ref, real.candidates()), /reference is for 4 rows, the problem has 2 active/);
  });
});

test.run();
