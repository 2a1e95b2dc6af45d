import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCheckArgs } from '../scripts/check.ts';
import { run } from './helpers/run-script.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-check-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** `tsx scripts/check.ts ...args` (npm start), in process */
const check = (args: string[]) => run('check', args);

test('parseCheckArgs defaults to Qwen3-0.6B at rows 1,2,4,8 and a fresh store per run', async () => {
  const args = parseCheckArgs([], new Date('2026-01-02T03:04:05.678Z'));
  assert.ok(args);
  assert.equal([args.model, args.rows, args.dtype], ['Qwen3-0.6B', '1,2,4,8', 'bf16']);
  assert.is(args.store, join('stores', 'check-2026-01-02T03-04-05-678Z'));
});

test('bad input stops the job before any step, with one line and exit 2', async () => {
  for (const [flag, value, says] of [
    ['--rows', '3', "rows '3' is not a bucket"],
    ['--model', 'nope', 'nope'],
    ['--dtype', 'fp32', 'fp32'],
    ['--table', 'a.json', '--table: only with --quick'], // the fleet check's, not silently ignored
    ['--max-ratio', '2', '--max-ratio: only with --quick'],
  ] as const) {
    const tables = join(scratch, `tables-bad-${flag}`);
    const model = flag === '--model' ? [] : ['--model', 'tiny'];
    const r = await check([...model, '--store', join(scratch, `bad-${flag}`), '--tables-dir', tables, flag, value]);
    assert.is(r.code, 2, `${flag} ${value}`);
    assert.match(r.stderr, says);
    assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.not.ok(existsSync(tables));
  }
});

test.run();
