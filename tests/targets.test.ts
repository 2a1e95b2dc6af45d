import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { BUCKETS } from '../lib/schema.ts';
import { FLOOR_CLASSES, FP8_GROUPS, fp8Summaries, fp8TargetVerdicts, GROUPS, isDefaultPick, missBreakdown, missTable, parseBenchLines, MOE_GROUPS, moeSummaries, moeTargetVerdicts, summaries, summarize, summaryTable, targetVerdicts, verdictLine, WORST_SPEEDUP_MIN, type BenchRow, type PickedRow } from '../lib/targets.ts';

const row = (rows: number, speedup: number, pick_over_floor: number, n = 4096): BenchRow => ({ op: 'linear', n, k: 4096, rows, speedup, pick_over_floor });
const moeRow = (rows: number, speedup: number, pick_over_floor: number, routing = 'uniform'): BenchRow =>
  ({ op: 'moe', n: 768, k: 2048, experts: 128, topk: 8, routing, rows, speedup, pick_over_floor });
const close = (a: number | null, b: number) => a !== null && Math.abs(a - b) < 1e-12;

test('the targets are the issue-11 ones: rows 1-16 and 32-128, and no shape below 0.98x', () => {
  assert.equal(GROUPS.map((g) => [g.label, g.buckets, g.floorMax, g.speedupMin]), [
    ['rows 1-16', [1, 2, 4, 8, 16], 1.06, 1.25],
    ['rows 32-128', [32, 64, 128], 1.12, 1.15],
  ]);
  assert.is(WORST_SPEEDUP_MIN, 0.98);
});

test('summaries: geomeans of both ratios per rows bucket in bucket order, then per group, with the worst shape', () => {
  const rows = [row(4, 2, 1.1), row(1, 1.5, 1.0), row(4, 0.5, 1.21, 1024), row(64, 1.2, 1.3)];
  const list = summaries(rows);
  assert.equal(list.map((s) => [s.group, s.shapes]), [['rows 1', 1], ['rows 4', 2], ['rows 64', 1], ['rows 1-16', 3], ['rows 32-128', 1]]);
  const four = list[1]!;
  assert.ok(close(four.geomean_speedup, 1), 'sqrt(2 * 0.5)');
  assert.ok(close(four.geomean_pick_over_floor, Math.sqrt(1.1 * 1.21)));
  assert.is(four.worst_speedup, 0.5);
  assert.is(four.worst_at, 'linear 1024x4096 M=4');
  assert.ok(close(list[3]!.geomean_speedup, Math.cbrt(1.5)));
  assert.is(summarize('none', []), null);
});

test('verdicts: each group target met or missed on its own geomean, the worst shape on the minimum, where it is named', () => {
  const good = BUCKETS.map((m) => row(m, m <= 16 ? 1.3 : 1.2, m <= 16 ? 1.05 : 1.1));
  assert.equal(targetVerdicts(good).map((v) => v.status), ['met', 'met', 'met', 'met', 'met']);

  // one shape at 0.97x leaves the rows 1-16 geomean above 1.25 but misses the worst-shape target
  const bad = [...BUCKETS.map((m) => row(m, m <= 16 ? 1.4 : 1.2, m <= 16 ? 1.05 : 1.15)), row(8, 0.97, 1.05, 1024)];
  const v = targetVerdicts(bad);
  assert.equal(v.map((x) => [x.target, x.status]), [
    ['rows 1-16 pick/floor geomean', 'met'],
    ['rows 1-16 vs default geomean', 'met'],
    ['rows 32-128 pick/floor geomean', 'missed'],
    ['rows 32-128 vs default geomean', 'met'],
    ['every shape and rows vs default', 'missed'],
  ]);
  assert.is(v[4]!.value, 0.97);
  assert.is(v[4]!.where, 'linear 1024x4096 M=8');
  assert.is(v[0]!.shapes, 6);
  assert.ok(close(v[2]!.value, 1.15));
  assert.equal(v[2]!.missing_rows, []);
});

test('verdicts: a bound is met when equal to it', () => {
  const edge = [row(1, 1.25, 1.06), row(32, 1.15, 1.12)];
  assert.equal(targetVerdicts(edge).map((v) => v.status), ['met', 'met', 'met', 'met', 'met']);
});

test('verdicts: a group with no rows in the run is not measured (never met), and a partial one names its missing rows', () => {
  const v = targetVerdicts([row(1, 1.4, 1.0), row(4, 1.3, 1.05)]);
  assert.equal(v.map((x) => x.status), ['met', 'met', 'not measured', 'not measured', 'met']);
  assert.equal(v[0]!.missing_rows, [2, 8, 16]);
  assert.is(v[2]!.value, null);
  assert.is(verdictLine(v[2]!), 'target not measured: rows 32-128 pick/floor geomean (want <= 1.12; no rows of it in this run)');
  assert.is(verdictLine(v[0]!), 'target met: rows 1-16 pick/floor geomean 1.025 (want <= 1.06; 2 shapes; rows 2,8,16 not measured)');
  assert.equal(targetVerdicts([]).map((x) => x.status), ['not measured', 'not measured', 'not measured', 'not measured', 'not measured']);
});

test('verdict lines: MISSED stands out, the worst target says where', () => {
  const v = targetVerdicts(BUCKETS.map((m) => row(m, m === 8 ? 0.9 : 1.3, 1.2)));
  assert.is(verdictLine(v[0]!), 'target MISSED: rows 1-16 pick/floor geomean 1.200 (want <= 1.06; 5 shapes)');
  assert.is(verdictLine(v[4]!), 'target MISSED: every shape and rows vs default 0.900 at linear 4096x4096 M=8 (want >= 0.98; 8 shapes)');
});

test('summary table: a header and one aligned line per summary, each starting with "rows" (pipeline.sh greps them)', () => {
  const lines = summaryTable(summaries([row(1, 1.309, 1.023), row(32, 1.012, 1.324)]));
  assert.is(lines.length, 5);
  for (const line of lines) assert.match(line, /^rows/);
  assert.match(lines[1]!, /^rows 1 +1 +x1\.309 +x1\.309 +1\.023 +linear 4096x4096 M=1$/);
});

test('the moe targets are the issue-14 ones: rows 1-8 within 1.3x the floor and 2x the default, rows 16-128 within 1.3x and never slower', () => {
  assert.equal(MOE_GROUPS.map((g) => [g.label, g.buckets, g.floorMax, g.speedupMin, g.worstMin]), [
    ['moe rows 1-8', [1, 2, 4, 8], 1.3, 2, undefined],
    ['moe rows 16-128', [16, 32, 64, 128], 1.3, undefined, 1],
  ]);
});

test('moe rows never enter the dense summaries or targets, and dense rows never the moe ones', () => {
  const dense = BUCKETS.map((m) => row(m, 1.3, 1.05));
  // moe rows far off every dense bound: they would flip each dense verdict if they counted
  const moe = BUCKETS.map((m) => moeRow(m, 0.5, 3));
  assert.equal(summaries([...dense, ...moe]), summaries(dense));
  assert.equal(targetVerdicts([...moe, ...dense]), targetVerdicts(dense));
  assert.equal(targetVerdicts(moe).map((v) => v.status), ['not measured', 'not measured', 'not measured', 'not measured', 'not measured']);
  assert.equal(moeSummaries([...dense, ...moe]), moeSummaries(moe));
  assert.equal(moeTargetVerdicts([...dense, ...moe]), moeTargetVerdicts(moe));
});

test('moe verdicts: none without moe rows; per group pick/floor, then the rows 1-8 speedup geomean and the rows 16-128 worst shape', () => {
  assert.equal(moeTargetVerdicts([row(1, 1.3, 1.05)]), []);
  assert.equal(moeSummaries([row(1, 1.3, 1.05)]), []);

  const good = BUCKETS.flatMap((m) => [moeRow(m, m <= 8 ? 3 : 1.2, 1.2), moeRow(m, m <= 8 ? 2.5 : 1, 1.25, 'skewed')]);
  const v = moeTargetVerdicts(good);
  assert.equal(v.map((x) => [x.target, x.want, x.status, x.shapes]), [
    ['moe rows 1-8 pick/floor geomean', '<= 1.3', 'met', 8],
    ['moe rows 1-8 vs default geomean', '>= 2', 'met', 8],
    ['moe rows 16-128 pick/floor geomean', '<= 1.3', 'met', 8],
    ['moe rows 16-128 every shape vs default', '>= 1', 'met', 8],
  ]);
  assert.ok(close(v[1]!.value, Math.sqrt(3 * 2.5)));
  assert.is(v[3]!.value, 1, 'equal to the default is not slower');

  // one skewed row-64 shape slower than the default misses the never-slower target, named; a 1.9x geomean misses the 2x one
  const bad = [...BUCKETS.map((m) => moeRow(m, m <= 8 ? 1.9 : 1.5, m <= 8 ? 1.3 : 1.4)), moeRow(64, 0.99, 1.2, 'skewed')];
  const w = moeTargetVerdicts(bad);
  assert.equal(w.map((x) => x.status), ['met', 'missed', 'missed', 'missed']);
  assert.is(w[3]!.value, 0.99);
  assert.is(w[3]!.where, 'moe 768x2048 E128 top8 skewed M=64');
  assert.is(verdictLine(w[3]!), 'target MISSED: moe rows 16-128 every shape vs default 0.990 at moe 768x2048 E128 top8 skewed M=64 (want >= 1; 5 shapes)');
  // the rows 1-8 worst shape (1.9x) is no target of its own: only rows 16-128 have a never-slower one
  assert.equal(w.filter((x) => x.where !== undefined).length, 1);
});

test('moe verdicts: a group with no rows in the run is not measured, a partial one names its missing rows', () => {
  const v = moeTargetVerdicts([moeRow(1, 2.4, 1.1), moeRow(1, 2.2, 1.2, 'skewed')]);
  assert.equal(v.map((x) => x.status), ['met', 'met', 'not measured', 'not measured']);
  assert.equal(v[0]!.missing_rows, [2, 4, 8]);
  assert.is(verdictLine(v[3]!), 'target not measured: moe rows 16-128 every shape vs default (want >= 1; no rows of it in this run)');
});

test('moe summaries: per rows bucket over both routings, then per moe group, in a table aligned on its longest label', () => {
  const list = moeSummaries([moeRow(1, 2, 1.1), moeRow(1, 3, 1.2, 'skewed'), moeRow(32, 1.1, 1.25)]);
  assert.equal(list.map((s) => [s.group, s.shapes]), [['moe rows 1', 2], ['moe rows 32', 1], ['moe rows 1-8', 2], ['moe rows 16-128', 1]]);
  assert.ok(close(list[0]!.geomean_speedup, Math.sqrt(6)));
  assert.is(list[0]!.worst_at, 'moe 768x2048 E128 top8 uniform M=1');
  const lines = summaryTable(list);
  // "moe rows 16-128" is longer than the dense labels' 12 columns: every count still ends under "shapes"
  const end = lines[0]!.indexOf('shapes') + 'shapes'.length;
  for (const line of lines.slice(1)) {
    assert.match(line, /^moe rows [\d-]+ +\d+  /);
    assert.match(line.slice(0, end), /\d$/, line);
    assert.is(line[end], ' ', line);
  }
});

test('the fp8 targets are the issue-14 ones: rows 1-16 within 1.15x the fp8 floor and 1.3x the W8A8 default, no shape below 0.98x', () => {
  assert.equal(FP8_GROUPS.map((g) => [g.label, g.buckets, g.floorMax, g.speedupMin]), [['fp8 rows 1-16', [1, 2, 4, 8, 16], 1.15, 1.3]]);
  const good = BUCKETS.map((m) => row(m, m <= 16 ? 1.4 : 1.0, m <= 16 ? 1.1 : 1.5));
  assert.equal(fp8TargetVerdicts(good).map((v) => [v.target, v.status]), [
    ['fp8 rows 1-16 pick/floor geomean', 'met'],
    ['fp8 rows 1-16 vs default geomean', 'met'],
    ['fp8 every shape and rows vs default', 'met'],
  ]);
  // rows 1-16 at 1.2x the floor and 1.25x the default miss both; one shape at rows 64 below 0.98x misses the worst
  const bad = [...BUCKETS.map((m) => row(m, m <= 16 ? 1.25 : 1.0, 1.2)), row(64, 0.9, 1.0, 1024)];
  const v = fp8TargetVerdicts(bad);
  assert.equal(v.map((x) => x.status), ['missed', 'missed', 'missed']);
  assert.is(v[2]!.where, 'linear 1024x4096 M=64');
  assert.equal(fp8Summaries(bad).map((s) => s.group).slice(-2), ['fp8 rows 128', 'fp8 rows 1-16']);
});

const picked = (rows: number, pick_over_floor: number, floor_us: number, pick = 'blaslt', speedup = 1): PickedRow =>
  ({ ...row(rows, speedup, pick_over_floor), floor_us, pick, default: 'blaslt' });

test('miss breakdown: per dense group and floor class, the geomeans and each class\'s part of the group\'s distance from the floor', () => {
  assert.equal(FLOOR_CLASSES.map((c) => c.label), ['floor < 5 us', 'floor 5-20 us', 'floor >= 20 us']);
  const rows: PickedRow[] = [
    picked(32, 2.0, 1.2, 'cmma.b64.w4.s8.pdl', 1.5), picked(64, 2.0, 4.99),       // latency-bound: most of the distance
    picked(32, 1.1, 5, 'blaslt.algo3', 1.05), picked(128, 1.21, 14),              // 5-20 us (5 is in it)
    picked(64, 1.0, 300, 'wgmma.m128.t4.s1', 1.1),                                // at the floor: no part of the distance
    picked(4, 1.5, 2),                                                             // rows 1-16: its own group
    { op: 'moe', n: 768, k: 2048, experts: 128, topk: 8, routing: 'uniform', rows: 32, speedup: 3, pick_over_floor: 9, floor_us: 1, pick: 'moe.wgmma.m64.t3.k1', default: 'moe.blas' },
  ];
  const parts = missBreakdown(rows);
  assert.equal(parts.map((p) => [p.group, p.floor_class, p.shapes, p.default_picks]), [
    ['rows 1-16', 'floor < 5 us', 1, 1],
    ['rows 32-128', 'floor < 5 us', 2, 1],
    ['rows 32-128', 'floor 5-20 us', 2, 2],
    ['rows 32-128', 'floor >= 20 us', 1, 0],
  ]);
  const total = 2 * Math.log(2) + Math.log(1.1) + Math.log(1.21);
  assert.ok(close(parts[1]!.share_of_excess, (2 * Math.log(2)) / total));
  assert.ok(close(parts[2]!.share_of_excess, (Math.log(1.1) + Math.log(1.21)) / total));
  assert.ok(close(parts[3]!.share_of_excess, 0));
  assert.ok(close(parts.slice(1).reduce((sum, p) => sum + p.share_of_excess!, 0), 1), 'the shares of a group add up to 1');
  assert.ok(close(parts[2]!.geomean_pick_over_floor, 1.1 ** 1.5));
  assert.ok(close(parts[1]!.geomean_speedup, Math.sqrt(1.5)));
  assert.equal(missBreakdown([]), []);
});

test('miss breakdown: a group at or under the floor has no distance to share; lines name the class, the share and the picks on the default', () => {
  const under = missBreakdown([picked(32, 0.9, 3), picked(64, 1.0, 30)]);
  assert.equal(under.map((p) => p.share_of_excess), [null, null]);
  assert.match(missTable(under)[0]!, /^rows 32-128 +floor < 5 us +1 shapes  pick\/floor 0\.900  x1\.000 vs default  at the floor  1 of 1 on the default$/);
  const lines = missTable(missBreakdown([picked(32, 2, 3), picked(64, 1.5, 30, 'wgmma.pp2.m64.t4.s2')]));
  assert.match(lines[0]!, /floor < 5 us .* 63 % of the distance  1 of 1 on the default$/);
  assert.match(lines[1]!, /floor >= 20 us .* 37 % of the distance  0 of 1 on the default$/);
});

test('bench lines: the shape lines of a table-bench run, other kinds and blanks skipped; a bad line names its source and number', () => {
  const shape = { kind: 'shape', op: 'gated', dtype: 'bf16', n: 6144, k: 2048, rows: 32, names: 'Qwen3-1.7B:gate_up', pick: 'gated.blaslt', default: 'gated.blaslt', pick_us: 9, floor_us: 7.5, speedup: 1, pick_over_floor: 1.2 };
  const text = [JSON.stringify({ kind: 'summary', group: 'rows 1' }), '', JSON.stringify(shape), JSON.stringify({ kind: 'run' })].join('\n');
  assert.equal(parseBenchLines('run.jsonl', text), [
    { op: 'gated', dtype: 'bf16', n: 6144, k: 2048, rows: 32, names: 'Qwen3-1.7B:gate_up', pick: 'gated.blaslt', default: 'gated.blaslt', floor_us: 7.5, speedup: 1, pick_over_floor: 1.2 },
  ]);
  assert.throws(() => parseBenchLines('run.jsonl', `${JSON.stringify(shape)}\n{`), /^run\.jsonl:2: not JSON$/);
  assert.throws(() => parseBenchLines('run.jsonl', JSON.stringify({ ...shape, rows: 0 })), /run\.jsonl:1: a shape line with a bad rows/);
  assert.throws(() => parseBenchLines('run.jsonl', JSON.stringify({ ...shape, op: 'conv' })), /run\.jsonl:1: a shape line with a bad op/);
});

test('a default pick is the default or one of its BLAS heuristic\'s algos, nothing else of its name', () => {
  assert.ok(isDefaultPick('blaslt', 'blaslt'));
  assert.ok(isDefaultPick('blaslt.algo12', 'blaslt'));
  assert.ok(isDefaultPick('gated.blaslt', 'gated.blaslt'));
  assert.not.ok(isDefaultPick('blaslt.algo1', 'gated.blaslt'));
  assert.not.ok(isDefaultPick('blasltx', 'blaslt'));
  assert.not.ok(isDefaultPick('mma.w4.u16', 'blaslt'));
});

test.run();
