import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Identity, StoreRecord } from '../lib/schema.ts';
import { UsageError } from '../lib/cli.ts';
import { LOCK_FILE, STEPS_DIR, StoreLock, StoreWriter, formatWarning, measuredKeys, readSteps, readStore, recordKey } from '../lib/store.ts';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';

const identity: Identity = {
  backend: 'cpu',
  arch: 'x86_64',
  device: 'Test CPU',
  runtime: 'glibc 2.36',
  blas: 'none',
  compiler: 'cc 12 -O3',
  space: 'abcdef0123456789',
};

function record(over: Partial<StoreRecord> = {}): StoreRecord {
  return {
    v: 1,
    kind: 'candidate',
    identity,
    op: 'linear',
    dtype: 'bf16',
    n: 64,
    k: 128,
    rows: 1,
    candidate: 'plain',
    params: {},
    nodes_declared: 1,
    nodes: 1,
    is_default: true,
    stack_bound: false,
    pdl: false,
    status: 'ok',
    reason: '',
    samples_us: [3.5, 3.25, 3.75],
    copies: 2,
    parity: { status: 'pass', rel_err: 0.001, bitwise: null, reason: '' },
    seed: 42,
    at: '2026-01-02T03:04:05.678Z',
    ...over,
  };
}

const scratch = mkdtempSync(join(tmpdir(), 'kpick-store-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));
const tmp = () => mkdtempSync(join(scratch, 'store-'));

test('a record cut short by a file size limit is not counted stored, and the next reader skips its torn line', () => {
  const dir = tmp();
  const script = join(dir, 'append.ts');
  const store = join(dir, 'store');
  // appends 4 records of ~700 bytes under a 1 KiB file size limit, saying what append did
  writeFileSync(script, [
    `import { StoreWriter } from ${JSON.stringify(join(import.meta.dirname, '..', 'lib', 'store.ts'))};`,
    'const w = StoreWriter.open(process.argv[2], "sweep");',
    'const out = [];',
    'for (let i = 0; i < 4; i++) {',
    '  try { w.append({ ...JSON.parse(process.argv[3]), seed: i }); out.push(`ok ${w.written}`); }',
    '  catch (e) { out.push(`error ${w.written}: ${e.message}`); }',
    '}',
    'process.stdout.write(out.join("\\n"));',
  ].join('\n'));
  const run = spawnSync('bash', ['-c', 'ulimit -f 1 && exec "$0" --import tsx "$@"', process.execPath, script, store, JSON.stringify(record({ reason: 'x'.repeat(500) }))], {
    cwd: join(import.meta.dirname, '..'),
    encoding: 'utf8',
  });
  const lines = run.stdout.split('\n');
  assert.is(lines[0], 'ok 1', run.stderr);
  assert.match(lines[1]!, /^error 1: store file .*: only \d+ of \d+ bytes of a record written \(a full disk or a file size limit\)$/);
  const { records, warnings } = readStore(store);
  assert.is(records.length, 1);
  assert.is(warnings.length, 1, 'the torn line');
});

test('recordKey is the same whatever the key order of the identity, and differs per field', () => {
  const shuffled = Object.fromEntries(Object.entries(identity).reverse()) as Identity;
  assert.is(recordKey(record()), recordKey(record({ identity: shuffled })));
  const base = recordKey(record());
  for (const over of [{ rows: 2 }, { n: 65 }, { k: 129 }, { dtype: 'fp16' }, { op: 'gated' }, { candidate: 'rowblk.r2' }] as Partial<StoreRecord>[]) {
    assert.is.not(recordKey(record(over)), base, JSON.stringify(over));
  }
  assert.is.not(recordKey(record({ identity: { ...identity, space: 'other' } })), base);
});

test('appended records read back equal, from a file named for the sweep process', () => {
  const dir = tmp();
  const writer = StoreWriter.open(dir, 'sweep');
  writer.append(record());
  writer.append(record({ rows: 2, samples_us: [1] }));
  assert.is(writer.written, 2);
  writer.close();
  const names = readdirSync(dir);
  assert.is(names.length, 1);
  assert.match(names[0] ?? '', new RegExp(`^sweep-\\d{8}T\\d{6}Z-${process.pid}\\.jsonl$`));
  const { records, warnings } = readStore(dir);
  assert.equal(warnings, []);
  assert.equal(records, [record(), record({ rows: 2, samples_us: [1] })]);
  assert.is(readFileSync(join(dir, names[0] as string), 'utf8').split('\n').length, 3, 'one line per record');
});

test('a record written before records carried the pdl flag reads it from its name (what that space named PDL rows)', () => {
  const dir = tmp();
  const legacy = (candidate: string) => {
    const { pdl: _dropped, ...rest } = record({ candidate });
    return JSON.stringify(rest);
  };
  writeFileSync(join(dir, 'old.jsonl'), `${legacy('mma.w4.u8.pdl')}\n${legacy('mma.w4.u8')}\n`);
  const { records, warnings } = readStore(dir);
  assert.equal(warnings, []);
  assert.equal(records.map((r) => [r.candidate, r.pdl]), [['mma.w4.u8.pdl', true], ['mma.w4.u8', false]]);
});

test('each append is on disk when append returns (readable before close)', () => {
  const dir = tmp();
  const writer = StoreWriter.open(dir, 'sweep');
  writer.append(record());
  assert.is(readStore(dir).records.length, 1);
  writer.close();
});

test('an invalid record is refused and nothing is written', () => {
  const dir = tmp();
  const writer = StoreWriter.open(dir, 'sweep');
  assert.throws(() => writer.append(record({ rows: 3 as never })), /refusing to store an invalid record: rows: /);
  assert.is(statSync(writer.file).size, 0);
  writer.close();
});

test('two writers in one folder write two files, and reading pools both', () => {
  const dir = tmp();
  const a = StoreWriter.open(dir, 'sweep');
  const b = StoreWriter.open(dir, 'sweep');
  assert.is.not(a.file, b.file);
  a.append(record());
  b.append(record({ candidate: 'rowblk.r2', is_default: false }));
  a.close();
  b.close();
  assert.is(readdirSync(dir).length, 2);
  assert.equal(readStore(dir).records.map((r) => r.candidate).sort(), ['plain', 'rowblk.r2']);
});

test('existing files are never rewritten: a new writer leaves them byte for byte', () => {
  const dir = tmp();
  const old = join(dir, 'sweep-old.jsonl');
  const text = `${JSON.stringify(record())}\n`;
  writeFileSync(old, text);
  const writer = StoreWriter.open(dir, 'sweep');
  writer.append(record({ rows: 4 }));
  writer.close();
  assert.is(readFileSync(old, 'utf8'), text);
  assert.is(readStore(dir).records.length, 2);
});

test('a writer that wrote nothing leaves no file behind', () => {
  const dir = tmp();
  StoreWriter.open(dir, 'sweep').close();
  assert.equal(readdirSync(dir), []);
});

test('corrupt and schema-invalid lines are skipped with a warning naming file:line and the issue path', () => {
  const dir = tmp();
  const file = join(dir, 'sweep-mixed.jsonl');
  const bad = { ...record(), rows: 3 };
  const extra = { ...record(), surprise: 1 };
  writeFileSync(file, [JSON.stringify(record()), '{not json', JSON.stringify(bad), '', JSON.stringify(extra), JSON.stringify(record({ rows: 8 }))].join('\n') + '\n');
  const { records, warnings } = readStore(dir);
  assert.equal(records.map((r) => r.rows), [1, 8]);
  assert.is(warnings.length, 3);
  assert.equal(warnings.map((w) => w.line), [2, 3, 5]);
  assert.ok(warnings.every((w) => w.file === file));
  assert.match(formatWarning(warnings[0]!), new RegExp(`^${file}:2: not JSON \\(`));
  assert.match(formatWarning(warnings[1]!), new RegExp(`^${file}:3: rows: `));
  assert.match(formatWarning(warnings[2]!), /:5: surprise: /);
});

test('a truncated last line (a crash mid-write) costs only that record', () => {
  const dir = tmp();
  const file = join(dir, 'sweep-crashed.jsonl');
  const full = `${JSON.stringify(record())}\n${JSON.stringify(record({ rows: 2 }))}\n`;
  writeFileSync(file, full.slice(0, full.length - 30));
  const { records, warnings } = readStore(dir);
  assert.equal(records.map((r) => r.rows), [1]);
  assert.is(warnings.length, 1);
  assert.is(warnings[0]?.line, 2);
});

test('files not ending in .jsonl are not read; a missing store reads as empty', () => {
  const dir = tmp();
  writeFileSync(join(dir, 'notes.txt'), 'hello\n');
  appendFileSync(join(dir, 'x.jsonl'), `${JSON.stringify(record())}\n`);
  assert.is(readStore(dir).records.length, 1);
  assert.equal(readStore(join(dir, 'missing')), { records: [], warnings: [] });
});

test('a folder, a device or a FIFO named *.jsonl is skipped with a warning, never read (a FIFO would block)', () => {
  const dir = tmp();
  appendFileSync(join(dir, 'b-sweep.jsonl'), `${JSON.stringify(record())}\n`);
  mkdirSync(join(dir, 'a-folder.jsonl'));
  symlinkSync('/dev/null', join(dir, 'c-device.jsonl'));
  assert.is(spawnSync('mkfifo', [join(dir, 'd-fifo.jsonl')]).status, 0);
  const { records, warnings } = readStore(dir);
  assert.is(records.length, 1);
  assert.equal(warnings.map(formatWarning), [
    `${join(dir, 'a-folder.jsonl')}: a directory, not a store file`,
    `${join(dir, 'c-device.jsonl')}: a character device, not a store file`,
    `${join(dir, 'd-fifo.jsonl')}: a FIFO, not a store file`,
  ]);
});

test('a store that cannot be read is a usage error (exit 2) naming it', () => {
  const dir = tmp();
  writeFileSync(join(dir, STEPS_DIR), 'not a folder');
  symlinkSync(join(dir, 'gone'), join(dir, 'dangling.jsonl'));
  assert.throws(() => readSteps(dir), (e: Error) => e instanceof UsageError && e.message.startsWith(`cannot read store ${join(dir, STEPS_DIR)}: ENOTDIR`));
  assert.throws(() => readStore(dir), (e: Error) => e instanceof UsageError && e.message.startsWith(`cannot read store file ${join(dir, 'dangling.jsonl')}: ENOENT`));
});

test('measuredKeys holds the candidate and floor records of one identity only', () => {
  const other = { ...identity, device: 'Other CPU' };
  const records = [
    record(),
    record({ kind: 'floor', candidate: 'floor' }),
    record({ candidate: 'rowblk.r2', identity: other }),
    record({ kind: 'parity', candidate: 'splitk.s4', samples_us: [] }),
  ];
  const keys = measuredKeys(records, identity);
  assert.is(keys.size, 2);
  assert.ok(keys.has(recordKey(record())));
  assert.ok(keys.has(recordKey(record({ candidate: 'floor' }))));
  assert.not.ok(keys.has(recordKey(record({ candidate: 'splitk.s4' }))), 'a parity check alone is not a measurement');
});

test('an unwritable store is a clear error before anything else', () => {
  const dir = tmp();
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  assert.throws(() => StoreWriter.open(join(file, 'store'), 'sweep'), /store .*a-file\/store is not a writable folder: ENOTDIR/);
  assert.throws(() => StoreWriter.open(file, 'sweep'), /is not a writable folder/);
});

test('a tagged writer (one shard of a sweep) carries its tag in its file name and its key', () => {
  const dir = tmp();
  const shard = StoreWriter.open(dir, 'sweep', 'shard1of2');
  const plain = StoreWriter.open(dir, 'sweep');
  assert.match(shard.file, /\/sweep-\d{8}T\d{6}Z-\d+-shard1of2\.jsonl$/);
  assert.equal([shard.key, plain.key], ['sweep-shard1of2', 'sweep']);
  assert.match(plain.file, /\/sweep-\d{8}T\d{6}Z-\d+\.jsonl$/);
  shard.append(record({}));
  shard.close();
  plain.close();
  assert.equal(readdirSync(dir).map((f) => f.replace(/^sweep-\d{8}T\d{6}Z-\d+-/, '')), ['shard1of2.jsonl'], 'the unwritten plain file is gone');
});

test('StoreLock: one sweep at a time; the second is refused naming the pid that holds the store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpick-lock-'));
  try {
    const lock = StoreLock.acquire(dir);
    const file = join(dir, LOCK_FILE);
    assert.equal(readFileSync(file, 'utf8').split('\n').slice(0, 2), [String(process.pid), hostname()]);
    assert.throws(() => StoreLock.acquire(dir), (e: unknown) => e instanceof Error && e.message === `store ${dir} is in use by another sweep (pid ${process.pid}, ${file}); wait for it, or remove the lock if no sweep runs`);
    lock.release();
    lock.release(); // idempotent
    assert.not.ok(readdirSync(dir).includes(LOCK_FILE));
    StoreLock.acquire(dir).release();
    // a lock is not a record: the store reads past it
    assert.equal(readStore(dir), { records: [], warnings: [] });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('StoreLock: a stale lock (its sweep was killed) is taken over; one from another host is not', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpick-lock-'));
  try {
    const file = join(dir, LOCK_FILE);
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const deadPid = Number(dead.stdout); // exited: nothing holds it now
    writeFileSync(file, `${deadPid}\n${hostname()}\n2025-01-01T00:00:00Z\n`);
    const lock = StoreLock.acquire(dir);
    assert.is(readFileSync(file, 'utf8').split('\n')[0], String(process.pid));
    assert.equal(readdirSync(dir), [LOCK_FILE], 'the stale lock left nothing behind');
    lock.release();
    // no pid (yet): a sweep between creating its lock and writing it, so refused while fresh;
    // once old, unreadable is taken over like a stale one
    writeFileSync(file, '');
    assert.throws(() => StoreLock.acquire(dir), /in use by another sweep \(its lock .* is being taken\)/);
    const old = new Date(Date.now() - 60_000);
    utimesSync(file, old, old);
    StoreLock.acquire(dir).release();
    writeFileSync(file, `${deadPid}\nanother-host\n`);
    assert.throws(() => StoreLock.acquire(dir), /in use by another sweep \(pid \d+ on another-host/);
    rmSync(file);
    // never read what is not a file (a FIFO would block), never replaced
    assert.is(spawnSync('mkfifo', [file]).status, 0);
    assert.throws(() => StoreLock.acquire(dir), (e: unknown) => e instanceof Error && e.message === `store ${dir}: its lock ${file} is a FIFO: remove it`);
    const fifoStore = join(dir, 'fifo-store');
    assert.is(spawnSync('mkfifo', [fifoStore]).status, 0);
    assert.throws(() => StoreLock.acquire(fifoStore), /is not a writable folder/);
    assert.throws(() => StoreWriter.open(fifoStore, 'sweep'), /is not a writable folder/);
    assert.ok(statSync(fifoStore).isFIFO(), 'left as it was');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('StoreLock: the shards of one sweep share a store; the same shard, an unsharded sweep or another count are refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpick-lock-'));
  try {
    const zero = StoreLock.acquire(dir, 'sweep-shard0of2');
    const one = StoreLock.acquire(dir, 'sweep-shard1of2');
    assert.equal(readdirSync(dir).sort(), ['sweep-shard0of2.lock', 'sweep-shard1of2.lock']);
    assert.throws(() => StoreLock.acquire(dir, 'sweep-shard1of2'), new RegExp(`in use by another sweep \\(pid ${process.pid},`));
    assert.throws(() => StoreLock.acquire(dir), /whose units overlap this one's \(sweep-shard\dof2, pid \d+/);
    assert.throws(() => StoreLock.acquire(dir, 'sweep-shard0of3'), /whose units overlap this one's \(sweep-shard\dof2/);
    assert.equal(readdirSync(dir).sort(), ['sweep-shard0of2.lock', 'sweep-shard1of2.lock'], 'a refused writer leaves no lock behind');
    zero.release();
    one.release();
    StoreLock.acquire(dir).release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
