import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { BUCKETS } from '../lib/schema.ts';
import { GROUPS, summaries, summarize, summaryTable, targetVerdicts, verdictLine, WORST_SPEEDUP_MIN, type BenchRow } from '../lib/targets.ts';

const row = (rows: number, speedup: number, pick_over_floor: number, n = 4096): BenchRow => ({ op: 'linear', n, k: 4096, rows, speedup, pick_over_floor });
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

test.run();
