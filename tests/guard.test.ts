// lib/guard.ts: every refusal of DESIGN.md, in order, on the JSON table; and
// wherever the compact form can say the same thing, the C twin (route.c) gives
// the very same verdict line as the TS reader of that form.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DISPATCH_KNOBS, duplicateKey, guardTable, judge, MAX_TABLE_BYTES, type Build, type Verdict } from '../lib/guard.ts';
import { compactRouteText, guardCompactRoute, MAX_ROUTE_BYTES } from '../lib/route.ts';
import type { Table } from '../lib/schema.ts';
import { tableText } from '../lib/table.ts';
import { build, candidateResult, entryOf, nativeVerdict, realTable, tempDir, withEnv } from './helpers/route-tables.ts';

const NO_KNOBS = { KPICK_FORCE: undefined, KPICK_NO_BLASLT: undefined };

/** Writes text as a JSON table file; returns its verdict. */
function jsonVerdict(text: string, name = 'decode_gemm.json'): { file: string; verdict: Verdict } {
  const file = path.join(tempDir(), name);
  fs.writeFileSync(file, text);
  return { file, verdict: withEnv(NO_KNOBS, () => guardTable(file, build)) };
}

/** The compact text through both readers; asserts they give one line, and returns it. */
function routeLine(text: string, file = path.join(tempDir(), 'decode_gemm.route')): string {
  fs.writeFileSync(file, text);
  const ts = guardCompactRoute(file, build, process.env).line;
  const c = nativeVerdict(file);
  assert.is(c, ts, 'route.c and lib/route.ts disagree');
  return ts;
}

/** Both forms of a table: the JSON verdict, and the one line both compact readers give. */
function bothForms(table: Table, env: Record<string, string | undefined> = {}): { json: Verdict; route: string; file: string } {
  return withEnv({ ...NO_KNOBS, ...env }, () => {
    const dir = tempDir();
    const file = path.join(dir, 'decode_gemm.json');
    fs.writeFileSync(file, tableText(table));
    return { json: guardTable(file, build), route: routeLine(compactRouteText(table), path.join(dir, 'decode_gemm.route')), file };
  });
}

const replaceLine = (text: string, from: RegExp, to: string) => {
  assert.ok(from.test(text), `no line matches ${from}`);
  return text.replace(from, to);
};

test('a real table of this build is used: every entry loaded, none dropped, by both readers', () => {
  const table = realTable();
  const { json, route, file } = bothForms(table);
  assert.is(json.kind, 'used');
  assert.is(json.line, `kpick: table ${file}: loaded ${table.entries.length} entries, dropped 0`);
  assert.is(route, `kpick: table ${file.replace(/json$/, 'route')}: loaded ${table.entries.length} entries, dropped 0`);
});

test('no file: not an error, the defaults, said in one line', () => {
  const dir = tempDir();
  const v = withEnv(NO_KNOBS, () => guardTable(path.join(dir, 'decode_gemm.json'), build));
  assert.equal(v, { kind: 'missing', used: false, line: `kpick: no table at ${path.join(dir, 'decode_gemm.json')}: using the defaults` });
  const routeFile = path.join(dir, 'decode_gemm.route');
  assert.is(nativeVerdict(routeFile), `kpick: no table at ${routeFile}: using the defaults`);
  assert.is(nativeVerdict(null), 'kpick: no table loaded: using the defaults');
});

test('truncated JSON is refused as invalid, naming the parse error', () => {
  const text = tableText(realTable());
  const { file, verdict } = jsonVerdict(text.slice(0, Math.floor(text.length / 2)));
  assert.is(verdict.kind, 'invalid');
  assert.match(verdict.line, new RegExp(`^kpick: table ${file} refused: invalid: not JSON \\(.+\\); run promote again; using the defaults$`));
});

test('a truncated compact table is refused by both readers with the same line', () => {
  const text = compactRouteText(realTable());
  const lines = text.split('\n');
  assert.match(routeLine(lines.slice(0, 12).join('\n') + '\n'), /refused: invalid: truncated after line 12: expected \d+ entries and 'end'; run promote again/);
  assert.match(routeLine(text.slice(0, -1)), /invalid: line \d+: no newline at the end \(truncated\?\)/);
  assert.match(routeLine(''), /invalid: empty file/);
});

test('valid JSON with wrong types is refused with the valibot issue path', () => {
  const table = realTable() as unknown as { entries: Record<string, unknown>[] };
  table.entries[3]!.n = '4096';
  const { verdict } = jsonVerdict(JSON.stringify(table));
  assert.is(verdict.kind, 'invalid');
  assert.match(verdict.line, /refused: invalid: entries\.3\.n: Invalid type: Expected number but received "4096"/);

  const other = realTable() as unknown as { gate: unknown };
  other.gate = 'fast';
  assert.match(jsonVerdict(JSON.stringify(other)).verdict.line, /invalid: gate: Invalid type/);
  assert.match(jsonVerdict('"a table"').verdict.line, /invalid: \(root\): Invalid type: Expected Object/);
});

test('an older or unknown format version is refused as such, before the schema', () => {
  for (const [format, kind, words] of [
    [0, 'older-format', 'older format (format 0, this kpick reads 1); run promote again'],
    [2, 'newer-format', 'newer format (format 2, this kpick reads 1); upgrade kpick'],
  ] as const) {
    const table = realTable() as unknown as Record<string, unknown>;
    table.format = format;
    delete table.gate; // an old layout: the schema would fail, the format speaks first
    const { file, verdict } = jsonVerdict(JSON.stringify(table));
    assert.is(verdict.kind, kind);
    assert.is(verdict.line, `kpick: table ${file} refused: ${words}; using the defaults`);
  }
  const table = realTable() as unknown as Record<string, unknown>;
  table.format = '1';
  assert.match(jsonVerdict(JSON.stringify(table)).verdict.line, /invalid: format: Invalid type: Expected number/);

  const text = compactRouteText(realTable());
  assert.match(routeLine(text.replace(/^kpick-route 1\n/, 'kpick-route 0\n')), /refused: older format \(route 0, this kpick reads 1\); run promote again/);
  assert.match(routeLine(text.replace(/^kpick-route 1\n/, 'kpick-route 7\n')), /refused: newer format \(route 7, this kpick reads 1\); upgrade kpick/);
  assert.match(routeLine(replaceLine(text, /\nformat 1\n/, '\nformat 2\n')), /refused: newer format \(format 2, this kpick reads 1\)/);
  assert.match(routeLine(text.replace(/^kpick-route 1\n/, 'kpick-rout 1\n')), /invalid: line 1: not a kpick route file/);
});

test('another backend, arch or device is refused: run the tuner on this machine', () => {
  for (const field of ['backend', 'arch', 'device'] as const) {
    const table = realTable();
    table.identity[field] = `other-${field}`;
    const { json, route } = bothForms(table);
    assert.is(json.kind, 'machine');
    const words = `refused: other ${field} (table "other-${field}", here "${build.identity[field]}"); run the tuner on this machine; using the defaults`;
    assert.ok(json.line.endsWith(words), json.line);
    assert.ok(route.endsWith(words), route);
  }
});

test('the checks run in order: the machine before the compiler, the compiler before the space', () => {
  const table = realTable();
  table.identity.space = 'other-space';
  table.identity.compiler = 'other-cc';
  assert.is(bothForms(table).json.kind, 'compiler');
  table.identity.device = 'other-device';
  assert.is(bothForms(table).json.kind, 'machine');
  assert.is(bothForms(table, { KPICK_FORCE: 'plain' }).json.kind, 'machine');
});

test('another compiler is refused: run the tuner again', () => {
  const table = realTable();
  table.identity.compiler = 'cc 1.0 -O0';
  const { json, route } = bothForms(table);
  assert.is(json.kind, 'compiler');
  assert.ok(json.line.includes(`refused: other compiler (table "cc 1.0 -O0", here "${build.identity.compiler}"); run the tuner again;`), json.line);
  assert.ok(route.includes('refused: other compiler'), route);
});

test('another space is refused: the kernels changed, run the tuner again', () => {
  const table = realTable();
  table.identity.space = '0000000000000000';
  const { json, route } = bothForms(table);
  assert.is(json.kind, 'space');
  const words = `refused: other space (table 0000000000000000, here ${build.identity.space}); the kernels changed: run the tuner again; using the defaults`;
  assert.ok(json.line.endsWith(words), json.line);
  assert.ok(route.endsWith(words), route);
});

test('every dispatch knob set in the environment refuses the table by name; an empty one is unset', () => {
  assert.equal(
    DISPATCH_KNOBS.map((k) => k.name),
    ['KPICK_FORCE', 'KPICK_NO_BLASLT'],
  );
  for (const [name, value] of [
    ['KPICK_FORCE', 'rowblk.r4'],
    ['KPICK_NO_BLASLT', '1'],
  ] as const) {
    const { json, route } = bothForms(realTable(), { [name]: value });
    assert.is(json.kind, 'knob');
    const words = `refused: ${name}=${value} is set; it reroutes dispatch: unset it to use the table; using the defaults`;
    assert.ok(json.line.endsWith(words), json.line);
    assert.ok(route.endsWith(words), route);
  }
  assert.is(bothForms(realTable(), { KPICK_FORCE: '', KPICK_NO_BLASLT: '' }).json.kind, 'used');
  // a forced name that runs nothing here is said, not silently ignored
  const { json, route } = bothForms(realTable(), { KPICK_FORCE: 'gemv.rpb4.u4' });
  assert.ok(json.line.endsWith('using the defaults; note: KPICK_FORCE=gemv.rpb4.u4 names no candidate here'), json.line);
  assert.ok(route.endsWith('using the defaults; note: KPICK_FORCE=gemv.rpb4.u4 names no candidate here'), route);
});

test('a choice not in this build\'s space drops that entry alone, counted in the summary', () => {
  const table = realTable();
  entryOf(table, 'linear', 'bf16', 32, 64, 4).choice = 'gemv.rpb4.u4';
  entryOf(table, 'linear', 'fp16', 32, 64, 4).choice = 'test.wrong'; // only the test build has it
  const { json, route } = bothForms(table);
  assert.is(json.kind, 'used');
  const n = table.entries.length;
  assert.ok(json.line.endsWith(`loaded ${n - 2} entries, dropped 2 (2 choice not in this build's space)`), json.line);
  assert.ok(route.endsWith(`loaded ${n - 2} entries, dropped 2 (2 choice not in this build's space)`), route);
  if (json.kind !== 'used') return;
  assert.equal(json.dropped.map((d) => `${d.dtype} ${d.choice}: ${d.why}`).sort(), [
    "bf16 gemv.rpb4.u4: choice not in this build's space",
    "fp16 test.wrong: choice not in this build's space",
  ]);
});

test('a choice that failed parity, did not run, was not checked or not measured drops its entry', () => {
  const table = realTable();
  const edit = (bucket: 1 | 2 | 4 | 8 | 16, choice: string, over: Parameters<typeof candidateResult>[0] | null) => {
    const e = entryOf(table, 'linear', 'bf16', 48, 80, bucket);
    e.choice = choice;
    if (over) e.candidates[choice] = candidateResult(over);
    else delete e.candidates[choice];
  };
  edit(1, 'splitk.s4', { parity: 'fail' });
  edit(2, 'threads.t2', { status: 'failed', parity: 'skipped' });
  edit(4, 'rowblk.r2', { parity: 'skipped' });
  edit(8, 'rowblk.r8', null);
  edit(16, 'gated.rowblk.r4', {}); // a gated kernel on a linear shape
  const { json, route } = bothForms(table);
  const n = table.entries.length;
  const summary = `loaded ${n - 5} entries, dropped 5 (1 choice is for another op, 1 choice not measured, 1 choice failed parity, 1 choice did not run, 1 choice not parity-checked)`;
  assert.ok(json.line.endsWith(summary), json.line);
  assert.ok(route.endsWith(summary), route);
});

test('the class default needs no evidence: a default choice with parity skipped is kept', () => {
  const table = realTable();
  const e = entryOf(table, 'gated', 'fp16', 24, 64, 8);
  e.choice = 'gated.plain';
  e.candidates['gated.plain'] = candidateResult({ parity: 'skipped' });
  const { json } = bothForms(table);
  assert.ok(json.line.endsWith(`loaded ${table.entries.length} entries, dropped 0`), json.line);
});

test('duplicate JSON object keys are refused, wherever they are, escaped or not', () => {
  const text = tableText(realTable());
  const top = text.replace('"format": 1,', '"format": 1,\n  "format": 1,');
  assert.match(jsonVerdict(top).verdict.line, /refused: invalid: duplicate key "format" at line 3; run promote again/);
  const nested = text.replace(/"median_us": ([0-9.e-]+),/, '"median_us": $1, "median_us": 0.001,');
  assert.match(jsonVerdict(nested).verdict.line, /refused: invalid: duplicate key "median_us" at line \d+;/);
  const escaped = text.replace('"format": 1,', '"format": 1, "\\u0066ormat": 1,');
  assert.match(jsonVerdict(escaped).verdict.line, /invalid: duplicate key "format"/);
  assert.is(duplicateKey('{"a": {"a": 1}, "b": ["a", "a"], "c": {"x:": 1, "y": "x:"}}'), null);
  assert.equal(duplicateKey('{"a": 1,\n"b": {"c": 1, "c": 2}}'), { key: 'c', line: 2 });
});

test('duplicate entries for one op/dtype/n/k/bucket are refused by every reader', () => {
  const table = realTable();
  const copy = structuredClone(table.entries[5]!);
  copy.choice = copy.default;
  table.entries.push(copy);
  const last = table.entries.length - 1;
  const { json, route } = bothForms(table);
  assert.is(json.kind, 'invalid');
  const key = `${copy.op} ${copy.dtype} ${copy.n}x${copy.k}, bucket ${copy.bucket}`;
  assert.ok(json.line.includes(`refused: invalid: entries[${last}] repeats entries[5] (${key}); run promote again`), json.line);
  // line 11 is entries[0]
  assert.ok(route.includes(`refused: invalid: line ${11 + last} repeats line ${11 + 5} (${key}); run promote again`), route);
});

test('non-finite or negative times are refused', () => {
  const text = tableText(realTable());
  const huge = text.replace(/"median_us": [0-9.e-]+,/, '"median_us": 1e999,');
  assert.match(jsonVerdict(huge).verdict.line, /refused: invalid: entries\.0\.candidates\.[\w.]+\.median_us: Invalid finite/);
  const negative = text.replace(/"p25_us": [0-9.e-]+,/, '"p25_us": -3.5,');
  assert.match(jsonVerdict(negative).verdict.line, /refused: invalid: entries\.0\.candidates\.[\w.]+\.p25_us: Invalid value: Expected >=0/);
  const floor = text.replace(/"floor_us": [0-9.e-]+,/, '"floor_us": -1,');
  assert.match(jsonVerdict(floor).verdict.line, /invalid: entries\.0\.floor_us/);
  assert.match(jsonVerdict(text.replace(/"median_us": [0-9.e-]+,/, '"median_us": NaN,')).verdict.line, /invalid: not JSON/);
});

test('text that is not UTF-8, or not printable ASCII in the compact form, is refused', () => {
  const file = path.join(tempDir(), 'decode_gemm.json');
  fs.writeFileSync(file, Buffer.concat([Buffer.from('{"format": 1, "x": "'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]));
  assert.match(withEnv(NO_KNOBS, () => guardTable(file, build)).line, /invalid: not UTF-8 text/);
  const text = compactRouteText(realTable());
  assert.match(routeLine(text.replace('entries ', 'entries\t')), /invalid: line 10: byte 0x09 is not printable ASCII/);
  assert.match(routeLine(text.replace(/\nend\n$/, '\nend\r\n')), /invalid: line \d+: byte 0x0d is not printable ASCII/);
});

test('a file larger than any real table is refused before it is read', () => {
  const dir = tempDir();
  const json = path.join(dir, 'decode_gemm.json');
  fs.writeFileSync(json, '');
  fs.truncateSync(json, MAX_TABLE_BYTES + 1); // sparse: nothing is written
  const v = withEnv(NO_KNOBS, () => guardTable(json, build));
  assert.is(v.line, `kpick: table ${json} refused: unreadable: ${MAX_TABLE_BYTES + 1} bytes, larger than any real table (limit ${MAX_TABLE_BYTES}); run promote again; using the defaults`);
  const route = path.join(dir, 'decode_gemm.route');
  fs.writeFileSync(route, '');
  fs.truncateSync(route, MAX_ROUTE_BYTES + 1);
  const ts = guardCompactRoute(route, build, process.env).line;
  assert.is(nativeVerdict(route), ts);
  assert.match(ts, /unreadable: 4194305 bytes, larger than any real table \(limit 4194304\)/);
});

test('a symlink to another folder is refused; one inside the table\'s folder is followed', () => {
  const table = realTable();
  const elsewhere = tempDir();
  fs.writeFileSync(path.join(elsewhere, 'decode_gemm.json'), tableText(table));
  fs.writeFileSync(path.join(elsewhere, 'decode_gemm.route'), compactRouteText(table));
  const here = tempDir();
  for (const name of ['decode_gemm.json', 'decode_gemm.route']) fs.symlinkSync(path.join(elsewhere, name), path.join(here, name));
  const json = withEnv(NO_KNOBS, () => guardTable(path.join(here, 'decode_gemm.json'), build));
  assert.is(json.kind, 'unreadable');
  assert.ok(json.line.includes(`unreadable: a symlink to another folder (${fs.realpathSync(path.join(elsewhere, 'decode_gemm.json'))})`), json.line);
  const routeFile = path.join(here, 'decode_gemm.route');
  const ts = guardCompactRoute(routeFile, build, process.env).line;
  assert.is(nativeVerdict(routeFile), ts);
  assert.match(ts, /unreadable: a symlink to another folder/);

  // a link to a sibling (say, a dated copy) is the same folder's table
  fs.writeFileSync(path.join(elsewhere, 'dated.route'), compactRouteText(table));
  fs.symlinkSync('dated.route', path.join(elsewhere, 'current.route'));
  assert.match(routeLine(compactRouteText(table), path.join(elsewhere, 'dated.route')), /loaded \d+ entries, dropped 0$/);
  const current = path.join(elsewhere, 'current.route');
  assert.is(nativeVerdict(current), guardCompactRoute(current, build, process.env).line);
  assert.match(nativeVerdict(current), /loaded \d+ entries, dropped 0$/);

  fs.symlinkSync(path.join(elsewhere, 'gone.route'), path.join(here, 'dangling.route'));
  const dangling = path.join(here, 'dangling.route');
  assert.is(nativeVerdict(dangling), guardCompactRoute(dangling, build, process.env).line);
  assert.match(nativeVerdict(dangling), /unreadable: a symlink to nothing/);
});

test('a folder or a FIFO in the table\'s place is refused without blocking', () => {
  const dir = tempDir();
  fs.mkdirSync(path.join(dir, 'decode_gemm.json'));
  assert.match(withEnv(NO_KNOBS, () => guardTable(path.join(dir, 'decode_gemm.json'), build)).line, /unreadable: not a regular file/);
  const fifo = path.join(dir, 'decode_gemm.route');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo failed');
  assert.is(nativeVerdict(fifo), guardCompactRoute(fifo, build, process.env).line);
  assert.match(nativeVerdict(fifo), /unreadable: not a regular file/);
});

test('stack-bound entries drop alone when the BLAS differs; the rest of the table is used', () => {
  const table = realTable();
  table.identity.blas = 'vendor-blas 1.0';
  const bound = entryOf(table, 'linear', 'bf16', 32, 64, 1);
  bound.candidates[bound.choice] = { ...bound.candidates[bound.choice]!, stack_bound: true };
  const { json, route } = bothForms(table);
  const n = table.entries.length;
  const summary = `loaded ${n - 1} entries, dropped 1 (1 stack-bound and the BLAS differs); note: tuned with blas "vendor-blas 1.0", this is "${build.identity.blas}"`;
  assert.ok(json.line.endsWith(summary), json.line);
  assert.ok(route.endsWith(summary), route);

  table.identity.blas = build.identity.blas; // same BLAS: the entry stands
  assert.ok(bothForms(table).json.line.endsWith(`loaded ${n} entries, dropped 0`));
});

test('another runtime is noted in the summary, not refused', () => {
  const table = realTable();
  table.identity.runtime = 'glibc 0.1';
  const { json, route } = bothForms(table);
  assert.is(json.kind, 'used');
  assert.ok(json.line.endsWith(`dropped 0; note: tuned with runtime "glibc 0.1", this is "${build.identity.runtime}"`), json.line);
  assert.ok(route.endsWith(`dropped 0; note: tuned with runtime "glibc 0.1", this is "${build.identity.runtime}"`), route);
});

test('judge: a choice whose rows range misses part of its bucket is dropped (a build whose kernel takes M<=4)', () => {
  const narrow: Build = {
    identity: build.identity,
    candidates: build.candidates.map((c) => (c.name === 'rowblk.r4' ? { ...c, rowsMax: 4 } : c)),
  };
  const entry = (bucket: 4 | 8) => ({ where: `b${bucket}`, op: 'linear' as const, dtype: 'bf16' as const, n: 8, k: 8, bucket, choice: 'rowblk.r4', status: 'ok' as const, parity: 'pass' as const, stack: false });
  const v = judge('t', { identity: build.identity, entries: [entry(4), entry(8)] }, narrow, {});
  assert.is(v.line, "kpick: table t: loaded 1 entries, dropped 1 (1 choice does not take these rows)");
  const unavailable: Build = { identity: build.identity, candidates: build.candidates.map((c) => (c.name === 'rowblk.r4' ? { ...c, available: false } : c)) };
  assert.is(judge('t', { identity: build.identity, entries: [entry(4)] }, unavailable, {}).line, 'kpick: table t: loaded 0 entries, dropped 1 (1 choice not available on this target)');
});

test.run();
