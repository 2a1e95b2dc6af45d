// moe.wgmma's five nodes in a kernel trace (bench/gpu/kernel-trace.c's lines,
// lib/step-trace.ts's parser), e.g. of a sweep run under the tracer:
//   plan     kp_moe_plan_kernel (ids -> active experts, their pairs, work items)
//   gather   kp_moe_gather_kernel (x's rows in plan order)
//   up       kp_wgmma_moe_kernel, gated (gate/up, silu * mul)
//   down     kp_wgmma_moe_kernel, linear (each pair's o in fp32)
//   combine  kp_moe_combine_kernel (each row's weighted sum)
// A launch is a plan kernel and the four moe kernels after it in start order;
// anything else (another family's moe kernels, a cut-off launch) is counted as
// skipped. Each group (tile, x box, grid, and optionally the routing told by
// how long gate/up took) gets each node's median duration, the median span
// (plan start to combine end) and the median gaps (span less the nodes).
import { median } from './stats.ts';
import type { TraceKernel } from './step-trace.ts';

export const MOE_NODES = ['plan', 'gather', 'up', 'down', 'combine'] as const;
export type MoeNode = (typeof MOE_NODES)[number];

/** kp_wgmma_moe_kernel<DT, WG, MODE, BNMAX>'s template arguments, from its mangled name; null for another kernel. */
export function wgmmaMoeArgs(name: string): { dt: number; wg: number; gated: boolean; bnMax: number } | null {
  const m = /kp_wgmma_moe_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E/.exec(name);
  return m ? { dt: Number(m[1]), wg: Number(m[2]), gated: m[3] === '1', bnMax: Number(m[4]) } : null;
}

export interface MoeLaunch {
  /** the tile as space.def names it: mB (B = 64 WG), .x128 where items take up to 128 rows */
  tile: string;
  /** gate/up's grid: W tiles x work items */
  grid: [number, number];
  us: Record<MoeNode, number>;
  span: number;
}

const isPlan = (k: TraceKernel) => k.name.includes('kp_moe_plan_kernel');
const isGather = (k: TraceKernel) => k.name.includes('kp_moe_gather_kernel');
const isCombine = (k: TraceKernel) => k.name.includes('kp_moe_combine_kernel');
const isMoe = (k: TraceKernel) => isPlan(k) || isGather(k) || isCombine(k) || wgmmaMoeArgs(k.name) !== null;

/** The moe.wgmma launches of a trace, in start order, and how many plan kernels began no whole launch. */
export function moeLaunches(kernels: readonly TraceKernel[]): { launches: MoeLaunch[]; skipped: number } {
  const moe = kernels.filter(isMoe).sort((a, b) => a.start - b.start);
  const launches: MoeLaunch[] = [];
  let skipped = 0;
  for (let i = 0; i < moe.length; i++) {
    if (!isPlan(moe[i]!)) continue;
    const [plan, gather, up, down, combine] = moe.slice(i, i + 5);
    const a = up && wgmmaMoeArgs(up.name), b = down && wgmmaMoeArgs(down.name);
    if (!gather || !isGather(gather) || !a?.gated || !b || b.gated || !combine || !isCombine(combine)) {
      skipped++;
      continue;
    }
    const us = (k: TraceKernel) => (k.end - k.start) / 1000;
    launches.push({
      tile: `m${64 * a.wg}${a.bnMax === 128 ? '.x128' : ''}`,
      grid: [up!.grid[0], up!.grid[1]],
      us: { plan: us(plan!), gather: us(gather), up: us(up!), down: us(down!), combine: us(combine) },
      span: (combine.end - plan!.start) / 1000,
    });
    i += 4;
  }
  return { launches, skipped };
}

export interface MoeGroup {
  tile: string;
  grid: [number, number];
  /** 'fast' / 'slow' against the gate/up split, when one was given */
  side: 'fast' | 'slow' | null;
  launches: number;
  us: Record<MoeNode, number>;
  span: number;
  gaps: number;
}

/** Launches grouped by tile, grid and (with upSplitUs) whether gate/up ran under that many us; medians per group. */
export function groupMoeLaunches(launches: readonly MoeLaunch[], upSplitUs: number | null = null): MoeGroup[] {
  const groups = new Map<string, MoeLaunch[]>();
  const sideOf = (l: MoeLaunch) => (upSplitUs === null ? null : l.us.up < upSplitUs ? 'fast' : 'slow');
  for (const l of launches) {
    const key = `${l.tile} ${l.grid.join('x')} ${sideOf(l) ?? ''}`;
    const group = groups.get(key);
    if (group) group.push(l);
    else groups.set(key, [l]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, ls]) => {
      const us = Object.fromEntries(MOE_NODES.map((n) => [n, median(ls.map((l) => l.us[n]))])) as Record<MoeNode, number>;
      return {
        tile: ls[0]!.tile,
        grid: ls[0]!.grid,
        side: sideOf(ls[0]!),
        launches: ls.length,
        us,
        span: median(ls.map((l) => l.span)),
        gaps: median(ls.map((l) => l.span - MOE_NODES.reduce((s, n) => s + l.us[n], 0))),
      };
    });
}
