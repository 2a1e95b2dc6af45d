import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { DEFAULT_BOUNDS, judgeEntries, nodeName, nodeSummary, parseSummaries, poolFleet, refusedSummary, shapeLabel } from '../lib/fleet.ts';
import { FleetSummary, type FleetEntry, type Identity } from '../lib/schema.ts';

const identity: Identity = { backend: 'cuda', arch: 'sm_90', device: 'NVIDIA H200', runtime: 'cuda 13.0', blas: 'cublasLt 13.1', compiler: 'nvcc 13.0', space: 'abc' };

/** An entry of a 4096x4096 linear at `bucket`, measured `ratio` times its recorded 10 us. */
function entry(bucket: 1 | 2 | 4 | 8, ratio: number, parity: 'pass' | 'fail' = 'pass'): FleetEntry {
  return {
    op: 'linear', dtype: 'bf16', n: 4096, k: 4096, bucket, choice: 'gemv.rpb4',
    recorded_us: 10, measured_us: 10 * ratio, ratio, parity, reason: parity === 'fail' ? 'rel_err 0.5 > 0.01' : '',
  };
}

function node(name: string, ratios: number[], over: { parity?: 'fail'; identity?: Identity } = {}) {
  const entries = ratios.map((r, i) => entry(([1, 2, 4, 8] as const)[i]!, r, i === 0 && over.parity ? 'fail' : 'pass'));
  return nodeSummary(
    { node: { node: name, host: name, visible: null }, identity: over.identity ?? identity, table: 't.json', bounds: DEFAULT_BOUNDS, at: new Date('2026-12-01T00:00:00Z') },
    entries,
  );
}

test('the default bounds: geomean 1.10 of a node, 1.25 of any pick', () => {
  assert.equal({ ...DEFAULT_BOUNDS }, { geomean: 1.1, entry: 1.25 });
});

test('judgeEntries flags a pick past the entry bound, a geomean past its bound, and a parity failure, naming the shapes', () => {
  assert.equal(judgeEntries([entry(1, 1.0), entry(2, 1.05)], DEFAULT_BOUNDS).flags, []);
  const slowOne = judgeEntries([entry(1, 0.9), entry(2, 1.3)], DEFAULT_BOUNDS);
  assert.equal(slowOne.flags, ['slow: bf16 linear 4096x4096 m=2 gemv.rpb4 x1.300 its recorded median (> 1.25)']);
  assert.is(slowOne.worst, 1.3);
  const slowAll = judgeEntries([entry(1, 1.15), entry(2, 1.15)], DEFAULT_BOUNDS);
  assert.equal(slowAll.flags, ['slow overall: geomean x1.150 over 2 entries (> 1.1)']);
  const broken = judgeEntries([entry(1, 1.0, 'fail')], DEFAULT_BOUNDS);
  assert.equal(broken.flags, ['parity fail: bf16 linear 4096x4096 m=1 gemv.rpb4: rel_err 0.5 > 0.01']);
  const untimed = judgeEntries([{ ...entry(1, 1), measured_us: null, ratio: null }], DEFAULT_BOUNDS);
  assert.equal(untimed.flags, ['no entry could be timed against a recorded median']);
  assert.is(untimed.geomean, null);
});

test('a node summary is valid, and its verdict is pass or flagged by its own bounds', () => {
  const ok = node('a', [1.0, 0.98]);
  assert.ok(v.safeParse(FleetSummary, ok).success);
  assert.is(ok.verdict, 'pass');
  assert.is(ok.device, 'NVIDIA H200');
  assert.is(node('b', [1.0, 1.4]).verdict, 'flagged');
  const refused = refusedSummary({ node: { node: 'c', host: 'c', visible: '1' }, identity, table: 't.json', bounds: DEFAULT_BOUNDS, at: new Date() }, 'no table');
  assert.ok(v.safeParse(FleetSummary, refused).success);
  assert.equal([refused.verdict, refused.flags], ['refused', ['table refused: no table']]);
});

test('pooling a healthy fleet flags nobody', () => {
  const pooled = poolFleet([node('n1', [1.0, 1.02]), node('n2', [0.97, 1.05]), node('n3', [1.08, 1.0])], DEFAULT_BOUNDS);
  assert.equal(pooled.nodes.map((n) => [n.node, n.flags]), [['n1', []], ['n2', []], ['n3', []]]);
  assert.equal(pooled.identity, identity);
});

test('pooling flags the slow node and the node with a parity failure, naming their shapes, and no other', () => {
  const pooled = poolFleet([node('n1', [1.0, 1.0]), node('slow', [1.6, 1.4]), node('broken', [1.0, 1.0], { parity: 'fail' }), node('n4', [1.01, 0.99])], DEFAULT_BOUNDS);
  const flagged = pooled.nodes.filter((n) => n.flags.length > 0);
  assert.equal(flagged.map((n) => n.node), ['broken', 'slow']);
  const slow = flagged.find((n) => n.node === 'slow')!;
  assert.ok(slow.flags.some((f) => f.includes('bf16 linear 4096x4096 m=1') && f.includes('x1.600')), slow.flags.join('\n'));
  assert.ok(slow.flags.some((f) => f.startsWith('slow overall: geomean x1.497')), slow.flags.join('\n'));
  assert.match(flagged.find((n) => n.node === 'broken')!.flags.join('\n'), /parity fail: bf16 linear 4096x4096 m=1 gemv\.rpb4/);
});

test("the pool judges with its own bounds, not the node's", () => {
  const s = node('n', [1.2, 1.2]);
  assert.is(s.verdict, 'flagged');
  assert.equal(poolFleet([s], { geomean: 1.3, entry: 1.5 }).nodes[0]!.flags, []);
});

test("a node whose identity is not the fleet's most common one is flagged, naming the fields", () => {
  const other = { ...identity, runtime: 'cuda 12.8' };
  const pooled = poolFleet([node('a', [1]), node('b', [1]), node('c', [1], { identity: other })], DEFAULT_BOUNDS);
  assert.equal(pooled.nodes.map((n) => n.flags.length), [0, 0, 1]);
  assert.is(pooled.nodes[2]!.flags[0], `identity differs from the fleet's: runtime "cuda 12.8" (fleet: "cuda 13.0")`);
});

test('a refused table flags the node; a node summarised twice counts once, the last one', () => {
  const refused = refusedSummary({ node: { node: 'r', host: 'r', visible: null }, identity, table: 't.json', bounds: DEFAULT_BOUNDS, at: new Date() }, 'other device');
  const pooled = poolFleet([node('a', [1.5]), refused, node('a', [1.0])], DEFAULT_BOUNDS);
  assert.equal(pooled.nodes.map((n) => [n.node, n.flags]), [['a', []], ['r', ['table refused: other device']]]);
  assert.equal(pooled.repeated, ['a']);
});

test('parseSummaries reads JSON lines and names each line that is not a summary', () => {
  const text = `${JSON.stringify(node('a', [1]))}\n\n${JSON.stringify(node('b', [1]))}\nnot json\n{"kind":"shape"}\n`;
  const { summaries, errors } = parseSummaries(text, 'f.jsonl');
  assert.equal(summaries.map((s) => s.node), ['a', 'b']);
  assert.is(errors.length, 2);
  assert.match(errors[0]!, /^f\.jsonl:4: not JSON/);
  assert.match(errors[1]!, /^f\.jsonl:5: not a fleet-check summary \(kind: /);
});

test('nodeName: --node wins, else the host name with the visible GPUs when a variable selects them', () => {
  assert.is(nodeName('gpu-07', { CUDA_VISIBLE_DEVICES: '1' }).node, 'gpu-07');
  const cuda = nodeName(undefined, { CUDA_VISIBLE_DEVICES: '1' });
  assert.is(cuda.node, `${cuda.host}/gpu1`);
  assert.is(cuda.visible, '1');
  assert.is(nodeName(undefined, { HIP_VISIBLE_DEVICES: '3' }).node.endsWith('/gpu3'), true);
  const plain = nodeName(undefined, {});
  assert.equal([plain.node, plain.visible], [plain.host, null]);
});

test('shapeLabel names a shape as the flags do', () => {
  assert.is(shapeLabel(entry(4, 1)), 'bf16 linear 4096x4096 m=4');
});

test.run();
