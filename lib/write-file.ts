// The one way kpick writes a result file (table, .route, report): atomically,
// and only over a regular file or at a new path. A temp file in the target's
// folder is written, fsynced and renamed over it, so readers see the old file
// or the new one, never a part. What is at the target decides first:
//   nothing or a regular file   written (a replaced file keeps its mode)
//   a symlink                   written through: the file it names is
//                               replaced, the link stays a link (a link to a
//                               non-regular file is refused like that file)
//   a directory, FIFO, socket,  refused with one line, left untouched
//   block or character device
// Stores are append-only and never replace a file (lib/store.ts opens new
// files with O_EXCL), so they need none of this.
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Test seam: runs between the fsync of the temp file and the rename. */
export type WriteHooks = { beforeRename?: (tempPath: string) => void };

/** What a stat says a path is, in the words a refusal uses; null for a regular file. */
export function notRegular(st: fs.Stats): string | null {
  if (st.isFile()) return null;
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isCharacterDevice()) return 'a character device';
  return 'not a regular file';
}

/**
 * The path a write to `target` really replaces: target itself, or the file a
 * symlink at target names (followed to the end); or why nothing may be written.
 */
export function writablePath(target: string): { path: string } | { error: string } {
  // target itself, or through a link to the end of its chain (a dangling link names a new file there)
  let real = target;
  for (let hops = 0; hops < 40; hops++) {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(real);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { path: real };
      return { error: `${target}: cannot write (${errorLine(err)})` };
    }
    if (!st.isSymbolicLink()) {
      const what = notRegular(st);
      if (what === null) return { path: real };
      const at = hops === 0 ? what : `a symlink to ${what} (${real})`;
      return { error: `${target} is ${at}: refusing to replace it, nothing written` };
    }
    real = path.resolve(path.dirname(real), fs.readlinkSync(real));
  }
  return { error: `${target}: too many levels of symlinks, nothing written` };
}

/**
 * Writes `text` to `target` atomically (see the top of this file). Never
 * throws; on any failure the temp file is removed and the old file is left
 * as it was.
 */
export function writeFileAtomic(target: string, text: string | Uint8Array, hooks: WriteHooks = {}): { path: string } | { error: string } {
  const where = writablePath(target);
  if ('error' in where) return where;
  const real = where.path;
  const dir = path.dirname(real);
  const temp = path.join(dir, `.${path.basename(real)}.${process.pid}.${Date.now()}.tmp`);
  let fd: number | null = null;
  try {
    fs.mkdirSync(dir, { recursive: true });
    fd = fs.openSync(temp, 'wx', 0o644);
    // a replaced file keeps its permissions (a table made read-only for others stays so)
    const before = fs.statSync(real, { throwIfNoEntry: false });
    if (before) fs.fchmodSync(fd, before.mode & 0o7777);
    fs.writeFileSync(fd, text);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = null;
    hooks.beforeRename?.(temp);
    // The target may have changed since it was looked at: check again, as
    // close to the rename as this can be.
    const again = writablePath(target);
    if ('error' in again) throw new Error(again.error);
    fs.renameSync(temp, real);
  } catch (err) {
    removeQuietly(fd, temp);
    const line = errorLine(err);
    return { error: line.startsWith(target) ? line : `${target}: cannot write (${line})` };
  }
  syncDir(dir);
  return { path: target };
}

// Cleanup after a failed write must not hide its cause (the folder may not even exist).
function removeQuietly(fd: number | null, temp: string): void {
  try {
    if (fd !== null) fs.closeSync(fd);
  } catch {
    // already failing; the write's own error is the one reported
  }
  try {
    fs.rmSync(temp, { force: true });
  } catch {
    // no temp file can exist where the folder is unusable
  }
}

// Makes the rename durable; some filesystems refuse fsync on a folder, and the
// file itself is already complete, so a refusal here is not a failed write.
function syncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // best effort
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

export function errorLine(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const text = e && typeof e.message === 'string' ? e.message : String(err);
  return text.split('\n')[0]!;
}
