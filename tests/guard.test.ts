// lib/guard.ts: every refusal of DESIGN.md, in order, on the JSON table; and
// wherever the compact form can say the same thing, the C twin (route.c) gives
// the very same verdict line as the TS reader of that form.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DISPATCH_KNOBS, duplicateKey, guardTable, judge, MAX_TABLE_BYTES, type Build, type Verdict } from '../lib/guard.ts';
import { compileRoute, guardCompactRoute, jsonPathFor, MAX_ROUTE_BYTES, writeRouteOf } from '../lib/route.ts';
import type { Table } from '../lib/schema.ts';
import { tableText } from '../lib/table.ts';
import { build, candidateResult, entryOf, fp8Here, kpick, MOE_SHAPES, native, nativeVerdict, onDevice, realTable, routeTextOf, tempDir, withEnv } from './helpers/route-tables.ts';
import { sealRoute } from '../lib/route.ts';

/** A compact text edited by hand, sealed again so the edit reaches the parser. */
const sealLines = (text: string) => sealRoute(text.slice(0, text.lastIndexOf('end ')));

const NO_KNOBS = { KPICK_FORCE: undefined, KPICK_NO_BLASLT: undefined };

/** Writes text as a JSON table file; returns its verdict. */
function jsonVerdict(text: string, name = 'decode_gemm.json'): { file: string; verdict: Verdict } {
  const file = path.join(tempDir(), name);
  fs.writeFileSync(file, text);
  return { file, verdict: withEnv(NO_KNOBS, () => guardTable(file, build)) };
}

/**
 * The compact text through both readers; asserts they give one line, and
 * returns it. `table`: the JSON written beside it (the one the text was
 * compiled from), else the real table's.
 */
function routeLine(text: string, file = path.join(tempDir(), 'decode_gemm.route'), table: Table = realTable()): string {
  fs.writeFileSync(file, text);
  if (!fs.existsSync(jsonPathFor(file))) fs.writeFileSync(jsonPathFor(file), tableText(table));
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
    return { json: guardTable(file, build), route: routeLine(routeTextOf(table), path.join(dir, 'decode_gemm.route'), table), file };
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
  const text = routeTextOf(realTable());
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

  const text = routeTextOf(realTable());
  assert.match(routeLine(text.replace(/^kpick-route 2\n/, 'kpick-route 0\n')), /refused: older format \(route 0, this kpick reads 2\); run promote again/);
  assert.match(routeLine(text.replace(/^kpick-route 2\n/, 'kpick-route 7\n')), /refused: newer format \(route 7, this kpick reads 2\); upgrade kpick/);
  assert.match(routeLine(replaceLine(text, /\nformat 1\n/, '\nformat 2\n')), /refused: newer format \(format 2, this kpick reads 1\)/);
  assert.match(routeLine(text.replace(/^kpick-route 2\n/, 'kpick-rout 2\n')), /invalid: line 1: not a kpick route file/);
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

test('a choice of another numeric class than its dtype takes drops its entry, in both readers', () => {
  if (!fp8Here) {
    assert.ok(onDevice, 'the CPU build computes fp8: this test runs here');
    return; // a GPU build without fp8 kernels has no fp8 entries
  }
  const table = realTable();
  const fp8 = entryOf(table, 'linear', 'fp8', 48, 80, 1);
  fp8.choice = 'rowblk.r4'; // a bf16/fp16 kernel cannot read e4m3 weights
  fp8.candidates['rowblk.r4'] = candidateResult();
  const bf16 = entryOf(table, 'gated', 'bf16', 24, 64, 2);
  bf16.choice = 'gated.w8a16.plain'; // nor an fp8 kernel bf16 ones
  bf16.candidates['gated.w8a16.plain'] = candidateResult();
  // the same on the moe op: fp8 experts on a 16-bit kernel, 16-bit experts on an fp8 one
  const moe = MOE_SHAPES.length > 0 ? [entryOf(table, 'moe', 'fp8', 16, 32, 4), entryOf(table, 'moe', 'bf16', 16, 32, 4)] : [];
  const wrongMoe = ['moe.grouped.r4', 'moe.w8a16.grouped.r4'];
  moe.forEach((e, i) => {
    e.choice = wrongMoe[i]!;
    e.candidates[e.choice] = candidateResult();
  });
  const dropped = 2 + moe.length;
  const { json, route } = bothForms(table);
  const summary = `loaded ${table.entries.length - dropped} entries, dropped ${dropped} (${dropped} choice does not take this dtype)`;
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
  // line 12 is entries[0]
  assert.ok(route.includes(`refused: invalid: line ${12 + last} repeats line ${12 + 5} (${key}); run promote again`), route);
});

test('a moe entry is keyed by its experts and top-k: a repeat of the key is refused, another E or top-k is another entry', () => {
  if (MOE_SHAPES.length === 0) {
    assert.ok(onDevice, 'the CPU build has a moe default: this test runs here');
    return; // a GPU build: no moe candidate yet
  }
  const table = realTable();
  const at = table.entries.findIndex((e) => e.op === 'moe');
  const moe = table.entries[at]!;
  assert.ok(moe.experts === MOE_SHAPES[0]!.experts && moe.topk === MOE_SHAPES[0]!.topk, JSON.stringify(moe));
  // the same n, k and bucket with another top-k is a key of its own: used by both readers
  const other = structuredClone(table);
  other.entries.push({ ...structuredClone(moe), topk: 1 });
  const used = bothForms(other);
  assert.is(used.json.kind, 'used', used.json.line);
  assert.match(used.route, /loaded \d+ entries, dropped 0/);
  // the same key twice: refused, the key named with its E and top-k, in both forms
  const twice = structuredClone(table);
  twice.entries.push(structuredClone(moe));
  const last = twice.entries.length - 1;
  const key = `moe ${moe.dtype} ${moe.n}x${moe.k} E${moe.experts} top${moe.topk}, bucket ${moe.bucket}`;
  const { json, route } = bothForms(twice);
  assert.ok(json.line.includes(`refused: invalid: entries[${last}] repeats entries[${at}] (${key}); run promote again`), json.line);
  assert.ok(route.includes(`refused: invalid: line ${12 + last} repeats line ${12 + at} (${key}); run promote again`), route);
});

test('experts and top-k belong to moe entries only, top-k within the experts: anything else is invalid', () => {
  if (MOE_SHAPES.length === 0) {
    assert.ok(onDevice, 'the CPU build has a moe default: this test runs here');
    return; // a GPU build: no moe candidate yet
  }
  const table = realTable();
  const cases: [string, (t: Table) => void][] = [
    ['a dense entry with experts', (t) => Object.assign(t.entries.find((e) => e.op === 'linear')!, { experts: 8, topk: 2 })],
    ['a moe entry without them', (t) => delete t.entries.find((e) => e.op === 'moe')!.experts],
    ['top-k over the experts', (t) => Object.assign(t.entries.find((e) => e.op === 'moe')!, { topk: 9, experts: 8 })],
  ];
  for (const [what, edit] of cases) {
    const t = structuredClone(table);
    edit(t);
    assert.match(jsonVerdict(tableText(t)).verdict.line, /refused: invalid: .*experts and topk are given on op moe \(topk <= experts\) and on no other op/, what);
  }
  // the compact form: a moe line of 9 fields, and top-k over the experts, in both readers' words
  const text = routeTextOf(table);
  const line = text.split('\n').find((l) => l.startsWith('moe '))!;
  const lineNo = text.split('\n').indexOf(line) + 1;
  const short = sealLines(text.replace(line, line.split(' ').filter((_, i) => i !== 2 && i !== 3).join(' ')));
  assert.match(routeLine(short), new RegExp(`invalid: line ${lineNo}: expected 11 fields \\(moe dtype experts topk n k bucket choice status parity stack\\), got 9`));
  const f = line.split(' ');
  const over = sealLines(text.replace(line, [f[0], f[1], '4', '5', ...f.slice(4)].join(' ')));
  assert.match(routeLine(over), new RegExp(`invalid: line ${lineNo}: topk must be an integer in 1\\.\\.32, at most experts`));
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
  const text = routeTextOf(realTable());
  assert.match(routeLine(text.replace('entries ', 'entries\t')), /invalid: line 11: byte 0x09 is not printable ASCII/);
  assert.match(routeLine(text.replace(/(\nend [0-9a-f]{64})\n$/, '$1\r\n')), /invalid: line \d+: byte 0x0d is not printable ASCII/);
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
  fs.writeFileSync(path.join(elsewhere, 'decode_gemm.route'), routeTextOf(table));
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
  fs.writeFileSync(path.join(elsewhere, 'dated.route'), routeTextOf(table));
  fs.symlinkSync('dated.route', path.join(elsewhere, 'current.route'));
  fs.symlinkSync('dated.json', path.join(elsewhere, 'current.json')); // its JSON goes with it
  assert.match(routeLine(routeTextOf(table), path.join(elsewhere, 'dated.route'), table), /loaded \d+ entries, dropped 0$/);
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

// ---- one table, one truth: the route is the compiled form of the JSON beside it ----

/** A table's JSON and route (compiled from it) in a fresh folder. */
function promoted(table: Table): { json: string; route: string } {
  const dir = tempDir();
  const json = path.join(dir, 'decode_gemm.json');
  fs.writeFileSync(json, tableText(table));
  const written = writeRouteOf(json);
  assert.ok('path' in written, JSON.stringify(written));
  return { json, route: path.join(dir, 'decode_gemm.route') };
}

const fixCommand = (json: string) => `run \`npx tsx scripts/promote.ts --route-only --table ${json}\``;

test('a JSON edited after its route was written: both route readers refuse the route, naming the command that compiles it again', () => {
  const table = realTable();
  const { json, route } = promoted(table);
  const edited = entryOf(table, 'linear', 'bf16', 48, 80, 8);
  edited.choice = 'splitk.s4';
  edited.candidates['splitk.s4'] = candidateResult();
  fs.writeFileSync(json, tableText(table));
  const line = withEnv(NO_KNOBS, () => routeLine(fs.readFileSync(route, 'latin1'), route));
  assert.match(line, new RegExp(`^kpick: table ${route} refused: ${json} changed since the route was written \\(sha256 [0-9a-f]{12}, the route was made from [0-9a-f]{12}\\); `));
  assert.ok(line.endsWith(`; ${fixCommand(json)}; using the defaults`), line);
  // the JSON itself is still used: the scripts route by the edit, an engine by nothing stale
  assert.is(withEnv(NO_KNOBS, () => guardTable(json, build)).kind, 'used');

  // the one command: the route follows the edit, and both readers use it
  assert.equal(writeRouteOf(json), { path: route });
  withEnv(NO_KNOBS, () => {
    assert.match(routeLine(fs.readFileSync(route, 'latin1'), route), /loaded \d+ entries, dropped 0$/);
    native.load(route);
    assert.is(kpick.candidates()[native.lookup('linear', 'bf16', 48, 80, 7)]!.name, 'splitk.s4');
    native.load(null);
  });
});

test('a route edited by hand (its JSON untouched) is refused by both readers: its checksum no longer matches', () => {
  const table = realTable();
  const { json, route } = promoted(table);
  const text = fs.readFileSync(route, 'latin1');
  const e = table.entries[0]!;
  const edited = text.replace(`\n${e.op} ${e.dtype} ${e.n} ${e.k} ${e.bucket} ${e.choice} `, `\n${e.op} ${e.dtype} ${e.n} ${e.k} ${e.bucket} ${e.op === 'linear' ? 'splitk.s4' : 'gated.splitk.s4'} `);
  assert.not.equal(edited, text);
  const line = withEnv(NO_KNOBS, () => routeLine(edited, route));
  assert.is(line, `kpick: table ${route} refused: edited since it was written (its checksum does not match); ${fixCommand(json)}; using the defaults`);
  // ...and so is a route whose end line was "fixed" to any other sum
  const resummed = text.replace(/\nend [0-9a-f]{64}\n$/, `\nend ${'0'.repeat(64)}\n`);
  assert.match(withEnv(NO_KNOBS, () => routeLine(resummed, route)), /refused: edited since it was written/);
  assert.match(withEnv(NO_KNOBS, () => routeLine(text.replace(/\nend [0-9a-f]{64}\n$/, '\nend\n'), route)), /invalid: line \d+: expected 'end <sha256 of the lines above: 64 hex digits>' after \d+ entries/);
  assert.match(withEnv(NO_KNOBS, () => routeLine(text.replace(/\njson [0-9a-f]{64}\n/, '\njson 12ab\n'), route)), /invalid: line 2: expected 'json <sha256 of the JSON table: 64 hex digits>'/);
});

test('a route without its JSON beside it, or beside something that is not a file, is refused by both readers', () => {
  const table = realTable();
  const { json, route } = promoted(table);
  const text = fs.readFileSync(route, 'latin1');
  fs.rmSync(json);
  const away = 'a route is used only beside the JSON it was made from: restore it or run promote again';
  assert.is(withEnv(NO_KNOBS, () => {
    const ts = guardCompactRoute(route, build, process.env).line;
    assert.is(nativeVerdict(route), ts);
    return ts;
  }), `kpick: table ${route} refused: no JSON table beside it (${json}); ${away}; using the defaults`);
  fs.mkdirSync(json);
  const line = withEnv(NO_KNOBS, () => routeLine(text, route));
  assert.is(line, `kpick: table ${route} refused: ${json} unreadable: not a regular file; ${away}; using the defaults`);
});

test('the JSON\'s refusals reach the route: other space, compiler or device, and a knob, refuse the compiled route in C as in TS', () => {
  for (const [field, words] of [['space', /other space/], ['compiler', /other compiler/], ['device', /other device/]] as const) {
    const table = realTable();
    table.identity[field] = `not-${field}-here`;
    const { json, route } = promoted(table);
    withEnv(NO_KNOBS, () => {
      assert.match(guardTable(json, build).line, words);
      assert.match(routeLine(fs.readFileSync(route, 'latin1'), route), words);
    });
  }
  const { route } = promoted(realTable());
  assert.match(withEnv({ ...NO_KNOBS, KPICK_FORCE: 'splitk.s4' }, () => routeLine(fs.readFileSync(route, 'latin1'), route)), /refused: KPICK_FORCE=splitk\.s4 is set/);
});

test('a JSON the reader refuses compiles to no route: compileRoute and writeRouteOf say why and write nothing', () => {
  const dir = tempDir();
  const json = path.join(dir, 'decode_gemm.json');
  const table = realTable() as unknown as Record<string, unknown>;
  table.format = 2;
  fs.writeFileSync(json, JSON.stringify(table));
  const r = writeRouteOf(json);
  assert.ok('error' in r && r.exit === 'refused' && /newer format \(format 2, this kpick reads 1\); no route written/.test(r.error), JSON.stringify(r));
  fs.writeFileSync(json, '{"format": 1, "format": 1}');
  assert.match(String((compileRoute(fs.readFileSync(json)) as { error: string }).error), /duplicate key "format"/);
  assert.equal(fs.readdirSync(dir), ['decode_gemm.json'], 'no route written');
  const missing = writeRouteOf(path.join(dir, 'none.json'));
  assert.ok('error' in missing && missing.exit === 'usage', JSON.stringify(missing));
});

test.run();
