// Sharding a sweep: n processes (one per GPU, per Slurm array task, per
// Kubernetes index) each measure a part of the same plan. The partition is a
// pure function of the full plan, never of what a store already holds, so a
// resumed shard measures the same part it was given the first time.
//
// Units are (dtype, op, shape, rows) groups: what runSweep measures in one go.
// A unit's cost is the bytes of weight it reads per call times the timings it
// takes (the op's candidates plus the read floor): decode linears are bound by
// reading W. Units go longest first to the least loaded shard (ties: the lower
// shard), in an order fixed by the cost and then the unit's key. Greedy list
// scheduling bounds every shard's cost by total/n + the largest unit.
import type { Candidate, Dtype } from './ffi.ts';
import { linearsForDtype, type Linear } from './models.ts';
import { takesDtype, type Bucket } from './schema.ts';
import { shapeText, weightBytes as shapeWeightBytes } from './shape-key.ts';

export interface Shard {
  /** 0-based, < count */
  index: number;
  count: number;
}

/** More shards than this is a typo, not a cluster. */
export const MAX_SHARDS = 4096;

const USAGE = 'i/n with n in 1..' + MAX_SHARDS + ' and i in 0..n-1 (0-based), e.g. --shard 0/2';

/** "1/4" -> { index: 1, count: 4 }; plain decimal digits only (no sign, hex or exponent). */
export function parseShard(text: string): Shard {
  const m = /^(\d{1,6})\/(\d{1,6})$/.exec(text);
  if (!m) throw new Error(`--shard must be ${USAGE}; got '${text}'`);
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1 || count > MAX_SHARDS) throw new Error(`--shard ${text}: n must be in 1..${MAX_SHARDS}`);
  if (index >= count) throw new Error(`--shard ${text}: i must be in 0..${count - 1} (shards are 0-based)`);
  return { index, count };
}

/**
 * argv with `--shard -1/2` joined into `--shard=-1/2`: the option parser
 * would read "-1/2" as flags, and the user should hear why the value is bad.
 */
export function joinShardValue(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const next = argv[i + 1];
    if (argv[i] === '--shard' && next !== undefined && /^-\d/.test(next)) {
      out.push(`--shard=${next}`);
      i++;
    } else out.push(argv[i] as string);
  }
  return out;
}

/** "shard1of2": how a shard names its store files (and its store lock). */
export function shardTag(shard: Shard): string {
  return `shard${shard.index}of${shard.count}`;
}

/**
 * Could writers of these two names (lib/store.ts writerKey: "sweep",
 * "sweep-shard1of2") measure the same unit? Then they must not write one
 * store at once. An unsharded sweep overlaps every shard of its prefix; two
 * shards of one partition (same n) overlap only when they are the same shard;
 * shards of different n cut the plan differently, so they overlap.
 */
export function writersOverlap(a: string, b: string): boolean {
  const parse = (key: string) => {
    const m = /^(.*)-shard(\d+)of(\d+)$/.exec(key);
    return m ? { prefix: m[1], index: Number(m[2]), count: Number(m[3]) } : { prefix: key, index: -1, count: 0 };
  };
  const x = parse(a);
  const y = parse(b);
  if (x.prefix !== y.prefix) return false;
  if (x.count === 0 || y.count === 0 || x.count !== y.count) return true;
  return x.index === y.index;
}

export interface Unit {
  dtype: Dtype;
  linear: Linear;
  rows: Bucket;
  /** stable text key: dtype:op:NxK:rows */
  key: string;
  /** weight bytes read per call x timings (candidates of the op + the floor) */
  cost: number;
}

/** Bytes of weight one call reads at most (lib/shape-key.ts; a moe call at these rows). */
export function weightBytes(linear: Pick<Linear, 'op' | 'n' | 'k' | 'experts' | 'topk'>, rows = 1): number {
  return shapeWeightBytes(linear, rows);
}

export function unitKey(dtype: Dtype, linear: Pick<Linear, 'op' | 'n' | 'k' | 'experts' | 'topk'>, rows: number): string {
  return `${dtype}:${linear.op}:${shapeText(linear).replace(/ /g, ':')}:${rows}`;
}

/** Every unit of the full plan, in plan order (dtype, linear, rows). */
export function planUnits(
  plan: { dtypes: readonly Dtype[]; linears: readonly Linear[]; rows: readonly Bucket[]; candidates: readonly { op: Candidate['op']; numeric?: Candidate['numeric'] }[] },
): Unit[] {
  const units: Unit[] = [];
  for (const dtype of plan.dtypes) {
    for (const linear of linearsForDtype(plan.linears, dtype)) {
      const timings = plan.candidates.filter((c) => c.op === linear.op && takesDtype(c, dtype)).length + 1;
      for (const rows of plan.rows) {
        const bytes = dtype === 'fp8' ? weightBytes(linear, rows) / 2 : weightBytes(linear, rows); // fp8 reads a byte a weight
        units.push({ dtype, linear, rows, key: unitKey(dtype, linear, rows), cost: bytes * timings });
      }
    }
  }
  return units;
}

/** The units split into count shards (index i holds shard i's keys), longest first to the least loaded. */
export function partition(units: readonly Unit[], count: number): { keys: Set<string>[]; cost: number[] } {
  if (!(Number.isInteger(count) && count >= 1)) throw new Error(`shard count must be a positive integer, got ${count}`);
  const keys = Array.from({ length: count }, () => new Set<string>());
  const cost = Array.from({ length: count }, () => 0);
  const seen = new Set<string>();
  const order = [...units].sort((a, b) => b.cost - a.cost || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const unit of order) {
    if (seen.has(unit.key)) throw new Error(`unit ${unit.key} appears twice in the plan`);
    seen.add(unit.key);
    let least = 0;
    for (let s = 1; s < count; s++) if ((cost[s] as number) < (cost[least] as number)) least = s;
    (keys[least] as Set<string>).add(unit.key);
    cost[least] = (cost[least] as number) + unit.cost;
  }
  return { keys, cost };
}

/** The keys of the units one shard measures. */
export function shardKeys(units: readonly Unit[], shard: Shard): Set<string> {
  return partition(units, shard.count).keys[shard.index] as Set<string>;
}
