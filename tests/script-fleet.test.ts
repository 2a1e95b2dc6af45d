// The fleet check end to end on the CPU backend: a tiny table made here,
// `check --quick` against it (as recorded, and with medians edited so the
// node must look slow), and scripts/fleet.ts pooling the summaries.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { FleetSummary, type Table } from '../lib/schema.ts';
import { run } from './helpers/run-script.ts';

const scratch = mkdtempSync(join(tmpdir(), 'kpick-fleet-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** `tsx <script> ...args` on the CPU backend, in process; input is its stdin */
const tsx = (script: string, args: string[], input?: string) => run(script, args, { env: { KPICK_BACKEND: 'cpu' }, input });

const table = join(scratch, 'tables', 'decode_gemm.json');
const probe = ['--quick', '--copies', '4', '--samples', '5', '--rounds', '2'];

/** The test table with every recorded median multiplied by `factor`. */
function scaled(factor: number, name: string): string {
  const t = JSON.parse(readFileSync(table, 'utf8')) as Table;
  for (const e of t.entries) for (const c of Object.values(e.candidates)) if (c.median_us !== null) c.median_us *= factor;
  const file = join(scratch, name, 'decode_gemm.json');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(t));
  return file;
}

function summaryOf(stdout: string) {
  const lines = stdout.trim().split('\n');
  assert.is(lines.length, 1, 'one summary line');
  const parsed = v.safeParse(FleetSummary, JSON.parse(lines[0]!));
  assert.ok(parsed.success, lines[0]);
  return parsed.output;
}

test('setup: a tiny table from a real CPU sweep', async () => {
  const store = join(scratch, 'store');
  const s = await tsx('scripts/sweep.ts', ['--model', 'tiny', '--rows', '1,2', '--copies', '4', '--samples', '5', '--rounds', '1', '--store', store, '--quiet']);
  assert.is(s.code, 0, s.stderr);
  const p = await tsx('scripts/promote.ts', ['--store', store, '--out', table, '--quiet']);
  assert.is(p.code, 0, p.stderr);
});

let healthy = '';
let slow = '';

test('check --quick against medians it can meet passes with one summary line of every entry', async () => {
  const run = await tsx('scripts/check.ts', [...probe, '--table', scaled(1000, 'generous'), '--node', 'node-a']);
  assert.is(run.code, 0, run.stderr);
  const s = summaryOf(run.stdout);
  const t = JSON.parse(readFileSync(table, 'utf8')) as Table;
  assert.equal([s.node, s.verdict, s.flags, s.identity.backend], ['node-a', 'pass', [], 'cpu']);
  assert.is(s.device, t.identity.device);
  // tiny: 5 shapes at rows 1 and 2
  assert.is(t.entries.length, 10);
  assert.equal(s.entries.map((e) => [e.op, e.dtype, e.n, e.k, e.bucket, e.choice]), t.entries.map((e) => [e.op, e.dtype, e.n, e.k, e.bucket, e.choice]));
  for (const e of s.entries) {
    assert.is(e.parity, 'pass');
    assert.ok(e.measured_us! > 0 && e.ratio! > 0 && e.ratio! < 0.1, JSON.stringify(e));
    assert.is(e.ratio, e.measured_us! / e.recorded_us!);
  }
  assert.match(run.stderr, /check --quick: node-a \(.*\): pass; \d+ entries, geomean x0\.\d+ of recorded/);
  healthy = run.stdout;
});

test('check --quick against medians 10x too fast flags the node, naming each shape, and exits 1', async () => {
  const run = await tsx('scripts/check.ts', [...probe, '--table', scaled(0.1, 'stingy'), '--node', 'node-b', '--quiet']);
  assert.is(run.code, 1, run.stderr);
  const s = summaryOf(run.stdout);
  assert.is(s.verdict, 'flagged');
  assert.ok(s.flags.some((f) => /^slow: bf16 linear 256x256 m=1 \S+ x\d+\.\d{3} its recorded median \(> 1\.25\)$/.test(f)), s.flags.join('\n'));
  assert.ok(s.flags.some((f) => f.startsWith('slow overall: geomean x')));
  assert.match(run.stderr, /check --quick: node-b .*FLAGGED/);
  slow = run.stdout;
});

test('check --quick with no table here prints a refused summary and exits 3', async () => {
  const run = await tsx('scripts/check.ts', [...probe, '--tables-dir', join(scratch, 'none'), '--node', 'node-c']);
  assert.is(run.code, 3, run.stderr);
  const s = summaryOf(run.stdout);
  assert.equal([s.verdict, s.entries], ['refused', []]);
  assert.match(s.flags[0]!, /^table refused: /);
});

test('check --quick refuses bad bounds and a compact route with exit 2 and one line', async () => {
  for (const [args, message] of [
    [['--max-ratio', '0.9'], /^check: --max-ratio must be a ratio in 1\.\.100, got '0\.9'\n$/],
    [['--max-geomean', 'x'], /^check: --max-geomean must be a ratio in 1\.\.100, got 'x'\n$/],
    [['--table', 'a.route'], /^check: --table: the fleet check needs the JSON table/],
    // a named table that is not there is a typo, not a node without a table (that is exit 3, above)
    [['--table', 'no-such-table.json'], /^check: --table no-such-table\.json: not a file\n$/],
    // the main job's options are refused, not silently ignored: the fleet check probes the table's entries
    [['--model', 'Qwen3-8B', '--rows', '1'], /^check: --model, --rows: not with --quick \(the fleet check probes the entries of the table\)\n$/],
  ] as const) {
    const run = await tsx('scripts/check.ts', [...probe, ...args]);
    assert.is(run.code, 2, args.join(' '));
    assert.match(run.stderr, message);
    assert.is(run.stdout, '');
  }
});

test('fleet.ts passes a healthy fleet and flags the slow node by name, from files or stdin', async () => {
  const a = join(scratch, 'a.jsonl');
  const b = join(scratch, 'b.jsonl');
  writeFileSync(a, healthy);
  writeFileSync(b, slow);
  const ok = await tsx('scripts/fleet.ts', [a]);
  assert.is(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, /fleet: 1 nodes, 0 flagged \(bounds: geomean 1\.1, any pick 1\.25\)/);

  const both = await tsx('scripts/fleet.ts', [a, b, '--json']);
  assert.is(both.code, 1, both.stderr);
  // the flag lines indented under node-b's (spaces then text: one way to match each, no backtracking blow-up)
  assert.match(both.stderr, /FLAGGED node-b [^\n]*\n(?: +\S[^\n]*\n)* +slow: bf16 linear 256x256 m=1 /);
  assert.match(both.stderr, /fleet: 2 nodes, 1 flagged .*: node-b\n$/);
  const nodes = both.stdout.trim().split('\n').map((l) => JSON.parse(l) as { node: string; flagged: boolean });
  assert.equal(nodes.map((n) => [n.node, n.flagged]), [['node-a', false], ['node-b', true]]);

  const piped = await tsx('scripts/fleet.ts', [], healthy + slow);
  assert.is(piped.code, 1);
  // a bound wide enough for a 10x slow-down lets the same fleet pass
  assert.is((await tsx('scripts/fleet.ts', ['--max-ratio', '50', '--max-geomean', '50'], healthy + slow)).code, 0);
});

test('fleet.ts: unreadable files, lines that are not summaries and no input exit 2 with one line', async () => {
  const cases: [string[], string, RegExp][] = [
    [[join(scratch, 'missing.jsonl')], '', /^fleet: cannot read .*missing\.jsonl: ENOENT/],
    [[], 'hello\n', /^fleet: stdin:1: not JSON/],
    [[], '', /^fleet: no fleet-check summaries to pool\n$/],
    [['--max-ratio', '0.5'], healthy, /^fleet: --max-ratio must be a ratio in 1\.\.100/],
    // bounds are read as typed, as every script's numbers: not hex, an exponent or a flag, and never empty
    [['--max-ratio', '0x4'], healthy, /^fleet: --max-ratio must be a ratio in 1\.\.100, got '0x4'\n$/],
    [['--max-ratio', '1e1'], healthy, /^fleet: --max-ratio must be a ratio in 1\.\.100, got '1e1'\n$/],
    [['--max-geomean', '-1'], healthy, /^fleet: --max-geomean must be a ratio in 1\.\.100, got '-1'\n$/],
    [['--max-geomean', ''], healthy, /^fleet: --max-geomean needs a value, got an empty one\n$/],
  ];
  for (const [args, input, message] of cases) {
    const run = await tsx('scripts/fleet.ts', args, input);
    assert.is(run.code, 2, args.join(' '));
    assert.match(run.stderr, message);
  }
});

test.run();
