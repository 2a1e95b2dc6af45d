import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { UsageError } from '../lib/cli.ts';
import { readStore } from '../lib/store.ts';
import { parseParityArgs } from '../scripts/parity.ts';
import { ROOT, run } from './helpers/run-script.ts';

const TEST_LIB = join(ROOT, 'build', 'libkpick-cpu-test.so');
const WRONG = ['test.bits', 'test.nan', 'test.unwritten', 'test.wrong'];

/** `tsx scripts/parity.ts ...args`, in process */
const parity = (args: string[], env: Record<string, string> = {}) => run('parity', args, { env });

const scratch = mkdtempSync(join(tmpdir(), 'kpick-parity-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

const failLines = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('FAIL '));

test('parseParityArgs applies the defaults and refuses bad usage', async () => {
  const args = parseParityArgs(['--model', 'tiny']);
  assert.ok(args);
  assert.equal([args.rows, args.dtypes, args.seeds, args.columns, args.store], [[1, 4], ['bf16', 'fp16'], 1, 'auto', undefined]);
  for (const [argv, message] of [
    [['--rows', '1'], /give --model/],
    [['--model', 'tiny', '--columns', 'some'], /--columns must be one of auto, full, sampled/],
    [['--model', 'tiny', '--seeds', '0'], /--seeds must be an integer in 1\.\.1000/],
    [['--model', 'tiny', '--dtype', 'int8'], /dtype 'int8' is not one of bf16, fp16, fp8/],
  ] as [string[], RegExp][]) {
    assert.throws(() => parseParityArgs(argv), (e: Error) => e instanceof UsageError && message.test(e.message), argv.join(' '));
  }
});

test('a --shapes shape the library will not create (a weight too large) is bad input: one line, exit 2', async () => {
  const r = await parity(['--shapes', '16777216x16777216', '--rows', '1']);
  assert.is(r.code, 2, r.stderr);
  assert.match(r.stderr, /\nparity: kpick_problem_create: weight of 16777216 x 16777216 elements is too large\n$/);
});

test('every shipped candidate passes on every tiny linear, both dtypes: exit 0', async () => {
  const run = await parity(['--model', 'tiny', '--rows', '1,4', '--seeds', '2']);
  assert.is(run.code, 0, run.stderr);
  assert.equal(failLines(run.stderr), []);
  // per dtype, seed and rows: 4 linear shapes x 6 + 1 gated x 4 candidates
  assert.match(run.stderr, new RegExp(`parity: ${2 * 2 * 2 * 28} checks of 10 candidates; ${2 * 2 * 2 * 28} pass, 0 fail\\n`));
});

test('--dtype fp8: the fp8 candidates on tiny\'s layer linears (lm_head stays bf16), each within its class bar: exit 0', async () => {
  const run = await parity(['--model', 'tiny', '--rows', '1,4', '--dtype', 'fp8']);
  assert.is(run.code, 0, run.stderr);
  // per rows: 3 linear shapes x 3 fp8 candidates + 1 gated x 3
  assert.match(run.stderr, new RegExp(`parity: ${2 * 12} checks of 6 candidates; ${2 * 12} pass, 0 fail\\n`));
  assert.not.match(run.stderr, /lm_head/);
});

test('under the test build each wrong candidate is caught and named with its shape: exit 1', async () => {
  const run = await parity(['--model', 'tiny', '--rows', '1,4', '--dtype', 'bf16,fp16'], { KPICK_LIB: TEST_LIB });
  assert.is(run.code, 1, run.stderr);
  const lines = failLines(run.stderr);
  const named = [...new Set(lines.map((l) => l.split(' ')[1]))].sort();
  assert.equal(named, WRONG, 'exactly the wrong candidates fail');
  // each wrong candidate on each of the 4 linear shapes, 2 dtypes, 2 rows buckets
  for (const name of WRONG) assert.is(lines.filter((l) => l.startsWith(`FAIL ${name} `)).length, 4 * 2 * 2, name);
  assert.ok(lines.some((l) => /^FAIL test\.wrong linear bf16 512x256 m=4: rel_err \S+ > 1e-2$/.test(l)));
  assert.ok(lines.some((l) => /^FAIL test\.wrong linear fp16 2048x256 m=1: rel_err \S+ > 2e-3$/.test(l)));
  assert.ok(lines.some((l) => /^FAIL test\.bits linear bf16 256x512 m=4: differs from plain in \d+ bytes$/.test(l)));
  assert.ok(lines.some((l) => /^FAIL test\.unwritten linear fp16 256x256 m=1: \d+ of 256 elements unwritten$/.test(l)));
  assert.ok(lines.some((l) => /^FAIL test\.nan linear bf16 512x256 m=4: \d+ of 2048 elements NaN or Inf$/.test(l)));
  assert.match(run.stderr, /; \d+ pass, 64 fail \(test\.wrong, test\.bits, test\.unwritten, test\.nan\)\n/);
});

test('--json prints one line per check; --store keeps each as a parity record', async () => {
  const store = join(scratch, 'store');
  const run = await parity(['--model', 'tiny', '--rows', '1', '--dtype', 'bf16', '--candidates', 'plain,test.*', '--json', '--store', store], { KPICK_LIB: TEST_LIB });
  assert.is(run.code, 1);
  const checks = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { candidate: string; status: string; reason: string; n: number; k: number });
  assert.is(checks.length, 4 * 5, '4 linear shapes x (plain + 4 test candidates)');
  assert.ok(checks.every((c) => (c.candidate === 'plain') === (c.status === 'pass')), 'plain passes, the test candidates fail');
  const { records, warnings } = readStore(store);
  assert.equal(warnings, []);
  assert.is(records.length, checks.length);
  assert.ok(records.every((r) => r.kind === 'parity' && r.samples_us.length === 0 && r.copies === 1));
  assert.equal(records.map((r) => `${r.candidate} ${r.parity.status}`), checks.map((c) => `${c.candidate} ${c.status}`));
});

test('a sampled reference is said so in the summary', async () => {
  const run = await parity(['--model', 'tiny', '--rows', '1', '--dtype', 'bf16', '--candidates', 'plain', '--columns', 'sampled']);
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stderr, /the reference sampled columns .* for bf16 lm_head 2048x256 m=1; --columns full checks all/);
});

test('bad usage exits 2 with one line', async () => {
  for (const [argv, message] of [
    [['--model', 'tiny', '--rows', '3'], /^parity: --rows '3' is not a bucket/],
    [['--model', 'nope'], /^parity: unknown model 'nope'; known: .*tiny, tiny-moe\n$/],
    [['--model', 'tiny', '--candidates', 'gemv.*'], /^parity: no candidate matches 'gemv\.\*'/],
    [['--model', 'tiny', '--oops'], /^parity: Unknown option `--oops`/],
  ] as [string[], RegExp][]) {
    const run = await parity(argv);
    assert.is(run.code, 2, argv.join(' '));
    assert.match(run.stderr, message);
  }
});

test.run();
