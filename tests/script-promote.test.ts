// scripts/promote.ts end to end: stores of synthetic records written here
// (tests/helpers/synthetic-records.ts), the script run with tsx as a child
// process, then the table on disk, stdout, stderr and the exit code checked.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { run } from './helpers/run-script.ts';
import { EXIT, UsageError } from '../lib/cli.ts';
import { identityTag } from '../lib/identity.ts';
import { readTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/promote.ts';
import { evenSamples, problem, syntheticRecord, SYNTHETIC_IDENTITY, writeStoreFile } from './helpers/synthetic-records.ts';


/** `tsx scripts/promote.ts ...args`, in process */
const runPromote = (args: string[]) => run('promote', args);

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

test('parseArgs: repeated --store, defaults and value checks', async () => {
  assert.equal(parseArgs(['--store', 'a', '--store', 'b']), { routeOnly: false, stores: ['a', 'b'], gate: 0.02, pdlRows: 128, identity: null, replace: false, out: null, tablesDir: 'tables', json: false, quiet: false });
  assert.equal(parseArgs(['--store', 'a', '--gate', '0.05', '--pdl-rows', '8', '--out', 'x.json', '--json', '--quiet']), {
    routeOnly: false,
    identity: null,
    replace: false,
    stores: ['a'],
    gate: 0.05,
    pdlRows: 8,
    out: 'x.json',
    tablesDir: 'tables',
    json: true,
    quiet: true,
  });
  assert.is((parseArgs(['--store', 'a', '--tables-dir', 't']) as { tablesDir: string }).tablesDir, 't');
  assert.equal(parseArgs(['--route-only', '--table', 't.json']), { routeOnly: true, table: 't.json', json: false, quiet: false });
  assert.throws(() => parseArgs(['--route-only']), (e: unknown) => e instanceof UsageError && /--route-only needs --table/.test(e.message));
  assert.throws(() => parseArgs(['--route-only', '--table', 't.json', '--store', 'a']), (e: unknown) => e instanceof UsageError && /--route-only takes only --table \(not --store\)/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--identity', 'xyz']), (e: unknown) => e instanceof UsageError && /--identity must be a tag/.test(e.message));
  for (const bad of ['-1', '0x4', '2e0']) assert.throws(() => parseArgs(['--store', 'a', '--pdl-rows', bad]), (e: unknown) => e instanceof UsageError && e.message === `--pdl-rows must be an integer in 0..128, got '${bad}'`);
  assert.throws(() => parseArgs([]), (e: unknown) => e instanceof UsageError && /--store/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--gate', '1.5']), (e: unknown) => e instanceof UsageError && /--gate/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--gate', 'fast']), (e: unknown) => e instanceof UsageError && /--gate/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--pdl-rows', 'x']), (e: unknown) => e instanceof UsageError && /--pdl-rows must be an integer in 0\.\.128, got 'x'/.test(e.message));
  assert.throws(() => parseArgs(['--store', 'a', '--bogus']), (e: unknown) => e instanceof UsageError && /bogus/.test(e.message));
});

test('writes the table at tables/<arch>/<device>/decode_gemm.json, summary on stderr, JSON lines on stdout', async () => {
  const dir = tempDir();
  const store = path.join(dir, 'store');
  writeSyntheticStore(store);
  const tables = path.join(dir, 'tables');
  const r = await runPromote(['--store', store, '--tables-dir', tables, '--json']);
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

test('pools two stores (each too small alone), warns on a corrupt line, --quiet leaves only the warning', async () => {
  const dir = tempDir();
  const three = (c: number) => evenSamples(c, 0.02, 3);
  writeStoreFile(path.join(dir, 'a'), 'sweep-a.jsonl', problem({ samples_us: three(100) }, [{ candidate: 'rowblk.r2', samples_us: three(80) }]));
  const b = writeStoreFile(path.join(dir, 'b'), 'sweep-b.jsonl', problem({ samples_us: three(100), seed: 2 }, [{ candidate: 'rowblk.r2', samples_us: three(80), seed: 2 }]));
  fs.appendFileSync(b, '{"v":1,"kind":"cand');
  const out = path.join(dir, 'out', 'table.json');

  const alone = await runPromote(['--store', path.join(dir, 'a'), '--out', out, '--quiet']);
  assert.is(alone.code, EXIT.ok, alone.stderr);
  assert.is(alone.stderr, '');
  const aloneTable = readTable(out);
  assert.ok('table' in aloneTable && aloneTable.table.entries[0]!.choice === 'plain');

  const pooled = await runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--out', out, '--quiet']);
  assert.is(pooled.code, EXIT.ok, pooled.stderr);
  assert.match(pooled.stderr, /^warning: skipped .*sweep-b\.jsonl:3: not JSON/);
  assert.is(pooled.stderr.trim().split('\n').length, 1);
  const pooledTable = readTable(out);
  assert.ok('table' in pooledTable);
  if (!('table' in pooledTable)) return;
  assert.is(pooledTable.table.entries[0]!.choice, 'rowblk.r2');
  assert.is(pooledTable.table.entries[0]!.candidates['rowblk.r2']!.samples, 6);
});

test('a store named twice, or a copy of its file, counts once: the same samples twice are no new evidence', async () => {
  const dir = tempDir();
  const three = (c: number) => evenSamples(c, 0.02, 3);
  const a = writeStoreFile(path.join(dir, 'a'), 'sweep-a.jsonl', problem({ samples_us: three(100) }, [{ candidate: 'rowblk.r2', samples_us: three(80) }]));
  const out = path.join(dir, 'table.json');
  const twice = await runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'a'), '--out', out, '--quiet']);
  assert.is(twice.code, EXIT.ok, twice.stderr);
  assert.is(twice.stderr, `warning: skipped 2 records of ${path.join(dir, 'a')} read already (a store named twice, or a copy of a store file): each counts once\n`);
  let read = readTable(out);
  assert.ok('table' in read && read.table.entries[0]!.choice === 'plain', 'too few samples alone: kept on the default');
  assert.ok('table' in read && read.table.entries[0]!.candidates['rowblk.r2']!.samples === 3);
  fs.copyFileSync(a, path.join(dir, 'a', 'sweep-a-copy.jsonl'));
  const copied = await runPromote(['--store', path.join(dir, 'a'), '--out', out, '--quiet', '--replace']);
  assert.is(copied.code, EXIT.ok, copied.stderr);
  assert.match(copied.stderr, /^warning: skipped 2 records of .* read already/);
  read = readTable(out);
  assert.ok('table' in read && read.table.entries[0]!.choice === 'plain');
});

test('records of another build in the store are skipped with a count and a tag, never a dead end; --identity picks them', async () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'a'));
  const rebuilt = { ...SYNTHETIC_IDENTITY, compiler: 'synthetic-cc 2.0 -O3' };
  writeStoreFile(path.join(dir, 'b'), 'sweep-b.jsonl', problem({ identity: rebuilt, at: '2025-02-01T00:00:00.000Z' }, [{ candidate: 'rowblk.r2', identity: rebuilt, at: '2025-02-01T00:00:00.000Z', samples_us: evenSamples(70, 0.02) }], { rows: 4 }));
  const out = path.join(dir, 'out', 'table.json');
  // the newest records are the build the store was resumed with
  const r = await runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--out', out, '--quiet']);
  assert.is(r.code, EXIT.ok, r.stderr);
  const tagA = identityTag(SYNTHETIC_IDENTITY);
  assert.is(r.stderr, `warning: skipped 5 records of another build, identity ${tagA} (compiler ("synthetic-cc 2.0 -O3" vs "synthetic-cc 1.0 -O3")); --identity ${tagA} promotes those instead\n`);
  let read = readTable(out);
  assert.ok('table' in read && read.table.identity.compiler === 'synthetic-cc 2.0 -O3' && read.table.entries.length === 1);

  const back = await runPromote(['--store', path.join(dir, 'a'), '--store', path.join(dir, 'b'), '--out', out, '--quiet', '--identity', tagA.slice(0, 6)]);
  assert.is(back.code, EXIT.ok, back.stderr);
  assert.match(back.stderr, `skipped 2 records of another build, identity ${identityTag(rebuilt)}`);
  assert.match(back.stderr, `held a table of another build (compiler ("synthetic-cc 1.0 -O3" vs "synthetic-cc 2.0 -O3")): its 1 entries cannot be merged and are replaced`);
  read = readTable(out);
  assert.ok('table' in read && read.table.identity.compiler === 'synthetic-cc 1.0 -O3' && read.table.entries.length === 2);

  const none = await runPromote(['--store', path.join(dir, 'a'), '--out', out, '--identity', 'abcdef']);
  assert.is(none.code, EXIT.usage);
  assert.match(none.stderr, new RegExp(`^promote: --identity abcdef matches 0 of the store's identities: ${tagA} \\(5 records, space synthetic-space-token, compiler "synthetic-cc 1\\.0 -O3"\\)\\n$`));
});

test('promote merges into the table there: entries the records do not cover stay, and the summary counts kept, replaced and added; --replace starts afresh', async () => {
  const dir = tempDir();
  const out = path.join(dir, 'table.json');
  writeStoreFile(path.join(dir, 'big'), 'sweep.jsonl', [
    ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]),
    ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }], { rows: 2 }),
    ...problem({ samples_us: evenSamples(100, 0.02) }, [], { n: 1024, k: 1024 }),
  ]);
  let r = await runPromote(['--store', path.join(dir, 'big'), '--out', out]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.match(r.stderr, `promote: ${out}: 3 entries: kept 0 from the table there, replaced 0, added 3\n`);

  // a small run (say `--model tiny` after the default run) adds, and keeps the rest
  writeStoreFile(path.join(dir, 'small'), 'sweep.jsonl', [
    ...problem({ samples_us: evenSamples(100, 0.02) }, [], { n: 64, k: 64 }),
    ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(100, 0.02) }]),
  ]);
  r = await runPromote(['--store', path.join(dir, 'small'), '--out', out]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.match(r.stderr, `promote: ${out}: 4 entries: kept 2 from the table there, replaced 1, added 1\n`);
  const read = readTable(out);
  assert.ok('table' in read);
  if (!('table' in read)) return;
  assert.equal(read.table.entries.map((e) => [e.n, e.bucket, e.choice]), [[64, 1, 'plain'], [1024, 1, 'plain'], [4096, 1, 'plain'], [4096, 2, 'rowblk.r2']]);
  // its route is compiled from the merged file: both readers see the same table
  assert.match(fs.readFileSync(out.replace(/json$/, 'route'), 'utf8'), /\nentries 4\n/);

  r = await runPromote(['--store', path.join(dir, 'small'), '--out', out, '--replace']);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.match(r.stderr, `promote: ${out}: 2 entries: started afresh (--replace), replaced 0, added 2\n`);
});

test('a refused table in the way is not written over without --replace', async () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'store'));
  const out = path.join(dir, 'table.json');
  fs.writeFileSync(out, '{"format": 1, "entr');
  const r = await runPromote(['--store', path.join(dir, 'store'), '--out', out]);
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, /^promote: \S+table\.json: the table there is refused \(invalid: not JSON .*\): --replace writes a fresh table over it\n$/);
  assert.is(fs.readFileSync(out, 'utf8'), '{"format": 1, "entr');
  assert.is((await runPromote(['--store', path.join(dir, 'store'), '--out', out, '--replace', '--quiet'])).code, EXIT.ok);
});

test('--route-only compiles the route of an edited JSON; a refused JSON exits 3, a missing one 2', async () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'store'));
  const out = path.join(dir, 'decode_gemm.json');
  assert.is((await runPromote(['--store', path.join(dir, 'store'), '--out', out, '--quiet'])).code, EXIT.ok);
  const route = path.join(dir, 'decode_gemm.route');
  fs.writeFileSync(out, fs.readFileSync(out, 'utf8').replace('"choice": "rowblk.r2"', '"choice": "plain"'));
  const r = await runPromote(['--route-only', '--table', out]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, `wrote ${route} from ${out}\n`);
  assert.not.match(fs.readFileSync(route, 'utf8'), 'rowblk.r2');

  fs.writeFileSync(out, '{"format": 9}');
  const before = fs.readFileSync(route, 'utf8');
  const refused = await runPromote(['--route-only', '--table', out]);
  assert.is(refused.code, EXIT.refused);
  assert.is(refused.stderr, `promote: ${out} refused: newer format (format 9, this kpick reads 1); no route written\n`);
  assert.is(fs.readFileSync(route, 'utf8'), before);
  const missing = await runPromote(['--route-only', '--table', path.join(dir, 'none.json')]);
  assert.is(missing.code, EXIT.usage);
});

test('one promote at a time per table: <table>.lock held by a live process exits 2 naming its pid, the table untouched; a dead pid\'s lock is taken over', async () => {
  const dir = tempDir();
  const store = path.join(dir, 'store');
  writeSyntheticStore(store);
  const out = path.join(dir, 'decode_gemm.json');
  assert.is((await runPromote(['--store', store, '--out', out, '--quiet'])).code, EXIT.ok);
  const files = ['decode_gemm.json', 'decode_gemm.route', 'decode_gemm.html'].map((f) => path.join(dir, f));
  const before = files.map((f) => fs.readFileSync(f, 'utf8'));
  const lock = `${out}.lock`;
  // a promote running into it: this test process is a live pid on this host
  const held = `${process.pid}\n${os.hostname()}\n2025-01-01T00:00:00.000Z\n`;
  fs.writeFileSync(lock, held);
  const refusal = `promote: table ${out} is in use by another promote (pid ${process.pid}, ${lock}); wait for it, or remove the lock if no promote runs\n`;
  let r = await runPromote(['--store', store, '--out', out, '--replace']);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, refusal);
  assert.is(r.stdout, '');
  // --route-only writes the .route beside the table: the same lock
  r = await runPromote(['--route-only', '--table', out]);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, refusal);
  assert.equal(files.map((f) => fs.readFileSync(f, 'utf8')), before, 'the table, its route and report are untouched');
  assert.is(fs.readFileSync(lock, 'utf8'), held, 'the holder keeps its lock');

  // its promote was killed: the lock names a dead pid, and is taken over
  const dead = Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
  fs.writeFileSync(lock, `${dead}\n${os.hostname()}\n2025-01-01T00:00:00.000Z\n`);
  r = await runPromote(['--store', store, '--out', out, '--replace', '--quiet']);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, '');
  assert.not.equal(fs.readFileSync(out, 'utf8'), before[0], 'a fresh table written');
  assert.equal(fs.readdirSync(dir).sort(), ['decode_gemm.html', 'decode_gemm.json', 'decode_gemm.route', 'store'], 'the lock is released, nothing left beside the table');
  fs.writeFileSync(lock, `${dead}\n${os.hostname()}\n2025-01-01T00:00:00.000Z\n`);
  r = await runPromote(['--route-only', '--table', out]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.not.ok(fs.existsSync(lock));
});

test('--out a FIFO, a directory or a device node: exit 2, one line, untouched; a symlink is written through and stays a link', async () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'store'));
  const fifo = path.join(dir, 'fifo.json');
  assert.is(spawnSync('mkfifo', [fifo]).status, 0);
  let r = await runPromote(['--store', path.join(dir, 'store'), '--out', fifo]);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, `promote: ${fifo} is a FIFO: refusing to replace it, nothing written\n`);
  assert.ok(fs.lstatSync(fifo).isFIFO());
  r = await runPromote(['--store', path.join(dir, 'store'), '--out', dir]);
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, 'is a directory: refusing to replace it');
  const node = path.join(dir, 'full.json');
  if (spawnSync('mknod', [node, 'c', '1', '7']).status === 0) {
    r = await runPromote(['--store', path.join(dir, 'store'), '--out', node]);
    assert.is(r.code, EXIT.usage);
    assert.is(r.stderr, `promote: ${node} is a character device: refusing to replace it, nothing written\n`);
    assert.ok(fs.lstatSync(node).isCharacterDevice());
  } else {
    // mknod needs root: tests/write-file.test.ts covers the refusal itself then
    console.log('  no device node made here (mknod needs root): --out a device node not checked end to end');
  }
  const real = path.join(dir, 'real.json');
  const link = path.join(dir, 'link.json');
  fs.symlinkSync('real.json', link);
  r = await runPromote(['--store', path.join(dir, 'store'), '--out', link, '--quiet']);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.ok(fs.lstatSync(link).isSymbolicLink());
  assert.ok('table' in readTable(real));
});

test('a FIFO or a directory where the .route or the report goes: exit 2, one line, before the table is written', async () => {
  const dir = tempDir();
  writeSyntheticStore(path.join(dir, 'store'));
  const out = path.join(dir, 'decode_gemm.json');
  assert.is((await runPromote(['--store', path.join(dir, 'store'), '--out', out, '--quiet'])).code, EXIT.ok);
  const table = fs.readFileSync(out, 'utf8');
  const route = path.join(dir, 'decode_gemm.route');
  fs.rmSync(route);
  assert.is(spawnSync('mkfifo', [route]).status, 0);
  let r = await runPromote(['--store', path.join(dir, 'store'), '--out', out, '--replace']);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, `promote: ${route} is a FIFO: refusing to replace it, nothing written\n`);
  assert.ok(fs.lstatSync(route).isFIFO());
  fs.rmSync(route);
  const report = path.join(dir, 'decode_gemm.html');
  fs.rmSync(report);
  fs.mkdirSync(report);
  r = await runPromote(['--store', path.join(dir, 'store'), '--out', out, '--replace']);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, `promote: ${report} is a directory: refusing to replace it, nothing written\n`);
  assert.is(fs.readFileSync(out, 'utf8'), table, 'the table is untouched');
  assert.not.ok(fs.existsSync(route), 'no route written');
});

test('a *.jsonl in the store that is no regular file is skipped with a warning, not read; a store whose steps/ is no folder exits 2', async () => {
  const dir = tempDir();
  const store = path.join(dir, 'store');
  writeSyntheticStore(store);
  fs.mkdirSync(path.join(store, 'old.jsonl'));
  const out = path.join(dir, 'decode_gemm.json');
  let r = await runPromote(['--store', store, '--out', out, '--quiet']);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, `warning: skipped ${path.join(store, 'old.jsonl')}: a directory, not a store file\n`);
  const table = fs.readFileSync(out, 'utf8');
  fs.rmdirSync(path.join(store, 'old.jsonl'));
  fs.writeFileSync(path.join(store, 'steps'), 'not a folder');
  r = await runPromote(['--store', store, '--out', out, '--quiet']);
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, new RegExp(`^promote: cannot read store ${path.join(store, 'steps')}: ENOTDIR[^\n]*\n$`));
  assert.is(fs.readFileSync(out, 'utf8'), table, 'the table is untouched');
});

test('missing store, empty store and unwritable output: exit 2, one line, nothing written', async () => {
  const dir = tempDir();
  const out = path.join(dir, 'out.json');

  const missing = await runPromote(['--store', path.join(dir, 'nope'), '--out', out]);
  assert.is(missing.code, EXIT.usage);
  assert.is(missing.stderr, `promote: store ${path.join(dir, 'nope')} does not exist\n`);

  fs.mkdirSync(path.join(dir, 'empty'));
  const empty = await runPromote(['--store', path.join(dir, 'empty'), '--out', out]);
  assert.is(empty.code, EXIT.usage);
  assert.is(empty.stderr, `promote: store ${path.join(dir, 'empty')} has no records\n`);
  assert.not.ok(fs.existsSync(out));

  writeSyntheticStore(path.join(dir, 'store'));
  fs.writeFileSync(path.join(dir, 'a-file'), 'not a folder');
  const blocked = path.join(dir, 'a-file', 'table.json');
  const unwritable = await runPromote(['--store', path.join(dir, 'store'), '--out', blocked]);
  assert.is(unwritable.code, EXIT.usage);
  assert.is(unwritable.stderr.trim().split('\n').length, 1);
  assert.match(unwritable.stderr, `promote: ${blocked}: cannot write (`);
  assert.is(fs.readFileSync(path.join(dir, 'a-file'), 'utf8'), 'not a folder');
});

test.run();
