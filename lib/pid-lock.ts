// A pid lock: one file, created O_EXCL, naming the pid, host and time of the
// process that holds it ("<pid>\n<host>\n<ISO time>\n"). Whoever finds it
// there decides by what it names:
//   a live pid on this host          held: refused, naming the pid
//   a pid on another host            held: this host cannot tell if it lives
//   a dead pid on this host          stale (its process was killed): taken over
//   no pid (empty, unreadable)       being taken for LOCK_FRESH_MS (its taker
//                                    is between creating and writing it), then
//                                    stale
//   no regular file (a FIFO, a       refused, never read (a FIFO would block)
//   folder, a link)
// A stale lock is moved aside by one atomic rename, so of two processes
// taking it over only one does. release removes the lock only while it is
// still the one this process wrote. The callers say what is locked and by
// whom (LockWords): lib/store.ts (one sweep per store and writer) and
// lib/promote-job.ts (one promote per table).
import { closeSync, constants, fstatSync, fsyncSync, lstatSync, openSync, readFileSync, renameSync, unlinkSync, writeSync, type Stats } from 'node:fs';
import { hostname } from 'node:os';
import { notRegular } from './write-file.ts';

/** How long a lock that names no pid yet counts as being taken, not stale. */
export const LOCK_FRESH_MS = 10_000;

/**
 * The words of a lock's refusals, e.g. "store s is in use by another sweep
 * (pid 12, s/sweep.lock); wait for it, or remove the lock if no sweep runs".
 */
export interface LockWords {
  /** what the lock guards, as a refusal starts: "store stores/x", "table t.json" */
  subject: string;
  /** who holds it: "another sweep" */
  holder: string;
  /** when removing the lock by hand is safe: "no sweep runs" */
  idle: string;
}

export interface LockHolder {
  pid: number;
  host: string;
}

/** Is pid a live process here? (EPERM: it is, but another user's.) */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** What is at a lock path: nothing, no regular file (never read), or a file, its text ('' when unreadable) and what tells it from a newer one. */
type Seen = { missing: true } | { what: string } | { text: string; ino: number; mtimeMs: number };

function look(file: string): Seen {
  let st: Stats;
  try {
    st = lstatSync(file);
  } catch (err) {
    // unreadable: no pid, judged by its age (unknown: old)
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? { missing: true } : { text: '', ino: -1, mtimeMs: 0 };
  }
  const what = notRegular(st);
  if (what !== null) return { what };
  let fd: number | null = null;
  try {
    // never follow a link or wait on a FIFO put there since the lstat: read what the open finds, only if it is a regular file
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const now = fstatSync(fd);
    const changed = notRegular(now);
    if (changed !== null) return { what: changed };
    return { text: readFileSync(fd, 'utf8'), ino: now.ino, mtimeMs: now.mtimeMs };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { missing: true };
    if (code === 'ELOOP') return { what: 'not a regular file' };
    return { text: '', ino: st.ino, mtimeMs: st.mtimeMs };
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

function holderOf(text: string): LockHolder | null {
  const [pid, host] = text.split('\n');
  return /^\d+$/.test(pid ?? '') ? { pid: Number(pid), host: host ?? '' } : null;
}

/** Who a lock file names, whether or not it lives; null when nothing is there, it names no pid or is no regular file (not read). */
export function lockHolder(file: string): LockHolder | null {
  const seen = look(file);
  return 'text' in seen ? holderOf(seen.text) : null;
}

/** Must this holder be waited for: a live pid here, or any pid of another host? */
function respected(holder: LockHolder): boolean {
  return holder.host !== hostname() || alive(holder.pid);
}

/** The holder of the lock at file when it holds it (a live pid here, or another host's); null when there is none or it is stale. */
export function heldBy(file: string): LockHolder | null {
  const holder = lockHolder(file);
  return holder && respected(holder) ? holder : null;
}

/** "pid 12", or "pid 12 on other-host" for another host's. */
export function holderText(holder: LockHolder): string {
  return holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on ${holder.host}`;
}

/** One taken lock file; PidLock.take takes it, release gives it back. */
export class PidLock {
  private held = true;
  private constructor(
    readonly file: string,
    /** what this process wrote to it: only that is removed */
    private readonly stamp: string,
  ) {}

  /** Creates file naming this process, taking over a stale lock; throws one line (words) naming the holder when it is held. Its folder must exist. */
  static take(file: string, words: LockWords): PidLock {
    const waitFor = `wait for it, or remove the lock if ${words.idle}`;
    for (let attempt = 0; attempt < 3; attempt++) {
      const stamp = `${process.pid}\n${hostname()}\n${new Date().toISOString()}\n`;
      let fd: number | null = null;
      try {
        fd = openSync(file, 'wx', 0o644);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`${words.subject}: cannot create its lock ${file}: ${(err as Error).message}`);
      }
      if (fd !== null) {
        try {
          const wrote = writeSync(fd, stamp);
          if (wrote !== Buffer.byteLength(stamp)) throw new Error(`only ${wrote} of ${Buffer.byteLength(stamp)} bytes written`);
          fsyncSync(fd);
        } catch (err) {
          // created but not written (a full disk): removed, never left naming no one
          closeSync(fd);
          unlinkSync(file);
          throw new Error(`${words.subject}: cannot create its lock ${file}: ${(err as Error).message}`);
        }
        closeSync(fd);
        return new PidLock(file, stamp);
      }
      const seen = look(file);
      if ('missing' in seen) continue; // released since: try again
      if ('what' in seen) throw new Error(`${words.subject}: its lock ${file} is ${seen.what}: remove it`);
      const holder = holderOf(seen.text);
      if (holder && respected(holder)) throw new Error(`${words.subject} is in use by ${words.holder} (${holderText(holder)}, ${file}); ${waitFor}`);
      // no pid yet: a process that has just created it is writing it; stale only once old
      if (!holder && Date.now() - seen.mtimeMs < LOCK_FRESH_MS) throw new Error(`${words.subject} is in use by ${words.holder} (its lock ${file} is being taken); ${waitFor}`);
      // Stale (its process died) or unreadable: move it aside atomically, so of
      // two processes taking it over only one does, then try again.
      const aside = `${file}.stale.${process.pid}`;
      try {
        renameSync(file, aside);
      } catch {
        continue; // another process moved it first
      }
      const moved = look(aside);
      if (!('text' in moved) || moved.ino !== seen.ino || moved.text !== seen.text) {
        // not the lock judged stale: a fresh one came between; put it back, look again
        try {
          renameSync(aside, file);
        } catch {
          // gone from aside already: nothing to put back
        }
        continue;
      }
      unlinkSync(aside);
    }
    throw new Error(`${words.subject}: could not take its lock ${file}`);
  }

  /** Removes the lock while it is still the one this process wrote (idempotent; quiet when it is gone: a lock left behind is stale and taken over). */
  release(): void {
    if (!this.held) return;
    this.held = false;
    const seen = look(this.file);
    if (!('text' in seen) || seen.text !== this.stamp) return;
    try {
      unlinkSync(this.file);
    } catch {
      // removed since; or not removable, when the next taker finds a dead pid and takes it over
    }
  }
}
