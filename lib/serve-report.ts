// What serve-bench says: a JSON line per concurrency, and the human table of
// tok/s, step times, stalls and token identity, with the routes it compared.
import { colorsFor } from './cli.ts';
import { LINEAR_KINDS } from './model-ffi.ts';
import { RATIO_FLOOR, type ArmRoute, type ArmSummary, type RowResult } from './serve.ts';
import type { ServeBenchJob } from './serve-bench.ts';

const fmt = (x: number, digits = 1) => x.toFixed(digits);

function armJson(s: ArmSummary | null, route: ArmRoute) {
  return {
    tok_s: s?.tokPerS ?? null,
    step_p50_us: s?.stepP50Us ?? null,
    step_p90_us: s?.stepP90Us ?? null,
    runs: s?.runs ?? 0,
    stalled: s?.stalled ?? 0,
    stalled_runs: s?.stalledRuns ?? [],
    route: route.names,
  };
}

export function rowJson(args: ServeBenchJob, r: RowResult) {
  const id = r.identity;
  return {
    kind: 'row',
    model: args.model.name,
    layers: args.layers,
    dtype: args.dtype,
    context: args.context,
    c: r.c,
    steps: args.steps,
    default: armJson(r.arms?.default ?? null, r.routes.default),
    table: armJson(r.arms?.table ?? null, r.routes.table),
    ratio: r.ratio,
    below_floor: r.ratio !== null && r.ratio < RATIO_FLOOR,
    identity:
      id === null
        ? null
        : { steps: id.steps, status: id.status, first_diff_step: id.firstDiffStep, rows_diverged: id.rowsDiverged, differences: id.differences, why: id.why },
  };
}

export const HEADER = ['c', 'default tok/s', 'table tok/s', 'ratio', 'default p50/p90 µs', 'table p50/p90 µs', 'stalled', 'identity'];
const WIDTHS = [4, 14, 12, 8, 19, 17, 8, 0];
export const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? ` ${c}` : c.padStart(WIDTHS[i]!))).join(' ');

export function humanRow(r: RowResult): string {
  const colors = colorsFor(process.stderr);
  const a = r.arms;
  const p = (s: ArmSummary) => `${fmt(s.stepP50Us, 0)} / ${fmt(s.stepP90Us, 0)}`;
  const ratio = r.ratio === null ? '-' : `${r.ratio.toFixed(3)}x`;
  const id = r.identity;
  const idText = id === null ? 'skipped' : id.status === 'identical' ? 'identical' : id.status === 'explained' ? `differs @${id.firstDiffStep} (explained)` : `DIFFERS @${id.firstDiffStep}`;
  return line([
    String(r.c),
    a ? fmt(a.default.tokPerS) : '-',
    a ? fmt(a.table.tokPerS) : '-',
    r.ratio !== null && r.ratio < RATIO_FLOOR ? colors.yellow(ratio) : ratio,
    a ? p(a.default) : '-',
    a ? p(a.table) : '-',
    a ? `${a.default.stalled}/${a.table.stalled}` : '-',
    id?.status === 'failed' ? colors.red(idText) : idText,
  ]);
}

/** "qkv gemv.rpb4.u8 (default blaslt), ..." or that the routes agree. */
export function routeLine(r: RowResult): string {
  const d = r.routes.default.names;
  const t = r.routes.table.names;
  const moved = LINEAR_KINDS.filter((k) => d[k] !== t[k]).map((k) => `${k} ${t[k]} (default ${d[k]})`);
  return `c=${r.c} table route: ${moved.length > 0 ? moved.join(', ') : `the defaults (${LINEAR_KINDS.filter((k) => d[k] !== undefined).map((k) => d[k]).join(', ')})`}`;
}
