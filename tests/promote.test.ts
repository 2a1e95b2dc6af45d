// The promote rule on synthetic records (tests/helpers/synthetic-records.ts):
// evenly spread samples with known medians and quartiles, so every expected
// choice, gain and reason below follows from the rule, not from a measurement.
import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { chooseIdentity, DEFAULT_GATE, DEFAULT_PDL_ROWS, MIN_SAMPLES, pairedGeomeans, poolCandidate, promote, type Promoted } from '../lib/promote.ts';
import { identityTag } from '../lib/identity.ts';
import type { StoreRecord, TableEntry } from '../lib/schema.ts';
import { evenSamples, problem, syntheticRecord, SYNTHETIC_IDENTITY } from './helpers/synthetic-records.ts';

function promoted(records: Parameters<typeof promote>[0], gate = DEFAULT_GATE): Promoted {
  const result = promote(records, gate);
  if ('error' in result) throw new Error(`unexpected error: ${result.error}`);
  return result;
}

function onlyEntry(records: Parameters<typeof promote>[0], gate = DEFAULT_GATE): TableEntry {
  const { entries } = promoted(records, gate);
  assert.is(entries.length, 1);
  return entries[0]!;
}

test('clear win: 25 % faster with disjoint quartiles and equal nodes is picked', () => {
  const e = onlyEntry(problem({ samples_us: evenSamples(100, 0.02) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]));
  assert.is(e.default, 'plain');
  assert.is(e.choice, 'rowblk.r2');
  assert.is(e.reason, 'picked rowblk.r2: +25.0 % over plain');
});

test('tie: identical timings keep the default and say it is a tie', () => {
  const e = onlyEntry(problem({}, [{ candidate: 'rowblk.r2' }]));
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: best rowblk.r2 +0.0 %, a tie with the default');
});

test('slower candidate: the default is fastest and the reason says so', () => {
  const e = onlyEntry(problem({}, [{ candidate: 'rowblk.r2', samples_us: evenSamples(125, 0.02) }]));
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: default is fastest, best rowblk.r2 -20.0 %');
});

test('within noise: +5.3 % over the gate but overlapping quartiles keeps the default', () => {
  // default p25 = 95, candidate p75 = 95 * 1.05 = 99.75: the IQRs overlap.
  const e = onlyEntry(problem({ samples_us: evenSamples(100, 0.1) }, [{ candidate: 'splitk.s4', samples_us: evenSamples(95, 0.1) }]));
  assert.is(e.choice, 'plain');
  assert.match(e.reason, /^kept: best splitk\.s4 \+5\.3 % but within noise \(rank test p 0\.\d+ >= 0\.01 over 9 vs 9 samples; p75 99\.75 >= default p25 95\.00 us\)$/);
});

/** `clean` samples around `center` (±2 %), then `slowed` ones 3x to 5x slower: another process took the core. */
function busySamples(center: number, clean: number, slowed: number): number[] {
  const fast = evenSamples(center, 0.02, clean);
  const slow = Array.from({ length: slowed }, (_, i) => center * (3 + (2 * i) / Math.max(1, slowed - 1)));
  // slowed samples spread through the run, as bursts of other work fall
  return fast.flatMap((x, i) => (i < slow.length ? [x, slow[i]!] : [x]));
}

test('busy machine: a real +60 % gain with a third of each side slowed is picked by the rank test, though the quartiles overlap', () => {
  const def = busySamples(100, 10, 5);
  const cand = busySamples(62.5, 10, 5);
  const e = onlyEntry(problem({ samples_us: def }, [{ candidate: 'rowblk.r4', samples_us: cand }]));
  assert.ok(e.candidates['rowblk.r4']!.p75_us! >= e.candidates.plain!.p25_us!, 'the quartiles overlap');
  assert.is(e.choice, 'rowblk.r4');
  assert.match(e.reason, /^picked rowblk\.r4: \+\d+\.\d % over plain$/);
});

test('busy machine: how far the slowed samples lie does not matter, only how many there are', () => {
  const far = (xs: number[]) => xs.map((x) => (x > 200 ? x * 100 : x));
  const def = busySamples(100, 10, 5);
  const cand = busySamples(62.5, 10, 5);
  assert.is(onlyEntry(problem({ samples_us: far(def) }, [{ candidate: 'rowblk.r4', samples_us: far(cand) }])).choice, 'rowblk.r4');
  // 4 of the candidate's 10 samples slowed and none of the default's: faster by the median, but not clearly
  const e = onlyEntry(problem({ samples_us: evenSamples(100, 0.02, 10) }, [{ candidate: 'rowblk.r4', samples_us: busySamples(62.5, 6, 4) }]));
  assert.is(e.choice, 'plain');
  assert.match(e.reason, /^kept: best rowblk\.r4 \+\d+\.\d % but within noise \(rank test p 0\.\d+ >= 0\.01 over 10 vs 10 samples; /);
});

test('quiet machine: disjoint quartiles pass on their own, where 5 samples a side give the rank test too little', () => {
  // candidate p75 = 88 < default p25 = 95, but its slowest sample beats only the default's slowest
  const e = onlyEntry(problem({ samples_us: [80, 95, 100, 105, 120] }, [{ candidate: 'rowblk.r2', samples_us: [70, 85, 86, 88, 110] }]));
  assert.is(e.choice, 'rowblk.r2');
  assert.is(e.reason, 'picked rowblk.r2: +16.3 % over plain');
});

test('below gate: +0.8 % with tight quartiles keeps the default', () => {
  const e = onlyEntry(problem({ samples_us: evenSamples(100, 0.001) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(99.2, 0.001) }]));
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: best rowblk.r2 +0.8 %, below gate 2.0 %');
});

test('the default gate is the one kpick.h gives C callers (KPICK_MIN_GAIN)', () => {
  const header = readFileSync(new URL('../hip-lib/include/kpick.h', import.meta.url), 'utf8');
  assert.is(Number(/#define KPICK_MIN_GAIN (\S+)/.exec(header)?.[1]), DEFAULT_GATE);
});

test('the gate is a parameter: +5.3 % passes at 0.02 and is kept at 0.1', () => {
  const records = problem({ samples_us: evenSamples(100, 0.01) }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(95, 0.01) }]);
  assert.is(onlyEntry(records, 0.02).choice, 'rowblk.r2');
  const strict = onlyEntry(records, 0.1);
  assert.is(strict.choice, 'plain');
  assert.is(strict.reason, 'kept: best rowblk.r2 +5.3 %, below gate 10.0 %');
});

test('pdl: a faster .pdl candidate is picked at rows <= pdl rows and kept out above, where the next one wins', () => {
  const others = [
    { candidate: 'gemv.rpb4.u16.pdl', pdl: true, samples_us: evenSamples(70, 0.01) },
    { candidate: 'gemv.rpb4.u16', samples_us: evenSamples(80, 0.01) },
  ];
  const at = (rows: StoreRecord['rows'], pdlRows: number) => {
    const result = promote(problem({ samples_us: evenSamples(100, 0.01) }, others, { rows }), DEFAULT_GATE, pdlRows);
    if ('error' in result) throw new Error(result.error);
    return result.entries[0]!;
  };
  assert.is(at(2, 2).choice, 'gemv.rpb4.u16.pdl');
  const above = at(4, 2);
  assert.is(above.choice, 'gemv.rpb4.u16');
  assert.is(above.reason, 'picked gemv.rpb4.u16: +25.0 % over plain');
  assert.is(at(4, 4).choice, 'gemv.rpb4.u16.pdl');
});

test('pdl: by default (in-step timing) a faster .pdl candidate is picked at every rows bucket, up to 128', () => {
  assert.is(DEFAULT_PDL_ROWS, 128);
  for (const rows of [1, 8, 128] as const) {
    const result = promote(problem({ samples_us: evenSamples(100, 0.01) }, [{ candidate: 'mma.w4.u8.pdl', pdl: true, samples_us: evenSamples(80, 0.01) }], { rows }), DEFAULT_GATE);
    if ('error' in result) throw new Error(result.error);
    assert.is(result.entries[0]!.choice, 'mma.w4.u8.pdl', `rows ${rows}`);
  }
});

test('pdl: when only a .pdl candidate beats the default above pdl rows, the default stays and the reason says why', () => {
  const result = promote(problem({ samples_us: evenSamples(100, 0.01) }, [{ candidate: 'mma.w4.u8.pdl', pdl: true, samples_us: evenSamples(80, 0.01) }], { rows: 8 }), DEFAULT_GATE, 2);
  if ('error' in result) throw new Error(result.error);
  assert.is(result.entries[0]!.choice, 'plain');
  assert.is(result.entries[0]!.reason, 'kept: best mma.w4.u8.pdl +25.0 % but PDL is picked only at rows <= 2');
  assert.equal(promote(problem({}, []), DEFAULT_GATE, 1.5), { error: 'pdl rows must be a whole number >= 0, got 1.5' });
});

test('pdl: the records\' pdl flag (KF_PDL, from the library) decides, not the name', () => {
  const at8 = (over: Partial<StoreRecord>) => {
    const result = promote(problem({ samples_us: evenSamples(100, 0.01) }, [{ samples_us: evenSamples(80, 0.01), ...over }], { rows: 8 }), DEFAULT_GATE, 2);
    if ('error' in result) throw new Error(result.error);
    return result.entries[0]!.choice;
  };
  assert.is(at8({ candidate: 'chained', pdl: true }), 'plain');
  assert.is(at8({ candidate: 'looks.like.pdl', pdl: false }), 'looks.like.pdl');
});

test('extra node: a linear candidate with more measured nodes than the default is kept out', () => {
  const e = onlyEntry(problem({}, [{ candidate: 'splitk.s4', nodes: 2, samples_us: evenSamples(80, 0.02) }]));
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: best splitk.s4 +25.0 % but 2 nodes > 1');
  assert.is(e.candidates['splitk.s4']!.nodes, 2);
});

test('nodes: declared count is used when none was measured', () => {
  const e = onlyEntry(problem({ nodes: null, nodes_declared: 1 }, [{ candidate: 'splitk.s4', nodes: null, nodes_declared: 2, samples_us: evenSamples(80, 0.02) }]));
  assert.is(e.choice, 'plain');
  assert.is(e.candidates['splitk.s4']!.nodes, 2);
  assert.is(e.candidates['plain']!.nodes, 1);
});

test('gated entry: a candidate with more nodes than the gated default is still picked on gain', () => {
  const gated = { op: 'gated' as const };
  const e = onlyEntry(
    problem({ candidate: 'gated.plain', nodes: 2 }, [{ candidate: 'gated.splitk.s4', nodes: 3, samples_us: evenSamples(80, 0.02) }], gated),
  );
  assert.is(e.op, 'gated');
  assert.is(e.default, 'gated.plain');
  assert.is(e.choice, 'gated.splitk.s4');
  assert.is(e.reason, 'picked gated.splitk.s4: +25.0 % over gated.plain');
});

test('the fastest passing candidate wins; a faster one with an extra node does not', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'splitk.s4', nodes: 2, samples_us: evenSamples(60, 0.02) },
      { candidate: 'rowblk.r2', samples_us: evenSamples(90, 0.02) },
      { candidate: 'rowblk.r4', samples_us: evenSamples(80, 0.02) },
    ]),
  );
  assert.is(e.choice, 'rowblk.r4');
  assert.is(e.reason, 'picked rowblk.r4: +25.0 % over plain');
});

test('parity: the fastest candidate that failed parity is never chosen', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'test.wrong', samples_us: evenSamples(10, 0.02), parity: { status: 'fail', rel_err: 0.5, bitwise: null, reason: 'rel_err 0.5 > tol' } },
      { candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) },
    ]),
  );
  assert.is(e.choice, 'rowblk.r2');
  assert.is(e.candidates['test.wrong']!.parity, 'fail');
  assert.is(e.candidates['test.wrong']!.rel_err, 0.5);
});

test('parity: when every faster candidate failed or skipped parity the default is kept', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'test.wrong', samples_us: evenSamples(10, 0.02), parity: { status: 'fail', rel_err: 0.5, bitwise: null, reason: 'off' } },
      { candidate: 'rowblk.r2', samples_us: evenSamples(50, 0.02), parity: { status: 'skipped', rel_err: null, bitwise: null, reason: '' } },
    ]),
  );
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: no candidate passed parity (1 failed parity, 1 parity not checked)');
});

test('parity: one failing record among pooled ones makes the candidate fail', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) },
      { candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02), seed: 2, parity: { status: 'fail', rel_err: 0.2, bitwise: false, reason: 'bits differ' } },
    ]),
  );
  assert.is(e.choice, 'plain');
  assert.is(e.candidates['rowblk.r2']!.parity, 'fail');
  assert.is(e.candidates['rowblk.r2']!.rel_err, 0.2);
});

const checkOnly = (candidate: string, status: 'pass' | 'fail', over: Partial<Parameters<typeof syntheticRecord>[0]> = {}) =>
  syntheticRecord({ kind: 'parity', candidate, samples_us: [], nodes: null, parity: { status, rel_err: status === 'pass' ? 1e-3 : 0.3, bitwise: null, reason: status === 'pass' ? '' : 'rel_err 0.3' }, ...over });

test('parity records: a separate pass makes a timing recorded with parity skipped eligible', () => {
  const skipped = { status: 'skipped' as const, rel_err: null, bitwise: null, reason: '' };
  const timingsOnly = problem({ parity: skipped }, [{ candidate: 'rowblk.r2', parity: skipped, samples_us: evenSamples(80, 0.02) }]);
  assert.is(onlyEntry(timingsOnly).choice, 'plain');
  const e = onlyEntry([...timingsOnly, checkOnly('rowblk.r2', 'pass')]);
  assert.is(e.choice, 'rowblk.r2');
  assert.is(e.candidates['rowblk.r2']!.samples, 9, 'a parity record adds no samples');
});

test('parity records: a separate fail keeps a fast, timed candidate out', () => {
  const e = onlyEntry([...problem({}, [{ candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) }]), checkOnly('rowblk.r2', 'fail')]);
  assert.is(e.choice, 'plain');
  assert.is(e.candidates['rowblk.r2']!.parity, 'fail');
});

test('parity records alone: a problem with no timing record is left out with a warning', () => {
  const { entries, warnings } = promoted([...problem({}, []), checkOnly('plain', 'pass', { is_default: true, rows: 16 }), checkOnly('rowblk.r2', 'pass', { rows: 16 })]);
  assert.equal(entries.map((e) => e.bucket), [1]);
  assert.equal(warnings, ['1 problem(s) have parity checks or a floor but no candidate timings; left out']);
});

test('status: failed and unsupported candidates are ignored even when faster', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'threads.t2', status: 'failed', reason: 'launch error', samples_us: evenSamples(20, 0.02) },
      { candidate: 'rowblk.r8', status: 'unsupported', reason: 'rows', samples_us: [] },
    ]),
  );
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: no candidate has timings (1 failed, 1 unsupported)');
  assert.is(e.candidates['threads.t2']!.status, 'failed');
  // A failed run's samples are not trusted: none are pooled.
  assert.is(e.candidates['threads.t2']!.samples, 0);
  assert.is(e.candidates['threads.t2']!.median_us, null);
  assert.is(e.candidates['rowblk.r8']!.status, 'unsupported');
});

test('status: a failed candidate beside an eligible one does not block the eligible one', () => {
  const e = onlyEntry(
    problem({}, [
      { candidate: 'threads.t2', status: 'failed', reason: 'launch error', samples_us: [] },
      { candidate: 'rowblk.r2', samples_us: evenSamples(80, 0.02) },
    ]),
  );
  assert.is(e.choice, 'rowblk.r2');
});

test('pooled samples: records of one candidate from two stores are pooled before the rule', () => {
  // Three samples each is below MIN_SAMPLES; pooled, six are enough to judge noise.
  assert.ok(3 < MIN_SAMPLES && 6 >= MIN_SAMPLES);
  const three = (c: number) => evenSamples(c, 0.02, 3);
  const alone = onlyEntry(problem({ samples_us: three(100) }, [{ candidate: 'rowblk.r2', samples_us: three(80) }]));
  assert.is(alone.choice, 'plain');
  assert.is(alone.reason, `kept: best rowblk.r2 +25.0 % but too few samples to judge noise (3 < ${MIN_SAMPLES})`);

  const pooled = onlyEntry([
    ...problem({ samples_us: three(100) }, [{ candidate: 'rowblk.r2', samples_us: three(80) }]),
    ...problem({ samples_us: three(100), seed: 2 }, [{ candidate: 'rowblk.r2', samples_us: three(80), seed: 2 }]),
  ]);
  assert.is(pooled.choice, 'rowblk.r2');
  assert.is(pooled.candidates['rowblk.r2']!.samples, 6);
  assert.is(pooled.candidates['plain']!.samples, 6);
});

test('poolCandidate: median and quartiles of the pooled samples', () => {
  const c = poolCandidate([
    syntheticRecord({ samples_us: [4, 1, 3] }),
    syntheticRecord({ samples_us: [2, 5], seed: 2 }),
  ]);
  assert.is(c.samples, 5);
  assert.is(c.median_us, 3);
  assert.is(c.p25_us, 2);
  assert.is(c.p75_us, 4);
});

test('entries keep every candidate with median, quartiles, nodes, params and parity', () => {
  const e = onlyEntry(
    problem({ samples_us: evenSamples(100, 0.02) }, [
      { candidate: 'rowblk.r4', params: { rows: 4 }, samples_us: evenSamples(80, 0.02), stack_bound: true, parity: { status: 'pass', rel_err: 2e-3, bitwise: true, reason: '' } },
    ]),
  );
  assert.equal(Object.keys(e.candidates), ['plain', 'rowblk.r4']);
  const r4 = e.candidates['rowblk.r4']!;
  assert.is(r4.median_us, 80);
  assert.ok(Math.abs(r4.p25_us! - 79.2) < 1e-9);
  assert.ok(Math.abs(r4.p75_us! - 80.8) < 1e-9);
  assert.is(r4.samples, 9);
  assert.equal(r4.params, { rows: 4 });
  assert.is(r4.stack_bound, true);
  assert.is(r4.rel_err, 2e-3);
  assert.is(r4.status, 'ok');
});

test('floor_us is the median of the floor records; null without one', () => {
  const floor = syntheticRecord({ kind: 'floor', candidate: 'floor', samples_us: evenSamples(40, 0.02) });
  const withFloor = onlyEntry([...problem({}, []), floor]);
  assert.is(withFloor.floor_us, 40);
  assert.not.ok('floor' in withFloor.candidates);
  assert.is(onlyEntry(problem({}, [])).floor_us, null);
  assert.is(onlyEntry(problem({}, [])).reason, 'kept: no other candidate measured');
});

test('default missing on one problem: the entry keeps the op default and says it was not measured', () => {
  const { entries } = promoted([
    ...problem({}, [{ candidate: 'rowblk.r2' }]),
    syntheticRecord({ candidate: 'rowblk.r2', rows: 2, samples_us: evenSamples(10, 0.02) }),
  ]);
  const m2 = entries.find((e) => e.bucket === 2)!;
  assert.is(m2.choice, 'plain');
  assert.is(m2.default, 'plain');
  assert.is(m2.reason, 'kept: default plain not measured on this problem');
});

test('no default anywhere for an op: its problems are left out with one warning', () => {
  const { entries, warnings } = promoted([
    ...problem({}, []),
    syntheticRecord({ op: 'gated', candidate: 'gated.rowblk.r4' }),
    syntheticRecord({ op: 'gated', candidate: 'gated.rowblk.r4', rows: 2 }),
  ]);
  assert.equal(entries.map((e) => e.op), ['linear']);
  assert.equal(warnings, ['op gated: no class default in the records; 2 problem(s) left out (the route keeps the default there)']);
});

test('default without timings keeps the default whatever the others do', () => {
  const e = onlyEntry(problem({ status: 'failed', samples_us: [] }, [{ candidate: 'rowblk.r2', samples_us: evenSamples(50, 0.02) }]));
  assert.is(e.choice, 'plain');
  assert.is(e.reason, 'kept: default plain has no timing (status failed, 0 samples)');
});

test('mixed identities: one error naming each differing field, no entries', () => {
  const result = promote(
    [
      ...problem({}, []),
      syntheticRecord({ identity: { ...SYNTHETIC_IDENTITY, device: 'Other Device', blas: 'blas 2' }, rows: 2, is_default: true }),
    ],
    DEFAULT_GATE,
  );
  assert.ok('error' in result);
  if (!('error' in result)) return;
  assert.match(result.error, /mix identities/);
  assert.match(result.error, /device \("Other Device" vs "Synthetic Device 1"\)/);
  assert.match(result.error, /blas \("blas 2" vs "none"\)/);
  assert.not.match(result.error, /arch|space|runtime/);
  assert.not.match(result.error, /\n/);
});

test('two class defaults for one op is an error', () => {
  const result = promote([...problem({}, [{ candidate: 'rowblk.r2', is_default: true }])], DEFAULT_GATE);
  assert.equal(result, { error: 'op linear has 2 class defaults (plain, rowblk.r2); expected exactly one' });
});

/** One fp8 problem: the W8A8 default at 100 us and the given candidates. */
function fp8Problem(def: Partial<StoreRecord>, others: Partial<StoreRecord>[]): StoreRecord[] {
  const at = { dtype: 'fp8' as const, numeric: 'w8a8' as const };
  return [
    syntheticRecord({ ...at, candidate: 'w8a8.plain', is_default: true, ...def }),
    ...others.map((o) => syntheticRecord({ ...at, ...o })),
  ];
}

test('fp8: the default is the W8A8 one, and a faster W8A16 (a tighter bar) is picked over it across classes', () => {
  const e = onlyEntry(fp8Problem({}, [{ candidate: 'w8a16.rowblk.r4', numeric: 'w8a16', samples_us: evenSamples(60, 0.02) }]));
  assert.is(e.default, 'w8a8.plain');
  assert.is(e.choice, 'w8a16.rowblk.r4');
  assert.is(e.reason, 'picked w8a16.rowblk.r4: +66.7 % over w8a8.plain');
  assert.is(e.candidates['w8a16.rowblk.r4']!.numeric, 'w8a16', 'the class stays beside the timing');
  assert.is(e.candidates['w8a8.plain']!.numeric, 'w8a8');
});

test('fp8: a class with a looser bar than the default\'s is never picked over it, however fast', () => {
  const e = onlyEntry(
    fp8Problem({ candidate: 'w8a16.plain', numeric: 'w8a16' }, [
      { candidate: 'w8a8.fast', numeric: 'w8a8', samples_us: evenSamples(50, 0.02) },
      { candidate: 'w8a16.rowblk.r4', numeric: 'w8a16', samples_us: evenSamples(80, 0.02) },
    ]),
  );
  assert.is(e.choice, 'w8a16.rowblk.r4', 'the fastest of its own class or tighter');
  const kept = onlyEntry(fp8Problem({ candidate: 'w8a16.plain', numeric: 'w8a16' }, [{ candidate: 'w8a8.fast', numeric: 'w8a8', samples_us: evenSamples(50, 0.02) }]));
  assert.is(kept.choice, 'w8a16.plain');
  assert.is(kept.reason, "kept: best w8a8.fast +100.0 % but its class w8a8 has a looser parity bar (6e-2) than the default's w8a16 (1e-2)");
});

test('fp8 and bf16 problems of one op each have their own class default', () => {
  const { entries } = promoted([...problem({}, [{ candidate: 'rowblk.r2', samples_us: evenSamples(70, 0.02) }]), ...fp8Problem({}, [])]);
  assert.equal(entries.map((e) => `${e.dtype} ${e.default} ${e.choice}`), ['bf16 plain rowblk.r2', 'fp8 w8a8.plain w8a8.plain']);
  const two = promote(fp8Problem({}, [{ candidate: 'w8a16.plain', numeric: 'w8a16', is_default: true }]), DEFAULT_GATE);
  assert.equal(two, { error: 'op linear fp8 has 2 class defaults (w8a16.plain, w8a8.plain); expected exactly one' });
});

test('no records and a gate outside 0..1 are errors', () => {
  assert.equal(promote([], DEFAULT_GATE), { error: 'no records to promote' });
  assert.equal(promote(problem({}, []), 1.5), { error: 'gate must be within 0..1, got 1.5' });
  assert.equal(promote(problem({}, []), Number.NaN), { error: 'gate must be within 0..1, got NaN' });
});

test('entries are sorted by op, dtype, n, k, bucket whatever the record order', () => {
  const shapes: Partial<Parameters<typeof syntheticRecord>[0]>[] = [
    { op: 'linear', dtype: 'fp16', n: 1024, k: 512, rows: 1 },
    { op: 'linear', dtype: 'bf16', n: 4096, k: 512, rows: 2 },
    { op: 'linear', dtype: 'bf16', n: 4096, k: 512, rows: 1 },
    { op: 'linear', dtype: 'bf16', n: 1024, k: 4096, rows: 8 },
  ];
  const records = shapes.map((s) => syntheticRecord({ ...s, is_default: true }));
  const keys = (rs: typeof records) => promoted(rs).entries.map((e) => `${e.dtype} ${e.n} ${e.k} ${e.bucket}`);
  const expected = ['bf16 1024 4096 8', 'bf16 4096 512 1', 'bf16 4096 512 2', 'fp16 1024 512 1'];
  assert.equal(keys(records), expected);
  assert.equal(keys([...records].reverse()), expected);
});

test('chooseIdentity: the newest record\'s build by default, others skipped with counts and what differs; a tag prefix picks one', () => {
  const gcc = { ...SYNTHETIC_IDENTITY, compiler: 'gcc 12.2.0 -O3' };
  const records = [
    ...problem({}, [{ candidate: 'rowblk.r2' }]),
    ...problem({ identity: gcc, at: '2025-03-01T00:00:00.000Z' }, [{ candidate: 'rowblk.r2', identity: gcc, at: '2025-03-01T00:00:00.000Z' }]),
  ];
  const chosen = chooseIdentity(records);
  assert.ok('identity' in chosen);
  if (!('identity' in chosen)) return;
  assert.equal(chosen.identity, gcc);
  assert.is(chosen.records.length, 2);
  assert.equal(chosen.skipped.map((s) => [s.tag, s.count, s.differs]), [[identityTag(SYNTHETIC_IDENTITY), 2, 'compiler ("gcc 12.2.0 -O3" vs "synthetic-cc 1.0 -O3")']]);
  const back = chooseIdentity(records, identityTag(SYNTHETIC_IDENTITY).slice(0, 4));
  assert.ok('identity' in back && back.identity.compiler === SYNTHETIC_IDENTITY.compiler);
  assert.ok('error' in chooseIdentity(records, 'zz'));
  assert.equal(chooseIdentity([]), { error: 'no records to promote' });
  assert.is(identityTag(SYNTHETIC_IDENTITY), identityTag({ ...SYNTHETIC_IDENTITY }), 'a tag is the identity, not the object');
  assert.match(identityTag(gcc), /^[0-9a-f]{12}$/);
});

test('moe problems: one entry per E and top-k, keyed and ordered by them; the node rule does not hold a grouped kernel to the loop default', () => {
  const moe = (topk: number, over: Partial<StoreRecord> = {}) =>
    problem(
      { candidate: 'moe.loop', op: 'moe', experts: 8, topk, nodes: 9, nodes_declared: 3 },
      [{ candidate: 'moe.grouped.r4', op: 'moe', experts: 8, topk, nodes: 1, nodes_declared: 1, samples_us: evenSamples(60, 0.02) }],
      over,
    );
  const { entries } = promoted([...moe(4), ...moe(2)]);
  assert.equal(entries.map((e) => [e.op, e.experts, e.topk, e.choice]), [
    ['moe', 8, 2, 'moe.grouped.r4'],
    ['moe', 8, 4, 'moe.grouped.r4'],
  ]);
  assert.is(entries[0]!.reason, 'picked moe.grouped.r4: +66.7 % over moe.loop');
  // and a linear candidate with more nodes than its default is still held to it
  const lin = onlyEntry(problem({ nodes: 1 }, [{ candidate: 'rowblk.r2', nodes: 2, samples_us: evenSamples(60, 0.02) }]));
  assert.is(lin.choice, 'plain');
});

test('moe under both routings: each candidate ranks on its paired uniform x skewed geomeans, the floor on the geomean of the two', () => {
  const moe = { op: 'moe', experts: 8, topk: 2 } as const;
  const skewed = { ...moe, routing: 'skewed' } as const;
  const def = { candidate: 'moe.loop', is_default: true, nodes: 9, nodes_declared: 3 };
  const records = [
    // uniform: the spread one is fastest (50 us), the balanced one 60, the default 100
    ...problem({ ...moe, ...def }, [
      { ...moe, candidate: 'moe.spread', samples_us: evenSamples(50, 0.02) },
      { ...moe, candidate: 'moe.balanced', samples_us: evenSamples(60, 0.02) },
      { ...moe, candidate: 'moe.once', samples_us: evenSamples(40, 0.02) },
    ]),
    syntheticRecord({ ...moe, kind: 'floor', candidate: 'floor', samples_us: evenSamples(20, 0.02), parity: { status: 'skipped', rel_err: null, bitwise: null, reason: 'floor' } }),
    // skewed: the spread one slows to 200 us (geomean 100: no gain), the balanced one to 70 (geomean 64.8)
    syntheticRecord({ ...skewed, ...def, samples_us: evenSamples(100, 0.02) }),
    syntheticRecord({ ...skewed, candidate: 'moe.spread', samples_us: evenSamples(200, 0.02) }),
    syntheticRecord({ ...skewed, candidate: 'moe.balanced', samples_us: evenSamples(70, 0.02) }),
    syntheticRecord({ ...skewed, kind: 'floor', candidate: 'floor', samples_us: evenSamples(5, 0.02), parity: { status: 'skipped', rel_err: null, bitwise: null, reason: 'floor' } }),
  ];
  const e = onlyEntry(records);
  assert.is(e.choice, 'moe.balanced', 'fastest on the geomean, not on uniform alone');
  assert.ok(Math.abs(e.candidates['moe.balanced']!.median_us! - Math.sqrt(60 * 70)) < 1e-9);
  assert.ok(Math.abs(e.candidates['moe.spread']!.median_us! - 100) < 1e-9);
  assert.is(e.candidates['moe.once']!.median_us, null, 'timed under one routing only: no paired samples, not eligible');
  assert.ok(Math.abs(e.floor_us! - 10) < 1e-9, 'sqrt(20 x 5)');
  // the same problem with its uniform records alone ranks on them, as stores before the skewed pass do
  assert.is(onlyEntry(records.filter((r) => r.routing === undefined)).choice, 'moe.once');
});

test('paired geomeans: the i-th of each side, as many as both have', () => {
  assert.equal(pairedGeomeans([4, 9, 1], [1, 4]), [2, 6]);
  assert.equal(pairedGeomeans([], [1]), []);
});

test.run();
