// What a table says, for people (a short summary for stderr) and for pipelines
// (one JSON object per entry). Reads only the table, so it also reports a table
// whose `choice` was edited by hand.
import type pc from 'picocolors';
import type { Table, TableEntry } from './schema.ts';
import { moeFields } from './shape-key.ts';

type Colors = ReturnType<typeof pc.createColors>;

/** Gain of the choice over the default, median against median; null when either is untimed. */
export function choiceGain(entry: TableEntry): number | null {
  if (entry.choice === entry.default) return 0;
  const def = entry.candidates[entry.default]?.median_us ?? null;
  const chosen = entry.candidates[entry.choice]?.median_us ?? null;
  if (def === null || chosen === null || chosen <= 0) return null;
  return def / chosen - 1;
}

export const moved = (entry: TableEntry) => entry.choice !== entry.default;

export function problemLabel(e: TableEntry): string {
  const experts = e.op === 'moe' ? ` E=${e.experts} top-k=${e.topk}` : '';
  return `${e.op} ${e.dtype} n=${e.n} k=${e.k}${experts} M=${e.bucket}`;
}

export type EntryJson = {
  op: TableEntry['op'];
  dtype: TableEntry['dtype'];
  n: number;
  k: number;
  /** op moe only */
  experts?: number;
  topk?: number;
  bucket: number;
  default: string;
  choice: string;
  moved: boolean;
  gain: number | null;
  choice_median_us: number | null;
  floor_us: number | null;
  reason: string;
};

/** One entry as a flat object, for one JSON line on stdout. */
export function entryJson(e: TableEntry): EntryJson {
  return {
    op: e.op,
    dtype: e.dtype,
    n: e.n,
    k: e.k,
    ...moeFields(e),
    bucket: e.bucket,
    default: e.default,
    choice: e.choice,
    moved: moved(e),
    gain: choiceGain(e),
    choice_median_us: e.candidates[e.choice]?.median_us ?? null,
    floor_us: e.floor_us,
    reason: e.reason,
  };
}

/**
 * The human summary: a header line (where, how many entries, how many moved),
 * then one aligned line per entry: problem, choice, reason. The caller passes
 * the colours of its stream (lib/cli.ts colorsFor: TTY only, never NO_COLOR).
 */
export function summaryLines(table: Table, opts: { path: string; colors: Colors }): string[] {
  const c = opts.colors;
  const movedCount = table.entries.filter(moved).length;
  const gatePct = `${(table.gate.min_gain * 100).toFixed(1)} %`;
  const pdl = table.gate.pdl_rows === undefined ? '' : `, .pdl at rows <= ${table.gate.pdl_rows}`;
  const header = `${opts.path}: ${table.entries.length} entries, ${movedCount} moved off the default (gate ${gatePct}${pdl}; ${table.identity.backend} ${table.identity.device})`;
  const labels = table.entries.map(problemLabel);
  const labelWidth = Math.max(0, ...labels.map((l) => l.length));
  const choiceWidth = Math.max(0, ...table.entries.map((e) => e.choice.length));
  const lines = table.entries.map((e, i) => {
    const label = labels[i]!.padEnd(labelWidth);
    const choice = e.choice.padEnd(choiceWidth);
    return moved(e) ? `  ${label}  ${c.green(choice)}  ${e.reason}` : `  ${label}  ${c.dim(choice)}  ${c.dim(e.reason)}`;
  });
  return [c.bold(header), ...lines];
}
