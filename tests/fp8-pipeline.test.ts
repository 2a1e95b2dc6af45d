// The fp8 dtype end to end on the CPU backend, in process, as a user runs it
// on the tiny preset: sweep --dtype fp8 -> promote -> refuse-check ->
// serve-bench --dtype fp8 --check-step. The table holds fp8 entries of the
// layer linears (lm_head stays bf16 in an fp8 model: lib/models.ts), both
// readers route them, and serve-bench runs both arms on fp8 weights.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readTable } from '../lib/table.ts';
import { run } from './helpers/run-script.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-fp8-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

test('sweep, promote, refuse-check and serve-bench with --dtype fp8 on tiny: fp8 entries promoted, routed by both readers, both arms checked', async () => {
  const store = join(scratch, 'store');
  const tables = join(scratch, 'tables');
  const cpu = ['--backend', 'cpu'];
  const sweep = await run('sweep', ['--model', 'tiny', '--dtype', 'fp8', '--rows', '1,4', '--samples', '2', '--rounds', '3', '--copies', '2', '--store', store, '--quiet', ...cpu]);
  assert.is(sweep.code, 0, sweep.stderr);
  const promote = await run('promote', ['--store', store, '--tables-dir', tables, '--quiet']);
  assert.is(promote.code, 0, promote.stderr);
  const [rel] = readdirSync(tables, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('decode_gemm.json'));
  assert.ok(rel, 'a table was written');
  const file = join(tables, rel!);
  const read = readTable(file);
  assert.ok('table' in read, 'error' in read ? read.error : '');
  if (!('table' in read)) return;
  const { entries } = read.table;
  // tiny's qkv, o, gate_up and down (lm_head stays bf16) at rows 1 and 4
  assert.is(entries.length, 8);
  for (const e of entries) {
    assert.is(e.dtype, 'fp8');
    assert.is(e.default, e.op === 'gated' ? 'gated.w8a8.plain' : 'w8a8.plain', 'the W8A8 class default');
    assert.ok(Object.keys(e.candidates).every((name) => name.includes('w8a')), `only fp8 candidates: ${Object.keys(e.candidates)}`);
    assert.ok(Object.values(e.candidates).every((c) => c.parity === 'pass' && c.numeric !== undefined), 'each passed its own class bar and says its class');
    assert.ok(e.floor_us !== null && e.floor_us > 0);
  }

  const refuse = await run('refuse-check', ['--table', file, '--json', ...cpu]);
  assert.is(refuse.code, 0, refuse.stderr);
  assert.match(refuse.stderr + refuse.stdout, /loaded 8 entries, dropped 0/);

  const bench = await run('serve-bench', ['--model', 'tiny', '--dtype', 'fp8', '--layers', '2', '--c', '1,4', '--context', '16', '--steps', '2', '--runs', '1', '--identity-steps', '6', '--tables-dir', tables, '--check-step', '--json', ...cpu]);
  assert.is(bench.code, 0, bench.stderr);
  const lines = bench.stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, any>);
  const setup = lines.find((l) => l.kind === 'setup');
  assert.is(setup?.dtype, 'fp8');
  assert.is(setup?.table.used, true, setup?.table.line);
  const checks = lines.find((l) => l.kind === 'step-check');
  assert.equal(checks?.checks.map((c: any) => [c.arm, c.pass]), [['default', true], ['table', true]]);
  const rows = lines.filter((l) => l.kind === 'row');
  assert.equal(rows.map((r) => r.c), [1, 4]);
  for (const row of rows) {
    assert.equal(row.default.route, { qkv: 'w8a8.plain', o: 'w8a8.plain', gate_up: 'gated.w8a8.plain', down: 'w8a8.plain', lm_head: 'plain' });
    // tiny: qkv 512x256, o 256x256, gate_up 512x256 (gated), down 256x512; c = 1 and 4 are buckets
    for (const [kind, op, n, k] of [['qkv', 'linear', 512, 256], ['o', 'linear', 256, 256], ['gate_up', 'gated', 512, 256], ['down', 'linear', 256, 512]] as const) {
      const e = entries.find((x) => x.op === op && x.n === n && x.k === k && x.bucket === row.c);
      assert.ok(e, `the table has an fp8 entry for ${kind} at bucket ${row.c}`);
      assert.is(row.table.route[kind], e!.choice, `${kind} at c=${row.c}: the table's fp8 choice`);
    }
    assert.is(row.table.route.lm_head, 'plain', 'no bf16 entry in this table: lm_head keeps its bf16 default');
    assert.ok(row.default.tok_s > 0 && row.table.tok_s > 0);
    assert.ok(['identical', 'explained'].includes(row.identity.status), row.identity.why);
  }
});

test.run();
