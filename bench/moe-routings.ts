// Benchmark: moe candidates under both routings a moe problem draws (uniform,
// and skewed: rows share a hot set of experts), against the read floor of the
// experts the rows read, each routing on its own line (the sweep's promote
// keeps only the geomean of the two per candidate). Timing only: parity is the
// sweep's and scripts/parity.ts's (both check both routings).
//   tsx bench/moe-routings.ts --candidates 'moe.mma.*,moe.blas' --rows 16,32,64,128
// One JSON line per (routing, rows, candidate) on stdout, a table on stderr.
import { EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, asUsage, UsageError, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { openKpick, type Routing } from '../lib/ffi.ts';
import { decodeLinears, findModel, parseRows } from '../lib/models.ts';
import { median } from '../lib/stats.ts';
import { selectCandidates } from '../lib/sweep.ts';
import { shapeText } from '../lib/shape-key.ts';
import { timeRounds } from '../lib/time-rounds.ts';

const ROUTINGS: readonly Routing[] = ['uniform', 'skewed'];
const OPTIONS = {
  model: { flag: '--model <name>', help: 'a moe model preset', default: 'Qwen3-30B-A3B' },
  rows: opt.rows('1,2,4,8,16,32,64,128'),
  candidates: opt.candidates(),
  samples: opt.samples(10),
  rounds: opt.rounds('rounds; every candidate and the floor interleaved in each', 3),
  copies: opt.copies(),
  backend: opt.backend(),
  json: opt.json('JSON lines on stdout (always on; kept for CLI consistency)'),
  quiet: opt.quiet('no table on stderr'),
} satisfies Record<string, OptionSpec>;

export async function main(argv: readonly string[]): Promise<number> {
  const cli = scriptCli('moe-routings', {
    summary: 'moe candidates under uniform and skewed routing, against the read floor',
    usage: '[--model name] [--rows list] [--candidates globs]',
    examples: ["tsx bench/moe-routings.ts --candidates 'moe.mma.*' --rows 32,128"],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const model = asUsage(() => findModel(optionText(o, 'model', OPTIONS.model.default)!));
  const rows = asUsage(() => parseRows(optionText(o, 'rows', OPTIONS.rows.default)!));
  const samples = optionInt(o, 'samples', OPTIONS.samples.default, 1, 10000);
  const rounds = optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000);
  const copies = optionInt(o, 'copies', OPTIONS.copies.default, 0, 4096);
  const quiet = o.quiet === true;
  const moes = decodeLinears(model).filter((l) => l.op === 'moe');
  if (moes.length === 0) throw new UsageError(`${model.name} has no moe block`);
  const kpick = openKpick(optionText(o, 'backend'));
  const cands = asUsage(() => selectCandidates(kpick.candidates().filter((c) => c.op === 'moe'), opt.candidateList(optionText(o, 'candidates'))));
  for (const l of moes) {
    for (const routing of ROUTINGS) {
      const problem = kpick.createProblem({ op: 'moe', dtype: 'bf16', n: l.n, k: l.k, experts: l.experts, topk: l.topk, routing, mMax: Math.max(...rows), copies, seed: 1 });
      try {
        for (const m of rows) {
          problem.setRows(m);
          const ok = cands.filter((c) => m >= c.rowsMin && m <= c.rowsMax && problem.supports(c.id));
          const t = timeRounds(problem, ok.map((c) => c.id), samples, rounds);
          const floor = median(t.floor);
          const read = new Set(problem.downloadExpertIds()).size;
          const line = ok.map((c, i) => ({ name: c.name, us: median(t.cands[i]!) })).sort((a, b) => a.us - b.us);
          for (const { name, us } of line) printJsonLine({ model: model.name, shape: shapeText(l), routing, rows: m, experts_read: read, candidate: name, us, floor_us: floor, over_floor: us / floor });
          if (!quiet) say(`${routing.padEnd(7)} M=${String(m).padEnd(3)} floor ${floor.toFixed(1).padStart(7)} us (${read} experts)  ` + line.map(({ name, us }) => `${name} ${(us / floor).toFixed(3)}`).join('  '));
        }
      } finally {
        problem.free();
      }
    }
  }
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('moe-routings', () => main(process.argv.slice(2)));
