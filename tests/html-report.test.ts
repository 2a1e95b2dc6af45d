// lib/html-report.ts on hand-written tables (tests/helpers/report-fixture.ts):
// the units, the ceiling, the per-bucket summary, what each chart draws and
// where, escaping, self-containment and the atomic write.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  bucketSummaries,
  bytesPerCall,
  chartedCandidates,
  escapeHtml,
  gbps,
  readCeiling,
  renderReport,
  reportPathFor,
  shapeGroups,
  writeReport,
  shapeKey,
} from '../lib/html-report.ts';
import type { Table } from '../lib/schema.ts';
import { crowdedTable, fixtureTable } from './helpers/report-fixture.ts';

const count = (html: string, re: RegExp) => (html.match(new RegExp(re.source, 'g')) ?? []).length;
const close = (actual: number | null | undefined, expected: number, eps = 1e-9) =>
  assert.ok(actual !== null && actual !== undefined && Math.abs(actual - expected) <= eps * Math.max(1, Math.abs(expected)), `${actual} != ${expected}`);

/** cx, cy of the first circle whose title starts with `title`. */
function markAt(html: string, cls: string, title: string): { x: number; y: number } {
  const re = new RegExp(`<circle class="${cls}" cx="([\\d.]+)" cy="([\\d.]+)"[^>]*><title>${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`);
  const m = html.match(re);
  assert.ok(m, `no ${cls} mark titled '${title}'`);
  return { x: Number(m![1]), y: Number(m![2]) };
}

test('bytes per call counts W once (twice for gated), x and y, 2 bytes each', () => {
  assert.is(bytesPerCall({ op: 'linear', dtype: 'bf16', n: 4096, k: 4096 }, 1), (4096 * 4096 + 4096 + 4096) * 2);
  assert.is(bytesPerCall({ op: 'gated', dtype: 'fp16', n: 1024, k: 2048 }, 4), (2 * 1024 * 2048 + 4 * 2048 + 4 * 1024) * 2);
  assert.is(gbps(1e6, 1), 1000); // 1 MB in 1 µs is 1 TB/s
});

test('fp8 bytes per call: one byte a weight plus a 4-byte scale a row, x and y in bf16', () => {
  assert.is(bytesPerCall({ op: 'linear', dtype: 'fp8', n: 4096, k: 4096 }, 1), 4096 * 4096 + 4 * 4096 + (4096 + 4096) * 2);
  assert.is(bytesPerCall({ op: 'gated', dtype: 'fp8', n: 1024, k: 2048 }, 4), 2 * 1024 * 2048 + 4 * 2048 + (4 * 2048 + 4 * 1024) * 2);
});

test('read ceiling is the best weight bytes / floor time over the table', () => {
  const c = readCeiling(fixtureTable());
  close(c?.gbps, (4096 * 4096 * 2) / 60 / 1e3);
  assert.is(c?.entry.bucket, 1);
  assert.is(c?.entry.op, 'linear');
  const noFloors: Table = { ...fixtureTable(), entries: fixtureTable().entries.map((e) => ({ ...e, floor_us: null })) };
  assert.is(readCeiling(noFloors), null);
});

test('summary per bucket: geomean speed-up of the choice over the default and time over the floor', () => {
  const s = bucketSummaries(fixtureTable());
  assert.equal(
    s.map((x) => x.bucket),
    [1, 2, 4, 8, 0],
  );
  const [m1, m2, m4, m8, all] = s;
  assert.is(m1!.entries, 2);
  assert.is(m1!.moved, 2);
  close(m1!.speedup, 1.25); // 100/80 and 50/40
  close(m1!.overFloor, Math.sqrt((80 / 60) * (40 / 25)));
  close(m2!.speedup, 110 / 85);
  close(m4!.speedup, Math.sqrt((130 / 100) * (70 / 65)));
  assert.is(m4!.floored, 1); // B has no floor at M=4
  close(m4!.overFloor, 100 / 62);
  assert.is(m8!.moved, 0);
  close(m8!.speedup, 1);
  close(m8!.overFloor, 170 / 63);
  assert.is(all!.entries, 6);
  assert.is(all!.moved, 5);
  close(all!.speedup, Math.pow(1.25 * (110 / 85) * (130 / 100) * 1 * 1.25 * (70 / 65), 1 / 6));
});

test('one chart per shape with a mark per timed candidate and bucket, picks ringed, parity failures crossed', () => {
  const html = renderReport(fixtureTable());
  assert.is(count(html, /<svg class="chart"/), 2);
  assert.ok(html.includes('data-shape="linear bf16 n=4096 k=4096" data-series="4"'));
  assert.ok(html.includes('data-shape="gated bf16 n=1024 k=2048" data-series="3"'));
  assert.is(count(html, /<circle class="pt"/), 16 + 5);
  assert.is(count(html, /<circle class="pick"/), 6);
  assert.is(count(html, /<path class="parity-fail"/), 2);
  assert.is(count(html, /<path class="floor"/), 2);
  assert.is(count(html, /<path class="ceiling"/), 2);
  // B has no M=2: its lines break into separate moves instead of joining M=1 to M=4.
  // Its floor is known at M=1 only: one short level stroke there.
  const bFloor = html.match(/data-shape="gated[^]*?<path class="floor" d="M([\d.]+) ([\d.]+)L([\d.]+) ([\d.]+)"/);
  const bPlain = markAt(html, 'pt', 'gated.plain M=1:');
  assert.ok(bFloor, 'gated floor is one stroke');
  close((Number(bFloor![1]) + Number(bFloor![3])) / 2, bPlain.x, 1e-3);
  assert.is(bFloor![2], bFloor![4]);
  // ... and its series break at the missing M=2 rather than join M=1 to M=4.
  const bSeries = html.match(/data-shape="gated[^]*?<path class="series" d="([^"]*)"/);
  assert.is(bSeries?.[1]?.split('M').length, 3);
  assert.ok(html.includes('read ceiling 559 GB/s'));
});

test('the ring sits on the chosen candidate, the cross on the failing one', () => {
  const html = renderReport(fixtureTable());
  assert.equal(markAt(html, 'pick', 'pick at M=1: rowblk.r2'), markAt(html, 'pt', 'rowblk.r2 M=1:'));
  assert.equal(markAt(html, 'pick', 'pick at M=8: plain'), markAt(html, 'pt', 'plain M=8:'));
  const fail = html.match(/<path class="parity-fail" d="M([\d.]+) ([\d.]+)L[^"]*"[^>]*><title>parity FAIL splitk.s4 M=8/);
  const pt = markAt(html, 'pt', 'splitk.s4 M=8:');
  assert.ok(fail);
  close(Number(fail![1]) + 6, pt.x, 1e-3);
  close(Number(fail![2]) + 6, pt.y, 1e-3);
  assert.match(html, /Parity failures: 2/);
  assert.match(html, /linear bf16 n=4096 k=4096 M=8: splitk.s4 \(rel err 5.00e-1\)/);
});

test('GB/s puts faster candidates higher, µs puts them lower, with the ring still on the pick', () => {
  const gb = renderReport(fixtureTable());
  assert.ok(markAt(gb, 'pt', 'rowblk.r2 M=1:').y < markAt(gb, 'pt', 'plain M=1:').y);
  const us = renderReport(fixtureTable(), { metric: 'us' });
  assert.ok(markAt(us, 'pt', 'rowblk.r2 M=1:').y > markAt(us, 'pt', 'plain M=1:').y);
  assert.equal(markAt(us, 'pick', 'pick at M=1: rowblk.r2'), markAt(us, 'pt', 'rowblk.r2 M=1:'));
  assert.is(count(us, /<circle class="pt"/), 21);
  assert.ok(us.includes('µs per call'));
});

test('a point at the floor time lies on the floor line', () => {
  const table = fixtureTable({ clean: true });
  table.entries[0]!.candidates['rowblk.r2']!.median_us = 60; // = A's floor at M=1
  const html = renderReport(table);
  const pt = markAt(html, 'pt', 'rowblk.r2 M=1:');
  const floor = html.match(/data-shape="linear[^]*?<path class="floor" d="M([\d.]+) ([\d.]+)/);
  close(Number(floor![1]), pt.x, 1e-3);
  close(Number(floor![2]), pt.y, 1e-3);
});

test('many candidates: the default, the pick and the 10 best are charted, the rest only in the details table', () => {
  const table = crowdedTable();
  const { charted, rest } = chartedCandidates(shapeGroups(table)[0]!, 12);
  assert.equal(charted, ['plain', 'cand00', 'cand01', 'cand02', 'cand03', 'cand04', 'cand05', 'cand06', 'cand07', 'cand08', 'cand09', 'cand10']);
  assert.equal(rest, ['cand11', 'cand12', 'cand13', 'cand14', 'cand15', 'cand16', 'cand17', 'cand18', 'cand19']);
  const html = renderReport(table);
  assert.is(count(html, /<circle class="pt"/), 12);
  assert.ok(html.includes('numbers for all 21 candidates (9 not charted)'));
  assert.is(count(html, /<table class="numbers">[^]*?<\/table>/), 1);
  assert.is(count(html.match(/<table class="numbers">[^]*?<\/table>/)![0], /<tr><td>/), 21);
  assert.is(count(html.match(/<ul class="legend">[^]*?<\/ul>/)![0], /<svg class="key"/), 12 + 3); // + floor, ceiling, pick
});

test('text from the table is escaped', () => {
  const table = fixtureTable();
  table.identity.device = `<script>alert("x")</script> & 'q'`;
  table.entries[0]!.reason = '<img src=x>';
  const html = renderReport(table);
  assert.not.ok(html.includes('<script'));
  assert.not.ok(html.includes('<img'));
  assert.ok(html.includes('&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62; &#38; &#39;q&#39;'));
  assert.is(escapeHtml(`a<b>&"'`), 'a&#60;b&#62;&#38;&#34;&#39;');
});

test('the page is self-contained: no scripts, links, sources or URLs', () => {
  const html = renderReport(fixtureTable());
  for (const banned of ['<script', 'http:', 'https:', 'src=', 'href=', '@import', 'url(', '<link']) {
    assert.not.ok(html.includes(banned), `page contains ${banned}`);
  }
  assert.ok(html.startsWith('<!doctype html>'));
  assert.not.ok(/NaN|Infinity|undefined/.test(html));
  assert.is(renderReport(fixtureTable()), html); // no clock inside: same table, same page
});

test('writeReport writes the page atomically beside the table and never throws', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-report-'));
  try {
    const target = reportPathFor(path.join(dir, 'decode_gemm.json'));
    assert.is(target, path.join(dir, 'decode_gemm.html'));
    fs.writeFileSync(target, 'old');
    assert.equal(writeReport(fixtureTable(), target), { path: target });
    assert.is(fs.readFileSync(target, 'utf8'), renderReport(fixtureTable()));
    assert.equal(fs.readdirSync(dir), ['decode_gemm.html']); // no temp file left

    const blocked = path.join(dir, 'decode_gemm.html', 'x.html'); // parent is a file
    const failed = writeReport(fixtureTable(), blocked);
    assert.ok('error' in failed && failed.error.startsWith(blocked));

    const bad = { ...fixtureTable(), entries: [{ ...fixtureTable().entries[0]!, bucket: 3 }] } as unknown as Table;
    const invalid = writeReport(bad, target);
    assert.ok('error' in invalid && invalid.error.includes('entries.0.bucket'), JSON.stringify(invalid));
    assert.is(fs.readFileSync(target, 'utf8'), renderReport(fixtureTable())); // old page kept
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('edge tables render: no entries, and an entry with nothing timed (its failure crossed on the axis)', () => {
  const empty = renderReport({ ...fixtureTable(), entries: [] });
  assert.is(count(empty, /<svg class="chart"/), 0);
  assert.ok(empty.includes('No entry has a read floor'));
  assert.equal(bucketSummaries({ ...fixtureTable(), entries: [] }), [{ bucket: 0, entries: 0, moved: 0, timed: 0, speedup: null, floored: 0, overFloor: null }]);

  const base = fixtureTable().entries[0]!;
  const untimed = { ...base.candidates.plain!, median_us: null, p25_us: null, p75_us: null, samples: 0, status: 'failed' as const };
  const entry = { ...base, choice: 'plain', floor_us: null, candidates: { plain: untimed, 'splitk.s4': { ...untimed, parity: 'fail' as const } } };
  for (const metric of ['gbps', 'us'] as const) {
    const html = renderReport({ ...fixtureTable(), entries: [entry] }, { metric });
    assert.is(count(html, /<svg class="chart"/), 1);
    assert.is(count(html, /<circle class="pt"/), 0);
    assert.is(count(html, /<circle class="pick"/), 0);
    assert.is(count(html, /<path class="parity-fail"/), 1);
    assert.not.ok(/NaN|Infinity/.test(html), `${metric} page has NaN or Infinity`);
  }
});

test('a moe shape: its bytes are those of min(E, rows x top-k) experts, x and y [rows, K]; its key names E and top-k; no ceiling from its floor', () => {
  const moe = { op: 'moe', dtype: 'bf16', n: 768, k: 2048, experts: 128, topk: 8 } as const;
  const expert = 3 * 768 * 2048 * 2;
  assert.is(bytesPerCall(moe, 1), 8 * expert + (2048 + 2048) * 2);
  assert.is(bytesPerCall(moe, 64), 128 * expert + (64 * 2048 + 64 * 2048) * 2);
  assert.is(shapeKey(moe), 'moe bf16 n=768 k=2048 E=128 top-k=8');
  const t = fixtureTable();
  const before = readCeiling(t);
  t.entries.push({ ...structuredClone(t.entries[0]!), op: 'moe', n: 768, k: 2048, experts: 128, topk: 8, floor_us: 1e-3 });
  assert.is(readCeiling(t)?.gbps, before?.gbps, 'a moe floor bounds no read ceiling');
});

test.run();
