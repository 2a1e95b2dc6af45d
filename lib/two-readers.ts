// One table, two readers: the TS guard on decode_gemm.json (what the scripts
// and serve-bench use) and the C route on decode_gemm.route through the loaded
// library (what an engine uses). refuse-check and info ask both; the table is
// good only when both use it and route every shape of it alike, bucket by
// bucket: otherwise the first disagreement, in one line.
import type { Kpick } from './ffi.ts';
import { NativeRoute } from './ffi.ts';
import { guardTable, type Build, type Env, type Verdict } from './guard.ts';
import { guardCompactRoute, jsonPathFor, Route, routeOnlyCommand, routePathFor } from './route.ts';
import { BUCKETS, bucketLow, type Bucket, type Dtype, type Op } from './schema.ts';
import { moeFields, shapeId, shapeText, type ShapeKey } from './shape-key.ts';

/** What the C route made of the .route: its verdict line and counts. */
export interface NativeVerdict {
  file: string;
  line: string;
  used: boolean;
  kept: number;
  dropped: number;
}

export interface TwoReaders {
  json: { file: string; verdict: Verdict };
  route: NativeVerdict;
  /** both use the table and route alike */
  agree: boolean;
  /** the first disagreement (or why the route is not used), one line; null when they agree */
  disagreement: string | null;
}

/** The files of one table, whichever of its two forms was named. */
export function tableFiles(file: string): { json: string; route: string } {
  return file.endsWith('.route') ? { json: jsonPathFor(file), route: file } : { json: file, route: routePathFor(file) };
}

/** One shape both readers are asked about. */
type Probe = ShapeKey & { dtype: Dtype };

const rowsOf = (bucket: Bucket) => (bucket === 1 ? [1] : [bucketLow(bucket), bucket]);

/**
 * Both readers on the table named by `file` (its JSON or its .route). The
 * route's text is also read by the TS twin of route.c: the two must give the
 * same line, or the library and this binding disagree on the format.
 */
export function readBoth(kpick: Kpick, build: Build, file: string, env: Env = process.env): TwoReaders {
  const files = tableFiles(file);
  const tsVerdict = guardTable(files.json, build, env);
  const native = new NativeRoute(kpick);
  const names = kpick.candidates().map((x) => x.name);
  const cLookup = (s: Probe, m: number) => {
    const id = s.op === 'moe' ? native.lookupMoe(s.dtype, s.experts!, s.topk!, s.n, s.k, m) : native.lookup(s.op, s.dtype, s.n, s.k, m);
    return names[id] ?? `id ${id}`;
  };
  try {
    native.load(files.route);
    const c: NativeVerdict = { file: files.route, line: native.verdict(), ...native.status() };
    const result = compare(tsVerdict, c, files, build, env, cLookup);
    return { json: { file: files.json, verdict: tsVerdict }, route: c, agree: result === null, disagreement: result };
  } finally {
    native.load(null);
  }
}

function compare(
  ts: Verdict,
  c: NativeVerdict,
  files: { json: string; route: string },
  build: Build,
  env: Env,
  cLookup: (s: Probe, m: number) => string,
): string | null {
  const fix = `run \`${routeOnlyCommand(files.json)}\``;
  if (!ts.used) return c.used ? `kpick: the readers disagree: the JSON is not used, ${files.route} is (${c.kept} entries): ${fix}` : null;
  if (!c.used) return `kpick: the readers disagree: the JSON is used, ${files.route} is not (an engine gets the defaults)`;
  const twin = guardCompactRoute(files.route, build, env).line;
  if (twin !== c.line) return `kpick: the two readers of ${files.route} differ (C: ${c.line.replace(/^kpick: /, '')}; TS: ${twin.replace(/^kpick: /, '')}): rebuild the library (make)`;
  if (ts.kind !== 'used') return null;
  if (c.kept !== ts.kept.length || c.dropped !== ts.dropped.length) {
    return `kpick: the C route keeps ${c.kept} entries and drops ${c.dropped} of ${files.route}, the JSON ${ts.kept.length} and ${ts.dropped.length}: ${fix}`;
  }
  const route = new Route(ts, build, env);
  const shapes = new Map<string, Probe>();
  for (const e of [...ts.kept, ...ts.dropped]) shapes.set(`${e.dtype}/${shapeId(e)}`, { op: e.op, dtype: e.dtype, n: e.n, k: e.k, ...moeFields(e) });
  for (const s of shapes.values()) {
    for (const bucket of BUCKETS) {
      for (const m of rowsOf(bucket)) {
        const want = route.lookup(s.op, s.dtype, s.n, s.k, m, s.experts, s.topk);
        const got = cLookup(s, m);
        if (want !== got) {
          return `kpick: the C route and the JSON disagree at ${s.op} ${s.dtype} ${shapeText(s)} bucket ${bucket} (m=${m}): the JSON routes to ${want}, ${files.route} to ${got}: ${fix}`;
        }
      }
    }
  }
  return null;
}
