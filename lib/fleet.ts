// The fleet check: does this node still run the table's picks the way the
// tuned node did? A probe re-checks each pick's parity and times it afresh
// (the sweep's harness: same rotating copies, same timer), and compares the
// median with the one the table recorded. A pool of many nodes' summaries
// then flags the odd node: a slow GPU, another driver, a broken kernel.
//
// Bounds (measured / recorded median): a node is flagged when the geomean
// over its entries exceeds `geomean`, any entry exceeds `entry`, any pick
// fails parity or cannot run, its table was refused, or (when pooled) its
// identity differs from the fleet's most common one.
import { hostname } from 'node:os';
import * as v from 'valibot';
import { KpickError, type Candidate, type Kpick, type Problem } from './ffi.ts';
import { identityKey } from './identity.ts';
import { computeReference, ParityChecker, referenceColumns } from './parity.ts';
import { FleetSummary, issuesLine, type FleetEntry, type Identity, type Parity, type TableEntry } from './schema.ts';
import { geomean, median } from './stats.ts';
import { moeFields, shapeId, shapeText } from './shape-key.ts';

export interface Bounds {
  /** largest geomean of measured/recorded over a node's entries */
  geomean: number;
  /** largest measured/recorded of any one entry */
  entry: number;
}

export const DEFAULT_BOUNDS: Readonly<Bounds> = { geomean: 1.1, entry: 1.25 };

export interface ProbeOptions {
  samples: number;
  rounds: number;
  /** rotating weight copies; 0: the library picks > 8x LLC (the sweep's default) */
  copies: number;
  seed: number;
}

export function shapeLabel(e: Pick<FleetEntry, 'dtype' | 'op' | 'n' | 'k' | 'experts' | 'topk' | 'bucket'>): string {
  return `${e.dtype} ${e.op} ${shapeText(e)} m=${e.bucket}`;
}

function fails(err: unknown): string {
  if (err instanceof KpickError) return err.message;
  throw err;
}

/** Probes one entry on a problem already at its rows. */
function probeEntry(problem: Problem, entry: TableEntry, space: readonly Candidate[], opts: ProbeOptions): FleetEntry {
  const failed = (reason: string) => unprobed(entry, reason);
  const cand = space.find((c) => c.name === entry.choice);
  if (!cand || !cand.available) return failed(`${entry.choice} is not in this build`);
  const samples: number[] = [];
  let parity: Parity;
  try {
    if (!problem.supports(cand.id)) return failed(`${entry.choice} cannot run this shape here`);
    const reference = computeReference(problem, referenceColumns(problem, 'sampled', opts.seed));
    parity = new ParityChecker(problem, reference, space).check(cand);
    for (let r = 0; r < opts.rounds; r++) samples.push(...problem.time(cand.id, opts.samples));
  } catch (err) {
    return failed(fails(err));
  }
  const measured = median(samples);
  const recorded = entry.candidates[entry.choice]?.median_us ?? null;
  return {
    ...unprobed(entry, parity.reason),
    measured_us: measured,
    ratio: recorded !== null && recorded > 0 ? measured / recorded : null,
    parity: parity.status === 'pass' ? 'pass' : 'fail',
  };
}

/** An entry as probed when its choice never ran: parity 'fail' with the reason. */
function unprobed(e: TableEntry, reason: string): FleetEntry {
  return {
    op: e.op, dtype: e.dtype, n: e.n, k: e.k, ...moeFields(e), bucket: e.bucket, choice: e.choice,
    recorded_us: e.candidates[e.choice]?.median_us ?? null, measured_us: null, ratio: null, parity: 'fail', reason,
  };
}

/** Parity and timing of every entry's choice, one problem per (dtype, op, shape), in table order. */
export function probeEntries(kpick: Kpick, entries: readonly TableEntry[], opts: ProbeOptions): FleetEntry[] {
  const space = kpick.candidates();
  const out = new Map<TableEntry, FleetEntry>();
  const shapes = new Map<string, TableEntry[]>();
  for (const e of entries) {
    const key = `${e.dtype}:${shapeId(e)}`;
    shapes.set(key, [...(shapes.get(key) ?? []), e]);
  }
  for (const group of shapes.values()) {
    const first = group[0] as TableEntry;
    let problem: Problem;
    try {
      problem = kpick.createProblem({
        op: first.op, dtype: first.dtype, n: first.n, k: first.k,
        ...(first.op === 'moe' ? { experts: first.experts, topk: first.topk, routing: 'uniform' as const } : {}),
        mMax: Math.max(...group.map((e) => e.bucket)), copies: opts.copies, seed: opts.seed,
      });
    } catch (err) {
      const reason = `cannot set up the shape: ${fails(err)}`;
      for (const e of group) out.set(e, unprobed(e, reason));
      continue;
    }
    try {
      for (const e of [...group].sort((a, b) => a.bucket - b.bucket)) {
        problem.setRows(e.bucket);
        out.set(e, probeEntry(problem, e, space, opts));
      }
    } finally {
      problem.free();
    }
  }
  return entries.map((e) => out.get(e) as FleetEntry);
}

const fmt = (x: number) => x.toFixed(3);

/** The node's own flags from its entries: parity, each entry's ratio, the geomean. */
export function judgeEntries(entries: readonly FleetEntry[], bounds: Bounds): { geomean: number | null; worst: number | null; flags: string[] } {
  const flags: string[] = [];
  for (const e of entries) {
    if (e.parity === 'fail') flags.push(`parity fail: ${shapeLabel(e)} ${e.choice}: ${e.reason}`);
  }
  const timed = entries.filter((e): e is FleetEntry & { ratio: number } => e.ratio !== null && e.ratio > 0);
  for (const e of timed) {
    if (e.ratio > bounds.entry) flags.push(`slow: ${shapeLabel(e)} ${e.choice} x${fmt(e.ratio)} its recorded median (> ${bounds.entry})`);
  }
  const g = timed.length > 0 ? geomean(timed.map((e) => e.ratio)) : null;
  if (g !== null && g > bounds.geomean) flags.push(`slow overall: geomean x${fmt(g)} over ${timed.length} entries (> ${bounds.geomean})`);
  if (entries.length > 0 && timed.length === 0) flags.push('no entry could be timed against a recorded median');
  return { geomean: g, worst: timed.length > 0 ? Math.max(...timed.map((e) => e.ratio)) : null, flags };
}

/** The node name: --node, else the host name, plus /gpu<list> when a visible-devices variable selects GPUs. */
export function nodeName(given: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): { node: string; host: string; visible: string | null } {
  const host = hostname() || 'unnamed-host';
  const visible = env.CUDA_VISIBLE_DEVICES ?? env.HIP_VISIBLE_DEVICES ?? null;
  const node = given ?? (visible === null || visible === '' ? host : `${host}/gpu${visible}`);
  return { node, host, visible };
}

export interface SummaryInput {
  node: { node: string; host: string; visible: string | null };
  identity: Identity;
  table: string;
  bounds: Bounds;
  at: Date;
}

/** What every summary of a node says about where it ran, around its verdict. */
function summaryOf(input: SummaryInput, outcome: Pick<FleetSummary, 'entries' | 'geomean_ratio' | 'worst_ratio' | 'verdict' | 'flags'>): FleetSummary {
  return {
    kind: 'fleet-check',
    ...input.node,
    device: input.identity.device,
    identity: input.identity,
    table: input.table,
    entries: outcome.entries,
    geomean_ratio: outcome.geomean_ratio,
    worst_ratio: outcome.worst_ratio,
    bounds: { ...input.bounds },
    verdict: outcome.verdict,
    flags: outcome.flags,
    at: input.at.toISOString(),
  };
}

export function nodeSummary(input: SummaryInput, entries: FleetEntry[]): FleetSummary {
  const judged = judgeEntries(entries, input.bounds);
  return summaryOf(input, {
    entries,
    geomean_ratio: judged.geomean,
    worst_ratio: judged.worst,
    verdict: judged.flags.length > 0 ? 'flagged' : 'pass',
    flags: judged.flags,
  });
}

export function refusedSummary(input: SummaryInput, why: string): FleetSummary {
  return summaryOf(input, { entries: [], geomean_ratio: null, worst_ratio: null, verdict: 'refused', flags: [`table refused: ${why}`] });
}

/** Summaries from JSON lines (blank lines skipped); a line that is not one is an error naming it. */
export function parseSummaries(text: string, source: string): { summaries: FleetSummary[]; errors: string[] } {
  const summaries: FleetSummary[] = [];
  const errors: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      errors.push(`${source}:${i + 1}: not JSON (${(err as Error).message})`);
      return;
    }
    const parsed = v.safeParse(FleetSummary, value);
    if (parsed.success) summaries.push(parsed.output);
    else errors.push(`${source}:${i + 1}: not a fleet-check summary (${issuesLine(parsed.issues)})`);
  });
  return { summaries, errors };
}

export interface PooledNode {
  node: string;
  device: string;
  entries: number;
  geomean_ratio: number | null;
  worst_ratio: number | null;
  flags: string[];
}

/**
 * Judges every node under the pool's bounds (not the ones each node used),
 * and against the fleet's most common identity (ties: the one of the first
 * node by name). A node named twice keeps its last summary.
 */
export function poolFleet(summaries: readonly FleetSummary[], bounds: Bounds): { nodes: PooledNode[]; identity: Identity | null; repeated: string[] } {
  const byNode = new Map<string, FleetSummary>();
  const repeated: string[] = [];
  for (const s of summaries) {
    if (byNode.has(s.node)) repeated.push(s.node);
    byNode.set(s.node, s);
  }
  const ordered = [...byNode.values()].sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  const counts = new Map<string, { n: number; identity: Identity }>();
  for (const s of ordered) {
    const key = identityKey(s.identity);
    counts.set(key, { n: (counts.get(key)?.n ?? 0) + 1, identity: s.identity });
  }
  let common: { n: number; identity: Identity } | null = null;
  for (const c of counts.values()) if (common === null || c.n > common.n) common = c;
  const nodes = ordered.map((s): PooledNode => {
    const judged = judgeEntries(s.entries, bounds);
    const flags = s.verdict === 'refused' ? s.flags.filter((f) => f.startsWith('table refused')) : judged.flags;
    if (common !== null && identityKey(s.identity) !== identityKey(common.identity)) {
      const fields = (Object.keys(common.identity) as (keyof Identity)[]).filter((f) => s.identity[f] !== common!.identity[f]);
      flags.push(`identity differs from the fleet's: ${fields.map((f) => `${f} ${JSON.stringify(s.identity[f])} (fleet: ${JSON.stringify(common!.identity[f])})`).join(', ')}`);
    }
    return { node: s.node, device: s.device, entries: s.entries.length, geomean_ratio: judged.geomean, worst_ratio: judged.worst, flags };
  });
  return { nodes, identity: common?.identity ?? null, repeated: [...new Set(repeated)] };
}
