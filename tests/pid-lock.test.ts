// lib/pid-lock.ts: a lock file created O_EXCL naming pid, host and time; a
// dead pid's lock here is taken over, another host's is respected, a lock path
// that is no regular file is refused and never read, release removes only the
// lock this process wrote.
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { heldBy, lockHolder, PidLock, type LockWords } from '../lib/pid-lock.ts';

const words: LockWords = { subject: 'thing /x', holder: 'another job', idle: 'no job runs' };

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'kpick-pid-lock-'));
}

/** The pid of a process that has exited: nothing holds it now. */
function deadPid(): number {
  return Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
}

const refusedWith = (message: string) => (e: unknown) => e instanceof Error && e.message === message;

test('take creates the lock naming this pid, host and time; a second take is refused in one line naming the live pid', () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    const lock = PidLock.take(file, words);
    assert.is(lock.file, file);
    const [pid, host, at, end] = readFileSync(file, 'utf8').split('\n');
    assert.equal([pid, host, end], [String(process.pid), hostname(), '']);
    assert.ok(Math.abs(Date.parse(at!) - Date.now()) < 60_000, `a time: ${at}`);
    assert.equal(lockHolder(file), { pid: process.pid, host: hostname() });
    assert.equal(heldBy(file), { pid: process.pid, host: hostname() });
    assert.throws(() => PidLock.take(file, words), refusedWith(`thing /x is in use by another job (pid ${process.pid}, ${file}); wait for it, or remove the lock if no job runs`));
    assert.equal(readdirSync(dir), ['thing.lock'], 'a refused take leaves nothing behind');
    lock.release();
    assert.equal(readdirSync(dir), []);
    PidLock.take(file, words).release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a dead pid's lock on this host is stale: taken over, nothing left beside it", () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    const dead = deadPid();
    writeFileSync(file, `${dead}\n${hostname()}\n2025-01-01T00:00:00Z\n`);
    assert.equal(lockHolder(file), { pid: dead, host: hostname() });
    assert.is(heldBy(file), null, 'a dead pid holds nothing');
    const lock = PidLock.take(file, words);
    assert.is(readFileSync(file, 'utf8').split('\n')[0], String(process.pid));
    assert.equal(readdirSync(dir), ['thing.lock'], 'no .stale file left');
    lock.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("another host's lock is respected whatever its pid: this host cannot tell if it lives", () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    const dead = deadPid();
    writeFileSync(file, `${dead}\nanother-host\n2025-01-01T00:00:00Z\n`);
    assert.equal(heldBy(file), { pid: dead, host: 'another-host' });
    assert.throws(() => PidLock.take(file, words), refusedWith(`thing /x is in use by another job (pid ${dead} on another-host, ${file}); wait for it, or remove the lock if no job runs`));
    assert.is(readFileSync(file, 'utf8'), `${dead}\nanother-host\n2025-01-01T00:00:00Z\n`, 'left as it was');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock naming no pid yet is being taken while fresh, stale once old', () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    writeFileSync(file, '');
    assert.throws(() => PidLock.take(file, words), refusedWith(`thing /x is in use by another job (its lock ${file} is being taken); wait for it, or remove the lock if no job runs`));
    const old = new Date(Date.now() - 60_000);
    utimesSync(file, old, old);
    const lock = PidLock.take(file, words);
    assert.is(readFileSync(file, 'utf8').split('\n')[0], String(process.pid));
    lock.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock path that is a FIFO, a folder or a symlink is refused and never read (a FIFO would block), left as it was', () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    assert.is(spawnSync('mkfifo', [file]).status, 0);
    assert.throws(() => PidLock.take(file, words), refusedWith(`thing /x: its lock ${file} is a FIFO: remove it`));
    assert.ok(lstatSync(file).isFIFO(), 'the FIFO is left as it was');
    assert.is(lockHolder(file), null);
    assert.is(heldBy(file), null);
    rmSync(file);
    const folder = join(dir, 'folder.lock');
    mkdirSync(folder);
    assert.throws(() => PidLock.take(folder, words), refusedWith(`thing /x: its lock ${folder} is a directory: remove it`));
    // a link to a dead pid's lock: followed, it would be judged stale and taken over
    const elsewhere = join(dir, 'elsewhere.lock');
    const stale = `${deadPid()}\n${hostname()}\n2025-01-01T00:00:00Z\n`;
    writeFileSync(elsewhere, stale);
    const link = join(dir, 'link.lock');
    symlinkSync(elsewhere, link);
    assert.throws(() => PidLock.take(link, words), refusedWith(`thing /x: its lock ${link} is not a regular file: remove it`));
    assert.ok(lstatSync(link).isSymbolicLink(), 'the link is left as it was');
    assert.is(readFileSync(elsewhere, 'utf8'), stale, 'the file it names is left as it was');
    assert.is(lockHolder(link), null);
    assert.is(heldBy(link), null);
    assert.throws(() => PidLock.take(join(dir, 'no-folder', 'thing.lock'), words), /^thing \/x: cannot create its lock .*no-folder\/thing\.lock: ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('release removes only the lock this process wrote, once; a lock someone else took over stays', () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'thing.lock');
    const lock = PidLock.take(file, words);
    // its lock removed by hand, and another job's taken since
    const other = `${process.pid + 1}\nanother-host\n2025-01-01T00:00:00Z\n`;
    writeFileSync(file, other);
    lock.release();
    assert.is(readFileSync(file, 'utf8'), other, "another's lock stays");
    rmSync(file);
    const mine = PidLock.take(file, words);
    mine.release();
    mine.release(); // idempotent
    assert.equal(readdirSync(dir), []);
    // a lock gone already (removed by hand): release is quiet
    const gone = PidLock.take(file, words);
    rmSync(file);
    gone.release();
    assert.equal(readdirSync(dir), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
