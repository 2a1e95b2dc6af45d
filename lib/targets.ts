// The targets of bench/table-bench.ts, as pure functions over its measured
// rows: geomeans of the two ratios per rows bucket and per rows group, and one
// verdict per target, each met, missed or not measured. The dense targets
// (issue 11) are judged on the linear and gated rows only, the moe targets
// (issue 14) on the moe rows only. Ratios, never times: speedup = default time
// / pick time (the default is cuBLASLt on CUDA), pick_over_floor = pick time /
// read floor (for moe: of the experts the call's rows read), both from one run.
import * as v from 'valibot';
import { jsonLines, kindOf } from './json-lines.ts';
import { Dtype, Op } from './schema.ts';
import { shapeText } from './shape-key.ts';
import { geomean } from './stats.ts';

/** What table-bench measured on one shape at one rows bucket (a moe shape: under one routing). */
export interface BenchRow {
  op: Op;
  n: number;
  k: number;
  /** op moe only */
  experts?: number;
  topk?: number;
  routing?: string;
  rows: number;
  speedup: number;
  pick_over_floor: number;
}

export interface RowsGroup {
  label: string;
  /** the rows buckets the group spans */
  buckets: readonly number[];
  /** pick / floor geomean at most this */
  floorMax: number;
  /** speedup over the default, geomean at least this (absent: no geomean target) */
  speedupMin?: number;
  /** every shape of the group at least this fast as the default (absent: no per-group worst target) */
  worstMin?: number;
}

export const GROUPS: readonly RowsGroup[] = [
  { label: 'rows 1-16', buckets: [1, 2, 4, 8, 16], floorMax: 1.06, speedupMin: 1.25 },
  { label: 'rows 32-128', buckets: [32, 64, 128], floorMax: 1.12, speedupMin: 1.15 },
];
/** no shape at any rows slower than this fraction of the default */
export const WORST_SPEEDUP_MIN = 0.98;

/** The moe targets of issue 14: rows 1-8 near the floor and 2x the default, rows 16-128 near the floor and never slower. */
export const MOE_GROUPS: readonly RowsGroup[] = [
  { label: 'moe rows 1-8', buckets: [1, 2, 4, 8], floorMax: 1.3, speedupMin: 2 },
  { label: 'moe rows 16-128', buckets: [16, 32, 64, 128], floorMax: 1.3, worstMin: 1 },
];

/** The fp8 targets of issue 14 (table-bench --dtype fp8): rows 1-16 near the fp8 read floor and 1.3x the W8A8 default (cuBLASLt's fp8 matmul after the activation quant). */
export const FP8_GROUPS: readonly RowsGroup[] = [{ label: 'fp8 rows 1-16', buckets: [1, 2, 4, 8, 16], floorMax: 1.15, speedupMin: 1.3 }];

const isMoe = (r: BenchRow) => r.op === 'moe';

export interface Summary {
  group: string;
  shapes: number;
  geomean_speedup: number;
  worst_speedup: number;
  /** the shape and rows of the worst speedup: "linear 4096x4096 M=8" */
  worst_at: string;
  geomean_pick_over_floor: number;
}

/** "linear 4096x4096 M=8", "moe 768x2048 E128 top8 skewed M=1" */
export const where = (r: BenchRow) => `${r.op} ${shapeText(r)}${r.routing ? ` ${r.routing}` : ''} M=${r.rows}`;

function worstOf(rows: readonly BenchRow[]): BenchRow {
  return rows.reduce((w, r) => (r.speedup < w.speedup ? r : w));
}

/** Geomeans of both ratios over rows, or null when rows is empty. */
export function summarize(group: string, rows: readonly BenchRow[]): Summary | null {
  if (rows.length === 0) return null;
  const worst = worstOf(rows);
  return {
    group,
    shapes: rows.length,
    geomean_speedup: geomean(rows.map((r) => r.speedup)),
    worst_speedup: worst.speedup,
    worst_at: where(worst),
    geomean_pick_over_floor: geomean(rows.map((r) => r.pick_over_floor)),
  };
}

function summariesOf(rows: readonly BenchRow[], groups: readonly RowsGroup[], prefix: string): Summary[] {
  const buckets = [...new Set(rows.map((r) => r.rows))].sort((a, b) => a - b);
  const perRows = buckets.map((m) => summarize(`${prefix}rows ${m}`, rows.filter((r) => r.rows === m)));
  const perGroup = groups.map((g) => summarize(g.label, rows.filter((r) => g.buckets.includes(r.rows))));
  return [...perRows, ...perGroup].filter((s): s is Summary => s !== null);
}

/** Over the dense rows (moe ones left out): one summary per rows bucket measured, in bucket order, then one per group that has any. */
export function summaries(rows: readonly BenchRow[]): Summary[] {
  return summariesOf(rows.filter((r) => !isMoe(r)), GROUPS, '');
}

/** The same over the moe rows (both routings), labelled "moe rows 1", ..., then per moe group. */
export function moeSummaries(rows: readonly BenchRow[]): Summary[] {
  return summariesOf(rows.filter(isMoe), MOE_GROUPS, 'moe ');
}

/** The same over fp8 rows (a table-bench --dtype fp8 run), labelled "fp8 rows 1", ..., then the fp8 group. */
export function fp8Summaries(rows: readonly BenchRow[]): Summary[] {
  return summariesOf(rows.filter((r) => !isMoe(r)), FP8_GROUPS, 'fp8 ');
}

/** A measured row with what table-bench knows of it beyond the ratios: the read floor and both names. */
export interface PickedRow extends BenchRow {
  floor_us: number;
  pick: string;
  default: string;
}

/** The read-floor classes a group's distance from the floor is split by: weights small enough that a
 * launch's latency is the floor's own size, the middle, and the large ones that stream. */
export const FLOOR_CLASSES: readonly { label: string; below: number }[] = [
  { label: 'floor < 5 us', below: 5 },
  { label: 'floor 5-20 us', below: 20 },
  { label: 'floor >= 20 us', below: Infinity },
];

/** One floor class of one dense group: its geomeans and its part of the group's distance from the floor. */
export interface MissPart {
  group: string;
  floor_class: string;
  shapes: number;
  geomean_pick_over_floor: number;
  geomean_speedup: number;
  /** this class's sum of log(pick/floor) over the group's: where the group's geomean distance from the floor
   * comes from (null where the group is at or under the floor, and there is no distance to share) */
  share_of_excess: number | null;
  /** shapes whose pick is the default itself or another algo of the default's BLAS (blaslt.algoI of blaslt):
   * where the table has nothing of kpick's own to offer */
  default_picks: number;
}

/** The pick is the default or one of the default's heuristic algos: "blaslt.algo3" of "blaslt". */
export const isDefaultPick = (pick: string, def: string) => pick === def || pick.startsWith(`${def}.algo`);

/** Per dense group (GROUPS; moe rows left out), per floor class with shapes in it: where the group's distance
 * from the read floor lies, and how many of its picks are the default's own. */
export function missBreakdown(rows: readonly PickedRow[]): MissPart[] {
  const out: MissPart[] = [];
  for (const g of GROUPS) {
    const of = rows.filter((r) => !isMoe(r) && g.buckets.includes(r.rows));
    const total = of.reduce((sum, r) => sum + Math.log(r.pick_over_floor), 0);
    let lower = 0;
    for (const c of FLOOR_CLASSES) {
      const part = of.filter((r) => r.floor_us >= lower && r.floor_us < c.below);
      lower = c.below;
      if (part.length === 0) continue;
      const excess = part.reduce((sum, r) => sum + Math.log(r.pick_over_floor), 0);
      out.push({
        group: g.label,
        floor_class: c.label,
        shapes: part.length,
        geomean_pick_over_floor: geomean(part.map((r) => r.pick_over_floor)),
        geomean_speedup: geomean(part.map((r) => r.speedup)),
        share_of_excess: total > 0 ? excess / total : null,
        default_picks: part.filter((r) => isDefaultPick(r.pick, r.default)).length,
      });
    }
  }
  return out;
}

/** "rows 32-128  floor < 5 us      13 shapes  pick/floor 2.041  x1.089 vs default  44 % of the distance  10 of 13 on the default" */
export function missTable(parts: readonly MissPart[]): string[] {
  const width = Math.max(12, ...parts.map((p) => p.group.length));
  const cls = Math.max(...FLOOR_CLASSES.map((c) => c.label.length));
  return parts.map((p) => {
    const share = p.share_of_excess === null ? 'at the floor' : `${Math.round(100 * p.share_of_excess)} % of the distance`;
    return `${p.group.padEnd(width)}  ${p.floor_class.padEnd(cls)}  ${String(p.shapes).padStart(3)} shapes  pick/floor ${p.geomean_pick_over_floor.toFixed(3)}  ` +
      `x${p.geomean_speedup.toFixed(3)} vs default  ${share}  ${p.default_picks} of ${p.shapes} on the default`;
  });
}

/** A shape line of an earlier table-bench run, as its judging needs it (other fields are left alone). */
export interface RecordedRow extends PickedRow {
  dtype: Dtype;
  /** the presets' linears of the shape: "Llama-3.1-8B:qkv Qwen3-8B:qkv" */
  names?: string;
}

const count = v.pipe(v.number(), v.integer(), v.minValue(1));
const positive = v.pipe(v.number(), v.finite(), v.gtValue(0));
const ShapeLine = v.object({
  kind: v.literal('shape'),
  op: Op,
  dtype: Dtype,
  n: count,
  k: count,
  experts: v.optional(count),
  topk: v.optional(count),
  routing: v.optional(v.string()),
  rows: count,
  pick: v.string(),
  default: v.string(),
  floor_us: positive,
  speedup: positive,
  pick_over_floor: positive,
  names: v.optional(v.string()),
});

/**
 * The shape lines of table-bench's JSON-lines output (other kinds and blank lines skipped). A line
 * that is not JSON, or a shape line short of what the judging needs, throws naming its source and line.
 */
export function parseBenchLines(name: string, text: string): RecordedRow[] {
  return jsonLines(name, text)
    .filter(({ value }) => kindOf(value) === 'shape')
    .map(({ value, at }) => {
      const r = v.safeParse(ShapeLine, value);
      if (!r.success) throw new Error(`${at}: a shape line with a bad ${v.getDotPath(r.issues[0]) ?? 'field'}: ${r.issues[0].message}`);
      const { kind: _, ...row } = r.output;
      return row;
    });
}

export type VerdictStatus = 'met' | 'missed' | 'not measured';

export interface Verdict {
  target: string;
  want: string;
  status: VerdictStatus;
  /** the measured value; null when not measured */
  value: number | null;
  shapes: number;
  /** buckets of the group that were not measured (the verdict covers the others) */
  missing_rows: number[];
  /** for the worst-shape target: where the worst speedup is */
  where?: string;
}

function verdict(target: string, want: string, value: number | null, ok: (v: number) => boolean, shapes: number, missing: number[]): Verdict {
  const status: VerdictStatus = value === null ? 'not measured' : ok(value) ? 'met' : 'missed';
  return { target, want, status, value, shapes, missing_rows: missing };
}

/** The worst-shape verdict over rows: the minimum speedup, and where it is. */
function worstVerdict(target: string, min: number, rows: readonly BenchRow[], buckets: readonly number[]): Verdict {
  const worst = rows.length > 0 ? worstOf(rows) : null;
  const w = verdict(target, `>= ${min}`, worst?.speedup ?? null, (v) => v >= min, rows.length, buckets.filter((m) => !rows.some((r) => r.rows === m)));
  return worst ? { ...w, where: where(worst) } : w;
}

/** Per group, in order: pick/floor, then the speedup geomean and the group's worst shape where the group sets them. */
function groupVerdicts(groups: readonly RowsGroup[], rows: readonly BenchRow[]): Verdict[] {
  const out: Verdict[] = [];
  for (const g of groups) {
    const of = rows.filter((r) => g.buckets.includes(r.rows));
    const s = summarize(g.label, of);
    const missing = g.buckets.filter((m) => !rows.some((r) => r.rows === m));
    out.push(verdict(`${g.label} pick/floor geomean`, `<= ${g.floorMax}`, s?.geomean_pick_over_floor ?? null, (v) => v <= g.floorMax, s?.shapes ?? 0, missing));
    const speedupMin = g.speedupMin;
    if (speedupMin !== undefined) out.push(verdict(`${g.label} vs default geomean`, `>= ${speedupMin}`, s?.geomean_speedup ?? null, (v) => v >= speedupMin, s?.shapes ?? 0, missing));
    if (g.worstMin !== undefined) out.push(worstVerdict(`${g.label} every shape vs default`, g.worstMin, of, g.buckets));
  }
  return out;
}

/** A dense run's verdicts (moe rows left out): per group pick/floor then speedup, then the
 * worst shape over `buckets` (default: every rows count the run timed). */
function denseVerdicts(rows: readonly BenchRow[], groups: readonly RowsGroup[], worstLabel: string, buckets?: readonly number[]): Verdict[] {
  const dense = rows.filter((r) => !isMoe(r));
  const all = buckets ?? [...new Set(dense.map((r) => r.rows))].sort((a, b) => a - b);
  return [...groupVerdicts(groups, dense), worstVerdict(worstLabel, WORST_SPEEDUP_MIN, dense, all)];
}

/** Every dense target, in a fixed order: per group pick/floor then speedup, then the worst shape at the groups' rows. */
export function targetVerdicts(rows: readonly BenchRow[]): Verdict[] {
  return denseVerdicts(rows, GROUPS, 'every shape and rows vs default', [...new Set(GROUPS.flatMap((g) => g.buckets))]);
}

/** Every fp8 target over fp8 rows, in a fixed order: the group's pick/floor and speedup, then the worst shape at any rows. */
export function fp8TargetVerdicts(rows: readonly BenchRow[]): Verdict[] {
  return denseVerdicts(rows, FP8_GROUPS, 'fp8 every shape and rows vs default');
}

/** Every moe target over the moe rows, in a fixed order; none when the run timed no moe shape. */
export function moeTargetVerdicts(rows: readonly BenchRow[]): Verdict[] {
  const moe = rows.filter(isMoe);
  return moe.length === 0 ? [] : groupVerdicts(MOE_GROUPS, moe);
}

/** "target met: rows 1-16 pick/floor geomean 1.045 (want <= 1.06; 115 shapes)" */
export function verdictLine(v: Verdict): string {
  const head = v.status === 'met' ? 'target met' : v.status === 'missed' ? 'target MISSED' : 'target not measured';
  if (v.value === null) return `${head}: ${v.target} (want ${v.want}; no rows of it in this run)`;
  const at = v.where ? ` at ${v.where}` : '';
  const partial = v.missing_rows.length > 0 ? `; rows ${v.missing_rows.join(',')} not measured` : '';
  return `${head}: ${v.target} ${v.value.toFixed(3)}${at} (want ${v.want}; ${v.shapes} shapes${partial})`;
}

/** The human table of the summaries: one header, one line per summary; every line starts with "rows" ("moe rows" on moe's). */
export function summaryTable(list: readonly Summary[]): string[] {
  const width = Math.max(12, ...list.map((s) => s.group.length));
  const head = `${'rows'.padEnd(width)} ${'shapes'.padStart(6)}  ${'vs default'.padStart(10)}  ${'worst'.padStart(7)}  ${'pick/floor'.padStart(10)}  worst at`;
  const lines = list.map(
    (s) =>
      `${s.group.padEnd(width)} ${String(s.shapes).padStart(6)}  ${`x${s.geomean_speedup.toFixed(3)}`.padStart(10)}  ${`x${s.worst_speedup.toFixed(3)}`.padStart(7)}  ${s.geomean_pick_over_floor.toFixed(3).padStart(10)}  ${s.worst_at}`,
  );
  return [head, ...lines];
}
