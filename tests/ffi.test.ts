import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import koffi from 'koffi';
import { ABI_FACTS, ABI_VERSION, KpickCandidate, KpickInfo, KpickModelDims } from '../lib/ffi-types.ts';
import { DEFAULT_BUILD_DIR, KpickError, KpickLoadError, loadKpick, moeWeightBytes, NativeRoute, openKpick, takesDtype, weightBytes, type Problem, type ProblemSpec, type Routing } from '../lib/ffi.ts';
import { ParityChecker, computeReference, parityBar } from '../lib/parity.ts';
import { moeCallOf } from './helpers/moe-call.ts';
import { BUCKETS, MAX_EXPERTS, MAX_POSITIONS, MAX_ROWS, MAX_TOPK } from '../lib/schema.ts';
import { identityFromInfo } from '../lib/identity.ts';
import { UsageError } from '../lib/cli.ts';

const CPU_LIB = join(DEFAULT_BUILD_DIR, 'libkpick-cpu.so');
const kpick = loadKpick({ lib: CPU_LIB });
const scratch = mkdtempSync(join(tmpdir(), 'kpick-ffi-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

/** Asserts fn throws a KpickError of status 1 (bad argument) whose message matches. */
function rejects(fn: () => unknown, message: RegExp): void {
  try {
    fn();
  } catch (err) {
    assert.instance(err, KpickError);
    assert.is((err as KpickError).status, 1, (err as Error).message);
    assert.match((err as Error).message, message);
    return;
  }
  assert.unreachable(`expected an error matching ${message}`);
}

function small(): Problem {
  return kpick.createProblem({ op: 'linear', dtype: 'bf16', n: 40, k: 64, mMax: 4, copies: 2, seed: 7 });
}

test('info reads the loaded library: cpu backend, this ABI, a space token and a cache size', () => {
  const info = kpick.info();
  assert.is(info.backend, 'cpu');
  assert.is(info.abi, ABI_VERSION);
  assert.ok(info.space.length >= 8, info.space);
  assert.ok(info.llcBytes > 0);
  assert.ok(info.memFree > 0 && info.memFree <= info.memTotal);
  assert.is(kpick.path, CPU_LIB);
});

test('the library reports the struct sizes and limits the binding mirrors (checked before any struct is passed)', () => {
  const lib = koffi.load(CPU_LIB);
  const abi = lib.func('kpick_abi_value', 'int', ['const char *', koffi.out(koffi.pointer('int64_t'))]);
  const fact = (name: string) => {
    const out = [0];
    const status = abi(name, out);
    return status === 0 ? Number(out[0]) : `status ${status}`;
  };
  assert.equal(Object.keys(ABI_FACTS), ['version', 'kpick_info', 'kpick_candidate', 'kpick_model_dims', 'KPICK_MAX_ROWS', 'KPICK_MAX_POSITIONS', 'KPICK_MAX_EXPERTS', 'KPICK_MAX_TOPK']);
  assert.is(fact('version'), ABI_VERSION);
  assert.is(fact('kpick_info'), koffi.sizeof(KpickInfo));
  assert.is(fact('kpick_candidate'), koffi.sizeof(KpickCandidate));
  assert.is(fact('kpick_model_dims'), koffi.sizeof(KpickModelDims));
  // the limits named once in kpick.h and once in lib/schema.ts agree
  assert.is(fact('KPICK_MAX_ROWS'), MAX_ROWS);
  assert.is(MAX_ROWS, BUCKETS[BUCKETS.length - 1]);
  assert.is(fact('KPICK_MAX_POSITIONS'), MAX_POSITIONS);
  assert.is(fact('KPICK_MAX_EXPERTS'), MAX_EXPERTS);
  assert.is(fact('KPICK_MAX_TOPK'), MAX_TOPK);
  assert.is(fact('kpick_problem'), 'status 1', 'an unknown name is refused');
  assert.is(abi('version', null), 1, 'a null pointer is refused, not dereferenced');
  assert.is(abi(null, [0]), 1, 'a null name is refused, not dereferenced');
});

test('every struct and limit of kpick.h is an ABI fact the loader checks, and the library knows each', () => {
  const header = readFileSync(join(DEFAULT_BUILD_DIR, '..', 'hip-lib', 'include', 'kpick.h'), 'utf8');
  const structs = [...header.matchAll(/^typedef struct (\w+) \{/gm)].map((m) => m[1]!);
  const limits = [...header.matchAll(/^#define (KPICK_MAX_\w+) /gm)].map((m) => m[1]!);
  assert.ok(structs.includes('kpick_model_dims') && limits.includes('KPICK_MAX_ROWS'), `${structs} ${limits}`);
  assert.equal(Object.keys(ABI_FACTS).sort(), ['version', ...structs, ...limits].sort());
  const abi = koffi.load(CPU_LIB).func('kpick_abi_value', 'int', ['const char *', koffi.out(koffi.pointer('int64_t'))]);
  for (const name of Object.keys(ABI_FACTS)) assert.is(abi(name, [0]), 0, `${name} unknown to the library`);
});

test('a shared object that is not a kpick library of this ABI is refused naming what it lacks', () => {
  const libm = ['/lib/x86_64-linux-gnu/libm.so.6', '/usr/lib/x86_64-linux-gnu/libm.so.6', '/lib64/libm.so.6', '/usr/lib/libm.so.6'].find(existsSync);
  if (!libm) throw new Error('no libm.so.6 in the usual places');
  try {
    loadKpick({ lib: libm });
    assert.unreachable('libm loaded as kpick');
  } catch (err) {
    assert.instance(err, KpickLoadError);
    assert.match((err as Error).message, /^no usable libkpick \(tried .*libm\.so\.6: .*kpick_init.*: not a library of ABI \d+ \(rebuild with make\)\)$/);
  }
});

test('openKpick refuses a library of another backend than --backend names (exit 2), and takes any without one', () => {
  const saved = process.env.KPICK_LIB;
  try {
    process.env.KPICK_LIB = CPU_LIB;
    assert.is(openKpick().path, CPU_LIB);
    assert.is(openKpick(null).path, CPU_LIB);
    assert.is(openKpick('cpu').path, CPU_LIB);
    assert.throws(() => openKpick('cuda'), (e: unknown) => e instanceof UsageError && (e as Error).message === `--backend cuda, but ${CPU_LIB} is a cpu build`);
  } finally {
    if (saved === undefined) delete process.env.KPICK_LIB;
    else process.env.KPICK_LIB = saved;
  }
});

test('candidates are described with op, class head, params and default flags', () => {
  const all = kpick.candidates();
  const byName = new Map(all.map((c) => [c.name, c]));
  assert.is(byName.size, all.length, 'names are unique');
  all.forEach((c, i) => assert.is(c.id, i));
  const plain = byName.get('plain');
  assert.ok(plain);
  assert.equal([plain.op, plain.isDefault, plain.bitwiseWith, plain.available], ['linear', true, 'plain', true]);
  assert.equal(byName.get('rowblk.r4')?.params, { R: 4 });
  assert.is(byName.get('rowblk.r4')?.bitwiseWith, 'plain');
  assert.is(byName.get('splitk.s4')?.bitwiseWith, null);
  assert.equal(byName.get('threads.t2')?.params, { R: 4, T: 2 });
  const gatedDefaults = all.filter((c) => c.op === 'gated' && c.isDefault).map((c) => `${c.name} ${c.numeric}`);
  assert.equal(gatedDefaults, ['gated.plain w16a16', 'gated.w8a8.plain w8a8'], 'one default per op and dtype: fp8 has the W8A8 one');
  assert.equal([plain.numeric, byName.get('w8a16.rowblk.r4')?.numeric, byName.get('w8a16.rowblk.r4')?.bitwiseWith], ['w16a16', 'w8a16', 'w8a16.plain']);
  assert.ok(!all.some((c) => c.name.startsWith('test.')), 'the shipped build has no test candidates');
  assert.is(kpick.candidate('splitk.s4').name, 'splitk.s4');
});

test('every row of space.def is available here: the CPU backend has every family of its rows (test build too)', () => {
  for (const file of ['libkpick-cpu.so', 'libkpick-cpu-test.so']) {
    const all = loadKpick({ lib: join(DEFAULT_BUILD_DIR, file) }).candidates();
    const missing = all.filter((c) => !c.available).map((c) => `${c.name} (${c.family})`);
    assert.equal(missing, [], `${file}: rows without their kernels`);
    assert.ok(all.every((c) => !c.pdl), `${file}: the CPU has no PDL rows`);
  }
});

test('parameter names come from the family lines of space.def', () => {
  const names = new Map(kpick.candidates().map((c) => [c.family, Object.keys(c.params).join(',')]));
  assert.equal(Object.fromEntries(names), { plain: '', rowblk: 'R', threads: 'R,T', splitk: 'S', moe_loop: '', moe_grouped: 'R', moe_threads: 'R,T', w8a16: 'R', w8a8: '' });
});

test('a problem holds random inputs that are never zero, and reports its copies', () => {
  const p = small();
  try {
    assert.is(p.copies, 2);
    const x = p.downloadX();
    assert.is(x.length, 4 * 64);
    const w = p.downloadW();
    assert.is(w.length, 40 * 64);
    for (const bits of [...x, ...w]) assert.ok((bits & 0x7fff) !== 0, 'a zero element');
    assert.ok(new Set(w).size > 100, 'weights look random');
  } finally {
    p.free();
  }
});

test('the same seed gives the same inputs; another seed others', () => {
  const spec = { op: 'linear', dtype: 'fp16', n: 16, k: 32, mMax: 2, copies: 1 } as const;
  const a = kpick.createProblem({ ...spec, seed: 11 });
  const b = kpick.createProblem({ ...spec, seed: 11 });
  const c = kpick.createProblem({ ...spec, seed: 12 });
  try {
    assert.equal(Array.from(a.downloadW()), Array.from(b.downloadW()));
    assert.not.equal(Array.from(a.downloadW()), Array.from(c.downloadW()));
  } finally {
    a.free();
    b.free();
    c.free();
  }
});

/** e4m3 by the OCP spec: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; S.1111.111 NaN. */
function e4m3Value(code: number): number {
  const sign = code & 0x80 ? -1 : 1;
  const e = (code >> 3) & 15;
  const m = code & 7;
  if ((code & 0x7f) === 0x7f) return NaN;
  return sign * (e === 0 ? (m / 8) * 2 ** -6 : (1 + m / 8) * 2 ** (e - 7));
}

test('e4m3: every one of the 256 codes decodes as the spec says, and encodes back to itself', () => {
  const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
  const values = kpick.e4m3Decode(codes);
  const back = kpick.e4m3Encode(values);
  for (let c = 0; c < 256; c++) {
    const want = e4m3Value(c);
    if (Number.isNaN(want)) {
      assert.ok(Number.isNaN(values[c]), `0x${c.toString(16)} is NaN`);
      assert.is(back[c], c, `NaN 0x${c.toString(16)} keeps its sign`);
    } else {
      assert.is(values[c], want, `0x${c.toString(16)}`);
      assert.is(back[c], c, `0x${c.toString(16)} round trip`);
    }
  }
  assert.is(values[0x7e], 448);
  assert.is(values[0x01], 2 ** -9);
  assert.ok(Object.is(values[0x80], -0));
});

test('e4m3 encode rounds to nearest even between neighbours, and saturates at +-448', () => {
  const finite = Array.from({ length: 127 }, (_, c) => c).filter((c) => c !== 0x7f); // 0x00..0x7e ascending
  const mids: number[] = [];
  const want: number[] = [];
  for (let i = 0; i + 1 < finite.length; i++) {
    const [lo, hi] = [finite[i]!, finite[i + 1]!];
    const [a, b] = [e4m3Value(lo), e4m3Value(hi)];
    mids.push((a + b) / 2, a + (b - a) / 4, b - (b - a) / 4, -(a + b) / 2);
    const even = lo % 2 === 0 ? lo : hi;
    want.push(even, lo, hi, 0x80 | even);
  }
  assert.equal(Array.from(kpick.e4m3Encode(Float32Array.from(mids))), want);
  const big = kpick.e4m3Encode(Float32Array.from([449, 464, 1e6, Infinity, -500, -Infinity, NaN]));
  assert.equal(Array.from(big), [0x7e, 0x7e, 0x7e, 0x7e, 0xfe, 0xfe, 0x7f]);
});

test('an fp8 problem holds W packed: codes, then at a 16-byte boundary one scale per row, each row reaching 448, scales differing by row', () => {
  const p = kpick.createProblem({ op: 'gated', dtype: 'fp8', n: 5, k: 19, mMax: 2, copies: 2, seed: 3 });
  try {
    const bytes = p.downloadWeightBytes();
    const rows = 10;
    const at = Math.ceil((rows * 19) / 16) * 16;
    assert.is(bytes.length, at + 4 * rows);
    assert.is(weightBytes('fp8', rows, 19), bytes.length);
    const scales = new Float32Array(bytes.buffer.slice(at, at + 4 * rows));
    for (let r = 0; r < rows; r++) {
      const row = bytes.subarray(r * 19, (r + 1) * 19);
      assert.ok(row.some((c) => (c & 0x7f) === 0x7e), `row ${r}: its amax is 448 x its scale`);
      assert.ok(row.every((c) => (c & 0x7f) !== 0x7f), `row ${r}: no NaN code`);
      assert.ok(scales[r]! > 0 && scales[r]! <= 2 / 448, `row ${r} scale ${scales[r]}`);
    }
    // rows carry gains 0.5, 0.71, 1, 1.41, 2 in turn (fp8.h kp_fp8_row_gain): each row's scale differs
    const ratio = (a: number, b: number) => scales[a]! / scales[b]!;
    // (the rows' own amax, of 19 uniform values, lies in 0.8..1 of the range)
    assert.ok(ratio(4, 0) > 3 && ratio(4, 0) < 5.1 && ratio(2, 0) > 1.5 && ratio(2, 0) < 2.6, `scales ${Array.from(scales)}`);
    assert.is(p.downloadX().length, 2 * 19, 'x stays bf16');
    rejects(() => p.downloadW(), /buffer is 380 bytes, expected 232/);
  } finally {
    p.free();
  }
});

test('fp8Pack is the problem packer: the same bytes from the same bf16 weight', () => {
  const w = Uint16Array.from({ length: 3 * 40 }, (_, i) => 0x3f00 + ((i * 37) % 200)); // 0.5 .. 1.3, positive
  w[45] = 0xc040; // -3: row 1's amax
  const packed = kpick.fp8Pack(w, 3, 40);
  assert.is(packed.length, weightBytes('fp8', 3, 40));
  assert.is(packed[45], 0xfe, '-3 / (3 / 448) = -448');
  const scales = new Float32Array(packed.buffer.slice(128, 140));
  assert.is(scales[1], Math.fround(3 / 448));
  rejects(() => kpick.call('kpick_fp8_pack', w, 3, 40, new Uint8Array(100), 100), /dst_bytes is 100, a 3 x 40 fp8 weight is 140/);
});

test('the gated weight is 2N x K', () => {
  const p = kpick.createProblem({ op: 'gated', dtype: 'bf16', n: 8, k: 32, mMax: 1, copies: 1, seed: 1 });
  try {
    assert.is(p.downloadW().length, 2 * 8 * 32);
  } finally {
    p.free();
  }
});

test('setRows changes the active rows: y and the reference follow', () => {
  const p = small();
  try {
    assert.is(p.rows, 4);
    p.setRows(2);
    assert.is(p.rows, 2);
    p.poison();
    p.run(kpick.candidate('plain').id, 0);
    assert.is(p.downloadY().length, 2 * 40);
    assert.is(p.reference(null).length, 2 * 40);
    assert.is(p.downloadX().length, 2 * 64);
  } finally {
    p.free();
  }
});

test('poison fills y with 0xFFFF and a run overwrites it', () => {
  const p = small();
  try {
    p.poison();
    assert.ok(p.downloadY().every((b) => b === 0xffff));
    p.run(kpick.candidate('plain').id, 1);
    assert.ok(p.downloadY().every((b) => b !== 0xffff));
  } finally {
    p.free();
  }
});

test('a sampled reference equals the same columns of the full one', () => {
  const p = small();
  try {
    const full = p.reference(null);
    const cols = [0, 5, 39];
    const part = p.reference(cols);
    assert.is(part.length, 4 * cols.length);
    for (let m = 0; m < 4; m++) {
      cols.forEach((col, j) => assert.is(part[m * cols.length + j], full[m * 40 + col]));
    }
    assert.ok(full.some((v) => v !== 0));
  } finally {
    p.free();
  }
});

test('countNodes counts the passes of a gated call, whether or not it ran at these rows before', () => {
  const p = kpick.createProblem({ op: 'gated', dtype: 'bf16', n: 24, k: 40, mMax: 4, copies: 1, seed: 5 });
  try {
    const plain = kpick.candidate('gated.plain');
    assert.is(plain.nodes, 2);
    assert.is(p.countNodes(plain.id), 2, 'before any run');
    p.run(plain.id, 0);
    assert.is(p.countNodes(plain.id), 2, 'after a run at these rows');
    p.setRows(1);
    assert.is(p.countNodes(plain.id), 2, 'at rows it has not run at');
    p.time(plain.id, 1);
    assert.is(p.countNodes(plain.id), 2, 'after timing');
  } finally {
    p.free();
  }
});

test('time and timeFloor return the samples asked for, positive and finite; countNodes counts calls', () => {
  const p = small();
  try {
    const linear = kpick.candidates().filter((c) => c.op === 'linear' && takesDtype(c, 'bf16'));
    assert.ok(linear.length >= 3, `${linear.length} bf16 linear candidates`);
    for (const c of linear) {
      const us = p.time(c.id, 3);
      assert.instance(us, Float64Array);
      assert.is(us.length, 3);
      assert.ok(us.every((t) => Number.isFinite(t) && t > 0), `${c.name}: ${us}`);
      assert.is(p.countNodes(c.id), c.nodes, c.name);
    }
    const floor = p.timeFloor(4);
    assert.is(floor.length, 4);
    assert.ok(floor.every((t) => Number.isFinite(t) && t > 0));
  } finally {
    p.free();
  }
});

test('bad sizes to createProblem are refused with the library message', () => {
  const base = { op: 'linear', dtype: 'bf16', n: 8, k: 8, mMax: 1, copies: 1, seed: 1 } as const;
  rejects(() => kpick.createProblem({ ...base, n: -1 }), /n must be in 1\.\./);
  rejects(() => kpick.createProblem({ ...base, n: 0 }), /n must be in 1\.\./);
  rejects(() => kpick.createProblem({ ...base, k: -5 }), /k must be in 1\.\./);
  rejects(() => kpick.createProblem({ ...base, mMax: 0 }), /m must be in 1\.\.128, got 0/);
  rejects(() => kpick.createProblem({ ...base, mMax: 129 }), /m must be in 1\.\.128, got 129/);
  rejects(() => kpick.createProblem({ ...base, op: 'conv' as never }), /op must be 0 \(linear\) or 1 \(gated\)/);
  rejects(() => kpick.createProblem({ ...base, dtype: 'int4' as never }), /dtype must be 0 \(bf16\), 1 \(fp16\) or 2 \(fp8\)/);
});

test('unknown candidate ids and names are refused, not run', () => {
  const p = small();
  try {
    rejects(() => p.run(9999, 0), /unknown candidate id 9999/);
    rejects(() => p.supports(-1), /unknown candidate id -1/);
    rejects(() => p.time(9999, 1), /unknown candidate id/);
    rejects(() => p.countNodes(-3), /unknown candidate id/);
    rejects(() => kpick.candidate('no.such'), /no candidate named 'no\.such'/);
  } finally {
    p.free();
  }
});

test('rows out of range, bad copy index and bad sample counts are refused', () => {
  const p = small();
  const plain = kpick.candidate('plain').id;
  try {
    rejects(() => p.setRows(5), /m must be in 1\.\.4 \(the problem's m_max\), got 5/);
    rejects(() => p.setRows(0), /m must be in 1\.\.4/);
    assert.is(p.rows, 4, 'a refused setRows keeps the rows');
    rejects(() => p.run(plain, 2), /copy 2 out of 0\.\.1/);
    rejects(() => p.run(plain, -1), /copy -1 out of/);
    rejects(() => p.time(plain, 0), /nsamples must be in 1\.\./);
    rejects(() => p.time(plain, -4), /nsamples must be in 1\.\./);
    rejects(() => p.timeFloor(0), /nsamples/);
  } finally {
    p.free();
  }
});

test('buffers of the wrong size are refused before anything is written', () => {
  const p = small();
  try {
    const short = new Uint16Array(3).fill(7);
    rejects(() => p.downloadY(short), /buffer is 6 bytes, expected 320/);
    assert.equal(Array.from(short), [7, 7, 7]);
    rejects(() => p.downloadX(new Uint16Array(1000)), /buffer is 2000 bytes, expected 512/);
    rejects(() => p.downloadW(new Uint16Array(1)), /expected 5120/);
    rejects(() => p.reference(null, new Float64Array(3)), /count is 3, expected m\*ncols = 160/);
    rejects(() => p.reference([0, 40]), /cols\[1\] = 40 is outside 0\.\.39/);
    rejects(() => p.reference([-1]), /cols\[0\] = -1/);
    assert.throws(() => p.reference([]), /cols is empty/);
  } finally {
    p.free();
  }
});

test('a freed problem is refused by every call, and freeing twice is an error', () => {
  const p = small();
  const plain = kpick.candidate('plain').id;
  p.free();
  assert.ok(p.freed);
  rejects(() => p.run(plain, 0), /not a live problem handle/);
  rejects(() => p.setRows(1), /not a live problem handle/);
  rejects(() => p.downloadY(), /not a live problem handle/);
  rejects(() => p.reference(null), /not a live problem handle/);
  rejects(() => p.poison(), /not a live problem handle/);
  rejects(() => p.free(), /problem is null/);
  // and the library still works afterwards
  const q = small();
  q.run(plain, 0);
  q.free();
});

test('null output pointers given straight to the library are refused, not written through', () => {
  rejects(() => kpick.call('kpick_get_info', null), /out is null/);
  rejects(() => kpick.call('kpick_candidate_count', null), /out is null/);
  rejects(() => kpick.call('kpick_candidate_describe', 0, null), /out is null/);
  rejects(() => kpick.call('kpick_candidate_find', null, [0]), /null argument/);
  rejects(() => kpick.call('kpick_problem_create', 0, 0, 8, 8, 1, 1, 1n, null), /out is null/);
  rejects(() => kpick.call('kpick_supports', null, 0, [0]), /not a live problem handle/);
  const p = small();
  try {
    rejects(() => kpick.call('kpick_time', (p as unknown as { handle: unknown }).handle, 0, 2, null), /us_out is null/);
    rejects(() => kpick.call('kpick_download', (p as unknown as { handle: unknown }).handle, 0, null, 320), /dst is null/);
    rejects(() => kpick.call('kpick_download', (p as unknown as { handle: unknown }).handle, 7, new Uint16Array(4), 8), /which must be 0 \(y\), 1 \(x\), 2 \(w\), 3 \(expert ids\) or 4 \(expert weights\), got 7/);
  } finally {
    p.free();
  }
});

test('an integer argument that is not one, or is outside its C type, is refused before the call, never wrapped or truncated', () => {
  const p = small();
  const plain = kpick.candidate('plain').id;
  const wrapped = (re: RegExp) => (e: unknown) => e instanceof RangeError && re.test(e.message);
  try {
    // koffi passes an int32 modulo 2^32: 2^32 + 1 rows reached the library as 1
    assert.throws(() => p.setRows(2 ** 32 + 1), wrapped(/^kpick_set_rows: argument 2 \(int32_t\) must be an integer in -2147483648\.\.2147483647, got 4294967297$/));
    assert.throws(() => p.setRows(1.5), wrapped(/got 1\.5$/));
    assert.is(p.rows, 4);
    // -(2^32) + 5 samples reached kpick_time as 5, written into the one-sample array made for them
    assert.throws(() => p.time(plain, -(2 ** 32) + 200000), wrapped(/^kpick_time: argument 3 \(int32_t\) .*got -4294767296$/));
    assert.throws(() => p.timeFloor(NaN), wrapped(/got NaN$/));
    assert.throws(() => p.run(plain + 2 ** 32, 0), wrapped(/^kpick_run: argument 2 /));
    assert.throws(() => p.run(plain, 2 ** 32), wrapped(/^kpick_run: argument 3 /));
  } finally {
    p.free();
  }
  const base = { op: 'linear', dtype: 'bf16', n: 8, k: 8, mMax: 1, copies: 1, seed: 1 } as const;
  assert.throws(() => kpick.createProblem({ ...base, n: 8.5 }), wrapped(/^kpick_problem_create: argument 3 \(int64_t\) must be an integer .*got 8\.5$/));
  assert.throws(() => kpick.createProblem({ ...base, mMax: 2 ** 32 + 1 }), wrapped(/argument 5 \(int32_t\)/));
  assert.throws(() => kpick.createProblem({ ...base, seed: 2n ** 64n }), wrapped(/argument 7 \(uint64_t\) must be an integer in 0\.\.18446744073709551615/));
  assert.throws(() => kpick.createProblem({ ...base, op: 'moe', experts: 2 ** 32 + 4, topk: 2 }), wrapped(/^kpick_problem_create_moe: argument 2 /));
});

test('a C string argument must be a string without NUL: a number is no address, and no name is cut short', () => {
  const refused = (re: RegExp) => (e: unknown) => e instanceof TypeError && re.test(e.message);
  assert.throws(() => kpick.candidate(0 as unknown as string), refused(/^kpick_candidate_find: argument 1 is a pointer \(const char \*\), got 0$/));
  assert.throws(() => kpick.candidate('plain\0junk'), refused(/^kpick_candidate_find: argument 1 holds a NUL character, where C would end it: "plain\\u0000junk"$/));
});

test('reference writes only a Float64Array of the columns asked for: another array, or a column that is no integer, is refused', () => {
  const p = small();
  try {
    // the library writes m x ncols doubles: into 4 bytes here, inside a larger buffer so nothing else is hit
    const backing = new Uint8Array(64).fill(7);
    assert.throws(() => p.reference([0], backing.subarray(0, 4) as unknown as Float64Array), (e: unknown) => e instanceof TypeError && /^reference: out must be a Float64Array$/.test((e as Error).message));
    assert.ok(backing.every((b) => b === 7), 'nothing written');
    // a BigInt64Array wraps 2^64 to column 0
    assert.throws(() => p.reference([2 ** 64]), (e: unknown) => e instanceof RangeError && /^reference: cols\[0\] must be an integer, got 18446744073709552000$/.test((e as Error).message));
    assert.throws(() => p.reference([1, 0.5]), /cols\[1\] must be an integer, got 0\.5/);
  } finally {
    p.free();
  }
});

test('e4m3 and fp8Pack read only arrays of their element type and length; empty input gives empty output', () => {
  // arrays inside larger ones, so the reads past their ends that these were hit nothing
  assert.throws(() => kpick.e4m3Encode(new Uint8Array(64).subarray(0, 4) as unknown as Float32Array), (e: unknown) => e instanceof TypeError && /values must be a Float32Array/.test((e as Error).message));
  assert.throws(() => kpick.e4m3Decode(new Float32Array(4) as unknown as Uint8Array), (e: unknown) => e instanceof TypeError && /codes must be a Uint8Array/.test((e as Error).message));
  const w = new Uint16Array(3 * 40).fill(0x3f80);
  assert.throws(() => kpick.fp8Pack(w.subarray(0, 40), 3, 40), (e: unknown) => e instanceof RangeError && /^fp8Pack: w holds 40 elements, a 3 x 40 weight is 120$/.test((e as Error).message));
  assert.throws(() => kpick.fp8Pack(new Uint8Array(240) as unknown as Uint16Array, 3, 40), (e: unknown) => e instanceof TypeError && /^fp8Pack: w must be a Uint16Array of bf16 weights$/.test((e as Error).message));
  assert.is(kpick.e4m3Encode(new Float32Array(0)).length, 0);
  assert.is(kpick.e4m3Decode(new Uint8Array(0)).length, 0);
});

test('a dense problem has no routing to download: said so, not "dst is null"', () => {
  const p = small();
  try {
    rejects(() => p.downloadExpertIds(), /^kpick_download: buffer 3 is a moe problem's routing; this problem is op 0$/);
    rejects(() => p.downloadExpertWeights(), /buffer 4 is a moe problem's routing/);
  } finally {
    p.free();
  }
});

test('identityFromInfo takes the identity fields of the loaded library, and names an empty one', () => {
  const info = kpick.info();
  const identity = identityFromInfo(info);
  assert.equal(identity, {
    backend: 'cpu',
    arch: info.arch,
    device: info.device,
    runtime: info.runtime,
    blas: info.blas,
    compiler: info.compiler,
    space: info.space,
  });
  assert.throws(() => identityFromInfo({ ...info, runtime: '' }), /the library reports an invalid identity: runtime: /);
});

test('loading a missing path lists it with the reason', () => {
  try {
    loadKpick({ lib: '/nonexistent/libkpick-x.so' });
    assert.unreachable('loaded a missing library');
  } catch (err) {
    assert.instance(err, KpickLoadError);
    assert.instance(err, UsageError, 'a missing library is a bad environment: exit 2');
    assert.is((err as Error).message, 'no usable libkpick (tried /nonexistent/libkpick-x.so: no such file)');
  }
});

test('the default order tries cuda, hip, then cpu, and lists every path tried', () => {
  const dir = mkdtempSync(join(scratch, 'build-'));
  writeFileSync(join(dir, 'libkpick-cpu.so'), 'not a shared object');
  const saved = { lib: process.env.KPICK_LIB, backend: process.env.KPICK_BACKEND };
  delete process.env.KPICK_LIB;
  delete process.env.KPICK_BACKEND;
  try {
    loadKpick({ buildDir: dir });
    assert.unreachable('loaded from an empty build folder');
  } catch (err) {
    assert.instance(err, KpickLoadError);
    const tried = (err as KpickLoadError).tried;
    assert.equal(tried.map((t) => t.path), ['cuda', 'hip', 'cpu'].map((b) => join(dir, `libkpick-${b}.so`)));
    assert.is(tried[0]?.why, 'no such file');
    assert.match(tried[2]?.why ?? '', /^load failed: /);
    assert.match((err as Error).message, /libkpick-cuda\.so: no such file; .*libkpick-hip\.so: no such file; .*libkpick-cpu\.so: load failed/);
  } finally {
    if (saved.lib !== undefined) process.env.KPICK_LIB = saved.lib;
    if (saved.backend !== undefined) process.env.KPICK_BACKEND = saved.backend;
  }
});

test('KPICK_LIB wins over KPICK_BACKEND; a bad backend name is refused', () => {
  const saved = { lib: process.env.KPICK_LIB, backend: process.env.KPICK_BACKEND };
  try {
    process.env.KPICK_LIB = CPU_LIB;
    process.env.KPICK_BACKEND = 'cuda';
    assert.is(loadKpick().path, CPU_LIB);
    delete process.env.KPICK_LIB;
    process.env.KPICK_BACKEND = 'cpu';
    assert.is(loadKpick().path, CPU_LIB);
    assert.throws(() => loadKpick({ backend: 'metal' }), (e: unknown) => e instanceof KpickLoadError && e instanceof UsageError && /^--backend must be one of cpu, cuda, hip, got 'metal'$/.test((e as Error).message));
    process.env.KPICK_BACKEND = 'foo';
    assert.throws(() => loadKpick(), (e: unknown) => e instanceof UsageError && /^KPICK_BACKEND must be one of cpu, cuda, hip, got 'foo'$/.test((e as Error).message));
    const err = (() => {
      try {
        loadKpick({ backend: 'hip', buildDir: '/nonexistent' });
      } catch (e) {
        return e as Error;
      }
      return null;
    })();
    assert.is(err?.message, 'no usable libkpick (tried /nonexistent/libkpick-hip.so: no such file)');
  } finally {
    if (saved.lib === undefined) delete process.env.KPICK_LIB;
    else process.env.KPICK_LIB = saved.lib;
    if (saved.backend === undefined) delete process.env.KPICK_BACKEND;
    else process.env.KPICK_BACKEND = saved.backend;
  }
});

// ---- the moe op (kpick.h, KPICK_OP_MOE): tiny shapes, every path once ----

const MOE = { op: 'moe', dtype: 'bf16', experts: 8, topk: 2, n: 48, k: 64, mMax: 16, copies: 2, seed: 21 } satisfies ProblemSpec as Required<ProblemSpec> & { experts: number; topk: number };

function moeProblem(routing: Routing, spec: Partial<ProblemSpec> = {}): Problem {
  return kpick.createProblem({ ...MOE, ...spec, routing });
}

/** The distinct experts of a routing. */
const usedExperts = (ids: Int32Array) => new Set(ids).size;

test('a moe problem: y is [m, K], its routing per row distinct experts in 0..E-1 with weights summing to 1', () => {
  for (const routing of ['uniform', 'skewed'] as const) {
    const p = moeProblem(routing);
    try {
      assert.is(p.outCols, MOE.k);
      assert.is(p.downloadY().length, MOE.mMax * MOE.k);
      assert.is(p.downloadW().length, MOE.experts * 3 * MOE.n * MOE.k, 'W_gate_up and W_down of every expert');
      const ids = p.downloadExpertIds();
      const w = p.downloadExpertWeights();
      assert.is(ids.length, MOE.mMax * MOE.topk);
      for (let t = 0; t < MOE.mMax; t++) {
        const row = [...ids.subarray(t * MOE.topk, (t + 1) * MOE.topk)];
        assert.ok(row.every((e) => e >= 0 && e < MOE.experts), `${routing} row ${t}: ${row}`);
        assert.is(new Set(row).size, MOE.topk, `${routing} row ${t} repeats an expert: ${row}`);
        const ws = [...w.subarray(t * MOE.topk, (t + 1) * MOE.topk)];
        assert.ok(ws.every((x) => x > 0), `${routing} row ${t}: ${ws}`);
        assert.ok(Math.abs(ws.reduce((a, b) => a + b, 0) - 1) < 1e-6, `${routing} row ${t}: ${ws}`);
      }
      p.setRows(3);
      assert.is(p.downloadExpertIds().length, 3 * MOE.topk, 'the routing follows the active rows');
    } finally {
      p.free();
    }
  }
});

test('the skewed routing makes rows share a hot set of 2 topk experts; the uniform one spreads over E', () => {
  const spec = { experts: 64, topk: 4, mMax: 32 };
  const skewed = moeProblem('skewed', spec);
  const uniform = moeProblem('uniform', spec);
  try {
    assert.ok(usedExperts(skewed.downloadExpertIds()) <= 2 * spec.topk, `${usedExperts(skewed.downloadExpertIds())}`);
    assert.ok(usedExperts(uniform.downloadExpertIds()) > 4 * spec.topk, `${usedExperts(uniform.downloadExpertIds())}`);
  } finally {
    skewed.free();
    uniform.free();
  }
});

test('every 16-bit moe candidate passes the fp64 reference and matches moe.loop byte for byte, on both routings', () => {
  const moe = kpick.candidates().filter((c) => c.op === 'moe' && takesDtype(c, 'bf16'));
  assert.equal(moe.map((c) => [c.name, c.isDefault, c.bitwiseWith]), [
    ['moe.loop', true, 'moe.loop'],
    ['moe.grouped.r4', false, 'moe.loop'],
    ['moe.threads.t2', false, 'moe.loop'],
  ]);
  for (const routing of ['uniform', 'skewed'] as const) {
    for (const dtype of ['bf16', 'fp16'] as const) {
      const p = moeProblem(routing, { dtype });
      try {
        for (const m of [1, 3, 16]) {
          p.setRows(m);
          const checker = new ParityChecker(p, computeReference(p, null), kpick.candidates());
          for (const c of moe) {
            const r = checker.check(c);
            assert.is(r.status, 'pass', `${routing} ${dtype} m=${m} ${c.name}: ${r.reason}`);
            assert.is(r.bitwise, c.isDefault ? null : true, `${c.name} bitwise`);
          }
        }
      } finally {
        p.free();
      }
    }
  }
});

test('moe parity fails against the reference of another routing of the same weights: the routing counts', () => {
  const p = moeProblem('uniform', { mMax: 4 });
  const other = moeProblem('skewed', { mMax: 4 });
  try {
    assert.equal(p.downloadW(), other.downloadW(), 'one seed, one weight fill');
    assert.not.equal(p.downloadExpertIds(), other.downloadExpertIds());
    const checker = new ParityChecker(p, computeReference(other, null), kpick.candidates());
    const r = checker.check(kpick.candidate('moe.loop'));
    assert.is(r.status, 'fail');
    assert.match(r.reason, /rel_err .* > 1e-2/);
  } finally {
    p.free();
    other.free();
  }
});

test('moe node counts: moe.loop makes 3 passes an active expert and its combine; the grouped ones one', () => {
  const p = moeProblem('uniform');
  try {
    for (const m of [1, 16]) {
      p.setRows(m);
      const active = usedExperts(p.downloadExpertIds());
      assert.is(p.countNodes(kpick.candidate('moe.loop').id), 3 * active + 1, `m=${m}`);
      assert.is(p.countNodes(kpick.candidate('moe.grouped.r4').id), 1);
      assert.is(p.countNodes(kpick.candidate('moe.threads.t2').id), 1);
    }
    const floor = p.timeFloor(3);
    assert.ok(floor.every((t) => Number.isFinite(t) && t > 0), `${floor}`);
  } finally {
    p.free();
  }
});

test('bad moe problems are refused with the library message; a dense op never takes moe candidates', () => {
  const base = { ...MOE, routing: 'uniform' } as const;
  rejects(() => kpick.createProblem({ ...base, experts: 0 }), /experts must be in 1\.\.1024, got 0/);
  rejects(() => kpick.createProblem({ ...base, experts: MAX_EXPERTS + 1 }), /experts must be in 1\.\.1024/);
  rejects(() => kpick.createProblem({ ...base, topk: 9 }), /topk must be in 1\.\.32 and at most experts \(8\), got 9/);
  rejects(() => kpick.createProblem({ ...base, topk: 0 }), /topk must be/);
  rejects(() => kpick.createProblem({ ...base, routing: 'hot' as never }), /routing must be 0 \(uniform\) or 1 \(skewed\)/);
  rejects(() => kpick.call('kpick_problem_create', 2, 0, 8, 8, 1, 1, 1n, [null]), /op 2 \(moe\) takes kpick_problem_create_moe/);
  const dense = small();
  try {
    assert.not.ok(dense.supports(kpick.candidate('moe.loop').id));
    assert.throws(() => dense.run(kpick.candidate('moe.loop').id), /cannot run op 0/);
    rejects(() => dense.downloadExpertIds(new Int32Array(4)), /buffer 3 is a moe problem's routing/);
  } finally {
    dense.free();
  }
});

test("kpick_moe through the route: moe.loop without a table, byte for byte the problem's run; bad routing refused", () => {
  const route = new NativeRoute(kpick);
  route.load(null);
  const p = moeProblem('uniform', { mMax: 5 });
  try {
    const { mem, shape } = moeCallOf(p);
    assert.is(kpick.candidates()[route.lookupMoe('bf16', MOE.experts, MOE.topk, MOE.n, MOE.k, 5)]!.name, 'moe.loop');
    route.moe('bf16', mem, shape);
    p.run(kpick.candidate('moe.loop').id);
    assert.equal(mem.y, p.downloadY());
    // through buffers of the library, as a binding without a runtime calls it
    const bufs = { x: route.allocFrom(mem.x), wGateUp: route.allocFrom(mem.wGateUp), wDown: route.allocFrom(mem.wDown), ids: route.alloc(mem.ids.byteLength), weights: route.alloc(mem.weights.byteLength), y: route.alloc(mem.y.byteLength) };
    try {
      kpick.call('kpick_buffer_upload', bufs.ids.ptr, 0, mem.ids, mem.ids.byteLength);
      kpick.call('kpick_buffer_upload', bufs.weights.ptr, 0, mem.weights, mem.weights.byteLength);
      route.moe('bf16', bufs, shape);
      assert.equal(route.download(bufs.y, new Uint16Array(5 * MOE.k)), mem.y);
    } finally {
      for (const b of Object.values(bufs)) route.free(b);
    }
    const bad = Int32Array.from(mem.ids);
    bad[3] = MOE.experts;
    rejects(() => route.moe('bf16', { ...mem, ids: bad }, shape), /ids\[1\]\[1\] = 8 is outside 0\.\.7/);
    bad[3] = bad[2]!;
    rejects(() => route.moe('bf16', { ...mem, ids: bad }, shape), /row 1 routes to expert \d+ twice/);
    assert.throws(() => route.moe('bf16', { ...mem, ids: mem.ids.subarray(1) }, shape), /ids holds 36 bytes, the moe call needs 40/);
    assert.throws(() => route.moe('bf16', { ...mem, weights: new Int32Array(10) as never }, shape), /weights must be a Float32Array or a DeviceBuffer/);
    assert.throws(() => route.moe('bf16', mem, { ...shape, topk: 9 }), /topk must be an integer in 1\.\.8/);
    rejects(() => kpick.call('kpick_moe', 0, mem.x, mem.wGateUp, mem.wDown, mem.ids, mem.weights, mem.x, 5, 8, 2, 48, 64, null), /y must not overlap an input/);
    rejects(() => kpick.call('kpick_moe', 0, null, mem.wGateUp, mem.wDown, mem.ids, mem.weights, mem.y, 5, 8, 2, 48, 64, null), /must not be null/);
    rejects(() => kpick.call('kpick_route_lookup', 2, 0, 8, 8, 1, [0]), /op 2 \(moe\) is routed by kpick_route_lookup_moe/);
  } finally {
    p.free();
  }
});

test('an fp8 moe problem holds W_gate_up [E * 2N, K] and W_down [E * K, N] as one packed fp8 weight each, rows scaled by their own gain', () => {
  const p = moeProblem('uniform', { dtype: 'fp8' });
  try {
    const bytes = p.downloadWeightBytes();
    const { gateUp, down } = moeWeightBytes('fp8', MOE.experts, MOE.n, MOE.k);
    assert.is(gateUp, weightBytes('fp8', MOE.experts * 2 * MOE.n, MOE.k));
    assert.is(bytes.length, gateUp + down);
    const scalesOf = (w: Uint8Array, rows: number, k: number) => new Float32Array(w.slice(Math.ceil((rows * k) / 16) * 16).buffer, 0, rows);
    const gu = scalesOf(bytes.subarray(0, gateUp), MOE.experts * 2 * MOE.n, MOE.k);
    const dn = scalesOf(bytes.subarray(gateUp), MOE.experts * MOE.k, MOE.n);
    for (const scales of [gu, dn]) {
      assert.ok(scales.every((v) => v > 0 && v <= Math.fround(2 / 448)), 'every row has its own positive scale, at most gain 2 / 448');
      assert.ok(scales[4]! / scales[0]! > 3, 'rows carry gains 0.5 .. 2 in turn (fp8.h), experts included');
    }
    assert.is(p.downloadX().length, MOE.mMax * MOE.k, 'x stays bf16');
  } finally {
    p.free();
  }
});

test('fp8 moe: the W8A8 default and the W8A16 class pass their bars on both routings; W8A16 members match their head byte for byte', () => {
  const moe = kpick.candidates().filter((c) => c.op === 'moe' && takesDtype(c, 'fp8'));
  assert.equal(moe.map((c) => [c.name, c.isDefault, c.numeric, c.bitwiseWith]), [
    ['moe.w8a8.loop', true, 'w8a8', 'moe.w8a8.loop'],
    ['moe.w8a16.grouped.r4', false, 'w8a16', 'moe.w8a16.grouped.r4'],
    ['moe.w8a16.threads.t2', false, 'w8a16', 'moe.w8a16.grouped.r4'],
  ]);
  for (const routing of ['uniform', 'skewed'] as const) {
    const p = moeProblem(routing, { dtype: 'fp8' });
    try {
      for (const m of [1, 3, 16]) {
        p.setRows(m);
        const checker = new ParityChecker(p, computeReference(p, null), kpick.candidates());
        const err: Record<string, number> = {};
        for (const c of moe) {
          const r = checker.check(c);
          assert.is(r.status, 'pass', `${routing} m=${m} ${c.name}: ${r.reason}`);
          assert.is(r.bitwise, c.bitwiseWith === c.name ? null : true, `${c.name} bitwise`);
          err[c.name] = r.rel_err as number;
        }
        assert.ok(err['moe.w8a16.grouped.r4']! < parityBar('fp8', 'w8a16', 'moe'), `W8A16 within bf16's bar: ${JSON.stringify(err)}`);
        assert.ok(err['moe.w8a16.grouped.r4']! < err['moe.w8a8.loop']!, `quantizing x and h costs accuracy: ${JSON.stringify(err)}`);
      }
    } finally {
      p.free();
    }
  }
  // a member that read another expert's scales would fail: the reference of another seed's weights fails both classes
  const p = moeProblem('uniform', { dtype: 'fp8', mMax: 4 });
  const other = moeProblem('uniform', { dtype: 'fp8', mMax: 4, seed: 22 });
  try {
    const checker = new ParityChecker(p, computeReference(other, null), kpick.candidates());
    for (const c of moe.filter((c) => c.bitwiseWith === c.name)) assert.is(checker.check(c).status, 'fail', c.name);
  } finally {
    p.free();
    other.free();
  }
});

test('kpick_moe in fp8 through the route: moe.w8a8.loop without a table, byte for byte the problem run; weights as bytes; short weights refused before the call', () => {
  const route = new NativeRoute(kpick);
  route.load(null);
  const p = moeProblem('uniform', { dtype: 'fp8', mMax: 4 });
  try {
    const { w, gateUp, mem, shape } = moeCallOf(p);
    assert.is(kpick.candidates()[route.lookupMoe('fp8', MOE.experts, MOE.topk, MOE.n, MOE.k, 4)]!.name, 'moe.w8a8.loop');
    route.moe('fp8', mem, shape);
    p.run(kpick.candidate('moe.w8a8.loop').id);
    assert.equal(mem.y, p.downloadY());
    assert.throws(() => route.moe('fp8', { ...mem, wDown: w.subarray(gateUp, w.length - 1) }, shape), /wDown holds \d+ bytes, the moe call needs \d+/);
    assert.throws(() => route.moe('bf16', mem, shape), /wGateUp holds \d+ bytes, the moe call needs \d+/);
  } finally {
    p.free();
  }
});

test.run();
