// lib/route.ts and its C twin: the compact form, the lookup, the knobs, the
// load-once rule, and kpick_linear. The agreement tests walk every entry of a
// real table (and of hand-edited copies) at every M, and misses, through both.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceBuffer, KpickError } from '../lib/ffi.ts';
import type { Build } from '../lib/guard.ts';
import { bucketOf, classDefault, compactRouteText, loadRoute, parseCompactRoute, Route, routeOnce, routePathFor, sha256Hex, writeRouteOf } from '../lib/route.ts';
import type { Dtype, Op, Table } from '../lib/schema.ts';
import { readTable, tableText, writeTable } from '../lib/table.ts';
import { readBoth } from '../lib/two-readers.ts';
import { build, candidateResult, DENSE_SHAPES, entryOf, fp8Here, headOf, kpick, linearThroughRoute, MOE_SHAPES, moeThroughRoute, native, nativeLookup, onDevice, othersOf, realTable, SHAPES, TABLE_DTYPES, tempDir, withEnv } from './helpers/route-tables.ts';
import { moeFields } from '../lib/shape-key.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NO_KNOBS = { KPICK_FORCE: undefined, KPICK_NO_BLASLT: undefined };
const DTYPES = ['bf16', 'fp16'] as const;
const nameOf = (id: number) => kpick.candidates()[id]!.name;
// Names from the loaded build's space, so the suite runs on any backend.
const ops = (['linear', 'gated', 'moe'] as const).filter((op) => op !== 'moe' || MOE_SHAPES.length > 0);
const HEAD = Object.fromEntries(ops.map((op) => [op, headOf(op)])) as Record<Op, string>;
const OTHER = Object.fromEntries(ops.map((op) => [op, othersOf(op)])) as Record<Op, string[]>;

/** Writes the table as JSON and compact form into a fresh folder. */
function writeBoth(table: Table): { json: string; route: string } {
  const dir = tempDir();
  const json = path.join(dir, 'decode_gemm.json');
  const route = routePathFor(json);
  assert.equal(writeTable(json, table), { path: json });
  assert.equal(writeRouteOf(json), { path: route });
  return { json, route };
}

type Probe = { op: Op; dtype: Dtype; n: number; k: number; experts?: number; topk?: number };

/** Every (op, dtype, n, k, E and top-k on moe) to probe: the table's shapes, and misses (a shape, a dtype, an E or top-k it lacks). */
function probes(table: Table): Probe[] {
  const seen = new Map<string, Probe>();
  const add = (p: Probe) => seen.set(JSON.stringify(p), p);
  for (const e of table.entries) add({ op: e.op, dtype: e.dtype, n: e.n, k: e.k, ...moeFields(e) });
  for (const op of ['linear', 'gated'] as const) for (const dtype of DTYPES) add({ op, dtype, n: 4096, k: 4096 });
  for (const e of table.entries) add({ op: e.op, dtype: e.dtype, n: e.k, k: e.n, ...moeFields(e) }); // transposed: a miss
  for (const e of table.entries.filter((x) => x.op === 'moe')) {
    add({ op: e.op, dtype: e.dtype, n: e.n, k: e.k, experts: e.experts! + 1, topk: e.topk }); // other experts: a miss
    add({ op: e.op, dtype: e.dtype, n: e.n, k: e.k, experts: e.experts, topk: e.topk! - 1 || 2 }); // other top-k: a miss
  }
  return [...seen.values()];
}

/**
 * Loads the table through the TS route (JSON and compact) and the C route and
 * asserts one answer for every probe at every M in 1..128. Returns how many
 * lookups were answered by a table entry (not the default).
 */
function assertAgree(table: Table, env: Record<string, string | undefined> = {}): number {
  return withEnv({ ...NO_KNOBS, ...env }, () => {
    const files = writeBoth(table);
    const fromJson = loadRoute(files.json, build);
    const fromRoute = loadRoute(files.route, build);
    native.load(files.route);
    assert.is(native.verdict(), fromRoute.verdict.line);
    const defaults = new Route({ kind: 'missing', used: false, line: '' }, build, process.env);
    let routed = 0;
    for (const p of probes(table)) {
      for (let m = 1; m <= 128; m++) {
        const ts = fromJson.lookup(p.op, p.dtype, p.n, p.k, m, p.experts, p.topk);
        assert.is(fromRoute.lookup(p.op, p.dtype, p.n, p.k, m, p.experts, p.topk), ts, `compact vs JSON at ${JSON.stringify(p)} m=${m}`);
        assert.is(nameOf(nativeLookup(p, p.dtype, m)), ts, `C vs TS at ${JSON.stringify(p)} m=${m}`);
        if (ts !== defaults.lookup(p.op, p.dtype, p.n, p.k, m, p.experts, p.topk)) routed++;
      }
    }
    return routed;
  });
}

test('bucketOf: the smallest bucket that holds M', () => {
  const want: [number, number][] = [[1, 1], [2, 2], [3, 4], [4, 4], [5, 8], [9, 16], [17, 32], [33, 64], [65, 128], [100, 128], [128, 128]];
  for (const [m, b] of want) assert.is(bucketOf(m), b, `m=${m}`);
  for (const bad of [0, 129, 1.5, -1, Number.NaN]) assert.throws(() => bucketOf(bad), (e: unknown) => e instanceof RangeError && e.message === `m must be an integer in 1..128, got ${bad}`, `m=${bad}`);
  assert.throws(() => native.lookup('linear', 'bf16', 8, 8, 0), (e: unknown) => e instanceof KpickError && /m must be in 1\.\.128, got 0/.test(e.message));
  assert.throws(() => native.lookup('linear', 'bf16', 8, 8, 129), (e: unknown) => e instanceof KpickError && /m must be in 1\.\.128/.test(e.message));
});

test('the compact form: versioned header, identity, one line per entry, end; read back the same', () => {
  const table = realTable();
  const sha = sha256Hex(tableText(table));
  const text = compactRouteText(table, sha);
  const lines = text.split('\n');
  assert.equal(lines.slice(0, 3), ['kpick-route 2', `json ${sha}`, 'format 1']);
  assert.equal(lines.slice(3, 10), (['backend', 'arch', 'device', 'runtime', 'blas', 'compiler', 'space'] as const).map((k) => `${k} ${table.identity[k]}`));
  assert.is(lines[10], `entries ${table.entries.length}`);
  const body = `${lines.slice(0, -2).join('\n')}\n`;
  assert.equal(lines.slice(-2), [`end ${sha256Hex(body)}`, ''], 'the end line seals every line above it');
  const e = table.entries[0]!;
  const c = e.candidates[e.choice]!;
  assert.is(lines[11], `${e.op} ${e.dtype} ${e.n} ${e.k} ${e.bucket} ${e.choice} ${c.status} ${c.parity} ${c.stack_bound ? 1 : 0}`);
  const back = parseCompactRoute(Buffer.from(text));
  assert.ok('value' in back);
  if (!('value' in back)) return;
  assert.equal(back.value.identity, table.identity);
  assert.is(back.value.jsonSha256, sha);
  assert.equal(
    back.value.entries.map((x) => [x.op, x.dtype, x.n, x.k, x.bucket, x.choice, x.status, x.parity, x.stack]),
    table.entries.map((x) => [x.op, x.dtype, x.n, x.k, x.bucket, x.choice, x.candidates[x.choice]!.status, x.candidates[x.choice]!.parity, x.candidates[x.choice]!.stack_bound]),
  );
  // a choice with no measurement is written as such, not invented
  delete table.entries[0]!.candidates[table.entries[0]!.choice];
  assert.match(compactRouteText(table, sha), new RegExp(`\\n${e.op} ${e.dtype} ${e.n} ${e.k} ${e.bucket} ${e.choice} unmeasured none 0\\n`));
});

test('writeRouteOf: compiles the JSON beside it, atomically, and refuses what the form cannot hold', () => {
  const table = realTable();
  const dir = tempDir();
  const json = path.join(dir, 'decode_gemm.json');
  const file = path.join(dir, 'decode_gemm.route');
  assert.is(routePathFor(json), file);
  assert.equal(writeTable(json, table), { path: json });
  fs.writeFileSync(file, 'old');
  assert.equal(writeRouteOf(json), { path: file });
  assert.is(fs.readFileSync(file, 'utf8'), compactRouteText(table, sha256Hex(fs.readFileSync(json))));
  assert.equal(fs.readdirSync(dir).sort(), ['decode_gemm.json', 'decode_gemm.route'], 'no temp file left behind');

  const before = fs.readFileSync(file, 'utf8');
  const odd = realTable();
  odd.identity.device = 'Gerät\nzwei';
  fs.writeFileSync(json, tableText(odd));
  const r = writeRouteOf(json);
  assert.ok('error' in r && /identity\.device "Gerät\\nzwei" cannot be written to a route/.test(r.error), JSON.stringify(r));
  assert.is(fs.readFileSync(file, 'utf8'), before, 'a failed write leaves the old file');
  const spaced = realTable();
  spaced.entries[2]!.choice = 'two words';
  fs.writeFileSync(json, tableText(spaced));
  const s = writeRouteOf(json);
  assert.ok('error' in s && /entries\[2\]\.choice "two words" cannot be written/.test(s.error), JSON.stringify(s));
});

test('TS and C agree on every entry of the real table, at every M, and on misses', () => {
  const table = realTable();
  const routed = assertAgree(table);
  const nonDefault = table.entries.filter((e) => e.choice !== e.default).length;
  assert.ok(nonDefault === 0 || routed > 0, 'the real table routes somewhere');
});

test('the committed tables: where one applies (this backend, arch and device), both readers use it and agree on every entry and bucket; elsewhere both refuse', () => {
  const root = path.join(ROOT, 'tables');
  const files = fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('decode_gemm.json')) : [];
  assert.ok(files.length > 0, 'the repo commits at least one table');
  withEnv(NO_KNOBS, () => {
    for (const rel of files) {
      const both = readBoth(kpick, build, path.join(root, rel));
      assert.ok(both.agree, `${rel}: ${both.disagreement}`);
      assert.is(both.route.used, both.json.verdict.used, `${rel}: ${both.json.verdict.line} / ${both.route.line}`);
      const t = readTable(path.join(root, rel));
      const here = 'table' in t && (['backend', 'arch', 'device'] as const).every((f) => t.table.identity[f] === build.identity[f]);
      if (!here) assert.not.ok(both.json.verdict.used, `${rel} is another machine's table`);
      else console.log(`  ${rel}: ${both.json.verdict.line}`);
    }
  });
});

test('TS and C agree on every committed table of this backend, re-stamped with this build\'s identity', () => {
  const root = path.join(ROOT, 'tables');
  const files = fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('decode_gemm.json')) : [];
  // every committed table must read; those of this backend (if any) go through both routes
  let agreed = 0;
  for (const rel of files) {
    const read = readTable(path.join(root, rel));
    assert.ok('table' in read, `${rel}: ${'error' in read ? read.error : ''}`);
    if (!('table' in read) || read.table.identity.backend !== build.identity.backend) continue;
    assertAgree({ ...read.table, identity: build.identity });
    agreed++;
  }
  // none of this backend: the reads above are all this test checks here, and it says so
  if (agreed === 0) console.log(`  no committed table of backend ${build.identity.backend}: the re-stamped agreement is not checked on this build`);
});

test('TS and C agree on hand-edited copies: choices rotated over every candidate, foreign names and broken evidence', () => {
  const names = [...build.candidates.map((c) => c.name), 'gemv.rpb4.u4', 'blaslt.algo3', 'rowblk.r2', 'test.nan'];
  for (let shift = 0; shift < names.length; shift++) {
    const table = realTable();
    table.entries.forEach((e, i) => {
      const choice = names[(i + shift) % names.length]!;
      e.choice = choice;
      if (i % 5 === 1) e.candidates[choice] = candidateResult({ parity: 'fail' });
      else if (i % 5 === 2) delete e.candidates[choice];
      else if (!e.candidates[choice]) e.candidates[choice] = candidateResult();
    });
    assertAgree(table);
  }
  // and a table whose every entry leaves the default routes every probe of its shapes
  const table = realTable();
  for (const e of table.entries) {
    e.choice = othersOf(e.op, e.dtype)[0]!;
    e.candidates[e.choice] = candidateResult();
  }
  const routed = assertAgree(table);
  const keys = TABLE_DTYPES.length * SHAPES.length;
  assert.is(routed, keys * 128);
});

test('knobs reroute every lookup alike in TS and C: KPICK_FORCE for its op, the defaults otherwise', () => {
  const table = realTable();
  const forced = OTHER.linear[1]!;
  withEnv({ ...NO_KNOBS, KPICK_FORCE: forced }, () => {
    const files = writeBoth(table);
    const ts = loadRoute(files.route, build);
    native.load(files.route);
    assert.is(ts.verdict.kind, 'knob');
    for (const m of [1, 3, 64, 128]) {
      assert.is(ts.lookup('linear', 'bf16', 32, 64, m), forced);
      assert.is(nameOf(native.lookup('linear', 'bf16', 32, 64, m)), forced);
      assert.is(ts.lookup('gated', 'fp16', 24, 64, m), HEAD.gated);
      assert.is(nameOf(native.lookup('gated', 'fp16', 24, 64, m)), HEAD.gated);
      if (!fp8Here) continue;
      // a forced candidate runs only the dtypes it computes: fp8 calls keep their default
      assert.is(ts.lookup('linear', 'fp8', 32, 64, m), headOf('linear', 'fp8'));
      assert.is(nameOf(native.lookup('linear', 'fp8', 32, 64, m)), headOf('linear', 'fp8'));
    }
  });
  assertAgree(table, { KPICK_FORCE: OTHER.gated.at(-1)! });
  assertAgree(table, { KPICK_FORCE: 'no.such.kernel' });
  assertAgree(table, { KPICK_NO_BLASLT: '1' });
});

test('classDefault: the build\'s default; under KPICK_NO_BLASLT a BLAS default gives way to the first non-BLAS, unbound candidate that takes all its rows', () => {
  assert.is(classDefault(build, 'linear', {})!.name, HEAD.linear);
  if (!onDevice) assert.is(classDefault(build, 'gated', { KPICK_NO_BLASLT: '1' })!.name, 'gated.plain');
  else assert.is.not(classDefault(build, 'gated', { KPICK_NO_BLASLT: '1' })!.family, 'blaslt');
  const c = (name: string, family: string, over: Partial<Build['candidates'][number]> = {}) => ({ name, op: 'linear' as const, family, isDefault: false, stackBound: false, rowsMin: 1, rowsMax: 128, available: true, ...over });
  const gpu: Build = {
    identity: build.identity,
    candidates: [
      c('blaslt', 'blaslt', { isDefault: true }), c('blaslt.algo2', 'blaslt', { stackBound: true }), c('gemv.rpb1.u1', 'gemv', { available: false }),
      c('gemv.rpb4.u8', 'gemv', { rowsMax: 8 }), c('gemv.rpb4.u2', 'gemv'), c('mma.w4.u2', 'mma'),
      c('moe.blas', 'moe_blas', { op: 'moe', isDefault: true }), c('moe.gemv.rpb4.u8', 'moe_gemv', { op: 'moe', rowsMax: 8 }), c('moe.mma.w4.u8.t1', 'moe_mma', { op: 'moe' }),
      c('gated.blaslt', 'blaslt', { op: 'gated', isDefault: true }), c('gated.gemv.rpb4.u8', 'gemv', { op: 'gated', rowsMax: 8 }),
    ],
  };
  assert.is(classDefault(gpu, 'linear', {})!.name, 'blaslt');
  // gemv.rpb4.u8 takes rows 1-8 only: a default must serve rows 1-128
  assert.is(classDefault(gpu, 'linear', { KPICK_NO_BLASLT: '1' })!.name, 'gemv.rpb4.u2');
  // moe.blas calls cuBLAS: vendor BLAS too
  assert.is(classDefault(gpu, 'moe', {})!.name, 'moe.blas');
  assert.is(classDefault(gpu, 'moe', { KPICK_NO_BLASLT: '1' })!.name, 'moe.mma.w4.u8.t1');
  // no non-BLAS candidate takes every rows: the BLAS default stays
  assert.is(classDefault(gpu, 'gated', { KPICK_NO_BLASLT: '1' })!.name, 'gated.blaslt');
  assert.is(classDefault({ ...gpu, candidates: gpu.candidates.filter((x) => x.op === 'linear') }, 'gated', {}), null);
});

test('the route loads once: lookups never read the file again, in TS and in C', () => {
  const table = realTable();
  const e = entryOf(table, 'linear', 'bf16', 48, 80, 8);
  const [a, b] = OTHER.linear as [string, string];
  e.choice = a;
  e.candidates[a] = candidateResult();
  const files = writeBoth(table);
  withEnv(NO_KNOBS, () => {
    const first = routeOnce(files.route, build, { say: false });
    native.load(files.route);
    assert.is(first.lookup('linear', 'bf16', 48, 80, 7), a);
    // the file changes under a running engine: nothing moves until it loads again
    e.choice = b;
    e.candidates[b] = candidateResult();
    assert.equal(writeTable(files.json, table), { path: files.json });
    assert.equal(writeRouteOf(files.json), { path: files.route });
    assert.is(routeOnce(files.route, build, { say: false }), first);
    assert.is(first.lookup('linear', 'bf16', 48, 80, 7), a);
    assert.is(nameOf(native.lookup('linear', 'bf16', 48, 80, 7)), a);
    fs.rmSync(files.route);
    assert.is(nameOf(native.lookup('linear', 'bf16', 48, 80, 7)), a);
    native.load(null);
    assert.is(nameOf(native.lookup('linear', 'bf16', 48, 80, 7)), HEAD.linear);
  });
});

test('routeOnce says its verdict once on stderr', () => {
  const files = writeBoth(realTable());
  const said: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => (said.push(String(chunk)), true)) as typeof process.stderr.write;
  try {
    withEnv(NO_KNOBS, () => {
      routeOnce(files.json, build);
      routeOnce(files.json, build);
    });
  } finally {
    process.stderr.write = write;
  }
  assert.equal(said, [`kpick: table ${files.json}: loaded ${realTable().entries.length} entries, dropped 0\n`]);
});

test('kpick_route_load with say = 1 prints the one verdict line on stderr', () => {
  const files = writeBoth(realTable());
  const code = `
    import { loadKpick, NativeRoute } from './lib/ffi.ts';
    const r = new NativeRoute(loadKpick({ lib: ${JSON.stringify(kpick.path)} }));
    r.load(${JSON.stringify(files.route)}, true);`;
  const env = { ...process.env };
  delete env.KPICK_FORCE;
  delete env.KPICK_NO_BLASLT;
  // the test runner sets FORCE_COLOR; with NO_COLOR also set (pipeline.sh sets it) Node warns on stderr
  delete env.NO_COLOR;
  const r = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['-e', code], { cwd: ROOT, encoding: 'utf8', env });
  assert.is(r.status, 0, r.stderr);
  assert.is(r.stderr, `kpick: table ${files.route}: loaded ${realTable().entries.length} entries, dropped 0\n`);
});

test('the C route ABI validates every argument', () => {
  const isArg = (re: RegExp) => (e: unknown) => e instanceof KpickError && e.status === 1 && re.test(e.message);
  assert.throws(() => native.lookup('conv' as 'linear', 'bf16', 8, 8, 1), isArg(/op must be 0 \(linear\) or 1 \(gated\)/));
  assert.throws(() => native.lookup('linear', 'int4' as 'bf16', 8, 8, 1), isArg(/dtype must be 0 \(bf16\), 1 \(fp16\) or 2 \(fp8\)/));
  assert.throws(() => native.lookup('linear', 'bf16', 0, 8, 1), isArg(/n must be in 1\.\.16777216, got 0/));
  assert.throws(() => native.lookup('linear', 'bf16', 8, (1 << 24) + 1, 1), isArg(/k must be in 1\.\.16777216/));
  const raw = native as unknown as { call(name: string, ...args: unknown[]): void };
  assert.throws(() => raw.call('kpick_route_load', 'x.route', 2), isArg(/say must be 0 or 1, got 2/));
  assert.throws(() => raw.call('kpick_route_load', '', 0), isArg(/path must be NULL or 1\.\.4095 bytes/));
  assert.throws(() => raw.call('kpick_route_load', 'a'.repeat(5000), 0), isArg(/path must be NULL or 1\.\.4095 bytes/));
  assert.throws(() => raw.call('kpick_route_verdict', Buffer.alloc(4), 4), isArg(/buffer of 4 bytes is too small: the verdict needs \d+/));
  assert.throws(() => raw.call('kpick_route_verdict', null, 100), isArg(/buf is null/));
  assert.throws(() => raw.call('kpick_route_status', null, [0], [0]), isArg(/null argument/));
  assert.throws(() => raw.call('kpick_route_lookup', 0, 0, 8, 8, 1, null), isArg(/cand_out is null/));
  const x = new Uint16Array(8 * 8), w = new Uint16Array(8 * 8), y = new Uint16Array(8 * 8);
  assert.throws(() => raw.call('kpick_linear', 0, 0, null, w, y, 1, 8, 8, null), isArg(/x, w and y must not be null/));
  assert.throws(() => native.linear('linear', 'bf16', x, w, x, 1, 8, 8), isArg(/y must not overlap x or w/));
  assert.throws(() => native.linear('linear', 'bf16', x, w, y, 129, 8, 8), (e: unknown) => e instanceof RangeError && /m must be an integer in 1\.\.128, got 129/.test(e.message));
});

test('route integers koffi would wrap or truncate are refused before the call, and a path is a string without NUL', () => {
  const wrapped = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  // 2^32 + 1 rows reached kpick_route_lookup as 1, and n 64.5 as 64: an answer for another call
  assert.throws(() => native.lookup('linear', 'bf16', 64, 64, 2 ** 32 + 1), wrapped(/^kpick_route_lookup: argument 5 \(int32_t\) must be an integer in -2147483648\.\.2147483647, got 4294967297$/));
  assert.throws(() => native.lookup('linear', 'bf16', 64.5, 64, 1), wrapped(/^kpick_route_lookup: argument 3 \(int64_t\) .*got 64\.5$/));
  assert.throws(() => native.lookupMoe('bf16', 2 ** 32 + 8, 2, 64, 64, 1), wrapped(/^kpick_route_lookup_moe: argument 2 /));
  assert.throws(() => native.lookupMoe('bf16', 8, 2, 64, 64, -(2 ** 32) + 1), wrapped(/argument 6 .*got -4294967295$/));
  const refused = (re: RegExp) => (e: unknown) => e instanceof TypeError && re.test(e.message);
  const file = path.join(tempDir(), 'decode_gemm.route');
  assert.throws(() => native.load(`${file}\0.other`), refused(/^kpick_route_load: argument 1 holds a NUL character, where C would end it: /));
  // a number where a C string goes was read as an address (5 crashed Node)
  assert.throws(() => native.load(0 as unknown as string), refused(/^kpick_route_load: argument 1 is a pointer \(const char \*\), got 0$/));
});

test('a freed DeviceBuffer is refused by linear and moe before the call, even where its address was handed out again', () => {
  const m = 2, n = 16, k = 16;
  const x = native.allocFrom(new Uint16Array(m * k).fill(0x3f80)), w = native.allocFrom(new Uint16Array(n * k).fill(0x3f80));
  const y = native.alloc(m * n * 2);
  native.free(y);
  // most likely at y's address: the library would take it as live and write there
  const again = native.allocFrom(new Uint16Array(m * n).fill(0x1234));
  const freed = (e: unknown) => e instanceof TypeError && /^y is not a live DeviceBuffer \(freed, or not made by alloc\(\)\)$/.test((e as Error).message);
  try {
    assert.throws(() => native.linear('linear', 'bf16', x, w, y, m, n, k), freed);
    assert.throws(() => native.linearGraph('linear', 'bf16', x, w, y, m, n, k), freed);
    if (MOE_SHAPES.length > 0) {
      const mem = { x, wGateUp: new Uint16Array(4 * 2 * n * k), wDown: new Uint16Array(4 * k * n), ids: Int32Array.of(0, 1, 2, 3), weights: new Float32Array(4), y };
      assert.throws(() => native.moe('bf16', mem, { m, experts: 4, topk: 2, n, k }), freed);
    }
    assert.ok(native.download(again, new Uint16Array(m * n)).every((v) => v === 0x1234), 'the buffer now at that address is untouched');
    // a made-up buffer is no memory either
    assert.throws(() => native.linear('linear', 'bf16', x, w, new DeviceBuffer(again.ptr, m * n * 2), m, n, k), (e: unknown) => e instanceof TypeError && /^y is not a live DeviceBuffer/.test((e as Error).message));
    // an empty copy was "src is null" (koffi passes an empty array as NULL)
    assert.throws(() => native.upload(again, new Uint16Array(0)), (e: unknown) => e instanceof RangeError && /^upload: data is empty/.test((e as Error).message));
    assert.throws(() => native.download(again, new Uint16Array(0)), (e: unknown) => e instanceof RangeError && /^download: out is empty/.test((e as Error).message));
  } finally {
    for (const b of [x, w, again]) native.free(b);
  }
});

test('a table of no entries is used by both readers: every call goes to the default (route.c sorted a NULL list)', () => {
  const table = { ...realTable(), entries: [] };
  assert.is(assertAgree(table), 0);
  assert.equal(native.status(), { used: true, kept: 0, dropped: 0 });
  assert.match(native.verdict(), /: loaded 0 entries, dropped 0$/);
  native.load(null);
});

test('kpick_linear\'s memory is checked before the native call: short arrays and buffers, n past the arrays, host memory on a GPU', () => {
  const isArg = (re: RegExp) => (e: unknown) => e instanceof KpickError && e.status === 1 && re.test(e.message);
  const m = 4, n = 32, k = 64;
  const x = new Uint16Array(m * k), w = new Uint16Array(n * k), y = new Uint16Array(m * n);
  const short = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  // the cases that crashed Node: y shorter than m.n, and n = 1e6 over small arrays
  assert.throws(() => native.linear('linear', 'bf16', x, w, new Uint16Array(m * n - 1), m, n, k), short(/^y holds 254 bytes, the call needs 256 \(m=4, n=32, k=64\)$/));
  assert.throws(() => native.linear('linear', 'bf16', x, w, y, m, 1e6, k), short(/^w holds 4096 bytes, the call needs 128000000/));
  assert.throws(() => native.linear('gated', 'bf16', x, w, new Uint16Array(m * n), m, n, k), short(/^w holds 4096 bytes, the call needs 8192 .*gated/));
  assert.throws(() => native.linear('linear', 'bf16', x.subarray(1), w, y, m, n, k), short(/^x holds 510 bytes, the call needs 512/));
  assert.throws(() => native.linear('linear', 'bf16', x, w, y, m, n, 1.5), short(/k must be an integer/));
  assert.throws(() => native.linear('linear', 'bf16', x, [] as unknown as Uint16Array, y, m, n, k), (e: unknown) => e instanceof TypeError && /^w must be a Uint16Array, a Uint8Array or a DeviceBuffer$/.test(e.message));
  assert.throws(() => native.linearGraph('linear', 'bf16', x, w, y, m, n, k, 0), short(/replays must be an integer in 1\.\.1000/));
  // a buffer of the library knows its size: the C side refuses what runs past its end
  const raw = native as unknown as { call(name: string, ...args: unknown[]): void };
  const bx = native.allocFrom(x), bw = native.allocFrom(w), small = native.alloc(16);
  try {
    assert.throws(() => raw.call('kpick_linear', 0, 0, bx.ptr, bw.ptr, small.ptr, m, n, k, null), isArg(/y needs 256 bytes, its kpick buffer has 16 from there/));
    assert.throws(() => raw.call('kpick_linear', 0, 0, bx.ptr, small.ptr, bx.ptr, m, n, k, null), isArg(/y must not overlap x or w/));
    assert.throws(() => native.upload(small, new Uint16Array(9)), isArg(/18 bytes at offset 0 do not fit a buffer of 16/));
    assert.throws(() => native.download(small, new Uint16Array(8), 2), isArg(/16 bytes at offset 2 do not fit a buffer of 16/));
    assert.throws(() => native.alloc(0), short(/^bytes must be a positive integer, got 0$/));
    if (onDevice) {
      // host memory where the GPU needs device memory: refused, not an illegal access
      const by = native.alloc(m * n * 2);
      try {
        assert.throws(() => native.linear('linear', 'bf16', x, bw, by, m, n, k), isArg(/x is host memory: this backend needs device memory/));
        assert.throws(() => native.linearGraph('linear', 'bf16', bx, bw, y, m, n, k), isArg(/y is host memory: this backend needs device memory/));
      } finally {
        native.free(by);
      }
    }
  } finally {
    for (const b of [bx, bw, small]) native.free(b);
  }
  assert.throws(() => native.free(bx), isArg(/not a live kpick buffer/));
});

test('fp8: kpick_linear takes the packed weight (codes, then scales at a 16-byte boundary) and checks its whole length', () => {
  const isArg = (re: RegExp) => (e: unknown) => e instanceof KpickError && e.status === 1 && re.test(e.message);
  const short = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  const m = 2, n = 24, k = 40; // 960 codes, then 24 scales: 1056 bytes
  const x = new Uint16Array(m * k), y = new Uint16Array(m * n);
  const w = new Uint8Array(1056);
  assert.throws(() => native.linear('linear', 'fp8', x, w.subarray(0, 1055), y, m, n, k), short(/^w holds 1055 bytes, the call needs 1056/));
  assert.throws(() => native.linear('linear', 'fp8', x, w.subarray(0, 960), y, m, n, k), short(/the call needs 1056/), 'the codes alone are not enough');
  assert.throws(() => native.linear('gated', 'fp8', x, w, y, m, n, k), short(/^w holds 1056 bytes, the call needs 2112 .*gated/));
  const raw = native as unknown as { call(name: string, ...args: unknown[]): void };
  const bx = native.allocFrom(x), by = native.allocFrom(y), bw = native.alloc(1055);
  try {
    assert.throws(() => raw.call('kpick_linear', 0, 2, bx.ptr, bw.ptr, by.ptr, m, n, k, null), isArg(/w needs 1056 bytes, its kpick buffer has 1055 from there/));
  } finally {
    for (const b of [bx, by, bw]) native.free(b);
  }
  if (!fp8Here) {
    // a build without fp8 kernels refuses the call, never runs a 16-bit kernel on e4m3 bytes
    assert.throws(() => native.lookup('linear', 'fp8', n, k, m), (e: unknown) => e instanceof KpickError && e.status === 3);
  }
});

/** y of one candidate through kpick_run on the problem's own inputs. */
function runBytes(problem: ReturnType<typeof kpick.createProblem>, name: string, m: number): Uint16Array {
  problem.setRows(m);
  problem.poison();
  problem.run(kpick.candidate(name).id);
  return problem.downloadY();
}

test('kpick_linear computes y through the route: byte for byte what the routed candidate gives', () => {
  const table = realTable();
  // OTHER[op][0] is not bitwise with the default: a wrong dispatch would show in the bytes
  for (const e of table.entries.filter((x) => x.dtype === 'bf16')) {
    e.choice = OTHER[e.op][0]!;
    e.candidates[e.choice] = candidateResult();
  }
  const files = writeBoth(table);
  const ts = withEnv(NO_KNOBS, () => (native.load(files.route), loadRoute(files.route, build)));
  assert.match(native.verdict(), /dropped 0$/);
  let differed = 0;
  for (const shape of DENSE_SHAPES) {
    for (const dtype of DTYPES) {
      const problem = kpick.createProblem({ op: shape.op, dtype, n: shape.n, k: shape.k, mMax: 128, copies: 1, seed: 11 });
      try {
        const wAll = problem.downloadW();
        for (const m of [1, 2, 3, 7, 8, 33, 128]) {
          problem.setRows(m);
          const x = problem.downloadX();
          const y = linearThroughRoute(shape.op, dtype, x, wAll, m, shape.n, shape.k);
          const chosen = nameOf(native.lookup(shape.op, dtype, shape.n, shape.k, m));
          assert.is(chosen, ts.lookup(shape.op, dtype, shape.n, shape.k, m));
          if (dtype === 'bf16') assert.is(chosen, OTHER[shape.op][0]);
          const want = runBytes(problem, chosen, m);
          assert.equal(y, want, `${shape.op} ${dtype} m=${m}`);
          // as a decode step runs it: on device memory, captured into a graph and replayed
          assert.equal(linearThroughRoute(shape.op, dtype, x, wAll, m, shape.n, shape.k, { graph: true }), want, `graph: ${shape.op} ${dtype} m=${m}`);
          if (!onDevice) assert.equal(linearThroughRoute(shape.op, dtype, x, wAll, m, shape.n, shape.k, { buffers: true }), want, `buffers: ${shape.op} ${dtype} m=${m}`);
          const head = HEAD[shape.op];
          if (!Buffer.from(y.buffer).equals(Buffer.from(runBytes(problem, head, m).buffer))) differed++;
        }
      } finally {
        problem.free();
      }
    }
  }
  assert.ok(differed > 0, 'split-K output differs from the default somewhere, so the comparison can see a wrong dispatch');
  native.load(null);
});

test("kpick_moe computes y through the route: the table's moe choice, keyed by E and top-k, byte for byte its own run", () => {
  if (MOE_SHAPES.length === 0) {
    assert.ok(onDevice, 'the CPU build has a moe default: this test runs here');
    return; // a GPU build: no moe candidate yet
  }
  const shape = MOE_SHAPES[0]!;
  const table = realTable();
  for (const e of table.entries.filter((x) => x.op === 'moe' && x.dtype === 'bf16')) {
    e.choice = OTHER.moe[0]!;
    e.candidates[e.choice] = candidateResult();
  }
  const files = writeBoth(table);
  const ts = withEnv(NO_KNOBS, () => (native.load(files.route), loadRoute(files.route, build)));
  assert.match(native.verdict(), /dropped 0$/);
  for (const dtype of DTYPES) {
    const problem = kpick.createProblem({ op: 'moe', dtype, n: shape.n, k: shape.k, experts: shape.experts, topk: shape.topk, mMax: 128, copies: 1, seed: 11 });
    try {
      for (const m of [1, 3, 8, 33, 128]) {
        problem.setRows(m);
        const chosen = nameOf(nativeLookup(shape, dtype, m));
        assert.is(chosen, ts.lookup('moe', dtype, shape.n, shape.k, m, shape.experts, shape.topk));
        // bf16: the edited choice; fp16: what this build's sweep picked
        const entry = table.entries.find((e) => e.op === 'moe' && e.dtype === dtype && e.bucket === bucketOf(m))!;
        assert.is(chosen, dtype === 'bf16' ? OTHER.moe[0] : entry.choice, `${dtype} m=${m}`);
        // another E or top-k is another key: the default
        assert.is(nameOf(native.lookupMoe(dtype, shape.experts! * 2, shape.topk!, shape.n, shape.k, m)), HEAD.moe);
        assert.is(nameOf(native.lookupMoe(dtype, shape.experts!, 1, shape.n, shape.k, m)), HEAD.moe);
        assert.equal(moeThroughRoute(problem, dtype), runBytes(problem, chosen, m), `${dtype} m=${m}`);
      }
    } finally {
      problem.free();
    }
  }
  native.load(null);
});

test.run();
