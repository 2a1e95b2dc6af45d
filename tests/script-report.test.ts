// scripts/report.ts end to end: a hand-written table (tests/helpers/report-fixture.ts)
// or a synthetic store, the script run with tsx as a child process, then the
// page on disk, stdout, stderr and the exit code checked.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { run } from './helpers/run-script.ts';
import { UsageError } from '../lib/cli.ts';
import type { Table } from '../lib/schema.ts';
import { writeTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/report.ts';
import { fixtureTable } from './helpers/report-fixture.ts';
import { evenSamples, problem, syntheticRecord, writeStoreFile } from './helpers/synthetic-records.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** `tsx scripts/report.ts ...args`, in process */
const runReport = (args: string[]) => run('report', args);

const count = (html: string, re: RegExp) => (html.match(new RegExp(re.source, 'g')) ?? []).length;

async function withTempDir(body: (dir: string) => unknown): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-script-report-'));
  try {
    await body(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function fixtureFile(dir: string, table: Table = fixtureTable()): string {
  const file = path.join(dir, 'decode_gemm.json');
  const written = writeTable(file, table);
  assert.ok('path' in written, JSON.stringify(written));
  return file;
}

test('parseArgs: --table or --store, the page beside the table by default, value checks', async () => {
  assert.equal(parseArgs(['--table', 't/decode_gemm.json']), {
    source: { kind: 'table', file: 't/decode_gemm.json' },
    out: 't/decode_gemm.html',
    metric: 'gbps',
    maxCharted: 12,
    json: false,
    quiet: false,
  });
  const stores = parseArgs(['--store', 'a', '--store', 'b', '--gate', '0.05', '--metric', 'us', '--max-charted', '5', '--json']);
  assert.equal(stores, { source: { kind: 'store', dirs: ['a', 'b'], gate: 0.05 }, out: 'report.html', metric: 'us', maxCharted: 5, json: true, quiet: false });
  const usage = (argv: string[], re: RegExp) => assert.throws(() => parseArgs(argv), (e: unknown) => e instanceof UsageError && re.test(e.message));
  usage([], /either --table <file> or --store/);
  usage(['--table', 'x.json', '--store', 'a'], /not both/);
  usage(['--table', 'x.json', '--metric', 'fps'], /--metric must be one of gbps, us/);
  usage(['--table', 'x.json', '--gate', '0.1'], /--gate applies to --store only/);
  usage(['--store', 'a', '--gate', '2'], /--gate/);
  // plain decimal, as every script's numbers: an exponent form is refused
  usage(['--store', 'a', '--gate', '2e-2'], /^--gate must be a fraction in 0\.\.1, got '2e-2'$/);
  usage(['--table', 'x.json', '--max-charted', '0'], /--max-charted must be an integer in 1..1000, got '0'/);
  usage(['--table', 'x.json', '--bogus'], /bogus/);
});

test('--table writes the page beside it and says so in one line on stderr; stdout stays empty', async () => {
  await withTempDir(async (dir) => {
    const table = fixtureFile(dir);
    const r = await runReport(['--table', table]);
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stdout, '');
    const page = path.join(dir, 'decode_gemm.html');
    assert.is(r.stderr, `wrote ${page}: 2 shapes, 6 entries, 2 parity failures, read ceiling 559.2 GB/s\n`);
    const html = fs.readFileSync(page, 'utf8');
    assert.is(count(html, /<svg class="chart"/), 2);
    assert.is(count(html, /<circle class="pt"/), 21);
    assert.ok(html.includes(`<td>source</td><td>${table}</td>`));
  });
});

test('--json prints one line: the page, its counts and the per-bucket summary', async () => {
  await withTempDir(async (dir) => {
    const out = path.join(dir, 'page.html');
    const r = await runReport(['--table', fixtureFile(dir), '--out', out, '--json', '--quiet', '--metric', 'us']);
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stderr, '');
    const lines = r.stdout.trim().split('\n');
    assert.is(lines.length, 1);
    const j = JSON.parse(lines[0]!);
    assert.is(j.out, out);
    assert.is(j.metric, 'us');
    assert.is(j.shapes, 2);
    assert.is(j.parity_failures, 2);
    assert.equal(
      j.buckets.map((b: { bucket: unknown }) => b.bucket),
      [1, 2, 4, 8, 'all'],
    );
    assert.ok(Math.abs(j.buckets[0].speedup - 1.25) < 1e-12);
    assert.ok(fs.readFileSync(out, 'utf8').includes('µs per call'));
  });
});

test('--store promotes in memory and writes the page only, no table', async () => {
  await withTempDir(async (dir) => {
    const store = path.join(dir, 'store');
    writeStoreFile(store, 'sweep-1.jsonl', [
      ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]),
      ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(100, 0.02) }], { rows: 2 }),
      syntheticRecord({ kind: 'floor', candidate: 'floor', samples_us: evenSamples(60, 0.02) }),
    ]);
    const out = path.join(dir, 'report.html');
    const r = await runReport(['--store', store, '--out', out]);
    assert.is(r.code, 0, r.stderr);
    assert.equal(fs.readdirSync(dir).sort(), ['report.html', 'store']);
    assert.equal(fs.readdirSync(store), ['sweep-1.jsonl']);
    const html = fs.readFileSync(out, 'utf8');
    assert.is(count(html, /<svg class="chart"/), 1);
    assert.is(count(html, /<circle class="pt"/), 4); // plain and rowblk.r2 at M=1 and 2
    assert.is(count(html, /<circle class="pick"/), 2);
    assert.ok(html.includes('pick at M=1: rowblk.r2'));
    assert.ok(html.includes('pick at M=2: plain'));
    assert.ok(html.includes('promoted in memory, not written'));
  });
});

test('bad input: one line on stderr and exit 2, nothing written', async () => {
  await withTempDir(async (dir) => {
    const oneLine = (r: { code: number | null; stderr: string }, re: RegExp) => {
      assert.is(r.code, 2, r.stderr);
      assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, re);
    };
    oneLine(await runReport(['--table', path.join(dir, 'none.json')]), /^report: .*none\.json: cannot read/);
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ ...fixtureTable(), entries: [{ ...fixtureTable().entries[0], bucket: 3 }] }));
    oneLine(await runReport(['--table', bad]), /^report: .*bad\.json: entries\.0\.bucket/);
    fs.mkdirSync(path.join(dir, 'empty'));
    oneLine(await runReport(['--store', path.join(dir, 'empty')]), /^report: store .*empty has no records/);
    const table = fixtureFile(dir);
    fs.writeFileSync(path.join(dir, 'file'), '');
    oneLine(await runReport(['--table', table, '--out', path.join(dir, 'file', 'page.html')]), /^report: .*page\.html: cannot write/);
    assert.equal(fs.readdirSync(dir).sort(), ['bad.json', 'decode_gemm.json', 'empty', 'file']);
  });
});

test('--out naming the table, or a record file of the store, exits 2 with one line and leaves it as it was', async () => {
  await withTempDir(async (dir) => {
    const table = fixtureFile(dir);
    const before = fs.readFileSync(table, 'utf8');
    let r = await runReport(['--table', table, '--out', table]);
    assert.is(r.code, 2, r.out);
    assert.is(r.stderr, `report: --out ${table} is the table: refusing to replace it, nothing written\n`);
    assert.is(fs.readFileSync(table, 'utf8'), before);
    const store = path.join(dir, 'store');
    writeStoreFile(store, 'sweep-1.jsonl', problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]));
    const records = path.join(store, 'sweep-1.jsonl');
    const stored = fs.readFileSync(records, 'utf8');
    r = await runReport(['--store', store, '--out', records]);
    assert.is(r.code, 2, r.out);
    assert.is(r.stderr, `report: --out ${records} is a file of the store: refusing to replace it, nothing written\n`);
    assert.is(fs.readFileSync(records, 'utf8'), stored);
    assert.equal(fs.readdirSync(store), ['sweep-1.jsonl']);
  });
});

test('--out a FIFO or a directory: exit 2, one line, left as it was; a symlink is written through and stays a link', async () => {
  await withTempDir(async (dir) => {
    const table = fixtureFile(dir);
    const fifo = path.join(dir, 'page.html');
    assert.is(spawnSync('mkfifo', [fifo]).status, 0);
    let r = await runReport(['--table', table, '--out', fifo]);
    assert.is(r.code, 2);
    assert.is(r.stderr, `report: ${fifo} is a FIFO: refusing to replace it, nothing written\n`);
    assert.ok(fs.lstatSync(fifo).isFIFO());
    const sub = path.join(dir, 'sub');
    fs.mkdirSync(sub);
    r = await runReport(['--table', table, '--out', sub]);
    assert.is(r.code, 2);
    assert.is(r.stderr, `report: ${sub} is a directory: refusing to replace it, nothing written\n`);
    const link = path.join(dir, 'link.html');
    fs.symlinkSync('real.html', link);
    r = await runReport(['--table', table, '--out', link, '--quiet']);
    assert.is(r.code, 0, r.stderr);
    assert.ok(fs.lstatSync(link).isSymbolicLink());
    assert.match(fs.readFileSync(path.join(dir, 'real.html'), 'utf8'), /<html/i);
  });
});

test('--help shows examples and --version the package version', async () => {
  const help = await runReport(['--help']);
  assert.is(help.code, 0);
  assert.match(help.stdout, /Examples:[^]*--table tables\//);
  const version = await runReport(['--version']);
  assert.is(version.code, 0);
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  assert.match(version.stdout, new RegExp(`^report/${pkg.version.replace(/\./g, '\\.')} `));
});

test.run();
