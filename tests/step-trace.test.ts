// lib/step-trace.ts: kernel-trace lines read back as a step's per-op timeline,
// on hand-made traces of a one-layer step.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { findModel } from '../lib/models.ts';
import { dimsOf } from '../lib/serve.ts';
import { labelStep, launchesOf, opBytes, parseTrace, timelineMarkdown, timelines } from '../lib/step-trace.ts';

const EMBED = '_Z15kp_embed_kernelILi0EEvPKtPKiPfll';
const NORM = '_Z21kp_add_rmsnorm_kernelILi0ELi1EEvPfPKtS2_Ptlf';
const GEMV = '_Z14kp_gemv_kernelILi0ELi1ELi16ELb1EEvPKtS1_Ptll';
const GATED = '_Z20kp_gated_gemv_kernelILi0ELi1ELi8ELb1EEvPKtS1_Ptll';
const ATTN = '_Z19kp_attention_kernelILi0ELi128ELi1EEvPKtPKiPtS3_S3_PjPfS5_iiiff';
const ATTN_MMA = '_Z23kp_attention_mma_kernelILi0ELi128ELi4ELi2EEvPKtPKiPtS4_S4_PjPfS6_iiiff';
const ARGMAX = '_Z16kp_argmax_kernelILi0EEvPKtllPiS2_PjPfS2_';
const NVJET = 'nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT';
const SILU = '_Z18kp_silu_mul_kernelILi0EEvPKtPtll';

/** a trace line: start and end in us from t0 (written in ns), graph g, attention rows in grid y */
const line = (g: number, t0: number, s: number, e: number, name: string, gy = 1) =>
  `${(t0 + s) * 1000} ${(t0 + e) * 1000} ${g} 0 19 4 ${gy} 1 128 ${name}`;

/** one step of one layer, kpick's linears, PDL overlaps (each kernel starts before the last ends) */
const step = (g: number, t0: number) =>
  [
    line(g, t0, 0, 2, EMBED),
    line(g, t0, 1, 5, NORM), // exposed 3
    line(g, t0, 4, 15, GEMV), // qkv: 10
    line(g, t0, 14, 22, ATTN), // 7
    line(g, t0, 20, 30, GEMV), // o: 8
    line(g, t0, 29, 34, NORM), // 4
    line(g, t0, 33, 90, GATED), // gate_up: 56
    line(g, t0, 88, 120, GEMV), // down: 30
    line(g, t0, 119, 123, NORM), // final: 3
    line(g, t0, 122, 360, GEMV), // lm_head: 237
    line(g, t0, 355, 365, ARGMAX), // 5
  ].join('\n');

test('each kernel of a step is named by its place: the norms, linears and attention of a layer, then the head', () => {
  const ks = parseTrace(step(5, 0));
  assert.equal(labelStep(ks), ['embed', 'norm_attn', 'qkv', 'attention', 'o', 'norm_mlp', 'gate_up', 'down', 'norm_final', 'lm_head', 'argmax']);
});

test('the tensor-core attention kernel is the attention too, and its grid y the rows', () => {
  const ks = parseTrace(step(5, 0).replace(ATTN, ATTN_MMA).replace(`4 1 1 128 ${ATTN_MMA}`, `4 64 1 128 ${ATTN_MMA}`));
  assert.equal(labelStep(ks), ['embed', 'norm_attn', 'qkv', 'attention', 'o', 'norm_mlp', 'gate_up', 'down', 'norm_final', 'lm_head', 'argmax']);
});

test("the vendor's gated call (gemm, then silu-mul) is gate_up, its split-K reduce is down's", () => {
  const ks = parseTrace(
    [EMBED, NORM, NVJET, ATTN, NVJET, NORM, NVJET, SILU, NVJET, '_ZN8cublasLt19splitKreduce_kernelILi32E', NORM, NVJET, ARGMAX]
      .map((n, i) => line(2, 0, i * 10, i * 10 + 5, n))
      .join('\n'),
  );
  assert.equal(labelStep(ks), ['embed', 'norm_attn', 'qkv', 'attention', 'o', 'norm_mlp', 'gate_up', 'gate_up', 'down', 'down', 'norm_final', 'lm_head', 'argmax']);
  assert.is(timelines(ks, 0)[0]!.kpick_linears, false);
});

test("exposed times (each end minus the latest end before it) sum to the step's span; PDL starts show as negative gaps", () => {
  const [t] = timelines(parseTrace([step(5, 0), step(5, 1000), step(5, 2000)].join('\n')));
  assert.ok(t);
  assert.is(t.launches, 2, 'the first launch is left out');
  assert.is(t.step_us, 365);
  assert.equal(
    t.ops.map((o) => [o.op, o.exposed_us]),
    [['embed', 2], ['norm_attn', 3], ['qkv', 10], ['attention', 7], ['o', 8], ['norm_mlp', 4], ['gate_up', 56], ['down', 30], ['norm_final', 3], ['lm_head', 237], ['argmax', 5]],
  );
  const qkv = t.ops.find((o) => o.op === 'qkv')!;
  assert.is(qkv.duration_us, 11, 'its own start-to-end overlaps the norm before it');
  assert.is(qkv.start_gap_us, -1);
  assert.is(t.ops.reduce((s, o) => s + o.exposed_us, 0), t.step_us);
  assert.is(t.kpick_linears, true);
});

test('graphs are told apart, each with its rows from the attention grid', () => {
  const text = [step(5, 0), step(5, 1000), line(8, 5000, 0, 2, EMBED), line(8, 5000, 1, 9, ATTN, 64)].join('\n');
  const all = launchesOf(parseTrace(text));
  assert.equal([...all.keys()], [5, 8]);
  const ts = timelines(parseTrace(text), 0);
  assert.equal(ts.map((t) => [t.graph, t.rows, t.launches]), [[5, 1, 2], [8, 64, 1]]);
});

test('a line that is not a kernel-trace line names its source and line; comments and blanks pass', () => {
  assert.is(parseTrace('# CUPTI note\n\n' + line(1, 0, 0, 1, EMBED)).length, 1);
  assert.throws(() => parseTrace(`${line(1, 0, 0, 1, EMBED)}\n12 x 1 0 0 1 1 1 1 k`, 't.txt'), /t\.txt:2: not a kernel-trace line/);
  assert.throws(() => parseTrace('20 10 1 0 0 1 1 1 1 k'), /:1: not a kernel-trace line/, 'an end before its start');
});

test("the read floor: a Llama-3.1-8B step's linears read its 15 GB of layer and head weights, the attention its KV", () => {
  const d = dimsOf(findModel('Llama-3.1-8B'), { layers: 32, maxBatch: 1, context: 0, maxNew: 1, dtype: 'bf16' });
  const b = opBytes(d, 1, 260);
  assert.is(b.qkv, 32 * 2 * 6144 * 4096);
  assert.is(b.gate_up, 32 * 2 * 2 * 14336 * 4096);
  assert.is(b.lm_head, 2 * 128256 * 4096);
  assert.is(b.attention, 32 * 2 * 2 * 8 * 128 * 260);
  const [t] = timelines(parseTrace([step(5, 0), step(5, 1000)].join('\n')));
  const md = timelineMarkdown(t!, { qkv: 4597e3 * 8 }, 4597, 1);
  assert.match(md, /\| qkv \| 1 \| 10\.0 \| 10\.0 \| 11\.00 \| -1\.00 \| 8\.0 \| 1\.25 \|/);
});

test.run();
