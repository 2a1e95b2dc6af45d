// Every script speaks the same CLI: --help with examples, --version, --json,
// --quiet, one red line and exit 2 on an unknown option, no colour under NO_COLOR.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { optionAll, optionFraction, optionInt, parseWithCac, parseWithCacArgs, Progress, scriptCli, UsageError } from '../lib/cli.ts';
import { ROOT, run } from './helpers/run-script.ts';

const SCRIPTS = readdirSync(join(ROOT, 'scripts')).filter((f) => f.endsWith('.ts'));
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

test('there are scripts to check', () => {
  for (const s of ['sweep.ts', 'parity.ts', 'promote.ts', 'refuse-check.ts', 'check.ts', 'info.ts', 'report.ts']) assert.ok(SCRIPTS.includes(s), s);
});

for (const script of SCRIPTS) {
  test(`${script}: --help lists examples, --json and --quiet, and exits 0`, async () => {
    const r = await run(script, ['--help']);
    assert.is(r.code, 0, r.out);
    assert.match(r.out, 'Examples:');
    assert.match(r.out, '--json');
    assert.match(r.out, '--quiet');
    assert.match(r.out, '--version');
  });

  test(`${script}: --version prints the package version`, async () => {
    const r = await run(script, ['--version']);
    assert.is(r.code, 0, r.out);
    assert.match(r.out, VERSION);
  });

  test(`${script}: an unknown option is one line and exit 2`, async () => {
    const r = await run(script, ['--bogus']);
    assert.is(r.code, 2, r.out);
    assert.is(r.out.trim().split('\n').length, 1, r.out);
    assert.match(r.out, 'bogus');
    assert.not.match(r.out, '\u001b[');
  });
}

// One exit-code rule (lib/cli.ts): 2 for bad usage and a bad environment.
const LOADING = [
  ['sweep.ts', '--model', 'tiny', '--store', join(tmpdir(), 'kpick-cli-never')],
  ['parity.ts', '--model', 'tiny'],
  ['info.ts'],
  ['refuse-check.ts'],
  ['serve-bench.ts', '--model', 'tiny'],
  ['check.ts', '--model', 'tiny', '--store', join(tmpdir(), 'kpick-cli-never')],
] as const;

for (const [script, ...args] of LOADING) {
  test(`${script}: KPICK_BACKEND=foo and a missing library exit 2, naming what was tried`, async () => {
    const foo = await run(script, [...args], { env: { KPICK_BACKEND: 'foo' } });
    assert.is(foo.code, 2, foo.out);
    assert.match(foo.out, "KPICK_BACKEND must be one of cpu, cuda, hip, got 'foo'");
    const missing = join(tmpdir(), 'kpick-no-such-lib.so');
    const none = await run(script, [...args], { env: { KPICK_LIB: missing } });
    assert.is(none.code, 2, none.out);
    assert.match(none.out, `tried ${missing}: no such file`);
  });
}

test('numbers are typed in decimal: negative, hex and exponent forms exit 2 naming the option', async () => {
  const store = join(tmpdir(), 'kpick-cli-never');
  for (const [flag, value, says] of [
    ['--rows', '-1', "--rows '-1' is not a bucket"],
    ['--rows', '0x4', "--rows '0x4' is not a bucket"],
    ['--rows', '2e0', "--rows '2e0' is not a bucket"],
    ['--samples', '-1', "--samples must be an integer in 1..100000, got '-1'"],
    ['--samples', '0x4', "--samples must be an integer in 1..100000, got '0x4'"],
    ['--samples', '2e0', "--samples must be an integer in 1..100000, got '2e0'"],
    ['--samples', '', '--samples needs a value, got an empty one'],
  ] as const) {
    const r = await run('sweep.ts', ['--model', 'tiny', '--store', store, flag, value]);
    assert.is(r.code, 2, r.out);
    assert.is(r.out.split('\n').length, 2, r.out);
    assert.ok(r.out.startsWith(`sweep: ${says}`), r.out);
  }
  assert.not.ok(existsSync(store), 'nothing was measured');
});

test('parseWithCac hands over every value as typed', () => {
  const cli = scriptCli('t', 'x', { rows: { flag: '--rows <list>', help: '' }, n: { flag: '--n <n>', help: '' }, json: { flag: '--json', help: '' } });
  assert.equal(parseWithCac(cli, ['--rows', '0x4', '--n=-1', '--json']), { '--': [], rows: '0x4', n: '-1', json: true });
  assert.equal(parseWithCac(cli, ['--rows', '1', '--rows', '007'])!.rows, ['1', '007']);
  assert.throws(() => parseWithCac(cli, ['--rows']), (e: unknown) => e instanceof UsageError && e.message === '--rows needs a value');
  assert.throws(() => parseWithCac(cli, ['--n=']), (e: unknown) => e instanceof UsageError && e.message === '--n needs a value, got an empty one');
  assert.throws(() => parseWithCac(cli, ['--json', '']), (e: unknown) => e instanceof UsageError && /an empty argument/.test(e.message));
  assert.throws(() => optionInt({ n: '2e0' }, 'n', 1, 1, 8), (e: unknown) => e instanceof UsageError && e.message === "--n must be an integer in 1..8, got '2e0'");
  assert.is(optionInt({ n: '08' }, 'n', 1, 1, 8), 8);
});

test('parseWithCacArgs (a script that takes files too) hands over every value as typed, and the files as args', () => {
  const cli = scriptCli('t', 'x', { bound: { flag: '--max-ratio <x>', help: '' } });
  assert.equal(parseWithCacArgs(cli, ['a.jsonl', '--max-ratio', '0x4', 'b.jsonl']), { options: { '--': [], maxRatio: '0x4' }, args: ['a.jsonl', 'b.jsonl'] });
  assert.equal(parseWithCacArgs(cli, ['--max-ratio', '-1'])!.options.maxRatio, '-1');
  assert.throws(() => parseWithCacArgs(cli, ['--max-ratio', '']), (e: unknown) => e instanceof UsageError && e.message === '--max-ratio needs a value, got an empty one');
  // after `--` every word is a file, not dropped
  assert.equal(parseWithCacArgs(cli, ['a.jsonl', '--', '--odd.jsonl'])!.args, ['a.jsonl', '--odd.jsonl']);
});

test('an argument after `--` to a script that takes none is stray: exit 2, not ignored', async () => {
  const cli = scriptCli('t', 'x', { json: { flag: '--json', help: '' } });
  assert.throws(() => parseWithCac(cli, ['--json', '--', 'x']), (e: unknown) => e instanceof UsageError && e.message === 'Unused args: `x`');
  const r = await run('info.ts', ['--quiet', '--', 'x']);
  assert.is(r.code, 2, r.out);
  assert.is(r.out, 'info: Unused args: `x`\n');
});

test('an option given twice is named as typed, not as its key', async () => {
  const r = await run('info.ts', ['--tables-dir', 'a', '--tables-dir', 'b']);
  assert.is(r.code, 2, r.out);
  assert.is(r.out, 'info: --tables-dir was given more than once\n');
});

test('a reader that leaves early (| head) costs no stack trace: stderr keeps its own lines, the exit code is the job\'s', () => {
  const table = 'tables/sm_90/nvidia-h200/decode_gemm.json';
  const script = `"${process.execPath}" --import tsx scripts/agree.ts --table ${table} --table ${table} --json`;
  // head -n 0 closes the pipe at once: every line the script writes goes to a closed pipe
  const out = spawnSync('bash', ['-c', `set -o pipefail; ${script} | head -n 0`], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  assert.is(out.status, 0, out.stderr);
  assert.match(out.stderr, /^agree: \d+ entries: .*: the tables agree\n$/);
  // stderr into the closed pipe too: the script ends as it would have
  const both = spawnSync('bash', ['-c', `set -o pipefail; ${script} 2>&1 | head -n 0`], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  assert.is(both.status, 0, both.stderr);
  // output that cannot be written (a full disk) is lost: one line naming why, and exit 1
  if (existsSync('/dev/full')) {
    const full = spawnSync('bash', ['-c', `${script} --quiet > /dev/full`], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
    assert.is(full.status, 1, full.stderr);
    assert.match(full.stderr, /^agree: \d+ entries: [^\n]*\nagree: cannot write stdout: ENOSPC: no space left on device, write\n$/);
  }
});

test('a repeatable option reads as its values in order (none when absent); a fraction is plain decimal in 0..1', () => {
  const cli = scriptCli('t', 'x', { store: { flag: '--store <dir>', help: '' } });
  assert.equal(optionAll(parseWithCac(cli, ['--store', 'a', '--store', '7'])!, 'store'), ['a', '7']);
  assert.equal(optionAll(parseWithCac(cli, ['--store', 'a'])!, 'store'), ['a']);
  assert.equal(optionAll(parseWithCac(cli, [])!, 'store'), []);
  assert.is(optionFraction({}, 'gate', 0.02), 0.02);
  assert.is(optionFraction({ gate: '.5' }, 'gate', 0.02), 0.5);
  for (const bad of ['2', '-0.1', '1e-2', 'x'])
    assert.throws(() => optionFraction({ gate: bad }, 'gate', 0.02), (e: unknown) => e instanceof UsageError && e.message === `--gate must be a fraction in 0..1, got '${bad}'`);
});

test('progress into a pipe is a line per phase, not per step, and one every 10 s within a phase', () => {
  const lines: string[] = [];
  let clock = 0;
  const p = new Progress(true, { inPlace: false, write: (t) => lines.push(t), now: () => clock });
  for (let i = 1; i <= 256; ++i) {
    clock += 20; // 256 steps in 5.1 s: no 10 s line
    p.update(i, 512, `c=1 identity default step ${i}/256`);
  }
  for (let i = 1; i <= 256; ++i) {
    clock += 100; // 25.6 s: two more lines past the phase's first
    p.update(256 + i, 512, `c=1 identity table step ${i}/256`);
  }
  p.end();
  assert.equal(
    lines.map((l) => l.split(' (')[0]),
    ['1/512 c=1 identity default step 1/256', '257/512 c=1 identity table step 1/256', '357/512 c=1 identity table step 101/256', '457/512 c=1 identity table step 201/256'],
  );
  assert.ok(lines.every((l) => l.endsWith('\n') && !l.includes('\r')));
});

test('progress on a terminal redraws one line in place and clears it at the end; disabled, it writes nothing', () => {
  const out: string[] = [];
  const p = new Progress(true, { inPlace: true, write: (t) => out.push(t), now: () => 0 });
  p.update(1, 2, 'a');
  p.update(2, 2, 'b');
  p.end();
  assert.ok(out.slice(0, 2).every((t) => t.startsWith('\r\x1b[K') && !t.includes('\n')));
  assert.is(out.at(-1), '\r\x1b[K');
  const none: string[] = [];
  const off = new Progress(false, { inPlace: false, write: (t) => none.push(t) });
  off.update(1, 1, 'x');
  off.end();
  assert.equal(none, []);
});

test.run();
