// The promote rule: pooled store records of one machine -> table entries.
// Pure functions (no I/O, no clock); lib/table.ts adds the header and writes.
//
// Per problem (op, dtype, n, k, rows) a candidate is eligible when its status is
// 'ok', its parity 'pass' and it has samples. An eligible candidate leaves the
// class default only when all of these hold:
//   gain  = median(default) / median(candidate) - 1 >= gate
//   noise: both have >= MIN_SAMPLES samples, and the candidate is faster past
//          the noise by either of two distribution-free checks: the
//          interquartile ranges do not overlap (candidate p75 < default p25),
//          or a one-sided rank test (Mann-Whitney, lib/stats.ts) on the two
//          sides' samples gives p < NOISE_P. The quartile check alone fails on
//          a busy machine: when another process slows a quarter of the
//          samples of each side, the quartiles overlap however large the
//          gain (a 2-core CPU shared with other jobs kept "+304.6 %"). The
//          rank test counts each slowed sample as one rank, however slow, so
//          a real gain passes with enough samples. It takes the samples as
//          independent, which the CPU sweep comes close to (each sample is a
//          round of its own, lib/sweep.ts); a GPU takes a round's samples
//          together, so there it leans optimistic, and a small shift that it
//          passes still needs the gain over the gate. Where the quartiles are
//          apart the rule picks what it picked before.
//   nodes: graph nodes (measured, else declared) <= the default's; for op
//          'linear' only: the gated default is two nodes and its fused kernels
//          one, the moe default a few per active expert and its grouped
//          kernels one, so those entries need the gain (and the noise check) alone.
//   pdl:   a candidate that chains with programmatic dependent launch (its
//          records' pdl flag: KF_PDL in space.def, reported by the library) is
//          picked only at rows <= pdl rows (default MAX_ROWS: any).
//          The rule was added (default 2) when the sweep timed each kernel back
//          to back with itself: a .pdl kernel then overlapped its own previous
//          launch, which no decode step allows, and on the H200 the .pdl picks
//          at rows >= 4 made the step slower than the default while those at
//          rows 1-2 made it faster (bench/results/h200-2026-11-29-s2-variants).
//          The GPU now times each call after a producer kernel that writes x
//          as a decode op does (hip-lib/src/gpu/hooks.cpp, be_time): a .pdl
//          candidate overlaps only that producer, as it overlaps the op before
//          it in a step, and its own next launch cannot start before it ends.
//          What flattered it is gone from the timing, so the default no longer
//          limits it; `--pdl-rows 2` keeps the old rule, so serve-bench can
//          compare the two tables from one store (bench/gpu/pipeline.sh pdl-rows).
//          Should the default table lose to the --pdl-rows 2 one there, the
//          rule is still needed and this default goes back to 2. Since the
//          step's veto (lib/step-verdict.ts, applied by lib/table.ts), a .pdl
//          pick that makes a step slower goes back to the default one entry
//          at a time: on the H200 that, not a rows cut, took Llama-3.1-8B at
//          c=8 from 0.991x to 1.015x, with Qwen3-8B's .pdl picks kept.
//   class: (fp8) the default is the dtype's class default, W8A8, what an engine
//          runs without a table. A candidate of another numeric class is
//          picked over it when its own class's parity bar is no looser than
//          the default's (lib/parity.ts parityBar): every class is judged
//          against the same fp64 reference (bf16 x, dequantized W), so a
//          W8A16 pick, which passed the tighter bar, answers at least as
//          closely as the default it replaces; a faster W8A16 GEMV beating
//          the W8A8 default is the point of the dtype. A class with a looser
//          bar than the default's would trade accuracy for speed without
//          anyone asking, so it is never picked over it.
//   routing: (moe) the sweep times a moe problem under uniform and under skewed
//          routing (lib/sweep.ts). Where a problem has both, each candidate is
//          ranked on the geometric means of its uniform and skewed samples taken
//          in pairs (the i-th of each, in the order taken), and the floor on the
//          geometric mean of its two medians: a pick must hold where rows spread
//          over the experts and where they share a few. A candidate timed under
//          one routing only has no samples there (not eligible). A problem with
//          uniform records alone (stores from before) ranks on them, as before.
// Among the candidates that pass, the fastest median wins (ties by name). Every
// entry says in one line why it moved or why it kept the default.
import { identityDifference, identityKey, identityTag } from './identity.ts';
import { parityBar, formatError } from './parity.ts';
import { Identity, MAX_ROWS, type CandidateResult, type Dtype, type StoreRecord, type TableEntry } from './schema.ts';
import { median, quantile, rankTest } from './stats.ts';
import { byShape, moeFields, shapeId } from './shape-key.ts';

export const DEFAULT_GATE = 0.02;
/** The largest rows bucket where a PDL candidate may be picked: the largest bucket, no limit (see the rule above). */
export const DEFAULT_PDL_ROWS = MAX_ROWS;
/** With fewer samples a quartile is one or two samples: no measure of spread. */
export const MIN_SAMPLES = 5;
/** The rank test's level: at 5 samples a side, only a candidate faster in 24 of the 25 pairs passes. */
export const NOISE_P = 0.01;

// Code-unit order, not the locale's: the same table text on every machine.
export const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const IDENTITY_FIELDS = Object.keys(Identity.entries) as (keyof Identity)[];

/** The one identity shared by every record, or a line naming the fields that differ. */
export function commonIdentity(records: readonly StoreRecord[]): { identity: Identity } | { error: string } {
  const first = records[0];
  if (!first) return { error: 'no records to promote' };
  const differing: string[] = [];
  for (const field of IDENTITY_FIELDS) {
    const values = [...new Set(records.map((r) => r.identity[field]))].sort();
    if (values.length > 1) {
      const shown = values.slice(0, 3).map((s) => JSON.stringify(s)).join(' vs ');
      differing.push(`${field} (${shown}${values.length > 3 ? ` and ${values.length - 3} more` : ''})`);
    }
  }
  if (differing.length > 0) return { error: `the records mix identities: ${differing.join(', ')}; promote one machine and build at a time` };
  return { identity: { ...first.identity } };
}

/** The records of one identity, chosen among a store's, and what was left out. */
export interface IdentityChoice {
  identity: Identity;
  records: StoreRecord[];
  /** records of every other identity: left out, counted, named by tag */
  skipped: { tag: string; identity: Identity; count: number; differs: string }[];
}

/**
 * Picks the records of one identity: the one whose tag (identityTag) starts
 * with `wanted`, else the identity of the newest record (a store resumed after
 * a rebuild promotes the build it was resumed with). Never a dead end: the
 * others are skipped and listed with their tags, for --identity.
 */
export function chooseIdentity(records: readonly StoreRecord[], wanted?: string): IdentityChoice | { error: string } {
  const groups = new Map<string, { identity: Identity; records: StoreRecord[]; newest: string }>();
  for (const r of records) {
    const key = identityKey(r.identity);
    const g = groups.get(key);
    if (g) {
      g.records.push(r);
      if (r.at > g.newest) g.newest = r.at;
    } else groups.set(key, { identity: r.identity, records: [r], newest: r.at });
  }
  const all = [...groups.values()];
  if (all.length === 0) return { error: 'no records to promote' };
  const listed = () => all.map((g) => `${identityTag(g.identity)} (${g.records.length} records, space ${g.identity.space}, compiler "${g.identity.compiler}")`).join('; ');
  let chosen;
  if (wanted !== undefined) {
    const matches = all.filter((g) => identityTag(g.identity).startsWith(wanted));
    if (matches.length !== 1) return { error: `--identity ${wanted} matches ${matches.length} of the store's identities: ${listed()}` };
    chosen = matches[0]!;
  } else {
    chosen = all.reduce((a, b) => (b.newest > a.newest ? b : a));
  }
  const skipped = all
    .filter((g) => g !== chosen)
    .map((g) => ({ tag: identityTag(g.identity), identity: g.identity, count: g.records.length, differs: identityDifference(chosen.identity, g.identity) }));
  return { identity: chosen.identity, records: chosen.records, skipped };
}

/**
 * Pools every record of one candidate on one problem (several stores, resumed
 * runs). Samples come from the 'ok' records only. The worst evidence wins: one
 * 'failed' run makes the candidate failed, one parity 'fail' makes it fail;
 * parity 'pass' needs at least one pass (a 'skipped' record is no evidence).
 */
export function poolCandidate(records: readonly StoreRecord[]): CandidateResult {
  const ordered = [...records].sort((a, b) => byText(a.at, b.at) || a.seed - b.seed);
  const first = ordered[0];
  if (!first) throw new Error('poolCandidate needs at least one record');
  const status = ordered.some((r) => r.status === 'failed') ? 'failed' : ordered.some((r) => r.status === 'ok') ? 'ok' : 'unsupported';
  const parity = ordered.some((r) => r.parity.status === 'fail') ? 'fail' : ordered.some((r) => r.parity.status === 'pass') ? 'pass' : 'skipped';
  const errs = ordered.map((r) => r.parity.rel_err).filter((e): e is number => e !== null);
  const measured = ordered.map((r) => r.nodes).filter((n): n is number => n !== null);
  const samples = pooledSamples(ordered);
  const timed = samples.length > 0;
  return {
    median_us: timed ? median(samples) : null,
    p25_us: timed ? quantile(samples, 0.25) : null,
    p75_us: timed ? quantile(samples, 0.75) : null,
    samples: samples.length,
    // Disagreeing counts take the larger: the node rule must not be dodged.
    nodes: measured.length > 0 ? Math.max(...measured) : Math.max(...ordered.map((r) => r.nodes_declared)),
    params: Object.fromEntries(Object.entries(first.params).sort(([a], [b]) => byText(a, b))),
    parity,
    rel_err: errs.length > 0 ? Math.max(...errs) : null,
    stack_bound: ordered.some((r) => r.stack_bound),
    status,
    ...(first.numeric !== undefined && first.numeric !== 'w16a16' ? { numeric: first.numeric } : {}),
  };
}

/** The samples a candidate's pooled result is made of: those of its 'ok' records, oldest first. */
export function pooledSamples(records: readonly StoreRecord[]): number[] {
  const ordered = [...records].sort((a, b) => byText(a.at, b.at) || a.seed - b.seed);
  return ordered.filter((r) => r.status === 'ok').flatMap((r) => r.samples_us);
}

/** Percent with sign and one decimal, as the reasons print it: "+23.1 %". */
export function percent(gain: number): string {
  const text = (gain * 100).toFixed(1);
  return `${gain >= 0 ? '+' : ''}${text} %`;
}

export function isEligible(c: CandidateResult): boolean {
  return c.status === 'ok' && c.parity === 'pass' && c.samples > 0 && c.median_us !== null && c.median_us > 0;
}

/** The samples a candidate's verdict rests on: its own and the default's. */
export interface Samples {
  cand: readonly number[];
  def: readonly number[];
}

/** "its class ... has a looser parity bar ..." when `cand`'s numeric class is judged more loosely than the default's: it may never replace it. */
export function looserBar(op: TableEntry['op'], dtype: Dtype, cand: CandidateResult, def: CandidateResult): string | null {
  const [candClass, defClass] = [cand.numeric ?? 'w16a16', def.numeric ?? 'w16a16'];
  const [candBar, defBar] = [parityBar(dtype, candClass, op), parityBar(dtype, defClass, op)];
  return candBar > defBar ? `its class ${candClass} has a looser parity bar (${formatError(candBar)}) than the default's ${defClass} (${formatError(defBar)})` : null;
}

/** "N nodes > M" when a linear candidate takes more graph nodes than its default: it may never replace it. */
export function moreNodes(op: TableEntry['op'], cand: CandidateResult, def: CandidateResult): string | null {
  return op === 'linear' && cand.nodes > def.nodes ? `${cand.nodes} nodes > ${def.nodes}` : null;
}

/** Why `cand` may not replace `def`, or null when it may. Both are eligible. */
function refusal(op: TableEntry['op'], dtype: Dtype, name: string, cand: CandidateResult, def: CandidateResult, samples: Samples, gain: number, gate: number, rows: number, pdlRows: number, pdl: boolean): string | null {
  const best = `best ${name} ${percent(gain)}`;
  const bar = looserBar(op, dtype, cand, def);
  if (gain >= gate && bar !== null) return `kept: ${best} but ${bar}`;
  if (gain >= gate && pdl && rows > pdlRows) return `kept: ${best} but PDL is picked only at rows <= ${pdlRows}`;
  if (gain < gate) {
    if (cand.median_us === def.median_us) return `kept: ${best}, a tie with the default`;
    if (gain < 0) return `kept: default is fastest, ${best}`;
    return `kept: ${best}, below gate ${percent(gate).slice(1)}`;
  }
  const fewest = Math.min(cand.samples, def.samples);
  if (fewest < MIN_SAMPLES) return `kept: ${best} but too few samples to judge noise (${fewest} < ${MIN_SAMPLES})`;
  if (!((cand.p75_us as number) < (def.p25_us as number))) {
    const { p } = rankTest(samples.cand, samples.def);
    if (!(p < NOISE_P)) {
      return `kept: ${best} but within noise (rank test p ${p.toPrecision(2)} >= ${NOISE_P} over ${cand.samples} vs ${def.samples} samples; p75 ${fmtUs(cand.p75_us)} >= default p25 ${fmtUs(def.p25_us)} us)`;
    }
  }
  const nodes = moreNodes(op, cand, def);
  if (nodes !== null) return `kept: ${best} but ${nodes}`;
  return null;
}

function fmtUs(us: number | null): string {
  return us === null ? '-' : us.toPrecision(4);
}

/** Why no candidate is eligible, with counts of each cause. */
function noneEligible(others: readonly CandidateResult[]): string {
  if (others.length === 0) return 'kept: no other candidate measured';
  const count = (pred: (c: CandidateResult) => boolean) => others.filter(pred).length;
  const ran = (c: CandidateResult) => c.status === 'ok' && c.samples > 0;
  const causes: [number, string][] = [
    [count((c) => ran(c) && c.parity === 'fail'), 'failed parity'],
    [count((c) => ran(c) && c.parity === 'skipped'), 'parity not checked'],
    [count((c) => c.status === 'failed'), 'failed'],
    [count((c) => c.status === 'unsupported'), 'unsupported'],
    [count((c) => c.status === 'ok' && c.samples === 0), 'no samples'],
  ];
  const detail = causes.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}`).join(', ');
  const head = others.some(ran) ? 'kept: no candidate passed parity' : 'kept: no candidate has timings';
  return `${head} (${detail})`;
}

/** The choice and its reason for one problem, given its pooled candidates and the names of those that chain with PDL. */
export function decide(
  op: TableEntry['op'],
  defaultName: string,
  candidates: ReadonlyMap<string, CandidateResult>,
  /** every candidate's pooled samples, by name (poolCandidate's) */
  samples: ReadonlyMap<string, readonly number[]>,
  gate: number,
  rows: number,
  pdlRows: number = DEFAULT_PDL_ROWS,
  pdl: ReadonlySet<string> = new Set(),
  dtype: Dtype = 'bf16',
): { choice: string; reason: string } {
  const kept = (reason: string) => ({ choice: defaultName, reason });
  const def = candidates.get(defaultName);
  if (!def) return kept(`kept: default ${defaultName} not measured on this problem`);
  if (!(def.status === 'ok' && def.samples > 0 && def.median_us !== null && def.median_us > 0)) {
    return kept(`kept: default ${defaultName} has no timing (status ${def.status}, ${def.samples} samples)`);
  }
  const others = [...candidates].filter(([name]) => name !== defaultName);
  const eligible = others.filter(([, c]) => isEligible(c));
  if (eligible.length === 0) return kept(noneEligible(others.map(([, c]) => c)));

  const byMedian = eligible
    .map(([name, c]) => ({ name, c, gain: (def.median_us as number) / (c.median_us as number) - 1 }))
    .sort((a, b) => (a.c.median_us as number) - (b.c.median_us as number) || byText(a.name, b.name));
  const sampled = (name: string) => samples.get(name) ?? [];
  const judged = byMedian.map((x) => ({ ...x, why: refusal(op, dtype, x.name, x.c, def, { cand: sampled(x.name), def: sampled(defaultName) }, x.gain, gate, rows, pdlRows, pdl.has(x.name)) }));
  const winner = judged.find((x) => x.why === null);
  if (winner) return { choice: winner.name, reason: `picked ${winner.name}: ${percent(winner.gain)} over ${defaultName}` };
  return kept(judged[0]!.why as string);
}

/** Whose class default a record's problem has: the op's for bf16 and fp16 (one default takes both), the op's fp8 one for fp8. */
const defaultKey = (r: Pick<StoreRecord, 'op' | 'dtype'>) => (r.dtype === 'fp8' ? `${r.op} fp8` : r.op);

const problemKey = (r: StoreRecord) => `${r.dtype}\u0000${shapeId(r)}\u0000${r.rows}`;

/** The i-th geometric mean of the i-th uniform and i-th skewed sample, for as many pairs as both have. */
export function pairedGeomeans(uniform: readonly number[], skewed: readonly number[]): number[] {
  const n = Math.min(uniform.length, skewed.length);
  return uniform.slice(0, n).map((u, i) => Math.sqrt(u * skewed[i]!));
}

/**
 * One problem's pooled results, samples and floor, each candidate's records
 * pooled; for a moe problem timed under both routings, across them (the rule
 * above): the verdicts (status, parity, nodes) over both, the samples paired.
 */
function poolProblem(group: readonly StoreRecord[]): { pooled: Map<string, CandidateResult>; samples: Map<string, number[]>; floorUs: number | null } {
  const both = group.some((r) => r.routing === 'skewed');
  const byName = new Map<string, StoreRecord[]>();
  const floors: StoreRecord[] = [];
  for (const r of group) {
    // 'parity' records pool with the candidate's timings: their verdict counts, they add no samples.
    if (r.kind === 'floor') floors.push(r);
    else byName.set(r.candidate, [...(byName.get(r.candidate) ?? []), r]);
  }
  const samplesOf = (rs: readonly StoreRecord[]): number[] => {
    if (!both) return pooledSamples(rs);
    return pairedGeomeans(pooledSamples(rs.filter((r) => r.routing !== 'skewed')), pooledSamples(rs.filter((r) => r.routing === 'skewed')));
  };
  const samples = new Map([...byName].map(([name, rs]) => [name, samplesOf(rs)] as const));
  const pooled = new Map([...byName].sort(([a], [b]) => byText(a, b)).map(([name, rs]) => {
    const result = poolCandidate(rs);
    if (!both) return [name, result] as const;
    const xs = samples.get(name)!;
    const timed = xs.length > 0;
    return [name, { ...result, median_us: timed ? median(xs) : null, p25_us: timed ? quantile(xs, 0.25) : null, p75_us: timed ? quantile(xs, 0.75) : null, samples: xs.length }] as const;
  }));
  const floorMedian = (rs: readonly StoreRecord[]) => {
    const xs = rs.filter((r) => r.status === 'ok').flatMap((r) => r.samples_us);
    return xs.length > 0 ? median(xs) : null;
  };
  const uniformFloor = floorMedian(floors.filter((r) => r.routing !== 'skewed'));
  const skewedFloor = floorMedian(floors.filter((r) => r.routing === 'skewed'));
  const floorUs = !both ? uniformFloor : uniformFloor !== null && skewedFloor !== null ? Math.sqrt(uniformFloor * skewedFloor) : null;
  return { pooled, samples, floorUs };
}

/** Deterministic entry order: op, dtype, experts and top-k (moe), n, k, bucket. */
export function compareEntries(a: TableEntry, b: TableEntry): number {
  return byText(a.op, b.op) || byText(a.dtype, b.dtype) || byShape(a, b, byText) || a.bucket - b.bucket;
}

export type Promoted = { identity: Identity; entries: TableEntry[]; warnings: string[] };

/**
 * Applies the rule to every problem of the pooled records. Errors (one line):
 * no records, mixed identities, two class defaults for one op. Left out with a
 * warning, since the route keeps the default there anyway: problems of an op
 * with no default anywhere in the records, and problems with no candidate
 * timing record (parity checks or a floor alone).
 */
export function promote(records: readonly StoreRecord[], gate: number, pdlRows: number = DEFAULT_PDL_ROWS): Promoted | { error: string } {
  if (!(gate >= 0 && gate <= 1)) return { error: `gate must be within 0..1, got ${gate}` };
  if (!(Number.isInteger(pdlRows) && pdlRows >= 0)) return { error: `pdl rows must be a whole number >= 0, got ${pdlRows}` };
  const id = commonIdentity(records);
  if ('error' in id) return id;

  const defaults = new Map<string, Set<string>>();
  for (const r of records) {
    if (r.kind === 'candidate' && r.is_default) defaults.set(defaultKey(r), (defaults.get(defaultKey(r)) ?? new Set()).add(r.candidate));
  }
  for (const [op, names] of defaults) {
    if (names.size > 1) return { error: `op ${op} has ${names.size} class defaults (${[...names].sort().join(', ')}); expected exactly one` };
  }

  const groups = new Map<string, StoreRecord[]>();
  for (const r of records) {
    const key = problemKey(r);
    const list = groups.get(key);
    if (list) list.push(r);
    else groups.set(key, [r]);
  }

  const entries: TableEntry[] = [];
  const leftOut = new Map<string, number>();
  let untimed = 0;
  for (const group of groups.values()) {
    const head = group[0]!;
    // Parity checks (or a floor) alone: nothing was timed, so there is no choice to record.
    if (!group.some((r) => r.kind === 'candidate')) {
      untimed++;
      continue;
    }
    const defaultName = [...(defaults.get(defaultKey(head)) ?? [])][0];
    if (defaultName === undefined) {
      leftOut.set(defaultKey(head), (leftOut.get(defaultKey(head)) ?? 0) + 1);
      continue;
    }
    const { pooled, samples, floorUs } = poolProblem(group);
    const pdl = new Set(group.filter((r) => r.pdl).map((r) => r.candidate));
    const { choice, reason } = decide(head.op, defaultName, pooled, samples, gate, head.rows, pdlRows, pdl, head.dtype);
    entries.push({
      op: head.op,
      dtype: head.dtype,
      n: head.n,
      k: head.k,
      ...moeFields(head),
      bucket: head.rows,
      default: defaultName,
      choice,
      reason,
      floor_us: floorUs,
      candidates: Object.fromEntries(pooled),
    });
  }
  entries.sort(compareEntries);
  const warnings = [...leftOut].sort(([a], [b]) => byText(a, b)).map(([op, n]) => `op ${op}: no class default in the records; ${n} problem(s) left out (the route keeps the default there)`);
  if (untimed > 0) warnings.push(`${untimed} problem(s) have parity checks or a floor but no candidate timings; left out`);
  return { identity: id.identity, entries, warnings };
}
