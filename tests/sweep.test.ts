import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { DEFAULT_BUILD_DIR, loadKpick, takesDtype, type Candidate } from '../lib/ffi.ts';
import { identityFromInfo } from '../lib/identity.ts';
import type { Linear } from '../lib/models.ts';
import { StoreRecord } from '../lib/schema.ts';
import { measuredKeys, recordKey } from '../lib/store.ts';
import { FLOOR, STOPPED, STOP_MARGIN, contenderKey, hopeless, runSweep, selectCandidates, timedThrough, visitsOf, type SweepPlan } from '../lib/sweep.ts';
import { MIN_SAMPLES } from '../lib/promote.ts';

const kpick = loadKpick({ lib: join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const space = kpick.candidates();
const identity = identityFromInfo(kpick.info());
const linears: Linear[] = [
  { name: 'a', op: 'linear', n: 48, k: 64 },
  { name: 'g', op: 'gated', n: 24, k: 64 },
];

function plan(over: Partial<SweepPlan> = {}): SweepPlan {
  return {
    identity,
    linears,
    dtypes: ['bf16'],
    rows: [1, 2],
    candidates: space,
    space,
    samples: 2,
    rounds: 2,
    copies: 2,
    seed: 99,
    done: new Set(),
    ...over,
  };
}

function sweep(p: SweepPlan) {
  const records: StoreRecord[] = [];
  const progress: [number, number][] = [];
  const summary = runSweep(kpick, p, { record: (r) => records.push(r), progress: (done, total) => progress.push([done, total]) });
  return { records, summary, progress };
}

test('selectCandidates keeps names matching any glob, and refuses a glob that matches none', () => {
  assert.equal(selectCandidates(space, ['rowblk.*']).map((c) => c.name), ['rowblk.r2', 'rowblk.r4', 'rowblk.r8']);
  assert.equal(selectCandidates(space, ['plain', 'gated.pl?in']).map((c) => c.name), ['plain', 'gated.plain']);
  assert.is(selectCandidates(space, undefined).length, space.length);
  assert.throws(() => selectCandidates(space, ['plain', 'gemv.*']), /no candidate matches 'gemv\.\*'; this space has plain, rowblk\.r2/);
});

test('visitsOf: on the CPU every sample is a round of its own; a GPU keeps its samples together in each round', () => {
  assert.equal(visitsOf('cpu', 3, 3), { samples: 1, rounds: 9 });
  assert.equal(visitsOf('cuda', 5, 3), { samples: 5, rounds: 3 });
  assert.equal(visitsOf('hip', 5, 3), { samples: 5, rounds: 3 });
});

test('hopeless: a candidate stops only once both sides have MIN_SAMPLES and its fastest is past the margin over the default median', () => {
  const def = [100, 101, 99, 100, 102];
  const slow = [1, 2, 3, 4, 5].map((i) => 100 * (1 + STOP_MARGIN) + i); // the default's median is 100
  assert.ok(hopeless(slow, def), 'every sample over the margin');
  assert.not.ok(hopeless(slow.slice(0, MIN_SAMPLES - 1), def), 'too few samples of the candidate to judge');
  assert.not.ok(hopeless(slow, def.slice(0, MIN_SAMPLES - 1)), 'too few samples of the default');
  assert.not.ok(hopeless([...slow.slice(1), 100], def), 'one sample as fast as the default keeps it timed');
  assert.not.ok(hopeless(def.map((t) => t * 1.05), def), 'within the margin: it may still win on more samples');
});

test('timedThrough keys the candidates timed to the end per problem and rows; stopped, failed and floor records are left out', () => {
  const base = { op: 'linear', dtype: 'bf16', n: 64, k: 32, rows: 4 } as const;
  const rec = (candidate: string, kind: string, status: string, reason: string) => ({ ...base, candidate, kind, status, reason }) as unknown as StoreRecord;
  const keys = timedThrough([
    rec('plain', 'candidate', 'ok', ''),
    rec('rowblk.r2', 'candidate', 'ok', `${STOPPED} 5 samples: its fastest is over 10 % slower than the default's median`),
    rec('splitk.s4', 'candidate', 'failed', 'time: boom'),
    rec('floor', 'floor', 'ok', ''),
  ]);
  assert.equal([...keys], [contenderKey({ ...base, candidate: 'plain' })]);
  assert.is(contenderKey({ ...base, candidate: 'plain' }), 'linear bf16 64x32 m=4 plain');
});

test('a sweep writes one valid record per candidate of the op and one floor per shape and rows', () => {
  const { records, summary, progress } = sweep(plan());
  const linearCount = space.filter((c) => c.op === 'linear' && takesDtype(c, 'bf16')).length;
  const gatedCount = space.filter((c) => c.op === 'gated' && takesDtype(c, 'bf16')).length;
  const expected = 2 * (linearCount + 1 + gatedCount + 1);
  assert.is(records.length, expected);
  assert.equal(summary, { written: expected, skipped: 0, failed: 0, parityFailed: 0, noCandidates: [] });
  for (const r of records) {
    assert.ok(v.safeParse(StoreRecord, r).success, JSON.stringify(r));
    assert.is(r.status, 'ok', `${r.candidate}: ${r.reason}`);
    assert.is(r.samples_us.length, 4, 'samples x rounds');
    assert.ok(r.samples_us.every((t) => t > 0));
    assert.is(r.copies, 2);
    assert.is(r.seed, 99);
    assert.equal(r.identity, identity);
  }
  const cands = records.filter((r) => r.kind === 'candidate');
  assert.ok(cands.every((r) => r.parity.status === 'pass' && r.nodes === r.nodes_declared), 'parity and node count for each');
  assert.ok(cands.every((r) => (space.find((c) => c.name === r.candidate) as Candidate).op === r.op), 'each op takes its own candidates');
  const floors = records.filter((r) => r.kind === 'floor');
  assert.equal(floors.map((r) => `${r.op} ${r.rows}`), ['linear 1', 'linear 2', 'gated 1', 'gated 2']);
  assert.ok(floors.every((r) => r.candidate === FLOOR && r.parity.status === 'skipped'));
  assert.equal(cands.filter((r) => r.is_default).map((r) => `${r.candidate} ${r.rows}`), ['plain 1', 'plain 2', 'gated.plain 1', 'gated.plain 2']);
  assert.equal(progress[progress.length - 1], [expected, expected]);
});

test('placements: each shape gets that many problems of one seed and rotation, the rounds shared among them, and its records say so', () => {
  const made: { seed?: number | bigint; copies?: number }[] = [];
  const counting = Object.create(kpick) as typeof kpick;
  counting.createProblem = (spec) => {
    made.push({ seed: spec.seed, copies: spec.copies });
    return kpick.createProblem(spec);
  };
  const records: StoreRecord[] = [];
  runSweep(counting, plan({ placements: 2, seed: undefined, copies: 0 }), { record: (r) => records.push(r) });
  assert.is(made.length, 4, 'two shapes, two placements each');
  assert.is(made[0]!.copies, 0, 'the first placement sizes the rotation');
  assert.ok(made[1]!.copies! > 0 && made[1]!.seed === made[0]!.seed, 'the second takes its copies and its seed');
  assert.is(made[2]!.seed, made[3]!.seed);
  assert.ok(records.length > 0);
  for (const r of records) {
    assert.ok(v.safeParse(StoreRecord, r).success, JSON.stringify(r));
    assert.is(r.placements, 2);
    assert.is(r.samples_us.length, 4, 'as many samples as on one placement');
  }
  const one: StoreRecord[] = [];
  runSweep(kpick, plan({ rows: [1], placements: 1 }), { record: (r) => one.push(r) });
  assert.ok(one.length > 0 && one.every((r) => r.placements === undefined), 'one placement writes the record as before');
});

test('an fp8 sweep times the fp8 classes alone, its W8A8 default first among equals, each record naming its class', () => {
  const { records } = sweep(plan({ dtypes: ['fp8'], rows: [1] }));
  const cands = records.filter((r) => r.kind === 'candidate');
  const fp8 = space.filter((c) => takesDtype(c, 'fp8') && c.op !== 'moe'); // dense shapes here: the fp8 moe rows have their own test
  assert.equal(cands.map((r) => r.candidate).sort(), fp8.map((c) => c.name).sort());
  assert.ok(cands.every((r) => r.dtype === 'fp8' && r.status === 'ok' && r.parity.status === 'pass'), 'every fp8 candidate runs and passes its bar');
  assert.equal(cands.filter((r) => r.is_default).map((r) => `${r.candidate} ${r.numeric}`), ['w8a8.plain w8a8', 'gated.w8a8.plain w8a8']);
  assert.ok(cands.every((r) => r.numeric === 'w8a8' || r.numeric === 'w8a16'));
  assert.equal(cands.filter((r) => r.parity.bitwise === true).map((r) => r.candidate), ['w8a16.rowblk.r4', 'gated.w8a16.rowblk.r4']);
});

test('records already in the store are skipped without measuring; only the missing ones run', () => {
  const first = sweep(plan({ rows: [1] }));
  const done = measuredKeys(first.records, identity);
  const again = sweep(plan({ rows: [1], done }));
  assert.equal(again.records, []);
  assert.is(again.summary.skipped, first.records.length);

  const missing = first.records[3] as StoreRecord;
  const partial = new Set([...done].filter((key) => key !== recordKey(missing)));
  const resumed = sweep(plan({ rows: [1, 2], done: partial }));
  assert.is(resumed.summary.skipped, first.records.length - 1);
  const rowsOne = resumed.records.filter((r) => r.rows === 1);
  assert.equal(rowsOne.map((r) => r.candidate), [missing.candidate]);
  assert.is(resumed.records.filter((r) => r.rows === 2).length, first.records.length);
});

test('a candidate not built for the target is recorded unsupported with its reason', () => {
  const plain = space.find((c) => c.name === 'plain') as Candidate;
  const absent: Candidate = { ...plain, name: 'absent.kernel', available: false, isDefault: false };
  const { records } = sweep(plan({ linears: [linears[0] as Linear], rows: [1], candidates: [plain, absent] }));
  const r = records.find((x) => x.candidate === 'absent.kernel');
  assert.equal([r?.status, r?.reason, r?.samples_us, r?.parity.status], ['unsupported', 'not built for this target', [], 'skipped']);
  assert.is(records.find((x) => x.candidate === 'plain')?.status, 'ok');
});

test('a candidate is timed only at buckets whose every rows count it takes: the route sends m = b/2+1..b to the choice', () => {
  const plain = space.find((c) => c.name === 'plain') as Candidate;
  const from8: Candidate = { ...plain, name: 'rows8up.kernel', isDefault: false, rowsMin: 8 };
  const { records } = sweep(plan({ linears: [linears[0] as Linear], rows: [8, 16], candidates: [plain, from8] }));
  const at = (rows: number) => records.find((x) => x.candidate === 'rows8up.kernel' && x.rows === rows);
  assert.equal([at(8)?.status, at(8)?.samples_us], ['unsupported', []]);
  assert.match(at(8)?.reason ?? '', /takes rows 8\.\.\d+, not all of bucket 8 \(m=5\.\.8\)/);
  assert.is(at(16)?.status, 'ok', 'bucket 16 routes m = 9..16, all of which it takes');
});

test('a native failure of one candidate is recorded as failed with the library message, and the sweep goes on', () => {
  const plain = space.find((c) => c.name === 'plain') as Candidate;
  const broken: Candidate = { ...plain, id: 4242, name: 'broken.kernel', isDefault: false };
  const { records, summary } = sweep(plan({ linears: [linears[0] as Linear], rows: [1, 2], candidates: [broken, plain] }));
  const failed = records.filter((r) => r.candidate === 'broken.kernel');
  assert.is(failed.length, 2);
  for (const r of failed) {
    assert.is(r.status, 'failed');
    assert.match(r.reason, /unknown candidate id 4242/);
    assert.equal(r.samples_us, []);
  }
  assert.equal(records.filter((r) => r.candidate === 'plain').map((r) => [r.rows, r.status, r.samples_us.length]), [[1, 'ok', 4], [2, 'ok', 4]], 'plain, after the failure, still timed at both rows');
  assert.is(summary.failed, 2);
});

test('a moe shape: timed under both routings (the skewed records say so), its records carry experts and top-k, its candidates pass parity under each, its floor is timed under each', () => {
  const moe: Linear = { name: 'experts', op: 'moe', n: 32, k: 64, experts: 8, topk: 2 };
  const { records, summary } = sweep(plan({ linears: [moe], rows: [1, 4] }));
  assert.is(summary.failed, 0);
  assert.is(summary.parityFailed, 0);
  assert.equal(summary.noCandidates, []);
  const names = space.filter((c) => c.op === 'moe' && takesDtype(c, 'bf16')).map((c) => c.name);
  assert.is(records.length, 2 * 2 * (names.length + 1), 'each moe candidate and the floor, per rows bucket and routing');
  for (const routing of [undefined, 'skewed'])
    for (const rows of [1, 4])
      assert.equal(records.filter((r) => r.routing === routing && r.rows === rows).map((r) => r.candidate).sort(), [...names, 'floor'].sort(), `${routing ?? 'uniform'} rows ${rows}`);
  for (const r of records) {
    assert.equal([r.op, r.experts, r.topk, r.n, r.k], ['moe', 8, 2, 32, 64], JSON.stringify(r));
    assert.ok(v.is(StoreRecord, r));
    assert.ok(r.samples_us.length > 0 && r.samples_us.every((t) => t > 0), r.candidate);
  }
  assert.ok(records.filter((r) => r.kind === 'candidate').every((r) => r.parity.status === 'pass'));
  // its keys differ from those of the same n, k with another top-k, and a skewed record's from its uniform twin's: one store holds all
  const other = recordKey({ ...records[0]!, topk: 1 });
  assert.not.equal(recordKey(records[0]!), other);
  const uniform = records.find((r) => r.routing === undefined)!;
  assert.not.equal(recordKey(uniform), recordKey({ ...uniform, routing: 'skewed' }));
  assert.ok(measuredKeys(records, identity).has(recordKey(records[0]!)));
  // a resumed sweep finds both routings done
  const again = sweep(plan({ linears: [moe], rows: [1, 4], done: measuredKeys(records, identity) }));
  assert.is(again.records.length, 0);
});

test('a moe shape in fp8: the W8A8 default and the W8A16 class under both routings, each record naming its class, the floor timed under each', () => {
  const moe: Linear = { name: 'experts', op: 'moe', n: 32, k: 64, experts: 8, topk: 2 };
  const { records, summary } = sweep(plan({ linears: [moe], dtypes: ['fp8', 'bf16'], rows: [4] }));
  assert.is(summary.failed + summary.parityFailed, 0);
  const fp8 = records.filter((r) => r.dtype === 'fp8' && r.kind === 'candidate');
  for (const routing of [undefined, 'skewed']) {
    assert.equal(fp8.filter((r) => r.routing === routing).map((r) => `${r.candidate} ${r.numeric}${r.is_default ? ' default' : ''}`).sort(), [
      'moe.w8a16.grouped.r4 w8a16', 'moe.w8a16.threads.t2 w8a16', 'moe.w8a8.loop w8a8 default',
    ]);
  }
  assert.ok(fp8.every((r) => r.parity.status === 'pass' && r.samples_us.length > 0));
  assert.equal(fp8.filter((r) => r.parity.bitwise === true).map((r) => r.candidate), ['moe.w8a16.threads.t2', 'moe.w8a16.threads.t2']);
  const floors = records.filter((r) => r.kind === 'floor' && r.dtype === 'fp8');
  assert.equal(floors.map((r) => r.routing ?? 'uniform'), ['uniform', 'skewed'], 'the fp8 floor timed under each routing');
});

test('a build with no candidate of an op leaves its shapes out and names them, instead of failing', () => {
  const dense = space.filter((c) => c.op !== 'moe');
  const moe: Linear = { name: 'experts', op: 'moe', n: 32, k: 64, experts: 8, topk: 2 };
  const { records, summary } = sweep(plan({ linears: [linears[0]!, moe], rows: [1], candidates: dense, space: dense }));
  assert.equal(summary.noCandidates, ['bf16 experts moe 32x64 E8 top2']);
  assert.ok(records.length > 0 && records.every((r) => r.op === 'linear'));
});

test.run();
