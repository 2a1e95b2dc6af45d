import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { UsageError } from '../lib/cli.ts';
import { StoreRecord } from '../lib/schema.ts';
import { parseSweepArgs } from '../scripts/sweep.ts';
import { run } from './helpers/run-script.ts';

// tiny: 4 linear shapes x (6 candidates + floor) + 1 gated x (4 + floor) per rows bucket
const PER_BUCKET = 4 * 7 + 1 * 5;

/** `tsx scripts/sweep.ts ...args`, in process */
const sweep = (args: string[], env: Record<string, string> = {}) => run('sweep', args, { env });

const fast = ['--model', 'tiny', '--copies', '2', '--samples', '2', '--rounds', '1'];
const scratch = mkdtempSync(join(tmpdir(), 'kpick-sweep-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));
const tmp = () => mkdtempSync(join(scratch, 'store-'));
const files = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.jsonl'));

test('parseSweepArgs applies the defaults of the options table', async () => {
  const args = parseSweepArgs(['--model', 'Qwen3-0.6B', '--store', 's']);
  assert.ok(args);
  assert.equal(args.rows, [1, 2, 4, 8]);
  assert.equal(args.dtypes, ['bf16']);
  assert.equal([args.samples, args.rounds, args.copies, args.json, args.quiet], [5, 3, 0, false, false]);
  assert.equal(args.linears.map((l) => l.name), ['qkv', 'o', 'gate_up', 'down', 'lm_head']);
  assert.is(args.seed, undefined);
  assert.is(args.placements, undefined, 'the job picks by backend: 3 on a GPU, 1 on the CPU');
});

test('parseSweepArgs reads shapes, rows, dtypes, candidates and numbers', async () => {
  const args = parseSweepArgs(['--shapes', '64x32,64x32,16x8', '--rows', '8,1', '--dtype', 'bf16,fp16', '--store', 's', '--candidates', 'plain, rowblk.*', '--samples', '7', '--seed', '3', '--placements', '2', '--json']);
  assert.ok(args);
  assert.equal(args.linears.map((l) => `${l.op} ${l.n}x${l.k}`), ['linear 64x32', 'linear 16x8']);
  assert.equal(args.rows, [1, 8]);
  assert.equal(args.dtypes, ['bf16', 'fp16']);
  assert.equal(args.candidates, ['plain', 'rowblk.*']);
  assert.equal([args.samples, args.seed, args.placements, args.json], [7, 3, 2, true]);
});

test('parseSweepArgs refuses bad usage with a UsageError', async () => {
  const bad: [string[], RegExp][] = [
    [['--store', 's'], /give --model <name> or --shapes/],
    [['--model', 'tiny'], /--store <dir> is required/],
    [['--model', 'nope', '--store', 's'], /unknown model 'nope'; known: .*tiny/],
    [['--model', 'tiny', '--store', 's', '--rows', '1,3'], /rows '3' is not a bucket/],
    [['--model', 'tiny', '--store', 's', '--samples', '0'], /--samples must be an integer in 1\.\.100000, got '0'/],
    [['--model', 'tiny', '--store', 's', '--placements', '0'], /--placements must be an integer in 1\.\.16, got '0'/],
    [['--model', 'tiny', '--store', 's', '--frobnicate'], /Unknown option `--frobnicate`/],
    [['--model', 'tiny', '--store', 's', 'extra'], /Unused args/],
    [['--model', 'tiny', '--store'], /--store/],
  ];
  for (const [argv, message] of bad) {
    assert.throws(() => parseSweepArgs(argv), (e: Error) => e instanceof UsageError && message.test(e.message), argv.join(' '));
  }
});

test('a --shapes shape the library will not create (a weight too large) is bad input: one line, exit 2', async () => {
  const r = await sweep(['--shapes', '16777216x16777216', '--rows', '1', '--store', tmp()]);
  assert.is(r.code, 2, r.stderr);
  assert.match(r.stderr, /\nsweep: kpick_problem_create: weight of 16777216 x 16777216 elements is too large\n$/);
});

test('a sweep of the tiny model writes every record to the store and prints them as JSON lines', async () => {
  const store = tmp();
  const run = await sweep([...fast, '--rows', '1,2', '--store', store, '--json']);
  assert.is(run.code, 0, run.stderr);
  const lines = run.stdout.trim().split('\n');
  assert.is(lines.length, 2 * PER_BUCKET);
  for (const line of lines) assert.ok(v.safeParse(StoreRecord, JSON.parse(line)).success, line);
  assert.is(files(store).length, 1);
  const stored = readFileSync(join(store, files(store)[0] as string), 'utf8').trim().split('\n');
  assert.equal(stored, lines, 'stdout carries exactly the stored records');
  assert.match(run.stderr, new RegExp(`wrote ${2 * PER_BUCKET} records to .*; skipped 0 already in the store`));
});

test('running the same sweep again measures nothing and says how many it skipped', async () => {
  const store = tmp();
  assert.is((await sweep([...fast, '--rows', '1', '--store', store, '--quiet'])).code, 0);
  const again = await sweep([...fast, '--rows', '1', '--store', store]);
  assert.is(again.code, 0, again.stderr);
  assert.match(again.stderr, new RegExp(`wrote 0 records; skipped ${PER_BUCKET} already in the store`));
  assert.is(files(store).length, 1, 'no new file when nothing was measured');
  const more = await sweep([...fast, '--rows', '1,4', '--store', store, '--json']);
  assert.is(more.stdout.trim().split('\n').length, PER_BUCKET, 'only the new rows bucket');
  assert.ok(more.stdout.trim().split('\n').every((l) => JSON.parse(l).rows === 4));
});

test('an interrupted store (truncated last line) resumes: the lost record is measured again', async () => {
  const store = tmp();
  assert.is((await sweep([...fast, '--rows', '1', '--store', store, '--quiet'])).code, 0);
  const file = join(store, files(store)[0] as string);
  const text = readFileSync(file, 'utf8');
  truncateSync(file, text.length - 25);
  const lost = JSON.parse(text.trim().split('\n').at(-1) as string) as StoreRecord;
  const resumed = await sweep([...fast, '--rows', '1', '--store', store, '--json']);
  assert.is(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stderr, new RegExp(`warning: skipped store line ${file}:${PER_BUCKET}: not JSON`));
  const lines = resumed.stdout.trim().split('\n').map((l) => JSON.parse(l) as StoreRecord);
  assert.equal(lines.map((r) => [r.candidate, r.n, r.k, r.rows]), [[lost.candidate, lost.n, lost.k, lost.rows]]);
  assert.is(readFileSync(file, 'utf8'), text.slice(0, text.length - 25), 'the old file is left as it was');
});

test('a folder or a FIFO named *.jsonl in the store is skipped with a warning, never read: the sweep runs', async () => {
  const store = tmp();
  mkdirSync(join(store, 'a.jsonl'));
  assert.is(spawnSync('mkfifo', [join(store, 'b.jsonl')]).status, 0);
  const r = await sweep([...fast, '--rows', '1', '--candidates', 'plain', '--store', store]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stderr, `warning: skipped store file ${join(store, 'a.jsonl')}: a directory, not a store file\nwarning: skipped store file ${join(store, 'b.jsonl')}: a FIFO, not a store file\n`);
  assert.is(files(store).length, 3, 'its own file beside the two');
});

test('--candidates restricts the sweep; the floor is still measured', async () => {
  const store = tmp();
  const run = await sweep([...fast, '--rows', '1', '--store', store, '--candidates', 'plain', '--json']);
  assert.is(run.code, 0, run.stderr);
  const recs = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as StoreRecord);
  assert.equal([...new Set(recs.map((r) => r.candidate))].sort(), ['floor', 'plain']);
  assert.is(recs.length, 4 + 5, 'plain on 4 linear shapes, a floor on all 5');
});

test('bad usage exits 2 with one line, before anything is measured', async () => {
  const store = tmp();
  const cases: [string[], RegExp][] = [
    [['--model', 'nope', '--store', store], /^sweep: unknown model 'nope'; known: Llama-3\.1-8B, .*tiny, tiny-moe\n$/],
    [['--model', 'tiny', '--rows', '1,5', '--store', store], /^sweep: --rows '5' is not a bucket; buckets are 1, 2, 4, 8, 16, 32, 64, 128\n$/],
    [['--model', 'tiny', '--store', store, '--candidates', 'gemv.*'], /^sweep: no candidate matches 'gemv\.\*'/],
    [['--model', 'tiny', '--store', store, '--backend', 'metal'], /^sweep: --backend must be one of cpu, cuda, hip/],
  ];
  for (const [argv, message] of cases) {
    const run = await sweep(argv);
    assert.is(run.code, 2, argv.join(' '));
    assert.match(run.stderr, message);
  }
  assert.equal(files(store), []);
});

test('an unwritable store exits 2 with one line', async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'file'), '');
  const run = await sweep([...fast, '--store', join(dir, 'file', 'store')]);
  assert.is(run.code, 2);
  assert.match(run.stderr, /^sweep: store .*file\/store is not a writable folder: ENOTDIR/);
  assert.is(run.stderr.trim().split('\n').length, 1);
});

test('a library that cannot load exits 2 (a bad environment) naming the path tried; DEBUG adds the stack', async () => {
  const store = tmp();
  const run = await sweep([...fast, '--store', store], { KPICK_LIB: '/nonexistent/lib.so' });
  assert.is(run.code, 2);
  assert.is(run.stderr, 'sweep: no usable libkpick (tried /nonexistent/lib.so: no such file)\n');
  const debug = await sweep([...fast, '--store', store], { KPICK_LIB: '/nonexistent/lib.so', DEBUG: '1' });
  assert.match(debug.stderr, /\n\s+at /);
  assert.equal(files(store), []);
});

test('--help prints the options with their defaults and exits 0', async () => {
  const run = await sweep(['--help']);
  assert.is(run.code, 0);
  assert.match(run.stdout, /--rows <list>\s+rows buckets M \(default: 1,2,4,8\)/);
  assert.match(run.stdout, /--samples <n>\s+timings per candidate per round \(default: 5\)/);
});

test('a store admits one sweep at a time: a second is refused in one line naming the holder pid; a killed sweep\'s lock is taken over', async () => {
  const store = tmp();
  const lock = join(store, 'sweep.lock');
  // held by a live process (this test runner)
  writeFileSync(lock, `${process.pid}\n${hostname()}\n`);
  let r = await sweep([...fast, '--rows', '1', '--candidates', 'plain', '--store', store]);
  assert.is(r.code, 2, r.stderr);
  assert.is(r.stderr, `sweep: store ${store} is in use by another sweep (pid ${process.pid}, ${lock}); wait for it, or remove the lock if no sweep runs\n`);
  assert.equal(files(store), [], 'nothing measured');
  // held by a process that is gone
  const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
  writeFileSync(lock, `${gone}\n${hostname()}\n`);
  r = await sweep([...fast, '--rows', '1', '--candidates', 'plain', '--store', store]);
  assert.is(r.code, 0, r.stderr);
  assert.is(files(store).length, 1);
  assert.not.ok(readdirSync(store).includes('sweep.lock'), 'released when done');
});

test.run();
