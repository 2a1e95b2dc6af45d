// The promote job: pool stores of one machine, build the table by the rule of
// lib/promote.ts and merge it into the table already there; write it, its
// compact .route and its HTML report, and say what changed. One promote at a
// time per table: <table>.lock (lib/pid-lock.ts) is held from before the table
// is read until it, its .route and report are written, so of two promotes into
// one table (two model jobs of one device) neither loses the other's entries.
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { asUsage, colorsFor, EXIT, printJsonLine, say, UsageError, warn } from './cli.ts';
import { reportPathFor, writeReport } from './html-report.ts';
import { chooseIdentity } from './promote.ts';
import { entryJson, summaryLines } from './report.ts';
import { routePathFor, writeRouteOf } from './route.ts';
import { PidLock } from './pid-lock.ts';
import { formatWarning, readSteps, readStoreFolders } from './store.ts';
import { buildTable, defaultTablePath, existingTable, mergeTables, writeTable } from './table.ts';
import { errorLine, writablePath } from './write-file.ts';

/** What a promote job pools and where it writes: scripts/promote.ts's options. */
export type PromoteJob =
  | { routeOnly: true; table: string; json: boolean; quiet: boolean }
  | {
      routeOnly: false;
      stores: string[];
      gate: number;
      pdlRows: number;
      identity: string | null;
      replace: boolean;
      out: string | null;
      tablesDir: string;
      json: boolean;
      quiet: boolean;
    };

/** The lock of the table at `table`, beside it: tables/x86_64/<device>/decode_gemm.json.lock. */
export function tableLockPath(table: string): string {
  return `${table}.lock`;
}

/** Takes the table's lock (its folder must exist), or throws one line naming the promote that holds it (exit 2). */
function lockTable(table: string): PidLock {
  return asUsage(() => PidLock.take(tableLockPath(table), { subject: `table ${table}`, holder: 'another promote', idle: 'no promote runs' }));
}

function routeOnly(table: string, quiet: boolean): number {
  // The .route goes beside the table, compiled from it: under the table's
  // lock, so a promote cannot write the table between the read and the
  // route. No folder there: no table either, and writeRouteOf says so.
  const lock = statSync(dirname(table), { throwIfNoEntry: false })?.isDirectory() ? lockTable(table) : null;
  try {
    const written = writeRouteOf(table);
    if ('error' in written) {
      if (written.exit === 'usage') throw new UsageError(written.error);
      say(colorsFor(process.stderr).red(`promote: ${written.error}`));
      return EXIT.refused;
    }
    if (!quiet) say(`wrote ${written.path} from ${table}`);
    return EXIT.ok;
  } finally {
    lock?.release();
  }
}

/**
 * The promote job (scripts/promote.ts, and the main job's promote step): the
 * stores' records of one build into the table at --out (merged into the one
 * there unless replace), its .route and report beside it; or, route-only, the
 * .route of a hand-edited table compiled again.
 */
export function promoteJob(args: PromoteJob): number {
  if (args.routeOnly) return routeOnly(args.table, args.quiet);

  const chosen = chooseIdentity(readStoreFolders(args.stores, warn), args.identity ?? undefined);
  if ('error' in chosen) throw new UsageError(chosen.error);
  for (const s of chosen.skipped) warn(`skipped ${s.count} records of another build, identity ${s.tag} (${s.differs}); --identity ${s.tag} promotes those instead`);
  // the step's word on the picks (scripts/step-verify.ts), where a store has a steps/ folder
  const steps = args.stores.flatMap((dir) => {
    const read = readSteps(dir);
    for (const w of read.warnings) warn(`skipped ${formatWarning(w)}`);
    return read.records;
  });
  const built = buildTable(chosen.records, { gate: args.gate, pdlRows: args.pdlRows, created: new Date(), steps });
  if ('error' in built) throw new UsageError(built.error);
  for (const w of built.warnings) warn(w);
  if (steps.length > 0 && !args.quiet) {
    // a runner-up may replace a vetoed pick or an entry the kernel rule kept on the default: count them apart
    const runnersUp = built.stepPicked > 0 ? `; ${built.stepPicked} entr${built.stepPicked === 1 ? 'y' : 'ies'} moved to a runner-up the step is faster with (${built.vetoedMoved} of them vetoed picks)` : '';
    say(`promote: ${steps.length} step record(s): ${built.vetoed} pick(s) make the step slower, ${built.vetoed - built.vetoedMoved} of them kept on the default${runnersUp}`);
  }
  const out = args.out ?? defaultTablePath(args.tablesDir, built.table.identity);

  // a FIFO or a device at --out is refused before anything is read from it, and
  // one where its .route or report goes before the table is written
  for (const file of [out, routePathFor(out), reportPathFor(out)]) {
    const target = writablePath(file);
    if ('error' in target) throw new UsageError(target.error);
  }
  // the table's folder, for its lock (the write would make it anyway)
  try {
    mkdirSync(dirname(out), { recursive: true });
  } catch (err) {
    throw new UsageError(`${out}: cannot write (${errorLine(err)})`);
  }
  const lock = lockTable(out);
  let merged: ReturnType<typeof mergeTables>;
  try {
    const old = args.replace ? { table: null } : existingTable(out, built.table.identity);
    if ('error' in old) throw new UsageError(`${old.error}: --replace writes a fresh table over it`);
    if (old.other) warn(`${out} held a table of another build (${old.other.differs}): its ${old.other.entries} entries cannot be merged and are replaced`);
    merged = mergeTables(old.table, built.table);
    const written = writeTable(out, merged.table);
    if ('error' in written) throw new UsageError(written.error);
    // The compact route (what the C router reads, compiled from the file just
    // written) and the report sit beside the table; the table is already
    // written, so a failure here only warns.
    for (const extra of [writeRouteOf(out), writeReport(merged.table, reportPathFor(out))]) {
      if ('error' in extra) warn(extra.error);
      else if (!args.quiet) say(`wrote ${extra.path}`);
    }
  } finally {
    lock.release();
  }
  if (!args.quiet) {
    for (const line of summaryLines(merged.table, { path: out, colors: colorsFor(process.stderr) })) say(line);
    const how = args.replace ? 'started afresh (--replace)' : `kept ${merged.kept} from the table there`;
    say(`promote: ${out}: ${merged.table.entries.length} entries: ${how}, replaced ${merged.replaced}, added ${merged.added}`);
  }
  if (args.json) for (const entry of merged.table.entries) printJsonLine(entryJson(entry));
  return EXIT.ok;
}
