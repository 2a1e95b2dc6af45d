// Do two tables of one machine pick alike? (A sharded sweep against an
// unsharded one, two runs of one sweep.) Per entry: the same choice; else
// "within the gate" when each table finds the other's pick less than the gate
// slower than its own (timing noise can swap two candidates that close, and
// the gate is the margin promote itself asks of a move); else they differ.
// Where picks differ, `conflict` = a_ratio x b_ratio says why: near 1, the two
// runs timed the two picks alike and a gap at the gate fell on both sides of
// it (promote's rule split them); past 1 + gate, the runs timed them apart (a
// chip, a placement or a run moved one of them).
import type { Table, TableEntry } from './schema.ts';
import { moeFields, shapeId } from './shape-key.ts';

export type Agreement = 'same' | 'within-gate' | 'differ' | 'only-a' | 'only-b';

export interface EntryAgreement {
  op: TableEntry['op'];
  dtype: string;
  n: number;
  k: number;
  /** op moe only */
  experts?: number;
  topk?: number;
  bucket: number;
  a: string | null;
  b: string | null;
  /** in table a, median(b's choice) / median(a's choice); likewise in b */
  a_ratio: number | null;
  b_ratio: number | null;
  /** a_ratio x b_ratio where the picks differ and both were timed in both; else null */
  conflict: number | null;
  agreement: Agreement;
}

const keyOf = (e: TableEntry) => `${e.dtype}/${shapeId(e)}/${e.bucket}`;

/** median(other) / median(own) inside one entry; null when either was not timed there. */
function ratioIn(e: TableEntry, other: string): number | null {
  const own = e.candidates[e.choice]?.median_us ?? null;
  const them = e.candidates[other]?.median_us ?? null;
  return own !== null && them !== null && own > 0 ? them / own : null;
}

/** Every entry of either table, in a's order then b's extras. */
export function compareChoices(a: Table, b: Table, gate: number): EntryAgreement[] {
  const inB = new Map(b.entries.map((e) => [keyOf(e), e]));
  const inA = new Set(a.entries.map(keyOf));
  const out: EntryAgreement[] = [];
  for (const ea of a.entries) {
    const eb = inB.get(keyOf(ea));
    const base = { op: ea.op, dtype: ea.dtype, n: ea.n, k: ea.k, ...moeFields(ea), bucket: ea.bucket, a: ea.choice };
    if (!eb) {
      out.push({ ...base, b: null, a_ratio: null, b_ratio: null, conflict: null, agreement: 'only-a' });
      continue;
    }
    if (ea.choice === eb.choice) {
      out.push({ ...base, b: eb.choice, a_ratio: 1, b_ratio: 1, conflict: null, agreement: 'same' });
      continue;
    }
    const aRatio = ratioIn(ea, eb.choice);
    const bRatio = ratioIn(eb, ea.choice);
    const close = aRatio !== null && bRatio !== null && aRatio - 1 < gate && bRatio - 1 < gate;
    const conflict = aRatio !== null && bRatio !== null ? aRatio * bRatio : null;
    out.push({ ...base, b: eb.choice, a_ratio: aRatio, b_ratio: bRatio, conflict, agreement: close ? 'within-gate' : 'differ' });
  }
  for (const eb of b.entries) {
    if (inA.has(keyOf(eb))) continue;
    out.push({ op: eb.op, dtype: eb.dtype, n: eb.n, k: eb.k, ...moeFields(eb), bucket: eb.bucket, a: null, b: eb.choice, a_ratio: null, b_ratio: null, conflict: null, agreement: 'only-b' });
  }
  return out;
}

/** True when every entry is the same or within the gate. */
export function tablesAgree(rows: readonly EntryAgreement[]): boolean {
  return rows.every((r) => r.agreement === 'same' || r.agreement === 'within-gate');
}

/** Of the entries that differ, those whose two runs timed the picks apart by more than the gate. */
export function conflicting(rows: readonly EntryAgreement[], gate: number): EntryAgreement[] {
  return rows.filter((r) => r.agreement === 'differ' && (r.conflict === null || r.conflict - 1 > gate));
}
