// bench/table-bench.ts on the cpu build (make runs before the tests): the
// route it times, the ratios of each shape line, the per-rows and per-group
// summaries, and the target verdicts, on the tiny model through a table
// written here that moves one shape off the default; and on tiny-moe, its moe
// shape under both routings with its own summaries and targets.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { run } from './helpers/run-script.ts';
import { DEFAULT_BUILD_DIR, loadKpick } from '../lib/ffi.ts';
import { identityFromInfo } from '../lib/identity.ts';
import { TABLE_FORMAT, type Table } from '../lib/schema.ts';
import { defaultTablePath, writeTable } from '../lib/table.ts';

const CPU_LIB = path.join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so');

const tables = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-table-bench-'));
test.after(() => fs.rmSync(tables, { recursive: true, force: true }));

/** `tsx bench/table-bench.ts` on tiny, briefly, in process */
async function runBench(args: string[], model = 'tiny') {
  const r = await run('bench/table-bench', ['--backend', 'cpu', '--model', model, '--samples', '2', '--rounds', '2', '--copies', '2', ...args]);
  return { code: r.code, lines: r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>), stderr: r.stderr };
}

const result = { median_us: 10, p25_us: 9.9, p75_us: 10.1, samples: 9, nodes: 1, params: {}, parity: 'pass', rel_err: 1e-3, stack_bound: false, status: 'ok' } as const;

/** The cpu build's table with these entries, under dir. */
function writeCpuTable(entries: Table['entries'] = [
  // tiny's o projection (256x256) at rows 1 on rowblk.r4
  { op: 'linear', dtype: 'bf16', n: 256, k: 256, bucket: 1, default: 'plain', choice: 'rowblk.r4', reason: 'test', floor_us: 5, candidates: { plain: result, 'rowblk.r4': result } },
], dir = tables): string {
  const identity = identityFromInfo(loadKpick({ lib: CPU_LIB }).info());
  const table: Table = {
    format: TABLE_FORMAT,
    identity,
    created: '2025-01-01T00:00:00.000Z',
    gate: { min_gain: 0.02, pdl_rows: 128 },
    entries,
  };
  const file = defaultTablePath(dir, identity);
  assert.ok('path' in writeTable(file, table));
  return file;
}

test('table-bench: shape lines through the table, per-rows and per-group geomeans, a verdict per target, then the run', async () => {
  const file = writeCpuTable();
  const r = await runBench(['--rows', '1,2', '--tables-dir', tables]);
  assert.is(r.code, 0, r.stderr);
  const kinds = r.lines.map((l) => l.kind);
  const misses = kinds.filter((k) => k === 'miss').length;
  assert.ok(misses >= 1 && misses <= 3, 'one miss line per floor class with shapes in it');
  assert.equal(kinds, [...Array(10).fill('shape'), 'summary', 'summary', 'summary', ...Array(misses).fill('miss'), 'target', 'target', 'target', 'target', 'target', 'run']);

  const shapes = r.lines.filter((l) => l.kind === 'shape');
  const moved = shapes.filter((l) => l.pick !== l.default);
  assert.equal(moved.map((l) => [l.op, l.n, l.k, l.rows, l.pick, l.default]), [['linear', 256, 256, 1, 'rowblk.r4', 'plain']]);
  for (const l of shapes) {
    assert.ok(l.pick_us > 0 && l.default_us > 0 && l.floor_us > 0, JSON.stringify(l));
    assert.ok(Math.abs(l.speedup - l.default_us / l.pick_us) < 1e-9);
    assert.ok(Math.abs(l.pick_over_floor - l.pick_us / l.floor_us) < 1e-9);
    if (l.pick === l.default) assert.is(l.speedup, 1, 'the default is timed once when it is the pick');
  }
  // a shape's floor streams the same weight at every rows bucket: with two buckets, each one's floor is the median of both
  for (const l of shapes) {
    const same = shapes.filter((x) => x.op === l.op && x.n === l.n && x.k === l.k).map((x) => x.floor_bucket_us as number).sort((a, b) => a - b);
    assert.is(same.length, 2);
    assert.ok(Math.abs(l.floor_us - (same[0]! + same[1]!) / 2) < 1e-9, JSON.stringify(l));
  }

  const summaries = r.lines.filter((l) => l.kind === 'summary');
  assert.equal(summaries.map((s) => [s.group, s.shapes]), [['rows 1', 5], ['rows 2', 5], ['rows 1-16', 10]]);
  const rows1 = shapes.filter((l) => l.rows === 1);
  const geo = Math.exp(rows1.reduce((sum, l) => sum + Math.log(l.pick_over_floor), 0) / rows1.length);
  assert.ok(Math.abs(summaries[0]!.geomean_pick_over_floor - geo) < 1e-9);

  // the group's shapes split by their floors: every shape in one class, the shares of the distance adding up
  const miss = r.lines.filter((l) => l.kind === 'miss');
  assert.ok(miss.every((m) => m.group === 'rows 1-16'));
  assert.is(miss.reduce((sum, m) => sum + m.shapes, 0), 10);
  assert.is(miss.reduce((sum, m) => sum + m.default_picks, 0), 9, 'every pick but the moved one is the default');
  // a group past the floor shares its distance out (the shares add up to 1); one at or under it has none to share
  if (summaries[2]!.geomean_pick_over_floor > 1) assert.ok(Math.abs(miss.reduce((sum, m) => sum + m.share_of_excess, 0) - 1) < 1e-9, JSON.stringify(miss));
  else assert.equal(miss.map((m) => m.share_of_excess), miss.map(() => null));
  assert.match(r.stderr, /^rows 1-16 +floor [<>=0-9 -]+us +\d+ shapes  pick\/floor \d\.\d{3}/m);

  const targets = r.lines.filter((l) => l.kind === 'target');
  assert.equal(targets.map((t) => t.target), [
    'rows 1-16 pick/floor geomean',
    'rows 1-16 vs default geomean',
    'rows 32-128 pick/floor geomean',
    'rows 32-128 vs default geomean',
    'every shape and rows vs default',
  ]);
  assert.equal(targets[0]!.missing_rows, [4, 8, 16]);
  assert.equal([targets[2]!.status, targets[3]!.status], ['not measured', 'not measured']);
  const run = r.lines.at(-1)!;
  assert.equal([run.table, run.table_used, run.models, run.shapes], [file, true, ['tiny'], 5]);

  assert.match(r.stderr, `kpick: table ${file}: loaded 1 entries`);
  assert.match(r.stderr, /^rows 1-16 +10 +x\d\.\d{3}/m);
  assert.match(r.stderr, /^target not measured: rows 32-128 pick\/floor geomean/m);
  assert.match(r.stderr, 'note: the targets are set on all five presets; this run measured tiny');
});

test('table-bench on tiny-moe: the moe shape under both routings through the table, floored on the experts read; its summaries and targets apart from the dense ones', async () => {
  const dir = fs.mkdtempSync(path.join(tables, 'moe-'));
  // tiny-moe's routed experts (E8 top2, 128x256) at rows 1 on moe.grouped.r4
  const file = writeCpuTable([
    { op: 'moe', dtype: 'bf16', n: 128, k: 256, experts: 8, topk: 2, bucket: 1, default: 'moe.loop', choice: 'moe.grouped.r4', reason: 'test', floor_us: 5, candidates: { 'moe.loop': result, 'moe.grouped.r4': result } },
  ], dir);
  const r = await runBench(['--rows', '1,4', '--tables-dir', dir], 'tiny-moe');
  assert.is(r.code, 0, r.stderr);

  const shapes = r.lines.filter((l) => l.kind === 'shape');
  const moe = shapes.filter((l) => l.op === 'moe');
  assert.equal(moe.map((l) => [l.routing, l.rows, l.experts, l.topk, l.pick, l.default]), [
    ['uniform', 1, 8, 2, 'moe.grouped.r4', 'moe.loop'],
    ['uniform', 4, 8, 2, 'moe.loop', 'moe.loop'],
    ['skewed', 1, 8, 2, 'moe.grouped.r4', 'moe.loop'],
    ['skewed', 4, 8, 2, 'moe.loop', 'moe.loop'],
  ]);
  for (const l of moe) {
    assert.ok(l.pick_us > 0 && l.default_us > 0 && l.floor_us > 0, JSON.stringify(l));
    assert.ok(Math.abs(l.speedup - l.default_us / l.pick_us) < 1e-9);
    assert.ok(Math.abs(l.pick_over_floor - l.pick_us / l.floor_us) < 1e-9);
    // the rows read at most rows x top-k distinct experts; one row reads exactly its top-k
    assert.ok(l.experts_read >= 2 && l.experts_read <= Math.min(8, 2 * l.rows), JSON.stringify(l));
    if (l.rows === 1) assert.is(l.experts_read, 2);
    assert.is(l.floor_us, l.floor_bucket_us, "a moe bucket keeps its own floor: the experts read grow with the rows");
  }
  assert.ok(shapes.filter((l) => l.op !== 'moe').every((l) => l.routing === undefined && l.experts_read === undefined));

  // the dense summaries count the four dense shapes only; the moe ones the moe shape under two routings
  const summaries = r.lines.filter((l) => l.kind === 'summary');
  assert.equal(summaries.map((s) => [s.group, s.shapes]), [
    ['rows 1', 4], ['rows 4', 4], ['rows 1-16', 8],
    ['moe rows 1', 2], ['moe rows 4', 2], ['moe rows 1-8', 4],
  ]);
  const targets = r.lines.filter((l) => l.kind === 'target');
  assert.equal(targets.map((t) => [t.target, t.shapes]), [
    ['rows 1-16 pick/floor geomean', 8],
    ['rows 1-16 vs default geomean', 8],
    ['rows 32-128 pick/floor geomean', 0],
    ['rows 32-128 vs default geomean', 0],
    ['every shape and rows vs default', 8],
    ['moe rows 1-8 pick/floor geomean', 4],
    ['moe rows 1-8 vs default geomean', 4],
    ['moe rows 16-128 pick/floor geomean', 0],
    ['moe rows 16-128 every shape vs default', 0],
  ]);
  const moeGeo = Math.exp(moe.reduce((sum, l) => sum + Math.log(l.speedup), 0) / moe.length);
  assert.ok(Math.abs(targets[6]!.value - moeGeo) < 1e-9);
  assert.equal(r.lines.at(-1)!.table, file);

  assert.match(r.stderr, /^moe 128x256 E8 top2 skewed +M=1 +moe\.grouped\.r4 /m);
  assert.match(r.stderr, /^moe rows 1-8 +4 +x\d+\.\d{3}/m);
  assert.match(r.stderr, /^target (met|MISSED): moe rows 1-8 vs default geomean /m);
  assert.match(r.stderr, 'note: the moe targets are set on Qwen3-30B-A3B; this run measured tiny-moe');
});

test('table-bench --dtype fp8 on tiny-moe: the fp8 experts under both routings, floored on the codes and scales read; reported, judged by the fp8 targets alone', async () => {
  const dir = fs.mkdtempSync(path.join(tables, 'moe-fp8-'));
  const file = writeCpuTable([
    { op: 'moe', dtype: 'fp8', n: 128, k: 256, experts: 8, topk: 2, bucket: 1, default: 'moe.w8a8.loop', choice: 'moe.w8a16.grouped.r4', reason: 'test', floor_us: 5, candidates: { 'moe.w8a8.loop': { ...result, numeric: 'w8a8' }, 'moe.w8a16.grouped.r4': { ...result, numeric: 'w8a16' } } },
  ], dir);
  const r = await runBench(['--rows', '1', '--dtype', 'fp8', '--tables-dir', dir], 'tiny-moe');
  assert.is(r.code, 0, r.stderr);
  const shapes = r.lines.filter((l) => l.kind === 'shape');
  // lm_head and the router stay bf16 in an fp8 model: qkv, o and the experts are timed
  assert.equal(shapes.map((l) => [l.op, l.dtype, l.n, l.routing ?? null]), [
    ['linear', 'fp8', 512, null], ['linear', 'fp8', 256, null],
    ['moe', 'fp8', 128, 'uniform'], ['moe', 'fp8', 128, 'skewed'],
  ]);
  for (const l of shapes.filter((l) => l.op === 'moe')) {
    assert.equal([l.pick, l.default, l.experts_read], ['moe.w8a16.grouped.r4', 'moe.w8a8.loop', 2]);
    assert.ok(l.pick_us > 0 && l.floor_us > 0, JSON.stringify(l));
  }
  const summaries = r.lines.filter((l) => l.kind === 'summary');
  assert.equal(summaries.map((s) => [s.group, s.shapes]), [['fp8 rows 1', 2], ['fp8 rows 1-16', 2], ['moe rows 1', 2], ['moe rows 1-8', 2]]);
  // no moe verdict: issue 14 sets those on bf16 experts
  assert.equal(r.lines.filter((l) => l.kind === 'target').map((t) => t.target), ['fp8 rows 1-16 pick/floor geomean', 'fp8 rows 1-16 vs default geomean', 'fp8 every shape and rows vs default']);
  assert.match(r.stderr, /^fp8 moe, both routings .* \(codes and scales\):$/m);
  assert.not.match(r.stderr, /note: the moe targets/);
  assert.equal(r.lines.at(-1)!.table, file);
});

test('table-bench --from: an earlier run judged again without measuring: the same summaries, breakdown and verdicts, a run line naming the file', async () => {
  const dir = fs.mkdtempSync(path.join(tables, 'from-'));
  const measured = await runBench(['--rows', '1,4', '--tables-dir', dir], 'tiny-moe');
  assert.is(measured.code, 0, measured.stderr);
  const file = path.join(dir, 'run.jsonl');
  fs.writeFileSync(file, measured.lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

  const again = await run('bench/table-bench', ['--from', file]);
  assert.is(again.code, 0, again.stderr);
  const lines = again.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
  const judged = (ls: Record<string, any>[]) => ls.filter((l) => ['summary', 'miss', 'target'].includes(l.kind));
  assert.ok(judged(lines).length > 0);
  assert.equal(judged(lines), judged(measured.lines));
  assert.not.ok(lines.some((l) => l.kind === 'shape'), 'nothing measured, no shape line');
  const runLine = lines.at(-1)!;
  assert.equal([runLine.kind, runLine.from, runLine.shapes, runLine.models], ['run', file, measured.lines.at(-1)!.shapes, ['tiny-moe']]);
  assert.match(again.stderr, /^rows 1-16 +8 +x\d\.\d{3}/m);
  assert.match(again.stderr, 'note: the moe targets are set on Qwen3-30B-A3B; this run measured tiny-moe');
});

test('table-bench --from: bad input (not a file, not JSON, a shape line short of a field, no shape lines, two dtypes, a measuring option) exits 2 with one line, writing nothing', async () => {
  const dir = fs.mkdtempSync(path.join(tables, 'from-bad-'));
  const write = (name: string, text: string) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  };
  const shape = { kind: 'shape', op: 'linear', dtype: 'bf16', n: 256, k: 256, rows: 1, pick: 'plain', default: 'plain', floor_us: 5, speedup: 1, pick_over_floor: 1.2 };
  const cases: [string, string | RegExp][] = [
    [dir, /not a file/],
    [path.join(dir, 'none.jsonl'), /not a file/],
    [write('text.jsonl', `${JSON.stringify(shape)}\nnot json\n`), /text\.jsonl:2: not JSON/],
    [write('field.jsonl', JSON.stringify({ ...shape, pick_over_floor: -1 })), /field\.jsonl:1: a shape line with a bad pick_over_floor/],
    [write('empty.jsonl', '{"kind":"run"}\n'), /no shape lines/],
    [write('mixed.jsonl', [shape, { ...shape, dtype: 'fp8' }].map((l) => JSON.stringify(l)).join('\n')), /several dtypes \(bf16, fp8\)/],
  ];
  const ok = write('ok.jsonl', JSON.stringify(shape));
  const runs: [string[], string | RegExp][] = [
    ...cases.map(([file, why]): [string[], string | RegExp] => [['--from', file], why]),
    [['--from', ok, '--model', 'tiny', '--backend', 'cpu'], /measures nothing: drop --model, --backend/],
  ];
  for (const [args, why] of runs) {
    const file = args.join(' ');
    const r = await run('bench/table-bench', args);
    assert.is(r.code, 2, `${file}: ${r.stderr}`);
    assert.match(r.stderr, why);
    assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.is(r.stdout, '');
  }
});

test('table-bench: no moe shape timed, no moe summary, target or note', async () => {
  const r = await runBench(['--rows', '1', '--tables-dir', fs.mkdtempSync(path.join(tables, 'none-'))]);
  assert.is(r.code, 0, r.stderr);
  assert.not.ok(r.lines.some((l) => String(l.group ?? l.target ?? '').startsWith('moe')));
  assert.not.match(r.stderr, /moe/);
});

test('table-bench: bad usage (a rows bucket, a model, a named table that is not there, two dtypes) exits 2 and says why', async () => {
  const r = await run('bench/table-bench', ['--backend', 'cpu', '--rows', '3']);
  // a list of dtypes is refused, not timed on its first alone
  const two = await run('bench/table-bench', ['--backend', 'cpu', '--model', 'tiny', '--rows', '1', '--dtype', 'bf16,fp16']);
  assert.is(two.code, 2, two.out);
  assert.match(two.out, /^\S*table-bench: --dtype takes one type: bf16, fp16 or fp8\n$/);
  const unknown = await run('bench/table-bench', ['--backend', 'cpu', '--model', 'nope']);
  const missing = await run('bench/table-bench', ['--backend', 'cpu', '--table', path.join(tables, 'none.json')]);
  assert.is(unknown.code, 2, unknown.stderr);
  assert.match(unknown.stderr, /unknown model 'nope'/);
  assert.is(r.code, 2, r.stderr);
  assert.match(r.stderr, /rows '3' is not a bucket/);
  assert.is(missing.code, 2, missing.stderr);
  assert.match(missing.stderr, /table-bench: --table .*none\.json: not a file/);
  assert.is(missing.stderr.trim().split('\n').length, 1, missing.stderr);
});

test('table-bench: a table that refuses itself here exits 3 with its verdict on one line, timing nothing', async () => {
  const dir = fs.mkdtempSync(path.join(tables, 'refused-'));
  const file = path.join(dir, 'decode_gemm.json');
  fs.writeFileSync(file, '{"format": 1}\n');
  const r = await run('bench/table-bench', ['--backend', 'cpu', '--rows', '1', '--table', file]);
  assert.is(r.code, 3, r.out);
  assert.match(r.stderr, /^table-bench: nothing to time: kpick: table .*decode_gemm\.json refused: /);
  assert.is(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.is(r.stdout, '', 'no shape line: nothing was timed');
});

test.run();
