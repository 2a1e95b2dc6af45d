import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCheckArgs } from '../scripts/check.ts';
import { readTable } from '../lib/table.ts';
import { run } from './helpers/run-script.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-check-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** `tsx scripts/check.ts ...args` (npm start), in process */
const check = (args: string[]) => run('check', args);

function findTables(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('decode_gemm.json')).map((f) => join(dir, f));
}

test('parseCheckArgs defaults to Qwen3-0.6B at rows 1,2,4,8 and a fresh store per run', async () => {
  const args = parseCheckArgs([], new Date('2026-01-02T03:04:05.678Z'));
  assert.ok(args);
  assert.equal([args.model, args.rows, args.dtype], ['Qwen3-0.6B', '1,2,4,8', 'bf16']);
  assert.is(args.store, join('stores', 'check-2026-01-02T03-04-05-678Z'));
});

test('the main job sweeps, checks parity, promotes and finds its table usable', async () => {
  const store = join(scratch, 'store');
  const tables = join(scratch, 'tables');
  const r = await check(['--model', 'tiny', '--rows', '1,2', '--store', store, '--tables-dir', tables, '--samples', '2', '--rounds', '3', '--copies', '2', '--backend', 'cpu']);
  assert.is(r.code, 0, r.stderr);
  for (const step of ['sweep', 'parity', 'promote', 'refuse-check']) assert.match(r.stderr, `== check: ${step}`);
  assert.match(r.stderr, /parity: \d+ checks of \d+ candidates; \d+ pass, 0 fail/);
  const [file] = findTables(tables);
  assert.ok(file, 'a table was written');
  const read = readTable(file!);
  assert.ok('table' in read, 'error' in read ? read.error : '');
  // tiny: 5 shapes (4 linear + gate_up) x 2 buckets
  assert.is(read.table.entries.length, 10);
  assert.ok(existsSync(file!.replace(/\.json$/, '.route')));
  assert.match(r.stderr, /table .*decode_gemm\.json: loaded 10 entries/);
});

test('bad input stops the job before any step, with one line and exit 2', async () => {
  for (const [flag, value, says] of [['--rows', '3', "rows '3' is not a bucket"], ['--model', 'nope', 'nope'], ['--dtype', 'fp8', 'fp8']] as const) {
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
