// What kpick would do on this machine, before anything is measured
// (scripts/info.ts): the library it finds and its backend, the identity that
// keys stores and tables, the builds present, the table that would load here
// and both readers' verdicts on it, free memory, and the environment knobs
// that change any of that; gathered once, then said as aligned lines.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { colorsFor } from './cli.ts';
import { DEFAULT_BUILD_DIR, KpickLoadError, openKpick, type Info, type Kpick } from './ffi.ts';
import { DISPATCH_KNOBS, type Verdict } from './guard.ts';
import { buildOf, routePathFor } from './route.ts';
import type { Identity } from './schema.ts';
import { defaultTablePath } from './table.ts';
import { readBoth } from './two-readers.ts';

/** Variables that choose the library or reroute dispatch: shown when set. */
export const ENV_KNOBS = ['KPICK_LIB', 'KPICK_BACKEND', ...DISPATCH_KNOBS.map((k) => k.name)] as const;

/** Which library info loads and where it looks for tables. */
export interface InfoQuery {
  backend: string | null;
  tablesDir: string;
}

export interface BuiltLibrary {
  /** "cpu", "cuda", "hip", or a variant such as "cpu-test" */
  name: string;
  path: string;
  /** a test-only build (deliberately wrong candidates): never for tuning */
  test: boolean;
}

/** The libkpick-*.so files of a build folder, by name; none when the folder is missing. */
export function builtLibraries(buildDir: string): BuiltLibrary[] {
  let names: string[];
  try {
    names = fs.readdirSync(buildDir);
  } catch {
    return [];
  }
  return names
    .map((file) => /^libkpick-(.+)\.so$/.exec(file))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ name: m[1]!, path: path.join(buildDir, m[0]), test: m[1]!.endsWith('-test') }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface InfoReport {
  library: { path: string; backend: string; abi: number; warp: number; units: number; pdl: boolean; llc_bytes: number } | null;
  load_error: string | null;
  identity: Identity | null;
  built: BuiltLibrary[];
  candidates: { total: number; available: number; defaults: string[] } | null;
  table: { path: string; exists: boolean; route_path: string; route_exists: boolean } | null;
  /** the TS guard's verdict on the JSON table */
  verdict: { kind: Verdict['kind']; used: boolean; line: string; kept: number; dropped: number } | null;
  /** the C route's verdict on the .route beside it (what an engine gets), and whether the two agree */
  route_verdict: { used: boolean; line: string; kept: number; dropped: number; agree: boolean; disagreement: string | null } | null;
  memory: { free_bytes: number; total_bytes: number } | null;
  env: Record<string, string>;
}

function setKnobs(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ENV_KNOBS) {
    const value = env[name];
    if (value !== undefined && value !== '') out[name] = value;
  }
  return out;
}

/** Everything info says, gathered once; a library that will not load leaves its parts null. */
export function gatherInfo(args: InfoQuery, env: NodeJS.ProcessEnv = process.env): InfoReport {
  const base = { built: builtLibraries(DEFAULT_BUILD_DIR), env: setKnobs(env) };
  let kpick: Kpick;
  try {
    kpick = openKpick(args.backend);
  } catch (err) {
    if (!(err instanceof KpickLoadError)) throw err;
    return { library: null, load_error: err.message, identity: null, candidates: null, table: null, verdict: null, route_verdict: null, memory: null, ...base };
  }
  const info: Info = kpick.info();
  const build = buildOf(kpick);
  const file = defaultTablePath(args.tablesDir, build.identity);
  const routeFile = routePathFor(file);
  const both = readBoth(kpick, build, file, env);
  const verdict = both.json.verdict;
  return {
    library: { path: kpick.path, backend: info.backend, abi: info.abi, warp: info.warp, units: info.units, pdl: info.pdl, llc_bytes: info.llcBytes },
    load_error: null,
    identity: build.identity,
    candidates: {
      total: build.candidates.length,
      available: build.candidates.filter((c) => c.available).length,
      defaults: kpick.candidates().filter((c) => c.isDefault && c.available).map((c) => `${c.op}${c.numeric === 'w16a16' ? '' : ' fp8'}: ${c.name}`),
    },
    table: { path: file, exists: fs.existsSync(file), route_path: routeFile, route_exists: fs.existsSync(routeFile) },
    verdict: {
      kind: verdict.kind,
      used: verdict.used,
      line: verdict.line,
      kept: verdict.kind === 'used' ? verdict.kept.length : 0,
      dropped: verdict.kind === 'used' ? verdict.dropped.length : 0,
    },
    route_verdict: { used: both.route.used, line: both.route.line, kept: both.route.kept, dropped: both.route.dropped, agree: both.agree, disagreement: both.disagreement },
    memory: { free_bytes: info.memFree, total_bytes: info.memTotal },
    ...base,
  };
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** The human view: aligned "label  value" lines. */
export function infoLines(r: InfoReport, colors: ReturnType<typeof colorsFor>): string[] {
  const c = colors;
  const row = (label: string, value: string) => `${c.bold(label.padEnd(10))}${value}`;
  const lines: string[] = [];
  const built = r.built.length === 0 ? `none in ${DEFAULT_BUILD_DIR} (run make)` : r.built.map((b) => (b.test ? `${b.name} (test build)` : b.name)).join(', ');
  if (r.library === null) {
    lines.push(row('library', c.red(`none loaded: ${r.load_error ?? ''}`)));
    lines.push(row('built', built));
  } else {
    const lib = r.library;
    lines.push(row('library', `${lib.path} (${lib.backend}, ABI ${lib.abi})`));
    const id = r.identity!;
    (Object.keys(id) as (keyof Identity)[]).forEach((key, i) => lines.push(row(i === 0 ? 'identity' : '', `${key.padEnd(9)}${id[key]}`)));
    lines.push(row('target', `${lib.units} units, warp ${lib.warp}, pdl ${lib.pdl ? 'yes' : 'no'}, last-level cache ${formatBytes(lib.llc_bytes)}`));
    if (r.memory) lines.push(row('memory', `${formatBytes(r.memory.free_bytes)} free of ${formatBytes(r.memory.total_bytes)}`));
    lines.push(row('built', built));
    if (r.candidates) lines.push(row('space', `${r.candidates.total} candidates, ${r.candidates.available} available here; defaults ${r.candidates.defaults.join(', ') || 'none'}`));
    if (r.table) {
      lines.push(row('table', `${r.table.path} ${r.table.exists ? '(present)' : c.dim('(none)')}`));
      lines.push(row('route', `${r.table.route_path} ${r.table.route_exists ? '(present)' : c.dim('(none)')}`));
    }
    if (r.verdict) lines.push(row('verdict', r.verdict.used ? c.green(r.verdict.line) : r.verdict.kind === 'missing' ? r.verdict.line : c.yellow(r.verdict.line)));
    if (r.route_verdict) {
      const rv = r.route_verdict;
      lines.push(row('C route', rv.used && rv.agree ? c.green(rv.line) : c.yellow(rv.line)));
      if (rv.disagreement) lines.push(row('', c.yellow(rv.disagreement)));
    }
  }
  const knobs = Object.entries(r.env);
  lines.push(row('env', knobs.length === 0 ? c.dim(`none of ${ENV_KNOBS.join(', ')} set`) : knobs.map(([k, v]) => `${k}=${v}`).join(' ')));
  return lines;
}
