// Synthetic store records for the promote, table and script tests. The timings
// here are made-up inputs to the rule, not measurements: evenly spread samples
// whose median and quartiles are known exactly, so a test can assert values.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v from 'valibot';
import { StoreRecord, STORE_VERSION, type Identity } from '../../lib/schema.ts';

export const SYNTHETIC_IDENTITY: Identity = {
  backend: 'cpu',
  arch: 'synthetic_arch',
  device: 'Synthetic Device 1',
  runtime: 'synthetic-runtime 1.0',
  blas: 'none',
  compiler: 'synthetic-cc 1.0 -O3',
  space: 'synthetic-space-token',
};

/**
 * `count` samples evenly spread over center·(1 ± spread), in a fixed shuffled
 * order. Median = center, p25 = center·(1 - spread/2), p75 = center·(1 + spread/2)
 * (linear quantiles of an odd count).
 */
export function evenSamples(center: number, spread: number, count = 9): number[] {
  const sorted = Array.from({ length: count }, (_, i) => center * (1 + spread * (count === 1 ? 0 : (2 * i) / (count - 1) - 1)));
  // Alternate low and high ends so the stored order is not already sorted.
  return sorted.map((_, i) => (i % 2 === 0 ? sorted[i / 2]! : sorted[count - 1 - (i - 1) / 2]!));
}

/** A valid StoreRecord: a timed, parity-passing 'linear' candidate unless overridden. */
export function syntheticRecord(over: Partial<StoreRecord> = {}): StoreRecord {
  const record: StoreRecord = {
    v: STORE_VERSION,
    kind: 'candidate',
    identity: { ...SYNTHETIC_IDENTITY },
    op: 'linear',
    dtype: 'bf16',
    n: 4096,
    k: 4096,
    rows: 1,
    candidate: 'plain',
    params: {},
    nodes_declared: 1,
    nodes: 1,
    is_default: false,
    stack_bound: false,
    pdl: false,
    status: 'ok',
    reason: '',
    samples_us: evenSamples(100, 0.02),
    copies: 8,
    parity: { status: 'pass', rel_err: 1e-3, bitwise: null, reason: '' },
    seed: 1,
    at: '2025-01-01T00:00:00.000Z',
    ...over,
  };
  return v.parse(StoreRecord, record);
}

/** The default 'plain' plus the given candidates, all on one problem. */
export function problem(defaultOver: Partial<StoreRecord>, others: Partial<StoreRecord>[], shared: Partial<StoreRecord> = {}): StoreRecord[] {
  return [
    syntheticRecord({ ...shared, candidate: 'plain', is_default: true, ...defaultOver }),
    ...others.map((o) => syntheticRecord({ ...shared, ...o })),
  ];
}

/** Writes records as one JSON-lines store file in `dir` (created). */
export function writeStoreFile(dir: string, name: string, records: readonly StoreRecord[]): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  fs.writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
}
