// Benchmark: CPU bf16 GEMV at M=1 on a 4096x4096 weight against this machine's
// read bandwidth, both measured in this run with the same weight rotation.
// Target (foundation issue): some candidate reaches >= 60 % of the read floor's
// bandwidth. Usage: tsx bench/cpu-gemv.ts [--n 4096 --k 4096 --samples 31 --rounds 5]
// Prints a table on stderr and one JSON record on stdout (commit it under bench/results/).
import { execSync } from 'node:child_process';
import { EXIT, isMainModule, optionFraction, optionInt, parseWithCac, runMain, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { openKpick, problemOfInput } from '../lib/ffi.ts';
import { median, quantile } from '../lib/stats.ts';

const MAX_DIM = 1 << 24;
const OPTIONS = {
  n: { flag: '--n <n>', help: 'output rows of W', default: 4096 },
  k: { flag: '--k <k>', help: 'reduction length', default: 4096 },
  samples: { flag: '--samples <s>', help: 'samples per candidate per round', default: 31 },
  rounds: { flag: '--rounds <r>', help: 'rounds, candidates interleaved in each', default: 5 },
  target: { flag: '--target <t>', help: 'required fraction of the read bandwidth', default: 0.6 },
} satisfies Record<string, OptionSpec>;

export function main(argv: readonly string[]): number {
  const cli = scriptCli('cpu-gemv', {
    summary: 'CPU bf16 GEMV at M=1 against the read floor of the same run',
    usage: '[--n 4096 --k 4096 --samples 31 --rounds 5]',
    examples: ['tsx bench/cpu-gemv.ts', 'tsx bench/cpu-gemv.ts --n 8192 --k 8192 --samples 15'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const options = {
    n: optionInt(o, 'n', OPTIONS.n.default, 1, MAX_DIM),
    k: optionInt(o, 'k', OPTIONS.k.default, 1, MAX_DIM),
    samples: optionInt(o, 'samples', OPTIONS.samples.default, 1, 100000),
    rounds: optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000),
    target: optionFraction(o, 'target', OPTIONS.target.default),
  };

  const kp = openKpick('cpu');
  const info = kp.info();
  const problem = problemOfInput(kp, { op: 'linear', dtype: 'bf16', n: options.n, k: options.k, mMax: 1, seed: 1 });
  const candidates = kp.candidates().filter((c) => c.op === 'linear' && problem.supports(c.id));
  const samples = new Map<string, number[]>([['floor', []]]);
  for (const c of candidates) samples.set(c.name, []);
  for (let round = 0; round < options.rounds; round++) {
    // rotate the order each round so drift hits every candidate alike
    const order = candidates.map((_, i) => candidates[(i + round) % candidates.length]!);
    samples.get('floor')!.push(...problem.timeFloor(options.samples));
    for (const c of order) samples.get(c.name)!.push(...problem.time(c.id, options.samples));
  }
  const bytes = options.n * options.k * 2 + options.k * 2 + options.n * 2;
  const floorUs = median(samples.get('floor')!);
  const rows = [...samples].map(([name, s]) => {
    const us = median(s);
    return { name, us, p25: quantile(s, 0.25), p75: quantile(s, 0.75), gbs: bytes / us / 1e3, ofFloor: floorUs / us };
  });
  const best = rows.filter((r) => r.name !== 'floor').sort((a, b) => a.us - b.us)[0]!;
  for (const r of rows)
    process.stderr.write(`${r.name.padEnd(14)} ${r.us.toFixed(1).padStart(9)} us  ${r.gbs.toFixed(2).padStart(6)} GB/s  ${(100 * r.ofFloor).toFixed(1).padStart(5)} % of read floor\n`);
  const met = best.ofFloor >= options.target;
  process.stderr.write(`best ${best.name}: ${(100 * best.ofFloor).toFixed(1)} % of the read bandwidth (target ${100 * options.target} %): ${met ? 'met' : 'MISSED'}\n`);
  let commit = 'unknown';
  try {
    commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {}
  console.log(JSON.stringify({ bench: 'cpu-gemv', at: new Date().toISOString(), commit, device: info.device, identity: { backend: info.backend, arch: info.arch, runtime: info.runtime, compiler: info.compiler, space: info.space }, n: options.n, k: options.k, m: 1, dtype: 'bf16', copies: problem.copies, floor_us: floorUs, rows, best: best.name, best_of_floor: best.ofFloor, target: options.target, met }));
  problem.free();
  return met ? EXIT.ok : EXIT.failed;
}

if (isMainModule(import.meta.url)) void runMain('cpu-gemv', () => main(process.argv.slice(2)));
