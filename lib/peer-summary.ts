// kpick's decode step against its PyTorch peer (bench/peers/decode_step.py):
// one summary line per (model, c) from serve-bench's JSON lines and the
// peer's, with the bandwidth limit of a step.
//   bytes     what one step must read: every weight once (the embedding only
//             the rows of its tokens; lm_head once, the embedding's when tied)
//             and each row's KV cache up to its position, averaged over the
//             timed steps (positions context .. context + steps - 1)
//   limit     tok/s if those bytes moved at the measured read ceiling
//   summary   each arm's tok/s, the ratios to the torch.compile arm, and
//             each arm's share of the limit
// The peer may come from several runs (torch.compile's max-autotune search
// lands on kernels up to 1.5x apart from one call to the next: 893, 630 and
// 587 tok/s on Qwen3-0.6B c=1 in bench/results/h200-2026-12-04-ring-peer-facdb24):
// each arm counts its fastest run, so kpick is compared with the peer's best
// draw, and the summary says how many runs there were and the slowest.
import * as v from 'valibot';
import { jsonLines, kindOf } from './json-lines.ts';
import type { ModelDims } from './model-ffi.ts';

export interface StepBytes {
  weights: number;
  kv: number;
  total: number;
}

/** The bytes one decode step at c rows reads (see the file's header). */
export function stepBytes(d: ModelDims, c: number, context: number, steps: number): StepBytes {
  const e = 2;
  const qdim = d.heads * d.headDim;
  const nqkv = (d.heads + 2 * d.kvHeads) * d.headDim;
  const layer = 2 * d.hidden + nqkv * d.hidden + d.hidden * qdim + 3 * d.intermediate * d.hidden;
  const weights = e * (d.layers * layer + d.vocab * d.hidden + d.hidden + c * d.hidden);
  const meanLen = context + (steps + 1) / 2;
  const kv = e * 2 * d.layers * c * d.kvHeads * d.headDim * meanLen;
  return { weights, kv, total: weights + kv };
}

const tokS = v.nullable(v.pipe(v.number(), v.finite()));
const ServeRowSchema = v.object({
  kind: v.literal('row'),
  model: v.string(),
  layers: v.number(),
  c: v.number(),
  context: v.number(),
  steps: v.number(),
  default: v.object({ tok_s: tokS }),
  table: v.object({ tok_s: tokS }),
});
const PeerRowSchema = v.object({
  kind: v.literal('row'),
  model: v.string(),
  c: v.number(),
  arm: v.picklist(['eager', 'compiled']),
  context: v.number(),
  steps: v.number(),
  tok_s: v.pipe(v.number(), v.finite()),
  device: v.optional(v.string()),
  /** the compiled arm's loaded torch.compile cache (sha256, 16 hex digits); null: compiled afresh */
  compile_cache: v.optional(v.nullable(v.string())),
});
const SetupSchema = v.object({ kind: v.literal('setup'), model: v.string(), table: v.object({ used: v.boolean() }) });
const CeilingSchema = v.object({ kind: v.literal('ceiling'), read_gb_s: v.pipe(v.number(), v.finite(), v.minValue(1)), device: v.optional(v.string()) });

export type ServeRow = v.InferOutput<typeof ServeRowSchema>;
export type PeerRow = v.InferOutput<typeof PeerRowSchema>;
export type Ceiling = v.InferOutput<typeof CeilingSchema>;

export interface Parsed {
  serve: ServeRow[];
  peer: PeerRow[];
  /** the highest read ceiling of the sources: the largest limit, the smallest share of it */
  ceiling: Ceiling | null;
  /** per model, whether serve-bench's table route used the table (from its setup line) */
  tableUsed: Record<string, boolean>;
}

/**
 * The rows of JSON-lines texts from serve-bench (kind row with default and
 * table) and from the peer (kind row with arm; kind ceiling). Other kinds and
 * blank lines are skipped; a line that is not JSON, or a row of neither shape,
 * throws naming its source and line.
 */
export function parseLines(sources: readonly { name: string; text: string }[]): Parsed {
  const out: Parsed = { serve: [], peer: [], ceiling: null, tableUsed: {} };
  for (const { name, text } of sources) {
    for (const { value, at } of jsonLines(name, text)) {
      const kind = kindOf(value);
      if (kind === 'setup') {
        const s = v.safeParse(SetupSchema, value);
        if (s.success) out.tableUsed[s.output.model] = s.output.table.used;
      } else if (kind === 'ceiling') {
        const c = v.safeParse(CeilingSchema, value);
        if (!c.success) throw new Error(`${at}: a ceiling line without a positive read_gb_s`);
        if (out.ceiling === null || c.output.read_gb_s > out.ceiling.read_gb_s) out.ceiling = c.output;
      } else if (kind === 'row') {
        const peer = v.safeParse(PeerRowSchema, value);
        const serve = v.safeParse(ServeRowSchema, value);
        if (peer.success) out.peer.push(peer.output);
        else if (serve.success) out.serve.push(serve.output);
        else throw new Error(`${at}: a row of neither serve-bench nor the peer`);
      }
    }
  }
  return out;
}

export interface SummaryRow {
  model: string;
  c: number;
  kpick_default_tok_s: number | null;
  kpick_table_tok_s: number | null;
  /** the fastest of the peer's runs of this arm at (model, c) */
  peer_eager_tok_s: number | null;
  peer_compiled_tok_s: number | null;
  /** how many runs of the compiled arm there were, and the slowest of them */
  peer_compiled_runs: number;
  peer_compiled_least_tok_s: number | null;
  /** the torch.compile cache the fastest compiled run loaded (its sha256, 16 hex digits): the
   * draw of max-autotune it ran, made in an earlier call; null: it compiled afresh (or the
   * peer's output predates the field) */
  peer_compiled_cache: string | null;
  commit: string;
  device: string;
  /** whether the table arm ran the table (false: refused, so it ran the defaults); null: no setup line */
  table_used: boolean | null;
  default_vs_compiled: number | null;
  table_vs_compiled: number | null;
  context: number;
  steps: number;
  step_bytes: number;
  read_ceiling_gb_s: number | null;
  limit_tok_s: number | null;
  kpick_default_bw_pct: number | null;
  kpick_table_bw_pct: number | null;
  peer_eager_bw_pct: number | null;
  peer_compiled_bw_pct: number | null;
}

const ratio = (a: number | null, b: number | null) => (a !== null && b !== null && b > 0 ? a / b : null);
const pct = (a: number | null, limit: number | null) => (a !== null && limit !== null ? (100 * a) / limit : null);

/**
 * One line per (model, c) that serve-bench measured, in its order, joined with
 * the peer's arms at the same model and c; `dimsOf` gives a model's dimensions
 * at the layers serve-bench built.
 * A peer row measured at another context or step count than serve-bench's is
 * an error: the two would not time the same step.
 */
export function buildSummary(
  parsed: Parsed,
  dimsOf: (model: string, layers: number) => ModelDims,
  meta: { commit: string; device: string },
): SummaryRow[] {
  const ceiling = parsed.ceiling?.read_gb_s ?? null;
  return parsed.serve.map((s) => {
    /** every run of one arm at this model and c, fastest first */
    const runs = (name: 'eager' | 'compiled') => {
      const found = parsed.peer.filter((r) => r.model === s.model && r.c === s.c && r.arm === name);
      for (const p of found) {
        if (p.context !== s.context || p.steps !== s.steps) {
          throw new Error(`${s.model} c=${s.c}: the peer's ${name} arm ran context ${p.context}, ${p.steps} steps; serve-bench ${s.context}, ${s.steps}`);
        }
      }
      return found.sort((a, b) => b.tok_s - a.tok_s);
    };
    const eager = runs('eager')[0]?.tok_s ?? null;
    const compiledRuns = runs('compiled');
    const compiled = compiledRuns[0]?.tok_s ?? null;
    const bytes = stepBytes(dimsOf(s.model, s.layers), s.c, s.context, s.steps);
    const limit = ceiling === null ? null : (s.c * ceiling * 1e9) / bytes.total;
    return {
      model: s.model,
      c: s.c,
      kpick_default_tok_s: s.default.tok_s,
      kpick_table_tok_s: s.table.tok_s,
      peer_eager_tok_s: eager,
      peer_compiled_tok_s: compiled,
      peer_compiled_runs: compiledRuns.length,
      peer_compiled_least_tok_s: compiledRuns.at(-1)?.tok_s ?? null,
      peer_compiled_cache: compiledRuns[0]?.compile_cache ?? null,
      commit: meta.commit,
      device: meta.device,
      table_used: parsed.tableUsed[s.model] ?? null,
      default_vs_compiled: ratio(s.default.tok_s, compiled),
      table_vs_compiled: ratio(s.table.tok_s, compiled),
      context: s.context,
      steps: s.steps,
      step_bytes: bytes.total,
      read_ceiling_gb_s: ceiling,
      limit_tok_s: limit,
      kpick_default_bw_pct: pct(s.default.tok_s, limit),
      kpick_table_bw_pct: pct(s.table.tok_s, limit),
      peer_eager_bw_pct: pct(eager, limit),
      peer_compiled_bw_pct: pct(compiled, limit),
    };
  });
}

const num = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));

/** The compiled arm's cell: its fastest run, and the slowest where there were several. */
function compiledCell(r: SummaryRow): string {
  if (r.peer_compiled_runs < 2) return num(r.peer_compiled_tok_s, 0);
  return `${num(r.peer_compiled_tok_s, 0)} (slowest of ${r.peer_compiled_runs}: ${num(r.peer_compiled_least_tok_s, 0)})`;
}

/** The summary as a Markdown table, for the README and the log. */
export function summaryMarkdown(rows: readonly SummaryRow[]): string {
  const head = '| model | c | kpick default | kpick table | torch eager | torch.compile | default / compile | table / compile | table % of limit |';
  const rule = '|---|---|---|---|---|---|---|---|---|';
  const body = rows.map(
    (r) =>
      `| ${r.model} | ${r.c} | ${num(r.kpick_default_tok_s, 0)} | ${num(r.kpick_table_tok_s, 0)} | ${num(r.peer_eager_tok_s, 0)} | ${compiledCell(r)} | ${num(r.default_vs_compiled, 2)} | ${num(r.table_vs_compiled, 2)} | ${num(r.kpick_table_bw_pct, 1)} |`,
  );
  return [head, rule, ...body].join('\n');
}
