// The per-device table file: build it from pooled store records, write it
// atomically, read it back through the schema. The rule itself is lib/promote.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v from 'valibot';
import { MAX_TABLE_BYTES, parseJsonTable, readTableFile } from './guard.ts';
import { identityDifference, identityKey } from './identity.ts';
import { compareEntries, DEFAULT_PDL_ROWS, promote } from './promote.ts';
import { issuesLine, Table, TABLE_FORMAT, type Identity, type StepRecord, type StoreRecord, type TableEntry } from './schema.ts';
import { applyStepVerdicts } from './step-verdict.ts';
import { errorLine, writablePath, writeFileAtomic, type WriteHooks } from './write-file.ts';
import { entryKey } from './shape-key.ts';

export { writeFileAtomic, type WriteHooks };

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

/**
 * The table of the pooled records, with the step's vetoes (lib/step-verdict.ts)
 * where step records of the same build are given; `created` is the only input
 * not from them.
 */
export function buildTable(
  records: readonly StoreRecord[],
  opts: { gate: number; pdlRows?: number; created: Date; steps?: readonly StepRecord[] },
): { table: Table; warnings: string[]; vetoed: number; stepPicked: number; vetoedMoved: number } | { error: string } {
  const pdlRows = opts.pdlRows ?? DEFAULT_PDL_ROWS;
  const promoted = promote(records, opts.gate, pdlRows);
  if ('error' in promoted) return promoted;
  const id = identityKey(promoted.identity);
  const steps = (opts.steps ?? []).filter((r) => identityKey(r.identity) === id);
  const pdl = new Set(records.filter((rec) => rec.kind === 'candidate' && rec.pdl === true).map((rec) => rec.candidate));
  const stepped = applyStepVerdicts(promoted.entries, steps, { pdlRows, pdl });
  const otherBuilds = (opts.steps ?? []).length - steps.length;
  const table: Table = {
    format: TABLE_FORMAT,
    identity: promoted.identity,
    created: opts.created.toISOString(),
    gate: { min_gain: opts.gate, pdl_rows: pdlRows },
    entries: stepped.entries,
  };
  // Built tables go through the same schema as read ones: a bug here fails loudly.
  const checked = v.safeParse(Table, table);
  if (!checked.success) return { error: `built table is invalid: ${issuesLine(checked.issues)}` };
  const warnings = [...promoted.warnings, ...stepped.warnings];
  if (otherBuilds > 0) warnings.push(`${otherBuilds} step record(s) of another build left out`);
  return { table, warnings, vetoed: stepped.vetoed, stepPicked: stepped.stepPicked, vetoedMoved: stepped.vetoedMoved };
}


/** What merging a fresh table into the one on disk did. */
export interface Merge {
  table: Table;
  /** entries of the old table the fresh records do not cover: kept as they were */
  kept: number;
  /** entries of the old table the fresh records cover: replaced */
  replaced: number;
  /** entries the old table did not have */
  added: number;
}

/**
 * The fresh table merged into `old` (a table of the same identity): an old
 * entry stays unless the fresh one has its key (op, dtype, n, k, bucket).
 * Header (created, gate) from the fresh one; entries in table order.
 */
export function mergeTables(old: Table | null, fresh: Table): Merge {
  if (old === null) return { table: fresh, kept: 0, replaced: 0, added: fresh.entries.length };
  const freshKeys = new Set(fresh.entries.map((e) => entryKey(e, e.bucket)));
  const keptEntries = old.entries.filter((e) => !freshKeys.has(entryKey(e, e.bucket)));
  const replaced = old.entries.length - keptEntries.length;
  const entries = [...keptEntries, ...fresh.entries].sort(compareEntries);
  return { table: { ...fresh, entries }, kept: keptEntries.length, replaced, added: fresh.entries.length - replaced };
}

/**
 * The table already at `file`, to merge into: null when there is none or it
 * belongs to another identity (`other` then says how it differs: it cannot be
 * merged, its entries are refused by this build anyway); an error when it is
 * there but refused (unreadable, invalid): promote will not write over it
 * without --replace.
 */
export function existingTable(file: string, identity: Identity): { table: Table | null; other?: { differs: string; entries: number } } | { error: string } {
  // through a symlink to the file it names (what a write replaces); a dangling link: none yet
  const real = writablePath(file);
  if ('error' in real) return real;
  const read = readTableFile(real.path, MAX_TABLE_BYTES);
  if ('missing' in read) return { table: null };
  if (!('value' in read)) return { error: `${file}: the table there is refused (${read.reason})` };
  const parsed = parseJsonTable(read.value);
  if ('missing' in parsed) return { table: null };
  if (!('value' in parsed)) return { error: `${file}: the table there is refused (${parsed.reason})` };
  const old = parsed.value.table;
  if (identityKey(old.identity) !== identityKey(identity)) return { table: null, other: { differs: identityDifference(identity, old.identity), entries: old.entries.length } };
  return { table: old };
}

/** The file text: two-space JSON and a final newline, key order as built. */
export function tableText(table: Table): string {
  return `${JSON.stringify(table, null, 2)}\n`;
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

/**
 * Reads and validates a table file; never throws: `{ error: "path: message" }`.
 * Only a regular file of at most MAX_TABLE_BYTES is read, as the guard reads
 * one: a device or FIFO given as a table (/dev/zero) would never end.
 */
export function readTable(file: string, limit = MAX_TABLE_BYTES): { table: Table } | { error: string } {
  let text: string;
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) return { error: `${file}: not a regular file` };
    if (st.size > limit) return { error: `${file}: ${st.size} bytes, larger than any real table (limit ${limit})` };
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
