/* step.c: one decode step of the model (model.h), and its graphs.
 *   step      the orchestration: backend ops for the non-linear parts and
 *             be_launch for every linear, on the model's own stream
 *   graphs    one graph per (candidates, batch), captured on first use after
 *             an eager warm-up step, cached (backend.h: the CPU's replays)
 *   entries   kpick_model_step and kpick_model_time */
#include <string.h>

#include "error.h"
#include "model.h"
#include "space.h"

static const int32_t kind_op[KPICK_LIN_COUNT] = {KPICK_OP_LINEAR, KPICK_OP_LINEAR, KPICK_OP_GATED, KPICK_OP_LINEAR,
                                                 KPICK_OP_LINEAR, KPICK_OP_LINEAR, KPICK_OP_MOE};
static const char *const kind_name[KPICK_LIN_COUNT] = {"qkv", "o", "gate_up", "down", "lm_head", "router", "experts"};

static int check_cands(const struct kpick_model *md, const int32_t *cands, int32_t m) {
  KP_REQUIRE(cands != NULL, "cands is null");
  for (int i = 0; i < KPICK_LIN_COUNT; i++) {
    if (!kp_kind_runs(&md->d, i)) continue; /* ignored: the model has no such linear */
    const int32_t c = cands[i];
    KP_REQUIRE(c >= 0 && c < KP_NCAND, "cands[%d] (%s): unknown candidate id %d (space has %d)", i, kind_name[i], (int)c,
               (int)KP_NCAND);
    const kp_row *r = &kp_space[c];
    KP_REQUIRE(r->op == kind_op[i], "cands[%d] (%s): %s is a candidate of op %d, the %s linear is op %d", i, kind_name[i],
               r->name, (int)r->op, kind_name[i], (int)kind_op[i]);
    const int32_t dt = kp_kind_dtype(md->d.dtype, i);
    KP_REQUIRE(kp_row_takes(r, dt), "cands[%d] (%s): %s does not compute dtype %d, the %s weights' dtype", i, kind_name[i],
               r->name, (int)dt, kind_name[i]);
    if (!be_available(c)) return kp_fail(KPICK_E_UNSUPPORTED, "model", "%s (%s) is not available here", r->name, kind_name[i]);
    if (m < r->rows_min || m > r->rows_max)
      return kp_fail(KPICK_E_UNSUPPORTED, "model", "%s (%s) takes %d..%d rows, not %d", r->name, kind_name[i],
                     (int)r->rows_min, (int)r->rows_max, (int)m);
  }
  return KPICK_OK;
}

/* Everything one decode step enqueues, in order. Every buffer keeps the last
 * layer's value after the step (kpick_model_check reads them); none is an
 * input and an output of one call. */
static int enqueue_step(void *ctx) {
  const step_args *a = ctx;
  const struct kpick_model *md = a->md;
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  /* dt: activations and the non-linear ops; wt: the layers' linear weights (fp8 in an fp8 model) */
  const int32_t m = a->m, dt = kp_act_dtype(d->dtype), wt = kp_kind_dtype(d->dtype, KPICK_LIN_QKV);
  const int64_t H = d->hidden, I = d->intermediate;
  void *s = md->stream;
  float *resid = kp_at(md, L->resid);
  void *hbuf = kp_at(md, L->hbuf), *qkv = kp_at(md, L->qkv), *attn = kp_at(md, L->attn), *act = kp_at(md, L->act);
  void *ybuf = kp_at(md, L->ybuf);
  int32_t *tokens = kp_at(md, L->tokens), *pos = kp_at(md, L->pos);
  void *attn_scratch = kp_scratch_at(md, L->attn_scratch, L->attn_scratch_bytes);

  KP_TRY(be_embed(dt, kp_at(md, L->embed), tokens, resid, m, H, d->vocab, s));
  const void *pending = NULL; /* the last linear's output, not yet in the residual */
  for (int32_t l = 0; l < d->layers; l++) {
    void *kc = kp_cache_at(md, l, 0), *vc = kp_cache_at(md, l, 1);
    KP_TRY(be_add_rmsnorm(dt, resid, pending, kp_layer_at(md, l, L->gamma_attn), hbuf, m, H, d->rms_eps, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_QKV], KPICK_OP_LINEAR, wt, hbuf, kp_layer_at(md, l, L->wqkv), qkv, m, L->nqkv, H, s));
    KP_TRY(be_attention(dt, qkv, pos, kc, vc, attn, m, d->heads, d->kv_heads, d->head_dim, md->cap, d->rope_theta,
                        attn_scratch, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_O], KPICK_OP_LINEAR, wt, attn, kp_layer_at(md, l, L->wo), ybuf, m, H, L->qdim, s));
    KP_TRY(be_add_rmsnorm(dt, resid, ybuf, kp_layer_at(md, l, L->gamma_mlp), hbuf, m, H, d->rms_eps, s));
    if (d->experts > 0) { /* router, its top-k, then the routed experts in one call */
      const int32_t E = d->experts, k = d->topk;
      int32_t *ids = (int32_t *)kp_at(md, L->ids) + (size_t)l * d->max_batch * k;
      float *gates = (float *)kp_at(md, L->gates) + (size_t)l * d->max_batch * k;
      void *rlogits = kp_at(md, L->rlogits);
      KP_TRY(be_launch(a->cands[KPICK_LIN_ROUTER], KPICK_OP_LINEAR, dt, hbuf, kp_layer_at(md, l, L->wrouter), rlogits, m, E, H, s));
      KP_TRY(be_moe_route(dt, rlogits, m, E, k, ids, gates, s));
      const int32_t et = kp_kind_dtype(d->dtype, KPICK_LIN_EXPERTS);
      KP_TRY(be_launch_moe(a->cands[KPICK_LIN_EXPERTS], et, hbuf, kp_layer_at(md, l, L->wgu), kp_layer_at(md, l, L->wdown), ids,
                           gates, ybuf, m, E, k, I, H, s));
    } else {
      KP_TRY(be_launch(a->cands[KPICK_LIN_GATE_UP], KPICK_OP_GATED, wt, hbuf, kp_layer_at(md, l, L->wgu), act, m, I, H, s));
      KP_TRY(be_launch(a->cands[KPICK_LIN_DOWN], KPICK_OP_LINEAR, wt, act, kp_layer_at(md, l, L->wdown), ybuf, m, H, I, s));
    }
    pending = ybuf;
  }
  KP_TRY(be_add_rmsnorm(dt, resid, pending, kp_at(md, L->gamma_final), hbuf, m, H, d->rms_eps, s));
  KP_TRY(be_launch(a->cands[KPICK_LIN_LM_HEAD], KPICK_OP_LINEAR, kp_kind_dtype(d->dtype, KPICK_LIN_LM_HEAD), hbuf, kp_at(md, L->lm_head), kp_at(md, L->logits), m,
                   d->vocab, H, s));
  return be_argmax_advance(dt, kp_at(md, L->logits), m, d->vocab, tokens, pos,
                           kp_scratch_at(md, L->argmax_scratch, L->argmax_scratch_bytes), s);
}

/* One eager step whose effect on tokens and positions is undone: it grows the
 * backend's scratch, loads modules and makes BLAS plans outside capture (none
 * of that may happen under capture). The KV slots it writes are written again,
 * with the same values, by the next real step. */
static int warm_up(step_args *a) {
  struct kpick_model *md = a->md;
  const size_t bytes = (size_t)md->d.max_batch * 4;
  int32_t tokens[KPICK_MAX_ROWS], pos[KPICK_MAX_ROWS];
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_download(tokens, kp_at(md, md->L.tokens), bytes));
  KP_TRY(be_dev_download(pos, kp_at(md, md->L.pos), bytes));
  int st = enqueue_step(a);
  const int sync = be_stream_sync(md->stream);
  if (st == KPICK_OK) st = sync;
  const int up1 = be_dev_upload(kp_at(md, md->L.tokens), tokens, bytes);
  const int up2 = be_dev_upload(kp_at(md, md->L.pos), pos, bytes);
  if (st == KPICK_OK) st = up1 != KPICK_OK ? up1 : up2;
  return st;
}

/* The graph of (cands, m), captured on first use. */
static int graph_for(step_args *a, void **out) {
  struct kpick_model *md = a->md;
  *out = NULL;
  for (int32_t i = 0; i < md->ngraphs; i++) {
    const struct graph_slot *g = &md->graphs[i];
    if (g->m == a->m && memcmp(g->cands, a->cands, sizeof g->cands) == 0) {
      *out = g->graph;
      return KPICK_OK;
    }
  }
  KP_TRY(warm_up(a));
  void *graph = NULL;
  KP_TRY(be_graph_capture(md->stream, enqueue_step, a, sizeof *a, &graph));
  struct graph_slot *slot;
  if (md->ngraphs < KP_GRAPH_SLOTS) {
    slot = &md->graphs[md->ngraphs++];
  } else {
    slot = &md->graphs[md->evict];
    md->evict = (md->evict + 1) % KP_GRAPH_SLOTS;
    be_graph_free(slot->graph);
  }
  memcpy(slot->cands, a->cands, sizeof slot->cands);
  slot->m = a->m;
  slot->graph = graph;
  *out = graph;
  return KPICK_OK;
}

int kp_step_run(step_args *a) {
  void *graph = NULL;
  KP_TRY(graph_for(a, &graph));
  KP_TRY(be_graph_launch(graph, a->md->stream));
  return be_stream_sync(a->md->stream);
}

int kp_step_args(struct kpick_model *md, const int32_t *cands, int32_t batch, step_args *a) {
  KP_REQUIRE(batch >= 1 && batch <= md->d.max_batch, "batch must be in 1..%d (the model's max_batch), got %d",
             (int)md->d.max_batch, (int)batch);
  KP_TRY(check_cands(md, cands, batch));
  a->md = md;
  memcpy(a->cands, cands, sizeof a->cands);
  a->m = batch;
  return KPICK_OK;
}

int kpick_model_step(kpick_model *md, const int32_t *cands, int32_t batch, int32_t *tokens_out) {
  kp_clear_error();
  KP_MODEL(md);
  KP_REQUIRE(tokens_out != NULL, "tokens_out is null");
  step_args a;
  KP_TRY(kp_step_args(md, cands, batch, &a));
  KP_REQUIRE(md->steps < md->d.max_new, "the KV cache holds %d new positions and all are used: reset the model",
             (int)md->d.max_new);
  md->steps++; /* counted before running: a failed step may have written its slot */
  KP_TRY(kp_step_run(&a));
  return be_dev_download(tokens_out, kp_at(md, md->L.tokens), (size_t)batch * 4);
}

int kpick_model_time(kpick_model *md, const int32_t *cands, int32_t batch, int32_t steps, double *step_us_out) {
  kp_clear_error();
  KP_MODEL(md);
  KP_REQUIRE(step_us_out != NULL, "step_us_out is null");
  KP_REQUIRE(steps >= 1 && steps <= md->d.max_new, "steps must be in 1..%d (the model's max_new), got %d",
             (int)md->d.max_new, (int)steps);
  step_args a;
  KP_TRY(kp_step_args(md, cands, batch, &a));
  /* one untimed step first: a new graph's first launch uploads it, clocks ramp */
  KP_TRY(kp_model_set_positions(md));
  md->steps = 1;
  KP_TRY(kp_step_run(&a));
  KP_TRY(kp_model_set_positions(md));
  md->steps = steps;
  void *graph = NULL;
  KP_TRY(graph_for(&a, &graph));
  return be_graph_time(graph, md->stream, steps, step_us_out);
}
