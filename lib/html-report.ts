// A table as one self-contained HTML page for people: per shape an inline SVG
// chart of every candidate across the rows buckets against the read floor and
// the read ceiling, the pick ringed, parity failures crossed and listed; a
// summary per bucket of the table route against the default and the floor.
// No scripts, no network, no external assets: the file is the whole report.
//
// Units. bytes per call = N·K·e·(2 when gated) + M·K·e + M·N·e, e = 2 bytes
// (fp8: the weight is its e4m3 codes and fp32 row scales, N·K + 4·N, x and y bf16);
// GB/s = bytes / us / 1e3. The floor of a shape is drawn on the same scale as
// its candidates (problem bytes / floor time), so a point on the floor line
// takes exactly the floor's time. The read ceiling is a bandwidth: the best
// weight bytes / floor time over every entry of the table (the floor kernel
// streams the weights only).
import * as v from 'valibot';
import { geomean } from './stats.ts';
import { BUCKETS, Table as TableSchema, issuesLine, weightBytes as packedBytes, type Table, type TableEntry } from './schema.ts';
import { writeFileAtomic } from './write-file.ts';
import { byShape, moeFields, weightBytes as shapeWeightBytes } from './shape-key.ts';

export const ELEMENT_BYTES = 2;
/** Candidates drawn per chart beyond the default, the picks and parity failures. */
export const MAX_CHARTED = 12;

export type Metric = 'gbps' | 'us';
export const METRICS: readonly Metric[] = ['gbps', 'us'];

export interface ReportOptions {
  /** y axis of the charts: GB/s (default) or microseconds */
  metric?: Metric;
  /** where the table came from, shown in the header */
  source?: string;
  /** candidates charted per shape; the rest go to the collapsible table */
  maxCharted?: number;
}

type Shape = Pick<TableEntry, 'op' | 'dtype' | 'n' | 'k' | 'experts' | 'topk'>;

/**
 * Bytes one call moves: the weights once, x and y once. A moe call's weights
 * are those of the experts its rows route to, counted as min(E, rows x top-k):
 * at most what it reads (its read floor streams the ones a routing reads).
 */
export function bytesPerCall(shape: Shape, rows: number): number {
  const yCols = shape.op === 'moe' ? shape.k : shape.n;
  return weightBytes(shape, rows) + (rows * shape.k + rows * yCols) * ELEMENT_BYTES;
}

/**
 * Bytes the read floor streams: the weights alone (fp8: codes and scales; a
 * moe call's at these rows, as bytesPerCall counts them).
 */
export function weightBytes(shape: Shape, rows = 1): number {
  if (shape.op === 'moe') return shapeWeightBytes(shape, rows);
  return packedBytes(shape.dtype, shape.op === 'gated' ? 2 * shape.n : shape.n, shape.k);
}

export function gbps(bytes: number, us: number): number {
  return bytes / us / 1e3;
}

/** A timing that can be drawn: positive and finite. */
function usable(us: number | null | undefined): us is number {
  return typeof us === 'number' && Number.isFinite(us) && us > 0;
}

export interface Ceiling {
  gbps: number;
  /** the entry whose floor it is */
  entry: TableEntry;
}

/** The measured read ceiling: the best floor bandwidth of the table, or null when no entry has a floor. */
export function readCeiling(table: Table): Ceiling | null {
  let best: Ceiling | null = null;
  for (const entry of table.entries) {
    // a moe floor reads the experts its routing drew, which bytesPerCall only bounds
    if (!usable(entry.floor_us) || entry.op === 'moe') continue;
    const rate = gbps(weightBytes(entry), entry.floor_us);
    if (best === null || rate > best.gbps) best = { gbps: rate, entry };
  }
  return best;
}

export interface ShapeGroup {
  shape: Shape;
  /** one entry per bucket, ascending */
  entries: TableEntry[];
}

export function shapeKey(s: Shape): string {
  return s.op === 'moe' ? `${s.op} ${s.dtype} n=${s.n} k=${s.k} E=${s.experts} top-k=${s.topk}` : `${s.op} ${s.dtype} n=${s.n} k=${s.k}`;
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Entries grouped by (op, dtype, n, k), shapes and buckets in table order. */
export function shapeGroups(table: Table): ShapeGroup[] {
  const groups = new Map<string, ShapeGroup>();
  for (const e of table.entries) {
    const key = shapeKey(e);
    const group = groups.get(key) ?? { shape: { op: e.op, dtype: e.dtype, n: e.n, k: e.k, ...moeFields(e) }, entries: [] };
    group.entries.push(e);
    groups.set(key, group);
  }
  const list = [...groups.values()];
  for (const g of list) g.entries.sort((a, b) => a.bucket - b.bucket);
  return list.sort((a, b) => byText(a.shape.op, b.shape.op) || byText(a.shape.dtype, b.shape.dtype) || byShape(a.shape, b.shape, byText));
}

export interface BucketSummary {
  bucket: number;
  entries: number;
  moved: number;
  /** entries where both the choice and the default are timed */
  timed: number;
  /** geomean of default time / choice time: > 1 means the table route is faster */
  speedup: number | null;
  /** entries where the choice and the floor are timed */
  floored: number;
  /** geomean of choice time / floor time: 1 is the floor */
  overFloor: number | null;
}

function medianOf(entry: TableEntry, name: string): number | null {
  const us = entry.candidates[name]?.median_us;
  return usable(us) ? us : null;
}

/** Per bucket present in the table (and 'all' last, bucket 0): the route against the default and the floor. */
export function bucketSummaries(table: Table): BucketSummary[] {
  const summarize = (bucket: number, entries: readonly TableEntry[]): BucketSummary => {
    const speedups: number[] = [];
    const overFloor: number[] = [];
    for (const e of entries) {
      const choice = medianOf(e, e.choice);
      const def = medianOf(e, e.default);
      if (choice !== null && def !== null) speedups.push(def / choice);
      if (choice !== null && usable(e.floor_us)) overFloor.push(choice / e.floor_us);
    }
    return {
      bucket,
      entries: entries.length,
      moved: entries.filter((e) => e.choice !== e.default).length,
      timed: speedups.length,
      speedup: speedups.length > 0 ? geomean(speedups) : null,
      floored: overFloor.length,
      overFloor: overFloor.length > 0 ? geomean(overFloor) : null,
    };
  };
  const rows = BUCKETS.filter((b) => table.entries.some((e) => e.bucket === b)).map((b) =>
    summarize(
      b,
      table.entries.filter((e) => e.bucket === b),
    ),
  );
  return [...rows, summarize(0, table.entries)];
}

export interface ParityFailure {
  shape: string;
  bucket: number;
  candidate: string;
  relErr: number | null;
}

export function parityFailures(entries: readonly TableEntry[]): ParityFailure[] {
  const out: ParityFailure[] = [];
  for (const e of entries) {
    for (const [name, c] of Object.entries(e.candidates).sort(([a], [b]) => byText(a, b))) {
      if (c.parity === 'fail') out.push({ shape: shapeKey(e), bucket: e.bucket, candidate: name, relErr: c.rel_err });
    }
  }
  return out;
}

/**
 * The candidates charted for one shape, in drawing order: the default, then
 * every pick and parity failure, then the best of the rest up to `max`. Rank:
 * geomean over the timed buckets of time / the bucket's best time, then more
 * buckets timed, then name. Returns the charted names and the rest.
 */
export function chartedCandidates(group: ShapeGroup, max: number): { charted: string[]; rest: string[] } {
  const names = [...new Set(group.entries.flatMap((e) => Object.keys(e.candidates)))].sort(byText);
  const best = new Map(group.entries.map((e) => [e.bucket, Math.min(...Object.keys(e.candidates).map((n) => medianOf(e, n) ?? Infinity))]));
  const rank = new Map(
    names.map((name) => {
      const ratios = group.entries.flatMap((e) => {
        const us = medianOf(e, name);
        return us === null ? [] : [us / (best.get(e.bucket) as number)];
      });
      return [name, { score: ratios.length > 0 ? geomean(ratios) : Infinity, timed: ratios.length }];
    }),
  );
  const ordered = [...names].sort((a, b) => {
    const x = rank.get(a)!;
    const y = rank.get(b)!;
    return x.score - y.score || y.timed - x.timed || byText(a, b);
  });
  const must = new Set<string>();
  for (const e of group.entries) {
    must.add(e.default);
    must.add(e.choice);
    for (const [name, c] of Object.entries(e.candidates)) if (c.parity === 'fail') must.add(name);
  }
  const defaults = [...new Set(group.entries.map((e) => e.default))].sort(byText);
  const charted = [...defaults, ...ordered.filter((n) => must.has(n) && !defaults.includes(n))];
  for (const name of ordered) {
    if (charted.length >= Math.max(max, must.size)) break;
    if (!charted.includes(name) && rank.get(name)!.timed > 0) charted.push(name);
  }
  return { charted, rest: ordered.filter((n) => !charted.includes(n)) };
}

// ---- text ----------------------------------------------------------------

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const esc = escapeHtml;

/** Three significant digits, without exponent for the usual range. */
function num(x: number): string {
  if (x === 0) return '0';
  const abs = Math.abs(x);
  if (abs >= 1000) return Math.round(x).toString();
  return Number(x.toPrecision(3)).toString();
}

function ratio(x: number | null, suffix = '×'): string {
  return x === null ? '–' : `${x.toFixed(3)}${suffix}`;
}

// ---- charts --------------------------------------------------------------

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#17becf', '#e377c2', '#7f7f7f'];
const DASHES = ['', '7 3', '2 3'];
const FLOOR_COLOR = '#404040';
const CEILING_COLOR = '#b8860b';
/** Parity crosses only: no candidate colour comes close. */
export const PARITY_COLOR = '#e00000';
const PICK_COLOR = '#111111';
/** Failure text: a darker red, so the cross colour marks the crosses alone. */
const FAIL_TEXT_COLOR = '#a00018';

function styleOf(index: number): { color: string; dash: string } {
  return { color: PALETTE[index % PALETTE.length]!, dash: DASHES[Math.floor(index / PALETTE.length) % DASHES.length]! };
}

const W = 760;
const H = 360;
const PAD = { left: 70, right: 20, top: 16, bottom: 44 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;
/** Half width of a reference line known at one bucket only (< INSET: stays inside the plot). */
const TICK = 22;

/** Buckets sit this far inside the plot's edges, clear of the axis labels. */
const INSET = 28;

function xOf(bucket: number): number {
  return PAD.left + INSET + (Math.log2(bucket) / Math.log2(BUCKETS[BUCKETS.length - 1]!)) * (PLOT_W - 2 * INSET);
}

interface Scale {
  y: (value: number) => number;
  ticks: number[];
}

/** Linear from 0 to a round top: GB/s. */
function linearScale(max: number): Scale {
  const raw = max > 0 ? max * 1.05 : 1;
  const mag = 10 ** Math.floor(Math.log10(raw / 5));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => raw / s <= 6) ?? 10 * mag;
  const top = Math.ceil(raw / step) * step;
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  return { y: (value) => PAD.top + PLOT_H * (1 - value / top), ticks };
}

/** 1, 2, 5 times a power of ten, ascending, from the last at or below min to the first at or above max. */
function niceLogSteps(min: number, max: number): number[] {
  const steps: number[] = [];
  for (let d = Math.floor(Math.log10(min)) - 1; d <= Math.ceil(Math.log10(max)) + 1; d++) for (const m of [1, 2, 5]) steps.push(m * 10 ** d);
  const lo = steps.filter((s) => s <= min).pop() ?? steps[0]!;
  const hi = steps.find((s) => s >= max && s > lo) ?? steps[steps.length - 1]!;
  return steps.filter((s) => s >= lo && s <= hi);
}

/** Log scale between 1-2-5 steps: microseconds, which can span orders of magnitude across buckets. */
function logScale(min: number, max: number): Scale {
  const ticks = niceLogSteps(min, max);
  const lo = Math.log10(ticks[0]!);
  const hi = Math.log10(ticks[ticks.length - 1]!);
  return { y: (value) => PAD.top + PLOT_H * (1 - (Math.log10(value) - lo) / (hi - lo)), ticks };
}

const bucketIndex = (b: number) => BUCKETS.indexOf(b as (typeof BUCKETS)[number]);

/**
 * "M x y L x y ...", starting a new run where a bucket is missing. With
 * `tick`, a run of one point becomes a short level stroke, so a reference
 * line known at one bucket only is still drawn.
 */
function linePath(points: readonly { bucket: number; x: number; y: number }[], tick = 0): string {
  const runs: { x: number; y: number }[][] = [];
  let prev: number | null = null;
  for (const p of points) {
    if (prev !== null && bucketIndex(p.bucket) === bucketIndex(prev) + 1) runs[runs.length - 1]!.push(p);
    else runs.push([p]);
    prev = p.bucket;
  }
  const at = (cmd: string, x: number, y: number) => `${cmd}${x.toFixed(1)} ${y.toFixed(1)}`;
  return runs
    .map((run) => {
      if (run.length === 1 && tick > 0) return at('M', run[0]!.x - tick, run[0]!.y) + at('L', run[0]!.x + tick, run[0]!.y);
      return run.map((p, i) => at(i === 0 ? 'M' : 'L', p.x, p.y)).join('');
    })
    .join('');
}

function cross(x: number, y: number, r = 6): string {
  return `M${(x - r).toFixed(1)} ${(y - r).toFixed(1)}L${(x + r).toFixed(1)} ${(y + r).toFixed(1)}M${(x - r).toFixed(1)} ${(y + r).toFixed(1)}L${(x + r).toFixed(1)} ${(y - r).toFixed(1)}`;
}

interface ShapeChart {
  svg: string;
  legend: string;
  charted: string[];
  rest: string[];
}

function chart(group: ShapeGroup, ceiling: Ceiling | null, metric: Metric, maxCharted: number): ShapeChart {
  const { charted, rest } = chartedCandidates(group, maxCharted);
  const value = (e: TableEntry, us: number) => (metric === 'gbps' ? gbps(bytesPerCall(e, e.bucket), us) : us);
  const floorPts = group.entries.filter((e) => usable(e.floor_us)).map((e) => ({ bucket: e.bucket, v: value(e, e.floor_us as number) }));
  // In GB/s the ceiling is one bandwidth; in microseconds it is the time the
  // problem's bytes take at that bandwidth, per bucket.
  const ceilingPts = ceiling
    ? group.entries.map((e) => ({ bucket: e.bucket, v: metric === 'gbps' ? ceiling.gbps : bytesPerCall(e, e.bucket) / ceiling.gbps / 1e3 }))
    : [];
  const series = charted.map((name) => ({
    name,
    pts: group.entries.flatMap((e) => {
      const us = medianOf(e, name);
      return us === null ? [] : [{ bucket: e.bucket, us, v: value(e, us), entry: e }];
    }),
  }));
  const all = [...series.flatMap((s) => s.pts.map((p) => p.v)), ...floorPts.map((p) => p.v), ...ceilingPts.map((p) => p.v)];
  const scale = metric === 'gbps' ? linearScale(Math.max(0, ...all)) : all.length > 0 ? logScale(Math.min(...all), Math.max(...all)) : logScale(1, 10);
  const label = metric === 'gbps' ? 'GB/s' : 'µs per call';

  const parts: string[] = [];
  parts.push(`<rect x="${PAD.left}" y="${PAD.top}" width="${PLOT_W}" height="${PLOT_H}" fill="#fff" stroke="#ccc"/>`);
  for (const t of scale.ticks) {
    const y = scale.y(t).toFixed(1);
    parts.push(`<line class="grid" x1="${PAD.left}" x2="${PAD.left + PLOT_W}" y1="${y}" y2="${y}" stroke="#eee"/>`);
    parts.push(`<text x="${PAD.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${esc(num(t))}</text>`);
  }
  for (const b of BUCKETS) {
    const x = xOf(b).toFixed(1);
    parts.push(`<line class="grid" x1="${x}" x2="${x}" y1="${PAD.top}" y2="${PAD.top + PLOT_H}" stroke="#f3f3f3"/>`);
    parts.push(`<text x="${x}" y="${PAD.top + PLOT_H + 16}" text-anchor="middle">${b}</text>`);
  }
  parts.push(`<text x="${PAD.left + PLOT_W / 2}" y="${H - 6}" text-anchor="middle">rows M</text>`);
  parts.push(`<text x="14" y="${PAD.top + PLOT_H / 2}" text-anchor="middle" transform="rotate(-90 14 ${PAD.top + PLOT_H / 2})">${esc(label)}</text>`);

  const toXY = (pts: readonly { bucket: number; v: number }[]) => pts.map((p) => ({ bucket: p.bucket, x: xOf(p.bucket), y: scale.y(p.v) }));
  if (ceilingPts.length > 0 && ceiling) {
    const xy = toXY(ceilingPts);
    const labelY = Math.max(PAD.top + 10, xy[0]!.y - 5);
    // One bandwidth: a level line across the plot; in µs one time per bucket.
    const d = metric === 'gbps' ? `M${PAD.left} ${xy[0]!.y.toFixed(1)}L${PAD.left + PLOT_W} ${xy[0]!.y.toFixed(1)}` : linePath(xy, TICK);
    parts.push(`<path class="ceiling" d="${d}" fill="none" stroke="${CEILING_COLOR}" stroke-width="1.5" stroke-dasharray="1 3"><title>read ceiling ${esc(num(ceiling.gbps))} GB/s</title></path>`);
    parts.push(`<text x="${PAD.left + 4}" y="${labelY.toFixed(1)}" fill="${CEILING_COLOR}">read ceiling ${esc(num(ceiling.gbps))} GB/s</text>`);
  }
  if (floorPts.length > 0) {
    parts.push(`<path class="floor" d="${linePath(toXY(floorPts), TICK)}" fill="none" stroke="${FLOOR_COLOR}" stroke-width="1.5" stroke-dasharray="5 4"><title>read floor</title></path>`);
  }
  series.forEach((s, i) => {
    const { color, dash } = styleOf(i);
    const xy = s.pts.map((p) => ({ bucket: p.bucket, x: xOf(p.bucket), y: scale.y(p.v) }));
    if (xy.length > 1) parts.push(`<path class="series" d="${linePath(xy)}" fill="none" stroke="${color}" stroke-width="1.8"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`);
    s.pts.forEach((p, j) => {
      const { x, y } = xy[j]!;
      const floorNote = usable(p.entry.floor_us) ? `, ${(p.us / p.entry.floor_us).toFixed(2)}× floor` : '';
      const tip = `${s.name} M=${p.bucket}: ${num(p.us)} µs, ${num(gbps(bytesPerCall(p.entry, p.bucket), p.us))} GB/s${floorNote}`;
      parts.push(`<circle class="pt" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3.2" fill="${color}"><title>${esc(tip)}</title></circle>`);
    });
  });
  for (const e of group.entries) {
    const us = medianOf(e, e.choice);
    if (us !== null) {
      const tip = `pick at M=${e.bucket}: ${e.choice} (${e.reason})`;
      parts.push(`<circle class="pick" cx="${xOf(e.bucket).toFixed(1)}" cy="${scale.y(value(e, us)).toFixed(1)}" r="7.5" fill="none" stroke="${PICK_COLOR}" stroke-width="2"><title>${esc(tip)}</title></circle>`);
    }
    for (const [name, c] of Object.entries(e.candidates).sort(([a], [b]) => byText(a, b))) {
      if (c.parity !== 'fail') continue;
      const failedUs = medianOf(e, name);
      // An untimed failure sits on the x axis: still visible, not on any scale.
      const y = failedUs === null ? PAD.top + PLOT_H : scale.y(value(e, failedUs));
      const tip = `parity FAIL ${name} M=${e.bucket}${c.rel_err === null ? '' : `, rel err ${c.rel_err.toExponential(2)}`}`;
      parts.push(`<path class="parity-fail" d="${cross(xOf(e.bucket), y)}" stroke="${PARITY_COLOR}" stroke-width="2.5"><title>${esc(tip)}</title></path>`);
    }
  }
  const title = `${shapeKey(group.shape)}: ${label} by rows`;
  const svg = `<svg class="chart" data-shape="${esc(shapeKey(group.shape))}" data-series="${series.length}" role="img" aria-label="${esc(title)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-size="11" font-family="sans-serif">${parts.join('')}</svg>`;

  const keys = series.map((s, i) => {
    const { color, dash } = styleOf(i);
    const isDefault = group.entries.some((e) => e.default === s.name);
    const sample = `<svg class="key" width="34" height="12"><line x1="1" x2="33" y1="6" y2="6" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/><circle cx="17" cy="6" r="3" fill="${color}"/></svg>`;
    return `<li>${sample}${esc(s.name)}${isDefault ? ' <em>(default)</em>' : ''}${s.pts.length === 0 ? ' <em>(untimed)</em>' : ''}</li>`;
  });
  const hasFail = group.entries.some((e) => Object.values(e.candidates).some((c) => c.parity === 'fail'));
  keys.push(`<li><svg class="key" width="34" height="12"><line x1="1" x2="33" y1="6" y2="6" stroke="${FLOOR_COLOR}" stroke-width="1.5" stroke-dasharray="5 4"/></svg>read floor (same bytes)</li>`);
  if (ceiling) keys.push(`<li><svg class="key" width="34" height="12"><line x1="1" x2="33" y1="6" y2="6" stroke="${CEILING_COLOR}" stroke-width="1.5" stroke-dasharray="1 3"/></svg>read ceiling</li>`);
  keys.push(`<li><svg class="key" width="34" height="16"><circle cx="17" cy="8" r="6" fill="none" stroke="${PICK_COLOR}" stroke-width="2"/></svg>pick</li>`);
  if (hasFail) keys.push(`<li><svg class="key" width="34" height="16"><path d="${cross(17, 8, 5)}" stroke="${PARITY_COLOR}" stroke-width="2.5"/></svg>parity failure</li>`);
  return { svg, legend: `<ul class="legend">${keys.join('')}</ul>`, charted, rest };
}

// ---- tables --------------------------------------------------------------

function picksTable(group: ShapeGroup, ceiling: Ceiling | null): string {
  const rows = group.entries.map((e) => {
    const us = medianOf(e, e.choice);
    const def = medianOf(e, e.default);
    const rate = us === null ? null : gbps(bytesPerCall(e, e.bucket), us);
    const cells = [
      String(e.bucket),
      esc(e.choice) + (e.choice === e.default ? '' : ' <b>moved</b>'),
      us === null ? '–' : num(us),
      rate === null ? '–' : num(rate),
      rate !== null && ceiling ? `${((rate / ceiling.gbps) * 100).toFixed(1)} %` : '–',
      us !== null && usable(e.floor_us) ? ratio(us / e.floor_us) : '–',
      us !== null && def !== null ? ratio(def / us) : '–',
      esc(e.reason),
    ];
    return `<tr>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;
  });
  const head = ['M', 'choice', 'µs', 'GB/s', '% ceiling', '× floor', 'vs default', 'reason'];
  return `<table class="picks"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function numbersTable(group: ShapeGroup, names: readonly string[]): string {
  const head = ['candidate', ...group.entries.map((e) => `M=${e.bucket}`)];
  const rows = names.map((name) => {
    const cells = group.entries.map((e) => {
      const c = e.candidates[name];
      if (!c) return '';
      const us = medianOf(e, name);
      const timing = us === null ? c.status : `${num(us)} µs · ${num(gbps(bytesPerCall(e, e.bucket), us))} GB/s`;
      const flag = c.parity === 'fail' ? ' <b class="fail">parity fail</b>' : c.parity === 'skipped' ? ' (parity skipped)' : '';
      return `${timing}${flag}`;
    });
    return `<tr><td>${esc(name)}</td>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;
  });
  return `<table class="numbers"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function failuresList(failures: readonly ParityFailure[], withShape: boolean): string {
  if (failures.length === 0) return '';
  const items = failures.map((f) => {
    const where = withShape ? `${f.shape} M=${f.bucket}` : `M=${f.bucket}`;
    const err = f.relErr === null ? '' : ` (rel err ${f.relErr.toExponential(2)})`;
    return `<li>${esc(where)}: ${esc(f.candidate)}${esc(err)}</li>`;
  });
  return `<ul class="parity-failures">${items.join('')}</ul>`;
}

function summaryTable(table: Table): string {
  const rows = bucketSummaries(table).map((s) => {
    const cells = [
      s.bucket === 0 ? 'all' : String(s.bucket),
      String(s.entries),
      String(s.moved),
      s.speedup === null ? '–' : `${ratio(s.speedup)} <small>(${s.timed})</small>`,
      s.overFloor === null ? '–' : `${ratio(s.overFloor)} <small>(${s.floored})</small>`,
    ];
    return `<tr${s.bucket === 0 ? ' class="total"' : ''}>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;
  });
  const head = ['M', 'entries', 'moved', 'route speed-up over default', 'route time / floor'];
  return `<table class="summary"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:28px 0 6px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f5f5f5}tr.total td{font-weight:bold}.identity td:first-child{color:#666}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px;margin:4px 0}
ul.legend li{display:flex;align-items:center;gap:4px}svg.chart{display:block;max-width:100%;height:auto}
.fail,ul.parity-failures{color:${FAIL_TEXT_COLOR}}small{color:#777}p.note{color:#555}
`;

/** The whole page: deterministic for a given table and options (no clock). */
export function renderReport(table: Table, opts: ReportOptions = {}): string {
  const metric = opts.metric ?? 'gbps';
  const maxCharted = opts.maxCharted ?? MAX_CHARTED;
  const ceiling = readCeiling(table);
  const groups = shapeGroups(table);
  const id = table.identity;
  const title = `kpick table: ${id.backend} ${id.device}`;
  const identityRows = (Object.entries(id) as [string, string][]).map(([k, val]) => `<tr><td>${esc(k)}</td><td>${esc(val)}</td></tr>`);
  identityRows.push(`<tr><td>created</td><td>${esc(table.created)}</td></tr>`, `<tr><td>gate</td><td>${(table.gate.min_gain * 100).toFixed(1)} %</td></tr>`);
  if (table.gate.pdl_rows !== undefined) identityRows.push(`<tr><td>.pdl picked at rows</td><td>&le; ${table.gate.pdl_rows}</td></tr>`);
  if (opts.source) identityRows.push(`<tr><td>source</td><td>${esc(opts.source)}</td></tr>`);
  const ceilingNote = ceiling
    ? `Read ceiling: <b>${esc(num(ceiling.gbps))} GB/s</b>, the best read floor of this table (weight bytes / floor time, at ${esc(shapeKey(ceiling.entry))} M=${ceiling.entry.bucket}).`
    : 'No entry has a read floor: no floor or ceiling lines.';
  const failures = parityFailures(table.entries);

  const sections = groups.map((g) => {
    const c = chart(g, ceiling, metric, maxCharted);
    const numbers = `<details><summary>numbers for all ${c.charted.length + c.rest.length} candidates${c.rest.length > 0 ? ` (${c.rest.length} not charted)` : ''}</summary>${numbersTable(g, [...c.charted, ...c.rest])}</details>`;
    const fails = parityFailures(g.entries);
    const failBlock = fails.length > 0 ? `<p class="fail">Parity failures (never picked):</p>${failuresList(fails, false)}` : '';
    return `<section class="shape"><h3>${esc(shapeKey(g.shape))}</h3>${c.svg}${c.legend}${picksTable(g, ceiling)}${failBlock}${numbers}</section>`;
  });

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><style>${STYLE}</style></head>
<body>
<h1>${esc(title)}</h1>
<table class="identity"><tbody>${identityRows.join('')}</tbody></table>
<h2>Summary</h2>
<p class="note">${ceilingNote} bytes per call = N·K·2 (twice for gated; fp8: N·K + 4·N, the codes and row scales) + M·K·2 + M·N·2; GB/s = bytes / µs / 1e3. Ratios are geometric means over the entries of each bucket that have the numbers (count in brackets).</p>
${summaryTable(table)}
${failures.length > 0 ? `<h2 class="fail">Parity failures: ${failures.length}</h2>${failuresList(failures, true)}` : '<p>No parity failures.</p>'}
<h2>Shapes: ${groups.length}</h2>
<p class="note">One chart per shape, ${metric === 'gbps' ? 'GB/s (higher is better)' : 'µs per call (lower is better), log scale'}. The read floor is drawn on the same scale as the candidates: a point on it takes the floor's time. Ring: the table's choice. Hover a mark for its numbers.</p>
${sections.join('\n')}
</body></html>
`;
}

/** decode_gemm.json -> decode_gemm.html, beside it. */
export function reportPathFor(tablePath: string): string {
  return tablePath.endsWith('.json') ? `${tablePath.slice(0, -'.json'.length)}.html` : `${tablePath}.html`;
}

/**
 * Renders and writes the report atomically (temp file + rename); never throws.
 * The table is checked against the schema first, so a hand-built one cannot
 * produce a page that silently misreports it.
 */
export function writeReport(table: Table, target: string, opts: ReportOptions = {}): { path: string } | { error: string } {
  const checked = v.safeParse(TableSchema, table);
  if (!checked.success) return { error: `report: invalid table: ${issuesLine(checked.issues)}` };
  return writeFileAtomic(target, renderReport(checked.output, opts));
}
