// The per-device table file: build it from pooled store records, write it
// atomically, read it back through the schema. The rule itself is lib/promote.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v from 'valibot';
import { DEFAULT_PDL_ROWS, promote } from './promote.ts';
import { issuesLine, Table, TABLE_FORMAT, type Identity, type StoreRecord } from './schema.ts';

export const TABLE_FILE = 'decode_gemm.json';

/** A file- and URL-safe folder name for a device: "NVIDIA H200" -> "nvidia-h200". */
export function deviceSlug(device: string): string {
  const slug = device.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  return slug === '' ? 'unnamed-device' : slug;
}

/** The arch as one safe path segment, kept as spelled where it can be: "sm_90". */
export function archDir(arch: string): string {
  const dir = arch.replace(/[^A-Za-z0-9_.-]+/g, '-');
  return /^\.*$/.test(dir) ? 'unnamed-arch' : dir;
}

/** tables/<arch>/<device-slug>/decode_gemm.json under `tablesDir`. */
export function defaultTablePath(tablesDir: string, identity: Identity): string {
  return path.join(tablesDir, archDir(identity.arch), deviceSlug(identity.device), TABLE_FILE);
}

/** The table of the pooled records; `created` is the only input not from them. */
export function buildTable(
  records: readonly StoreRecord[],
  opts: { gate: number; pdlRows?: number; created: Date },
): { table: Table; warnings: string[] } | { error: string } {
  const pdlRows = opts.pdlRows ?? DEFAULT_PDL_ROWS;
  const promoted = promote(records, opts.gate, pdlRows);
  if ('error' in promoted) return promoted;
  const table: Table = {
    format: TABLE_FORMAT,
    identity: promoted.identity,
    created: opts.created.toISOString(),
    gate: { min_gain: opts.gate, pdl_rows: pdlRows },
    entries: promoted.entries,
  };
  // Built tables go through the same schema as read ones: a bug here fails loudly.
  const checked = v.safeParse(Table, table);
  if (!checked.success) return { error: `built table is invalid: ${issuesLine(checked.issues)}` };
  return { table, warnings: promoted.warnings };
}

/** The file text: two-space JSON and a final newline, key order as built. */
export function tableText(table: Table): string {
  return `${JSON.stringify(table, null, 2)}\n`;
}

/** Test seam: runs between the fsync of the temp file and the rename. */
export type WriteHooks = { beforeRename?: (tempPath: string) => void };

/**
 * Writes `text` to `target` atomically: a temp file in the same folder, fsync,
 * rename over the target, fsync of the folder. Readers see the old file or the
 * new one, never a part; on any failure the temp file is removed and the old
 * file is left as it was.
 */
export function writeFileAtomic(target: string, text: string, hooks: WriteHooks = {}): { path: string } | { error: string } {
  const dir = path.dirname(target);
  const temp = path.join(dir, `.${path.basename(target)}.${process.pid}.${Date.now()}.tmp`);
  let fd: number | null = null;
  try {
    fs.mkdirSync(dir, { recursive: true });
    fd = fs.openSync(temp, 'wx', 0o644);
    fs.writeFileSync(fd, text);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = null;
    hooks.beforeRename?.(temp);
    fs.renameSync(temp, target);
  } catch (err) {
    removeQuietly(fd, temp);
    return { error: `${target}: cannot write (${errorLine(err)})` };
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

/** Writes a table atomically; one that fails the schema is refused, not written. */
export function writeTable(target: string, table: Table, hooks?: WriteHooks): { path: string } | { error: string } {
  const checked = v.safeParse(Table, table);
  if (!checked.success) return { error: `${target}: refusing to write an invalid table (${issuesLine(checked.issues)})` };
  return writeFileAtomic(target, tableText(table), hooks);
}

/** Validates a parsed JSON value as a table; `label` prefixes the error line. */
export function parseTable(value: unknown, label: string): { table: Table } | { error: string } {
  const result = v.safeParse(Table, value);
  if (!result.success) return { error: `${label}: ${issuesLine(result.issues)}` };
  return { table: result.output };
}

/** Reads and validates a table file; never throws: `{ error: "path: message" }`. */
export function readTable(file: string): { table: Table } | { error: string } {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    return { error: `${file}: cannot read (${errorLine(err)})` };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `${file}: not JSON (${errorLine(err)})` };
  }
  return parseTable(value, file);
}

function errorLine(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const text = e && typeof e.message === 'string' ? e.message : String(err);
  return text.split('\n')[0]!;
}
