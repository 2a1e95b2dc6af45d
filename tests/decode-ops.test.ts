// The non-linear ops of serve-bench's decode step (hip-lib/src/cpu/decode.c),
// each against the fp64 reference inside the library, and a broken input for
// each that the same comparison must catch.
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_BUILD_DIR, KpickError, loadKpick } from '../lib/ffi.ts';
import { DECODE_OPS, NativeModels } from '../lib/model-ffi.ts';

const kpick = loadKpick({ lib: process.env.KPICK_LIB || join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const native = new NativeModels(kpick);
const EXACT = new Set(['argmax', 'embed']);

for (const op of DECODE_OPS) {
  for (const dtype of ['bf16', 'fp16'] as const) {
    test(`${op} ${dtype} matches fp64 within one rounding of the dtype, on three seeds`, () => {
      for (const seed of [1, 2, 3]) {
        const r = native.selfcheck(op, dtype, seed);
        assert.ok(Number.isFinite(r.relErr), `${op} seed ${seed}: ${r.relErr}`);
        assert.ok(r.pass, `${op} ${dtype} seed ${seed}: rel err ${r.relErr} > tol ${r.tol}`);
        if (EXACT.has(op)) {
          assert.is(r.tol, 0);
          assert.is(r.relErr, 0);
        } else {
          assert.is(r.tol, dtype === 'bf16' ? 2 ** -7 : 2 ** -10);
          // the outputs are rounded to the dtype: a comparison that finds no difference at all compared nothing
          assert.ok(r.relErr > 0, `${op} ${dtype}: rel err exactly 0`);
        }
      }
    });

    test(`${op} ${dtype}: a deliberately broken input fails the same check`, () => {
      const r = native.selfcheck(op, dtype, 1, true);
      assert.not.ok(r.pass, `${op} ${dtype}: rel err ${r.relErr} within tol ${r.tol} on a broken input`);
      assert.ok(r.relErr > Math.max(10 * r.tol, 0.1), `${op} ${dtype}: rel err ${r.relErr}`);
    });
  }
}

test('the self-check refuses bad arguments with a message, never a crash', () => {
  const cases: [unknown[], RegExp][] = [
    [[5, 0, 1n, 0], /op must be in 0..4, got 5/],
    [[-1, 0, 1n, 0], /op must be in 0..4, got -1/],
    [[0, 2, 1n, 0], /dtype must be 0 \(bf16\) or 1 \(fp16\), got 2/],
    [[0, 0, 1n, 3], /corrupt must be 0 or 1, got 3/],
  ];
  for (const [args, message] of cases) {
    try {
      native.call('kpick_decode_selfcheck', ...args, [0], [0]);
      assert.unreachable(`accepted ${args.join(', ')}`);
    } catch (err) {
      assert.instance(err, KpickError);
      assert.is((err as KpickError).status, 1);
      assert.match((err as Error).message, message);
    }
  }
  try {
    native.call('kpick_decode_selfcheck', 0, 0, 1n, 0, null, [0]);
    assert.unreachable('accepted a null rel_err_out');
  } catch (err) {
    assert.match((err as Error).message, /must not be null/);
  }
});

test.run();
