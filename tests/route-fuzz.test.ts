// Fuzz: a real table of this build, mutated (seeded) as JSON text, as a parsed
// object, and as compact text, 1200 cases. For every case:
// - nothing throws or crashes, in TS or in route.c;
// - the two readers of the compact form give the same verdict line;
// - no invalid table is accepted (checked by rules stated here, not by calling
//   the guard: key tokens against parsed keys for duplicates, the schema, the
//   identity, unique entry keys, and a compact text accepted only when it is
//   exactly what the writer would print for what was read);
// - y computed through kpick_linear is byte for byte the class default's or
//   the mutated table's choice's, and the one the route named.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { KpickError, takesDtype, type Dtype, type Problem } from '../lib/ffi.ts';
import { guardTable, type Verdict } from '../lib/guard.ts';
import { compactRouteText, guardCompactRoute, loadRoute, parseCompactRoute, sealRoute, sha256Hex, type Route } from '../lib/route.ts';
import { BUCKETS, Table, TABLE_FORMAT } from '../lib/schema.ts';
import { tableText } from '../lib/table.ts';
import { build, headOf, kpick, linearThroughRoute, MOE_SHAPES, moeThroughRoute, native, nativeLookup, othersOf, realTable, SHAPES, TABLE_DTYPES, tempDir, withEnv } from './helpers/route-tables.ts';
import type { Linear } from '../lib/models.ts';

const SEED = 0x6b70_1c4b;
const CASES = 1200;

/** mulberry32: small, seeded, the same sequence on every machine */
function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(list: readonly T[]): T => list[int(list.length)]!;
  return { next, int, pick };
}
type Rng = ReturnType<typeof rng>;

// besides this build's rows: names of GPU rows (a CUDA-only cluster kernel among them), which a CPU build must drop
const NAMES = [...build.candidates.map((c) => c.name), 'gemv.rpb4.u4', 'blaslt.algo2', 'cmma.b64.w4.s8.pdl', 'test.wrong', '', 'two words', 'x'.repeat(60)];
const ODD_VALUES: unknown[] = [0, -1, 3, 129, 1.5, '8', null, 1 << 25, true, [], {}, 'linear', 'gated', 'moe', 'bf16', 'fp16', 'fp8', 'fp4'];
const KEY_FIELDS = ['op', 'dtype', 'n', 'k', 'experts', 'topk', 'bucket'] as const;

// ---- mutations ------------------------------------------------------------

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const STRUCT_MUTATIONS: ((t: Json, r: Rng) => void)[] = [
  (t, r) => (r.pick(t.entries as Json[]).choice = r.pick(NAMES)),
  (t, r) => {
    // a candidate of another op (a moe entry routed to a linear, a linear to a moe kernel): dropped
    const e = r.pick(t.entries as Json[]);
    e.choice = r.pick(build.candidates.filter((c) => c.op !== e.op).map((c) => c.name));
  },
  (t, r) => {
    const e = r.pick(t.entries as Json[]);
    if (r.int(4) === 0) delete e.candidates[e.choice];
    else e.candidates[e.choice] = { ...(e.candidates[e.choice] ?? r.pick(Object.values(e.candidates))), parity: r.pick(['pass', 'fail', 'skipped']), status: r.pick(['ok', 'ok', 'failed', 'unsupported']), stack_bound: r.int(3) === 0 };
  },
  (t, r) => {
    const e = r.pick(t.entries as Json[]);
    // experts and topk on a moe entry (or given to a dense one now and then: invalid)
    const f = r.pick(e.op === 'moe' || r.int(8) === 0 ? KEY_FIELDS : KEY_FIELDS.filter((x) => x !== 'experts' && x !== 'topk'));
    e[f] = r.int(2) === 0
      ? r.pick(ODD_VALUES)
      : f === 'bucket' ? r.pick(BUCKETS)
      : f === 'n' || f === 'k' ? r.pick([16, 24, 32, 48, 64, 80])
      : f === 'experts' || f === 'topk' ? r.pick([1, 2, 4, 8])
      : r.pick(['linear', 'gated', 'moe', 'bf16', 'fp16', 'fp8']);
  },
  (t, r) => (t.identity[r.pick(['backend', 'arch', 'device', 'runtime', 'blas', 'compiler', 'space'])] = r.pick(['other', '', 5, build.identity.device, build.identity.space])),
  (t, r) => (t.format = r.pick([0, 2, '1', null, 1.5, TABLE_FORMAT])),
  (t, r) => (t.entries as Json[]).push({ ...structuredClone(r.pick(t.entries as Json[])), choice: r.pick(NAMES) }),
  (t, r) => (t.entries as Json[]).splice(r.int(t.entries.length), 1),
  (t, r) => {
    const e = r.pick(t.entries as Json[]);
    const c = r.pick(Object.values(e.candidates) as Json[]);
    c[r.pick(['median_us', 'p25_us', 'p75_us', 'rel_err', 'samples', 'nodes'])] = r.pick([-1, 0, 5, null, 'fast', 1e308, -0.5]);
  },
  (t, r) => {
    const e = r.pick(t.entries as Json[]);
    if (r.int(2) === 0) e[r.pick(['extra', 'Choice'])] = 1;
    else delete e[r.pick(['op', 'dtype', 'n', 'k', 'experts', 'topk', 'bucket', 'default', 'choice', 'reason', 'floor_us', 'candidates'])];
  },
  (t, r) => {
    // two entries on one key: a duplicate by a bucket edit
    const a = r.pick(t.entries as Json[]);
    const b = r.pick(t.entries as Json[]);
    Object.assign(b, { op: a.op, dtype: a.dtype, n: a.n, k: a.k, experts: a.experts, topk: a.topk, bucket: a.bucket });
  },
];

const TOKENS = [',', '}', '{', ']', '"', ':', '-', '0', '1e999', 'null', ' ', '\n', '"x": 1,', '"choice": "plain",', '"format": 1,', '\\u0000', 'é', '\t'];

/** Byte-level edits of a text: replace, delete, duplicate, truncate, insert. */
function mutateText(text: string, r: Rng): string {
  let t = text;
  for (let i = 1 + r.int(3); i > 0; i--) {
    const at = r.int(t.length + 1);
    switch (r.int(5)) {
      case 0:
        t = t.slice(0, at) + String.fromCharCode(32 + r.int(95)) + t.slice(at + 1);
        break;
      case 1:
        t = t.slice(0, at) + t.slice(at + 1 + r.int(20));
        break;
      case 2: {
        const len = 1 + r.int(80);
        t = t.slice(0, at + len) + t.slice(at, at + len) + t.slice(at + len);
        break;
      }
      case 3:
        t = t.slice(0, at);
        break;
      default:
        t = t.slice(0, at) + r.pick(TOKENS) + t.slice(at);
    }
  }
  return t;
}

/** Line-level edits of the compact form: swap, repeat, drop a line, or change one field. */
function mutateRouteLines(text: string, r: Rng): string {
  const lines = text.split('\n');
  const i = r.int(lines.length - 1);
  const j = r.int(lines.length - 1);
  switch (r.int(4)) {
    case 0:
      [lines[i], lines[j]] = [lines[j]!, lines[i]!];
      break;
    case 1:
      lines.splice(i, 0, lines[j]!);
      break;
    case 2:
      lines.splice(i, 1);
      break;
    default: {
      const fields = lines[i]!.split(' ');
      const moe = MOE_SHAPES.length > 0 ? [headOf('moe'), othersOf('moe')[0]!, 'moe', '4'] : [];
      fields[r.int(fields.length)] = r.pick(['0', '8', '007', headOf('linear'), othersOf('linear')[1]!, headOf('gated'), 'fail', 'pass', 'ok', '1', '2', '', 'linear', 'fp16', 'fp8', '16777217', '4096', ...moe]);
      lines[i] = fields.join(' ');
    }
  }
  return lines.join('\n');
}

/**
 * The text with its end line sealed again (as a writer would after the
 * edit), so a mutation reaches the parser and the judge instead of stopping
 * at the checksum; unchanged when it has no end line left.
 */
function reseal(text: string): string {
  const m = /\nend [0-9a-f]{64}\n$/.exec(text);
  return m ? sealRoute(text.slice(0, m.index + 1)) : text;
}

// ---- oracles: what a valid table is, stated without the guard -----------------

function countKeys(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((s: number, x) => s + countKeys(x), 0);
  if (value !== null && typeof value === 'object') return Object.entries(value).reduce((s, [, x]) => s + 1 + countKeys(x), 0);
  return 0;
}

/** Why the JSON text must be refused as a whole, or null when it may be used. */
function mustRefuseJson(text: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not JSON';
  }
  // every string token followed by ':' is a key; a repeated key collapses in the parse
  let keyTokens = 0;
  for (const m of text.matchAll(/"(?:[^"\\]|\\.)*"/g)) if (/^\s*:/.test(text.slice(m.index! + m[0].length))) keyTokens++;
  if (keyTokens !== countKeys(value)) return 'duplicate keys';
  const parsed = v.safeParse(Table, value);
  if (!parsed.success) return 'schema';
  const t = parsed.output;
  if (t.format !== TABLE_FORMAT) return 'format';
  for (const f of ['backend', 'arch', 'device', 'compiler', 'space'] as const) if (t.identity[f] !== build.identity[f]) return f;
  const keys = new Set(t.entries.map((e) => JSON.stringify([e.op, e.dtype, e.n, e.k, e.experts ?? 0, e.topk ?? 0, e.bucket])));
  if (keys.size !== t.entries.length) return 'duplicate entries';
  return null;
}

/** An entry may route to its choice: a runnable candidate of its op with evidence (or the default). */
function entryMayRoute(e: { op: string; dtype: string; choice: string; status: string; parity: string; stack: boolean }, tableBlas: string): boolean {
  const c = build.candidates.find((x) => x.name === e.choice);
  if (!c || !c.available || c.op !== e.op || !takesDtype(c, e.dtype as Dtype)) return false;
  if (!c.isDefault && !(e.status === 'ok' && e.parity === 'pass')) return false;
  return !((c.stackBound || e.stack) && tableBlas !== build.identity.blas);
}

/** The compact text a writer prints for a parsed view: an accepted text must be exactly this. */
function canonicalRoute(view: Extract<ReturnType<typeof parseCompactRoute>, { value: unknown }>['value']): string {
  const id = view.identity;
  const head = [`kpick-route 2`, `json ${view.jsonSha256}`, `format ${TABLE_FORMAT}`, ...(['backend', 'arch', 'device', 'runtime', 'blas', 'compiler', 'space'] as const).map((k) => `${k} ${id[k]}`), `entries ${view.entries.length}`];
  const experts = (e: { op: string; experts?: number; topk?: number }) => (e.op === 'moe' ? ` ${e.experts} ${e.topk}` : '');
  const body = view.entries.map((e) => `${e.op} ${e.dtype}${experts(e)} ${e.n} ${e.k} ${e.bucket} ${e.choice} ${e.status} ${e.parity} ${e.stack ? 1 : 0}`);
  return sealRoute(`${[...head, ...body].join('\n')}\n`);
}

// ---- outputs through the route ---------------------------------------------

interface Inputs {
  problem: Problem;
  x: Uint16Array; // [128, K]
  w: Uint16Array | Uint8Array; // fp8: the packed codes and scales
  y: Map<string, Uint16Array>; // `${m}/${candidate}` -> kpick_run's y
}
const inputs = new Map<string, Inputs>();

type Call = Pick<Linear, 'op' | 'n' | 'k' | 'experts' | 'topk'>;

function inputsFor(s: Call, dtype: Dtype): Inputs {
  const key = `${JSON.stringify(s)}/${dtype}`;
  let got = inputs.get(key);
  if (!got) {
    const problem = kpick.createProblem({ ...s, dtype, mMax: 128, copies: 1, seed: 5 });
    got = { problem, x: problem.downloadX(), w: dtype === 'fp8' ? problem.downloadWeightBytes() : problem.downloadW(), y: new Map() };
    inputs.set(key, got);
  }
  return got;
}

/** y of `name` at m rows through kpick_run, poisoned first so an unwritten element shows. */
function runY(inp: Inputs, name: string, m: number): Uint16Array {
  const key = `${m}/${name}`;
  let y = inp.y.get(key);
  if (!y) {
    inp.problem.setRows(m);
    inp.problem.poison();
    inp.problem.run(kpick.candidate(name).id);
    y = inp.problem.downloadY();
    inp.y.set(key, y);
  }
  return y;
}

/** Does an entry's key name this call's shape (E and top-k too on moe)? */
const sameKey = (e: Call, c: Call) => e.op === c.op && e.n === c.n && e.k === c.k && (e.experts ?? 0) === (c.experts ?? 0) && (e.topk ?? 0) === (c.topk ?? 0);

const sameBytes = (a: Uint16Array, b: Uint16Array) => a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

/**
 * Probes the C route (loaded with the case's table) at a random call: y through
 * kpick_linear must equal the routed candidate's, which must be the default or
 * `choiceOf` the key, and the TS route (when given) must name the same one.
 */
function probe(r: Rng, choiceOf: (c: Call, dtype: string, bucket: number) => string | null, ts: Route | null, label: string): void {
  const shape = r.pick(SHAPES);
  // sometimes a miss: the other dense op, or another top-k of a moe shape
  const miss = r.int(8) === 0;
  const call: Call = shape.op === 'moe' ? { ...shape, topk: miss ? 1 : shape.topk } : { ...shape, op: miss ? (shape.op === 'linear' ? 'gated' : 'linear') : shape.op };
  const op = call.op;
  const dtype = r.pick(TABLE_DTYPES);
  const m = 1 + r.int(128);
  const bucket = BUCKETS.find((b) => b >= m)!;
  const inp = inputsFor(call, dtype);
  const chosen = kpick.candidates()[nativeLookup(call, dtype, m)]!.name;
  const head = headOf(op, dtype);
  const allowed = [head, choiceOf(call, dtype, bucket)];
  assert.ok(allowed.includes(chosen), `${label}: routed ${JSON.stringify(call)} ${dtype} m=${m} to ${chosen}, allowed ${allowed.join(' or ')}`);
  if (ts) assert.is(ts.lookup(op, dtype, shape.n, shape.k, m, call.experts, call.topk), chosen, `${label}: TS and C routes differ`);
  if (op === 'moe') {
    inp.problem.setRows(m);
    assert.ok(sameBytes(moeThroughRoute(inp.problem, dtype), runY(inp, chosen, m)), `${label}: y through kpick_moe is not ${chosen}'s`);
    return;
  }
  // on the memory the backend takes (device memory on a GPU); now and then
  // also as a decode step runs it, captured into a graph (after the eager
  // call: a GPU grows its scratch only outside capture)
  inp.problem.setRows(m);
  if (!inp.problem.supports(kpick.candidate(chosen).id)) {
    // a choice the guard cannot know fails here (a GPU's blaslt.algoN past the
    // heuristic's count for this shape): an error, never a fault
    assert.throws(() => linearThroughRoute(op, dtype, inp.x, inp.w, m, shape.n, shape.k), (e: unknown) => e instanceof KpickError, `${label}: ${chosen} cannot run here, yet kpick_linear did`);
    return;
  }
  const want = runY(inp, chosen, m);
  const y = linearThroughRoute(op, dtype, inp.x, inp.w, m, shape.n, shape.k);
  assert.ok(sameBytes(y, want), `${label}: y through the route is not ${chosen}'s`);
  if (r.int(4) === 0) assert.ok(sameBytes(linearThroughRoute(op, dtype, inp.x, inp.w, m, shape.n, shape.k, { graph: true }), want), `${label}: y through the route in a graph is not ${chosen}'s`);
}

// ---- the cases -------------------------------------------------------------------

function checkJsonCase(file: string, text: string, label: string): Verdict {
  fs.writeFileSync(file, text);
  let verdict: Verdict;
  try {
    verdict = guardTable(file, build, {});
  } catch (err) {
    throw new Error(`${label}: the guard threw: ${(err as Error).message}`);
  }
  assert.is(verdict.line.split('\n').length, 1, `${label}: one line`);
  const refuse = mustRefuseJson(text);
  if (verdict.used) {
    assert.is(refuse, null, `${label}: accepted a table that must be refused (${refuse})`);
    const t = JSON.parse(text) as Table;
    assert.is(verdict.kept.length + verdict.dropped.length, t.entries.length);
    for (const [list, may] of [[verdict.kept, true], [verdict.dropped, false]] as const) {
      for (const k of list) {
        const e = t.entries.find((x) => sameKey(x, k) && x.dtype === k.dtype && x.bucket === k.bucket)!;
        const c = Object.hasOwn(e.candidates, e.choice) ? e.candidates[e.choice] : undefined;
        const view = { op: e.op, dtype: e.dtype, choice: e.choice, status: c?.status ?? 'unmeasured', parity: c?.parity ?? 'none', stack: c?.stack_bound ?? false };
        assert.is(entryMayRoute(view, t.identity.blas), may, `${label}: ${may ? 'kept' : 'dropped'} ${JSON.stringify(view)}`);
      }
    }
  } else if (verdict.kind === 'invalid' || verdict.kind === 'unreadable') {
    assert.ok(refuse !== null, `${label}: refused a valid table: ${verdict.line}`);
  }
  return verdict;
}

function checkRouteCase(file: string, text: string, label: string): { ts: Route; view: ReturnType<typeof parseCompactRoute> } {
  fs.writeFileSync(file, text);
  let ts: Route;
  try {
    ts = loadRoute(file, build, {});
  } catch (err) {
    throw new Error(`${label}: the TS route threw: ${(err as Error).message}`);
  }
  native.load(file); // a KpickError here fails the case: a bad table is never an error
  assert.is(native.verdict(), ts.verdict.line, `${label}: C and TS verdicts differ`);
  const view = parseCompactRoute(Buffer.from(text, 'latin1'));
  if (ts.verdict.used) {
    assert.ok('value' in view, `${label}: used but not parsed`);
    if ('value' in view) assert.is(text, canonicalRoute(view.value), `${label}: accepted a non-canonical compact text`);
    assert.is(guardCompactRoute(file, build, {}).line, ts.verdict.line);
  }
  return { ts, view };
}

test(`fuzz: ${CASES} mutated real tables (seed ${SEED}): no crash, nothing invalid accepted, outputs only the default's or the choice's`, () => {
  const base = realTable();
  const baseJson = tableText(base);
  const baseRoute = compactRouteText(base, sha256Hex(baseJson));
  const dir = tempDir('kpick-fuzz-');
  const jsonFile = path.join(dir, 'decode_gemm.json');
  const routeFile = path.join(dir, 'decode_gemm.route');
  const r = rng(SEED);
  const seen = { used: 0, refused: 0, dropped: 0, routed: 0 };
  withEnv({ KPICK_FORCE: undefined, KPICK_NO_BLASLT: undefined }, () => {
    for (let i = 0; i < CASES; i++) {
      const family = r.int(3);
      const label = `case ${i} (seed ${SEED}, family ${family})`;
      if (family === 0) {
        // the JSON text itself
        const verdict = checkJsonCase(jsonFile, mutateText(baseJson, r), label);
        seen[verdict.used ? 'used' : 'refused']++;
      } else if (family === 1) {
        // the parsed object, then both forms as promote would write them
        const t = structuredClone(base) as unknown as Json;
        for (let n = 1 + r.int(3); n > 0; n--) r.pick(STRUCT_MUTATIONS)(t, r);
        const text = JSON.stringify(t, null, 2);
        const verdict = checkJsonCase(jsonFile, text, label);
        seen[verdict.used ? 'used' : 'refused']++;
        if (verdict.kind === 'used') seen.dropped += verdict.dropped.length;
        const parsed = v.safeParse(Table, t);
        if (!parsed.success) continue;
        let route: string;
        try {
          route = compactRouteText(parsed.output, sha256Hex(text)); // the JSON beside it is `text`
        } catch {
          continue; // a choice or identity the form cannot hold: promote writes no route
        }
        const { ts } = checkRouteCase(routeFile, route, label);
        // same table, two forms: the same decision
        const status = native.status();
        assert.is(status.used, verdict.used, `${label}: JSON and compact decisions differ`);
        if (verdict.kind === 'used') assert.equal([status.kept, status.dropped], [verdict.kept.length, verdict.dropped.length], label);
        const entries = parsed.output.entries;
        const choiceOf = (c: Call, dtype: string, b: number) => (verdict.used ? (entries.find((e) => sameKey(e, c) && e.dtype === dtype && e.bucket === b)?.choice ?? null) : null);
        for (let p = 0; p < 2; p++) probe(r, choiceOf, ts, label);
      } else {
        // the compact text: bytes or lines
        // the compact text beside the base JSON: mutated, and half the time sealed again
        fs.writeFileSync(jsonFile, baseJson);
        const mutated = r.int(2) === 0 ? mutateText(baseRoute, r) : mutateRouteLines(baseRoute, r);
        const text = r.int(2) === 0 ? reseal(mutated) : mutated;
        const { ts, view } = checkRouteCase(routeFile, text, label);
        seen[ts.verdict.used ? 'used' : 'refused']++;
        const entries = ts.verdict.used && 'value' in view ? view.value.entries : [];
        const choiceOf = (c: Call, dtype: string, b: number) => entries.find((e) => sameKey(e, c) && e.dtype === dtype && e.bucket === b)?.choice ?? null;
        for (let p = 0; p < 2; p++) probe(r, choiceOf, ts, label);
        if (ts.verdict.used) seen.routed++;
      }
    }
  });
  native.load(null);
  for (const inp of inputs.values()) inp.problem.free();
  inputs.clear();
  // the mutations must reach both sides of every decision, or the test proves little
  // (bounds well under a run's counts: a fresh seed each run; the H200 run of
  // 2026-12-01 routed 19 compact texts, seed 1802509387, so 20 was a coin toss)
  assert.ok(seen.used > 50 && seen.refused > 300 && seen.dropped > 20 && seen.routed > 8, JSON.stringify(seen));
});

test.run();
