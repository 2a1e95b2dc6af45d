// The one builder of store records (lib/schema.ts StoreRecord): a sweep's
// candidate timings and read floor, and parity's checks alone, all take
// their common fields from where they were measured and the rest from what
// the candidate yielded there.
import type { Candidate } from './ffi.ts';
import { STORE_VERSION, type Bucket, type Dtype, type Identity, type Parity, type StoreRecord } from './schema.ts';
import { moeFields, type ShapeKey } from './shape-key.ts';

/** The name the read floor is stored under. */
export const FLOOR = 'floor' as const;

/** Where a record was measured: the build, the problem, its rows and weight copies. */
export interface RecordSite extends ShapeKey {
  identity: Identity;
  dtype: Dtype;
  rows: Bucket;
  copies: number;
  /** buffer placements the samples were spread over (lib/sweep.ts); absent: one */
  placements?: number;
  /** moe: the routing drawn, when skewed (absent: uniform) */
  routing?: StoreRecord['routing'];
  seed: number;
}

/** What one candidate (or the floor) yielded at a site. */
export interface Outcome {
  status: StoreRecord['status'];
  /** why it is not ok; empty when it is */
  reason: string;
  parity: Parity;
  /** graph nodes counted by capturing one call; null when not counted */
  nodes: number | null;
  /** kept only when the status is ok */
  samples: readonly number[];
}

const FLOOR_PARITY: Parity = { status: 'skipped', rel_err: null, bitwise: null, reason: 'the read floor computes no output' };

/**
 * One store record: kind 'candidate' (a timing) or 'parity' (a check alone)
 * of a candidate, or 'floor' for the read floor (no candidate, no parity).
 */
export function storeRecord(site: RecordSite, kind: StoreRecord['kind'], outcome: Outcome, cand?: Candidate): StoreRecord {
  if ((kind === 'floor') !== (cand === undefined)) throw new Error(`a ${kind} record ${kind === 'floor' ? 'takes no' : 'needs its'} candidate`);
  const who = cand === undefined
    ? { candidate: FLOOR, params: {}, nodes_declared: 1, is_default: false, stack_bound: false, pdl: false }
    : { candidate: cand.name, params: { ...cand.params }, nodes_declared: cand.nodes, is_default: cand.isDefault, stack_bound: cand.stackBound, pdl: cand.pdl,
        // the fp8 classes only: a w16a16 record stays as it was before fp8
        ...(cand.numeric !== 'w16a16' ? { numeric: cand.numeric } : {}) };
  return {
    v: STORE_VERSION,
    kind,
    identity: site.identity,
    op: site.op,
    dtype: site.dtype,
    n: site.n,
    k: site.k,
    ...moeFields(site),
    rows: site.rows,
    ...who,
    nodes: cand === undefined ? null : outcome.nodes,
    status: outcome.status,
    reason: outcome.reason,
    samples_us: outcome.status === 'ok' ? [...outcome.samples] : [],
    copies: site.copies,
    ...(site.placements !== undefined && site.placements > 1 ? { placements: site.placements } : {}),
    ...(site.routing !== undefined ? { routing: site.routing } : {}),
    parity: cand === undefined ? FLOOR_PARITY : outcome.parity,
    seed: site.seed,
    at: new Date().toISOString(),
  };
}
