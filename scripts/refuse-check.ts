// refuse-check: would this table be used here? One line on stderr: what would
// be loaded (entries kept, entries dropped and why) or why it is refused.
//   tsx scripts/refuse-check.ts [--table file] [--backend cpu|cuda|hip] [--json]
// The table defaults to tables/<arch>/<device>/decode_gemm.json of the library
// loaded. When the compact form (decode_gemm.route) lies beside a JSON table,
// the C route (what an engine loads) must give the same verdict, or the
// check fails: a stale compact table would route an engine differently.
// Exit 0 when the table would be used; 3 when it would not (refused, or no
// table: the defaults); 2 on bad usage or no loadable library.
import * as fs from 'node:fs';
import { asUsage, EXIT, isMainModule, optionText, parseWithCac, printJsonLine, runMain, say, UsageError, scriptCli, type OptionSpec } from '../lib/cli.ts';
import { BACKENDS, parseBackend, KpickLoadError, loadKpick, NativeRoute, type Kpick } from '../lib/ffi.ts';
import type { Build, Verdict } from '../lib/guard.ts';
import { buildOf, loadRoute, routePathFor } from '../lib/route.ts';
import { defaultTablePath } from '../lib/table.ts';

const OPTIONS = {
  table: { flag: '--table <file>', help: 'table to check: decode_gemm.json, or a compact decode_gemm.route (default: tables/<arch>/<device>/decode_gemm.json of the library loaded)' },
  tablesDir: { flag: '--tables-dir <dir>', help: 'root of the per-device tables, for the default --table', default: 'tables' },
  backend: { flag: '--backend <name>', help: `library to check against: ${BACKENDS.join(', ')} (default: $KPICK_BACKEND, else the first GPU build that loads, else cpu)` },
  json: { flag: '--json', help: 'the verdict as one JSON line on stdout' },
  quiet: { flag: '--quiet', help: 'say nothing when the table is used (refusals still print their line)' },
} satisfies Record<string, OptionSpec>;

export interface RefuseCheckArgs {
  table: string | null;
  tablesDir: string;
  backend: string | null;
  json: boolean;
  quiet: boolean;
}

function makeCli() {
  return scriptCli('refuse-check', {
    summary: 'would this table be used here? exit 0, or one line why not (exit 3)',
    usage: '[--table file] [--backend cpu|cuda|hip] [--json] [--quiet]',
    examples: ['tsx scripts/refuse-check.ts', 'tsx scripts/refuse-check.ts --table tables/sm_90/nvidia-h200/decode_gemm.json --backend cuda --json'],
  }, OPTIONS);
}

/** Parses argv (without node and the script); null when --help was printed; throws UsageError. */
export function parseArgs(argv: readonly string[]): RefuseCheckArgs | null {
  const options = parseWithCac(makeCli(), argv);
  if (options === null) return null;
  const backend = asUsage(() => parseBackend(optionText(options, 'backend'))) ?? null;
  const table = optionText(options, 'table') ?? null;
  if (table === '') throw new UsageError('--table needs a file');
  return {
    table,
    tablesDir: optionText(options, 'tablesDir', OPTIONS.tablesDir.default) ?? OPTIONS.tablesDir.default,
    backend,
    json: options.json === true,
    quiet: options.quiet === true,
  };
}

function openLibrary(backend: string | null): Kpick {
  try {
    return loadKpick(backend === null ? {} : { backend });
  } catch (err) {
    if (err instanceof KpickLoadError) throw new UsageError(err.message);
    throw err;
  }
}

/** The C route's verdict on `file`, as an engine would get it; the route is left without a table. */
function nativeVerdict(kpick: Kpick, file: string): { line: string; used: boolean; kept: number; dropped: number } {
  const native = new NativeRoute(kpick);
  native.load(file);
  const result = { line: native.verdict(), ...native.status() };
  native.load(null);
  return result;
}

/** The C route on the compact form must keep and drop what the TS guard does on `ts`'s table. */
function routeDisagreement(ts: Verdict, c: { used: boolean; kept: number; dropped: number; line: string }, routeFile: string): string | null {
  const tsKept = ts.kind === 'used' ? ts.kept.length : 0;
  const tsDropped = ts.kind === 'used' ? ts.dropped.length : 0;
  if (c.used === ts.used && c.kept === tsKept && c.dropped === tsDropped) return null;
  return `kpick: the compact table ${routeFile} disagrees with the JSON (an engine would get: ${c.line.replace(/^kpick: /, '')}); run promote again`;
}

function jsonOf(file: string, verdict: Verdict, route: { file: string; line: string } | null, build: Build) {
  return {
    table: file,
    kind: verdict.kind,
    used: verdict.used,
    line: verdict.line,
    kept: verdict.kind === 'used' ? verdict.kept.length : 0,
    dropped: verdict.kind === 'used' ? verdict.dropped : [],
    route,
    identity: build.identity,
  };
}

export function main(argv: readonly string[]): number {
  const args = parseArgs(argv);
  if (args === null) return EXIT.ok;
  const kpick = openLibrary(args.backend);
  const build = buildOf(kpick);
  const file = args.table ?? defaultTablePath(args.tablesDir, build.identity);
  const verdict = loadRoute(file, build, process.env).verdict;
  if (!verdict.used || !args.quiet) say(verdict.line);
  let exit: number = verdict.used ? EXIT.ok : EXIT.refused;

  // What an engine loads: the compact file itself, or the one beside a JSON table.
  const routeFile = file.endsWith('.route') ? file : routePathFor(file);
  let route: { file: string; line: string } | null = null;
  if (file.endsWith('.route') || (verdict.used && fs.existsSync(routeFile))) {
    const c = nativeVerdict(kpick, routeFile);
    route = { file: routeFile, line: c.line };
    const differs = routeDisagreement(verdict, c, routeFile);
    if (differs) {
      say(differs);
      exit = EXIT.refused;
    }
  } else if (verdict.used && !args.quiet) {
    say(`kpick: no compact table at ${routeFile}: an engine on the C route would use the defaults; run promote again`);
  }
  if (args.json) printJsonLine(jsonOf(file, verdict, route, build));
  return exit;
}

if (isMainModule(import.meta.url)) void runMain('refuse-check', () => main(process.argv.slice(2)));
