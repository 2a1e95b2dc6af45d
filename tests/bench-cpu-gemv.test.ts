// bench/cpu-gemv.ts speaks every script's CLI: bad input is one line and exit
// 2 before anything is timed; a run is one JSON record on stdout.
import { spawnSync } from 'node:child_process';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ROOT } from './helpers/run-script.ts';

/** `tsx bench/cpu-gemv.ts ...args` as a process */
function gemv(args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/cpu-gemv.ts', ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('cpu-gemv: an unknown option, a missing value and numbers out of range exit 2 with one line, timing nothing', () => {
  for (const [args, says] of [
    [['--bogus'], 'Unknown option `--bogus`'],
    [['--n'], '--n needs a value'],
    [['--n', '-1'], "--n must be an integer in 1..16777216, got '-1'"],
    [['--k', 'abc'], "--k must be an integer in 1..16777216, got 'abc'"],
    [['--samples', '0'], "--samples must be an integer in 1..100000, got '0'"],
    [['--rounds', '0'], "--rounds must be an integer in 1..1000, got '0'"],
    [['--target', '2'], "--target must be a fraction in 0..1, got '2'"],
  ] as const) {
    const r = gemv([...args]);
    assert.is(r.code, 2, args.join(' '));
    assert.is(r.stderr, `cpu-gemv: ${says}\n`);
    assert.is(r.stdout, '');
  }
});

test('cpu-gemv: a small run prints its table on stderr and one JSON record of the shape on stdout', () => {
  const r = gemv(['--n', '64', '--k', '64', '--samples', '1', '--rounds', '1']);
  assert.ok(r.code === 0 || r.code === 1, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.is(lines.length, 1, r.stdout);
  const record = JSON.parse(lines[0]!) as { bench: string; n: number; k: number; met: boolean };
  assert.equal([record.bench, record.n, record.k], ['cpu-gemv', 64, 64]);
  assert.is(r.code, record.met ? 0 : 1);
  assert.match(r.stderr, /^best \S+: [\d.]+ % of the read bandwidth .*: (met|MISSED)$/m);
});

test.run();
