import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { decodeLinears, findModel, MODELS, uniqueShapes } from '../lib/models.ts';
import { BUCKETS, type Dtype, type Op } from '../lib/schema.ts';
import { joinShardValue, parseShard, partition, planUnits, shardKeys, shardTag, unitKey, weightBytes, writersOverlap, type Unit } from '../lib/shard.ts';
import { writerKey } from '../lib/store.ts';

// a space like the CPU build's: 6 linear candidates, 4 gated ones
const candidates = [...Array(6).fill({ op: 'linear' }), ...Array(4).fill({ op: 'gated' })] as { op: Op }[];

function unitsOf(model: string, dtypes: (Dtype)[] = ['bf16', 'fp16']): Unit[] {
  return planUnits({ dtypes, linears: uniqueShapes(decodeLinears(findModel(model))), rows: BUCKETS, candidates });
}

test('an fp8 unit costs its fp8 bytes (one a weight) times its fp8 candidates, and an fp8 plan has no lm_head', () => {
  const space = [...candidates, { op: 'linear', numeric: 'w8a8' }, { op: 'linear', numeric: 'w8a16' }, { op: 'gated', numeric: 'w8a8' }] as { op: Op; numeric?: 'w8a8' | 'w8a16' }[];
  const linears = uniqueShapes(decodeLinears(findModel('Llama-3.1-8B')));
  const units = planUnits({ dtypes: ['bf16', 'fp8'], linears, rows: [1], candidates: space });
  const cost = (dtype: Dtype, name: string) => units.find((u) => u.dtype === dtype && u.linear.name === name)!.cost;
  assert.is(cost('bf16', 'qkv'), weightBytes(linears[0]!) * 7, '6 w16a16 candidates and the floor');
  assert.is(cost('fp8', 'qkv'), (weightBytes(linears[0]!) / 2) * 3, '2 fp8 candidates and the floor');
  assert.is(cost('fp8', 'gate_up'), (weightBytes(linears[2]!) / 2) * 2);
  assert.equal(units.filter((u) => u.dtype === 'fp8').map((u) => u.linear.name), ['qkv', 'o', 'gate_up', 'down']);
});

test('parseShard reads i/n, 0-based', () => {
  assert.equal(parseShard('0/1'), { index: 0, count: 1 });
  assert.equal(parseShard('1/2'), { index: 1, count: 2 });
  assert.equal(parseShard('7/8'), { index: 7, count: 8 });
});

test('parseShard refuses what is not i/n with 0 <= i < n, in one line that says so', () => {
  const bad: [string, RegExp][] = [
    ['2/2', /--shard 2\/2: i must be in 0\.\.1 \(shards are 0-based\)/],
    ['1/0', /--shard 1\/0: n must be in 1\.\.4096/],
    ['0/0', /n must be in 1\.\.4096/],
    ['0/5000', /n must be in 1\.\.4096/],
    ['-1/2', /--shard must be i\/n .*0-based.*; got '-1\/2'/],
    ['0x1/2', /got '0x1\/2'/],
    ['1e0/2', /got '1e0\/2'/],
    ['1/2e0', /got '1\/2e0'/],
    ['1.0/2', /got '1\.0\/2'/],
    ['+1/2', /got '\+1\/2'/],
    ['1', /got '1'/],
    ['1/2/3', /got '1\/2\/3'/],
    [' 1/2', /got ' 1\/2'/],
    ['', /got ''/],
  ];
  for (const [text, message] of bad) assert.throws(() => parseShard(text), message, text);
});

test('joinShardValue keeps a negative value with its option, so its error names it', () => {
  assert.equal(joinShardValue(['--model', 'tiny', '--shard', '-1/2', '--quiet']), ['--model', 'tiny', '--shard=-1/2', '--quiet']);
  assert.equal(joinShardValue(['--shard', '1/2', '--quiet']), ['--shard', '1/2', '--quiet']);
  assert.equal(joinShardValue(['--shard', '--quiet']), ['--shard', '--quiet']);
});

test('shardTag names the shard as a store file shows it', () => {
  assert.is(shardTag({ index: 1, count: 2 }), 'shard1of2');
});

test('writersOverlap: shards of one partition coexist; the same shard, an unsharded sweep or another partition do not', () => {
  assert.not.ok(writersOverlap('sweep-shard0of2', 'sweep-shard1of2'));
  assert.ok(writersOverlap('sweep-shard1of2', 'sweep-shard1of2'));
  assert.ok(writersOverlap('sweep', 'sweep-shard1of2'));
  assert.ok(writersOverlap('sweep-shard0of2', 'sweep'));
  assert.ok(writersOverlap('sweep', 'sweep'));
  assert.ok(writersOverlap('sweep-shard0of2', 'sweep-shard1of3'));
  assert.not.ok(writersOverlap('sweep', 'parity'));
  assert.is(writerKey('sweep', shardTag({ index: 1, count: 2 })), 'sweep-shard1of2');
  assert.is(writerKey('sweep'), 'sweep');
});

test('a unit costs the weight bytes it reads times the timings of its op (candidates + floor)', () => {
  assert.is(weightBytes({ op: 'linear', n: 4096, k: 1024 }), 4096 * 1024 * 2);
  assert.is(weightBytes({ op: 'gated', n: 3072, k: 1024 }), 2 * 3072 * 1024 * 2);
  const units = planUnits({ dtypes: ['bf16'], linears: [{ name: 'g', op: 'gated', n: 8, k: 4 }], rows: [1, 2], candidates });
  assert.equal(units.map((u) => [u.key, u.cost]), [['bf16:gated:8x4:1', 2 * 8 * 4 * 2 * 5], ['bf16:gated:8x4:2', 2 * 8 * 4 * 2 * 5]]);
});

test('the shards of every preset are a partition: their union is the plan, no unit twice', () => {
  for (const model of MODELS.map((m) => m.name)) {
    const units = unitsOf(model);
    const all = units.map((u) => u.key).sort();
    for (let n = 1; n <= 9; n++) {
      const { keys } = partition(units, n);
      const union = keys.flatMap((s) => [...s]).sort();
      assert.equal(union, all, `${model} in ${n} shards`);
      assert.is(new Set(union).size, union.length);
      for (let i = 0; i < n; i++) assert.equal(shardKeys(units, { index: i, count: n }), keys[i]);
    }
  }
});

test('every shard costs at most total/n plus the largest unit, and big plans split within 10 % of even', () => {
  for (const model of MODELS.map((m) => m.name)) {
    const units = unitsOf(model);
    const total = units.reduce((s, u) => s + u.cost, 0);
    const largest = Math.max(...units.map((u) => u.cost));
    for (const n of [2, 3, 4, 8]) {
      const { cost } = partition(units, n);
      assert.is(cost.reduce((s, c) => s + c, 0), total);
      for (const c of cost) assert.ok(c <= total / n + largest, `${model} n=${n}: ${c} > ${total / n} + ${largest}`);
    }
  }
  // two 8B models, the sweep of item 4: two shards within 10 % of even
  const both = [...unitsOf('Llama-3.1-8B', ['bf16']), ...unitsOf('Qwen3-8B', ['bf16'])].filter(
    (u, i, all) => all.findIndex((o) => o.key === u.key) === i,
  );
  const { cost } = partition(both, 2);
  const mean = (cost[0]! + cost[1]!) / 2;
  assert.ok(Math.max(...cost) <= 1.1 * mean, `two shards of Llama-3.1-8B + Qwen3-8B: ${cost.join(' vs ')}`);
});

test('the partition is the same whatever order the plan lists its units in', () => {
  const units = unitsOf('Qwen3-0.6B');
  const reversed = [...units].reverse();
  const shuffled = [...units].sort((a, b) => (a.key.split('').reverse().join('') < b.key.split('').reverse().join('') ? -1 : 1));
  for (const n of [2, 3, 5]) {
    const want = partition(units, n).keys.map((s) => [...s].sort());
    assert.equal(partition(reversed, n).keys.map((s) => [...s].sort()), want);
    assert.equal(partition(shuffled, n).keys.map((s) => [...s].sort()), want);
  }
});

test('equal-cost units are split by their key, not by chance: rows of one shape alternate', () => {
  const units = planUnits({ dtypes: ['bf16'], linears: [{ name: 'a', op: 'linear', n: 64, k: 64 }], rows: [1, 2, 4, 8], candidates });
  const { keys } = partition(units, 2);
  assert.equal(keys.map((s) => [...s]), [
    [unitKey('bf16', { op: 'linear', n: 64, k: 64 }, 1), unitKey('bf16', { op: 'linear', n: 64, k: 64 }, 4)],
    [unitKey('bf16', { op: 'linear', n: 64, k: 64 }, 2), unitKey('bf16', { op: 'linear', n: 64, k: 64 }, 8)],
  ]);
});

test('more shards than units leaves the extra shards empty, and a plan listing a unit twice is refused', () => {
  const units = planUnits({ dtypes: ['bf16'], linears: [{ name: 'a', op: 'linear', n: 64, k: 64 }], rows: [1], candidates });
  assert.equal(partition(units, 3).keys.map((s) => s.size), [1, 0, 0]);
  assert.throws(() => partition([...units, ...units], 2), /unit bf16:linear:64x64:1 appears twice/);
  assert.throws(() => partition(units, 0), /positive integer/);
});

test('a moe unit is keyed by E and top-k and costs the experts its rows can read', () => {
  const moe = { op: 'moe', n: 128, k: 256, experts: 8, topk: 2 } as const;
  assert.is(unitKey('bf16', moe, 4), 'bf16:moe:128x256:E8:top2:4');
  assert.not.equal(unitKey('bf16', moe, 4), unitKey('bf16', { ...moe, topk: 1 }, 4));
  assert.is(weightBytes(moe, 1), 2 * 3 * 128 * 256 * 2);
  assert.is(weightBytes(moe, 128), 8 * 3 * 128 * 256 * 2);
});

test.run();
