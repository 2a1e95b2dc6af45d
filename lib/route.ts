// The route: (op, dtype, N, K, M) -> the candidate to run. M goes to the
// smallest rows bucket that holds it; an entry of a table the guard let in
// gives its choice, anything else the class default. A route is built once
// per table and process: lookups never read the file again.
//
// Also the compact form (decode_gemm.route), written beside the JSON table so
// that a C/C++ engine needs neither Node nor a JSON parser: route.c reads it
// with the same rules and messages as parseCompactRoute here (format in
// hip-lib/src/common/route.h). It keeps, per entry, only what the guard and the
// route need: the key, the choice, and the choice's status, parity and
// stack_bound.
//
// One table, one truth: a route is compiled from the bytes of one JSON table
// (compileRoute: only a table the JSON reader accepts compiles) and carries
// their sha256, and the sha256 of its own text on its end line. Both readers
// refuse a route whose JSON beside it is missing or differs, or whose text was
// edited; `promote --route-only` compiles it again after a hand edit.
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import {
  duplicateEntry,
  forcedCandidate,
  formatRefusal,
  guardTable,
  judge,
  MAX_TABLE_BYTES,
  missingVerdict,
  parseJsonTable,
  readTableFile,
  verdictOfReading,
  type Build,
  type BuildCandidate,
  type EntryView,
  type Env,
  type Reading,
  type TableView,
  type Verdict,
} from './guard.ts';
import type { Kpick } from './ffi.ts';
import { identityFromInfo } from './identity.ts';
import { BUCKETS, DTYPES, MAX_EXPERTS, MAX_ROWS, MAX_TOPK, OPS, TABLE_FORMAT, takesDtype, type Bucket, type Dtype, type Identity, type Op, type Table } from './schema.ts';
import { writeFileAtomic } from './write-file.ts';


/** KPICK_ROUTE_VERSION of kpick.h */
export const ROUTE_VERSION = 2;
/** KP_ROUTE_MAX_BYTES of route.h: larger than any real compact table */
export const MAX_ROUTE_BYTES = 4 << 20;
const MAX_ENTRIES = 1 << 20;
const MAX_VALUE = 255;
const MAX_NAME = 47;
const MAX_DIM = 1 << 24;
const HEADER_KEYS = ['backend', 'arch', 'device', 'runtime', 'blas', 'compiler', 'space'] as const;
const STATUSES = ['ok', 'unsupported', 'failed', 'unmeasured'] as const;
const PARITIES = ['pass', 'fail', 'skipped', 'none'] as const;

/** The smallest rows bucket that holds m (1..MAX_ROWS). */
export function bucketOf(m: number): Bucket {
  if (!Number.isInteger(m) || m < 1 || m > MAX_ROWS) throw new RangeError(`m must be an integer in 1..${MAX_ROWS}, got ${m}`);
  return BUCKETS.find((b) => b >= m)!;
}

/** The compact form beside a JSON table: decode_gemm.json -> decode_gemm.route. */
export function routePathFor(tablePath: string): string {
  return `${tablePath.endsWith('.json') ? tablePath.slice(0, -'.json'.length) : tablePath}.route`;
}

/** The JSON table a compact form was compiled from: decode_gemm.route -> decode_gemm.json (route.c's json_path_of). */
export function jsonPathFor(routePath: string): string {
  return `${routePath.endsWith('.route') && routePath.length > 6 ? routePath.slice(0, -'.route'.length) : routePath}.json`;
}

/** The command that compiles the route of an edited JSON table again. */
export function routeOnlyCommand(jsonPath: string): string {
  return `npx tsx scripts/promote.ts --route-only --table ${jsonPath}`;
}

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The build as the guard sees it: the loaded library's identity and space. */
export function buildOf(kpick: Kpick): Build {
  return { identity: identityFromInfo(kpick.info()), candidates: kpick.candidates() };
}

// ---- the compact form ---------------------------------------------------------

const PRINTABLE = /^[\x20-\x7e]+$/;
const NAME = /^[A-Za-z0-9._-]+$/;

/**
 * The compact text of a table whose JSON bytes hash to `jsonSha256`; throws
 * naming what the form cannot hold. compileRoute is the way to call it: from
 * the JSON bytes themselves.
 */
export function compactRouteText(table: Table, jsonSha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(jsonSha256)) throw new Error(`the JSON's sha256 must be 64 lowercase hex digits, got '${jsonSha256}'`);
  const lines = [`kpick-route ${ROUTE_VERSION}`, `json ${jsonSha256}`, `format ${table.format}`];
  for (const key of HEADER_KEYS) {
    const value = table.identity[key];
    if (!PRINTABLE.test(value) || value.length > MAX_VALUE) {
      throw new Error(`identity.${key} ${JSON.stringify(value)} cannot be written to a route: 1..${MAX_VALUE} printable ASCII characters`);
    }
    lines.push(`${key} ${value}`);
  }
  lines.push(`entries ${table.entries.length}`);
  table.entries.forEach((e, i) => {
    if (!NAME.test(e.choice) || e.choice.length > MAX_NAME) {
      throw new Error(`entries[${i}].choice ${JSON.stringify(e.choice)} cannot be written to a route: not a candidate name`);
    }
    const c = Object.hasOwn(e.candidates, e.choice) ? e.candidates[e.choice] : undefined;
    const result = c ? `${c.status} ${c.parity} ${c.stack_bound ? 1 : 0}` : 'unmeasured none 0';
    const experts = e.op === 'moe' ? ` ${e.experts} ${e.topk}` : '';
    lines.push(`${e.op} ${e.dtype}${experts} ${e.n} ${e.k} ${e.bucket} ${e.choice} ${result}`);
  });
  const text = sealRoute(`${lines.join('\n')}\n`);
  if (text.length > MAX_ROUTE_BYTES) throw new Error(`the route would be ${text.length} bytes, over the ${MAX_ROUTE_BYTES} a reader accepts`);
  return text;
}

/** The lines of a route up to its entries, sealed: the end line carries their sha256. */
export function sealRoute(body: string): string {
  return `${body}end ${sha256Hex(body)}\n`;
}

/**
 * The compact text of the JSON table `bytes`, or why it cannot be compiled:
 * a table the JSON reader refuses (invalid, other format) compiles to no route.
 */
export function compileRoute(bytes: Uint8Array): { text: string } | { error: string } {
  const parsed = parseJsonTable(bytes);
  if (!('value' in parsed)) return { error: 'missing' in parsed ? 'no table' : parsed.reason };
  try {
    return { text: compactRouteText(parsed.value.table, sha256Hex(bytes)) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/**
 * Compiles the JSON table at `jsonFile` into its compact form beside it
 * (routePathFor), written atomically. The JSON is read once: the route is
 * bound to exactly the bytes it was compiled from.
 */
export function writeRouteOf(jsonFile: string): { path: string } | { error: string; exit: 'usage' | 'refused' } {
  const file = routePathFor(jsonFile);
  const read = readTableFile(jsonFile, MAX_TABLE_BYTES);
  if ('missing' in read) return { error: `no table at ${jsonFile}; no route written`, exit: 'usage' };
  if (!('value' in read)) return { error: `${jsonFile} refused: ${read.reason}; no route written`, exit: 'refused' };
  const compiled = compileRoute(read.value);
  if ('error' in compiled) return { error: `${jsonFile} refused: ${compiled.error}; no route written`, exit: 'refused' };
  const written = writeFileAtomic(file, compiled.text);
  return 'error' in written ? { ...written, exit: 'usage' } : written;
}

type Invalid = { kind: 'invalid'; reason: string };
const invalid = (why: string): Invalid => ({ kind: 'invalid', reason: `invalid: ${why}` });

/** A decimal integer as the writer prints it ("0" or no leading zero, <= 9 digits). */
function uint(text: string): number | null {
  return /^(0|[1-9][0-9]{0,8})$/.test(text) ? Number(text) : null;
}

/** "key <integer>" -> the integer, or null */
function keyedUint(line: string, key: string): number | null {
  return line.startsWith(`${key} `) ? uint(line.slice(key.length + 1)) : null;
}

function parseEntry(line: string, at: number): EntryView | Invalid {
  const f = line.split(' ');
  // a moe line has two more fields, experts and topk, after its dtype (route.h)
  const moe = line.startsWith('moe ');
  if (moe && f.length !== 11) return invalid(`line ${at}: expected 11 fields (moe dtype experts topk n k bucket choice status parity stack), got ${f.length}`);
  if (!moe && f.length !== 9) return invalid(`line ${at}: expected 9 fields (op dtype n k bucket choice status parity stack), got ${f.length}`);
  const [op, dtype, ...rest] = f as string[];
  const [expertsText, topkText] = moe ? rest.splice(0, 2) : [];
  const [nText, kText, bucketText, choice, status, parity, stackText] = rest;
  const n = uint(nText!);
  const k = uint(kText!);
  const bucket = uint(bucketText!);
  const stack = uint(stackText!);
  if (!(OPS as readonly string[]).includes(op!)) return invalid(`line ${at}: op must be linear, gated or moe`);
  if (!(DTYPES as readonly string[]).includes(dtype!)) return invalid(`line ${at}: dtype must be bf16, fp16 or fp8`);
  const experts = moe ? uint(expertsText!) : null;
  const topk = moe ? uint(topkText!) : null;
  if (moe && (experts === null || experts < 1 || experts > MAX_EXPERTS)) return invalid(`line ${at}: experts must be an integer in 1..${MAX_EXPERTS}`);
  if (moe && (topk === null || topk < 1 || topk > MAX_TOPK || topk > experts!)) return invalid(`line ${at}: topk must be an integer in 1..${MAX_TOPK}, at most experts`);
  if (n === null || n < 1 || n > MAX_DIM) return invalid(`line ${at}: n must be an integer in 1..${MAX_DIM}`);
  if (k === null || k < 1 || k > MAX_DIM) return invalid(`line ${at}: k must be an integer in 1..${MAX_DIM}`);
  if (bucket === null || !(BUCKETS as readonly number[]).includes(bucket)) return invalid(`line ${at}: bucket must be one of ${BUCKETS.join(',')}`);
  if (!NAME.test(choice!) || choice!.length > MAX_NAME) return invalid(`line ${at}: choice must be a candidate name (1..${MAX_NAME} of A-Z a-z 0-9 . _ -)`);
  if (!(STATUSES as readonly string[]).includes(status!)) return invalid(`line ${at}: status must be ok, unsupported, failed or unmeasured`);
  if (!(PARITIES as readonly string[]).includes(parity!)) return invalid(`line ${at}: parity must be pass, fail, skipped or none`);
  if (stack === null || stack > 1) return invalid(`line ${at}: stack must be 0 or 1`);
  return {
    where: `line ${at}`,
    op: op as Op,
    dtype: dtype as Dtype,
    n,
    k,
    ...(moe ? { experts: experts!, topk: topk! } : {}),
    bucket: bucket as Bucket,
    choice: choice!,
    status: status as EntryView['status'],
    parity: parity as EntryView['parity'],
    stack: stack === 1,
  };
}

/** Lines of printable ASCII, each ending in '\n'; the first bad byte is named. */
function* lines(bytes: Uint8Array): Generator<{ text: string; at: number; start: number } | Invalid> {
  let pos = 0;
  let at = 0;
  while (pos < bytes.length) {
    at++;
    let i = pos;
    for (; i < bytes.length && bytes[i] !== 0x0a; i++) {
      const b = bytes[i]!;
      if (b < 0x20 || b > 0x7e) {
        yield invalid(`line ${at}: byte 0x${b.toString(16).padStart(2, '0')} is not printable ASCII`);
        return;
      }
    }
    if (i >= bytes.length) {
      yield invalid(`line ${at}: no newline at the end (truncated?)`);
      return;
    }
    yield { text: Buffer.from(bytes.subarray(pos, i)).toString('latin1'), at, start: pos };
    pos = i + 1;
  }
}

/** A route whose text does not match its end line: a hand edit. */
export const EDITED = 'edited since it was written (its checksum does not match)';

/** A compact form read: the view and the sha256 of the JSON it was compiled from. */
export type CompactRoute = TableView & { jsonSha256: string };

/** The compact form -> the table view, or why not (route.c's parse_route, same words). */
export function parseCompactRoute(bytes: Uint8Array): Reading<CompactRoute> {
  const reader = lines(bytes);
  let last = 0;
  // next line, or an Invalid (bad byte, or truncated after `last`)
  const next = (): { text: string; at: number; start: number } | Invalid | null => {
    const r = reader.next();
    if (r.done) return null;
    if ('text' in r.value) last = r.value.at;
    return r.value;
  };
  const truncated = () => invalid(`truncated after line ${last}`);

  let line = next();
  if (line === null) return invalid('empty file');
  if ('kind' in line) return line;
  const version = keyedUint(line.text, 'kpick-route');
  if (version === null) return invalid('line 1: not a kpick route file');
  if (version !== ROUTE_VERSION) return formatRefusal('route', version, ROUTE_VERSION);

  line = next();
  if (line === null) return truncated();
  if ('kind' in line) return line;
  const jsonSha256 = line.text.slice('json '.length);
  if (!line.text.startsWith('json ') || !/^[0-9a-f]{64}$/.test(jsonSha256)) {
    return invalid(`line ${line.at}: expected 'json <sha256 of the JSON table: 64 hex digits>'`);
  }

  line = next();
  if (line === null) return truncated();
  if ('kind' in line) return line;
  const format = keyedUint(line.text, 'format');
  if (format === null) return invalid(`line ${line.at}: expected 'format <number>'`);
  if (format !== TABLE_FORMAT) return formatRefusal('format', format, TABLE_FORMAT);

  const identity = {} as Identity;
  for (const key of HEADER_KEYS) {
    line = next();
    if (line === null) return truncated();
    if ('kind' in line) return line;
    const value = line.text.slice(key.length + 1);
    if (!line.text.startsWith(`${key} `) || value.length < 1 || value.length > MAX_VALUE) {
      return invalid(`line ${line.at}: expected '${key} <value>' (1..${MAX_VALUE} characters)`);
    }
    identity[key] = value;
  }

  line = next();
  if (line === null) return truncated();
  if ('kind' in line) return line;
  const count = keyedUint(line.text, 'entries');
  if (count === null || count > MAX_ENTRIES) return invalid(`line ${line.at}: expected 'entries <count up to ${MAX_ENTRIES}>'`);

  const entries: EntryView[] = [];
  const short = () => invalid(`truncated after line ${last}: expected ${count} entries and 'end'`);
  for (let i = 0; i < count; i++) {
    line = next();
    if (line === null) return short();
    if ('kind' in line) return line;
    const entry = parseEntry(line.text, line.at);
    if ('kind' in entry) return entry;
    entries.push(entry);
  }
  line = next();
  if (line === null) return short();
  if ('kind' in line) return line;
  const sum = line.text.slice('end '.length);
  if (!line.text.startsWith('end ') || !/^[0-9a-f]{64}$/.test(sum)) {
    return invalid(`line ${line.at}: expected 'end <sha256 of the lines above: 64 hex digits>' after ${count} entries`);
  }
  const endStart = line.start;
  const after = next();
  if (after !== null) return invalid(`line ${line.at + 1}: text after 'end'`);
  const again = duplicateEntry(entries);
  if (again) return invalid(again);
  if (sha256Hex(bytes.subarray(0, endStart)) !== sum) return { kind: 'stale', reason: EDITED };
  return { value: { identity, entries, jsonSha256 } };
}

/**
 * Why the route at `file` may not be used beside its JSON (route.c's
 * refuse_stale): the JSON is missing or unreadable, or its bytes are not the
 * ones the route was compiled from. null when they are.
 */
export function staleness(file: string, jsonSha256: string): { kind: 'stale'; reason: string; remedy: string } | null {
  const json = jsonPathFor(file);
  const read = readTableFile(json, MAX_TABLE_BYTES);
  const away = 'a route is used only beside the JSON it was made from: restore it or run promote again';
  if ('missing' in read) return { kind: 'stale', reason: `no JSON table beside it (${json})`, remedy: away };
  if (!('value' in read)) return { kind: 'stale', reason: `${json} ${read.reason}`, remedy: away };
  const sha = sha256Hex(read.value);
  if (sha === jsonSha256) return null;
  return {
    kind: 'stale',
    reason: `${json} changed since the route was written (sha256 ${sha.slice(0, 12)}, the route was made from ${jsonSha256.slice(0, 12)})`,
    remedy: `run \`${routeOnlyCommand(json)}\``,
  };
}

/** The verdict on the compact table at `file`, as route.c's kpick_route_load gives it. */
export function guardCompactRoute(file: string, build: Build, env: Env = process.env): Verdict {
  const read = readTableFile(file, MAX_ROUTE_BYTES);
  if (!('value' in read)) return verdictOfReading(file, read, build, env);
  const parsed = parseCompactRoute(read.value);
  if (!('value' in parsed)) {
    const reading = 'kind' in parsed && parsed.kind === 'stale' ? { ...parsed, remedy: `run \`${routeOnlyCommand(jsonPathFor(file))}\`` } : parsed;
    return verdictOfReading(file, reading, build, env);
  }
  const stale = staleness(file, parsed.value.jsonSha256);
  if (stale) return verdictOfReading(file, stale, build, env);
  return judge(file, parsed.value, build, env);
}

// ---- the route ------------------------------------------------------------------

/**
 * The class default of op in dtype: what runs without a table (for fp8 the
 * W8A8 row, space.def). Under KPICK_NO_BLASLT a vendor-BLAS default gives way
 * to the first available candidate of the op and dtype, in space order, that
 * is neither BLAS nor stack-bound and takes every rows count the default takes;
 * with none such, the BLAS default stays (route.c's class_default).
 */
export function classDefault(build: Build, op: Op, env: Env, dtype: Dtype = 'bf16'): BuildCandidate | null {
  const ofOp = build.candidates.filter((c) => c.op === op && takesDtype(c, dtype) && c.available);
  const head = ofOp.find((c) => c.isDefault) ?? null;
  const noBlaslt = (env.KPICK_NO_BLASLT ?? '') !== '';
  if (!head || !noBlaslt || !vendorBlas(head)) return head;
  // a default serves any rows: its stand-in must take every rows count it takes
  return ofOp.find((c) => !vendorBlas(c) && !c.stackBound && c.rowsMin <= head.rowsMin && c.rowsMax >= head.rowsMax) ?? head;
}

/** A family that calls the vendor BLAS (cuBLASLt / hipBLASLt, or cuBLAS for moe). */
function vendorBlas(c: BuildCandidate): boolean {
  return c.family === 'blaslt' || c.family === 'moe_blas';
}

const keyOf = (op: string, dtype: string, n: number, k: number, bucket: number, experts = 0, topk = 0) =>
  `${op}/${dtype}/${n}/${k}/${bucket}/${experts}/${topk}`;

/** One table's route for one build and environment, fixed at construction. */
export class Route {
  readonly verdict: Verdict;
  private readonly entries = new Map<string, string>();
  /** per op and dtype: op/dtype -> name */
  private readonly defaults = new Map<string, string | null>();
  private readonly forced: BuildCandidate | null;

  constructor(verdict: Verdict, build: Build, env: Env) {
    this.verdict = verdict;
    if (verdict.kind === 'used') {
      for (const e of verdict.kept) this.entries.set(keyOf(e.op, e.dtype, e.n, e.k, e.bucket, e.experts, e.topk), e.choice);
    }
    for (const op of OPS) for (const dtype of DTYPES) this.defaults.set(`${op}/${dtype}`, classDefault(build, op, env, dtype)?.name ?? null);
    this.forced = forcedCandidate(build, env);
  }

  /** The class default of op in dtype here: what a miss (or no table) runs. */
  defaultOf(op: Op, dtype: Dtype = 'bf16'): string | null {
    return this.defaults.get(`${op}/${dtype}`) ?? null;
  }

  /**
   * The candidate for one call; null only when the build has no default for op.
   * A moe call names its experts and top-k too (they are part of its key).
   */
  lookup(op: Op, dtype: Dtype, n: number, k: number, m: number, experts = 0, topk = 0): string | null {
    const bucket = bucketOf(m);
    const f = this.forced;
    if (f && f.op === op && takesDtype(f, dtype) && f.rowsMin <= m && f.rowsMax >= m) return f.name;
    const e = op === 'moe' ? [experts, topk] : [0, 0];
    return this.entries.get(keyOf(op, dtype, n, k, bucket, e[0], e[1])) ?? this.defaultOf(op, dtype);
  }
}

/** The route through the table at `file` (.route: the compact form, else JSON); null: no table. */
export function loadRoute(file: string | null, build: Build, env: Env = process.env): Route {
  const verdict =
    file === null
      ? missingVerdict(null, build, env)
      : file.endsWith('.route')
        ? guardCompactRoute(file, build, env)
        : guardTable(file, build, env);
  return new Route(verdict, build, env);
}

const loaded = new Map<string, Route>();

/**
 * The process's route through `file`: built and its verdict said (one line on
 * stderr) the first time, the same Route afterwards. Knobs are read then.
 */
export function routeOnce(file: string, build: Build, options: { say?: boolean; env?: Env } = {}): Route {
  const key = path.resolve(file);
  let route = loaded.get(key);
  if (!route) {
    route = loadRoute(file, build, options.env ?? process.env);
    loaded.set(key, route);
    if (options.say ?? true) process.stderr.write(`${route.verdict.line}\n`);
  }
  return route;
}
