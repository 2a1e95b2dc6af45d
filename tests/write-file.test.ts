// lib/write-file.ts: every result file is written atomically, and only over a
// regular file or at a new path; what is not a regular file is refused and
// left as it was; a symlink is written through and stays a link.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { writablePath, writeFileAtomic } from '../lib/write-file.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-write-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('a new path and a regular file are written whole, no temp file left', () => {
  const file = path.join(dir, 'sub', 'new.json');
  assert.equal(writeFileAtomic(file, 'one\n'), { path: file });
  assert.is(fs.readFileSync(file, 'utf8'), 'one\n');
  assert.equal(writeFileAtomic(file, 'two\n'), { path: file });
  assert.is(fs.readFileSync(file, 'utf8'), 'two\n');
  assert.equal(fs.readdirSync(path.dirname(file)), ['new.json']);
});

test('a replaced file keeps its permissions; a new one gets the default', () => {
  const kept = path.join(dir, 'kept.json');
  fs.writeFileSync(kept, 'old');
  fs.chmodSync(kept, 0o600);
  assert.equal(writeFileAtomic(kept, 'new'), { path: kept });
  assert.is(fs.readFileSync(kept, 'utf8'), 'new');
  assert.is(fs.statSync(kept).mode & 0o777, 0o600);
  const fresh = path.join(dir, 'fresh.json');
  assert.equal(writeFileAtomic(fresh, 'x'), { path: fresh });
  const plain = path.join(dir, 'plain.json'); // what a new 0644 file gets under this umask
  fs.writeFileSync(plain, 'x', { mode: 0o644 });
  assert.is(fs.statSync(fresh).mode & 0o777, fs.statSync(plain).mode & 0o777);
});

test('a failure before the rename leaves the old file and no temp file', () => {
  const file = path.join(dir, 'kept.json');
  fs.writeFileSync(file, 'old');
  const r = writeFileAtomic(file, 'new', { beforeRename: () => { throw new Error('disk full'); } });
  assert.ok('error' in r && r.error === `${file}: cannot write (disk full)`, JSON.stringify(r));
  assert.is(fs.readFileSync(file, 'utf8'), 'old');
  assert.equal(fs.readdirSync(dir).filter((n) => n.includes('kept')), ['kept.json']);
});

test('a directory, a FIFO and a socket at the target are refused with one line and left untouched', () => {
  const sub = path.join(dir, 'a-dir');
  fs.mkdirSync(sub);
  fs.writeFileSync(path.join(sub, 'inside'), 'x');
  assert.equal(writeFileAtomic(sub, 'y'), { error: `${sub} is a directory: refusing to replace it, nothing written` });
  assert.equal(fs.readdirSync(sub), ['inside']);

  const fifo = path.join(dir, 'a-fifo');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0);
  assert.equal(writeFileAtomic(fifo, 'y'), { error: `${fifo} is a FIFO: refusing to replace it, nothing written` });
  assert.ok(fs.lstatSync(fifo).isFIFO());

  const sock = path.join(dir, 'a-socket');
  const server = net.createServer();
  server.listen(sock);
  try {
    spawnSync('sleep', ['0.2']);
    // a unix socket is bound within listen(): there is one to refuse
    assert.ok(fs.lstatSync(sock).isSocket(), 'the socket is bound');
    assert.equal(writeFileAtomic(sock, 'y'), { error: `${sock} is a socket: refusing to replace it, nothing written` });
    assert.ok(fs.lstatSync(sock).isSocket());
  } finally {
    server.close();
  }
});

test('a device node is refused and stays a device node (the `--out /dev/full` case, on a node made here)', () => {
  const node = path.join(dir, 'full');
  if (spawnSync('mknod', [node, 'c', '1', '7']).status !== 0) {
    // not root: the character device of the system, read-only as far as this goes
    assert.equal(writablePath('/dev/null'), { error: '/dev/null is a character device: refusing to replace it, nothing written' });
    return;
  }
  assert.equal(writeFileAtomic(node, '{}'), { error: `${node} is a character device: refusing to replace it, nothing written` });
  assert.ok(fs.lstatSync(node).isCharacterDevice());
});

test('a symlink is written through: the file it names changes, the link stays a link', () => {
  const target = path.join(dir, 'real.json');
  const link = path.join(dir, 'link.json');
  fs.writeFileSync(target, 'old');
  fs.symlinkSync('real.json', link);
  assert.equal(writeFileAtomic(link, 'new'), { path: link });
  assert.ok(fs.lstatSync(link).isSymbolicLink());
  assert.is(fs.readlinkSync(link), 'real.json');
  assert.is(fs.readFileSync(target, 'utf8'), 'new');

  // a dangling link names a new file at its end; a chain is followed
  const chain = path.join(dir, 'chain.json');
  fs.symlinkSync('link.json', chain);
  assert.equal(writeFileAtomic(chain, 'again'), { path: chain });
  assert.is(fs.readFileSync(target, 'utf8'), 'again');
  const dangling = path.join(dir, 'dangling.json');
  fs.symlinkSync(path.join(dir, 'later', 'made.json'), dangling);
  assert.equal(writeFileAtomic(dangling, 'made'), { path: dangling });
  assert.ok(fs.lstatSync(dangling).isSymbolicLink());
  assert.is(fs.readFileSync(path.join(dir, 'later', 'made.json'), 'utf8'), 'made');
});

test('a symlink to a directory or a FIFO is refused like what it names', () => {
  const toFifo = path.join(dir, 'to-fifo');
  const fifo = path.join(dir, 'fifo-2');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0);
  fs.symlinkSync(fifo, toFifo);
  assert.equal(writeFileAtomic(toFifo, 'y'), { error: `${toFifo} is a symlink to a FIFO (${fifo}): refusing to replace it, nothing written` });
  assert.ok(fs.lstatSync(toFifo).isSymbolicLink());
  const toDir = path.join(dir, 'to-dir');
  fs.symlinkSync(dir, toDir);
  assert.match(String((writeFileAtomic(toDir, 'y') as { error: string }).error), /is a symlink to a directory/);
  const loop = path.join(dir, 'loop');
  fs.symlinkSync('loop', loop);
  assert.ok('error' in writeFileAtomic(loop, 'y'));
});

test.run();
