// Tables for the guard, route and refuse-check tests. The base table is real:
// a sweep of this build on tiny shapes (lib/sweep.ts), promoted by the team's
// rule (lib/table.ts), so its identity, space, timings and parity are what this
// machine and build give, not numbers written here.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DEFAULT_BUILD_DIR, loadKpick, NativeRoute, takesDtype, type Problem } from '../../lib/ffi.ts';
import { moeCallOf } from './moe-call.ts';
import type { Build } from '../../lib/guard.ts';
import type { Linear } from '../../lib/models.ts';
import { buildOf, compactRouteText, sha256Hex } from '../../lib/route.ts';
import { BUCKETS, MAX_ROWS, type CandidateResult, type Dtype, type Op, type StoreRecord, type Table, type TableEntry } from '../../lib/schema.ts';
import { runSweep } from '../../lib/sweep.ts';
import { buildTable, tableText } from '../../lib/table.ts';

/**
 * The production CPU library (the space an engine gets); or $KPICK_LIB (say, a
 * sanitizer build) or $KPICK_BACKEND's build: the route suites run unchanged
 * against build/libkpick-cuda.so on a GPU machine (bench/gpu/pipeline.sh abi).
 */
export const kpick = process.env.KPICK_LIB || process.env.KPICK_BACKEND ? loadKpick() : loadKpick({ lib: path.join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
export const build: Build = buildOf(kpick);
/** The C route of that library (process-wide state: every test loads what it needs). */
export const native = new NativeRoute(kpick);
/** A GPU build: kpick_linear takes device memory (DeviceBuffers), not host arrays. */
export const onDevice = build.identity.backend !== 'cpu';
/** Does this build compute fp8 (the CPU and CUDA do; HIP has no fp8 matmul for the W8A8 default, so no fp8 row)? */
export const fp8Here = build.candidates.some((c) => c.available && takesDtype(c, 'fp8'));
/** The dtypes of the real table: fp8 too where the build computes it. */
export const TABLE_DTYPES: readonly Dtype[] = fp8Here ? ['bf16', 'fp16', 'fp8'] : ['bf16', 'fp16'];

/** The class default of op in this build: what a miss runs. */
export function headOf(op: Op, dtype: Dtype = 'bf16'): string {
  const head = build.candidates.find((c) => c.op === op && takesDtype(c, dtype) && c.isDefault && c.available);
  if (!head) throw new Error(`this build has no class default for ${op} ${dtype}`);
  return head.name;
}

/**
 * Candidates of op that any entry may choose: available, not the default, not
 * stack-bound, taking rows 1..MAX_ROWS; those whose output is not byte-identical to
 * the default's first (a wrong dispatch shows in the bytes), then space order.
 */
export function othersOf(op: Op, dtype: Dtype = 'bf16'): string[] {
  const head = headOf(op, dtype);
  const all = kpick.candidates().filter((c) => c.op === op && takesDtype(c, dtype) && c.available && !c.isDefault && !c.stackBound && c.rowsMin === 1 && c.rowsMax === MAX_ROWS);
  const names = [...all.filter((c) => c.bitwiseWith !== head), ...all.filter((c) => c.bitwiseWith === head)].map((c) => c.name);
  if (names.length < 2) throw new Error(`this build has fewer than two candidates for any ${op} entry`);
  return names;
}

/**
 * y of kpick_linear through the C route, on the memory this backend takes:
 * host arrays on the CPU (and device buffers too, when asked), device buffers
 * on a GPU; `graph`: the call captured into a graph and launched, as a decode
 * step runs it. y starts poisoned (0xFFFF), so an element never written shows.
 */
export function linearThroughRoute(
  op: Op,
  dtype: Dtype,
  x: Uint16Array,
  w: Uint16Array | Uint8Array,
  m: number,
  n: number,
  k: number,
  options: { graph?: boolean; buffers?: boolean } = {},
): Uint16Array {
  const y = new Uint16Array(m * n).fill(0xffff);
  if (!onDevice && !options.buffers && !options.graph) {
    native.linear(op, dtype, x, w, y, m, n, k);
    return y;
  }
  const bx = native.allocFrom(x.subarray(0, m * k));
  const bw = native.allocFrom(w);
  const by = native.allocFrom(y);
  try {
    if (options.graph) native.linearGraph(op, dtype, bx, bw, by, m, n, k, 2);
    else native.linear(op, dtype, bx, bw, by, m, n, k);
    return native.download(by, y);
  } finally {
    for (const b of [bx, bw, by]) native.free(b);
  }
}

/** Small enough that running every candidate on them costs microseconds. */
export const DENSE_SHAPES: readonly Linear[] = [
  { name: '32x64', op: 'linear', n: 32, k: 64 },
  { name: '48x80', op: 'linear', n: 48, k: 80 },
  { name: '24x64', op: 'gated', n: 24, k: 64 },
];
/** A moe shape, where this build has a moe default (a HIP build has none). */
export const MOE_SHAPES: readonly Linear[] = build.candidates.some((c) => c.op === 'moe' && c.isDefault && c.available)
  ? [{ name: 'experts', op: 'moe', n: 16, k: 32, experts: 4, topk: 2 }]
  : [];
export const SHAPES: readonly Linear[] = [...DENSE_SHAPES, ...MOE_SHAPES];

/** The candidate id the C route picks for a call of a shape (kpick_route_lookup, or _moe). */
export function nativeLookup(s: Pick<Linear, 'op' | 'n' | 'k' | 'experts' | 'topk'>, dtype: Dtype, m: number): number {
  return s.op === 'moe' ? native.lookupMoe(dtype, s.experts!, s.topk!, s.n, s.k, m) : native.lookup(s.op, dtype, s.n, s.k, m);
}

/** y of kpick_moe through the C route on a moe problem's own inputs at its active rows (host arrays: the CPU). */
export function moeThroughRoute(problem: Problem, dtype: Dtype): Uint16Array {
  const { mem, shape } = moeCallOf(problem);
  native.moe(dtype, mem, shape);
  return mem.y;
}

let real: Table | null = null;

/** A fresh copy of the real table of this build (swept once per process). */
export function realTable(): Table {
  if (!real) {
    const records: StoreRecord[] = [];
    const space = kpick.candidates();
    runSweep(
      kpick,
      {
        identity: build.identity,
        linears: SHAPES,
        dtypes: TABLE_DTYPES,
        rows: [...BUCKETS],
        candidates: space,
        space,
        samples: 3,
        rounds: 3,
        copies: 2,
        seed: 7,
        done: new Set(),
      },
      { record: (r) => records.push(r) },
    );
    const built = buildTable(records, { gate: 0.02, created: new Date() });
    if ('error' in built) throw new Error(`the real table could not be built: ${built.error}`);
    real = built.table;
  }
  return structuredClone(real);
}

/** candidates[name] of an entry, with the given overrides (a hand edit). */
export function candidateResult(over: Partial<CandidateResult> = {}): CandidateResult {
  return {
    median_us: 10,
    p25_us: 9.9,
    p75_us: 10.1,
    samples: 9,
    nodes: 1,
    params: {},
    parity: 'pass',
    rel_err: 1e-3,
    stack_bound: false,
    status: 'ok',
    ...over,
  };
}

/** The entry of `table` for a key; throws when it has none. */
export function entryOf(table: Table, op: TableEntry['op'], dtype: TableEntry['dtype'], n: number, k: number, bucket: number): TableEntry {
  const e = table.entries.find((x) => x.op === op && x.dtype === dtype && x.n === n && x.k === k && x.bucket === bucket);
  // (a moe entry is found by op and n, k alone: the tables here hold one moe shape)
  if (!e) throw new Error(`no entry ${op} ${dtype} ${n}x${k} bucket ${bucket}`);
  return e;
}

const made: string[] = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh folder under the system's temp folder, removed when the process exits. */
export function tempDir(prefix = 'kpick-route-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Runs fn with the environment variables set (undefined: unset), then restores them. */
export function withEnv<T>(vars: Record<string, string | undefined>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  apply(vars);
  try {
    return fn();
  } finally {
    apply(saved);
  }
}

/** The C route's verdict line on file (loaded with the current environment). */
export function nativeVerdict(file: string | null): string {
  native.load(file);
  return native.verdict();
}

/** The compact text promote writes beside tableText(table): bound to those JSON bytes. */
export function routeTextOf(table: Table): string {
  return compactRouteText(table, sha256Hex(tableText(table)));
}
