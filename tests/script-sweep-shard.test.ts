// Sharded sweeps end to end on the CPU backend: shards of one plan hold
// exactly the records of the unsharded sweep, resume without moving work
// between shards, and promote pools them regardless of how the records lie
// in files and folders.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { StoreRecord } from '../lib/schema.ts';
import { readStore, recordKey } from '../lib/store.ts';

import { run } from './helpers/run-script.ts';
const scratch = mkdtempSync(join(tmpdir(), 'kpick-shard-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** `tsx <script> ...args` on the CPU backend, in process */
const tsx = (script: string, args: string[]) => run(script, args, { env: { KPICK_BACKEND: 'cpu' } });

const plan = ['--model', 'tiny', '--rows', '1,2', '--copies', '4', '--seed', '7', '--samples', '5', '--rounds', '1', '--quiet'];
const sweep = async (store: string, extra: string[] = []) => {
  const run = await tsx('scripts/sweep.ts', [...plan, '--store', store, ...extra]);
  assert.is(run.code, 0, run.stderr);
  return run;
};
const keysOf = (dirs: string[]) => dirs.flatMap((d) => readStore(d).records.map(recordKey)).sort();
const jsonl = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort();

const whole = join(scratch, 'whole');
const twoInOne = join(scratch, 'two');
const three = [0, 1, 2].map((i) => join(scratch, `three-${i}`));

test('the shards of a sweep (2 into one folder, 3 into three) hold exactly the records of the unsharded sweep', async () => {
  await sweep(whole);
  await sweep(twoInOne, ['--shard', '0/2']);
  await sweep(twoInOne, ['--shard', '1/2']);
  for (const [i, dir] of three.entries()) await sweep(dir, ['--shard', `${i}/3`]);

  const want = keysOf([whole]);
  assert.ok(want.length > 0);
  assert.equal(keysOf([twoInOne]), want, '2 shards');
  assert.equal(keysOf(three), want, '3 shards');
  assert.is(new Set(keysOf(three)).size, want.length, 'no record twice');

  const names = jsonl(twoInOne);
  assert.is(names.length, 2);
  assert.match(names.find((n) => n.endsWith('-shard0of2.jsonl')) ?? '', /^sweep-\d{8}T\d{6}Z-\d+-shard0of2\.jsonl$/);
  assert.ok(names.some((n) => n.endsWith('-shard1of2.jsonl')), names.join(' '));
  assert.match(jsonl(whole)[0] ?? '', /^sweep-\d{8}T\d{6}Z-\d+\.jsonl$/);
});

test('a shard run again measures nothing; the other shard of a half-filled store measures only its own part', async () => {
  const again = await tsx('scripts/sweep.ts', [...plan.filter((a) => a !== '--quiet'), '--store', twoInOne, '--shard', '0/2']);
  assert.is(again.code, 0, again.stderr);
  assert.match(again.stderr, /sweep \(shard 0 of 2\): /);
  assert.match(again.stderr, /wrote 0 records; skipped \d+ already in the store/);
  assert.is(jsonl(twoInOne).length, 2);

  // a store that already holds the unsharded rows-1 records: shard 1 of the
  // rows 1,2 plan still measures its own rows-2 units, and only those
  const half = join(scratch, 'half');
  await tsx('scripts/sweep.ts', [...plan.map((a) => (a === '1,2' ? '1' : a)), '--store', half]);
  const run = await sweep(half, ['--shard', '1/2', '--json']);
  const written = run.stdout.trim().split('\n').map((l) => recordKey(JSON.parse(l) as StoreRecord)).sort();
  const shard1File = join(twoInOne, jsonl(twoInOne).find((n) => n.endsWith('shard1of2.jsonl'))!);
  const shard1 = readFileSync(shard1File, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StoreRecord);
  assert.ok(written.length > 0);
  assert.equal(written, shard1.filter((r) => r.rows === 2).map(recordKey).sort());
});

test('bad --shard values exit 2 with one line, before a store file is made', async () => {
  const store = join(scratch, 'bad');
  for (const [value, message] of [
    ['2/2', /^sweep: --shard 2\/2: i must be in 0\.\.1 \(shards are 0-based\)\n$/],
    ['-1/2', /^sweep: --shard must be i\/n .*; got '-1\/2'\n$/],
    ['1/0', /^sweep: --shard 1\/0: n must be in 1\.\.4096\n$/],
    ['0x1/2', /^sweep: --shard must be i\/n .*; got '0x1\/2'\n$/],
    ['1e0/2', /^sweep: --shard must be i\/n .*; got '1e0\/2'\n$/],
    ['1', /^sweep: --shard must be i\/n .*; got '1'\n$/],
  ] as const) {
    const run = await tsx('scripts/sweep.ts', [...plan, '--store', store, '--shard', value]);
    assert.is(run.code, 2, value);
    assert.match(run.stderr, message);
  }
  assert.not.ok(existsSync(store), 'no store folder made');
});

async function promote(stores: string[], out: string) {
  const run = await tsx('scripts/promote.ts', [...stores.flatMap((s) => ['--store', s]), '--out', out, '--quiet']);
  assert.is(run.code, 0, run.stderr);
  const table = JSON.parse(readFileSync(out, 'utf8')) as { created?: string; entries: unknown[] };
  delete table.created;
  return table;
}

test('promote gives one table of one record set however the records are split across files and folders', async () => {
  const lines = readFileSync(join(whole, jsonl(whole)[0]!), 'utf8').trim().split('\n');
  // the same records: one file; two files (alternate lines); three folders (by candidate)
  const alternate = join(scratch, 'split-alternate');
  mkdirSync(alternate);
  writeFileSync(join(alternate, 'sweep-a-shard0of2.jsonl'), lines.filter((_, i) => i % 2 === 0).join('\n') + '\n');
  writeFileSync(join(alternate, 'sweep-b-shard1of2.jsonl'), lines.filter((_, i) => i % 2 === 1).reverse().join('\n') + '\n');
  const byCandidate = [0, 1, 2].map((i) => join(scratch, `split-candidate-${i}`));
  byCandidate.forEach((dir, i) => {
    mkdirSync(dir);
    const mine = lines.filter((l) => (JSON.parse(l) as StoreRecord).candidate.length % 3 === i);
    writeFileSync(join(dir, `sweep-${i}.jsonl`), mine.join('\n') + '\n');
  });
  const one = await promote([whole], join(scratch, 'out-one', 'table.json'));
  assert.ok(one.entries.length > 0);
  assert.equal(await promote([alternate], join(scratch, 'out-alternate', 'table.json')), one);
  assert.equal(await promote([...byCandidate].reverse(), join(scratch, 'out-candidate', 'table.json')), one);
});

test('the pooled shard stores promote to a table of the same entries as the unsharded store', async () => {
  const key = (e: { op: string; dtype: string; n: number; k: number; bucket: number }) => `${e.op}/${e.dtype}/${e.n}/${e.k}/${e.bucket}`;
  type Entries = { entries: { op: string; dtype: string; n: number; k: number; bucket: number; candidates: Record<string, unknown> }[] };
  const one = await promote([whole], join(scratch, 'pool-one', 'table.json')) as unknown as Entries;
  const pooled = await promote(three, join(scratch, 'pool-three', 'table.json')) as unknown as Entries;
  assert.equal(pooled.entries.map(key), one.entries.map(key));
  assert.equal(pooled.entries.map((e) => Object.keys(e.candidates)), one.entries.map((e) => Object.keys(e.candidates)));
});

test('agree.ts: tables of the same records agree entry by entry; a moved choice is named and exits 1', async () => {
  const a = join(scratch, 'out-one', 'table.json');
  const b = join(scratch, 'out-alternate', 'table.json');
  const same = await tsx('scripts/agree.ts', ['--table', a, '--table', b, '--json']);
  assert.is(same.code, 0, same.stderr);
  const rows = same.stdout.trim().split('\n').map((l) => JSON.parse(l) as { agreement: string });
  assert.ok(rows.length > 0 && rows.every((r) => r.agreement === 'same'));
  assert.match(same.stderr, new RegExp(`agree: ${rows.length} entries: ${rows.length} same, .*: the tables agree`));

  // move one entry's choice to its slowest timed candidate
  const t = JSON.parse(readFileSync(a, 'utf8')) as { entries: { choice: string; candidates: Record<string, { median_us: number | null }> }[] };
  const e = t.entries[0]!;
  e.choice = Object.entries(e.candidates).filter(([, c]) => c.median_us !== null).sort(([, x], [, y]) => y.median_us! - x.median_us!)[0]![0];
  const moved = join(scratch, 'moved.json');
  writeFileSync(moved, JSON.stringify(t));
  const differ = await tsx('scripts/agree.ts', ['--table', a, '--table', moved]);
  assert.is(differ.code, 1, differ.stderr);
  assert.match(differ.stderr, new RegExp(`^differ +\\S+ \\S+ \\d+x\\d+ m=\\d+: a \\S+, b ${e.choice.replace(/\./g, '\\.')} `, 'm'));
  assert.match(differ.stderr, /the tables DISAGREE\n$/);

  const usage = await tsx('scripts/agree.ts', ['--table', a]);
  assert.is(usage.code, 2);
  assert.is(usage.stderr, 'agree: give exactly two --table files, got 1\n');
});

test.run();
