// A real table of this build for tiny's linears at rows 1 and 4: swept here by
// the team's code (lib/sweep.ts), promoted (lib/table.ts), and written where
// the scripts look by default under a fresh tables folder. For the end-to-end
// runs of the scripts that read a table (serve-bench, step-verify).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Kpick } from '../../lib/ffi.ts';
import { decodeLinears, findModel, uniqueShapes } from '../../lib/models.ts';
import { buildOf, writeRouteOf } from '../../lib/route.ts';
import type { StoreRecord, Table } from '../../lib/schema.ts';
import { runSweep } from '../../lib/sweep.ts';
import { buildTable, defaultTablePath, writeTable } from '../../lib/table.ts';

/** The table of tiny's linears at rows 1 and 4, as promote makes it from a short sweep. */
export function sweptTinyTable(kpick: Kpick): Table {
  const build = buildOf(kpick);
  const records: StoreRecord[] = [];
  const space = kpick.candidates();
  runSweep(
    kpick,
    { identity: build.identity, linears: uniqueShapes(decodeLinears(findModel('tiny'))), dtypes: ['bf16'], rows: [1, 4], candidates: space, space, samples: 2, rounds: 2, copies: 2, seed: 5, done: new Set() },
    { record: (r) => records.push(r) },
  );
  const built = buildTable(records, { gate: 0.02, created: new Date() });
  if ('error' in built) throw new Error(built.error);
  return built.table;
}

/** Writes table (JSON and compact form) at its default path under a fresh tables folder in scratch; returns that folder. */
export function tablesDirWith(scratch: string, table: Table): string {
  const dir = mkdtempSync(join(scratch, 'tables-'));
  const file = defaultTablePath(dir, table.identity);
  mkdirSync(dirname(file), { recursive: true });
  const written = writeTable(file, table);
  if ('error' in written) throw new Error(written.error);
  const route = writeRouteOf(file);
  if ('error' in route) throw new Error(route.error);
  return dir;
}
