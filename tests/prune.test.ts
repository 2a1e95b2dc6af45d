// lib/prune.ts (which rows of the space ever mattered in pooled sweeps) and
// bench/prune-report.ts end to end on synthetic stores.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { rowUse } from '../lib/prune.ts';
import { run } from './helpers/run-script.ts';
import { evenSamples, problem, syntheticRecord, SYNTHETIC_IDENTITY, writeStoreFile } from './helpers/synthetic-records.ts';

const at = (center: number) => ({ samples_us: evenSamples(center, 0.02) });
const byName = (rows: ReturnType<typeof rowUse>) => new Map(rows.map((r) => [r.candidate, r]));

test('a row never within the gate of a problem\'s fastest is dropped; one within it anywhere is kept', () => {
  const records = [
    ...problem(at(100), [{ candidate: 'fast', ...at(80) }, { candidate: 'near', ...at(81) }, { candidate: 'slow', ...at(90) }]),
    ...problem(at(100), [{ candidate: 'fast', ...at(90) }, { candidate: 'near', ...at(95) }, { candidate: 'slow', ...at(99) }], { rows: 2 }),
  ];
  const use = byName(rowUse(records, 0.02));
  assert.equal({ ...use.get('fast')! }, { candidate: 'fast', problems: 2, wins: 2, within: 2, closest: 1, isDefault: false, picked: false, verdict: 'keep' });
  assert.is(use.get('near')!.within, 1, '81/80 is within 2 %, 95/90 is not');
  assert.is(use.get('near')!.verdict, 'keep');
  assert.is(use.get('slow')!.verdict, 'drop');
  assert.ok(Math.abs(use.get('slow')!.closest - 99 / 90) < 1e-12, 'closest: its least ratio to the fastest');
  assert.is(use.get('plain')!.verdict, 'keep', 'the default is kept however slow: the rule compares against it');
});

test('a table\'s choice is kept though the kernel timings never put it within the gate (the step picked it)', () => {
  const records = problem(at(100), [{ candidate: 'fast', ...at(80) }, { candidate: 'runner', ...at(90) }]);
  assert.is(byName(rowUse(records, 0.02)).get('runner')!.verdict, 'drop');
  assert.is(byName(rowUse(records, 0.02, new Set(['runner']))).get('runner')!.verdict, 'keep');
});

test('builds are separate problems: a row within the gate in one sweep only is kept', () => {
  const other = { ...SYNTHETIC_IDENTITY, space: 'another-space' };
  const records = [
    ...problem(at(100), [{ candidate: 'a', ...at(80) }, { candidate: 'b', ...at(90) }]),
    ...problem(at(100), [{ candidate: 'a', ...at(90) }, { candidate: 'b', ...at(80) }], { identity: other }),
  ];
  const use = byName(rowUse(records, 0.02));
  assert.equal([use.get('a')!.wins, use.get('b')!.wins], [1, 1]);
  assert.is(use.get('b')!.verdict, 'keep');
});

test('failed, parity-failing and untimed records do not count; a row never timed is untimed, not dropped', () => {
  const records = [
    ...problem(at(100), [
      { candidate: 'wrong', ...at(50), parity: { status: 'fail', rel_err: 1, bitwise: null, reason: 'off' } },
      { candidate: 'absent', status: 'unsupported', samples_us: [] },
    ]),
  ];
  const use = byName(rowUse(records, 0.02));
  assert.is(use.get('plain')!.wins, 1, 'the parity-failing 50 us is not the fastest');
  assert.is(use.get('wrong')!.verdict, 'untimed');
  assert.is(use.get('absent')!.verdict, 'untimed');
});

test('prune-report: pooled stores, the rows to drop on stderr, one JSON line per row; no store is a usage error', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-prune-'));
  writeStoreFile(path.join(dir, 'a'), 'sweep-a.jsonl', problem(at(100), [{ candidate: 'fast', ...at(80) }, { candidate: 'slow', ...at(95) }]));
  writeStoreFile(path.join(dir, 'b'), 'sweep-b.jsonl', [syntheticRecord({ candidate: 'slow', rows: 2, ...at(90) }), syntheticRecord({ candidate: 'fast', rows: 2, ...at(70) })]);
  const r = await run('bench/prune-report', ['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--json']);
  assert.is(r.code, 0, r.out);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.map((l) => [l.candidate, l.verdict, l.problems]), [['fast', 'keep', 2], ['plain', 'keep', 1], ['slow', 'drop', 2]]);
  assert.match(r.stderr, /drop slow +2 problems, closest x1\.188 of the best/);
  assert.match(r.stderr, /3 rows over 1 build\(s\) of 2 store\(s\), gate 0.02: 2 keep, 1 drop, 0 never timed/);
  const none = await run('bench/prune-report', []);
  assert.is(none.code, 2);
  assert.match(none.stderr, /give at least one --store/);
  const gate = await run('bench/prune-report', ['--store', path.join(dir, 'a'), '--gate', '2']);
  assert.is(gate.code, 2);
});

test.run();
