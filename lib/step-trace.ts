// The timeline of kpick's decode step, read from bench/gpu/kernel-trace.c's
// lines (one per graph kernel: GPU start and end in ns), split per op.
//   launches  a graph's kernels in start order, one step from each embedding
//             kernel (the step's first node) to the next
//   ops       each kernel named by its place in the step: norm_attn, qkv,
//             attention, o, norm_mlp, gate_up, down per layer (a moe layer's
//             router and experts: mlp), then norm_final, lm_head, argmax
//   exposed   what a kernel adds to the step: its end minus the latest end
//             before it. Under programmatic dependent launch a kernel starts
//             (and waits) before the previous one ends, so its own start-to-end
//             time overlaps its neighbours'; the exposed times of a step sum to
//             its span. Each op's figure is the median over the launches of the
//             op's sum in one step.
//   floor     the op's bytes at the read ceiling: a linear's weights, the
//             attention's KV cache (each row up to its position)
import { readFileSync } from 'node:fs';
import { UsageError } from './cli.ts';
import type { ModelDims } from './model-ffi.ts';
import { median } from './stats.ts';

export interface TraceKernel {
  start: number;
  end: number;
  graph: number;
  grid: [number, number, number];
  block: number;
  name: string;
}

/** bench/gpu/kernel-trace.c's lines; '#' lines and blank ones skipped. Throws naming the line. */
export function parseTrace(text: string, source = 'trace'): TraceKernel[] {
  const out: TraceKernel[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '' || line.startsWith('#')) return;
    const f = line.trim().split(/\s+/);
    const nums = f.slice(0, 9).map(Number);
    if (f.length < 10 || nums.some((n) => !Number.isFinite(n)) || nums[1]! < nums[0]!)
      throw new Error(`${source}:${i + 1}: not a kernel-trace line (start end graph node stream gx gy gz block name)`);
    out.push({ start: nums[0]!, end: nums[1]!, graph: nums[2]!, grid: [nums[5]!, nums[6]!, nums[7]!], block: nums[8]!, name: f.slice(9).join(' ') });
  });
  return out;
}

/** A trace file read and parsed; a file that cannot be read or holds a line that is not a trace line is a UsageError (exit 2). */
export function readTraceFile(path: string): TraceKernel[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`${path}: cannot read (${(err as Error).message})`);
  }
  try {
    return parseTrace(text, path);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export const OPS = ['embed', 'norm_attn', 'qkv', 'attention', 'o', 'norm_mlp', 'gate_up', 'down', 'mlp', 'norm_final', 'lm_head', 'argmax'] as const;
export type Op = (typeof OPS)[number];

const is = (k: TraceKernel, part: string) => k.name.includes(part);
/** decode.hip's attention: the CUDA-core kernel or the tensor-core one (a grid row per activation row either way) */
const isAttention = (k: TraceKernel) => is(k, 'kp_attention_kernel') || is(k, 'kp_attention_mma_kernel');

/** One step's kernels (in start order), each named by its place in the step. */
export function labelStep(step: readonly TraceKernel[]): Op[] {
  const ops: Op[] = [];
  let next: Op = 'qkv'; // what a linear kernel is, from the shared op before it
  for (const k of step) {
    if (is(k, 'kp_embed_kernel')) ops.push('embed');
    else if (is(k, 'kp_add_rmsnorm_kernel')) {
      const mlp: boolean = next === 'o';
      ops.push(mlp ? 'norm_mlp' : 'norm_attn');
      next = mlp ? 'gate_up' : 'qkv';
    } else if (isAttention(k)) {
      ops.push('attention');
      next = 'o';
    } else if (is(k, 'kp_argmax_kernel')) ops.push('argmax');
    else ops.push(next);
  }
  // the last norm is the final one, and every linear after it the lm_head
  const last = ops.lastIndexOf('norm_attn');
  if (last >= 0) {
    ops[last] = 'norm_final';
    for (let i = last + 1; i < ops.length; i++) if (ops[i] !== 'argmax') ops[i] = 'lm_head';
  }
  // a layer's mlp kernels: gate_up up to its silu-mul (the vendor's gated call is
  // two kernels), else its first kernel; down the rest; a moe layer's all mlp
  for (let i = 0; i < ops.length; i++) {
    if (ops[i] !== 'gate_up') continue;
    let j = i;
    while (j < ops.length && ops[j] === 'gate_up') j++;
    const group = step.slice(i, j);
    if (group.some((k) => is(k, 'moe'))) ops.fill('mlp', i, j);
    else {
      const silu = group.findIndex((k) => is(k, 'silu_mul'));
      ops.fill('down', i + (silu >= 0 ? silu + 1 : 1), j);
    }
    i = j - 1;
  }
  return ops;
}

export interface OpTime {
  op: Op;
  /** kernels of the op in one step */
  kernels: number;
  /** median over launches of the op's exposed time in one step, us */
  exposed_us: number;
  /** the same, of its kernels' start-to-end times */
  duration_us: number;
  /** the same, of start minus the latest earlier end (negative: started before its predecessor ended) */
  start_gap_us: number;
}

export interface GraphTimeline {
  graph: number;
  /** activation rows: the attention's grid y */
  rows: number;
  /** whether any linear is one of kpick's own kernels (else all are the vendor BLAS's) */
  kpick_linears: boolean;
  launches: number;
  step_us: number;
  ops: OpTime[];
}

const LINEARS: readonly Op[] = ['qkv', 'o', 'gate_up', 'down', 'lm_head'];
/** one of kpick's kernels (kp_*), not the silu-mul that follows the vendor's gated call */
const isKpickLinear = (k: TraceKernel) => /^_Z\d+kp_/.test(k.name) && !is(k, 'silu_mul');

/** Each graph's launches: its kernels in start order, cut before every embedding kernel. */
export function launchesOf(kernels: readonly TraceKernel[]): Map<number, TraceKernel[][]> {
  const byGraph = new Map<number, TraceKernel[]>();
  for (const k of kernels) {
    const ks = byGraph.get(k.graph);
    if (ks) ks.push(k);
    else byGraph.set(k.graph, [k]);
  }
  const out = new Map<number, TraceKernel[][]>();
  for (const [g, ks] of [...byGraph].sort((a, b) => a[0] - b[0])) {
    ks.sort((a, b) => a.start - b.start);
    const steps: TraceKernel[][] = [];
    for (const k of ks) {
      if (is(k, 'kp_embed_kernel') || steps.length === 0) steps.push([]);
      steps[steps.length - 1]!.push(k);
    }
    out.set(g, steps);
  }
  return out;
}

/** The per-op timeline of each graph, over its launches after the first `skip`. */
export function timelines(kernels: readonly TraceKernel[], skip = 1): GraphTimeline[] {
  const out: GraphTimeline[] = [];
  for (const [graph, all] of launchesOf(kernels)) {
    const steps = all.length > skip ? all.slice(skip) : all;
    const per = new Map<Op, { n: number; exposed: number[]; duration: number[]; gap: number[] }>();
    const spans: number[] = [];
    for (const step of steps) {
      const ops = labelStep(step);
      const sums = new Map<Op, [number, number, number, number]>();
      let lastEnd = step[0]!.start;
      step.forEach((k, i) => {
        const s = sums.get(ops[i]!) ?? [0, 0, 0, 0];
        s[0] += Math.max(0, k.end - lastEnd);
        s[1] += k.end - k.start;
        s[2] += k.start - lastEnd;
        s[3] += 1;
        sums.set(ops[i]!, s);
        lastEnd = Math.max(lastEnd, k.end);
      });
      spans.push(lastEnd - step[0]!.start);
      for (const [op, [e, d, g, n]] of sums) {
        const p = per.get(op) ?? { n, exposed: [], duration: [], gap: [] };
        p.exposed.push(e / 1000), p.duration.push(d / 1000), p.gap.push(g / 1000);
        per.set(op, p);
      }
    }
    const attention = all[0]!.find(isAttention);
    out.push({
      graph,
      rows: attention ? attention.grid[1] : 0,
      kpick_linears: labelStep(all[0]!).some((op, i) => LINEARS.includes(op) && isKpickLinear(all[0]![i]!)),
      launches: steps.length,
      step_us: median(spans) / 1000,
      ops: OPS.filter((op) => per.has(op)).map((op) => {
        const p = per.get(op)!;
        return { op, kernels: p.n, exposed_us: median(p.exposed), duration_us: median(p.duration), start_gap_us: median(p.gap) };
      }),
    });
  }
  return out;
}

/** The bytes each op must read in one step of m rows at mean KV length len (bf16/fp16). */
export function opBytes(d: ModelDims, m: number, len: number): Partial<Record<Op, number>> {
  const e = 2;
  const qdim = d.heads * d.headDim;
  const nqkv = (d.heads + 2 * d.kvHeads) * d.headDim;
  const dense = (d.experts ?? 0) === 0;
  return {
    qkv: d.layers * e * nqkv * d.hidden,
    o: d.layers * e * d.hidden * qdim,
    ...(dense ? { gate_up: d.layers * e * 2 * d.intermediate * d.hidden, down: d.layers * e * d.hidden * d.intermediate } : {}),
    attention: d.layers * e * 2 * m * d.kvHeads * d.headDim * len,
    lm_head: e * d.vocab * d.hidden,
  };
}

/** A Markdown table of one graph: each op's exposed time a step and a layer, and its read floor. */
export function timelineMarkdown(t: GraphTimeline, bytes: Partial<Record<Op, number>>, ceilingGbS: number, layers: number): string {
  const f = (x: number) => x.toFixed(1);
  const lines = [
    `graph ${t.graph}: ${t.rows} row(s), ${t.kpick_linears ? "kpick's linears" : "the vendor BLAS's linears"}, ${t.launches} launches, step ${f(t.step_us)} us`,
    '',
    '| op | kernels a step | exposed us a step | a layer | start-to-end us a kernel | start gap us a kernel | floor us a step | exposed / floor |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const o of t.ops) {
    const b = bytes[o.op];
    const floor = b === undefined ? null : b / (ceilingGbS * 1e3);
    const perLayer = o.kernels >= layers ? f(o.exposed_us / layers) : '-';
    lines.push(
      `| ${o.op} | ${o.kernels} | ${f(o.exposed_us)} | ${perLayer} | ${(o.duration_us / o.kernels).toFixed(2)} | ${(o.start_gap_us / o.kernels).toFixed(2)} | ${floor === null ? '-' : f(floor)} | ${floor === null ? '-' : (o.exposed_us / floor).toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}
