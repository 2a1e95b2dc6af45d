// scripts/serve-bench.ts end to end on the CPU backend: tiny with 2 layers,
// few steps, against a real table swept and promoted here by the team's code
// (lib/sweep.ts, lib/table.ts), and against hand edits of it (a one-word
// change of `choice`, as DESIGN.md allows).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import { NativeModels } from '../lib/model-ffi.ts';
import { decodeLinears, findModel } from '../lib/models.ts';
import type { Table } from '../lib/schema.ts';
import { dimsOf } from '../lib/serve.ts';
import { parseArgs } from '../scripts/serve-bench.ts';
import { run } from './helpers/run-script.ts';
import { sweptTinyTable, tablesDirWith as tablesDirWithIn } from './helpers/tiny-table.ts';

const LIB = join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so');
const kpick = loadKpick({ lib: LIB });
const scratch = mkdtempSync(join(tmpdir(), 'kpick-serve-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

const REAL = sweptTinyTable(kpick);
const tablesDirWith = (table: Table) => tablesDirWithIn(scratch, table);

/** The real table with every choice moved to `linear` (gated entries: `gated`). */
function edited(linear: string, gated: string): Table {
  const t = structuredClone(REAL);
  for (const e of t.entries) {
    e.choice = e.op === 'gated' ? gated : linear;
    assert.ok(e.candidates[e.choice], `the sweep measured ${e.choice}`);
  }
  return t;
}

/** `tsx scripts/serve-bench.ts ...args`, in process, with its JSON lines parsed */
async function bench(args: string[]) {
  const r = await run('serve-bench', args);
  const lines = r.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, any>);
  return { ...r, lines };
}

const FAST = ['--model', 'tiny', '--layers', '2', '--backend', 'cpu', '--c', '1,4', '--context', '32', '--steps', '3', '--runs', '1', '--identity-steps', '8'];
const rows = (lines: Record<string, any>[]) => lines.filter((l) => l.kind === 'row');

test('parseArgs: defaults of the options table, --layers bounded by the preset', async () => {
  const a = parseArgs(['--model', 'Qwen3-0.6B']);
  assert.ok(a);
  assert.equal([a.model.name, a.layers, a.concurrency, a.context, a.steps, a.runs, a.identitySteps, a.dtype, a.memLimit, a.checkStep], [
    'Qwen3-0.6B', 28, [1, 4, 8, 16, 32, 64], 256, 100, 3, 256, 'bf16', null, false,
  ]);
  assert.throws(() => parseArgs(['--model', 'Qwen3-0.6B', '--layers', '29']), /--layers must be an integer in 1\.\.28/);
  assert.throws(() => parseArgs(['--model', 'tiny', '--context', '8000', '--identity-steps', '300']), /8300 positions; at most 8192/);
});

test('against the real table: setup, step checks and one row per concurrency, exit 0', async () => {
  const r = await bench([...FAST, '--tables-dir', tablesDirWith(REAL), '--json', '--check-step']);
  assert.is(r.code, 0, r.stderr);
  const [setup] = r.lines;
  assert.is(setup?.kind, 'setup');
  assert.equal([setup?.model, setup?.layers, setup?.context, setup?.concurrency], ['tiny', 2, 32, [1, 4]]);
  assert.is(setup?.table.used, true, setup?.table.line);
  assert.match(setup?.table.line, /loaded 10 entries/);
  assert.equal(setup?.selfcheck.map((c: any) => [c.op, c.pass]), [['add_rmsnorm', true], ['rope_append', true], ['attention', true], ['argmax', true], ['embed', true]]);
  assert.ok(setup !== undefined && setup.bytes > 0 && setup.bytes <= setup.budget);
  const checks = r.lines.find((l) => l.kind === 'step-check');
  assert.equal(checks?.checks.map((c: any) => [c.arm, c.pass]), [['default', true], ['table', true]]);

  const out = rows(r.lines);
  assert.equal(out.map((x) => x.c), [1, 4]);
  for (const row of out) {
    for (const arm of ['default', 'table']) {
      const a = row[arm];
      assert.ok(a.tok_s > 0 && a.step_p50_us > 0 && a.step_p90_us >= a.step_p50_us, JSON.stringify(a));
      assert.is(a.runs, 2, 'one run per lane');
      assert.ok(a.stalled >= 0 && a.stalled === a.stalled_runs.length);
      assert.equal(Object.keys(a.route), ['qkv', 'o', 'gate_up', 'down', 'lm_head']);
    }
    assert.equal(row.default.route, { qkv: 'plain', o: 'plain', gate_up: 'gated.plain', down: 'plain', lm_head: 'plain' });
    // the table's own choices, entry by entry
    const dt = row.c === 1 ? 1 : 4;
    for (const l of decodeLinears(findModel('tiny'))) {
      const e = REAL.entries.find((x) => x.op === l.op && x.n === l.n && x.k === l.k && x.bucket === dt);
      assert.ok(e, `the table has an entry for ${l.name} at bucket ${dt}`);
      assert.is(row.table.route[l.name], e!.choice, `${l.name} at c=${row.c}`);
    }
    assert.ok(Math.abs(row.ratio - row.table.tok_s / row.default.tok_s) < 1e-9);
    assert.is(row.below_floor, row.ratio < 0.98);
    assert.is(row.identity.steps, 8);
    assert.ok(['identical', 'explained'].includes(row.identity.status), row.identity.why);
  }
  assert.match(r.stderr, /c +default tok\/s +table tok\/s +ratio/);
  assert.match(r.stderr, /step check \(table route, c=1\): rel err .*: pass/);
});

test('a table of bitwise-class choices decodes exactly the default tokens', async () => {
  const r = await bench([...FAST, '--tables-dir', tablesDirWith(edited('rowblk.r4', 'gated.rowblk.r4')), '--json']);
  assert.is(r.code, 0, r.stderr);
  assert.equal(rows(r.lines).map((x) => x.c), [1, 4]);
  for (const row of rows(r.lines)) {
    assert.is(row.table.route.qkv, 'rowblk.r4');
    assert.is(row.table.route.gate_up, 'gated.rowblk.r4');
    assert.equal([row.identity.status, row.identity.first_diff_step, row.identity.rows_diverged], ['identical', null, 0], row.identity.why);
    assert.ok(row.identity.differences.length === 5 && row.identity.differences.every((d: any) => d.bitwise));
  }
  assert.match(r.stderr, /c=1 table route: qkv rowblk\.r4 \(default plain\)/);
});

test('a table of tolerance-class choices: any difference is explained, never a failure', async () => {
  const r = await bench([...FAST, '--tables-dir', tablesDirWith(edited('splitk.s4', 'gated.splitk.s4')), '--json', '--quiet']);
  assert.is(r.code, 0, r.stderr);
  assert.is(r.stderr, '', 'quiet: nothing on stderr');
  assert.equal(rows(r.lines).map((x) => x.c), [1, 4]);
  for (const row of rows(r.lines)) {
    assert.ok(row.identity.differences.length === 5 && row.identity.differences.every((d: any) => !d.bitwise), JSON.stringify(row.identity.differences));
    if (row.identity.status === 'explained') assert.match(row.identity.why, /tolerance-class candidate \(qkv splitk\.s4 vs plain/);
    else assert.is(row.identity.status, 'identical');
  }
});

test('no table for this build under --tables-dir: a warning, both arms on the defaults, identical tokens', async () => {
  const r = await bench([...FAST, '--tables-dir', mkdtempSync(join(scratch, 'empty-'))]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stderr, /no table at .*empty-.*decode_gemm\.json: using the defaults/);
  assert.match(r.stderr, /warning: the table route is the default route/);
  assert.match(r.stderr, /^ +1 .* identical$/m);
});

test('bad input: one line and exit 2, before any model is built', async () => {
  const cases: [string[], RegExp][] = [
    [['--model', 'nope'], /unknown model 'nope'; known: Llama-3\.1-8B/],
    [[], /--model <name> is required/],
    [['--model', 'tiny', '--c', '0,4'], /--c '0' is not an integer in 1\.\.128/],
    [['--model', 'tiny', '--c', '1,,4'], /--c must be a comma-separated list/],
    [['--model', 'tiny', '--c', '200'], /--c '200'/],
    [['--model', 'tiny', '--dtype', 'fp32'], /dtype 'fp32' is not one of bf16, fp16, fp8/],
    [['--model', 'tiny-moe', '--dtype', 'fp8,bf16'], /--dtype takes one type: bf16, fp16 or fp8/],
    [['--model', 'tiny', '--mem-limit', '0'], /--mem-limit must be a positive number of GiB, got '0'/],
    [['--model', 'tiny', '--mem-limit', 'lots'], /--mem-limit must be a positive number of GiB, got 'lots'/],
    [['--model', 'tiny', '--steps', '0'], /--steps must be an integer in 1\.\.8192/],
    // a table named on the command line that is not there is a typo, not a fresh machine
    [['--model', 'tiny', '--table', join(scratch, 'none.json')], /--table .*none\.json: not a file/],
    [['--model', 'tiny', '--table', scratch], /--table .*: not a file/],
  ];
  for (const [args, message] of cases) {
    const r = await bench(args);
    assert.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.is(r.stdout, '');
  }
});

test('a model too large for memory: one line naming the --layers and --c that would fit, exit 2', async () => {
  const native = new NativeModels(kpick);
  const dims = dimsOf(findModel('tiny'), { layers: 2, maxBatch: 4, context: 32, maxNew: 8, dtype: 'bf16' });
  const limit = (native.bytes({ ...dims, layers: 1 }) + native.bytes(dims)) / 2 / 1024 ** 3;
  const r = await bench([...FAST, '--tables-dir', mkdtempSync(join(scratch, 'empty-')), '--mem-limit', limit.toFixed(6), '--quiet']);
  assert.is(r.code, 2, r.stderr);
  assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(r.stderr, /^serve-bench: tiny \(2 layers, batch 4, 40 positions\) needs [\d.]+ MiB, [\d.]+ MiB usable \(--mem-limit\); would fit: --layers 1/);

  // and a real model on this machine's free memory, without allocating it
  const big = await bench(['--model', 'Llama-3.1-8B', '--backend', 'cpu', '--mem-limit', '4', '--quiet']);
  assert.is(big.code, 2, big.stderr);
  assert.match(big.stderr, /^serve-bench: Llama-3\.1-8B \(32 layers, batch 64, 512 positions\) needs [\d.]+ GiB, 4\.00 GiB usable \(--mem-limit\); would fit: --layers \d+/);
});

test.run();
