// The store: a folder of JSON-lines files, one per sweep process, one
// StoreRecord per line. Files are only ever created and appended to; a
// reader pools every *.jsonl and skips (with a warning) a line it cannot
// trust, so a crash mid-write costs at most the record in flight, and a
// *.jsonl that is no regular file (never read: a FIFO would block).
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import * as v from 'valibot';
import { UsageError } from './cli.ts';
import { identityKey } from './identity.ts';
import { heldBy, holderText, PidLock, type LockWords } from './pid-lock.ts';
import { StepRecord, StoreRecord, issuesLine, type Identity } from './schema.ts';
import { errorLine, notRegular } from './write-file.ts';
import { writersOverlap } from './shard.ts';
import { shapeId } from './shape-key.ts';

export interface StoreWarning {
  file: string;
  /** 1-based; 0: the whole file (not read) */
  line: number;
  message: string;
}

export interface StoreContents {
  records: StoreRecord[];
  /** one per skipped line: "file:line: why" */
  warnings: StoreWarning[];
}

export function formatWarning(w: StoreWarning): string {
  return w.line === 0 ? `${w.file}: ${w.message}` : `${w.file}:${w.line}: ${w.message}`;
}

type KeyFields = Pick<StoreRecord, 'op' | 'dtype' | 'n' | 'k' | 'experts' | 'topk' | 'rows' | 'candidate' | 'routing'> & { identity: Identity };

/** The one way a record is keyed: identity + op + dtype + shape (E and top-k on moe) + rows + candidate, + the routing where skewed. */
export function recordKey(r: KeyFields): string {
  const key = [identityKey(r.identity), r.dtype, shapeId(r), r.rows, r.candidate];
  return JSON.stringify(r.routing === undefined ? key : [...key, r.routing]);
}

/**
 * A record written before records carried the pdl flag gets it from its name:
 * the space.def of those builds named every PDL row, and only those, '*.pdl'
 * (their space token differs from any later build's, so they never pool with
 * records that carry the flag).
 */
function withPdlFlag(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || 'pdl' in value) return value;
  const name = (value as { candidate?: unknown }).candidate;
  return typeof name === 'string' ? { ...value, pdl: name.endsWith('.pdl') } : value;
}

/** Every line of every *.jsonl of dir through schema (none when dir does not exist); a line that does not parse, or a *.jsonl that is no regular file, is a warning. */
function readLines<S extends v.GenericSchema>(dir: string, schema: S, upgrade: (value: unknown) => unknown = (x) => x): { records: v.InferOutput<S>[]; warnings: StoreWarning[] } {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.jsonl')).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], warnings: [] };
    throw new UsageError(`cannot read store ${dir}: ${(err as Error).message}`);
  }
  const records: v.InferOutput<S>[] = [];
  const warnings: StoreWarning[] = [];
  for (const name of names) {
    const file = join(dir, name);
    // a writer only ever creates regular files: a FIFO or a device named *.jsonl (or a link to one) would block or never end
    let content: string;
    try {
      const what = notRegular(statSync(file));
      if (what !== null) {
        warnings.push({ file, line: 0, message: `${what}, not a store file` });
        continue;
      }
      content = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read store file ${file}: ${errorLine(err)}`);
    }
    const lines = content.split('\n');
    lines.forEach((text, i) => {
      if (text.trim() === '') return;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (err) {
        warnings.push({ file, line: i + 1, message: `not JSON (${(err as Error).message})` });
        return;
      }
      const parsed = v.safeParse(schema, upgrade(value));
      if (parsed.success) records.push(parsed.output);
      else warnings.push({ file, line: i + 1, message: issuesLine(parsed.issues) });
    });
  }
  return { records, warnings };
}

/** Reads every *.jsonl of dir (none when dir does not exist). */
export function readStore(dir: string): StoreContents {
  return readLines(dir, StoreRecord, withPdlFlag);
}

/** Where a store keeps its step records (scripts/step-verify.ts): a folder of their own, which readStore does not read. */
export const STEPS_DIR = 'steps';

/** The step records of a store folder (none when it has no steps/ folder). */
export function readSteps(storeDir: string): { records: StepRecord[]; warnings: StoreWarning[] } {
  return readLines(join(storeDir, STEPS_DIR), StepRecord);
}

/**
 * Every record of every store folder, pooled; skipped lines go to onWarning.
 * A record read twice (a store named twice, or a copy of a store file) counts
 * once: its samples pooled twice would pass the noise check on no new evidence.
 * A missing, non-folder or empty store is a usage error (exit 2).
 */
export function readStoreFolders(dirs: readonly string[], onWarning: (line: string) => void): StoreRecord[] {
  const records: StoreRecord[] = [];
  const seen = new Set<string>();
  for (const dir of dirs) {
    let isDir = false;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {
      throw new UsageError(`store ${dir} does not exist`);
    }
    if (!isDir) throw new UsageError(`store ${dir} is not a folder`);
    const contents = readStore(dir);
    for (const w of contents.warnings) onWarning(`skipped ${formatWarning(w)}`);
    if (contents.records.length === 0) throw new UsageError(`store ${dir} has no records`);
    let twice = 0;
    for (const r of contents.records) {
      const text = JSON.stringify(r);
      if (seen.has(text)) twice++;
      else {
        seen.add(text);
        records.push(r);
      }
    }
    if (twice > 0) onWarning(`skipped ${twice} records of ${dir} read already (a store named twice, or a copy of a store file): each counts once`);
  }
  return records;
}

/** Keys of the measured records (candidate and floor; parity checks alone do not count) of one identity, for resuming. */
export function measuredKeys(records: readonly StoreRecord[], identity: Identity): Set<string> {
  const id = identityKey(identity);
  return new Set(records.filter((r) => r.kind !== 'parity' && identityKey(r.identity) === id).map(recordKey));
}

function timestampForName(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

/**
 * The name of a store writer: "sweep", or "sweep-shard1of2" for one shard of
 * a sharded sweep (tag from lib/shard.ts). Its files carry it, and a store
 * lock is taken per writer name (shards of one sweep share a store folder).
 */
export function writerKey(prefix: string, tag?: string): string {
  return tag === undefined ? prefix : `${prefix}-${tag}`;
}

/** Appends records to a new file of its own; each append is on disk before it returns. */
export class StoreWriter {
  readonly file: string;
  /**
   * Who writes: "sweep", or "sweep-shard1of2" for one shard of a sharded
   * sweep. Writers of different keys may share a store folder (the shards of
   * one sweep on a shared volume); a store lock must be taken per key.
   */
  readonly key: string;
  private fd: number | null;
  private count = 0;

  private constructor(file: string, key: string, fd: number) {
    this.file = file;
    this.key = key;
    this.fd = fd;
  }

  /**
   * Creates dir if needed and a new file in it, so an unwritable store fails
   * here, before anything is measured. prefix names the writer: "sweep"; tag,
   * when given, what part it writes: "shard1of2" (the file is then
   * sweep-<time>-<pid>-shard1of2.jsonl).
   */
  static open(dir: string, prefix: string, tag?: string): StoreWriter {
    const key = writerKey(prefix, tag);
    try {
      mkdirSync(dir, { recursive: true });
      if (!statSync(dir).isDirectory()) throw new Error('not a directory');
    } catch (err) {
      throw new Error(`store ${dir} is not a writable folder: ${(err as Error).message}`);
    }
    const base = `${prefix}-${timestampForName(new Date())}-${process.pid}`;
    const suffix = tag === undefined ? '' : `-${tag}`;
    for (let attempt = 0; attempt < 100; attempt++) {
      const file = join(dir, attempt === 0 ? `${base}${suffix}.jsonl` : `${base}-${attempt}${suffix}.jsonl`);
      try {
        // 'wx': never open, let alone truncate, a file that exists
        return new StoreWriter(file, key, openSync(file, 'wx'));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue;
        throw new Error(`store ${dir} is not writable: ${(err as Error).message}`);
      }
    }
    throw new Error(`store ${dir}: no free file name for ${base}`);
  }

  get written(): number {
    return this.count;
  }

  /** Validates the record, appends one line and fsyncs it; returns the record as stored. */
  append(record: StoreRecord): StoreRecord {
    return this.appendChecked(StoreRecord, record);
  }

  /** The same for a step record (a writer opened on a store's steps/ folder). */
  appendStep(record: StepRecord): StepRecord {
    return this.appendChecked(StepRecord, record);
  }

  private appendChecked<S extends v.GenericSchema>(schema: S, record: v.InferInput<S>): v.InferOutput<S> {
    if (this.fd === null) throw new Error(`store file ${this.file} is closed`);
    const parsed = v.safeParse(schema, record);
    if (!parsed.success) throw new Error(`refusing to store an invalid record: ${issuesLine(parsed.issues)}`);
    const line = Buffer.from(`${JSON.stringify(parsed.output)}\n`);
    const wrote = writeSync(this.fd, line);
    // a short write (a file size limit) leaves a torn line, which the next reader skips: never count it stored
    if (wrote !== line.length) throw new Error(`store file ${this.file}: only ${wrote} of ${line.length} bytes of a record written (a full disk or a file size limit)`);
    fsyncSync(this.fd);
    this.count++;
    return parsed.output;
  }

  /** Closes the file; a file this writer created and never wrote is removed. */
  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
    if (this.count === 0) unlinkSync(this.file);
  }
}

/** A store's lock files: <writer key>.lock, naming the pid of the sweep that writes as that key (lib/pid-lock.ts). */
export const LOCK_SUFFIX = '.lock';
/** The lock file of an unsharded sweep. */
export const LOCK_FILE = `sweep${LOCK_SUFFIX}`;

/** The words of a store lock's refusals. */
function storeWords(dir: string): LockWords {
  return { subject: `store ${dir}`, holder: 'another sweep', idle: 'no sweep runs' };
}

/**
 * One sweep at a time per store and writer: two sweeps of the same units would
 * slow each other's timings and measure everything twice. acquire(dir, key)
 * creates dir/<key>.lock (a pid lock, lib/pid-lock.ts) naming this pid and
 * host, or throws one line naming the holder. A lock whose pid is dead on this
 * host (a killed sweep) is stale: it is taken over. The shards of one sweep
 * (keys "sweep-shard0of2", "sweep-shard1of2") share a store folder; a writer
 * whose units could overlap a live one's (lib/shard.ts writersOverlap: the
 * same shard, an unsharded sweep, a shard of another count) is refused like a
 * second holder.
 */
export class StoreLock {
  readonly file: string;
  private constructor(private readonly lock: PidLock) {
    this.file = lock.file;
  }

  static acquire(dir: string, key = 'sweep'): StoreLock {
    const lock = StoreLock.take(dir, key);
    try {
      for (const name of readdirSync(dir)) {
        if (!name.endsWith(LOCK_SUFFIX) || name === `${key}${LOCK_SUFFIX}`) continue;
        const other = name.slice(0, -LOCK_SUFFIX.length);
        if (!writersOverlap(key, other)) continue;
        // a lock that is no regular file is not read (heldBy: null)
        const holder = heldBy(join(dir, name));
        if (holder) {
          throw new Error(`store ${dir} is in use by another sweep whose units overlap this one's (${other}, ${holderText(holder)}, ${join(dir, name)}); wait for it, or remove the lock if no sweep runs`);
        }
      }
    } catch (err) {
      lock.release();
      throw err;
    }
    return lock;
  }

  /** dir/<key>.lock for this process, taking over a stale one. */
  private static take(dir: string, key: string): StoreLock {
    try {
      mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw new Error(`store ${dir} is not a writable folder: ${(err as Error).message}`);
    }
    return new StoreLock(PidLock.take(join(dir, `${key}${LOCK_SUFFIX}`), storeWords(dir)));
  }

  /** Removes the lock (idempotent); the store admits the next sweep. */
  release(): void {
    this.lock.release();
  }
}
