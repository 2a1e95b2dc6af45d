// The table file: built from synthetic records, written atomically, read back
// through the schema with one-line `path: message` errors.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import * as v from 'valibot';
import { COMPILER_MAX, Identity, TABLE_FORMAT, type StoreRecord, type Table, type TableEntry } from '../lib/schema.ts';
import { archDir, buildTable, defaultTablePath, deviceSlug, mergeTables, parseTable, readTable, tableText, writeTable } from '../lib/table.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
import { evenSamples, problem, syntheticRecord, SYNTHETIC_IDENTITY } from './helpers/synthetic-records.ts';

const CREATED = new Date('2025-02-03T04:05:06.000Z');

function syntheticStore(): StoreRecord[] {
  return [
    ...problem({ samples_us: evenSamples(100, 0.02) }, [
      { candidate: 'rowblk.r2', params: { rows: 2 }, samples_us: evenSamples(80, 0.02) },
      { candidate: 'splitk.s4', params: { split: 4 }, nodes: 2, samples_us: evenSamples(70, 0.02) },
    ]),
    syntheticRecord({ kind: 'floor', candidate: 'floor', samples_us: evenSamples(50, 0.02) }),
    ...problem({ samples_us: evenSamples(200, 0.02) }, [{ candidate: 'rowblk.r2', params: { rows: 2 }, samples_us: evenSamples(199, 0.02) }], { rows: 8, n: 1024 }),
    ...problem({ candidate: 'gated.plain', nodes: 2 }, [{ candidate: 'gated.rowblk.r4', samples_us: evenSamples(60, 0.02) }], { op: 'gated' }),
  ];
}

function built(records = syntheticStore(), created = CREATED): Table {
  const result = buildTable(records, { gate: 0.02, created });
  if ('error' in result) throw new Error(result.error);
  return result.table;
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-table-'));
}

test('buildTable: header from the records, entries sorted, every candidate kept', () => {
  const table = built();
  assert.is(table.format, TABLE_FORMAT);
  assert.equal(table.identity, SYNTHETIC_IDENTITY);
  assert.is(table.created, '2025-02-03T04:05:06.000Z');
  assert.equal(table.gate, { min_gain: 0.02, pdl_rows: 128 });
  assert.equal(
    table.entries.map((e) => `${e.op} ${e.n} ${e.bucket} ${e.choice}`),
    ['gated 4096 1 gated.rowblk.r4', 'linear 1024 8 plain', 'linear 4096 1 rowblk.r2'],
  );
  const m1 = table.entries[2]!;
  assert.equal(Object.keys(m1.candidates), ['plain', 'rowblk.r2', 'splitk.s4']);
  assert.is(m1.floor_us, 50);
  assert.is(m1.candidates['splitk.s4']!.median_us, 70);
  assert.equal(m1.candidates['splitk.s4']!.params, { split: 4 });
});

test('buildTable: mixed identities is an error and builds nothing', () => {
  const records = [...syntheticStore(), syntheticRecord({ identity: { ...SYNTHETIC_IDENTITY, space: 'other-space' }, rows: 4 })];
  const result = buildTable(records, { gate: 0.02, created: CREATED });
  assert.ok('error' in result && /mix identities: space/.test(result.error));
});

test('default path: tables/<arch>/<device-slug>/decode_gemm.json', () => {
  assert.is(defaultTablePath('tables', SYNTHETIC_IDENTITY), path.join('tables', 'synthetic_arch', 'synthetic-device-1', 'decode_gemm.json'));
  assert.is(deviceSlug('NVIDIA H200 (141 GB)'), 'nvidia-h200-141-gb');
  assert.is(deviceSlug('///'), 'unnamed-device');
  assert.is(archDir('sm_90'), 'sm_90');
  assert.is(archDir('gfx942:sramecc+:xnack-'), 'gfx942-sramecc-xnack-');
  assert.is(archDir('..'), 'unnamed-arch');
});

test('write then read gives back the same table', () => {
  const dir = tempDir();
  const file = path.join(dir, 'a', 'b', 'decode_gemm.json');
  const table = built();
  assert.equal(writeTable(file, table), { path: file });
  assert.equal(readTable(file), { table });
});

test('atomic write: no temp file is left beside the table', () => {
  const dir = tempDir();
  const file = path.join(dir, 'decode_gemm.json');
  writeTable(file, built());
  writeTable(file, built(syntheticStore(), new Date('2026-01-01T00:00:00Z')));
  assert.equal(fs.readdirSync(dir), ['decode_gemm.json']);
  assert.match(fs.readFileSync(file, 'utf8'), /"created": "2026-01-01T00:00:00.000Z"/);
});

test('atomic write: a failure before the rename leaves the old file intact and no temp file', () => {
  const dir = tempDir();
  const file = path.join(dir, 'decode_gemm.json');
  writeTable(file, built());
  const before = fs.readFileSync(file, 'utf8');
  let tempSeen = '';
  const result = writeTable(file, built(syntheticStore(), new Date('2026-01-01T00:00:00Z')), {
    beforeRename: (temp) => {
      tempSeen = temp;
      assert.ok(fs.existsSync(temp), 'the temp file is complete before the rename');
      throw new Error('simulated crash before rename');
    },
  });
  assert.equal(result, { error: `${file}: cannot write (simulated crash before rename)` });
  assert.is(path.dirname(tempSeen), dir);
  assert.is(fs.readFileSync(file, 'utf8'), before);
  assert.equal(fs.readdirSync(dir), ['decode_gemm.json']);
});

test('atomic write: a target that is a folder fails with one line and leaves no temp file', () => {
  const dir = tempDir();
  const target = path.join(dir, 'decode_gemm.json');
  fs.mkdirSync(path.join(target, 'inside'), { recursive: true });
  const result = writeTable(target, built());
  assert.ok('error' in result);
  if (!('error' in result)) return;
  assert.is(result.error, `${target} is a directory: refusing to replace it, nothing written`);
  assert.equal(fs.readdirSync(dir), ['decode_gemm.json']);
  assert.ok(fs.statSync(target).isDirectory());
});

test('writeTable refuses a table that fails the schema and writes nothing', () => {
  const dir = tempDir();
  const file = path.join(dir, 'decode_gemm.json');
  const table = built();
  const broken = { ...table, entries: [{ ...table.entries[0]!, floor_us: Number.NaN }] };
  const result = writeTable(file, broken);
  assert.ok('error' in result && result.error.startsWith(`${file}: refusing to write an invalid table (entries.0.floor_us: `), JSON.stringify(result));
  assert.equal(fs.readdirSync(dir), []);
});

test('deterministic: the same records in any order give the same text; only created differs', () => {
  const records = syntheticStore();
  const a = tableText(built(records));
  const b = tableText(built([...records].reverse()));
  assert.is(a, b);
  const later = tableText(built(records, new Date('2030-01-01T00:00:00Z')));
  assert.is.not(later, a);
  const withoutCreated = (text: string) => text.replace(/"created": "[^"]*"/, '"created": ""');
  assert.is(withoutCreated(later), withoutCreated(a));
});

test('deterministic: pooled stores give the same table whichever store is read first', () => {
  const storeA = problem({ samples_us: evenSamples(100, 0.02, 3) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02, 3) }]);
  const storeB = problem({ samples_us: evenSamples(101, 0.02, 4), seed: 2, at: '2025-01-02T00:00:00.000Z' }, [
    { candidate: 'rowblk.r2', samples_us: evenSamples(81, 0.02, 4), seed: 2, at: '2025-01-02T00:00:00.000Z', params: { rows: 2 } },
  ]);
  assert.is(tableText(built([...storeA, ...storeB])), tableText(built([...storeB, ...storeA])));
});

/** The written text of a good table, parsed back to a plain value to break. */
function goodValue(): any {
  return JSON.parse(tableText(built()));
}

function rejectedWith(value: unknown, pathPattern: RegExp): void {
  const result = parseTable(value, 'some/table.json');
  assert.ok('error' in result, 'expected a refusal');
  if (!('error' in result)) return;
  assert.ok(result.error.startsWith('some/table.json: '), result.error);
  assert.match(result.error, pathPattern);
  assert.not.match(result.error, /\n/);
}

test('schema accepts a written table', () => {
  const result = parseTable(goodValue(), 'x');
  assert.ok('table' in result);
});

test('schema rejects wrong types with the path in the message', () => {
  const value = goodValue();
  value.entries[0].n = '4096';
  rejectedWith(value, /entries\.0\.n: /);
  const other = goodValue();
  other.gate.min_gain = 'two percent';
  rejectedWith(other, /gate\.min_gain: /);
});

test('schema rejects missing fields with the path in the message', () => {
  const value = goodValue();
  delete value.entries[1].choice;
  rejectedWith(value, /entries\.1\.choice: /);
  const noIdentity = goodValue();
  delete noIdentity.identity.space;
  rejectedWith(noIdentity, /identity\.space: /);
});

test('schema rejects extra fields with the path in the message', () => {
  const value = goodValue();
  value.entries[0].candidates['gated.plain'].speedup = 2;
  rejectedWith(value, /entries\.0\.candidates\.gated\.plain\.speedup: /);
  const top = goodValue();
  top.comment = 'hand edited';
  rejectedWith(top, /comment: /);
});

test('schema rejects negative and NaN times with the path in the message', () => {
  const negative = goodValue();
  negative.entries[2].candidates['rowblk.r2'].median_us = -1;
  rejectedWith(negative, /entries\.2\.candidates\.rowblk\.r2\.median_us: /);
  const nan = goodValue();
  nan.entries[2].floor_us = Number.NaN;
  rejectedWith(nan, /entries\.2\.floor_us: /);
  const badBucket = goodValue();
  badBucket.entries[0].bucket = 3;
  rejectedWith(badBucket, /entries\.0\.bucket: /);
});

test('readTable: missing file, bad JSON and a bad table are one-line errors, never throws', () => {
  const dir = tempDir();
  const missing = path.join(dir, 'none.json');
  const missingResult = readTable(missing);
  assert.ok('error' in missingResult && missingResult.error.startsWith(`${missing}: cannot read (ENOENT`));

  const broken = path.join(dir, 'broken.json');
  fs.writeFileSync(broken, '{"format": 1, "entries": [');
  const brokenResult = readTable(broken);
  assert.ok('error' in brokenResult && brokenResult.error.startsWith(`${broken}: not JSON (`));

  const wrong = path.join(dir, 'wrong.json');
  fs.writeFileSync(wrong, JSON.stringify({ format: 1 }));
  const wrongResult = readTable(wrong);
  assert.ok('error' in wrongResult && wrongResult.error.startsWith(`${wrong}: identity: `), JSON.stringify(wrongResult));

  assert.ok('error' in readTable(dir), 'a folder is not a table');

  const big = path.join(dir, 'big.json');
  fs.writeFileSync(big, '{"format": 1}');
  assert.equal(readTable(big, 8), { error: `${big}: 13 bytes, larger than any real table (limit 8)` });
});

test('readTable: a device is refused before it is read (/dev/zero never ends)', () => {
  const result = readTable('/dev/zero');
  assert.equal(result, { error: '/dev/zero: not a regular file' });
});

test('mergeTables: entries the fresh table does not cover stay, covered ones are replaced, new ones added, in table order', () => {
  const entry = (n: number, bucket: 1 | 2, choice: string): TableEntry => ({ op: 'linear', dtype: 'bf16', n, k: 64, bucket, default: 'plain', choice, reason: choice, floor_us: null, candidates: {} });
  const base = { format: TABLE_FORMAT, identity: SYNTHETIC_IDENTITY, created: '2025-01-01T00:00:00.000Z', gate: { min_gain: 0.02 } };
  const old: Table = { ...base, entries: [entry(64, 1, 'old-a'), entry(64, 2, 'old-b'), entry(128, 1, 'old-c')] };
  const fresh: Table = { ...base, created: '2025-02-01T00:00:00.000Z', entries: [entry(32, 1, 'new-d'), entry(64, 2, 'new-b')] };
  const m = mergeTables(old, fresh);
  assert.equal([m.kept, m.replaced, m.added], [2, 1, 1]);
  assert.equal(m.table.entries.map((e) => [e.n, e.bucket, e.choice]), [[32, 1, 'new-d'], [64, 1, 'old-a'], [64, 2, 'new-b'], [128, 1, 'old-c']]);
  assert.is(m.table.created, fresh.created);
  assert.equal([mergeTables(null, fresh).kept, mergeTables(null, fresh).added], [0, 2]);
});

test('the compiler is named by what it reports: make with CC=cc and CC=gcc gives one identity, and the library carries it', () => {
  const id = (cc: string) => spawnSync('make', ['-s', 'compiler-id', `CC=${cc}`], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cc = id('cc');
  assert.match(cc, /^gcc \d+\.\d+\.\d+/);
  assert.is(id('gcc'), cc);
  const info = loadKpick({ lib: path.join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') }).info();
  assert.ok(info.compiler.startsWith(`${cc} -O3`), `${info.compiler} / ${cc}`);
});

test('an identity\'s compiler may fill the library\'s 255 bytes (nvcc, the wgmma pass and a vendor gcc reach 236), not more', () => {
  const real = 'nvcc 13.0.88 -O3 -std=c++17 -arch=sm_90 -Xcompiler -fPIC (wgmma.hip: -gencode=arch=compute_90a,code=sm_90a -DKPICK_WGMMA_BUILT); gcc 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) -O2 -std=gnu11 -fPIC -pthread -Wall -Wextra -Wno-unused-parameter';
  assert.ok(v.safeParse(Identity, { ...SYNTHETIC_IDENTITY, compiler: real }).success);
  assert.ok(v.safeParse(Identity, { ...SYNTHETIC_IDENTITY, compiler: 'c'.repeat(COMPILER_MAX) }).success);
  assert.not.ok(v.safeParse(Identity, { ...SYNTHETIC_IDENTITY, compiler: 'c'.repeat(COMPILER_MAX + 1) }).success);
});

test.run();
