import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { decodeLinears, findModel, linearsForDtype, linearsOf, modelNames, parseDtypes, parseRows, parseShapes, uniqueShapes } from '../lib/models.ts';

const shapes = (name: string) => decodeLinears(findModel(name)).map((l) => `${l.name} ${l.op} ${l.n}x${l.k}`);

test('Llama-3.1-8B yields its decode linears with N and K from the published config', () => {
  assert.equal(shapes('Llama-3.1-8B'), [
    'qkv linear 6144x4096',
    'o linear 4096x4096',
    'gate_up gated 14336x4096',
    'down linear 4096x14336',
    'lm_head linear 128256x4096',
  ]);
});

test('Qwen3-0.6B has q heads wider than hidden: o reads heads*head_dim = 2048', () => {
  assert.equal(shapes('Qwen3-0.6B'), [
    'qkv linear 4096x1024',
    'o linear 1024x2048',
    'gate_up gated 3072x1024',
    'down linear 1024x3072',
    'lm_head linear 151936x1024',
  ]);
});

test('every preset keeps the numbers serve-bench needs', () => {
  const q8 = findModel('Qwen3-8B');
  assert.equal([q8.hidden, q8.intermediate, q8.heads, q8.kvHeads, q8.headDim, q8.vocab, q8.layers], [4096, 12288, 32, 8, 128, 151936, 36]);
  const q4 = findModel('Qwen3-4B');
  assert.equal([q4.hidden, q4.intermediate, q4.heads, q4.kvHeads, q4.headDim, q4.vocab, q4.layers], [2560, 9728, 32, 8, 128, 151936, 36]);
  const q17 = findModel('Qwen3-1.7B');
  assert.equal([q17.hidden, q17.intermediate, q17.heads, q17.kvHeads, q17.headDim, q17.vocab, q17.layers], [2048, 6144, 16, 8, 128, 151936, 28]);
  assert.equal(findModel('Llama-3.1-8B').layers, 32);
});

test('a moe preset: attention as a dense model, its MLP the router (hidden -> E) and the routed experts keyed by E and top-k', () => {
  assert.equal(shapes('Qwen3-30B-A3B'), [
    'qkv linear 5120x2048',
    'o linear 2048x4096',
    'router linear 128x2048',
    'experts moe 768x2048',
    'lm_head linear 151936x2048',
  ]);
  const experts = decodeLinears(findModel('Qwen3-30B-A3B')).find((l) => l.op === 'moe')!;
  assert.equal([experts.experts, experts.topk], [128, 8]);
  const q30 = findModel('Qwen3-30B-A3B');
  assert.equal([q30.hidden, q30.intermediate, q30.heads, q30.kvHeads, q30.headDim, q30.vocab, q30.layers, q30.rmsEps], [2048, 768, 32, 4, 128, 151936, 48, 1e-6]);
  const mix = findModel('Mixtral-8x7B-v0.1');
  assert.equal([mix.hidden, mix.intermediate, mix.heads, mix.kvHeads, mix.headDim, mix.vocab, mix.layers, mix.rmsEps, mix.moe], [4096, 14336, 32, 8, 128, 32000, 32, 1e-5, { experts: 8, topk: 2 }]);
  assert.equal(shapes('Mixtral-8x7B-v0.1').slice(2, 4), ['router linear 8x4096', 'experts moe 14336x4096']);
  // tiny-moe: every linear, and all its experts together, small enough for tests
  const tiny = decodeLinears(findModel('tiny-moe'));
  assert.ok(tiny.every((l) => l.n * l.k * (l.op === 'moe' ? 3 * l.experts! : 1) <= 4 * 2048 * 256), JSON.stringify(tiny));
  // uniqueShapes keeps two moe shapes apart when only their E or top-k differ
  const one = tiny.find((l) => l.op === 'moe')!;
  assert.is(uniqueShapes([one, { ...one, topk: 1 }, { ...one }]).length, 2);
});

test('model names match case-insensitively; an unknown one lists the known ones', () => {
  assert.is(findModel('qwen3-0.6b').name, 'Qwen3-0.6B');
  assert.throws(() => findModel('gpt-5'), (e: Error) => e.message.includes("unknown model 'gpt-5'") && modelNames().every((n) => e.message.includes(n)));
});

test('the tiny preset stays small enough for tests', () => {
  for (const l of decodeLinears(findModel('tiny'))) assert.ok(l.n * l.k <= 2048 * 256, `${l.name} too large`);
});

test('--shapes parses NxK lists into linear shapes and rejects anything else', () => {
  assert.equal(parseShapes('4096x4096, 1024x4096'), [
    { name: '4096x4096', op: 'linear', n: 4096, k: 4096 },
    { name: '1024x4096', op: 'linear', n: 1024, k: 4096 },
  ]);
  for (const bad of ['4096', '0x16', '16x', 'ax3', '16x16,', '16x99999999']) {
    assert.throws(() => parseShapes(bad), /^--shapes (must be a comma-separated list|'.*' is not NxK)/, bad);
  }
});

test('--rows parses buckets, sorted and without repeats; a non-bucket is an error naming the buckets', () => {
  assert.equal(parseRows('8,1,2,2'), [1, 2, 8]);
  assert.equal(parseRows(4), [4]);
  assert.throws(() => parseRows('1,3'), /rows '3' is not a bucket; buckets are 1, 2, 4, 8, 16, 32, 64, 128/);
  assert.throws(() => parseRows('1,,2'), /empty items/);
  assert.throws(() => parseRows('256'), /not a bucket/);
  assert.throws(() => parseRows('1.5'), /not a bucket/);
});

test('--dtype parses bf16, fp16 and fp8 only', () => {
  assert.equal(parseDtypes('bf16,fp16,bf16'), ['bf16', 'fp16']);
  assert.equal(parseDtypes('fp8'), ['fp8']);
  assert.throws(() => parseDtypes('fp32'), /dtype 'fp32' is not one of bf16, fp16, fp8/);
});

test('an fp8 sweep measures the layer linears only: an fp8 model keeps lm_head in bf16', () => {
  const linears = decodeLinears(findModel('Llama-3.1-8B'));
  assert.equal(linearsForDtype(linears, 'fp8').map((l) => l.name), ['qkv', 'o', 'gate_up', 'down']);
  assert.equal(linearsForDtype(linears, 'bf16'), linears);
  const shapes = parseShapes('128256x4096');
  assert.equal(linearsForDtype(shapes, 'fp8'), shapes, '--shapes entries are measured as given');
});

test('uniqueShapes keeps the first linear of each (op, N, K)', () => {
  const kept = uniqueShapes([
    { name: 'a', op: 'linear', n: 8, k: 8 },
    { name: 'b', op: 'gated', n: 8, k: 8 },
    { name: 'c', op: 'linear', n: 8, k: 8 },
  ]);
  assert.equal(kept.map((l) => l.name), ['a', 'b']);
});

test('--model takes several presets: their shapes once each, in preset order; an unknown name is an error', () => {
  const llama = linearsOf('Llama-3.1-8B', undefined);
  const qwen = linearsOf('Qwen3-8B', undefined);
  const both = linearsOf('Llama-3.1-8B,Qwen3-8B', undefined);
  assert.equal(both, uniqueShapes([...llama, ...qwen]));
  assert.ok(both.length < llama.length + qwen.length, 'the two presets share a shape, swept once');
  assert.equal(both.slice(0, llama.length), llama);
  assert.throws(() => linearsOf('Llama-3.1-8B,nope', undefined), /unknown model 'nope'/);
  assert.throws(() => linearsOf('nope', '64x64'), /unknown model 'nope'/);
});

test.run();
