// lib/peer-summary.ts: the bytes of a step, the join of serve-bench's rows with
// the peer's, and the bandwidth limit, on hand-made JSON lines.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { findModel } from '../lib/models.ts';
import { buildSummary, parseLines, stepBytes, summaryMarkdown } from '../lib/peer-summary.ts';
import { dimsOf } from '../lib/serve.ts';

const dims = (name: string, layers: number) => dimsOf(findModel(name), { layers, maxBatch: 1, context: 0, maxNew: 1, dtype: 'bf16' });

test('a Llama-3.1-8B step reads its 16 GB of weights and its rows KV up to their positions', () => {
  const b = stepBytes(dims('Llama-3.1-8B', 32), 1, 256, 32);
  // 8.03e9 parameters, minus the embedding table that only gives one row
  assert.ok(b.weights > 15.0e9 && b.weights < 15.1e9, String(b.weights));
  // 32 layers x 8 kv heads x 128 dims x k and v x 2 bytes x 272.5 positions
  assert.is(b.kv, 32 * 8 * 128 * 2 * 2 * 272.5);
  assert.is(b.total, b.weights + b.kv);
  // KV grows with the rows, the weights hardly
  const b64 = stepBytes(dims('Llama-3.1-8B', 32), 64, 256, 32);
  assert.is(b64.kv, 64 * b.kv);
  assert.ok(b64.weights - b.weights === 63 * 4096 * 2);
});

const serveLine = (model: string, c: number, d: number | null, t: number | null) =>
  JSON.stringify({ kind: 'row', model, layers: 32, c, context: 256, steps: 32, default: { tok_s: d }, table: { tok_s: t }, ratio: null });
const peerLine = (model: string, c: number, arm: string, tok: number, context = 256) =>
  JSON.stringify({ kind: 'row', model, c, arm, context, steps: 32, tok_s: tok, device: 'NVIDIA H200' });

test('each serve-bench row is joined with both peer arms, ratios and shares of the limit', () => {
  const parsed = parseLines([
    { name: 'serve', text: [JSON.stringify({ kind: 'setup', model: 'Llama-3.1-8B', table: { used: true } }), serveLine('Llama-3.1-8B', 1, 220, 240), serveLine('Llama-3.1-8B', 64, 9000, 9100), ''].join('\n') },
    { name: 'peer', text: [JSON.stringify({ kind: 'ceiling', read_gb_s: 4000 }), peerLine('Llama-3.1-8B', 1, 'eager', 200), peerLine('Llama-3.1-8B', 1, 'compiled', 230)].join('\n') },
  ]);
  const rows = buildSummary(parsed, dims, { commit: 'abc', device: 'NVIDIA H200' });
  assert.is(rows.length, 2);
  const [r1, r64] = rows;
  assert.equal([r1!.kpick_default_tok_s, r1!.kpick_table_tok_s, r1!.peer_eager_tok_s, r1!.peer_compiled_tok_s], [220, 240, 200, 230]);
  assert.is(r1!.table_vs_compiled, 240 / 230);
  assert.is(r1!.default_vs_compiled, 220 / 230);
  assert.is(r1!.table_used, true);
  const limit = (4000e9) / stepBytes(dims('Llama-3.1-8B', 32), 1, 256, 32).total;
  assert.ok(Math.abs(r1!.limit_tok_s! - limit) < 1e-9);
  assert.ok(Math.abs(r1!.kpick_table_bw_pct! - (100 * 240) / limit) < 1e-9);
  // no peer row at c=64: its columns are null, kpick's stay
  assert.is(r64!.peer_compiled_tok_s, null);
  assert.is(r64!.table_vs_compiled, null);
  assert.is(r64!.kpick_table_tok_s, 9100);
  assert.match(summaryMarkdown(rows), /\| Llama-3.1-8B \| 1 \| 220 \| 240 \| 200 \| 230 \| 0.96 \| 1.04 \|/);
});

test('without a ceiling line there is no limit, and no share of it', () => {
  const rows = buildSummary(parseLines([{ name: 's', text: serveLine('Qwen3-0.6B', 4, 100, 120) }]), dims, { commit: 'x', device: 'd' });
  assert.is(rows[0]!.limit_tok_s, null);
  assert.is(rows[0]!.kpick_table_bw_pct, null);
  assert.is(rows[0]!.table_used, null);
});

test('a peer row at another context is refused, not joined', () => {
  const parsed = parseLines([{ name: 's', text: serveLine('Qwen3-0.6B', 4, 100, 120) }, { name: 'p', text: peerLine('Qwen3-0.6B', 4, 'compiled', 90, 512) }]);
  assert.throws(() => buildSummary(parsed, dims, { commit: 'x', device: 'd' }), /context 512/);
});

test('several peer runs: each arm counts its fastest, and the summary keeps how many and the slowest', () => {
  const parsed = parseLines([
    { name: 'serve', text: serveLine('Qwen3-0.6B', 1, 790, 1390) },
    { name: 'peer-call3', text: [JSON.stringify({ kind: 'ceiling', read_gb_s: 4594 }), peerLine('Qwen3-0.6B', 1, 'eager', 236), peerLine('Qwen3-0.6B', 1, 'compiled', 893)].join('\n') },
    { name: 'peer-call4', text: [JSON.stringify({ kind: 'ceiling', read_gb_s: 4496 }), peerLine('Qwen3-0.6B', 1, 'eager', 235), peerLine('Qwen3-0.6B', 1, 'compiled', 630)].join('\n') },
    { name: 'peer-call6', text: peerLine('Qwen3-0.6B', 1, 'compiled', 587) },
  ]);
  // the highest ceiling: the largest limit, so no call's share is overstated
  assert.is(parsed.ceiling!.read_gb_s, 4594);
  const [r] = buildSummary(parsed, dims, { commit: 'x', device: 'd' });
  assert.is(r!.peer_compiled_tok_s, 893);
  assert.is(r!.peer_eager_tok_s, 236);
  assert.is(r!.peer_compiled_runs, 3);
  assert.is(r!.peer_compiled_least_tok_s, 587);
  assert.is(r!.default_vs_compiled, 790 / 893);
  assert.match(summaryMarkdown([r!]), /\| 236 \| 893 \(slowest of 3: 587\) \| 0\.88 \| 1\.56 \|/);
  // one run: the cell is the figure alone
  const one = buildSummary(parseLines([{ name: 's', text: serveLine('Qwen3-0.6B', 1, 790, 1390) }, { name: 'p', text: peerLine('Qwen3-0.6B', 1, 'compiled', 630) }]), dims, { commit: 'x', device: 'd' });
  assert.is(one[0]!.peer_compiled_runs, 1);
  assert.match(summaryMarkdown(one), /\| - \| 630 \| 1\.25 \|/);
});

test('the fastest compiled run names the torch.compile cache it loaded; a fresh compile or an older peer, none', () => {
  const cached = JSON.stringify({ kind: 'row', model: 'Qwen3-0.6B', c: 1, arm: 'compiled', context: 256, steps: 32, tok_s: 890, compile_cache: '0123456789abcdef' });
  const fresh = JSON.stringify({ kind: 'row', model: 'Qwen3-0.6B', c: 1, arm: 'compiled', context: 256, steps: 32, tok_s: 600, compile_cache: null });
  const meta = { commit: 'x', device: 'd' };
  const both = buildSummary(parseLines([{ name: 's', text: serveLine('Qwen3-0.6B', 1, 800, 1300) }, { name: 'p', text: [fresh, cached].join('\n') }]), dims, meta);
  assert.is(both[0]!.peer_compiled_cache, '0123456789abcdef');
  assert.is(both[0]!.peer_compiled_tok_s, 890);
  const older = buildSummary(parseLines([{ name: 's', text: serveLine('Qwen3-0.6B', 1, 800, 1300) }, { name: 'p', text: peerLine('Qwen3-0.6B', 1, 'compiled', 700) }]), dims, meta);
  assert.is(older[0]!.peer_compiled_cache, null);
});

test('a slower peer run at another context is refused too, not skipped for the fastest', () => {
  const parsed = parseLines([
    { name: 's', text: serveLine('Qwen3-0.6B', 4, 100, 120) },
    { name: 'p', text: [peerLine('Qwen3-0.6B', 4, 'compiled', 90), peerLine('Qwen3-0.6B', 4, 'compiled', 80, 512)].join('\n') },
  ]);
  assert.throws(() => buildSummary(parsed, dims, { commit: 'x', device: 'd' }), /context 512/);
});

test('a line that is not JSON, or a row of neither kind, names its source and line', () => {
  assert.throws(() => parseLines([{ name: 'peer.jsonl', text: '{"kind":"ceiling","read_gb_s":4000}\nnot json' }]), /peer\.jsonl:2: not JSON/);
  assert.throws(() => parseLines([{ name: 'x', text: '{"kind":"row","model":"m"}' }]), /x:1: a row of neither/);
  assert.throws(() => parseLines([{ name: 'x', text: '{"kind":"ceiling","read_gb_s":0}' }]), /x:1: a ceiling line/);
});

test.run();
