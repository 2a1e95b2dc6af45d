// lib/glob.ts: the candidate-name patterns of sweep --candidates and family-ab --family.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { globRegExp } from '../lib/glob.ts';

test('a glob matches whole names: * any run, ? one character', () => {
  assert.ok(globRegExp('wgmma.*').test('wgmma.m64.t4.s1'));
  assert.ok(globRegExp('blaslt.algo?').test('blaslt.algo7'));
  assert.not.ok(globRegExp('blaslt.algo?').test('blaslt.algo10'), '? is one character');
  assert.not.ok(globRegExp('mma.*').test('cmma.b64.w4.s8.pdl'), 'anchored at the start');
  assert.not.ok(globRegExp('*.pdl').test('mma.w4.u8.pdl2'), 'anchored at the end');
});

test('everything else is literal: dots, brackets, plus, parentheses', () => {
  assert.not.ok(globRegExp('gemv.rpb4').test('gemvXrpb4'));
  assert.ok(globRegExp('a+b(c)[d]').test('a+b(c)[d]'));
  assert.not.ok(globRegExp('a+b').test('aab'));
});

test.run();
