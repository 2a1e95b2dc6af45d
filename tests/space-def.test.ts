// space.def's GPU rows, read as text: a CPU machine cannot load the GPU
// library's describer, so the rules a GPU row must keep (name from its
// parameters, class heads, row ranges) are checked on the list itself.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

interface Row {
  backend: 'CPU' | 'GPU';
  id: string; name: string; family: string; op: string;
  p: [number, number, number]; nodes: number; bitwiseWith: string; flags: string; rowsMin: number; rowsMax: number;
}

const text = readFileSync(join(import.meta.dirname, '..', 'hip-lib', 'src', 'space.def'), 'utf8');
const rows: Row[] = [...text.matchAll(/^(CPU|GPU)\(([^)]*)\)\s*$/gm)].map((m) => {
  const f = m[2]!.split(',').map((s) => s.trim());
  assert.is(f.length, 12, `a row has 12 fields: ${m[0]}`);
  return {
    backend: m[1] as 'CPU' | 'GPU', id: f[0]!, name: JSON.parse(f[1]!) as string, family: f[2]!, op: f[3]!,
    p: [Number(f[4]), Number(f[5]), Number(f[6])], nodes: Number(f[7]), bitwiseWith: f[8]!, flags: f[9]!,
    rowsMin: Number(f[10]), rowsMax: Number(f[11]),
  };
});
const families = new Map([...text.matchAll(/^GPU_FAMILY\((\w+),\s*"([^"]*)"\)/gm)].map((m) => [m[1]!, m[2]!]));
const gpu = rows.filter((r) => r.backend === 'GPU');
const byId = new Map(gpu.map((r) => [r.id, r]));
const cmma = gpu.filter((r) => r.family === 'cmma');
const wgmma = gpu.filter((r) => r.family === 'wgmma');
const isW8a8 = (r: Row) => r.flags.includes('KF_W8A8');

test('the list parses: GPU rows, ids unique, every family named by a GPU_FAMILY line', () => {
  assert.ok(gpu.length > 50, `${gpu.length} GPU rows`);
  assert.is(byId.size, gpu.length, 'ids are unique');
  for (const r of gpu) assert.ok(families.has(r.family), `${r.name}: family ${r.family} has no GPU_FAMILY line`);
});

test('every GPU bitwise_with names a row of the same op and numeric class whose own head is itself', () => {
  const numeric = (r: Row) => (r.flags.includes('KF_W8A8') ? 'w8a8' : r.flags.includes('KF_W8A16') ? 'w8a16' : 'w16a16');
  for (const r of gpu) {
    if (r.bitwiseWith === 'none') continue;
    const head = byId.get(r.bitwiseWith);
    assert.ok(head, `${r.name}: bitwise_with ${r.bitwiseWith} is not a GPU row`);
    assert.is(head!.op, r.op, `${r.name}: its class head computes another op`);
    assert.is(numeric(head!), numeric(r), `${r.name}: its class head is of another numeric class`);
    assert.is(head!.bitwiseWith, head!.id, `${r.name}: ${head!.name} is not a class head`);
  }
});

test('the cmma family: params B,S,W; names cmma.bB.wW.sS[.pdl], .pdl exactly on the KF_PDL rows', () => {
  assert.is(families.get('cmma'), 'B,S,W');
  assert.ok(cmma.length > 0, 'the family has rows');
  for (const r of cmma) {
    const [b, s, w] = r.p;
    const name = `${r.op === 'GATED' ? 'gated.' : ''}cmma.b${b}.w${w}.s${s}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`;
    assert.is(r.name, name, `${r.id}: name from its params`);
    assert.is(r.id, name.replaceAll('.', '_'), `${r.name}: id from its name`);
  }
});

test('cmma rows are what the kernel builds: 16 or 32 W rows a warp (32 only to rows 64), 4 or 8 warps, S 1..8, one node', () => {
  for (const r of cmma) {
    const [b, s, w] = r.p;
    assert.ok(w === 4 || w === 8, `${r.name}: W = ${w}`);
    assert.ok(b === 16 * w || b === 32 * w, `${r.name}: B / W = ${b / w}`);
    if (b === 32 * w) assert.ok(r.rowsMax <= 64, `${r.name}: 32 rows a warp stop at rows 64 (registers)`);
    assert.ok(s >= 1 && s <= 8, `${r.name}: S = ${s} (a portable cluster)`);
    assert.ok(r.rowsMin >= 1 && r.rowsMin <= r.rowsMax && r.rowsMax <= 128, `${r.name}: rows ${r.rowsMin}..${r.rowsMax}`);
    assert.is(r.nodes, 1, `${r.name}: one node (the split-K sum stays in the cluster)`);
    assert.not.ok(r.flags.includes('KF_DEFAULT'), `${r.name}: never a class default`);
  }
});

/** A family whose bits depend on its split S only (param slot s): every row's head is a row
 * of the family with the same S, and all rows of one key share one head. */
function oneHeadPerSplit(family: Row[], s: number, key: (r: Row) => string) {
  const heads = new Map<string, string>();
  for (const r of family) {
    const head = byId.get(r.bitwiseWith);
    assert.ok(head && head.family === r.family, `${r.name}: its class head is a ${r.family} row`);
    assert.is(head!.p[s], r.p[s], `${r.name}: its class head splits K the same (S)`);
    const k = key(r);
    if (!heads.has(k)) heads.set(k, r.bitwiseWith);
    assert.is(r.bitwiseWith, heads.get(k), `${r.name}: one head for ${k}`);
  }
}

test('cmma bits depend on S only: one class head per op and S, shared by every B, W and PDL row of it', () => {
  oneHeadPerSplit(cmma, 1, (r) => `${r.op}/${r.p[1]}`);
});

test('the wgmma family: params WG,T,S; names [gated.][w8a8.]wgmma.mB.tT.sS[.pdl] with B = 64 WG', () => {
  assert.is(families.get('wgmma'), 'WG,T,S');
  assert.ok(wgmma.some(isW8a8) && wgmma.some((r) => !isW8a8(r)), 'both the 16-bit and the W8A8 rows exist');
  for (const r of wgmma) {
    const [wg, t, s] = r.p;
    const name = `${r.op === 'GATED' ? 'gated.' : ''}${isW8a8(r) ? 'w8a8.' : ''}wgmma.m${64 * wg}.t${t}.s${s}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`;
    assert.is(r.name, name, `${r.id}: name from its params and class`);
    assert.is(r.id, name.replaceAll('.', '_'), `${r.name}: id from its name`);
    assert.ok([1, 2, 4].includes(wg) && t >= 2 && t <= 16 && s >= 1 && s <= 8, `${r.name}: WG ${wg}, T ${t}, S ${s}`);
    assert.not.ok(r.flags.includes('KF_W8A16'), `${r.name}: fp8 rows are W8A8 (x quantized, e4m3 x e4m3)`);
    assert.not.ok(r.flags.includes('KF_DEFAULT'), `${r.name}: never a class default`);
  }
});

test('a W8A8 wgmma row is two nodes (the default\'s own quant, then the tile), a 16-bit one one', () => {
  for (const r of wgmma) assert.is(r.nodes, isW8a8(r) ? 2 : 1, r.name);
  const w8a8Default = gpu.find((r) => r.op === 'LINEAR' && isW8a8(r) && r.flags.includes('KF_DEFAULT'));
  assert.ok(w8a8Default, 'the linear op has a W8A8 default');
  for (const r of wgmma.filter((x) => isW8a8(x) && x.op === 'LINEAR')) assert.ok(r.nodes <= w8a8Default!.nodes, `${r.name}: no more nodes than the default`);
});

test('wgmma bits depend on S only: one class head per op, class and S', () => {
  oneHeadPerSplit(wgmma, 2, (r) => `${r.op}/${isW8a8(r) ? 'w8a8' : 'w16a16'}/${r.p[2]}`);
});

test('the moe fused family: params W,U,T; names moe.fused.wW.uU.tT[.pdl]; rows 1-8; two nodes; bitwise with moe.mma of its W', () => {
  assert.is(families.get('moe_fused'), 'W,U,T');
  const fused = gpu.filter((r) => r.family === 'moe_fused');
  assert.ok(fused.length > 0, 'the family has rows');
  const mmaHeads = gpu.filter((r) => r.family === 'moe_mma' && r.bitwiseWith === r.id);
  for (const r of fused) {
    const [w, u, t] = r.p;
    assert.is(r.name, `moe.fused.w${w}.u${u}.t${t}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`, `${r.id}: name from its params`);
    assert.is(r.op, 'MOE');
    assert.ok(r.rowsMin === 1 && r.rowsMax <= 8, `${r.name}: one warp routes the call, rows stop at 8`);
    assert.is(r.nodes, 2, `${r.name}: gate/up and down, no plan, no combine`);
    const head = mmaHeads.find((h) => h.p[0] === w);
    assert.ok(head, `${r.name}: moe.mma has a class head of W ${w}`);
    assert.is(r.bitwiseWith, head!.id, `${r.name}: moe.mma's sums in its order (its bits depend on W only)`);
  }
});

test('the moe tiles family: params W,U,T; names moe.tiles.wW.uU.tT; four nodes as moe.mma; one class head (a warp sums a tile alone)', () => {
  assert.is(families.get('moe_tiles'), 'W,U,T');
  const tiles = gpu.filter((r) => r.family === 'moe_tiles');
  assert.ok(tiles.length > 0, 'the family has rows');
  const heads = tiles.filter((r) => r.bitwiseWith === r.id);
  assert.is(heads.length, 1, 'W, U and T change no bits: one head');
  for (const r of tiles) {
    const [w, u, t] = r.p;
    assert.is(r.name, `moe.tiles.w${w}.u${u}.t${t}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`, `${r.id}: name from its params`);
    assert.is(r.op, 'MOE');
    assert.is(r.nodes, 4, `${r.name}: plan, gate/up, down, combine`);
    assert.is(r.bitwiseWith, heads[0]!.id, `${r.name}: bitwise with the family's head`);
  }
});

test('the fp8 twins of moe.tiles and moe.fused: W8A16 rows named moe.w8a16.tiles/fused.wW.uU.tT[.pdl]; bits as their 16-bit twins', () => {
  for (const family of ['moe_w8a16_tiles', 'moe_w8a16_fused']) assert.is(families.get(family), 'W,U,T', family);
  const tiles = gpu.filter((r) => r.family === 'moe_w8a16_tiles');
  const fused = gpu.filter((r) => r.family === 'moe_w8a16_fused');
  assert.ok(tiles.length > 0 && fused.length > 0, 'both families have rows');
  for (const r of [...tiles, ...fused]) {
    const [w, u, t] = r.p;
    const kind = r.family === 'moe_w8a16_tiles' ? 'tiles' : 'fused';
    assert.is(r.name, `moe.w8a16.${kind}.w${w}.u${u}.t${t}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`, `${r.id}: name from its params`);
    assert.is(r.op, 'MOE');
    assert.ok(r.flags.includes('KF_W8A16') && !r.flags.includes('KF_DEFAULT'), `${r.name}: a W8A16 row, never the default`);
    assert.is(r.nodes, kind === 'tiles' ? 4 : 2, `${r.name}: the nodes of its 16-bit twin`);
  }
  const tileHeads = tiles.filter((r) => r.bitwiseWith === r.id);
  assert.is(tileHeads.length, 1, 'W, U and T change no bits of a tiles row: one head');
  for (const r of tiles) assert.is(r.bitwiseWith, tileHeads[0]!.id, `${r.name}: bitwise with the family's head`);
  for (const r of fused) {
    assert.ok(r.rowsMax <= 8, `${r.name}: one warp routes the call, rows stop at 8`);
    const head = byId.get(r.bitwiseWith)!;
    assert.ok(head.family === 'moe_w8a16_fused' && head.p[0] === r.p[0], `${r.name}: its head is a fused row of its W (bits depend on W)`);
  }
});

/** The name a W,U,R row's params give it: [gated.]STEM.wW.uU[.rR][.pdl], R 1 unnamed. */
function wurName(stem: string, r: (typeof gpu)[number]): string {
  const [w, u, tiles] = r.p;
  return `${r.op === 'GATED' ? 'gated.' : ''}${stem}.w${w}.u${u}${tiles! > 1 ? `.r${tiles}` : ''}${r.flags.includes('KF_PDL') ? '.pdl' : ''}`;
}

test('the mma family: params W,U,R; names [gated.]mma.wW.uU[.rR][.pdl] (R 1 unnamed); R = 2 or 4 only with R * U <= 8 and rows <= 32; bitwise with the R = 1 row of its W', () => {
  assert.is(families.get('mma'), 'W,U,R');
  const rows = gpu.filter((r) => r.family === 'mma');
  assert.ok(rows.some((r) => r.p[2] === 2), 'rows with two tiles a block');
  assert.ok(rows.some((r) => r.p[2] === 4), 'rows with four tiles a block');
  for (const r of rows) {
    const [w, u, tiles] = r.p;
    assert.is(r.name, wurName('mma', r), `${r.id}: name from its params`);
    assert.ok(tiles === 1 || ((tiles === 2 || tiles === 4) && tiles * u! <= 8 && r.rowsMax <= 32), `${r.name}: R is 1, or 2 or 4 with R * U <= 8 and rows <= 32 (registers)`);
    const head = byId.get(r.bitwiseWith)!;
    assert.ok(head.family === 'mma' && head.op === r.op && head.p[0] === w && head.p[2] === 1, `${r.name}: its head is the R = 1 row of W ${w} (bits depend on W only)`);
  }
});

test('the w8a16.mma family: params W,U,R; names [gated.]w8a16.mma.wW.uU[.rR][.pdl] (R 1 unnamed); R = 2 with U <= 2, R = 4 with U = 1 (none kept); bitwise with the R = 1 row of its W', () => {
  assert.is(families.get('w8a16mma'), 'W,U,R');
  const rows = gpu.filter((r) => r.family === 'w8a16mma');
  assert.ok(rows.some((r) => r.p[2] === 2), 'rows with two tiles a warp');
  for (const r of rows) {
    const [w, u, tiles] = r.p;
    assert.is(r.name, wurName('w8a16.mma', r), `${r.id}: name from its params`);
    assert.ok(tiles === 1 || (tiles === 2 && u! <= 2) || (tiles === 4 && u === 1), `${r.name}: R is 1, 2 with U <= 2, or 4 with U = 1`);
    const head = byId.get(r.bitwiseWith)!;
    assert.ok(head.family === 'w8a16mma' && head.op === r.op && head.p[0] === w && head.p[2] === 1, `${r.name}: its head is the R = 1 row of W ${w} (bits depend on W only)`);
  }
});

// the grouped wgmma tile over the moe plan, and its .x128 twin (items of up to 128 rows of one
// expert, at rows 65-128 only, where an item over 64 rows is one chain: its own class)
for (const f of [
  { family: 'moe_wgmma', prefix: 'moe.wgmma', rowsMin: 16, why: 'at rows 4 and 8 it ran behind moe.tiles' },
  { family: 'moe_wgmma_x128', prefix: 'moe.wgmma.x128', rowsMin: 65, why: 'below 65 rows every item fits moe.wgmma\'s 64' },
]) {
  test(`${f.prefix}: params WG,T,KB; names ${f.prefix}.mB.tT.kKB with B = 64 WG; five nodes; rows ${f.rowsMin}-128; one class head; no .pdl`, () => {
    assert.is(families.get(f.family), 'WG,T,KB');
    const rows = gpu.filter((r) => r.family === f.family);
    assert.ok(rows.length > 0, 'the family has rows');
    const heads = rows.filter((r) => r.bitwiseWith === r.id);
    assert.is(heads.length, 1, 'WG, T and KB change no bits: one head');
    for (const r of rows) {
      const [wg, t, kb] = r.p;
      assert.is(r.name, `${f.prefix}.m${64 * wg}.t${t}.k${kb}`, `${r.id}: name from its params`);
      assert.ok([1, 2].includes(wg) && t >= 2 && t <= 16 && [1, 2, 4].includes(kb), `${r.name}: WG ${wg}, T ${t}, KB ${kb}`);
      assert.is(r.op, 'MOE');
      assert.is(r.nodes, 5, `${r.name}: plan, gather, gate/up, down, combine`);
      assert.is(r.rowsMin, f.rowsMin, `${r.name}: ${f.why}`);
      assert.is(r.rowsMax, 128);
      assert.not.ok(r.flags.includes('KF_PDL'), `${r.name}: no .pdl rows`);
      assert.is(r.bitwiseWith, heads[0]!.id, `${r.name}: bitwise with the family's head`);
    }
  });
}

test.run();
