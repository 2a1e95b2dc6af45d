// lib/family-ab.ts (a store promoted with and without a family of rows) and
// bench/family-ab.ts end to end on synthetic stores.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { familyAB, familyTest } from '../lib/family-ab.ts';
import type { StoreRecord } from '../lib/schema.ts';
import { run } from './helpers/run-script.ts';
import { evenSamples, problem, syntheticRecord, writeStoreFile } from './helpers/synthetic-records.ts';

const at = (center: number) => ({ samples_us: evenSamples(center, 0.02) });
const floor = (center: number, rows: StoreRecord['rows']): StoreRecord =>
  syntheticRecord({ kind: 'floor', candidate: 'floor', rows, ...at(center), parity: { status: 'skipped', rel_err: null, bitwise: null, reason: 'floor' } });
const test_ = (spec: string) => {
  const t = familyTest(spec);
  if ('error' in t) throw new Error(t.error);
  return t;
};

test('a family is /regex/ over row names, or comma separated globs; empty or broken ones are errors', () => {
  assert.ok(test_('/^blaslt\\.sk/')('blaslt.sk4'));
  assert.not.ok(test_('/^blaslt\\.sk/')('blaslt.algo1'));
  assert.ok(test_('wgmma.*.s8*, cmma.*')('wgmma.m64.t4.s8.pdl'));
  assert.ok(test_('wgmma.*.s8*, cmma.*')('cmma.b64.w4.s8.pdl'));
  assert.not.ok(test_('wgmma.*.s8*')('wgmma.m64.t4.s1'), 'a glob matches the whole name');
  assert.not.ok(test_('wgmma.m64')('wgmmaXm64'), 'a dot in a glob is a dot');
  assert.match((familyTest(' ') as { error: string }).error, /empty/);
  assert.match((familyTest('/[/') as { error: string }).error, /family \/\[\//);
});

test('the family takes an entry only past promote\'s gate over the default; the buckets give its picks and choice / floor both ways', () => {
  const records = [
    /* rows 1: the family's row 20 % ahead of the best other: taken */
    ...problem(at(100), [{ candidate: 'fam.a', ...at(80) }, { candidate: 'other', ...at(90) }]),
    floor(40, 1),
    /* rows 2: 1 % ahead of the default, the gate's yardstick: the default stays */
    ...problem(at(100), [{ candidate: 'fam.a', ...at(99) }], { rows: 2 }),
    floor(45, 2),
  ];
  const ab = familyAB(records, test_('fam.*'), 0.02);
  if ('error' in ab) throw new Error(ab.error);
  assert.is(ab.records, 2);
  assert.equal(ab.changes.map((c) => [c.bucket, c.with, c.without, c.with_us, c.without_us, c.floor_us]), [[1, 'fam.a', 'other', 80, 90, 40]]);
  const [b1, b2] = ab.buckets;
  assert.equal([b1!.bucket, b1!.entries, b1!.picked, b1!.with_floor, b1!.without_floor], [1, 1, 1, 2, 2.25]);
  assert.equal([b2!.bucket, b2!.picked, b2!.with_floor, b2!.without_floor], [2, 0, 100 / 45, 100 / 45]);
});

test('promote\'s node rule holds: a family row with more graph nodes than the default is not taken on speed', () => {
  const records = problem({ ...at(100), nodes: 1 }, [{ candidate: 'fam.split', nodes: 2, ...at(60) }]);
  const ab = familyAB(records, test_('fam.*'), 0.02);
  if ('error' in ab) throw new Error(ab.error);
  assert.equal(ab.changes, []);
  assert.is(ab.buckets[0]!.picked, 0);
});

test('a family with no record, or holding a class default, is refused with the reason', () => {
  const records = problem(at(100), [{ candidate: 'other', ...at(90) }]);
  assert.match((familyAB(records, test_('fam.*'), 0.02) as { error: string }).error, /no candidate record of the family/);
  assert.match((familyAB(records, test_('pl*'), 0.02) as { error: string }).error, /holds a class default \(plain\)/);
});

test('family-ab: a changed entry and the buckets on stderr and as JSON lines; bad input exits 2 with one line', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-family-ab-'));
  writeStoreFile(dir, 'sweep-a.jsonl', [...problem(at(100), [{ candidate: 'fam.a', ...at(80) }, { candidate: 'other', ...at(90) }]), floor(40, 1)]);
  const r = await run('bench/family-ab', ['--store', dir, '--family', '/^fam\\./', '--json']);
  assert.is(r.code, 0, r.out);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.map((l) => l.kind), ['change', 'bucket']);
  assert.equal([lines[0].with, lines[0].without, lines[1].picked, lines[1].with_floor], ['fam.a', 'other', 1, 2]);
  assert.match(r.stderr, /fam\.a +80\.00 us over other +90\.00 us: x1\.125/);
  assert.match(r.stderr, /\| 1 \| 1 \| 1 \| 2\.000 \| 2\.250 \|/);
  assert.match(r.stderr, /1 records of the family; it takes 1 of 1 entries \(gate 0\.02\)/);
  for (const [args, why] of [
    [[], /give at least one --store/],
    [['--store', dir], /give --family/],
    [['--store', dir, '--family', 'nothing.*'], /no candidate record of the family/],
    [['--store', dir, '--family', '/(/'], /family \/\(\//],
  ] as const) {
    const bad = await run('bench/family-ab', [...args]);
    assert.is(bad.code, 2, `${args.join(' ')}: ${bad.out}`);
    assert.match(bad.stderr, why);
    assert.is(bad.stderr.trim().split('\n').length, 1, bad.stderr);
  }
});

test('family-ab: a store line that is no record is skipped with a warning naming it; the rest is read', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-family-ab-'));
  const file = writeStoreFile(dir, 'sweep-a.jsonl', problem(at(100), [{ candidate: 'fam.a', ...at(80) }]));
  fs.appendFileSync(file, 'not a record\n');
  const r = await run('bench/family-ab', ['--store', dir, '--family', 'fam.*']);
  assert.is(r.code, 0, r.out);
  assert.match(r.stderr, /warning: skipped .*sweep-a\.jsonl:3: not JSON/);
  assert.match(r.stderr, /it takes 1 of 1 entries/);
});

test.run();
