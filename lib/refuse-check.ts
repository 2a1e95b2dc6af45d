// The refuse-check job: would this table be used here, by both readers (the
// TS guard on the JSON, the library's C route on the .route beside it)?
import { EXIT, printJsonLine, say } from './cli.ts';
import { openKpick } from './ffi.ts';
import type { Build } from './guard.ts';
import { buildOf } from './route.ts';
import { defaultTablePath } from './table.ts';
import { readBoth, type TwoReaders } from './two-readers.ts';

/** Which table a refuse-check reads, against which library: scripts/refuse-check.ts's options. */
export interface RefuseCheckJob {
  table: string | null;
  tablesDir: string;
  backend: string | null;
  json: boolean;
  quiet: boolean;
}

function jsonOf(both: TwoReaders, build: Build) {
  const verdict = both.json.verdict;
  return {
    table: both.json.file,
    kind: verdict.kind,
    used: verdict.used,
    line: verdict.line,
    kept: verdict.kind === 'used' ? verdict.kept.length : 0,
    dropped: verdict.kind === 'used' ? verdict.dropped : [],
    route: both.route,
    agree: both.agree,
    disagreement: both.disagreement,
    identity: build.identity,
  };
}

/**
 * The refuse-check job (scripts/refuse-check.ts, and the main job's last
 * step): both readers' verdict lines (only refusals under quiet), the first
 * disagreement, the JSON on request. Exit 0 when both use the table alike, 3 otherwise.
 */
export function refuseCheckJob(args: RefuseCheckJob): number {
  const kpick = openKpick(args.backend);
  const build = buildOf(kpick);
  const both = readBoth(kpick, build, args.table ?? defaultTablePath(args.tablesDir, build.identity), process.env);
  const used = both.json.verdict.used && both.agree;
  if (!used || !args.quiet) {
    say(both.json.verdict.line);
    say(both.route.line);
  }
  if (both.disagreement !== null) say(both.disagreement);
  if (args.json) printJsonLine(jsonOf(both, build));
  return used ? EXIT.ok : EXIT.refused;
}
