// lib/moe-trace.ts and bench/gpu/moe-trace.ts: moe.wgmma's five nodes read
// back from hand-made kernel traces.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { main } from '../bench/gpu/moe-trace.ts';
import { EXIT, UsageError } from '../lib/cli.ts';
import { groupMoeLaunches, moeLaunches, wgmmaMoeArgs } from '../lib/moe-trace.ts';
import { parseTrace } from '../lib/step-trace.ts';

const PLAN = '_Z18kp_moe_plan_kernelPKiiiiiP11kp_moe_planb';
const GATHER = '_Z20kp_moe_gather_kernelPKtPK11kp_moe_planilPt';
const COMBINE = '_Z21kp_moe_combine_kernelILi0EEvPKfPK11kp_moe_planPKfPtiil';
/** kp_wgmma_moe_kernel<bf16, WG, MODE, BNMAX> */
const wg = (w: number, gated: boolean, bn: number) =>
  `_Z19kp_wgmma_moe_kernelILi0ELi${w}ELi${gated ? 1 : 0}ELi${bn}EEv14CUtensorMap_stS0_S0_S0_S0_17kp_wgmma_moe_args`;
const PRODUCER = '_Z18kp_producer_kernelILi0ELi1EEvPfPKtS2_Ptl';

/** a trace line: start and end in us from t0 (written in ns), grid x by y */
const line = (t0: number, s: number, e: number, name: string, gx = 1, gy = 1) =>
  `${(t0 + s) * 1000} ${(t0 + e) * 1000} 2 0 13 ${gx} ${gy} 1 256 ${name}`;

/** one launch: plan 3, gather 2, gate/up `up`, down 20, combine 3 us, 1 us apart, after a producer */
const launch = (t0: number, up: number, w = 1, bn = 64, items = 136) => [
  line(t0, -5, -1, PRODUCER, 64),
  line(t0, 0, 3, PLAN),
  line(t0, 4, 6, GATHER, 1024),
  line(t0, 7, 7 + up, wg(w, true, bn), 24 / w, items),
  line(t0, 8 + up, 28 + up, wg(w, false, bn), 32 / w, items),
  line(t0, 29 + up, 32 + up, COMBINE, 128),
];

test('the template arguments come from the mangled name; other kernels give null', () => {
  assert.equal(wgmmaMoeArgs(wg(2, true, 128)), { dt: 0, wg: 2, gated: true, bnMax: 128 });
  assert.equal(wgmmaMoeArgs(wg(1, false, 64)), { dt: 0, wg: 1, gated: false, bnMax: 64 });
  assert.is(wgmmaMoeArgs(PLAN), null);
});

test('a launch is plan, gather, gate/up, down, combine: each node timed, the span from plan start to combine end', () => {
  const { launches, skipped } = moeLaunches(parseTrace(launch(100, 40, 1, 128).join('\n')));
  assert.is(skipped, 0);
  assert.is(launches.length, 1);
  assert.equal(launches[0], { tile: 'm64.x128', grid: [24, 136], us: { plan: 3, gather: 2, up: 40, down: 20, combine: 3 }, span: 72 });
});

test('a plan kernel with no whole launch after it is skipped, and the next launch still read', () => {
  const cut = launch(0, 40).slice(0, 3); // producer, plan, gather: a launch cut short, then a whole one
  const { launches, skipped } = moeLaunches(parseTrace([...cut, ...launch(1000, 40, 2)].join('\n')));
  assert.is(skipped, 1);
  assert.equal(launches.map((l) => l.tile), ['m128']);
});

test('groups: by tile and grid, split on gate/up time when asked; medians, and the gaps the nodes leave', () => {
  const lines = [0, 1, 2].flatMap((i) => launch(i * 1000, 40 + i)).concat([3, 4].flatMap((i) => launch(i * 1000, 260)));
  const launches = moeLaunches(parseTrace(lines.join('\n'))).launches;
  assert.is(groupMoeLaunches(launches).length, 1, 'no split: one group');
  const [fast, slow] = groupMoeLaunches(launches, 120);
  assert.is(fast!.side, 'fast');
  assert.is(fast!.launches, 3);
  assert.is(fast!.us.up, 41);
  assert.is(fast!.span, 73);
  assert.is(fast!.gaps, 4, 'four 1 us gaps between five nodes');
  assert.is(slow!.side, 'slow');
  assert.is(slow!.us.up, 260);
});

test('the script: exit 0 and a JSON line per group; 2 for no trace, a bad split or no moe launch', () => {
  const dir = mkdtempSync(join(tmpdir(), 'moe-trace-'));
  const trace = join(dir, 'trace.txt'), empty = join(dir, 'empty.txt');
  writeFileSync(trace, launch(0, 40).join('\n') + '\n');
  writeFileSync(empty, line(0, 0, 1, PRODUCER) + '\n');
  const out: string[] = [];
  const write = process.stdout.write.bind(process.stdout), err = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((s: string) => (out.push(s), true)) as typeof process.stdout.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    assert.is(main(['--trace', trace, '--json']), EXIT.ok);
  } finally {
    process.stdout.write = write;
    process.stderr.write = err;
  }
  const rows = out.join('').trim().split('\n').map((l) => JSON.parse(l));
  assert.is(rows.length, 1);
  assert.is(rows[0].kind, 'moe_nodes');
  assert.is(rows[0].us.up, 40);
  assert.throws(() => main([]), (e: unknown) => e instanceof UsageError && /--trace is required/.test(e.message));
  assert.throws(() => main(['--trace', trace, '--up-split', '0']), (e: unknown) => e instanceof UsageError && /positive/.test(e.message));
  assert.throws(() => main(['--trace', join(dir, 'none.txt')]), (e: unknown) => e instanceof UsageError && /cannot read/.test(e.message));
  assert.throws(() => main(['--trace', empty]), (e: unknown) => e instanceof UsageError && /no moe.wgmma launch/.test(e.message));
});

test.run();
