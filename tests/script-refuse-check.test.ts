// scripts/refuse-check.ts end to end: tables written here from a real sweep of
// this build, the script run with tsx as a child process against the CPU
// library, then exit code, the one line on stderr and the JSON on stdout.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EXIT, UsageError } from '../lib/cli.ts';
import { compactRouteText, routePathFor, writeCompactRoute } from '../lib/route.ts';
import type { Table } from '../lib/schema.ts';
import { defaultTablePath, writeTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/refuse-check.ts';
import { build, candidateResult, entryOf, realTable, tempDir } from './helpers/route-tables.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

function refuseCheck(args: string[], extraEnv: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', KPICK_BACKEND: 'cpu', ...extraEnv };
  for (const name of ['FORCE_COLOR', 'DEBUG', 'KPICK_LIB', 'KPICK_FORCE', 'KPICK_NO_BLASLT']) if (!(name in extraEnv)) delete env[name];
  const r = spawnSync(TSX, ['scripts/refuse-check.ts', ...args], { cwd: ROOT, encoding: 'utf8', env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The table (and, unless told not to, its compact form) in a fresh folder. */
function writeTables(table: Table, withRoute = true): string {
  const file = path.join(tempDir('kpick-refuse-'), 'decode_gemm.json');
  assert.equal(writeTable(file, table), { path: file });
  if (withRoute) assert.equal(writeCompactRoute(table, routePathFor(file)), { path: routePathFor(file) });
  return file;
}

test('parseArgs: defaults, values and bad usage', () => {
  assert.equal(parseArgs([]), { table: null, tablesDir: 'tables', backend: null, json: false, quiet: false });
  assert.equal(parseArgs(['--table', 't.json', '--backend', 'cpu', '--json', '--tables-dir', 'x']), { table: 't.json', tablesDir: 'x', backend: 'cpu', json: true, quiet: false });
  assert.throws(() => parseArgs(['--backend', 'tpu']), (e: unknown) => e instanceof UsageError && /--backend must be one of cpu, cuda, hip, got 'tpu'/.test(e.message));
  assert.throws(() => parseArgs(['--table']), (e: unknown) => e instanceof UsageError && /--table/.test(e.message));
  assert.throws(() => parseArgs(['--bogus']), (e: unknown) => e instanceof UsageError && /bogus/.test(e.message));
  const info = console.info; // cac prints its help there
  const printed: unknown[] = [];
  console.info = (...a: unknown[]) => printed.push(...a);
  try {
    assert.is(parseArgs(['--help']), null);
  } finally {
    console.info = info;
  }
  assert.match(String(printed.join('\n')), /--table <file>/);
});

test('a table of this build: exit 0 and one line with entries loaded and dropped and why', () => {
  const table = realTable();
  const e = entryOf(table, 'linear', 'fp16', 48, 80, 16);
  e.choice = 'splitk.s4';
  e.candidates['splitk.s4'] = candidateResult({ parity: 'fail' });
  const file = writeTables(table);
  const r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, `kpick: table ${file}: loaded ${table.entries.length - 1} entries, dropped 1 (1 choice failed parity)\n`);
  assert.is(r.stdout, '');
});

test('--json: the verdict as one JSON line on stdout', () => {
  const table = realTable();
  entryOf(table, 'gated', 'bf16', 24, 64, 2).choice = 'gemv.rpb4.u4';
  const file = writeTables(table);
  const r = refuseCheck(['--table', file, '--json']);
  assert.is(r.code, EXIT.ok, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.is(lines.length, 1);
  const out = JSON.parse(lines[0]!);
  assert.is(out.kind, 'used');
  assert.is(out.kept, table.entries.length - 1);
  assert.equal(out.dropped, [{ op: 'gated', dtype: 'bf16', n: 24, k: 64, bucket: 2, choice: 'gemv.rpb4.u4', where: `entries[${table.entries.findIndex((x) => x.choice === 'gemv.rpb4.u4')}]`, why: "choice not in this build's space" }]);
  assert.equal(out.route, { file: routePathFor(file), line: `kpick: table ${routePathFor(file)}: loaded ${table.entries.length - 1} entries, dropped 1 (1 choice not in this build's space)` });
  assert.equal(out.identity, build.identity);
});

test('refused tables exit 3 with the reason and the remedy', () => {
  const space = realTable();
  space.identity.space = 'feedfacefeedface';
  let r = refuseCheck(['--table', writeTables(space)]);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /^kpick: table \S+ refused: other space \(table feedfacefeedface, here \w+\); the kernels changed: run the tuner again; using the defaults\n$/);

  const file = writeTables(realTable());
  r = refuseCheck(['--table', file], { KPICK_FORCE: 'rowblk.r4' });
  assert.is(r.code, EXIT.refused);
  assert.is(r.stderr, `kpick: table ${file} refused: KPICK_FORCE=rowblk.r4 is set; it reroutes dispatch: unset it to use the table; using the defaults\n`);
  r = refuseCheck(['--table', file], { KPICK_NO_BLASLT: '1' });
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: KPICK_NO_BLASLT=1 is set/);

  fs.writeFileSync(file, '{"format": 1');
  r = refuseCheck(['--table', file, '--json']);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: invalid: not JSON/);
  assert.is(JSON.parse(r.stdout).kind, 'invalid');
});

test('no table: exit 3, the defaults, said once', () => {
  const file = path.join(tempDir('kpick-refuse-'), 'decode_gemm.json');
  const r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.is(r.stderr, `kpick: no table at ${file}: using the defaults\n`);
});

test('the default --table is tables/<arch>/<device>/decode_gemm.json of the library loaded', () => {
  const root = tempDir('kpick-tables-');
  const file = defaultTablePath(root, build.identity);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  writeTable(file, realTable());
  writeCompactRoute(realTable(), routePathFor(file));
  const r = refuseCheck(['--tables-dir', root]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, `kpick: table ${file}: loaded ${realTable().entries.length} entries, dropped 0\n`);
});

test('a compact form that disagrees with the JSON (stale), or none at all, is said; stale exits 3', () => {
  const table = realTable();
  const file = writeTables(table, false);
  let r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok);
  assert.match(r.stderr, new RegExp(`\\nkpick: no compact table at ${routePathFor(file)}: an engine on the C route would use the defaults; run promote again\\n$`));

  const old = realTable();
  old.identity.space = '0123456789abcdef';
  fs.writeFileSync(routePathFor(file), compactRouteText(old));
  r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /\nkpick: the compact table \S+ disagrees with the JSON \(an engine would get: table \S+ refused: other space .*\); run promote again\n$/);
});

test('--table a compact form checks it through the C route an engine uses', () => {
  const table = realTable();
  const file = routePathFor(writeTables(table));
  let r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, `kpick: table ${file}: loaded ${table.entries.length} entries, dropped 0\n`);
  fs.writeFileSync(file, compactRouteText(table).replace(/\nend\n$/, '\n'));
  r = refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: invalid: truncated after line \d+: expected \d+ entries and 'end'/);
});

test('bad usage exits 2 with one red-free line', () => {
  let r = refuseCheck(['--bogus']);
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, /^refuse-check: Unknown option `--bogus`\n$/);
  r = refuseCheck(['--backend', 'hip'], {});
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, /^refuse-check: no usable libkpick \(tried \S+libkpick-hip\.so: /);
});

test.run();
