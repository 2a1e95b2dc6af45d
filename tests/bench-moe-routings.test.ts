// bench/moe-routings.ts on the cpu build (make runs before the tests): every
// named moe candidate timed under both routings of tiny-moe's expert block,
// one JSON line each with its ratio to the floor of the experts the rows read.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { run } from './helpers/run-script.ts';

async function runBench(args: string[]) {
  const r = await run('bench/moe-routings', ['--backend', 'cpu', '--model', 'tiny-moe', '--samples', '2', '--rounds', '1', '--copies', '2', ...args]);
  return { code: r.code, lines: r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>), stderr: r.stderr };
}

test('moe-routings: a line per routing, rows and candidate, fastest first, each against its routing\'s floor', async () => {
  const r = await runBench(['--rows', '1,4', '--candidates', 'moe.loop,moe.grouped.*']);
  assert.is(r.code, 0, r.stderr);
  const seen = r.lines.map((l) => `${l.routing} ${l.rows} ${l.candidate}`);
  assert.equal(new Set(seen).size, seen.length, 'no line twice');
  for (const routing of ['uniform', 'skewed'])
    for (const rows of [1, 4]) {
      const group = r.lines.filter((l) => l.routing === routing && l.rows === rows);
      assert.equal(group.map((l) => l.candidate).sort(), ['moe.grouped.r4', 'moe.loop'], `${routing} rows ${rows}`);
      assert.ok(group[0]!.us <= group[1]!.us, 'fastest first');
      for (const l of group) {
        assert.ok(l.us > 0 && l.floor_us > 0, JSON.stringify(l));
        assert.ok(Math.abs(l.over_floor - l.us / l.floor_us) < 1e-9);
        assert.ok(l.experts_read >= 1 && l.experts_read <= 8, 'tiny-moe has 8 experts');
        assert.is(l.floor_us, group[0]!.floor_us, 'one floor per routing and rows');
      }
    }
});

test('moe-routings: a model without a moe block, or a glob that matches no moe candidate, is a usage error', async () => {
  assert.is((await runBench(['--model', 'tiny', '--rows', '1'])).code, 2);
  assert.is((await runBench(['--rows', '1', '--candidates', 'nothing.*'])).code, 2);
});

test.run();
