// peer-summary: serve-bench's rows and the PyTorch peer's (bench/peers/decode_step.py)
// joined into one line per (model, c), with the bandwidth limit of each step
// (lib/peer-summary.ts), written atomically as JSON lines; a Markdown table on stderr.
//   tsx bench/peers/summary.ts --serve logs/serve-Llama-3.1-8B.jsonl,... --peer logs/peer.jsonl[,...] \
//     --commit abc1234 --device "NVIDIA H200" --out peer-summary.jsonl
// Several peer files (runs of other calls) are joined: each arm counts its fastest run.
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { asUsage, EXIT, isMainModule, optionText, parseWithCac, runMain, say, scriptCli, UsageError, type OptionSpec } from '../../lib/cli.ts';
import { findModel } from '../../lib/models.ts';
import { buildSummary, parseLines, summaryMarkdown } from '../../lib/peer-summary.ts';
import { dimsOf } from '../../lib/serve.ts';
import { writeFileAtomic } from '../../lib/table.ts';

const OPTIONS = {
  serve: { flag: '--serve <files>', help: "serve-bench --json outputs, comma separated (required)" },
  peer: { flag: '--peer <files>', help: "decode_step.py's outputs, comma separated (required): each arm counts its fastest run" },
  commit: { flag: '--commit <hash>', help: 'the commit measured', default: 'unknown' },
  device: { flag: '--device <name>', help: "the device (default: the peer's)" },
  out: { flag: '--out <file>', help: 'where the summary goes (JSON lines)', default: 'peer-summary.jsonl' },
} satisfies Record<string, OptionSpec>;

function read(file: string): { name: string; text: string } {
  try {
    return { name: file, text: readFileSync(file, 'utf8') };
  } catch (err) {
    throw new UsageError(`${file}: cannot read (${(err as Error).message})`);
  }
}

export function main(argv: readonly string[]): number {
  const cli = scriptCli('peer-summary', 'kpick against its PyTorch peer, one line per (model, c)', OPTIONS);
  const o = parseWithCac(cli, argv);
  if (o === null) return EXIT.ok;
  const args = asUsage(() => {
    const serve = optionText(o, 'serve');
    const peer = optionText(o, 'peer');
    if (!serve || !peer) throw new Error('--serve and --peer are required');
    const out = optionText(o, 'out', OPTIONS.out.default) as string;
    if (existsSync(out) && !lstatSync(out).isFile()) throw new Error(`--out ${out} exists and is not a regular file`);
    const list = (text: string) => text.split(',').filter((s) => s !== '');
    return { serve: list(serve), peer: list(peer), out, commit: optionText(o, 'commit', OPTIONS.commit.default) as string, device: optionText(o, 'device') };
  });
  const parsed = asUsage(() => parseLines([...args.serve.map(read), ...args.peer.map(read)]));
  if (parsed.serve.length === 0) throw new UsageError('no serve-bench rows in --serve');
  const device = args.device ?? parsed.peer[0]?.device ?? parsed.ceiling?.device ?? 'unknown';
  const rows = asUsage(() =>
    buildSummary(parsed, (name, layers) => dimsOf(findModel(name), { layers, maxBatch: 1, context: 0, maxNew: 1, dtype: 'bf16' }), { commit: args.commit, device }),
  );
  const written = writeFileAtomic(args.out, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  if ('error' in written) throw new UsageError(written.error);
  say(summaryMarkdown(rows));
  say(`peer-summary: ${rows.length} lines to ${args.out}`);
  return EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('peer-summary', () => main(process.argv.slice(2)));
