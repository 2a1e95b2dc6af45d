// The key of one problem shape: (op, N, K), and for the moe op its experts E
// and top-k too (kpick.h, KPICK_OP_MOE). Every store record, table entry,
// route line and fleet entry is keyed by it plus dtype and rows; these are the
// one way each module writes it, so a moe key never loses its E and top-k.
import type { Op } from './schema.ts';

export interface ShapeKey {
  op: Op;
  n: number;
  k: number;
  /** op moe only: experts and top-k */
  experts?: number;
  topk?: number;
}

/** { experts, topk } of a moe key, {} for a dense one: what a record or entry spreads in. */
export function moeFields(s: ShapeKey): { experts?: number; topk?: number } {
  return s.op === 'moe' ? { experts: s.experts, topk: s.topk } : {};
}

/** "NxK", and " E<experts> top<topk>" after it on moe: how a shape is written for people (route.c writes the same). */
export function shapeText(s: ShapeKey): string {
  return s.op === 'moe' ? `${s.n}x${s.k} E${s.experts} top${s.topk}` : `${s.n}x${s.k}`;
}

/** A map key of the shape: "op/N/K", "/E/topk" on moe. */
export function shapeId(s: ShapeKey): string {
  return s.op === 'moe' ? `${s.op}/${s.n}/${s.k}/${s.experts}/${s.topk}` : `${s.op}/${s.n}/${s.k}`;
}

/** A map key of one table entry: dtype, shape and rows bucket ("bf16/linear/4096/4096/8"). */
export function entryKey(s: ShapeKey & { dtype: string }, bucket: number): string {
  return `${s.dtype}/${shapeId(s)}/${bucket}`;
}

/** Orders shapes by op, then experts and top-k, then N and K (route.c's key order, dtype aside). */
export function byShape(a: ShapeKey, b: ShapeKey, byText: (x: string, y: string) => number): number {
  return byText(a.op, b.op) || (a.experts ?? 0) - (b.experts ?? 0) || (a.topk ?? 0) - (b.topk ?? 0) || a.n - b.n || a.k - b.k;
}

/** Weight bytes of one expert of a moe shape: W_gate_up [2N, K] and W_down [K, N], 16-bit. */
export const expertBytes = (s: ShapeKey) => 3 * s.n * s.k * 2;

/**
 * Weight bytes one call reads at most: W (2N x K for gated); for moe the
 * experts min(E, rows x top-k) can route to (the read floor measures the ones
 * a routing actually reads, which may be fewer).
 */
export function weightBytes(s: ShapeKey, rows = 1): number {
  if (s.op === 'moe') return Math.min(s.experts ?? 0, rows * (s.topk ?? 0)) * expertBytes(s);
  return (s.op === 'gated' ? 2 : 1) * s.n * s.k * 2;
}
