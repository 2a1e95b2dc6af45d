// The report of a table: gains, JSON lines and the human summary, on a table
// built from synthetic records (tests/helpers/synthetic-records.ts).
import pc from 'picocolors';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { choiceGain, entryJson, summaryLines } from '../lib/report.ts';
import type { Table } from '../lib/schema.ts';
import { buildTable } from '../lib/table.ts';
import { evenSamples, problem } from './helpers/synthetic-records.ts';

function syntheticTable(): Table {
  const result = buildTable(
    [
      ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]),
      ...problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(99.5, 0.02) }], { rows: 2 }),
      ...problem({ candidate: 'gated.plain', nodes: 2, samples_us: evenSamples(150, 0.02) }, [{ candidate: 'gated.rowblk.r4', samples_us: evenSamples(100, 0.02) }], {
        op: 'gated',
        n: 11008,
      }),
    ],
    { gate: 0.02, created: new Date('2025-01-01T00:00:00Z') },
  );
  if ('error' in result) throw new Error(result.error);
  return result.table;
}

const plain = pc.createColors(false);

test('choiceGain: median of the default over the choice, 0 when kept', () => {
  const [gated, moved, kept] = syntheticTable().entries;
  assert.ok(Math.abs(choiceGain(gated!)! - 0.5) < 1e-12);
  assert.ok(Math.abs(choiceGain(moved!)! - 0.25) < 1e-12);
  assert.is(choiceGain(kept!), 0);
});

test('choiceGain: a hand-edited choice without timings has no gain', () => {
  const entry = syntheticTable().entries[1]!;
  assert.is(choiceGain({ ...entry, choice: 'not.in.table' }), null);
  const untimed = { ...entry.candidates['rowblk.r2']!, median_us: null };
  assert.is(choiceGain({ ...entry, candidates: { ...entry.candidates, 'rowblk.r2': untimed } }), null);
});

test('entryJson: one flat object per entry with choice, gain and reason', () => {
  const json = entryJson(syntheticTable().entries[1]!);
  assert.equal(Object.keys(json), ['op', 'dtype', 'n', 'k', 'bucket', 'default', 'choice', 'moved', 'gain', 'choice_median_us', 'floor_us', 'reason']);
  assert.is(json.op, 'linear');
  assert.is(json.bucket, 1);
  assert.is(json.choice, 'rowblk.r2');
  assert.is(json.moved, true);
  assert.is(json.choice_median_us, 80);
  assert.is(json.floor_us, null);
  assert.is(json.reason, 'picked rowblk.r2: +25.0 % over plain');
});

test('summary: header counts entries and moves, one aligned line per entry', () => {
  const lines = summaryLines(syntheticTable(), { path: 'out/decode_gemm.json', colors: plain });
  assert.is(lines[0], 'out/decode_gemm.json: 3 entries, 2 moved off the default (gate 2.0 %, .pdl at rows <= 128; cpu Synthetic Device 1)');
  assert.is(lines.length, 4);
  assert.match(lines[1]!, /^ {2}gated bf16 n=11008 k=4096 M=1 +gated\.rowblk\.r4 +picked gated\.rowblk\.r4: \+50\.0 % over gated\.plain$/);
  assert.match(lines[2]!, /^ {2}linear bf16 n=4096 k=4096 M=1 +rowblk\.r2 +picked rowblk\.r2: \+25\.0 % over plain$/);
  assert.match(lines[3]!, /^ {2}linear bf16 n=4096 k=4096 M=2 +plain +kept: best rowblk\.r2 \+0\.5 %, below gate 2\.0 %$/);
  const reasonColumn = lines.slice(1).map((l) => l.search(/picked|kept/));
  assert.equal(new Set(reasonColumn).size, 1, 'reasons start in one column');
});

test('summary: colour codes only when the caller enables them', () => {
  const table = syntheticTable();
  const hasAnsi = (ls: string[]) => ls.some((l) => l.includes('\u001b['));
  assert.not.ok(hasAnsi(summaryLines(table, { path: 'x', colors: plain })));
  assert.ok(hasAnsi(summaryLines(table, { path: 'x', colors: pc.createColors(true) })));
});

test('a moe entry is labelled and written with its experts and top-k', () => {
  const built = buildTable(
    problem({ candidate: 'moe.loop', samples_us: evenSamples(100, 0.02) }, [{ candidate: 'moe.grouped.r4', samples_us: evenSamples(50, 0.02) }], { op: 'moe', n: 768, k: 2048, experts: 128, topk: 8 }),
    { gate: 0.02, created: new Date('2025-01-01T00:00:00Z') },
  );
  if ('error' in built) throw new Error(built.error);
  const [e] = built.table.entries;
  const json = entryJson(e!);
  assert.equal([json.op, json.experts, json.topk, json.n, json.k, json.choice], ['moe', 128, 8, 768, 2048, 'moe.grouped.r4']);
  assert.match(summaryLines(built.table, { path: 't.json', colors: plain })[1]!, /^  moe bf16 n=768 k=2048 E=128 top-k=8 M=1  moe\.grouped\.r4  picked moe\.grouped\.r4: \+100\.0 % over moe\.loop$/);
});

test.run();
