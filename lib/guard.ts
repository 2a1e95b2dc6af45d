// The guard: is this table still a description of the build it would run on?
// One verdict, one line: what was loaded, or why the table was refused (the
// defaults then stay). hip-lib/src/common/route.c applies the same checks, in
// the same order, with the same words, to the compact form; the tests hold the
// two to the same line.
//
// Order (DESIGN.md), first failure wins:
//   missing (not an error: the defaults) -> unreadable -> invalid -> older or
//   newer format -> other backend/arch/device -> other compiler -> other space
//   -> a dispatch knob in the environment.
// The format is read before the schema is applied, so an old table is called
// old rather than invalid (an old layout fails the current schema).
//
// A table that passes is then judged entry by entry. An entry whose choice
// cannot run here is dropped alone and counted, never the whole table: moving a
// shape is a one-word hand edit of `choice` (DESIGN.md), and a slip in one
// entry must not throw away every other measured pick; the stack-bound rule
// (drop alone when the BLAS differs) is the same kind of per-entry fact.
// Whole-table defects (duplicate keys or entries, bad types, non-finite times)
// refuse it: such a file was not written by promote.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v from 'valibot';
import { bucketLow, issuesLine, Table, TABLE_FORMAT, takesDtype, type Bucket, type Dtype, type Identity, type Numeric, type Op } from './schema.ts';
import { moeFields, shapeText } from './shape-key.ts';

/** Larger than any real JSON table (a big one is a few MiB). */
export const MAX_TABLE_BYTES = 32 << 20;

/** Environment variables that reroute dispatch; any one set (non-empty) refuses the table. */
export const DISPATCH_KNOBS = [
  { name: 'KPICK_FORCE', does: 'every call of its op runs the named candidate' },
  { name: 'KPICK_NO_BLASLT', does: 'the class default is not the vendor BLAS where another candidate takes all its rows' },
] as const;
/** Characters of a knob's value quoted in a verdict. */
const KNOB_SHOWN = 64;

/** A candidate of the build, as kpick_candidate_describe reports it (lib/ffi.ts's Candidate fits). */
export interface BuildCandidate {
  name: string;
  op: Op;
  family: string;
  isDefault: boolean;
  stackBound: boolean;
  rowsMin: number;
  rowsMax: number;
  available: boolean;
  /** numeric class; absent: w16a16 (takes bf16 and fp16) */
  numeric?: Numeric;
}

/** The library actually loaded: its identity and its space, in id order. */
export interface Build {
  identity: Identity;
  candidates: readonly BuildCandidate[];
}

export type Env = Readonly<Record<string, string | undefined>>;

/** One entry as the guard needs it, from the JSON table or the compact form. */
export interface EntryView extends KeptEntry {
  /** "entries[3]" or "line 14": where a message points */
  where: string;
  /** candidates[choice]'s status and parity; 'unmeasured'/'none' when it has none */
  status: 'ok' | 'unsupported' | 'failed' | 'unmeasured';
  parity: 'pass' | 'fail' | 'skipped' | 'none';
  /** candidates[choice].stack_bound */
  stack: boolean;
}

export interface TableView {
  identity: Identity;
  entries: EntryView[];
}

/** Why one entry was dropped, in the order checked and listed. */
export const DROP_REASONS = [
  "choice not in this build's space",
  'choice not available on this target',
  'choice is for another op',
  'choice does not take this dtype',
  'choice not measured',
  'choice failed parity',
  'choice did not run',
  'choice not parity-checked',
  'stack-bound and the BLAS differs',
  'choice does not take these rows',
] as const;
export type DropReason = (typeof DROP_REASONS)[number];

export type RefusalKind =
  | 'unreadable'
  | 'invalid'
  | 'older-format'
  | 'newer-format'
  | 'machine'
  | 'compiler'
  | 'space'
  | 'knob'
  /** a compact route that is not the compiled form of the JSON beside it */
  | 'stale';

const REMEDY: Record<RefusalKind, string> = {
  unreadable: 'run promote again',
  invalid: 'run promote again',
  'older-format': 'run promote again',
  'newer-format': 'upgrade kpick',
  machine: 'run the tuner on this machine',
  compiler: 'run the tuner again',
  space: 'the kernels changed: run the tuner again',
  knob: 'it reroutes dispatch: unset it to use the table',
  stale: 'run promote again',
};

export interface KeptEntry {
  op: Op;
  dtype: Dtype;
  n: number;
  k: number;
  /** op moe only: experts and top-k */
  experts?: number;
  topk?: number;
  bucket: Bucket;
  choice: string;
}

export interface DroppedEntry extends KeptEntry {
  where: string;
  why: DropReason;
}

export type Verdict =
  | { kind: 'used'; used: true; line: string; kept: KeptEntry[]; dropped: DroppedEntry[] }
  | { kind: 'missing'; used: false; line: string }
  | { kind: RefusalKind; used: false; line: string; reason: string; remedy: string };

/** What reading a file or parsing a form gives: a value, "no file", or a refusal (with its own remedy, if any). */
export type Refusal = { kind: RefusalKind; reason: string; remedy?: string };
export type Reading<T> = { value: T } | { missing: true } | Refusal;

// ---- the file -------------------------------------------------------------

/**
 * The bytes of a table file, after the checks every form shares: missing,
 * a symlink to another folder, not a regular file, larger than `limit`.
 * route.c's read_file is the same, in the same order.
 */
export function readTableFile(file: string, limit: number): Reading<Buffer> {
  const unreadable = (why: string) => ({ kind: 'unreadable' as const, reason: `unreadable: ${why}` });
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code === 'ENOENT' ? { missing: true } : unreadable(errorText(e));
  }
  if (st.isSymbolicLink()) {
    // A table belongs to its folder: a link to another folder's table would
    // apply one device's tuning under another device's name.
    let target: string;
    try {
      target = fs.realpathSync(file);
    } catch {
      return unreadable('a symlink to nothing');
    }
    let dir: string | null;
    try {
      dir = fs.realpathSync(path.dirname(file));
    } catch {
      dir = null;
    }
    if (dir !== path.dirname(target)) return unreadable(`a symlink to another folder (${target})`);
  }
  try {
    st = fs.statSync(file);
  } catch (err) {
    return unreadable(errorText(err as NodeJS.ErrnoException));
  }
  if (!st.isFile()) return unreadable('not a regular file');
  if (st.size > limit) return unreadable(`${st.size} bytes, larger than any real table (limit ${limit})`);
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (err) {
    return unreadable(errorText(err as NodeJS.ErrnoException));
  }
  // It may have grown since the stat.
  if (bytes.length > limit) return unreadable(`more than ${limit} bytes, larger than any real table`);
  return { value: bytes };
}

function errorText(e: NodeJS.ErrnoException): string {
  return (e.message ?? String(e)).split('\n')[0]!;
}

// ---- the JSON table ---------------------------------------------------------

/**
 * The first key that repeats inside one object of (already parsed, so valid)
 * JSON text, with its line. JSON.parse keeps the last of two equal keys
 * without a word; a table that says two things about one field is refused.
 */
export function duplicateKey(text: string): { key: string; line: number } | null {
  const objects: (Set<string> | null)[] = []; // null: an array level
  let line = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a) line++;
    else if (c === 0x7b) objects.push(new Set()); // {
    else if (c === 0x5b) objects.push(null); // [
    else if (c === 0x7d || c === 0x5d) objects.pop(); // } ]
    else if (c === 0x22) {
      let j = i + 1;
      while (text.charCodeAt(j) !== 0x22) j += text.charCodeAt(j) === 0x5c ? 2 : 1;
      let after = j + 1;
      while (after < text.length && /\s/.test(text[after]!)) after++;
      const keys = objects[objects.length - 1];
      if (text[after] === ':' && keys) {
        const key = JSON.parse(text.slice(i, j + 1)) as string; // decodes escapes: "\u0061" is "a"
        if (keys.has(key)) return { key, line };
        keys.add(key);
      }
      i = j;
    }
  }
  return null;
}

/** The first entry whose (op, dtype, n, k, E and top-k on moe, bucket) an earlier one already has. */
export function duplicateEntry(entries: readonly EntryView[]): string | null {
  const first = new Map<string, EntryView>();
  for (const e of entries) {
    const key = `${e.op} ${e.dtype} ${shapeText(e)}, bucket ${e.bucket}`;
    const seen = first.get(key);
    if (seen) return `${e.where} repeats ${seen.where} (${key})`;
    first.set(key, e);
  }
  return null;
}

/** A JSON table's text -> the table and its view, or why not. */
export function parseJsonTable(bytes: Uint8Array): Reading<{ table: Table; view: TableView }> {
  const invalid = (why: string) => ({ kind: 'invalid' as const, reason: `invalid: ${why}` });
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return invalid('not UTF-8 text');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return invalid(`not JSON (${errorText(err as NodeJS.ErrnoException)})`);
  }
  const dup = duplicateKey(text);
  if (dup) return invalid(`duplicate key ${JSON.stringify(dup.key)} at line ${dup.line}`);
  const format = value !== null && typeof value === 'object' ? (value as { format?: unknown }).format : undefined;
  if (typeof format === 'number' && Number.isInteger(format) && format !== TABLE_FORMAT) {
    return formatRefusal('format', format, TABLE_FORMAT);
  }
  const parsed = v.safeParse(Table, value);
  if (!parsed.success) return invalid(issuesLine(parsed.issues));
  const table = parsed.output;
  const entries = table.entries.map((e, i): EntryView => {
    const c = Object.hasOwn(e.candidates, e.choice) ? e.candidates[e.choice] : undefined;
    return {
      where: `entries[${i}]`,
      op: e.op,
      dtype: e.dtype,
      n: e.n,
      k: e.k,
      ...moeFields(e),
      bucket: e.bucket,
      choice: e.choice,
      status: c?.status ?? 'unmeasured',
      parity: c?.parity ?? 'none',
      stack: c?.stack_bound ?? false,
    };
  });
  const again = duplicateEntry(entries);
  if (again) return invalid(again);
  return { value: { table, view: { identity: table.identity, entries } } };
}

/** "older format (format 0, this kpick reads 1)", as route.c words it. */
export function formatRefusal(what: string, got: number, want: number): { kind: RefusalKind; reason: string } {
  const older = got < want;
  return {
    kind: older ? 'older-format' : 'newer-format',
    reason: `${older ? 'older' : 'newer'} format (${what} ${got}, this kpick reads ${want})`,
  };
}

// ---- the verdict ------------------------------------------------------------

function knobValue(env: Env, name: string): string | null {
  const value = env[name];
  return value !== undefined && value !== '' ? value : null;
}

/** The candidate KPICK_FORCE names, when it is set and runs here. */
export function forcedCandidate(build: Build, env: Env): BuildCandidate | null {
  const name = knobValue(env, 'KPICK_FORCE');
  return (name !== null && build.candidates.find((c) => c.name === name && c.available)) || null;
}

/** Appends what route.c appends to every verdict: a KPICK_FORCE that does nothing here. */
function withKnobNote(verdict: Verdict, build: Build, env: Env): Verdict {
  const force = knobValue(env, 'KPICK_FORCE');
  if (force === null || forcedCandidate(build, env)) return verdict;
  return { ...verdict, line: `${verdict.line}; note: KPICK_FORCE=${force.slice(0, KNOB_SHOWN)} names no candidate here` };
}

export function missingVerdict(file: string | null, build: Build, env: Env): Verdict {
  const line = file === null ? 'kpick: no table loaded: using the defaults' : `kpick: no table at ${file}: using the defaults`;
  return withKnobNote({ kind: 'missing', used: false, line }, build, env);
}

export function refusedVerdict(file: string, kind: RefusalKind, reason: string, build: Build, env: Env, remedy: string = REMEDY[kind]): Verdict {
  const line = `kpick: table ${file} refused: ${reason}; ${remedy}; using the defaults`;
  return withKnobNote({ kind, used: false, line, reason, remedy }, build, env);
}

/** A reading that did not give a value, as a verdict. */
export function verdictOfReading(file: string, reading: { missing: true } | Refusal, build: Build, env: Env): Verdict {
  return 'missing' in reading ? missingVerdict(file, build, env) : refusedVerdict(file, reading.kind, reading.reason, build, env, reading.remedy);
}

function entryDrop(e: EntryView, byName: ReadonlyMap<string, BuildCandidate>, tableBlas: string, buildBlas: string): DropReason | null {
  const c = byName.get(e.choice);
  if (!c) return "choice not in this build's space";
  if (!c.available) return 'choice not available on this target';
  if (c.op !== e.op) return 'choice is for another op';
  if (!takesDtype(c, e.dtype)) return 'choice does not take this dtype';
  // The class default runs on a miss anyway: routing to it needs no evidence.
  if (!c.isDefault) {
    if (e.status === 'unmeasured') return 'choice not measured';
    if (e.parity === 'fail') return 'choice failed parity';
    if (e.status !== 'ok') return 'choice did not run';
    if (e.parity !== 'pass') return 'choice not parity-checked';
  }
  if ((c.stackBound || e.stack) && tableBlas !== buildBlas) return 'stack-bound and the BLAS differs';
  if (c.rowsMin > bucketLow(e.bucket) || c.rowsMax < e.bucket) return 'choice does not take these rows';
  return null;
}

/** The identity, compiler, space and knob checks, then the entries. */
export function judge(file: string, view: TableView, build: Build, env: Env): Verdict {
  const t = view.identity;
  const h = build.identity;
  for (const field of ['backend', 'arch', 'device'] as const) {
    if (t[field] !== h[field]) return refusedVerdict(file, 'machine', `other ${field} (table "${t[field]}", here "${h[field]}")`, build, env);
  }
  if (t.compiler !== h.compiler) return refusedVerdict(file, 'compiler', `other compiler (table "${t.compiler}", here "${h.compiler}")`, build, env);
  if (t.space !== h.space) return refusedVerdict(file, 'space', `other space (table ${t.space}, here ${h.space})`, build, env);
  for (const knob of DISPATCH_KNOBS) {
    const value = knobValue(env, knob.name);
    if (value !== null) return refusedVerdict(file, 'knob', `${knob.name}=${value.slice(0, KNOB_SHOWN)} is set`, build, env);
  }

  const byName = new Map(build.candidates.map((c) => [c.name, c]));
  const kept: KeptEntry[] = [];
  const dropped: DroppedEntry[] = [];
  for (const e of view.entries) {
    const entry = { op: e.op, dtype: e.dtype, n: e.n, k: e.k, ...moeFields(e), bucket: e.bucket, choice: e.choice };
    const why = entryDrop(e, byName, t.blas, h.blas);
    if (why) dropped.push({ ...entry, where: e.where, why });
    else kept.push(entry);
  }
  let line = `kpick: table ${file}: loaded ${kept.length} entries, dropped ${dropped.length}`;
  if (dropped.length > 0) {
    const counts = DROP_REASONS.map((r) => [dropped.filter((d) => d.why === r).length, r] as const).filter(([n]) => n > 0);
    line += ` (${counts.map(([n, r]) => `${n} ${r}`).join(', ')})`;
  }
  if (t.runtime !== h.runtime) line += `; note: tuned with runtime "${t.runtime}", this is "${h.runtime}"`;
  if (t.blas !== h.blas) line += `; note: tuned with blas "${t.blas}", this is "${h.blas}"`;
  return { kind: 'used', used: true, line, kept, dropped };
}

/** The verdict on the JSON table at `file` for this build and environment. */
export function guardTable(file: string, build: Build, env: Env = process.env): Verdict {
  const read = readTableFile(file, MAX_TABLE_BYTES);
  if (!('value' in read)) return verdictOfReading(file, read, build, env);
  const parsed = parseJsonTable(read.value);
  if (!('value' in parsed)) return verdictOfReading(file, parsed, build, env);
  return judge(file, parsed.value.view, build, env);
}
