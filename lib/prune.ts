// Which rows of the space ever mattered: every candidate's median on every
// problem of pooled sweeps (one problem per build identity, shape, rows and
// routing), against the fastest candidate there. A row that no problem of any
// pooled sweep timed within the gate of its best, and that is no class's
// default, is a row to drop at the next re-sweep: it costs sweep time and never
// wins. Pooling sweeps of several builds guards against one noisy run.
import type { StoreRecord } from './schema.ts';
import { median } from './stats.ts';
import { recordKey } from './store.ts';

export interface RowUse {
  candidate: string;
  /** problems where the row was timed and passed parity */
  problems: number;
  /** problems where it was the fastest */
  wins: number;
  /** problems where it timed within the gate of the fastest */
  within: number;
  /** its least median over the fastest's, over all problems */
  closest: number;
  /** the default of its class somewhere: never dropped (the rule compares against it) */
  isDefault: boolean;
  /** a table's choice somewhere (the step can pick a runner-up the kernel rule did not): never dropped */
  picked: boolean;
  /** keep: a default, a table's choice, or within the gate somewhere; drop: timed, never within it; untimed: no timed problem */
  verdict: 'keep' | 'drop' | 'untimed';
}

/** The key of a problem: build identity, dtype, shape, rows and routing (recordKey without the candidate). */
const problemKey = (r: StoreRecord) => recordKey({ ...r, candidate: '' });

/**
 * One row per candidate name of the records, sorted by name. Timed, parity-passing
 * candidate records only; `picked`: the choices of the tables promoted from them.
 */
export function rowUse(records: readonly StoreRecord[], gate: number, picked: ReadonlySet<string> = new Set()): RowUse[] {
  const samples = new Map<string, Map<string, number[]>>();
  const isDefault = new Set<string>();
  const names = new Set<string>();
  for (const r of records) {
    if (r.kind !== 'candidate') continue;
    names.add(r.candidate);
    if (r.is_default) isDefault.add(r.candidate);
    if (r.status !== 'ok' || r.parity.status !== 'pass' || r.samples_us.length === 0) continue;
    const key = problemKey(r);
    const byName = samples.get(key) ?? new Map<string, number[]>();
    samples.set(key, byName);
    const pooled = byName.get(r.candidate) ?? [];
    byName.set(r.candidate, pooled);
    pooled.push(...r.samples_us);
  }
  const use = new Map<string, RowUse>();
  for (const name of names)
    use.set(name, { candidate: name, problems: 0, wins: 0, within: 0, closest: Infinity, isDefault: isDefault.has(name), picked: picked.has(name), verdict: 'drop' });
  for (const byName of samples.values()) {
    const medians = [...byName].map(([name, s]) => [name, median(s)] as const);
    const best = Math.min(...medians.map(([, m]) => m));
    for (const [name, m] of medians) {
      const u = use.get(name)!;
      const ratio = m / best;
      u.problems += 1;
      if (m === best) u.wins += 1;
      if (ratio <= 1 + gate) u.within += 1;
      u.closest = Math.min(u.closest, ratio);
    }
  }
  for (const u of use.values()) u.verdict = u.isDefault || u.picked || u.within > 0 ? 'keep' : u.problems === 0 ? 'untimed' : 'drop';
  return [...use.values()].sort((a, b) => (a.candidate < b.candidate ? -1 : a.candidate > b.candidate ? 1 : 0));
}
