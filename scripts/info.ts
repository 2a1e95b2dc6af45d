// info: what kpick would do on this machine, before anything is measured: the
// library it finds and its backend, the identity that keys stores and tables,
// the builds present, the table that would load here and the guard's verdict
// on it, free memory, and the environment knobs that change any of that.
//   tsx scripts/info.ts [--backend cpu|cuda|hip] [--tables-dir tables] [--json]
// Exit 0 when a library loaded (whatever the verdict: refuse-check is the
// gate); 2 when none could be (a bad environment: what was tried is printed)
// or on bad usage. What it gathers and how it says it: lib/info.ts.
import { asUsage, colorsFor, EXIT, isMainModule, optionText, parseWithCac, printJsonLine, runMain, say, UsageError, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { BACKENDS, parseBackend } from '../lib/ffi.ts';
import { gatherInfo, infoLines, type InfoQuery } from '../lib/info.ts';
import * as opt from '../lib/options.ts';

const OPTIONS = {
  backend: { flag: '--backend <name>', help: `library to load: ${BACKENDS.join(', ')} (default: $KPICK_BACKEND, else the first GPU build that loads, else cpu; $KPICK_LIB wins)` },
  tablesDir: opt.tablesDir(),
  json: opt.json('everything as one JSON object on stdout'),
  quiet: opt.quiet("one line: the library and the table's verdict"),
} satisfies Record<string, OptionSpec>;

export interface InfoArgs extends InfoQuery {
  json: boolean;
  quiet: boolean;
}

function makeCli() {
  return scriptCli('info', {
    summary: 'what kpick would do on this machine: library, identity, builds, the table and its verdict, memory',
    usage: '[--backend cpu|cuda|hip] [--tables-dir tables] [--json]',
    examples: ['tsx scripts/info.ts', 'tsx scripts/info.ts --backend cpu --json | jq .verdict', 'KPICK_LIB=/opt/kpick/libkpick-hip.so tsx scripts/info.ts --tables-dir /srv/tables'],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help or --version was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): InfoArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null || options.version === true) return null;
  const backend = asUsage(() => parseBackend(optionText(options, 'backend'))) ?? null;
  const tablesDir = optionText(options, 'tablesDir', OPTIONS.tablesDir.default) as string;
  if (tablesDir === '') throw new UsageError('--tables-dir needs a folder');
  return { backend, tablesDir, json: options.json === true, quiet: options.quiet === true };
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const report = gatherInfo(args);
  if (args.json) printJsonLine(report);
  else if (args.quiet) {
    const library = report.library ? `${report.library.backend} ${report.library.path}` : `no library: ${report.load_error}`;
    say(report.verdict ? `${library}: ${report.verdict.line}` : library);
  }
  else for (const line of infoLines(report, colorsFor(process.stderr))) say(line);
  return report.library === null ? EXIT.usage : EXIT.ok;
}

if (isMainModule(import.meta.url)) void runMain('info', () => main(process.argv.slice(2)));
