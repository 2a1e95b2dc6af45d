// scripts/refuse-check.ts end to end: tables written here from a real sweep of
// this build, the script run with tsx as a child process against the CPU
// library, then exit code, the one line on stderr and the JSON on stdout.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { run } from './helpers/run-script.ts';
import { EXIT, UsageError } from '../lib/cli.ts';
import { routePathFor, sealRoute, writeRouteOf } from '../lib/route.ts';
import type { Table } from '../lib/schema.ts';
import { defaultTablePath, tableText, writeTable } from '../lib/table.ts';
import { parseArgs } from '../scripts/refuse-check.ts';
import { build, candidateResult, entryOf, headOf, othersOf, realTable, tempDir } from './helpers/route-tables.ts';

const OTHER = othersOf('linear')[0]!;
const HEAD = headOf('linear');


/** `tsx scripts/refuse-check.ts ...args` on the CPU backend, in process */
const refuseCheck = (args: string[], env: Record<string, string> = {}) => run('refuse-check', args, { env: { KPICK_BACKEND: 'cpu', ...env } });

/** The table (and, unless told not to, its compact form) in a fresh folder. */
function writeTables(table: Table, withRoute = true): string {
  const file = path.join(tempDir('kpick-refuse-'), 'decode_gemm.json');
  assert.equal(writeTable(file, table), { path: file });
  if (withRoute) assert.equal(writeRouteOf(file), { path: routePathFor(file) });
  return file;
}

test('parseArgs: defaults, values and bad usage', async () => {
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

/** The two verdict lines refuse-check says for the table at json (and its .route). */
const usedLines = (json: string, kept: number, dropped: number, why = '') =>
  `kpick: table ${json}: loaded ${kept} entries, dropped ${dropped}${why}\nkpick: table ${routePathFor(json)}: loaded ${kept} entries, dropped ${dropped}${why}\n`;

test('a table of this build: exit 0, the verdicts of both readers (JSON and .route), with entries loaded and dropped and why', async () => {
  const table = realTable();
  const e = entryOf(table, 'linear', 'fp16', 48, 80, 16);
  e.choice = OTHER;
  e.candidates[OTHER] = candidateResult({ parity: 'fail' });
  const file = writeTables(table);
  const r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, usedLines(file, table.entries.length - 1, 1, ' (1 choice failed parity)'));
  assert.is(r.stdout, '');
  assert.is((await refuseCheck(['--table', file, '--quiet'])).stderr, '', '--quiet: nothing when used');
});

test('--json: both verdicts as one JSON line on stdout', async () => {
  const table = realTable();
  entryOf(table, 'gated', 'bf16', 24, 64, 2).choice = 'gemv.rpb4.u4.none';
  const file = writeTables(table);
  const r = await refuseCheck(['--table', file, '--json']);
  assert.is(r.code, EXIT.ok, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.is(lines.length, 1);
  const out = JSON.parse(lines[0]!);
  assert.is(out.kind, 'used');
  assert.is(out.kept, table.entries.length - 1);
  assert.equal(out.dropped, [{ op: 'gated', dtype: 'bf16', n: 24, k: 64, bucket: 2, choice: 'gemv.rpb4.u4.none', where: `entries[${table.entries.findIndex((x) => x.choice === 'gemv.rpb4.u4.none')}]`, why: "choice not in this build's space" }]);
  assert.equal(out.route, { file: routePathFor(file), line: `kpick: table ${routePathFor(file)}: loaded ${table.entries.length - 1} entries, dropped 1 (1 choice not in this build's space)`, used: true, kept: table.entries.length - 1, dropped: 1 });
  assert.equal([out.agree, out.disagreement], [true, null]);
  assert.equal(out.identity, build.identity);
});

test('refused tables exit 3 with the reason and the remedy, from both readers', async () => {
  const space = realTable();
  space.identity.space = 'feedfacefeedface';
  let r = await refuseCheck(['--table', writeTables(space)]);
  assert.is(r.code, EXIT.refused);
  const [json, route, more] = r.stderr.split('\n');
  assert.match(json!, /^kpick: table \S+\.json refused: other space \(table feedfacefeedface, here \w+\); the kernels changed: run the tuner again; using the defaults$/);
  assert.match(route!, /^kpick: table \S+\.route refused: other space \(table feedfacefeedface, here \w+\); the kernels changed: run the tuner again; using the defaults$/);
  assert.is(more, '', 'both refuse alike: no disagreement to name');

  const file = writeTables(realTable());
  r = await refuseCheck(['--table', file], { KPICK_FORCE: OTHER });
  assert.is(r.code, EXIT.refused);
  assert.is(r.stderr.split('\n')[0], `kpick: table ${file} refused: KPICK_FORCE=${OTHER} is set; it reroutes dispatch: unset it to use the table; using the defaults`);
  r = await refuseCheck(['--table', file], { KPICK_NO_BLASLT: '1' });
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: KPICK_NO_BLASLT=1 is set/);

  fs.writeFileSync(file, '{"format": 1');
  r = await refuseCheck(['--table', file, '--json']);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: invalid: not JSON/);
  assert.match(r.stderr, /\.route refused: \S+\.json changed since the route was written/);
  assert.is(JSON.parse(r.stdout).kind, 'invalid');
});

test('no table: exit 3, the defaults, said by both readers', async () => {
  const file = path.join(tempDir('kpick-refuse-'), 'decode_gemm.json');
  const r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.is(r.stderr, `kpick: no table at ${file}: using the defaults\nkpick: no table at ${routePathFor(file)}: using the defaults\n`);
});

test('the default --table is tables/<arch>/<device>/decode_gemm.json of the library loaded', async () => {
  const root = tempDir('kpick-tables-');
  const file = defaultTablePath(root, build.identity);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  writeTable(file, realTable());
  writeRouteOf(file);
  const r = await refuseCheck(['--tables-dir', root]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, usedLines(file, realTable().entries.length, 0));
});

test('one table, one truth: no .route, or a .route the JSON changed under, exits 3 naming it; --route-only makes them agree again', async () => {
  const table = realTable();
  const file = writeTables(table, false);
  let r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.is(r.stderr.split('\n')[2], `kpick: the readers disagree: the JSON is used, ${routePathFor(file)} is not (an engine gets the defaults)`);

  assert.equal(writeRouteOf(file), { path: routePathFor(file) });
  const e = entryOf(table, 'linear', 'bf16', 48, 80, 8);
  e.choice = OTHER;
  e.candidates[OTHER] = candidateResult();
  fs.writeFileSync(file, tableText(table)); // the README's one-word edit
  r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr.split('\n')[1]!, new RegExp(`refused: ${file} changed since the route was written .*; run \`npx tsx scripts/promote\\.ts --route-only --table ${file}\`; using the defaults$`));

  const fix = await run('promote', ['--route-only', '--table', file]);
  assert.is(fix.code, EXIT.ok, fix.stderr);
  assert.is(fix.stderr, `wrote ${routePathFor(file)} from ${file}\n`);
  r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok, r.stderr);
});

test('both readers use the table but route differently (a .route forged and resealed): exit 3 naming the first entry and bucket', async () => {
  const table = realTable();
  const file = writeTables(table);
  const route = routePathFor(file);
  const e = entryOf(table, 'linear', 'bf16', 48, 80, 8);
  const text = fs.readFileSync(route, 'latin1');
  const from = `\nlinear bf16 48 80 8 ${e.choice} `;
  assert.ok(text.includes(from));
  const other = e.choice === OTHER ? HEAD : OTHER;
  const forged = sealRoute(text.replace(from, `\nlinear bf16 48 80 8 ${other} `).replace(/end [0-9a-f]{64}\n$/, ''));
  fs.writeFileSync(route, forged);
  const r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused, r.stderr);
  const [first, bucket] = [5, 8]; // bucket 8 holds m = 5..8; the first m checked is 5
  assert.is(r.stderr.split('\n')[2], `kpick: the C route and the JSON disagree at linear bf16 48x80 bucket ${bucket} (m=${first}): the JSON routes to ${e.choice}, ${route} to ${other}: run \`npx tsx scripts/promote.ts --route-only --table ${file}\``);
});

test('--table a compact form checks it and the JSON beside it, through both readers', async () => {
  const table = realTable();
  const json = writeTables(table);
  const file = routePathFor(json);
  let r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.ok, r.stderr);
  assert.is(r.stderr, usedLines(json, table.entries.length, 0));
  fs.writeFileSync(file, fs.readFileSync(file, 'latin1').replace(/\nend [0-9a-f]{64}\n$/, '\n'));
  r = await refuseCheck(['--table', file]);
  assert.is(r.code, EXIT.refused);
  assert.match(r.stderr, /refused: invalid: truncated after line \d+: expected \d+ entries and 'end'/);
});

test('bad usage and a bad environment exit 2 with one line', async () => {
  let r = await refuseCheck(['--bogus']);
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, /^refuse-check: Unknown option `--bogus`\n$/);
  r = await refuseCheck(['--backend', 'hip'], {});
  assert.is(r.code, EXIT.usage);
  assert.match(r.stderr, /^refuse-check: no usable libkpick \(tried \S+libkpick-hip\.so: no such file\)\n$/);
  r = await refuseCheck(['--table', '']);
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, "refuse-check: --table needs a value, got an empty one\n");
  r = await refuseCheck(['--table'], {});
  assert.is(r.code, EXIT.usage);
  r = await refuseCheck([], { KPICK_BACKEND: 'foo' });
  assert.is(r.code, EXIT.usage);
  assert.is(r.stderr, "refuse-check: KPICK_BACKEND must be one of cpu, cuda, hip, got 'foo'\n");
});

test.run();
