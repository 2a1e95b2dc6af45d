// The few runs that start a real process, as a user does: what the in-process
// suites (tests/helpers/run-script.ts) cannot see is the process itself: the
// exit code node leaves, stdout through a real pipe, stdin read from one.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readTable } from '../lib/table.ts';
import { ROOT } from './helpers/run-script.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-e2e-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** `tsx <script> ...args` as its own process, stdout and stderr through pipes. */
function tsx(script: string, args: string[], options: { env?: Record<string, string>; input?: string } = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...options.env };
  for (const name of ['KPICK_LIB', 'KPICK_BACKEND', 'KPICK_FORCE', 'KPICK_NO_BLASLT', 'FORCE_COLOR', 'DEBUG']) if (!(options.env && name in options.env)) delete env[name];
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, env, encoding: 'utf8', input: options.input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('npm start (scripts/check.ts): the main job sweeps, checks parity, promotes and finds its table usable', () => {
  const store = join(scratch, 'store');
  const tables = join(scratch, 'tables');
  const r = tsx('scripts/check.ts', ['--model', 'tiny', '--rows', '1,2', '--store', store, '--tables-dir', tables, '--samples', '2', '--rounds', '3', '--copies', '2', '--backend', 'cpu']);
  assert.is(r.code, 0, r.stderr);
  for (const step of ['sweep', 'parity', 'promote', 'refuse-check']) assert.match(r.stderr, `== check: ${step}`);
  assert.match(r.stderr, /parity: \d+ checks of \d+ candidates; \d+ pass, 0 fail/);
  const [file] = readdirSync(tables, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('decode_gemm.json')).map((f) => join(tables, f));
  assert.ok(file, 'a table was written');
  const read = readTable(file!);
  assert.ok('table' in read, 'error' in read ? read.error : '');
  // tiny: 5 shapes (4 linear + gate_up) x 2 buckets
  assert.is(read.table.entries.length, 10);
  assert.ok(existsSync(file!.replace(/\.json$/, '.route')));
  assert.match(r.stderr, /table .*decode_gemm\.json: loaded 10 entries/);
});

test('npm start -- --model tiny-moe: sweep, parity (both routings), promote and refuse-check take the moe layer, keyed by E and top-k', () => {
  const store = join(scratch, 'moe-store');
  const tables = join(scratch, 'moe-tables');
  const r = tsx('scripts/check.ts', ['--model', 'tiny-moe', '--rows', '1,2', '--store', store, '--tables-dir', tables, '--samples', '2', '--rounds', '3', '--copies', '2', '--backend', 'cpu']);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stderr, /parity: \d+ checks of \d+ candidates; \d+ pass, 0 fail/);
  const [file] = readdirSync(tables, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('decode_gemm.json')).map((f) => join(tables, f));
  const read = readTable(file!);
  assert.ok('table' in read, 'error' in read ? read.error : '');
  // tiny-moe: qkv, o, router, lm_head and the experts x 2 buckets
  assert.is(read.table.entries.length, 10);
  const moe = read.table.entries.filter((e) => e.op === 'moe');
  assert.equal(moe.map((e) => [e.experts, e.topk, e.n, e.k, e.bucket, e.default]), [[8, 2, 128, 256, 1, 'moe.loop'], [8, 2, 128, 256, 2, 'moe.loop']]);
  assert.match(readFileSync(file!.replace(/\.json$/, '.route'), 'utf8'), /^moe bf16 8 2 128 256 1 /m);
  assert.match(r.stderr, /table .*decode_gemm\.route: loaded 10 entries, dropped 0/);
  // and serve-bench on the table just made: the moe block in the step, both arms, the fp64 step check, greedy identity
  const bench = tsx('scripts/serve-bench.ts', ['--model', 'tiny-moe', '--tables-dir', tables, '--backend', 'cpu', '--c', '1,2', '--context', '16', '--steps', '3', '--runs', '1', '--identity-steps', '6', '--check-step', '--json']);
  assert.is(bench.code, 0, bench.stderr);
  const lines = bench.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.find((l) => l.kind === 'step-check')?.checks.map((c: { arm: string; pass: boolean }) => [c.arm, c.pass]), [['default', true], ['table', true]]);
  const rows = lines.filter((l) => l.kind === 'row');
  assert.equal(rows.map((x) => x.c), [1, 2]);
  for (const row of rows) {
    assert.equal(Object.keys(row.default.route), ['qkv', 'o', 'lm_head', 'router', 'experts']);
    assert.is(row.default.route.experts, 'moe.loop');
    assert.is(row.table.route.experts, moe.find((e) => e.bucket === row.c)!.choice);
    assert.ok(['identical', 'explained'].includes(row.identity.status), row.identity.why);
  }
});

test('sweep --json | ...: every stored record comes out whole on a pipe, and promote makes a table of the store', () => {
  const store = join(scratch, 'pipe-store');
  const sweep = tsx('scripts/sweep.ts', ['--model', 'tiny', '--rows', '1', '--copies', '2', '--samples', '2', '--rounds', '1', '--store', store, '--json', '--quiet'], { env: { KPICK_BACKEND: 'cpu' } });
  assert.is(sweep.code, 0, sweep.stderr);
  const [stored] = readdirSync(store).filter((f) => f.endsWith('.jsonl'));
  assert.is(sweep.stdout, readFileSync(join(store, stored!), 'utf8'), 'stdout carries exactly the stored lines');
  const out = join(scratch, 'pipe-table.json');
  const promote = tsx('scripts/promote.ts', ['--store', store, '--out', out, '--quiet']);
  assert.is(promote.code, 0, promote.stderr);
  const read = readTable(out);
  assert.ok('table' in read, 'error' in read ? read.error : '');
  assert.is(read.table.entries.length, 5, "tiny's 5 shapes at rows 1");
});

test('a missing library and a KPICK_BACKEND naming no backend leave exit code 2 and one line naming what was tried', () => {
  const missing = join(tmpdir(), 'kpick-no-such-lib.so');
  const none = tsx('scripts/info.ts', [], { env: { KPICK_LIB: missing } });
  assert.is(none.code, 2, none.stderr);
  assert.match(none.stderr, `tried ${missing}: no such file`);
  const foo = tsx('scripts/parity.ts', ['--model', 'tiny'], { env: { KPICK_BACKEND: 'foo' } });
  assert.is(foo.code, 2, foo.stderr);
  assert.is(foo.stderr, "parity: KPICK_BACKEND must be one of cpu, cuda, hip, got 'foo'\n");
});

test('fleet reads the summaries from a real stdin: nothing on it is one line and exit 2', () => {
  const r = tsx('scripts/fleet.ts', [], { input: '' });
  assert.is(r.code, 2, r.stderr);
  assert.is(r.stderr, 'fleet: no fleet-check summaries to pool\n');
});

test.run();
