// lib/serve.ts and the decode model of lib/model-ffi.ts on the CPU library: the
// model's dims and memory, the step (determinism, bitwise classes, the fp64
// step check, its limits), and the bench's pure parts (concurrency lists,
// identity judgement, run summaries, route arms).
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_BUILD_DIR, KpickError, loadKpick, takesDtype } from '../lib/ffi.ts';
import { LINEAR_KINDS, NativeModels, type Model, type ModelDims } from '../lib/model-ffi.ts';
import { findModel } from '../lib/models.ts';
import { buildOf, loadRoute } from '../lib/route.ts';
import {
  checkFit,
  differences,
  dimsOf,
  judgeIdentity,
  parseConcurrency,
  routeArm,
  summarizeArm,
  type ArmRoute,
  type Difference,
  type TimedRun,
} from '../lib/serve.ts';

const kpick = loadKpick({ lib: process.env.KPICK_LIB || join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so') });
const native = new NativeModels(kpick);
const space = kpick.candidates();
const tiny = findModel('tiny');
const id = (name: string) => kpick.candidate(name).id;
const DIMS: ModelDims = dimsOf(tiny, { layers: 2, maxBatch: 4, context: 40, maxNew: 6, dtype: 'bf16' });

/** candidate ids for [qkv, o, gate_up, down, lm_head]: one linear candidate everywhere but gate_up */
function cands(linear: string, gated: string): Int32Array {
  return Int32Array.from(LINEAR_KINDS.map((k) => id(k === 'gate_up' ? gated : linear)));
}
const PLAIN = cands('plain', 'gated.plain');

function withModel<T>(dims: ModelDims, fn: (m: Model) => T, seed = 7): T {
  const m = native.create(dims, seed);
  try {
    return fn(m);
  } finally {
    if (!m.freed) m.free();
  }
}

function rejects(fn: () => unknown, status: number, message: RegExp): void {
  try {
    fn();
  } catch (err) {
    assert.instance(err, KpickError);
    assert.is((err as KpickError).status, status, (err as Error).message);
    assert.match((err as Error).message, message);
    return;
  }
  assert.unreachable(`expected an error matching ${message}`);
}

const decode = (m: Model, ids: Int32Array, batch: number, steps: number) => {
  const out: number[][] = [];
  for (let s = 0; s < steps; s++) out.push(Array.from(m.step(ids, batch)));
  return out;
};

// ---- dims and memory ----

test('parseConcurrency sorts, drops repeats and refuses what is not 1..128', () => {
  assert.equal(parseConcurrency('64,1,8,8'), [1, 8, 64]);
  assert.equal(parseConcurrency(4), [4]);
  const refused = (says: string) => (e: unknown) => e instanceof Error && e.message === says;
  for (const bad of ['0', '129', 'x', '2.5', '-1']) assert.throws(() => parseConcurrency(bad), refused(`--c '${bad}' is not an integer in 1..128`), bad);
  for (const bad of ['1,,4', '']) assert.throws(() => parseConcurrency(bad), refused(`--c must be a comma-separated list of concurrencies, got '${bad}'`), bad);
});

test('dimsOf takes the preset and its config extras: tied embeddings and rope base', () => {
  assert.is(dimsOf(findModel('Qwen3-0.6B'), { layers: 1, maxBatch: 1, context: 1, maxNew: 1, dtype: 'bf16' }).tied, true);
  const llama = dimsOf(findModel('Llama-3.1-8B'), { layers: 32, maxBatch: 8, context: 256, maxNew: 64, dtype: 'fp16' });
  assert.equal([llama.tied, llama.ropeTheta, llama.hidden, llama.kvHeads, llama.vocab, llama.dtype], [false, 500000, 4096, 8, 128256, 'fp16']);
  assert.equal([DIMS.hidden, DIMS.intermediate, DIMS.heads, DIMS.kvHeads, DIMS.headDim, DIMS.layers, DIMS.maxBatch], [256, 512, 4, 2, 64, 2, 4]);
});

test('model bytes grow with layers, batch and positions, and a tied lm_head costs no table', () => {
  const base = native.bytes(DIMS);
  assert.ok(native.bytes({ ...DIMS, layers: 3 }) > base);
  assert.ok(native.bytes({ ...DIMS, maxBatch: 8 }) > base);
  assert.ok(native.bytes({ ...DIMS, context: 400 }) > base);
  const table = tiny.vocab * tiny.hidden * 2;
  assert.is(native.bytes({ ...DIMS, tied: false }) - native.bytes({ ...DIMS, tied: true }), table);
  // Llama-3.1-8B's weights alone are 16 GB: the estimate is at least that, computed without allocating
  const llama = dimsOf(findModel('Llama-3.1-8B'), { layers: 32, maxBatch: 64, context: 256, maxNew: 256, dtype: 'bf16' });
  assert.ok(native.bytes(llama) > 16e9, String(native.bytes(llama)));
});

test('checkFit names the most layers and the largest batch that fit, and both really fit', () => {
  const dims = { ...DIMS, layers: 2, maxBatch: 4 };
  const budget = (native.bytes({ ...dims, layers: 1 }) + native.bytes(dims)) / 2;
  const fit = checkFit(native, tiny, dims, budget, 'free');
  assert.is(fit.fits, false);
  if (fit.fits) return;
  assert.match(fit.message, /^tiny \(2 layers, batch 4, 46 positions\) needs \d+\.\d MiB, \d+\.\d MiB free; would fit: --layers 1/);
  // a budget between batch 3 and 4 of every layer: fewer rows fit, and the largest that does is named
  const short = (native.bytes({ ...dims, maxBatch: 3 }) + native.bytes(dims)) / 2;
  const fewer = checkFit(native, tiny, dims, short, 'free');
  const batch = Number((!fewer.fits && /--c up to (\d+) \(all 2 layers\)/.exec(fewer.message)?.[1]) || 0);
  assert.is(batch, 3, fewer.fits ? 'fits' : fewer.message);
  assert.ok(native.bytes({ ...dims, maxBatch: batch }) <= short);
  assert.ok(native.bytes({ ...dims, maxBatch: batch + 1 }) > short);
  assert.equal(checkFit(native, tiny, dims, native.bytes(dims), 'free'), { fits: true, bytes: native.bytes(dims) });
  const none = checkFit(native, tiny, dims, 1000, 'free');
  assert.ok(!none.fits && /nothing would fit/.test(none.message));
});

test('model creation refuses bad dims and a model larger than free memory, naming what fits', () => {
  rejects(() => native.create({ ...DIMS, heads: 3 }, 1), 1, /heads \(3\) must be a multiple of kv_heads \(2\)/);
  rejects(() => native.create({ ...DIMS, headDim: 60 }, 1), 1, /head_dim must be a multiple of 8/);
  rejects(() => native.create({ ...DIMS, maxBatch: 129 }, 1), 1, /max_batch must be in 1\.\.128/);
  rejects(() => native.create({ ...DIMS, context: 8000, maxNew: 300 }, 1), 1, /context must be in 0\.\.7892/);
  rejects(() => native.create({ ...DIMS, rmsEps: 0 }, 1), 1, /rms_eps/);
  // 2^24 x 2^20 embedding: far past any machine, refused before any allocation
  rejects(() => native.create({ ...DIMS, hidden: 1 << 20, vocab: 1 << 24 }, 1), 2, /needs [\d.]+ GiB of memory .* GiB free; /);
});

test('model dims that are no int32 integers are refused by name, not wrapped or truncated into another model', () => {
  const refused = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  // koffi stored 2^32 + hidden as hidden: the bytes of another model than the dims said
  assert.throws(() => native.bytes({ ...DIMS, hidden: 2 ** 32 + DIMS.hidden }), refused(/^dims\.hidden must be an integer, got 4294967\d+$/));
  assert.throws(() => native.create({ ...DIMS, maxBatch: 2 ** 32 + 2 }, 1), refused(/^dims\.maxBatch must be an integer/));
  assert.throws(() => native.bytes({ ...DIMS, vocab: DIMS.vocab + 0.5 }), refused(/^dims\.vocab must be an integer, got \d+\.5$/));
  assert.throws(() => native.bytes({ ...DIMS, layers: undefined } as unknown as ModelDims), refused(/^dims\.layers must be an integer, got undefined$/));
});

// ---- the step ----

test('a reset with one seed gives the same greedy tokens twice; another seed other tokens', () => {
  withModel(DIMS, (m) => {
    m.reset(11);
    const a = decode(m, PLAIN, 4, 6);
    m.reset(11);
    const b = decode(m, PLAIN, 4, 6);
    m.reset(12);
    const c = decode(m, PLAIN, 4, 6);
    assert.equal(a, b);
    assert.not.equal(a, c);
    for (const t of a.flat()) assert.ok(Number.isInteger(t) && t >= 0 && t < tiny.vocab, String(t));
    // four rows start from four random prompts: they do not all decode the same sequence
    assert.ok(new Set(a.map((row) => row.join(','))).size > 1 || new Set(a[0]).size > 1);
  });
});

test('candidates of the default bitwise class decode exactly the same tokens', () => {
  withModel(DIMS, (m) => {
    const seqs = [PLAIN, cands('rowblk.r4', 'gated.rowblk.r4'), cands('threads.t2', 'gated.threads.t2')].map((ids) => {
      m.reset(3);
      return decode(m, ids, 4, 6);
    });
    assert.equal(seqs[1], seqs[0]);
    assert.equal(seqs[2], seqs[0]);
  });
});

test('a row decodes the same tokens whatever the batch around it', () => {
  withModel(DIMS, (m) => {
    m.reset(5);
    const alone = decode(m, PLAIN, 1, 5).map((r) => r[0]);
    m.reset(5);
    const batched = decode(m, PLAIN, 4, 5).map((r) => r[0]);
    assert.equal(batched, alone);
  });
});

test('more (candidates, batch) pairs than cached graphs: evicted ones are captured again, same tokens', () => {
  withModel(DIMS, (m) => {
    const linears = ['plain', 'rowblk.r2', 'rowblk.r4', 'rowblk.r8', 'threads.t2'];
    const first = () => {
      m.reset(21);
      return decode(m, PLAIN, 2, 3);
    };
    const before = first();
    for (const linear of linears) {
      for (const batch of [1, 2, 3, 4]) {
        m.reset(21);
        const got = decode(m, cands(linear, 'gated.plain'), batch, 2);
        // a bitwise-class route decodes each row as the default does
        assert.equal(got.map((r) => r[0]), before.slice(0, 2).map((r) => r[0]), `${linear} batch ${batch}`);
      }
    }
    assert.equal(first(), before);
  });
});

test('one whole step matches its fp64 forward on the host, for the default and a split-K route', () => {
  withModel({ ...DIMS, dtype: 'fp16' }, (m) => {
    for (const ids of [PLAIN, cands('splitk.s4', 'gated.splitk.s4')]) {
      m.reset(9);
      const r = m.check(ids, 3);
      assert.ok(r.pass, `rel err ${r.relErr} > ${r.tol}`);
      assert.ok(r.relErr > 0 && r.tol === 2 ** -8, `${r.relErr} ${r.tol}`);
    }
  });
});

// fp8: the layer linears' weights in e4m3 with row scales, lm_head and everything else bf16
/** ids of a dense fp8 model's step from [qkv, o, gate_up, down, lm_head]: router and experts -1 (a dense model has none) */
const fp8Ids = (names: string[]) => Int32Array.from([...names.map(id), -1, -1]);
const FP8 = { w8a8: fp8Ids(['w8a8.plain', 'w8a8.plain', 'gated.w8a8.plain', 'w8a8.plain', 'plain']), w8a16: fp8Ids(['w8a16.rowblk.r4', 'w8a16.plain', 'gated.w8a16.rowblk.r4', 'w8a16.plain', 'rowblk.r4']) };

test('fp8 model: one whole step matches its fp64 forward from the dequantized weights, W8A16 at bf16\'s bound, W8A8 at its wiring bound', () => {
  withModel({ ...DIMS, dtype: 'fp8' }, (m) => {
    for (const batch of [1, 3]) {
      m.reset(9);
      const w8a16 = m.check(FP8.w8a16, batch);
      assert.ok(w8a16.pass && w8a16.tol === 2 ** -5 && w8a16.relErr > 0, `w8a16 ${w8a16.relErr} ${w8a16.tol}`);
      m.reset(9);
      const w8a8 = m.check(FP8.w8a8, batch);
      // the activation quant of every linear compounds: over bf16's bound, well under a wiring mistake's
      assert.ok(w8a8.pass && w8a8.tol === 2 ** -1 && w8a8.relErr > 2 ** -5 && w8a8.relErr < 0.2, `w8a8 ${w8a8.relErr} ${w8a8.tol}`);
    }
  });
});

test('fp8 model: a W8A16 route decodes the same tokens whatever its rows blocking; a 16-bit kernel is refused for fp8 weights', () => {
  withModel({ ...DIMS, dtype: 'fp8' }, (m) => {
    const plain16 = fp8Ids(['w8a16.plain', 'w8a16.plain', 'gated.w8a16.plain', 'w8a16.plain', 'plain']);
    m.reset(3);
    const a = decode(m, plain16, 4, 4);
    m.reset(3);
    assert.equal(decode(m, FP8.w8a16, 4, 4), a);
    rejects(() => m.step(PLAIN, 1), 1, /cands\[0\] \(qkv\): plain does not compute dtype 2, the qkv weights' dtype/);
    const fp8Head = Int32Array.from(FP8.w8a16);
    fp8Head[4] = id('w8a16.plain');
    rejects(() => m.step(fp8Head, 1), 1, /cands\[4\] \(lm_head\): w8a16\.plain does not compute dtype 0/);
  });
  assert.ok(native.bytes({ ...DIMS, dtype: 'fp8' }) < native.bytes(DIMS), 'fp8 weights take less memory');
});

test('timing returns one finite positive time per step, and needs no reset', () => {
  withModel(DIMS, (m) => {
    for (const batch of [1, 4]) {
      const us = m.time(PLAIN, batch, 6);
      assert.is(us.length, 6);
      for (const x of us) assert.ok(Number.isFinite(x) && x > 0, String(x));
    }
    m.reset(1);
    assert.is(m.step(PLAIN, 2).length, 2);
  });
});

test('the step refuses wrong candidates, batches and a full cache; a freed model is refused', () => {
  const m = native.create(DIMS, 1);
  const gatedAtQkv = Int32Array.from(PLAIN);
  gatedAtQkv[0] = id('gated.plain');
  rejects(() => m.step(gatedAtQkv, 1), 1, /cands\[0\] \(qkv\): gated\.plain is a candidate of op 1, the qkv linear is op 0/);
  const unknown = Int32Array.from(PLAIN);
  unknown[4] = 99999;
  rejects(() => m.step(unknown, 1), 1, /cands\[4\] \(lm_head\): unknown candidate id 99999/);
  // checked before the native call: the library reads seven ids whatever the array holds
  const range = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  assert.throws(() => m.step(PLAIN.subarray(0, 3), 1), range(/^cands must be an Int32Array of 7 candidate ids \(qkv, o, gate_up, down, lm_head, router, experts\), got 3$/));
  assert.throws(() => m.step(new Int32Array(0), 1), range(/got 0$/));
  assert.throws(() => m.check(PLAIN.subarray(1), 1), range(/cands must be an Int32Array of 7/));
  assert.throws(() => m.time(Array.from(PLAIN) as unknown as Int32Array, 1, 1), range(/cands must be an Int32Array/));
  assert.throws(() => m.step(PLAIN, 5), range(/^batch must be an integer in 1\.\.4 \(the model's maxBatch\), got 5$/));
  assert.throws(() => m.step(PLAIN, 1.5), range(/batch must be an integer/));
  assert.throws(() => m.time(PLAIN, 1, 7), range(/^steps must be an integer in 1\.\.6 \(the model's maxNew\), got 7$/));
  m.reset(1);
  for (let s = 0; s < DIMS.maxNew; s++) m.step(PLAIN, 1);
  rejects(() => m.step(PLAIN, 1), 1, /holds 6 new positions and all are used: reset the model/);
  m.reset(1);
  assert.is(m.step(PLAIN, 1).length, 1);
  m.free();
  rejects(() => native.call('kpick_model_step', null, PLAIN, 1, new Int32Array(1)), 1, /not a live model handle/);
  rejects(() => m.free(), 1, /model is null/);
});

// ---- the bench's pure parts ----

const tokens = (rows: number[][]) => rows.map((r) => Int32Array.from(r));
const diff = (kind: Difference['kind'], bitwise: boolean): Difference => ({ kind, default: 'plain', table: bitwise ? 'rowblk.r4' : 'splitk.s4', bitwise });

test('judgeIdentity: identical, explained only by tolerance-class differences, failed otherwise', () => {
  const a = tokens([[1, 2], [3, 4], [5, 6]]);
  const b = tokens([[1, 2], [3, 9], [7, 6]]);
  const same = judgeIdentity(a, a, [diff('qkv', true)]);
  assert.equal([same.status, same.firstDiffStep, same.rowsDiverged], ['identical', null, 0]);
  assert.match(same.why, 'identical for 3 steps');

  const explained = judgeIdentity(a, b, [diff('qkv', false), diff('down', false)]);
  assert.equal([explained.status, explained.firstDiffStep, explained.rowsDiverged], ['explained', 1, 2]);
  assert.match(explained.why, 'tokens differ from step 1 (2 of 2 rows)');
  assert.match(explained.why, 'qkv splitk.s4 vs plain');

  const claimed = judgeIdentity(a, b, [diff('qkv', false), diff('o', true)]);
  assert.is(claimed.status, 'failed');
  assert.match(claimed.why, 'o rowblk.r4 vs plain claims bitwise-identical output');

  const sameRoute = judgeIdentity(a, b, []);
  assert.is(sameRoute.status, 'failed');
  assert.match(sameRoute.why, 'not deterministic');
  assert.throws(() => judgeIdentity(a, a.slice(1), []), /decoded 3 and 2 steps/);
});

test('differences() classes each candidate against the default from the space', () => {
  const arm = (linear: string, gated: string): ArmRoute => {
    // a dense model's kinds: no router or experts
    const names = Object.fromEntries(LINEAR_KINDS.filter((k) => k !== 'router' && k !== 'experts').map((k) => [k, k === 'gate_up' ? gated : linear])) as ArmRoute['names'];
    return { names, ids: cands(linear, gated) };
  };
  const ds = differences(arm('plain', 'gated.plain'), arm('rowblk.r4', 'gated.splitk.s4'), space);
  assert.equal(
    ds.map((d) => [d.kind, d.table, d.bitwise]),
    [['qkv', 'rowblk.r4', true], ['o', 'rowblk.r4', true], ['gate_up', 'gated.splitk.s4', false], ['down', 'rowblk.r4', true], ['lm_head', 'rowblk.r4', true]],
  );
  assert.equal(differences(arm('plain', 'gated.plain'), arm('plain', 'gated.plain'), space), []);
});

test('summarizeArm: median tok/s over runs, step quantiles, and a stalled run counted, not dropped', () => {
  const run = (lane: number, r: number, arm: 'default' | 'table', us: number[]): TimedRun => ({ lane, run: r, arm, us: Float64Array.from(us) });
  const timed = [
    run(0, 0, 'default', [100, 100, 100, 100]),
    run(0, 1, 'default', [100, 110, 100, 100]),
    run(0, 2, 'default', [400, 400, 400, 400]), // stalled: 4x the lane's median
    run(1, 0, 'default', [200, 200, 200, 200]),
    run(0, 0, 'table', [50, 50, 50, 50]),
  ];
  const s = summarizeArm(timed, 'default', 2);
  assert.is(s.runs, 4);
  assert.is(s.stalled, 1);
  assert.equal(s.stalledRuns, ['1-3']);
  // per-run tok/s: 2 rows x 4 steps / run time: 20000, 19512, 5000, 10000 -> median of the four
  assert.ok(Math.abs(s.tokPerS - (8e6 / 410 + 10000) / 2) < 1e-6, String(s.tokPerS));
  // 16 steps: seven 100, one 110, four 200, four 400 (the stalled run counts too)
  assert.is(s.stepP50Us, 155);
  assert.is(s.stepP90Us, 400);
  assert.is(summarizeArm(timed, 'table', 2).tokPerS, 40000);
  assert.throws(() => summarizeArm([], 'table', 1), /no timed runs/);
});

test('routeArm without a table gives the class default of every linear at every concurrency', () => {
  const build = buildOf(kpick);
  const route = loadRoute(null, build, {});
  for (const c of [1, 4, 64]) {
    const arm = routeArm(route, kpick, tiny, 'bf16', c);
    assert.equal(arm.names, { qkv: 'plain', o: 'plain', gate_up: 'gated.plain', down: 'plain', lm_head: 'plain' });
    // a dense model has no router or experts: -1 there, which the library ignores
    assert.equal(Array.from(arm.ids), [...Array.from(PLAIN).slice(0, 5), -1, -1]);
  }
});

// ---- a mixture-of-experts model: router, top-k, the moe op in place of the MLP ----

const tinyMoe = findModel('tiny-moe');
const MOE_DIMS: ModelDims = dimsOf(tinyMoe, { layers: 2, maxBatch: 4, context: 24, maxNew: 6, dtype: 'bf16' });

/** ids of a moe model's step: qkv, o, lm_head and router plain, experts as named; gate_up and down ignored (-1) */
function moeCands(experts: string): Int32Array {
  return Int32Array.from(LINEAR_KINDS.map((k) => (k === 'experts' ? id(experts) : k === 'gate_up' || k === 'down' ? -1 : id('plain'))));
}

test('a moe step matches its fp64 forward (routing included) for every moe candidate, and the bitwise class decodes the same tokens', () => {
  assert.equal([MOE_DIMS.experts, MOE_DIMS.topk], [8, 2]);
  withModel(MOE_DIMS, (m) => {
    const tokens: number[][][] = [];
    const names = space.filter((c) => c.op === 'moe' && takesDtype(c, 'bf16')).map((c) => c.name);
    assert.equal(names, ['moe.loop', 'moe.grouped.r4', 'moe.threads.t2']);
    for (const experts of names) {
      m.reset(3);
      const r = m.check(moeCands(experts), 3);
      assert.ok(r.pass && r.relErr > 0, `${experts}: rel err ${r.relErr} > ${r.tol}`);
      m.reset(5);
      tokens.push(decode(m, moeCands(experts), 4, 4));
    }
    assert.equal(tokens[1], tokens[0], 'moe.grouped.r4 decodes what moe.loop decodes');
    assert.equal(tokens[2], tokens[0], 'moe.threads.t2 decodes what moe.loop decodes');
  });
});

test('a moe model refuses a linear candidate for its experts and topk without experts; routeArm routes its router and experts', () => {
  withModel(MOE_DIMS, (m) => {
    const wrong = moeCands('moe.loop');
    wrong[LINEAR_KINDS.indexOf('experts')] = id('plain');
    rejects(() => m.step(wrong, 1), 1, /cands\[6\] \(experts\): plain is a candidate of op 0, the experts linear is op 2/);
  });
  rejects(() => native.create({ ...DIMS, topk: 2 }, 1), 1, /topk must be 0 in a dense model \(experts 0\), got 2/);
  rejects(() => native.create({ ...MOE_DIMS, topk: 9 }, 1), 1, /topk must be in 1\.\.8, got 9/);
  const arm = routeArm(loadRoute(null, buildOf(kpick), {}), kpick, tinyMoe, 'bf16', 4);
  assert.equal(arm.names, { qkv: 'plain', o: 'plain', lm_head: 'plain', router: 'plain', experts: 'moe.loop' });
  assert.equal(Array.from(arm.ids), Array.from(moeCands('moe.loop')));
});

test('an fp8 moe model (fp8 experts, bf16 router) matches its fp64 forward with either class of experts; it refuses 16-bit experts', () => {
  const dims = { ...MOE_DIMS, dtype: 'fp8' as const };
  // qkv and o in fp8 (the W8A16 head), router and lm_head bf16, experts as named
  const cands = (experts: string) => Int32Array.from(LINEAR_KINDS.map((k) => (k === 'experts' ? id(experts) : k === 'gate_up' || k === 'down' ? -1 : k === 'qkv' || k === 'o' ? id('w8a16.plain') : id('plain'))));
  withModel(dims, (m) => {
    for (const experts of ['moe.w8a8.loop', 'moe.w8a16.grouped.r4', 'moe.w8a16.threads.t2']) {
      m.reset(3);
      const r = m.check(cands(experts), 3);
      assert.ok(r.pass && r.relErr > 0, `${experts}: rel err ${r.relErr} > ${r.tol}`);
    }
    rejects(() => m.step(cands('moe.loop'), 1), 1, /cands\[6\] \(experts\): moe\.loop does not compute dtype 2, the experts weights' dtype/);
  });
  const arm = routeArm(loadRoute(null, buildOf(kpick), {}), kpick, tinyMoe, 'fp8', 4);
  assert.equal(arm.names, { qkv: 'w8a8.plain', o: 'w8a8.plain', lm_head: 'plain', router: 'plain', experts: 'moe.w8a8.loop' });
});

test('routeArm of an fp8 model: the W8A8 default for the layer linears, the bf16 default for lm_head', () => {
  const arm = routeArm(loadRoute(null, buildOf(kpick), {}), kpick, tiny, 'fp8', 4);
  assert.equal(arm.names, { qkv: 'w8a8.plain', o: 'w8a8.plain', gate_up: 'gated.w8a8.plain', down: 'w8a8.plain', lm_head: 'plain' });
});

test.run();
