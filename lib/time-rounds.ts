// Interleaved timing for benchmarks that compare several candidates and the
// read floor on one problem: each round times every one of them once, in an
// order rotated round by round, so clock and thermal drift hit all alike.

/** what timeRounds needs of a Problem (lib/ffi.ts) */
export interface Timeable {
  time(id: number, nsamples: number): ArrayLike<number>;
  timeFloor(nsamples: number): ArrayLike<number>;
}

/** list rotated left by r: round r starts at a different member */
export function rotate<T>(list: readonly T[], r: number): T[] {
  if (list.length === 0) return [];
  const s = r % list.length;
  return [...list.slice(s), ...list.slice(0, s)];
}

/** samples of each candidate id (in the order given) and of the floor, over rounds rounds */
export function timeRounds(problem: Timeable, ids: readonly number[], samples: number, rounds: number): { cands: number[][]; floor: number[] } {
  const cands = ids.map(() => [] as number[]);
  const floor: number[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const i of rotate([...ids.keys(), -1], r)) {
      if (i < 0) floor.push(...Array.from(problem.timeFloor(samples)));
      else cands[i]!.push(...Array.from(problem.time(ids[i]!, samples)));
    }
  }
  return { cands, floor };
}
