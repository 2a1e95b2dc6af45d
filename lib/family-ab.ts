// family-ab: what a family of rows changes in the table its store promotes to.
// The store is promoted twice by promote's own rule (the gate, the noise check,
// no more graph nodes than the default): with every record, and without the
// family's. The two tables are then compared entry by entry: which choices the
// family takes, and per rows bucket how far the choices sit from the read floor
// with and without it. A dev patch's A/B asks this; before this module every
// record folder's derive script answered it its own way, without the gate.
import { globRegExp } from './glob.ts';
import { promote } from './promote.ts';
import type { StoreRecord, TableEntry } from './schema.ts';
import { entryKey } from './shape-key.ts';
import { geomean } from './stats.ts';

export type NameTest = (name: string) => boolean;

/** A family: `/re/` (a regular expression over row names), else comma separated globs (* and ?). */
export function familyTest(spec: string): NameTest | { error: string } {
  const text = spec.trim();
  if (text === '') return { error: 'the family is empty: give /regex/ or globs such as wgmma.s8*' };
  if (text.length >= 2 && text.startsWith('/') && text.endsWith('/')) {
    try {
      const re = new RegExp(text.slice(1, -1));
      return (name) => re.test(name);
    } catch (e) {
      return { error: `family ${text}: ${(e as Error).message}` };
    }
  }
  const globs = text.split(',').map((g) => g.trim()).filter((g) => g !== '');
  const res = globs.map(globRegExp);
  return (name) => res.some((re) => re.test(name));
}

/** An entry whose choice the family changes. */
export interface EntryChange {
  key: string;
  bucket: number;
  with: string;
  without: string;
  with_us: number;
  without_us: number;
  floor_us: number | null;
}

/** Per rows bucket: entries, how many choices are the family's, choice / floor geomeans with and without it. */
export interface BucketSummary {
  bucket: number;
  entries: number;
  picked: number;
  with_floor: number | null;
  without_floor: number | null;
}

export interface FamilyAB {
  /** records of the family's rows in the store */
  records: number;
  changes: EntryChange[];
  buckets: BucketSummary[];
}

const choiceUs = (e: TableEntry): number | null => e.candidates[e.choice]?.median_us ?? null;

/** The family's effect on the promoted table; an error where the comparison would mean nothing. */
export function familyAB(records: readonly StoreRecord[], inFamily: NameTest, gate: number): FamilyAB | { error: string } {
  const isFamily = (r: StoreRecord) => r.kind === 'candidate' && inFamily(r.candidate);
  const ofFamily = records.filter(isFamily);
  if (ofFamily.length === 0) return { error: 'no candidate record of the family in the store' };
  const heads = [...new Set(ofFamily.filter((r) => r.is_default).map((r) => r.candidate))];
  if (heads.length > 0) return { error: `the family holds a class default (${heads.sort().join(', ')}): a table without it has no default to keep` };
  const all = promote(records, gate);
  if ('error' in all) return all;
  const rest = promote(records.filter((r) => !isFamily(r)), gate);
  if ('error' in rest) return rest;
  const restByKey = new Map(rest.entries.map((e) => [entryKey(e, e.bucket), e]));
  const changes: EntryChange[] = [];
  const perBucket = new Map<number, { entries: number; picked: number; withFloor: number[]; withoutFloor: number[] }>();
  for (const e of all.entries) {
    const key = entryKey(e, e.bucket);
    const o = restByKey.get(key);
    if (!o) continue; /* a problem the family alone timed: nothing to compare it with */
    const b = perBucket.get(e.bucket) ?? { entries: 0, picked: 0, withFloor: [], withoutFloor: [] };
    perBucket.set(e.bucket, b);
    b.entries++;
    const w = choiceUs(e), wo = choiceUs(o);
    if (inFamily(e.choice)) b.picked++;
    if (e.floor_us !== null && w !== null && wo !== null) {
      b.withFloor.push(w / e.floor_us);
      b.withoutFloor.push(wo / e.floor_us);
    }
    if (e.choice !== o.choice && w !== null && wo !== null)
      changes.push({ key, bucket: e.bucket, with: e.choice, without: o.choice, with_us: w, without_us: wo, floor_us: e.floor_us });
  }
  const buckets = [...perBucket].sort(([a], [b]) => a - b).map(([bucket, b]) => ({
    bucket,
    entries: b.entries,
    picked: b.picked,
    with_floor: b.withFloor.length > 0 ? geomean(b.withFloor) : null,
    without_floor: b.withoutFloor.length > 0 ? geomean(b.withoutFloor) : null,
  }));
  return { records: ofFamily.length, changes, buckets };
}
