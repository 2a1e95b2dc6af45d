// scripts/promote.ts end to end: stores of synthetic records written here
// (tests/helpers/synthetic-records.ts), the script run with tsx as a child
// process, then the table on disk, stdout, stderr and the exit code checked.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EXIT, UsageError } from '../lib/cli.ts';
import { readTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/promote.ts';
import { evenSamples, problem, syntheticRecord, SYNTHETIC_IDENTITY, writeStoreFile } from './helpers/synthetic-records.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

function runPromote(args: string[]): { code: number | null; stdout: string; stderr: string } {
  // uvu sets FORCE_COLOR for itself; the script must see a plain NO_COLOR run.
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete env.FORCE_COLOR;
  delete env.DEBUG;
  const r = spawnSync(TSX, ['scripts/promote.ts', ...args], { cwd: ROOT, encoding: 'utf8', env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-promote-'));
}

/** A store where rowblk.r2 is 25 % faster than plain at M=1 and ties at M=2. */
function writeSyntheticStore(dir: string): void {
  writeStoreFile(dir, 'sweep-1.jsonl', [
    ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]),
    ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(100, 0.02) }], { rows: 2 }),
    syntheticRecord({ kind: 'floor', candidate: 'floor', samples_us: evenSamples(60, 0.02) }),
  ]);
}

test('parseArgs: repeated --store, defaults and value checks', () => {
  assert.equal(parseArgs(['--store', 'a', '--store', 'b']), { stores: ['a', 'b'], gate: 0.02, pdlRows: 128, out: null, tablesDir: 'tables', json: false, quiet: false });
  assert.equal(parseArgs(['--store', 'a', '--gate', '0.05', '--pdl-rows', '8', '--out', 'x.json', '--json', '--quiet']), {
    stores: ['a'],
    gate: 0.05,
    pdlRows: 8,
    out: 'x.json',
    tablesDir: 'tables',
    json: true,
    quiet: true,
  });
  assert.is(parseArgs(['--store', 'a', '--tables-dir', 't'])!.tablesDir, 't');
  assert.throws(() => parseArgs([]), (e: unknown) => e instanceof UsageError && /--store/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--gate', '1.5']), (e: unknown) => e instanceof UsageError && /--gate/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--gate', 'fast']), (e: unknown) => e instanceof UsageError && /--gate/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--pdl-rows', 'x']), (e: unknown) => e instanceof UsageError && /--pdl-rows must be an integer in 0\.\.128, got 'x'/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--bogus']), (e: unknown) => e instanceof UsageError && /bogus/.test(e.message));
});

test('writes the table at tables/<arch>/<device>/decode_gemm.json, summary on stderr, JSON lines on stdout', () => {
  const dir = tempDir();
  const store = path.join(dir, 'store');
  writeSyntheticStore(store);
  const tables = path.join(dir, 'tables');
  const r = runPromote(['--store', store, '--tables-dir', tables, '--json']);
  assert.is(r.code, EXIT.ok, r.stderr);
  const file = path.join(tables, 'synthetic_arch', 'synthetic-device-1', 'decode_gemm.json');
  const read = readTable(file);
  assert.ok('table' in read, JSON.stringify(read));
  if (!('table' in read)) return;
  assert.equal(read.table.identity, SYNTHETIC_IDENTITY);
  assert.equal(read.table.gate, { min_gain: 0.02, pdl_rows: 128 });
  assert.equal(read.table.entries.map((e) => [e.bucket, e.choice]), [[1, 'rowblk.r2'], [2, 'plain']]);
  assert.is(read.table.entries[0]!.floor_us, 60);

  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.map((l) => [l.bucket, l.choice, l.moved]), [[1, 'rowblk.r2', true], [2, 'plain', false]]);
  assert.is(lines[0].reason, 'picked rowblk.r2: +25.0 % over plain');
  assert.match(r.stderr, `${file}: 2 entries, 1 moved off the default`);
  assert.not.match(r.stderr, '\u001b[', 'no colour under NO_COLOR');
  // the table, the compact route the C router reads, and the HTML report; no temp files
  assert.equal(fs.readdirSync(path.dirname(file)).sort(), ['decode_gemm.html', 'decode_gemm.json', 'decode_gemm.route']);
  assert.match(fs.readFileSync(path.join(path.dirname(file), 'decode_gemm.route'), 'utf8'), 'rowblk.r2');
});

test('pools two stores (each too small alone), warns on a corrupt line, --quiet leaves only the warning', () => {
  const dir = tempDir();
  const three = (c: number) => evenSamples(c, 0.02, 3);
  writeStoreFile(path.join(dir, 'a'), 'sweep-a.jsonl', problem({ samples_us: three(100) }, [{ candidate: 'rowblk.r2', samples_us: three(80) }]));
  const b = writeStoreFile(path.join(dir, 'b'), 'sweep-b.jsonl', problem({ samples_us: three(100), seed: 2 }, [{ candidate: 'rowblk.r2', samples_us: three(80), seed: 2 }]));
  fs.appendFileSync(b, '{"v":1,"kind":"cand');
  const out = path.join(dir, 'out', 'table.json');

  const alone = runPromote(['--store', path.join(dir, 'a'), '--out', out, '--quiet']);
  assert.is(alone.code, EXIT.ok, alone.stderr);
  assert.is(alone.stderr, '');
  const aloneTable = readTable(out);
  assert.ok('table' in aloneTable && aloneTable.table.entries[0]!.choice === 'plain');

  const pooled = runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--out', out, '--quiet']);
  assert.is(pooled.code, EXIT.ok, pooled.stderr);
  assert.match(pooled.stderr, /^warning: skipped .*sweep-b\.jsonl:3: not JSON/);
  assert.is(pooled.stderr.trim().split('\n').length, 1);
  const pooledTable = readTable(out);
  assert.ok('table' in pooledTable);
  if (!('table' in pooledTable)) return;
  assert.is(pooledTable.table.entries[0]!.choice, 'rowblk.r2');
  assert.is(pooledTable.table.entries[0]!.candidates['rowblk.r2']!.samples, 6);
});

test('mixed identities: exit 2, one line naming the field, nothing written', () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'a'));
  writeStoreFile(path.join(dir, 'b'), 'sweep-b.jsonl', problem({ identity: { ...SYNTHETIC_IDENTITY, runtime: 'synthetic-runtime 2.0' } }, []));
  const out = path.join(dir, 'out', 'table.json');
  const r = runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--out', out]);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr.trim().split('\n').length, 1);
  assert.match(r.stderr, /^promote: the records mix identities: runtime \("synthetic-runtime 1\.0" vs "synthetic-runtime 2\.0"\)/);
  assert.not.ok(fs.existsSync(path.join(dir, 'out')));
});

test('missing store, empty store and unwritable output: exit 2, one line, nothing written', () => {
  const dir = tempDir();
  const out = path.join(dir, 'out.json');

  const missing = runPromote(['--store', path.join(dir, 'nope'), '--out', out]);
  assert.is(missing.code, EXIT.usage);
  assert.is(missing.stderr, `promote: store ${path.join(dir, 'nope')} does not exist\n`);

  fs.mkdirSync(path.join(dir, 'empty'));
  const empty = runPromote(['--store', path.join(dir, 'empty'), '--out', out]);
  assert.is(empty.code, EXIT.usage);
  assert.is(empty.stderr, `promote: store ${path.join(dir, 'empty')} has no records\n`);
  assert.not.ok(fs.existsSync(out));

  writeSyntheticStore(path.join(dir, 'store'));
  fs.writeFileSync(path.join(dir, 'a-file'), 'not a folder');
  const blocked = path.join(dir, 'a-file', 'table.json');
  const unwritable = runPromote(['--store', path.join(dir, 'store'), '--out', blocked]);
  assert.is(unwritable.code, EXIT.usage);
  assert.is(unwritable.stderr.trim().split('\n').length, 1);
  assert.match(unwritable.stderr, `promote: ${blocked}: cannot write (`);
  assert.is(fs.readFileSync(path.join(dir, 'a-file'), 'utf8'), 'not a folder');
});

test.run();
