// Benchmark: the table's route against the class default (blaslt on a GPU) and
// the per-shape read floor, measured afresh in one run (not read back from the
// sweep's store, so a lucky sweep sample cannot flatter a pick). Timed as the
// sweep times (kpick_time: on a GPU each call after a kernel that writes its
// input, as a decode step runs it; README, "How a candidate is timed").
//   tsx bench/table-bench.ts [--model Llama-3.1-8B,Qwen3-8B,...] [--rows 1,2,...,128] [--table file]
// Per shape and rows: the pick, its time, the default's time, the floor (a
// linear's or gated's: the median of its own and its neighbouring rows
// buckets' floors, as the floor reads the same weight at every rows), and the
// ratios; then the geomeans of both ratios per rows bucket and per rows group,
// and, per dense group and read-floor class, where its distance from the floor
// lies and how many picks are the default's own; then a verdict per target
// (lib/targets.ts). A moe shape is timed under both
// routings its problem draws (uniform, and skewed: rows share a hot set of
// experts), its floor streaming only the experts the active rows read; its
// summaries and targets are its own, printed when a moe shape was timed.
// JSON lines on stdout (kind shape, summary, miss, target, then one run line), a
// table on stderr. --from run.jsonl judges an earlier run's shape lines again
// (today's targets, no GPU): the same lines but the shape ones. A table that
// refuses itself here (stale, another build's) exits 3 with its verdict; where
// there is no table the defaults are timed, and the run says so.
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { asUsage, EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../lib/cli.ts';
import * as opt from '../lib/options.ts';
import { openKpick, type Routing } from '../lib/ffi.ts';
import { decodeLinears, findModel, linearsForDtype, parseDtypes, parseRows, uniqueShapes, type Linear } from '../lib/models.ts';
import { buildOf, loadRoute } from '../lib/route.ts';
import { median, neighbourMedians } from '../lib/stats.ts';
import { timeRounds } from '../lib/time-rounds.ts';
import { type Op } from '../lib/schema.ts';
import { moeFields, shapeId, shapeText } from '../lib/shape-key.ts';
import { defaultTablePath } from '../lib/table.ts';
import { fp8Summaries, fp8TargetVerdicts, missBreakdown, missTable, moeSummaries, moeTargetVerdicts, parseBenchLines, summaries, summaryTable, targetVerdicts, verdictLine, type PickedRow } from '../lib/targets.ts';

const PRESETS = 'Llama-3.1-8B,Qwen3-8B,Qwen3-4B,Qwen3-1.7B,Qwen3-0.6B';
/** the preset issue 14 sets the moe targets on */
const MOE_PRESET = 'Qwen3-30B-A3B';
/** both routings a moe problem draws: uniform as a trained router spreads rows, skewed where rows share experts */
const MOE_ROUTINGS: readonly Routing[] = ['uniform', 'skewed'];
const OPTIONS = {
  model: { flag: '--model <list>', help: 'model presets, comma separated', default: PRESETS },
  rows: opt.rows('1,2,4,8,16,32,64,128'),
  dtype: { flag: '--dtype <name>', help: 'bf16, fp16 or fp8 (fp8: judged by the fp8 targets, against the W8A8 default)', default: 'bf16' },
  table: { flag: '--table <file>', help: "table to route through (default: this machine's)" },
  from: { flag: '--from <file>', help: "judge an earlier run's JSON lines again (its shape lines), measuring nothing: no GPU needed" },
  tablesDir: opt.tablesDir(),
  samples: opt.samples(10),
  rounds: opt.rounds('rounds; pick, default and floor interleaved in each', 5),
  copies: opt.copies(),
  backend: opt.backend(),
  json: opt.json('JSON lines on stdout (always on; kept for CLI consistency)'),
  quiet: opt.quiet('no table on stderr'),
} satisfies Record<string, OptionSpec>;

interface Row {
  op: Op; dtype: string; n: number; k: number;
  /** op moe only: the shape's experts and top-k, the routing, and the distinct experts its active rows read (what the floor streams) */
  experts?: number; topk?: number; routing?: Routing; experts_read?: number;
  rows: number; names: string;
  /** floor_us: a linear's or gated's the median of its own and its neighbouring rows buckets' floors (the floor streams the
   * same weight at every rows, so a lone bucket's spike, 45 % in one run, is noise; the rise past rows 32 that the producer's
   * larger x brings is kept); a moe's its bucket's own (the experts read grow with the rows). floor_bucket_us: what this
   * bucket's rounds measured. */
  pick: string; default: string; pick_us: number; default_us: number; floor_us: number; floor_bucket_us: number;
  speedup: number; pick_over_floor: number;
}

export async function main(argv: readonly string[]): Promise<number> {
  const cli = scriptCli('table-bench', {
    summary: "the table's route vs the class default and the read floor, measured afresh in one run",
    usage: '[--model list] [--rows list] [--table file] | --from run.jsonl',
    examples: ['tsx bench/table-bench.ts --backend cuda > bench/results/table-bench.jsonl', 'tsx bench/table-bench.ts --model Qwen3-0.6B --rows 1,4', 'tsx bench/table-bench.ts --from logs/table-bench.jsonl > judged.jsonl'],
  }, OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const from = optionText(o, 'from');
  if (from !== undefined) {
    // a recorded run is judged as it was measured: the options of a measurement would be ignored, so refuse them
    const measuring = (Object.keys(OPTIONS) as (keyof typeof OPTIONS)[]).filter((k) => !['from', 'json', 'quiet'].includes(k) && o[k] !== undefined);
    if (measuring.length > 0) throw new UsageError(`--from judges a recorded run and measures nothing: drop ${measuring.map((k) => OPTIONS[k].flag.split(' ')[0]).join(', ')}`);
    return judgeRecorded(from, o.quiet === true);
  }
  const models = asUsage(() => (optionText(o, 'model', OPTIONS.model.default) ?? PRESETS).split(',').map((m) => findModel(m.trim())));
  const rows = asUsage(() => parseRows(optionText(o, 'rows', OPTIONS.rows.default)!));
  const dtypes = asUsage(() => parseDtypes(optionText(o, 'dtype', OPTIONS.dtype.default)!));
  const samples = optionInt(o, 'samples', OPTIONS.samples.default, 1, 10000);
  const rounds = optionInt(o, 'rounds', OPTIONS.rounds.default, 1, 1000);
  const copies = optionInt(o, 'copies', OPTIONS.copies.default, 0, 4096);
  const backend = optionText(o, 'backend');
  // one run is judged by one dtype's targets: a list would time its first alone
  if (dtypes.length !== 1) throw new UsageError('--dtype takes one type: bf16, fp16 or fp8');
  const dtype = dtypes[0]!;
  const { table, tablesDir } = asUsage(() => opt.tableChoice(o, OPTIONS.tablesDir.default!));

  const kpick = openKpick(backend);
  const build = buildOf(kpick);
  const tableFile = table ?? defaultTablePath(tablesDir, build.identity);
  const route = loadRoute(tableFile, build);
  // a table there that refuses itself has no route to time (as step-verify); no table at all times the defaults
  if (route.verdict.kind !== 'used' && route.verdict.kind !== 'missing') {
    say(`table-bench: nothing to time: ${route.verdict.line}`);
    return EXIT.refused;
  }
  say(route.verdict.line);
  if (!route.verdict.used) say('table-bench: no table in use: every pick is the default');
  const ids = new Map(kpick.candidates().map((c) => [c.name, c.id]));

  // shapes shared by several presets are measured once, named for all of them
  const shapes = new Map<string, { linear: Linear; names: string[] }>();
  const leftOut: string[] = [];
  for (const model of models) {
    for (const l of uniqueShapes([...linearsForDtype(decodeLinears(model), dtype)])) {
      // a build with no candidate of the op (a HIP build has no moe default and no fp8 row) cannot make its problem
      if (route.defaultOf(l.op, dtype) === null) {
        leftOut.push(`${model.name}:${l.name}`);
        continue;
      }
      const key = shapeId(l);
      const seen = shapes.get(key);
      if (seen) seen.names.push(`${model.name}:${l.name}`);
      else shapes.set(key, { linear: l, names: [`${model.name}:${l.name}`] });
    }
  }

  if (leftOut.length > 0) say(`table-bench: this build has no candidate for ${leftOut.join(', ')} in ${dtype}: left out`);
  const label = (l: Linear, routing: Routing | null) => `${l.op} ${shapeText(l)}${routing === null ? '' : ` ${routing}`}`;
  const width = Math.max(20, ...[...shapes.values()].map(({ linear }) => label(linear, linear.op === 'moe' ? 'uniform' : null).length));
  const out: Row[] = [];
  for (const { linear, names } of shapes.values()) {
    for (const routing of linear.op === 'moe' ? MOE_ROUTINGS : [null]) {
      const moe = routing === null ? {} : { experts: linear.experts, topk: linear.topk, routing };
      const problem = kpick.createProblem({ op: linear.op, dtype, n: linear.n, k: linear.k, mMax: Math.max(...rows), copies, seed: 1 + out.length, ...moe });
      const measured: Row[] = [];
      try {
        for (const m of rows) {
          problem.setRows(m);
          const pick = route.lookup(linear.op, dtype, linear.n, linear.k, m, linear.experts, linear.topk);
          const def = route.defaultOf(linear.op, dtype);
          if (pick === null || def === null) throw new Error(`no candidate for ${linear.op} ${shapeText(linear)} m=${m}`);
          const timed = [...new Set([pick, def])].map((name) => ids.get(name)!);
          const t = timeRounds(problem, timed, samples, rounds);
          const us = (name: string) => median(t.cands[timed.indexOf(ids.get(name)!)]!);
          const floor = median(t.floor);
          const row: Row = {
            op: linear.op, dtype, n: linear.n, k: linear.k,
            ...(routing === null ? {} : { ...moeFields(linear), routing, experts_read: new Set(problem.downloadExpertIds()).size }),
            rows: m, names: names.join(' '),
            pick, default: def, pick_us: us(pick), default_us: us(def), floor_us: floor, floor_bucket_us: floor,
            speedup: us(def) / us(pick), pick_over_floor: us(pick) / floor,
          };
          measured.push(row);
        }
      } finally {
        problem.free();
      }
      const floors = neighbourMedians(measured.map((r) => r.floor_bucket_us));
      for (const [i, row] of measured.entries()) {
        if (linear.op !== 'moe') Object.assign(row, { floor_us: floors[i]!, pick_over_floor: row.pick_us / floors[i]! });
        out.push(row);
        printJsonLine({ kind: 'shape', ...row });
        if (!o.quiet) {
          const read = row.experts_read === undefined ? '' : `  (${row.experts_read} experts read)`;
          say(`${label(linear, routing).padEnd(width)} M=${String(row.rows).padEnd(3)} ${row.pick.padEnd(22)} ${row.pick_us.toFixed(2).padStart(9)} us  ` +
            `${row.default} ${row.default_us.toFixed(2).padStart(9)} us  floor ${row.floor_us.toFixed(2).padStart(9)} us  ` +
            `x${row.speedup.toFixed(3)} vs default  ${row.pick_over_floor.toFixed(3)} of floor${read}`);
        }
      }
    }
  }

  const defaults = judge(out, dtype === 'fp8', o.quiet === true, models.map((m) => m.name));
  printJsonLine({ kind: 'run', shapes: shapes.size, models: models.map((m) => m.name), defaults, device: build.identity.device, identity: build.identity, table: tableFile, table_used: route.verdict.used, commit: gitCommit(), at: new Date().toISOString() });
  return EXIT.ok;
}

/** Summaries, the breakdown by read floor and the verdicts of measured rows (JSON lines, and a table on
 * stderr unless quiet), with notes where the run left out the presets the targets are set on. Returns
 * the defaults the rows were judged against. */
function judge(out: readonly PickedRow[], fp8: boolean, quiet: boolean, modelNames: readonly string[]): string[] {
  // an fp8 run answers to the fp8 targets (pick vs the W8A8 default, the fp8 read floor), not the dense ones
  const list = fp8 ? fp8Summaries(out) : summaries(out);
  const moeList = moeSummaries(out);
  for (const summary of [...list, ...moeList]) printJsonLine({ kind: 'summary', ...summary });
  // where each dense group's distance from the floor lies (issue 11 asks on which shapes a target is missed)
  const misses = fp8 ? [] : missBreakdown(out);
  for (const miss of misses) printJsonLine({ kind: 'miss', ...miss });
  const defaults = [...new Set(out.map((r) => r.default))].sort();
  if (!quiet && list.length + moeList.length > 0) {
    say(`ratios: vs default = default time / pick time (default: ${defaults.join(', ')}); pick/floor = pick time / read floor; geomeans`);
    if (list.length > 0) for (const line of summaryTable(list)) say(line);
    if (moeList.length > 0) {
      say(`${fp8 ? 'fp8 ' : ''}moe, both routings (${MOE_ROUTINGS.join(', ')}); floor = the experts the rows read${fp8 ? ' (codes and scales)' : ''}:`);
      for (const line of summaryTable(moeList)) say(line);
    }
  }
  if (!quiet && misses.length > 0) {
    say("by read floor: where each group's distance from the floor lies; on the default: the default or another algo of its BLAS's heuristic");
    for (const line of missTable(misses)) say(line);
  }
  // issue 14 sets the moe targets on bf16 experts: an fp8 run's moe rows are reported, not judged
  const verdicts = fp8 ? fp8TargetVerdicts(out) : [...targetVerdicts(out), ...moeTargetVerdicts(out)];
  for (const v of verdicts) {
    printJsonLine({ kind: 'target', ...v });
    say(verdictLine(v));
  }
  const measured = modelNames.join(', ');
  if (PRESETS.split(',').some((p) => !modelNames.includes(p))) say(`note: the targets are set on all five presets; this run measured ${measured}`);
  if (moeList.length > 0 && !fp8 && !modelNames.includes(MOE_PRESET)) say(`note: the moe targets are set on ${MOE_PRESET}; this run measured ${measured}`);
  return defaults;
}

/** --from: an earlier run's shape lines judged again, here, without a GPU: the same summaries, breakdown and
 * verdicts (the targets of today's lib/targets.ts), and a run line naming the file. */
function judgeRecorded(file: string, quiet: boolean): number {
  asUsage(() => opt.regularFile('--from', file));
  const rows = asUsage(() => parseBenchLines(file, readFileSync(file, 'utf8')));
  if (rows.length === 0) throw new UsageError(`--from ${file}: no shape lines (a table-bench run's JSON lines)`);
  const dtypes = [...new Set(rows.map((r) => r.dtype))];
  if (dtypes.length > 1) throw new UsageError(`--from ${file}: shape lines of several dtypes (${dtypes.join(', ')}): judge one run at a time`);
  // the presets a shape line names ("Llama-3.1-8B:qkv Qwen3-8B:qkv"), in the order first met
  const names = rows.flatMap((r) => r.names?.split(' ') ?? []);
  const models = [...new Set(names.map((n) => n.split(':')[0]!).filter((n) => n !== ''))];
  const defaults = judge(rows, dtypes[0] === 'fp8', quiet, models);
  printJsonLine({ kind: 'run', from: file, shapes: new Set(rows.map(shapeId)).size, models, defaults, commit: gitCommit(), at: new Date().toISOString() });
  return EXIT.ok;
}

function gitCommit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

if (isMainModule(import.meta.url)) void runMain('table-bench', () => main(process.argv.slice(2)));
