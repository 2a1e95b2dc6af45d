// kpick_moe's memory and shape for a moe problem's own inputs at its active
// rows, its weights as bytes (any dtype: fp8 is codes and scales), y poisoned.
import { moeWeightBytes, type Problem } from '../../lib/ffi.ts';

export function moeCallOf(problem: Problem) {
  const m = problem.rows;
  const w = problem.downloadWeightBytes();
  const { gateUp } = moeWeightBytes(problem.dtype, problem.experts, problem.n, problem.k);
  const y = new Uint16Array(m * problem.k).fill(0xffff);
  const mem = { x: problem.downloadX(), wGateUp: w.subarray(0, gateUp), wDown: w.subarray(gateUp), ids: problem.downloadExpertIds(), weights: problem.downloadExpertWeights(), y };
  return { w, gateUp, mem, shape: { m, experts: problem.experts, topk: problem.topk, n: problem.n, k: problem.k } };
}
