// What to measure: model presets (from each model's published config.json),
// the decode linears they imply, and the parsers of --shapes, --rows, --dtype.
import { BUCKETS, DTYPES, type Bucket, type Dtype, type Op } from './schema.ts';
import { shapeId } from './shape-key.ts';

export type { Bucket };

export interface ModelPreset {
  name: string;
  hidden: number;
  intermediate: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocab: number;
  layers: number;
  /** RMSNorm epsilon, for serve-bench */
  rmsEps: number;
  /**
   * A mixture-of-experts model: every layer's MLP is `experts` experts of
   * `intermediate` (moe_intermediate_size), each row routed to `topk` of them
   * by a router linear hidden -> experts.
   */
  moe?: { experts: number; topk: number };
  /** the config the numbers come from */
  source: string;
}

/**
 * One decode linear: y[M,N] = x[M,K] . W^T (W is 2N x K for the gated op), or
 * a moe layer's routed experts (N the expert intermediate, K the hidden size).
 */
export interface Linear {
  /** qkv | o | gate_up | down | router | experts | lm_head, or NxK for a --shapes entry */
  name: string;
  op: Op;
  n: number;
  k: number;
  /** op moe only: experts E and top-k */
  experts?: number;
  topk?: number;
}

const HF = 'huggingface.co';
export const MODELS: readonly ModelPreset[] = [
  {
    name: 'Llama-3.1-8B',
    hidden: 4096,
    intermediate: 14336,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    vocab: 128256,
    layers: 32,
    rmsEps: 1e-5,
    source: `${HF}/meta-llama/Llama-3.1-8B/config.json`,
  },
  {
    name: 'Qwen3-8B',
    hidden: 4096,
    intermediate: 12288,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    vocab: 151936,
    layers: 36,
    rmsEps: 1e-6,
    source: `${HF}/Qwen/Qwen3-8B/config.json`,
  },
  {
    name: 'Qwen3-4B',
    hidden: 2560,
    intermediate: 9728,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    vocab: 151936,
    layers: 36,
    rmsEps: 1e-6,
    source: `${HF}/Qwen/Qwen3-4B/config.json`,
  },
  {
    name: 'Qwen3-1.7B',
    hidden: 2048,
    intermediate: 6144,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    vocab: 151936,
    layers: 28,
    rmsEps: 1e-6,
    source: `${HF}/Qwen/Qwen3-1.7B/config.json`,
  },
  {
    name: 'Qwen3-0.6B',
    hidden: 1024,
    intermediate: 3072,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    vocab: 151936,
    layers: 28,
    rmsEps: 1e-6,
    source: `${HF}/Qwen/Qwen3-0.6B/config.json`,
  },
  {
    name: 'Qwen3-30B-A3B',
    hidden: 2048,
    intermediate: 768,
    heads: 32,
    kvHeads: 4,
    headDim: 128,
    vocab: 151936,
    layers: 48,
    rmsEps: 1e-6,
    moe: { experts: 128, topk: 8 },
    source: `${HF}/Qwen/Qwen3-30B-A3B/config.json (moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8)`,
  },
  {
    name: 'Mixtral-8x7B-v0.1',
    hidden: 4096,
    intermediate: 14336,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    vocab: 32000,
    layers: 32,
    rmsEps: 1e-5,
    moe: { experts: 8, topk: 2 },
    source: `${HF}/mistralai/Mixtral-8x7B-v0.1/config.json (num_local_experts 8, num_experts_per_tok 2)`,
  },
  {
    name: 'tiny',
    hidden: 256,
    intermediate: 512,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    vocab: 2048,
    layers: 2,
    rmsEps: 1e-6,
    source: 'made up for tests: every op at a size that runs in milliseconds on a CPU',
  },
  {
    name: 'tiny-moe',
    hidden: 256,
    intermediate: 128,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    vocab: 2048,
    layers: 2,
    rmsEps: 1e-6,
    moe: { experts: 8, topk: 2 },
    source: 'made up for tests: a mixture-of-experts layer at a size that runs in milliseconds on a CPU',
  },
];

export function modelNames(): string[] {
  return MODELS.map((m) => m.name);
}

/** The preset named name (case-insensitive); an error lists the known ones. */
export function findModel(name: string): ModelPreset {
  const found = MODELS.find((m) => m.name.toLowerCase() === name.toLowerCase());
  if (!found) throw new Error(`unknown model '${name}'; known: ${modelNames().join(', ')}`);
  return found;
}

/**
 * The decode linears of one layer, then the lm_head, in execution order; a
 * moe model's MLP is its router (hidden -> experts) and its routed experts.
 */
export function decodeLinears(model: ModelPreset): Linear[] {
  const q = model.heads * model.headDim;
  const kv = model.kvHeads * model.headDim;
  const mlp: Linear[] = model.moe
    ? [
        { name: 'router', op: 'linear', n: model.moe.experts, k: model.hidden },
        { name: 'experts', op: 'moe', n: model.intermediate, k: model.hidden, experts: model.moe.experts, topk: model.moe.topk },
      ]
    : [
        { name: 'gate_up', op: 'gated', n: model.intermediate, k: model.hidden },
        { name: 'down', op: 'linear', n: model.hidden, k: model.intermediate },
      ];
  return [
    { name: 'qkv', op: 'linear', n: q + 2 * kv, k: model.hidden },
    { name: 'o', op: 'linear', n: model.hidden, k: q },
    ...mlp,
    { name: 'lm_head', op: 'linear', n: model.vocab, k: model.hidden },
  ];
}

/**
 * The linears measured in dtype: all of them, but an fp8 model keeps lm_head
 * and the router in bf16 (as fp8 checkpoints do, and as the decode model does:
 * kpick.h), so an fp8 sweep or parity run leaves those out.
 */
export function linearsForDtype(linears: readonly Linear[], dtype: Dtype): readonly Linear[] {
  return dtype === 'fp8' ? linears.filter((l) => l.name !== 'lm_head' && l.name !== 'router') : linears;
}

/** Drops linears whose (op, N, K, and E and top-k on moe) an earlier one already has. */
export function uniqueShapes(linears: readonly Linear[]): Linear[] {
  const seen = new Set<string>();
  return linears.filter((l) => {
    const key = shapeId(l);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

const MAX_DIM = 1 << 24;

function splitList(text: string, what: string): string[] {
  const items = String(text)
    .split(',')
    .map((s) => s.trim());
  if (items.length === 0 || items.some((s) => s === '')) {
    throw new Error(`${what} must be a comma-separated list without empty items, got '${text}'`);
  }
  return items;
}

/** "4096x4096,1024x4096" -> linear shapes (N x K). */
export function parseShapes(text: string): Linear[] {
  return splitList(text, '--shapes').map((item) => {
    const match = /^(\d+)x(\d+)$/i.exec(item);
    const n = match ? Number(match[1]) : NaN;
    const k = match ? Number(match[2]) : NaN;
    if (!(n >= 1 && n <= MAX_DIM && k >= 1 && k <= MAX_DIM)) {
      throw new Error(`--shapes '${item}' is not NxK with N and K in 1..${MAX_DIM}`);
    }
    return { name: `${n}x${k}`, op: 'linear', n, k };
  });
}

/** "1,2,4,8" -> rows buckets, each one of BUCKETS, ascending, no repeats. */
export function parseRows(text: string | number): Bucket[] {
  const rows = splitList(String(text), '--rows').map((item) => {
    const m = /^\d+$/.test(item) ? Number(item) : NaN;
    if (!(BUCKETS as readonly number[]).includes(m)) {
      throw new Error(`--rows '${item}' is not a bucket; buckets are ${BUCKETS.join(', ')}`);
    }
    return m as Bucket;
  });
  return [...new Set(rows)].sort((a, b) => a - b);
}

/** "bf16,fp16" -> dtypes, no repeats. */
export function parseDtypes(text: string): Dtype[] {
  const dtypes = splitList(text, '--dtype').map((item) => {
    if (!(DTYPES as readonly string[]).includes(item)) {
      throw new Error(`--dtype '${item}' is not one of ${DTYPES.join(', ')}`);
    }
    return item as Dtype;
  });
  return [...new Set(dtypes)];
}

/** The linears of --model (one preset, or several comma-separated), or of --shapes NxK,... when given (a model beside it is still validated). */
export function linearsOf(model: string | undefined, shapes: string | undefined): Linear[] {
  if (model === undefined && shapes === undefined) throw new Error('give --model <name> or --shapes NxK,...');
  // several presets (a,b): their shapes once each, so one process sweeps them all (one start-up per GPU)
  const presets = model === undefined ? [] : model.split(',').map((name) => findModel(name.trim()));
  return uniqueShapes(shapes !== undefined ? parseShapes(shapes) : presets.flatMap((p) => decodeLinears(p)));
}
