// scripts/step-verify.ts end to end on the CPU backend (tiny, 2 layers, few
// steps) against a table of this build whose picks differ from the defaults,
// then scripts/promote.ts reading a store's steps/ folder.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import type { Table } from '../lib/schema.ts';
import { judgeStep, stepAlternatives } from '../lib/step-verdict.ts';
import { readSteps, STEPS_DIR, StoreWriter } from '../lib/store.ts';
import { readTable, writeTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/step-verify.ts';
import { run } from './helpers/run-script.ts';
import { sweptTinyTable, tablesDirWith as tablesDirWithIn } from './helpers/tiny-table.ts';
import { evenSamples, problem, SYNTHETIC_IDENTITY, writeStoreFile } from './helpers/synthetic-records.ts';

const kpick = loadKpick({ lib: join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const scratch = mkdtempSync(join(tmpdir(), 'kpick-step-verify-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));
const SWEPT = sweptTinyTable(kpick);

/** tiny's table with every choice moved off the default (qkv, o, down, lm_head: rowblk.r4; gate_up: gated.rowblk.r4). */
function tableOffDefaults(): Table {
  const t = structuredClone(SWEPT);
  for (const e of t.entries) e.choice = e.op === 'gated' ? 'gated.rowblk.r4' : 'rowblk.r4';
  return t;
}
const tablesDirWith = (table: Table) => tablesDirWithIn(scratch, table);

const FAST = ['--model', 'tiny', '--layers', '2', '--backend', 'cpu', '--c', '1,4', '--context', '16', '--steps', '2', '--rounds', '5'];
function tableAt(file: string): Table {
  const read = readTable(file);
  if ('error' in read) throw new Error(read.error);
  return read.table;
}
const jsonLines = (out: string) => out.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, any>);

test('parseArgs: the defaults, and --store and --model required', () => {
  const a = parseArgs(['--model', 'Llama-3.1-8B', '--store', 's']);
  assert.ok(a);
  assert.equal([a.layers, a.concurrency, a.context, a.steps, a.rounds, a.dtype, a.table, a.store], [32, [1, 2, 4, 8, 16, 32, 64, 128], 256, 16, 7, 'bf16', null, 's']);
  assert.throws(() => parseArgs(['--model', 'tiny']), /--store <dir> is required/);
  assert.throws(() => parseArgs(['--store', 's']), /--model <name> is required/);
  assert.throws(() => parseArgs(['--model', 'tiny', '--store', 's', '--rounds', '4']), /--rounds must be an integer in 5\.\.1000/);
  assert.is(a.alternatives, 0, 'no runner-up timed unless asked');
  assert.is(parseArgs(['--model', 'tiny', '--store', 's', '--alternatives', '2'])!.alternatives, 2);
  assert.throws(() => parseArgs(['--model', 'tiny', '--store', 's', '--alternatives', '-1']), /--alternatives must be an integer in 0\.\.16/);
});

test('every pick off the default at each c gets one record in <store>/steps, timed the same rounds both ways', async () => {
  const store = join(scratch, 'store');
  const r = await run('step-verify', [...FAST, '--tables-dir', tablesDirWith(tableOffDefaults()), '--store', store, '--json']);
  assert.is(r.code, 0, r.stderr);
  const lines = jsonLines(r.stdout);
  assert.equal(lines.map((l) => `${l.c} ${l.linear}`), ['1 qkv', '1 o', '1 gate_up', '1 down', '1 lm_head', '4 qkv', '4 o', '4 gate_up', '4 down', '4 lm_head']);
  for (const l of lines) {
    assert.is(l.pick, l.linear === 'gate_up' ? 'gated.rowblk.r4' : 'rowblk.r4');
    assert.is(l.default, l.linear === 'gate_up' ? 'gated.plain' : 'plain');
    assert.is(l.rows, l.c);
    assert.is(l.pick_us.length, 5);
    assert.is(l.default_us.length, 5);
    assert.equal(l.route, { qkv: 'rowblk.r4', o: 'rowblk.r4', gate_up: 'gated.rowblk.r4', down: 'rowblk.r4', lm_head: 'rowblk.r4' });
    // the verdict printed is the rule's on the record stored
    assert.is(l.verdict, judgeStep(l as any).verdict);
  }
  const stored = readSteps(store);
  assert.equal(stored.warnings, []);
  assert.is(stored.records.length, 10);
  assert.equal(readdirSync(join(store, STEPS_DIR)).length, 1);
  assert.match(r.stderr, /step-verify: 10 step record\(s\) in .*steps\/step-.*\.jsonl/);
});

test('--alternatives: runner-up records only after a pick the step is slower with, each a runner-up of its entry\'s sweep', async () => {
  const store = join(scratch, 'store-alt');
  const table = tableOffDefaults();
  for (const e of table.entries) {
    // picks that start a thread a call: the step is slower with them in most runs (a row-blocked pick
    // times as the default does, and its runners-up were almost never timed)
    e.choice = e.op === 'gated' ? 'gated.threads.t2' : 'threads.t2';
    // and a runner-up in every entry: the row-blocked candidate, made a near miss faster than the default
    const runnerUp = e.op === 'gated' ? 'gated.rowblk.r4' : 'rowblk.r4';
    const def = e.candidates[e.default]!;
    e.candidates[runnerUp] = { ...def, median_us: (def.median_us as number) * 0.99, params: e.candidates[runnerUp]!.params };
  }
  // FAST with 11 rounds, not 5: enough to tell a slower step from this machine's noise
  const rounds = [...FAST.slice(0, -2), '--rounds', '11'];
  const r = await run('step-verify', [...rounds, '--tables-dir', tablesDirWith(table), '--store', store, '--json', '--alternatives', '2']);
  assert.is(r.code, 0, r.stderr);
  const lines = jsonLines(r.stdout);
  const picks = lines.filter((l) => l.alternative !== true);
  assert.is(picks.length, 10, 'every pick is timed as without --alternatives');
  const alternatives = lines.filter((x) => x.alternative === true);
  // whether a pick makes the step slower is measured: each pick has exactly its entry's runners-up
  // after it when it did, and none when it did not
  for (const pick of picks) {
    const e = table.entries.find((x) => x.op === pick.op && x.n === pick.n && x.k === pick.k && x.bucket === pick.rows)!;
    const mine = alternatives.filter((l) => l.c === pick.c && l.linear === pick.linear);
    const want = pick.verdict === 'slower' ? stepAlternatives(e, 2) : [];
    if (pick.verdict === 'slower') assert.ok(want.length > 0, `${pick.c} ${pick.linear}: its entry has a runner-up`);
    assert.equal(mine.map((l) => l.pick), want, `${pick.c} ${pick.linear}: ${pick.verdict}`);
    for (const l of mine) assert.is(l.default, pick.default);
  }
  assert.is(picks.length + alternatives.length, lines.length);
  if (!picks.some((p) => p.verdict === 'slower')) console.log('  no pick made the step slower in this run: the runners-up after a slower pick were not exercised end to end (tests/step-verify.test.ts pins the rule)');
  assert.is(readSteps(store).records.length, lines.length);
});

test('--alternatives on a table kept on its defaults: each linear\'s runners-up of the sweep timed in its place, nothing else', async () => {
  const t = tableOffDefaults();
  for (const e of t.entries) {
    // the sweep's runner-up: the row-blocked candidate, made a near miss faster than the default
    const runnerUp = e.op === 'gated' ? 'gated.rowblk.r4' : 'rowblk.r4';
    const def = e.candidates[e.default]!;
    e.candidates[runnerUp] = { ...def, median_us: (def.median_us as number) * 0.99, p25_us: def.p25_us, p75_us: def.p75_us, params: e.candidates[runnerUp]!.params };
    e.choice = e.default;
  }
  const store = join(scratch, 'store-kept-alt');
  const r = await run('step-verify', [...FAST, '--tables-dir', tablesDirWith(t), '--store', store, '--json', '--alternatives', '1']);
  assert.is(r.code, 0, r.stderr);
  const lines = jsonLines(r.stdout);
  assert.ok(t.entries.every((e) => stepAlternatives(e, 1).length === 1), 'every entry has its runner-up');
  assert.equal(lines.map((l) => `${l.c} ${l.linear}`), ['1 qkv', '1 o', '1 gate_up', '1 down', '1 lm_head', '4 qkv', '4 o', '4 gate_up', '4 down', '4 lm_head']);
  for (const l of lines) {
    assert.is(l.alternative, true);
    const e = t.entries.find((x) => x.op === l.op && x.n === l.n && x.k === l.k && x.bucket === l.rows)!;
    assert.equal([l.pick], stepAlternatives(e, 1), `${l.c} ${l.linear}: the entry's fastest runner-up`);
    assert.is(l.default, e.default);
  }
});

test('a table that routes as the defaults do: nothing to verify, no file left, exit 0', async () => {
  const t = tableOffDefaults();
  for (const e of t.entries) e.choice = e.default;
  const store = join(scratch, 'store-same');
  const r = await run('step-verify', [...FAST, '--tables-dir', tablesDirWith(t), '--store', store]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stderr, /c=1: the table routes every linear as the default does: nothing to verify/);
  assert.match(r.stderr, /warning: no table pick differs from the default/);
  assert.equal(readdirSync(join(store, STEPS_DIR)), []);
});

test('a table of another build is refused: one red line, exit 3, nothing stored', async () => {
  const t = tableOffDefaults();
  t.identity = { ...t.identity, space: 'another-space' };
  const dir = mkdtempSync(join(scratch, 'tables-'));
  const file = join(dir, 'decode_gemm.json');
  const written = writeTable(file, t);
  if ('error' in written) throw new Error(written.error);
  const store = join(scratch, 'store-refused');
  const r = await run('step-verify', [...FAST, '--table', file, '--store', store]);
  assert.is(r.code, 3, r.stderr);
  assert.match(r.stderr, /^step-verify: no table to verify: .*space/);
  assert.equal(r.stdout, '');
});

test('bad input: one line and exit 2', async () => {
  for (const [args, message] of [
    [['--model', 'tiny'], /--store <dir> is required/],
    [['--model', 'nope', '--store', 's'], /unknown model 'nope'/],
    [['--model', 'tiny', '--store', 's', '--c', '0'], /--c '0' is not an integer in 1\.\.128/],
    [['--model', 'tiny', '--store', 's', '--table', join(scratch, 'none.json')], /--table .*none\.json: not a file/],
  ] as [string[], RegExp][]) {
    const r = await run('step-verify', args);
    assert.is(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
});

test('a store that cannot be a folder: one line, exit 2, before the model is built', async () => {
  const file = join(scratch, 'a-file');
  writeFileSync(file, 'not a folder\n');
  const r = await run('step-verify', [...FAST, '--tables-dir', tablesDirWith(tableOffDefaults()), '--store', file, '--quiet']);
  assert.is(r.code, 2, r.stderr);
  assert.match(r.stderr, /^step-verify: store .*a-file\/steps is not a writable folder/);
  assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.is(readFileSync(file, 'utf8'), 'not a folder\n', 'the file is left as it was');
});

test('one step-verify at a time per store: a live holder of steps/step.lock refuses the second in one line, exit 2', async () => {
  const store = join(scratch, 'store-locked');
  mkdirSync(join(store, STEPS_DIR), { recursive: true });
  // this process is alive, so its pid holds the lock
  writeFileSync(join(store, STEPS_DIR, 'step.lock'), `${process.pid}\n${hostname()}\n2026-12-02T08:00:00.000Z\n`);
  const r = await run('step-verify', [...FAST, '--tables-dir', tablesDirWith(tableOffDefaults()), '--store', store, '--quiet']);
  assert.is(r.code, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`is in use by another sweep \\(pid ${process.pid}`));
  assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.equal(readdirSync(join(store, STEPS_DIR)), ['step.lock'], 'nothing written, the holder\'s lock left');
});

test('promote reads a store\'s steps/: a pick the step shows slower keeps the default, and says so', async () => {
  const store = join(scratch, 'synthetic');
  writeStoreFile(store, 'sweep-1.jsonl', problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]));
  const out = join(scratch, 'promoted.json');
  const before = await run('promote', ['--store', store, '--out', out]);
  assert.is(before.code, 0, before.stderr);
  assert.is(tableAt(out).entries[0]!.choice, 'rowblk.r2');

  const w = StoreWriter.open(join(store, STEPS_DIR), 'step');
  w.appendStep({
    v: 1, kind: 'step', identity: SYNTHETIC_IDENTITY, model: 'tiny', layers: 2, weights: 'bf16', c: 1, linear: 'o',
    op: 'linear', dtype: 'bf16', n: 4096, k: 4096, rows: 1, pick: 'rowblk.r2', default: 'plain', route: { o: 'rowblk.r2' }, steps: 16,
    pick_us: [1010, 1011, 1012, 1013, 1014], default_us: [1000, 1001, 1002, 1003, 1004], at: '2026-12-02T08:00:00.000Z',
  });
  w.close();
  const after = await run('promote', ['--store', store, '--out', out, '--replace']);
  assert.is(after.code, 0, after.stderr);
  const e = tableAt(out).entries[0]!;
  assert.is(e.choice, 'plain');
  assert.match(e.reason, /^kept: the step is faster with the default: tiny c=1 o: step 1012\.0 us with rowblk\.r2, 1002\.0 us with plain \(\+1\.0 %, slower, p .* over 5 rounds\); the kernel alone: picked rowblk\.r2: \+25\.0 % over plain$/);
  assert.match(after.stderr, /promote: 1 step record\(s\): 1 pick\(s\) make the step slower, 1 of them kept on the default$/m);
});

test.run();
