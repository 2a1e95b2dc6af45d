// step-trace: the per-op timeline of serve-bench's decode step from
// bench/gpu/kernel-trace.c's trace (step-variants.sh TRACE_C writes one per
// model), each graph's ops against their read floor (lib/step-trace.ts).
// JSON lines on stdout, one per (graph, op); a Markdown table per graph on stderr.
//   tsx bench/gpu/step-trace.ts --trace logs/step-variants/trace-Llama-3.1-8B.txt --model Llama-3.1-8B
import { asUsage, EXIT, isMainModule, optionInt, optionText, parseWithCac, printJsonLine, runMain, say, scriptCli, UsageError, type OptionSpec } from '../../lib/cli.ts';
import * as opt from '../../lib/options.ts';
import { findModel } from '../../lib/models.ts';
import { dimsOf } from '../../lib/serve.ts';
import { opBytes, readTraceFile, timelineMarkdown, timelines } from '../../lib/step-trace.ts';

const OPTIONS = {
  trace: opt.trace(),
  model: { flag: '--model <name>', help: 'the preset serve-bench ran (required)' },
  context: { flag: '--context <n>', help: "serve-bench's --context", default: 256 },
  steps: { flag: '--steps <n>', help: "serve-bench's --steps (the KV length is the mean over them)", default: 8 },
  ceiling: { flag: '--ceiling <GB/s>', help: 'the measured read ceiling', default: 4597 },
  skip: { flag: '--skip <n>', help: "launches of each graph left out first (the first: clocks ramp)", default: 1 },
} satisfies Record<string, OptionSpec>;

export function main(argv: readonly string[]): number {
  const cli = scriptCli('step-trace', "the decode step's timeline per op, from a kernel trace", OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const args = asUsage(() => {
    const trace = optionText(o, 'trace');
    const model = optionText(o, 'model');
    if (!trace || !model) throw new Error('--trace and --model are required');
    const ceiling = Number(optionText(o, 'ceiling', OPTIONS.ceiling.default));
    if (!(ceiling > 0)) throw new Error('--ceiling must be a positive number of GB/s');
    return {
      trace,
      preset: findModel(model),
      context: optionInt(o, 'context', OPTIONS.context.default, 0, 1 << 20),
      steps: optionInt(o, 'steps', OPTIONS.steps.default, 1, 1 << 20),
      skip: optionInt(o, 'skip', OPTIONS.skip.default, 0, 1 << 20),
      ceiling,
    };
  });
  const kernels = readTraceFile(args.trace);
  const graphs = asUsage(() => timelines(kernels, args.skip));
  if (graphs.length === 0) throw new UsageError(`${args.trace}: no graph kernels`);
  const d = dimsOf(args.preset, { layers: args.preset.layers, maxBatch: 1, context: 0, maxNew: 1, dtype: 'bf16' });
  const len = args.context + (args.steps + 1) / 2;
  for (const g of graphs) {
    const bytes = opBytes(d, g.rows, len);
    for (const op of g.ops) {
      const b = bytes[op.op];
      printJsonLine({ kind: 'op', model: args.preset.name, graph: g.graph, rows: g.rows, kpick_linears: g.kpick_linears, step_us: g.step_us, ...op, floor_us: b === undefined ? null : b / (args.ceiling * 1e3) });
    }
    say(timelineMarkdown(g, bytes, args.ceiling, d.layers) + '\n');
  }
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('step-trace', () => main(process.argv.slice(2)));
