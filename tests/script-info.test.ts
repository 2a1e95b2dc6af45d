// scripts/info.ts against the cpu build (make runs before the tests): the
// library and identity it reports are the ones loaded in this process, the
// table path follows the identity, and the verdict is the guard's on tables
// written here (missing, used with a dropped entry, refused for another space).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { UsageError } from '../lib/cli.ts';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import { ABI_VERSION } from '../lib/ffi-types.ts';
import { identityFromInfo } from '../lib/identity.ts';
import { TABLE_FORMAT, type Identity, type Table } from '../lib/schema.ts';
import { archDir, deviceSlug, writeTable } from '../lib/table.ts';
import { writeRouteOf } from '../lib/route.ts';
import { builtLibraries, formatBytes, gatherInfo, type InfoReport } from '../lib/info.ts';
import { parseArgs } from '../scripts/info.ts';
import { ROOT, run } from './helpers/run-script.ts';

const CPU_LIB = path.join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so');

/** `tsx scripts/info.ts ...args`, in process */
const runInfo = (args: string[], env: Record<string, string> = {}) => run('info', args, { env });

function cpuIdentity(): Identity {
  return identityFromInfo(loadKpick({ lib: CPU_LIB }).info());
}

async function withTempDir(body: (dir: string) => unknown): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-info-'));
  try {
    await body(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function tableFor(identity: Identity, choice: string): Table {
  const result = { median_us: 10, p25_us: 9.9, p75_us: 10.1, samples: 9, nodes: 1, params: {}, parity: 'pass', rel_err: 1e-3, stack_bound: false, status: 'ok' } as const;
  return {
    format: TABLE_FORMAT,
    identity,
    created: '2025-01-01T00:00:00.000Z',
    gate: { min_gain: 0.02 },
    entries: [{ op: 'linear', dtype: 'bf16', n: 64, k: 64, bucket: 1, default: 'plain', choice, reason: 'test', floor_us: 5, candidates: { plain: result, [choice]: result } }],
  };
}

const quietEnv = { KPICK_FORCE: undefined, KPICK_NO_BLASLT: undefined };

test('parseArgs: defaults, --backend values, --tables-dir', async () => {
  assert.equal(parseArgs([]), { backend: null, tablesDir: 'tables', json: false, quiet: false });
  assert.equal(parseArgs(['--backend', 'cpu', '--tables-dir', 't', '--json']), { backend: 'cpu', tablesDir: 't', json: true, quiet: false });
  assert.throws(() => parseArgs(['--backend', 'tpu']), (e: unknown) => e instanceof UsageError && /--backend must be one of cpu, cuda, hip, got 'tpu'/.test(e.message));
  assert.throws(() => parseArgs(['--bogus']), (e: unknown) => e instanceof UsageError && /bogus/.test(e.message));
});

test('builtLibraries lists libkpick-*.so by name, marks test builds, ignores the rest', async () => {
  await withTempDir(async (dir) => {
    for (const f of ['libkpick-hip.so', 'libkpick-cpu-test.so', 'libkpick-cpu.so', 'libkpick-cpu.so.tmp', 'other.so']) fs.writeFileSync(path.join(dir, f), '');
    assert.equal(builtLibraries(dir), [
      { name: 'cpu', path: path.join(dir, 'libkpick-cpu.so'), test: false },
      { name: 'cpu-test', path: path.join(dir, 'libkpick-cpu-test.so'), test: true },
      { name: 'hip', path: path.join(dir, 'libkpick-hip.so'), test: false },
    ]);
  });
  assert.equal(builtLibraries('/nonexistent/kpick-build'), []);
  assert.is(formatBytes(512), '512 B');
  assert.is(formatBytes(3 * 1024 ** 3), '3.0 GiB');
});

test('--json: one object with the library loaded here, its identity, builds, table path, verdict and memory', async () => {
  await withTempDir(async (tables) => {
    const r = await runInfo(['--json', '--tables-dir', tables], { KPICK_BACKEND: 'cpu' });
    assert.is(r.code, 0, r.stderr);
    assert.is(r.stderr, '');
    const lines = r.stdout.trim().split('\n');
    assert.is(lines.length, 1);
    const j = JSON.parse(lines[0]!) as InfoReport;
    const identity = cpuIdentity();
    assert.is(j.library?.path, CPU_LIB);
    assert.is(j.library?.backend, 'cpu');
    assert.equal(j.identity, identity);
    assert.ok(j.built.some((b) => b.name === 'cpu' && !b.test));
    assert.ok(j.built.some((b) => b.name === 'cpu-test' && b.test));
    const expected = path.join(tables, archDir(identity.arch), deviceSlug(identity.device), 'decode_gemm.json');
    assert.equal(j.table, { path: expected, exists: false, route_path: expected.replace(/\.json$/, '.route'), route_exists: false });
    assert.equal(j.verdict, { kind: 'missing', used: false, line: `kpick: no table at ${expected}: using the defaults`, kept: 0, dropped: 0 });
    // both readers: the C route on the .route beside it says the same
    assert.equal(j.route_verdict, { used: false, line: `kpick: no table at ${expected.replace(/\.json$/, '.route')}: using the defaults`, kept: 0, dropped: 0, agree: true, disagreement: null });
    assert.ok(j.memory!.total_bytes > 0 && j.memory!.free_bytes > 0 && j.memory!.free_bytes <= j.memory!.total_bytes);
    assert.ok(j.candidates!.available > 0 && j.candidates!.available <= j.candidates!.total);
    assert.equal(j.env, { KPICK_BACKEND: 'cpu' });
  });
});

test('without a backend it finds a build in build/ and reports that build', async () => {
  const r = await runInfo(['--json', '--tables-dir', path.join(os.tmpdir(), 'kpick-no-tables')]);
  assert.is(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as InfoReport;
  assert.is(path.dirname(j.library!.path), DEFAULT_BUILD_DIR);
  assert.is(path.basename(j.library!.path), `libkpick-${j.library!.backend}.so`);
  assert.is(j.identity!.backend, j.library!.backend);
});

test("the verdict is the guard's: a table that loads (one entry dropped), one refused for another space", async () => {
  await withTempDir(async (tables) => {
    const identity = cpuIdentity();
    const file = path.join(tables, archDir(identity.arch), deviceSlug(identity.device), 'decode_gemm.json');
    assert.ok('path' in writeTable(file, tableFor(identity, 'no.such.kernel')));
    const used = gatherInfo({ backend: 'cpu', tablesDir: tables }, quietEnv);
    assert.is(used.table?.exists, true);
    assert.equal(used.verdict, {
      kind: 'used',
      used: true,
      line: `kpick: table ${file}: loaded 0 entries, dropped 1 (1 choice not in this build's space)`,
      kept: 0,
      dropped: 1,
    });
    // no .route beside it: an engine would not use it, and info says so
    assert.equal([used.route_verdict?.used, used.route_verdict?.agree], [false, false]);
    assert.match(used.route_verdict!.disagreement!, /the readers disagree: the JSON is used, \S+\.route is not/);
    assert.ok('path' in writeRouteOf(file));
    const both = gatherInfo({ backend: 'cpu', tablesDir: tables }, quietEnv);
    assert.equal([both.route_verdict?.used, both.route_verdict?.agree, both.route_verdict?.dropped], [true, true, 1]);
    assert.ok('path' in writeTable(file, tableFor({ ...identity, space: 'stale-space' }, 'plain')));
    const refused = gatherInfo({ backend: 'cpu', tablesDir: tables }, quietEnv);
    assert.is(refused.verdict?.kind, 'space');
    assert.is(refused.verdict?.used, false);
    assert.match(refused.verdict!.line, /refused: other space \(table stale-space, here [0-9a-f]+\); the kernels changed: run the tuner again/);
  });
});

test('human view on stderr, stdout empty', async () => {
  const r = await runInfo(['--tables-dir', path.join(os.tmpdir(), 'kpick-no-tables')], { KPICK_BACKEND: 'cpu' });
  assert.is(r.code, 0, r.stderr);
  assert.is(r.stdout, '');
  const labels = r.stderr.split('\n').filter((l) => /^\S/.test(l)).map((l) => l.split(/\s+/)[0]);
  assert.equal(labels, ['library', 'identity', 'target', 'memory', 'built', 'space', 'table', 'route', 'verdict', 'C', 'env']);
  assert.match(r.stderr, /C route   kpick: no table at .*\.route: using the defaults/);
  assert.match(r.stderr, new RegExp(`library   ${CPU_LIB.replace(/[.]/g, '\\.')} \\(cpu, ABI ${ABI_VERSION}\\)`));
  assert.match(r.stderr, /verdict   kpick: no table at .*: using the defaults/);
  assert.match(r.stderr, /env       KPICK_BACKEND=cpu/);
});

test('no loadable library: says what was tried and exits 2 (a bad environment); --json keeps the builds and nulls the rest', async () => {
  const missing = path.join(os.tmpdir(), 'kpick-no-such-lib.so');
  const human = await runInfo([], { KPICK_LIB: missing });
  assert.is(human.code, 2);
  assert.match(human.stderr, new RegExp(`^library   none loaded: no usable libkpick \\(tried ${missing.replace(/[.]/g, '\\.')}: no such file\\)`));
  const json = await runInfo(['--json'], { KPICK_LIB: missing });
  assert.is(json.code, 2);
  const j = JSON.parse(json.stdout) as InfoReport;
  assert.is(j.library, null);
  assert.match(j.load_error!, /no such file/);
  assert.equal([j.identity, j.table, j.verdict, j.route_verdict, j.memory], [null, null, null, null, null]);
  const foo = await runInfo([], { KPICK_BACKEND: 'foo' });
  assert.is(foo.code, 2);
  assert.match(foo.stderr, /^library   none loaded: KPICK_BACKEND must be one of cpu, cuda, hip, got 'foo'/);
  assert.ok(j.built.length > 0);
});

test('--help shows examples, --version the package version, bad usage exits 2 in one line', async () => {
  const help = await runInfo(['--help']);
  assert.is(help.code, 0);
  assert.match(help.stdout, /Examples:[^]*tsx scripts\/info\.ts --backend cpu --json/);
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  assert.match((await runInfo(['--version'])).stdout, new RegExp(`^info/${pkg.version.replace(/\./g, '\\.')} `));
  const bad = await runInfo(['--backend', 'tpu']);
  assert.is(bad.code, 2);
  assert.is(bad.stderr, "info: --backend must be one of cpu, cuda, hip, got 'tpu'\n");
});

test.run();
