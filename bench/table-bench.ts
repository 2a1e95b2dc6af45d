// Benchmark: the table's route against the class default (blaslt on a GPU) and
// the per-shape read floor, measured afresh in one run (not read back from the
// sweep's store, so a lucky sweep sample cannot flatter a pick).
//   tsx bench/table-bench.ts [--model Llama-3.1-8B,Qwen3-8B,...] [--rows 1,2,...,128] [--table file]
// Per shape and rows: the pick, its time, the default's time, the floor, and the
// ratios; then a summary line per rows group with the issue's targets. JSON
// lines on stdout (one per shape/rows, then the summaries), a table on stderr.
import { execSync } from 'node:child_process';
import { EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../lib/cli.ts';
import { loadKpick, type Problem } from '../lib/ffi.ts';
import { decodeLinears, findModel, parseDtypes, parseRows, uniqueShapes, type Linear } from '../lib/models.ts';
import { buildOf, loadRoute } from '../lib/route.ts';
import { geomean, median } from '../lib/stats.ts';
import { defaultTablePath } from '../lib/table.ts';

const PRESETS = 'Llama-3.1-8B,Qwen3-8B,Qwen3-4B,Qwen3-1.7B,Qwen3-0.6B';
const OPTIONS = {
  model: { flag: '--model <list>', help: 'model presets, comma separated', default: PRESETS },
  rows: { flag: '--rows <list>', help: 'rows buckets M', default: '1,2,4,8,16,32,64,128' },
  dtype: { flag: '--dtype <name>', help: 'bf16 or fp16', default: 'bf16' },
  table: { flag: '--table <file>', help: "table to route through (default: this machine's)" },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables', default: 'tables' },
  samples: { flag: '--samples <n>', help: 'timings per candidate per round', default: 10 },
  rounds: { flag: '--rounds <n>', help: 'rounds; pick, default and floor interleaved in each', default: 5 },
  copies: { flag: '--copies <n>', help: 'rotating weight copies; 0: the library picks > 8x the LLC', default: 0 },
  backend: { flag: '--backend <name>', help: 'cpu | cuda | hip' },
  json: { flag: '--json', help: 'JSON lines on stdout (always on; kept for CLI consistency)' },
  quiet: { flag: '--quiet', help: 'no table on stderr' },
} satisfies Record<string, OptionSpec>;

/** The issue's targets, as ratios measured in one run. */
const TARGETS = { smallGeomean: 1.3, rows1Geomean: 1.4, smallFloor: 1.1, worst: 0.98 };
const SMALL = (m: number) => m <= 16;

interface Row {
  op: string; dtype: string; n: number; k: number; rows: number; names: string;
  pick: string; default: string; pick_us: number; default_us: number; floor_us: number;
  speedup: number; pick_over_floor: number;
}

function timeRounds(problem: Problem, ids: number[], samples: number, rounds: number): { cands: number[][]; floor: number[] } {
  const cands = ids.map(() => [] as number[]);
  const floor: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // rotate the order each round so drift hits everything alike
    const order = [...ids.keys(), -1].map((_, i, all) => all[(i + r) % all.length]!);
    for (const i of order) {
      if (i < 0) floor.push(...problem.timeFloor(samples));
      else cands[i]!.push(...problem.time(ids[i]!, samples));
    }
  }
  return { cands, floor };
}

export async function main(argv: readonly string[]): Promise<number> {
  const cli = scriptCli('table-bench', {
    summary: "the table's route vs the class default and the read floor, measured afresh in one run",
    usage: '[--model list] [--rows list] [--table file]',
    examples: ['tsx bench/table-bench.ts --backend cuda > bench/results/table-bench.jsonl', 'tsx bench/table-bench.ts --model Qwen3-0.6B --rows 1,4'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const models = (optionText(o, 'model', OPTIONS.model.default) ?? PRESETS).split(',').map((m) => findModel(m.trim()));
  const rows = parseRows(optionText(o, 'rows', OPTIONS.rows.default)!);
  const [dtype] = parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default)!);
  const samples = optionInt(o, 'samples', OPTIONS.samples.default, 1, 10000);
  const rounds = optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000);
  const copies = optionInt(o, 'copies', OPTIONS.copies.default, 0, 4096);
  const backend = optionText(o, 'backend');
  if (dtype === undefined) throw new UsageError('--dtype needs one of bf16, fp16');

  const kpick = loadKpick(backend === undefined ? {} : { backend });
  const build = buildOf(kpick);
  const tableFile = optionText(o, 'table') ?? defaultTablePath(optionText(o, 'tablesDir', OPTIONS.tablesDir.default)!, build.identity);
  const route = loadRoute(tableFile, build);
  say(route.verdict.line);
  if (!route.verdict.used) say('table-bench: no table in use: every pick is the default');
  const ids = new Map(kpick.candidates().map((c) => [c.name, c.id]));

  // shapes shared by several presets are measured once, named for all of them
  const shapes = new Map<string, { linear: Linear; names: string[] }>();
  for (const model of models) {
    for (const l of uniqueShapes(decodeLinears(model))) {
      const key = `${l.op}/${l.n}/${l.k}`;
      const seen = shapes.get(key);
      if (seen) seen.names.push(`${model.name}:${l.name}`);
      else shapes.set(key, { linear: l, names: [`${model.name}:${l.name}`] });
    }
  }

  const out: Row[] = [];
  for (const { linear, names } of shapes.values()) {
    const problem = kpick.createProblem({ op: linear.op, dtype, n: linear.n, k: linear.k, mMax: Math.max(...rows), copies, seed: 1 + out.length });
    try {
      for (const m of rows) {
        problem.setRows(m);
        const pick = route.lookup(linear.op, dtype, linear.n, linear.k, m);
        const def = route.defaultOf(linear.op);
        if (pick === null || def === null) throw new Error(`no candidate for ${linear.op} ${linear.n}x${linear.k} m=${m}`);
        const timed = [...new Set([pick, def])].map((name) => ids.get(name)!);
        const t = timeRounds(problem, timed, samples, rounds);
        const us = (name: string) => median(t.cands[timed.indexOf(ids.get(name)!)]!);
        const row: Row = {
          op: linear.op, dtype, n: linear.n, k: linear.k, rows: m, names: names.join(' '),
          pick, default: def, pick_us: us(pick), default_us: us(def), floor_us: median(t.floor),
          speedup: us(def) / us(pick), pick_over_floor: us(pick) / median(t.floor),
        };
        out.push(row);
        printJsonLine({ kind: 'shape', ...row });
        if (!o.quiet) {
          say(`${`${linear.op} ${linear.n}x${linear.k}`.padEnd(20)} M=${String(m).padEnd(3)} ${pick.padEnd(22)} ${row.pick_us.toFixed(2).padStart(9)} us  ` +
            `${def} ${row.default_us.toFixed(2).padStart(9)} us  floor ${row.floor_us.toFixed(2).padStart(9)} us  ` +
            `x${row.speedup.toFixed(3)} vs default  ${row.pick_over_floor.toFixed(3)} of floor`);
        }
      }
    } finally {
      problem.free();
    }
  }

  const groups: [string, (r: Row) => boolean][] = [
    ['rows 1-16', (r) => SMALL(r.rows)],
    ['rows 32-128', (r) => !SMALL(r.rows)],
    ...rows.map((m): [string, (r: Row) => boolean] => [`rows ${m}`, (r) => r.rows === m]),
  ];
  for (const [label, inGroup] of groups) {
    const g = out.filter(inGroup);
    if (g.length === 0) continue;
    const summary = {
      kind: 'summary', group: label, shapes: g.length,
      geomean_speedup: geomean(g.map((r) => r.speedup)),
      worst_speedup: Math.min(...g.map((r) => r.speedup)),
      geomean_pick_over_floor: geomean(g.map((r) => r.pick_over_floor)),
    };
    printJsonLine(summary);
    say(`${label.padEnd(12)} ${String(g.length).padStart(3)} shapes: geomean x${summary.geomean_speedup.toFixed(3)} vs default, worst x${summary.worst_speedup.toFixed(3)}, pick/floor geomean ${summary.geomean_pick_over_floor.toFixed(3)}`);
  }
  const verdicts = targetVerdicts(out);
  for (const v of verdicts) say(`target ${v.met ? 'met' : 'MISSED'}: ${v.what}: ${v.value.toFixed(3)} (want ${v.want})`);
  printJsonLine({ kind: 'targets', verdicts, device: build.identity.device, identity: build.identity, table: tableFile, commit: gitCommit(), at: new Date().toISOString() });
  return EXIT.ok;
}

function targetVerdicts(rows: Row[]) {
  const small = rows.filter((r) => SMALL(r.rows));
  const one = rows.filter((r) => r.rows === 1);
  const large = rows.filter((r) => !SMALL(r.rows));
  const v: { what: string; value: number; want: string; met: boolean }[] = [];
  if (small.length > 0) {
    const g = geomean(small.map((r) => r.speedup));
    v.push({ what: 'rows 1-16 geomean speedup vs default', value: g, want: `>= ${TARGETS.smallGeomean}`, met: g >= TARGETS.smallGeomean });
    const w = Math.min(...small.map((r) => r.speedup));
    v.push({ what: 'rows 1-16 worst shape vs default', value: w, want: `>= ${TARGETS.worst}`, met: w >= TARGETS.worst });
    const f = geomean(small.map((r) => r.pick_over_floor));
    v.push({ what: 'rows 1-16 pick time over read floor, geomean', value: f, want: `<= ${TARGETS.smallFloor}`, met: f <= TARGETS.smallFloor });
  }
  if (one.length > 0) {
    const g = geomean(one.map((r) => r.speedup));
    v.push({ what: 'rows 1 geomean speedup vs default', value: g, want: `>= ${TARGETS.rows1Geomean}`, met: g >= TARGETS.rows1Geomean });
  }
  if (large.length > 0) {
    const w = Math.min(...large.map((r) => r.speedup));
    v.push({ what: 'rows 32-128 worst shape vs default', value: w, want: `>= ${TARGETS.worst}`, met: w >= TARGETS.worst });
  }
  return v;
}

function gitCommit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

if (isMainModule(import.meta.url)) void runMain('table-bench', () => main(process.argv.slice(2)));
