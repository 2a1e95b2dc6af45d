// Benchmark: CPU bf16 GEMV at M=1 on a 4096x4096 weight against this machine's
// read bandwidth, both measured in this run with the same weight rotation.
// Target (foundation issue): some candidate reaches >= 60 % of the read floor's
// bandwidth. Usage: tsx bench/cpu-gemv.ts [--n 4096 --k 4096 --samples 31 --rounds 5]
// Prints a table on stderr and one JSON record on stdout (commit it under bench/results/).
import { cac } from 'cac';
import { execSync } from 'node:child_process';
import { openKpick } from '../lib/ffi.ts';
import { median, quantile } from '../lib/stats.ts';

const defaults = { n: 4096, k: 4096, samples: 31, rounds: 5, target: 0.6 };
const cli = cac('cpu-gemv');
cli.option('--n <n>', 'output rows of W', { default: defaults.n });
cli.option('--k <k>', 'reduction length', { default: defaults.k });
cli.option('--samples <s>', 'samples per candidate per round', { default: defaults.samples });
cli.option('--rounds <r>', 'rounds, candidates interleaved in each', { default: defaults.rounds });
cli.option('--target <t>', 'required fraction of the read bandwidth', { default: defaults.target });
cli.help();
const { options } = cli.parse();
if (options.help) process.exit(0);

const kp = openKpick('cpu');
const info = kp.info();
const problem = kp.createProblem({ op: 'linear', dtype: 'bf16', n: Number(options.n), k: Number(options.k), mMax: 1, seed: 1 });
const candidates = kp.candidates().filter((c) => c.op === 'linear' && problem.supports(c.id));
const samples = new Map<string, number[]>([['floor', []]]);
for (const c of candidates) samples.set(c.name, []);
for (let round = 0; round < Number(options.rounds); round++) {
  // rotate the order each round so drift hits every candidate alike
  const order = candidates.map((_, i) => candidates[(i + round) % candidates.length]!);
  samples.get('floor')!.push(...problem.timeFloor(Number(options.samples)));
  for (const c of order) samples.get(c.name)!.push(...problem.time(c.id, Number(options.samples)));
}
const bytes = Number(options.n) * Number(options.k) * 2 + Number(options.k) * 2 + Number(options.n) * 2;
const floorUs = median(samples.get('floor')!);
const rows = [...samples].map(([name, s]) => {
  const us = median(s);
  return { name, us, p25: quantile(s, 0.25), p75: quantile(s, 0.75), gbs: bytes / us / 1e3, ofFloor: floorUs / us };
});
const best = rows.filter((r) => r.name !== 'floor').sort((a, b) => a.us - b.us)[0]!;
for (const r of rows)
  process.stderr.write(`${r.name.padEnd(14)} ${r.us.toFixed(1).padStart(9)} us  ${r.gbs.toFixed(2).padStart(6)} GB/s  ${(100 * r.ofFloor).toFixed(1).padStart(5)} % of read floor\n`);
const met = best.ofFloor >= Number(options.target);
process.stderr.write(`best ${best.name}: ${(100 * best.ofFloor).toFixed(1)} % of the read bandwidth (target ${100 * Number(options.target)} %): ${met ? 'met' : 'MISSED'}\n`);
let commit = 'unknown';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {}
console.log(JSON.stringify({ bench: 'cpu-gemv', at: new Date().toISOString(), commit, device: info.device, identity: { backend: info.backend, arch: info.arch, runtime: info.runtime, compiler: info.compiler, space: info.space }, n: Number(options.n), k: Number(options.k), m: 1, dtype: 'bf16', copies: problem.copies, floor_us: floorUs, rows, best: best.name, best_of_floor: best.ofFloor, target: Number(options.target), met }));
problem.free();
process.exitCode = met ? 0 : 1;
