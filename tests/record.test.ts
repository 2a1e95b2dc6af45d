// lib/record.ts: every store record is built by storeRecord, and what it
// builds is a valid StoreRecord that keeps samples only of an ok outcome.
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import { identityFromInfo } from '../lib/identity.ts';
import { FLOOR, storeRecord, type Outcome, type RecordSite } from '../lib/record.ts';
import { StoreRecord } from '../lib/schema.ts';

const kpick = loadKpick({ lib: join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const plain = kpick.candidates().find((c) => c.name === 'plain')!;
const site: RecordSite = { identity: identityFromInfo(kpick.info()), op: 'linear', dtype: 'bf16', n: 64, k: 32, rows: 4, copies: 2, seed: 7 };
const passed: Outcome = { status: 'ok', reason: '', parity: { status: 'pass', rel_err: 1e-4, bitwise: null, reason: '' }, nodes: 1, samples: [3, 2, 4] };

test('a candidate record carries the site, the candidate as the space declares it, and its outcome', () => {
  const r = storeRecord(site, 'candidate', passed, plain);
  assert.ok(v.safeParse(StoreRecord, r).success);
  assert.equal([r.kind, r.op, r.dtype, r.n, r.k, r.rows, r.copies, r.seed], ['candidate', 'linear', 'bf16', 64, 32, 4, 2, 7]);
  assert.equal([r.candidate, r.params, r.nodes_declared, r.is_default, r.stack_bound, r.pdl], [plain.name, { ...plain.params }, plain.nodes, plain.isDefault, plain.stackBound, plain.pdl]);
  assert.equal([r.nodes, r.samples_us, r.parity.status], [1, [3, 2, 4], 'pass']);
});

test("the pdl flag is the candidate's, as the library's describer reports it", () => {
  assert.is(storeRecord(site, 'candidate', passed, { ...plain, pdl: true }).pdl, true);
  assert.is(storeRecord(site, 'parity', passed, { ...plain, pdl: false }).pdl, false);
});

test('samples are kept only of an ok outcome; the reason stays', () => {
  const r = storeRecord(site, 'candidate', { ...passed, status: 'failed', reason: 'time: boom' }, plain);
  assert.equal([r.status, r.reason, r.samples_us], ['failed', 'time: boom', []]);
});

test('a parity record is a check alone: no samples', () => {
  const r = storeRecord(site, 'parity', { ...passed, nodes: null, samples: [] }, plain);
  assert.equal([r.kind, r.samples_us, r.parity.rel_err], ['parity', [], 1e-4]);
});

test('the floor record names no candidate and computes no output', () => {
  const r = storeRecord(site, 'floor', { ...passed, nodes: 5 });
  assert.ok(v.safeParse(StoreRecord, r).success);
  assert.equal([r.candidate, r.params, r.nodes_declared, r.nodes, r.is_default, r.stack_bound, r.pdl], [FLOOR, {}, 1, null, false, false, false]);
  assert.equal([r.parity.status, r.parity.reason, r.samples_us], ['skipped', 'the read floor computes no output', [3, 2, 4]]);
});

test('a floor with a candidate, or a candidate record without one, is a programming error', () => {
  assert.throws(() => storeRecord(site, 'floor', passed, plain), /a floor record takes no candidate/);
  assert.throws(() => storeRecord(site, 'candidate', passed), /a candidate record needs its candidate/);
});

test.run();
