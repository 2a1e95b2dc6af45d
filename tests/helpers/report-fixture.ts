// Tables for the report tests, written out by hand so every count and ratio a
// test expects follows from the numbers here, not from the code under test.
// The timings are made-up inputs, not measurements.
import * as v from 'valibot';
import { Table, TABLE_FORMAT, type CandidateResult, type TableEntry } from '../../lib/schema.ts';
import { SYNTHETIC_IDENTITY } from './synthetic-records.ts';

function cand(median: number | null, over: Partial<CandidateResult> = {}): CandidateResult {
  return {
    median_us: median,
    p25_us: median === null ? null : median * 0.99,
    p75_us: median === null ? null : median * 1.01,
    samples: median === null ? 0 : 9,
    nodes: 1,
    params: {},
    parity: 'pass',
    rel_err: 1e-3,
    stack_bound: false,
    status: median === null ? 'unsupported' : 'ok',
    ...over,
  };
}

function entry(shape: Pick<TableEntry, 'op' | 'n' | 'k'>, bucket: TableEntry['bucket'], def: string, choice: string, floor: number | null, candidates: Record<string, CandidateResult>): TableEntry {
  return { ...shape, dtype: 'bf16', bucket, default: def, choice, reason: choice === def ? 'kept: test' : `picked ${choice}: test`, floor_us: floor, candidates };
}

const A = { op: 'linear', n: 4096, k: 4096 } as const;
const B = { op: 'gated', n: 1024, k: 2048 } as const;

/**
 * Two shapes:
 * A linear 4096x4096 at M = 1, 2, 4, 8: plain (default), rowblk.r2, rowblk.r4,
 *   splitk.s4 (parity FAIL at M=8, timed there at 60 µs); floor 60, 61, 62, 63.
 *   Picks: r2, r4, r4, plain. 4 series x 4 buckets = 16 marks, 1 cross.
 * B gated 1024x2048 at M = 1, 4 (no M=2): gated.plain (default), gated.fused,
 *   gated.bad (parity FAIL at M=1, 30 µs; unsupported at M=4); floor 25, none.
 *   Picks: fused, fused. 2 + 2 + 1 = 5 marks, 1 cross.
 * Read ceiling: A's M=1 floor, 4096·4096·2 B / 60 µs = 559.24 GB/s.
 * With `clean`, the two parity-failing results are left out.
 */
export function fixtureTable(opts: { clean?: boolean } = {}): Table {
  const fail = (median: number | null, rel: number | null): CandidateResult => cand(median, { parity: 'fail', rel_err: rel });
  const a8: Record<string, CandidateResult> = { plain: cand(170), 'rowblk.r2': cand(175), 'rowblk.r4': cand(172) };
  if (!opts.clean) a8['splitk.s4'] = fail(60, 0.5);
  const b1: Record<string, CandidateResult> = { 'gated.plain': cand(50, { nodes: 2 }), 'gated.fused': cand(40) };
  if (!opts.clean) b1['gated.bad'] = fail(30, null);
  const b4: Record<string, CandidateResult> = { 'gated.plain': cand(70, { nodes: 2 }), 'gated.fused': cand(65) };
  if (!opts.clean) b4['gated.bad'] = cand(null, { parity: 'skipped', rel_err: null });
  const table: Table = {
    format: TABLE_FORMAT,
    identity: { ...SYNTHETIC_IDENTITY },
    created: '2025-01-02T03:04:05.000Z',
    gate: { min_gain: 0.02 },
    entries: [
      entry(A, 1, 'plain', 'rowblk.r2', 60, { plain: cand(100), 'rowblk.r2': cand(80), 'rowblk.r4': cand(90), 'splitk.s4': cand(95) }),
      entry(A, 2, 'plain', 'rowblk.r4', 61, { plain: cand(110), 'rowblk.r2': cand(90), 'rowblk.r4': cand(85), 'splitk.s4': cand(95) }),
      entry(A, 4, 'plain', 'rowblk.r4', 62, { plain: cand(130), 'rowblk.r2': cand(120), 'rowblk.r4': cand(100), 'splitk.s4': cand(110) }),
      entry(A, 8, 'plain', 'plain', 63, a8),
      entry(B, 1, 'gated.plain', 'gated.fused', 25, b1),
      entry(B, 4, 'gated.plain', 'gated.fused', null, b4),
    ],
  };
  return v.parse(Table, table);
}

/** One shape at M=1 with the default plain (150 µs) and cand00..cand19 at 100..119 µs; cand00 picked. */
export function crowdedTable(): Table {
  const candidates: Record<string, CandidateResult> = { plain: cand(150) };
  for (let i = 0; i < 20; i++) candidates[`cand${String(i).padStart(2, '0')}`] = cand(100 + i);
  const table: Table = { ...fixtureTable({ clean: true }), entries: [entry(A, 1, 'plain', 'cand00', 90, candidates)] };
  return v.parse(Table, table);
}
