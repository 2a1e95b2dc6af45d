/* model.c: the decode model of serve-bench (kpick.h, "decode model").
 *   dims      validated once; every size below derives from them
 *   layout    one arena: per-layer weights, the KV caches, the embedding,
 *             lm_head, activations; offsets 256-byte aligned
 *   memory    the arena plus a backend reserve, against free memory, with what
 *             would fit when it does not
 *   step      the orchestration: backend ops for the non-linear parts and
 *             be_launch for every linear, on the model's own stream
 *   graphs    one graph per (candidates, batch), captured on first use after
 *             an eager warm-up step, cached (backend.h: the CPU's replays)
 *   selfcheck each non-linear op of this backend against an fp64 reference
 * The residual stream is fp32; every linear reads and writes the dtype. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "handles.h"
#include "model.h"
#include "numeric.h"
#include "space.h"

#define KP_ALIGN 256
#define KP_GRAPH_SLOTS 16
#define KP_MAX_LAYERS 4096
#define KP_MAX_HEADS 1024
#define KP_MODEL_MAX_DIM (1 << 24)
#define KP_MODEL_MAX_STEPS 100000
#define GIB (1024.0 * 1024.0 * 1024.0)
/* kpick_model_check: each buffer against the fp64 forward, relative to its
 * largest value: 4 units in the last place of the dtype, at most */
#define KP_STEP_TOL_BF16 0x1p-5
#define KP_STEP_TOL_FP16 0x1p-8

/* Room the arena leaves for what the backend allocates on its own: the BLAS
 * workspace, split-K partials (capped at 256 MiB), graphs, runtime state. */
#if defined(KPICK_BACKEND_GPU)
static const double kp_reserve_bytes = 768.0 * 1024 * 1024;
#else
static const double kp_reserve_bytes = 16.0 * 1024 * 1024;
#endif

/* ---- layout ---- */

typedef struct layout {
  int64_t nqkv, qdim;         /* qkv width, q width */
  size_t gamma_attn, gamma_mlp, wqkv, wo, wgu, wdown, layer_bytes; /* inside one layer */
  size_t layers;              /* layer 0 */
  size_t kv, cache_bytes;     /* [layers][k, v] caches of cache_bytes each */
  size_t embed, lm_head, gamma_final;
  size_t resid, hbuf, qkv, attn, act, ybuf, logits, tokens, pos;
  size_t attn_scratch, attn_scratch_bytes, argmax_scratch, argmax_scratch_bytes; /* zeroed once; 0 bytes: none */
  size_t total;
} layout;

static size_t round_up(size_t n) { return (n + KP_ALIGN - 1) / KP_ALIGN * KP_ALIGN; }

static size_t take(size_t *cursor, size_t bytes) {
  size_t at = *cursor;
  *cursor += round_up(bytes);
  return at;
}

/* Sizes fit: check_dims bounds the total far below 2^62 first. */
static void plan(const kpick_model_dims *d, layout *L) {
  const size_t e = 2, H = (size_t)d->hidden, I = (size_t)d->intermediate, V = (size_t)d->vocab;
  const size_t B = (size_t)d->max_batch, D = (size_t)d->head_dim;
  const size_t cap = (size_t)d->context + (size_t)d->max_new;
  memset(L, 0, sizeof *L);
  L->qdim = (int64_t)d->heads * d->head_dim;
  L->nqkv = (int64_t)(d->heads + 2 * d->kv_heads) * d->head_dim;
  size_t in_layer = 0;
  L->gamma_attn = take(&in_layer, H * e);
  L->gamma_mlp = take(&in_layer, H * e);
  L->wqkv = take(&in_layer, (size_t)L->nqkv * H * e);
  L->wo = take(&in_layer, H * (size_t)L->qdim * e);
  L->wgu = take(&in_layer, 2 * I * H * e);
  L->wdown = take(&in_layer, H * I * e);
  L->layer_bytes = in_layer;

  size_t c = 0;
  L->layers = take(&c, L->layer_bytes * (size_t)d->layers);
  L->cache_bytes = round_up(B * (size_t)d->kv_heads * cap * D * e);
  L->kv = take(&c, L->cache_bytes * 2 * (size_t)d->layers);
  L->embed = take(&c, V * H * e);
  L->lm_head = d->tied ? L->embed : take(&c, V * H * e);
  L->gamma_final = take(&c, H * e);
  L->resid = take(&c, B * H * 4);
  L->hbuf = take(&c, B * H * e);
  L->qkv = take(&c, B * (size_t)L->nqkv * e);
  L->attn = take(&c, B * (size_t)L->qdim * e);
  L->act = take(&c, B * I * e);
  L->ybuf = take(&c, B * H * e);
  L->logits = take(&c, B * V * e);
  L->tokens = take(&c, B * 4);
  L->pos = take(&c, B * 4);
  /* the ops' scratch: the most any batch up to max_batch takes */
  for (int32_t m = 1; m <= d->max_batch; m++) {
    const int64_t a = be_attention_scratch(m, d->heads, d->kv_heads, d->head_dim, (int32_t)cap);
    const int64_t g = be_argmax_scratch(m, d->vocab);
    if ((size_t)a > L->attn_scratch_bytes) L->attn_scratch_bytes = (size_t)a;
    if ((size_t)g > L->argmax_scratch_bytes) L->argmax_scratch_bytes = (size_t)g;
  }
  L->attn_scratch = take(&c, L->attn_scratch_bytes);
  L->argmax_scratch = take(&c, L->argmax_scratch_bytes);
  L->total = c;
}

/* An upper bound of the arena in doubles, so plan() never runs on sizes that overflow. */
static double arena_estimate(const kpick_model_dims *d) {
  const double H = d->hidden, I = d->intermediate, V = d->vocab, B = d->max_batch, D = d->head_dim;
  const double nqkv = (double)(d->heads + 2.0 * d->kv_heads) * D, qdim = (double)d->heads * D;
  const double cap = (double)d->context + d->max_new;
  const double layer = 2 * H + nqkv * H + H * qdim + 3 * I * H;
  const double per_layer = 2 * layer + 2 * 2 * B * d->kv_heads * cap * D + 20 * KP_ALIGN;
  /* scratch: at most 64 splits of (head_dim + 2) floats per head and row, 64 pairs per row, and counters */
  const double scratch = B * (d->heads * 64.0 * (D + 2) * 4 + 64.0 * 8) + KP_MODEL_MAX_ROWS * (d->heads + 1) * 4.0;
  return d->layers * per_layer + 2 * 2 * V * H + B * (4 * H + 2 * (H + qdim + nqkv + I + H + V) + 8) + scratch + 20 * KP_ALIGN;
}

#define KP_DIM(x, lo, hi) \
  KP_REQUIRE((x) >= (lo) && (x) <= (hi), #x " must be in %lld..%lld, got %lld", (long long)(lo), (long long)(hi), (long long)(x))

static int check_dims(const kpick_model_dims *d) {
  KP_REQUIRE(d != NULL, "dims is null");
  KP_REQUIRE(d->dtype == KPICK_BF16 || d->dtype == KPICK_FP16, "dtype must be 0 (bf16) or 1 (fp16), got %d", (int)d->dtype);
  KP_DIM(d->hidden, 8, KP_MODEL_MAX_DIM);
  KP_DIM(d->intermediate, 8, KP_MODEL_MAX_DIM);
  KP_DIM(d->heads, 1, KP_MAX_HEADS);
  KP_DIM(d->kv_heads, 1, d->heads);
  KP_REQUIRE(d->heads % d->kv_heads == 0, "heads (%d) must be a multiple of kv_heads (%d)", (int)d->heads, (int)d->kv_heads);
  KP_DIM(d->head_dim, 8, KP_MODEL_MAX_HEAD_DIM);
  KP_REQUIRE(d->head_dim % 8 == 0, "head_dim must be a multiple of 8 (16-byte rows), got %d", (int)d->head_dim);
  KP_REQUIRE((int64_t)(d->heads + 2 * d->kv_heads) * d->head_dim <= KP_MODEL_MAX_DIM, "(heads + 2 kv_heads) head_dim is over %d",
             KP_MODEL_MAX_DIM);
  KP_DIM(d->vocab, 2, KP_MODEL_MAX_DIM);
  KP_DIM(d->layers, 1, KP_MAX_LAYERS);
  KP_REQUIRE(d->tied == 0 || d->tied == 1, "tied must be 0 or 1, got %d", (int)d->tied);
  KP_DIM(d->max_batch, 1, KP_MODEL_MAX_ROWS);
  KP_DIM(d->max_new, 1, KP_MODEL_MAX_POSITIONS);
  KP_DIM(d->context, 0, KP_MODEL_MAX_POSITIONS - d->max_new);
  KP_REQUIRE(isfinite(d->rms_eps) && d->rms_eps > 0 && d->rms_eps < 1, "rms_eps must be in (0, 1), got %g", (double)d->rms_eps);
  KP_REQUIRE(isfinite(d->rope_theta) && d->rope_theta > 1, "rope_theta must be finite and > 1, got %g", (double)d->rope_theta);
  KP_REQUIRE(arena_estimate(d) < 0x1p60, "the model would need %.3g bytes", arena_estimate(d));
  return KPICK_OK;
}

static double needed_bytes(const kpick_model_dims *d) {
  layout L;
  plan(d, &L);
  return (double)L.total + kp_reserve_bytes;
}

int kpick_model_bytes(const kpick_model_dims *d, int64_t *bytes_out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(bytes_out != NULL, "bytes_out is null");
  KP_TRY(check_dims(d));
  *bytes_out = (int64_t)needed_bytes(d);
  return KPICK_OK;
}

/* "would fit: ..." for a model that does not: fewer layers, or fewer rows. */
static void fit_advice(const kpick_model_dims *d, double free_bytes, char *out, size_t cap) {
  kpick_model_dims t = *d;
  int32_t layers = 0, batch = 0;
  for (t.layers = d->layers - 1; t.layers >= 1 && !layers; t.layers--)
    if (needed_bytes(&t) <= free_bytes) layers = t.layers;
  t = *d;
  for (t.max_batch = d->max_batch - 1; t.max_batch >= 1 && !batch; t.max_batch--)
    if (needed_bytes(&t) <= free_bytes) batch = t.max_batch;
  if (layers && batch)
    snprintf(out, cap, "would fit: %d layers at batch %d, or batch %d with all %d layers", (int)layers, (int)d->max_batch,
             (int)batch, (int)d->layers);
  else if (layers)
    snprintf(out, cap, "would fit: %d layers at batch %d", (int)layers, (int)d->max_batch);
  else if (batch)
    snprintf(out, cap, "would fit: batch %d with all %d layers", (int)batch, (int)d->layers);
  else
    snprintf(out, cap, "nothing would fit: the embedding and lm_head alone are too large");
}

/* ---- live models: a freed or foreign handle is an error, not a crash ---- */

struct graph_slot {
  int32_t cands[KPICK_LIN_COUNT];
  int32_t m;
  void *graph;
};

struct kpick_model {
  kpick_model_dims d;
  layout L;
  int32_t cap;          /* KV positions: context + max_new */
  char *arena;
  void *stream;
  int32_t steps;        /* since the positions were last put back at context */
  int32_t *pos_host;    /* [max_batch], scratch for position uploads */
  struct graph_slot graphs[KP_GRAPH_SLOTS];
  int32_t ngraphs, evict;
};

#define KP_MAX_MODELS 256
static kp_handles models = KP_HANDLES_INIT(KP_MAX_MODELS);

static int model_live(const kpick_model *md) { return kp_handles_has(&models, md); }

#define KP_MODEL(md) KP_REQUIRE((md) != NULL && model_live(md), "not a live model handle")

static void *at(const struct kpick_model *md, size_t offset) { return md->arena + offset; }
static void *layer_at(const struct kpick_model *md, int32_t l, size_t offset) {
  return md->arena + md->L.layers + (size_t)l * md->L.layer_bytes + offset;
}
static void *cache_at(const struct kpick_model *md, int32_t l, int which) {
  return md->arena + md->L.kv + ((size_t)l * 2 + (size_t)which) * md->L.cache_bytes;
}
/* a region that may be empty: NULL then */
static void *scratch_at(const struct kpick_model *md, size_t offset, size_t bytes) { return bytes ? md->arena + offset : NULL; }

static void model_release(struct kpick_model *md) {
  for (int32_t i = 0; i < md->ngraphs; i++) be_graph_free(md->graphs[i].graph);
  if (md->stream) be_stream_destroy(md->stream);
  if (md->arena) be_dev_free(md->arena);
  free(md->pos_host);
  free(md);
}

/* a stream of random values per (what, layer) from the model seed */
static uint64_t stream_of(uint64_t seed, uint32_t what, uint32_t layer) {
  return kp_mix64(seed ^ kp_mix64(((uint64_t)layer << 16) | what));
}

static const float kp_qkv_gain = 2.0f;

enum { S_GAMMA_ATTN = 1, S_GAMMA_MLP, S_WQKV, S_WO, S_WGU, S_WDOWN, S_EMBED, S_LM_HEAD, S_GAMMA_FINAL, S_KV, S_TOKENS };

static int fill(struct kpick_model *md, void *dst, int64_t count, uint64_t stream, float offset, float scale) {
  return be_fill_uniform(dst, count, md->d.dtype, stream, offset, scale, md->stream);
}

/* Weights ~U(-1,1)/sqrt(K): a linear keeps its input's scale, so with the norms
 * the residual stream stays bounded over any number of steps. qkv's are twice
 * that (and the prompt's cache matches), so attention scores spread over a few
 * units and the softmax picks some positions over others, as in a real model. */
static int fill_weights(struct kpick_model *md, uint64_t seed) {
  const kpick_model_dims *d = &md->d;
  const int64_t H = d->hidden, I = d->intermediate, V = d->vocab;
  const float gamma_spread = 0.25f;
  for (int32_t l = 0; l < d->layers; l++) {
    KP_TRY(fill(md, layer_at(md, l, md->L.gamma_attn), H, stream_of(seed, S_GAMMA_ATTN, l), 1.0f, gamma_spread));
    KP_TRY(fill(md, layer_at(md, l, md->L.gamma_mlp), H, stream_of(seed, S_GAMMA_MLP, l), 1.0f, gamma_spread));
    KP_TRY(fill(md, layer_at(md, l, md->L.wqkv), md->L.nqkv * H, stream_of(seed, S_WQKV, l), 0.0f, kp_qkv_gain / sqrtf((float)H)));
    KP_TRY(fill(md, layer_at(md, l, md->L.wo), H * md->L.qdim, stream_of(seed, S_WO, l), 0.0f, 1.0f / sqrtf((float)md->L.qdim)));
    KP_TRY(fill(md, layer_at(md, l, md->L.wgu), 2 * I * H, stream_of(seed, S_WGU, l), 0.0f, 1.0f / sqrtf((float)H)));
    KP_TRY(fill(md, layer_at(md, l, md->L.wdown), H * I, stream_of(seed, S_WDOWN, l), 0.0f, 1.0f / sqrtf((float)I)));
  }
  /* a tied table serves as lm_head too, so it takes lm_head's scale */
  const float embed_scale = d->tied ? 1.0f / sqrtf((float)H) : 1.0f;
  KP_TRY(fill(md, at(md, md->L.embed), V * H, stream_of(seed, S_EMBED, 0), 0.0f, embed_scale));
  if (!d->tied) KP_TRY(fill(md, at(md, md->L.lm_head), V * H, stream_of(seed, S_LM_HEAD, 0), 0.0f, 1.0f / sqrtf((float)H)));
  KP_TRY(fill(md, at(md, md->L.gamma_final), H, stream_of(seed, S_GAMMA_FINAL, 0), 1.0f, gamma_spread));
  return be_stream_sync(md->stream);
}

/* bytes at offset set to 0: the ops' counters start there */
static int zero(struct kpick_model *md, size_t offset, size_t bytes) {
  if (bytes == 0) return KPICK_OK;
  void *host = calloc(1, bytes);
  if (!host) return kp_fail(KPICK_E_NOMEM, "model", "host allocation failed");
  const int st = be_dev_upload(at(md, offset), host, bytes);
  free(host);
  return st;
}

static int set_positions(struct kpick_model *md) {
  for (int32_t b = 0; b < md->d.max_batch; b++) md->pos_host[b] = md->d.context;
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_upload(at(md, md->L.pos), md->pos_host, (size_t)md->d.max_batch * 4));
  md->steps = 0;
  return KPICK_OK;
}

static int reset(struct kpick_model *md, uint64_t seed) {
  const kpick_model_dims *d = &md->d;
  /* the whole KV region: positions past the context are written before they are read */
  KP_TRY(fill(md, at(md, md->L.kv), (int64_t)(md->L.cache_bytes / 2) * 2 * d->layers, stream_of(seed, S_KV, 0), 0.0f, kp_qkv_gain));
  const uint64_t s = stream_of(seed, S_TOKENS, 0);
  for (int32_t b = 0; b < d->max_batch; b++) md->pos_host[b] = (int32_t)(kp_mix64(s ^ (uint64_t)b) % (uint64_t)d->vocab);
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_upload(at(md, md->L.tokens), md->pos_host, (size_t)d->max_batch * 4));
  return set_positions(md);
}

int kpick_model_create(const kpick_model_dims *d, uint64_t seed, kpick_model **out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(out != NULL, "out is null");
  *out = NULL;
  KP_TRY(check_dims(d));
  const double need = needed_bytes(d);
  int64_t free_b = 0, total_b = 0;
  KP_TRY(be_mem(&free_b, &total_b));
  if (need > (double)free_b) {
    char advice[160];
    fit_advice(d, (double)free_b, advice, sizeof advice);
    return kp_fail(KPICK_E_NOMEM, __func__, "the model needs %.2f GiB of memory (%d layers, batch %d, %d positions), %.2f GiB free; %s",
                   need / GIB, (int)d->layers, (int)d->max_batch, (int)(d->context + d->max_new), free_b / GIB, advice);
  }
  struct kpick_model *md = calloc(1, sizeof *md);
  if (!md) return kp_fail(KPICK_E_NOMEM, __func__, "host allocation failed");
  md->d = *d;
  md->cap = d->context + d->max_new;
  plan(d, &md->L);
  md->pos_host = calloc((size_t)d->max_batch, sizeof *md->pos_host);
  int st = md->pos_host ? KPICK_OK : kp_fail(KPICK_E_NOMEM, __func__, "host allocation failed");
  if (st == KPICK_OK) st = be_stream_create(&md->stream);
  if (st == KPICK_OK) st = be_dev_alloc((void **)&md->arena, md->L.total);
  if (st == KPICK_OK) st = fill_weights(md, seed);
  if (st == KPICK_OK) st = zero(md, md->L.attn_scratch, md->L.attn_scratch_bytes);
  if (st == KPICK_OK) st = zero(md, md->L.argmax_scratch, md->L.argmax_scratch_bytes);
  if (st == KPICK_OK) st = reset(md, seed);
  if (st == KPICK_OK) {
    if (!kp_handles_add(&models, md))
      st = kp_handles_count(&models) >= KP_MAX_MODELS
               ? kp_fail(KPICK_E_STATE, __func__, "%d models are live: free one first", KP_MAX_MODELS)
               : kp_fail(KPICK_E_NOMEM, __func__, "host allocation failed");
  }
  if (st != KPICK_OK) {
    model_release(md);
    return st;
  }
  *out = md;
  return KPICK_OK;
}

int kpick_model_free(kpick_model *md) {
  kp_clear_error();
  KP_REQUIRE(md != NULL, "model is null");
  KP_REQUIRE(kp_handles_remove(&models, md), "not a live model handle (freed twice?)");
  (void)be_stream_sync(md->stream);
  model_release(md);
  return KPICK_OK;
}

int kpick_model_reset(kpick_model *md, uint64_t seed) {
  kp_clear_error();
  KP_MODEL(md);
  return reset(md, seed);
}

/* ---- the step ---- */

static const int32_t kind_op[KPICK_LIN_COUNT] = {KPICK_OP_LINEAR, KPICK_OP_LINEAR, KPICK_OP_GATED, KPICK_OP_LINEAR,
                                                 KPICK_OP_LINEAR};
static const char *const kind_name[KPICK_LIN_COUNT] = {"qkv", "o", "gate_up", "down", "lm_head"};

static int check_cands(const int32_t *cands, int32_t m) {
  KP_REQUIRE(cands != NULL, "cands is null");
  for (int i = 0; i < KPICK_LIN_COUNT; i++) {
    const int32_t c = cands[i];
    KP_REQUIRE(c >= 0 && c < KP_NCAND, "cands[%d] (%s): unknown candidate id %d (space has %d)", i, kind_name[i], (int)c,
               (int)KP_NCAND);
    const kp_row *r = &kp_space[c];
    KP_REQUIRE(r->op == kind_op[i], "cands[%d] (%s): %s is a candidate of op %d, the %s linear is op %d", i, kind_name[i],
               r->name, (int)r->op, kind_name[i], (int)kind_op[i]);
    if (!be_available(c)) return kp_fail(KPICK_E_UNSUPPORTED, "model", "%s (%s) is not available here", r->name, kind_name[i]);
    if (m < r->rows_min || m > r->rows_max)
      return kp_fail(KPICK_E_UNSUPPORTED, "model", "%s (%s) takes %d..%d rows, not %d", r->name, kind_name[i],
                     (int)r->rows_min, (int)r->rows_max, (int)m);
  }
  return KPICK_OK;
}

typedef struct step_args {
  struct kpick_model *md;
  int32_t cands[KPICK_LIN_COUNT];
  int32_t m;
} step_args;

/* Everything one decode step enqueues, in order. Every buffer keeps the last
 * layer's value after the step (kpick_model_check reads them); none is an
 * input and an output of one call. */
static int enqueue_step(void *ctx) {
  const step_args *a = ctx;
  const struct kpick_model *md = a->md;
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int32_t m = a->m, dt = d->dtype;
  const int64_t H = d->hidden, I = d->intermediate;
  void *s = md->stream;
  float *resid = at(md, L->resid);
  void *hbuf = at(md, L->hbuf), *qkv = at(md, L->qkv), *attn = at(md, L->attn), *act = at(md, L->act);
  void *ybuf = at(md, L->ybuf);
  int32_t *tokens = at(md, L->tokens), *pos = at(md, L->pos);
  void *attn_scratch = scratch_at(md, L->attn_scratch, L->attn_scratch_bytes);

  KP_TRY(be_embed(dt, at(md, L->embed), tokens, resid, m, H, d->vocab, s));
  const void *pending = NULL; /* the last linear's output, not yet in the residual */
  for (int32_t l = 0; l < d->layers; l++) {
    void *kc = cache_at(md, l, 0), *vc = cache_at(md, l, 1);
    KP_TRY(be_add_rmsnorm(dt, resid, pending, layer_at(md, l, L->gamma_attn), hbuf, m, H, d->rms_eps, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_QKV], KPICK_OP_LINEAR, dt, hbuf, layer_at(md, l, L->wqkv), qkv, m, L->nqkv, H, s));
    KP_TRY(be_rope_append(dt, qkv, pos, kc, vc, m, d->heads, d->kv_heads, d->head_dim, md->cap, d->rope_theta, s));
    KP_TRY(be_attention(dt, qkv, kc, vc, pos, attn, m, d->heads, d->kv_heads, d->head_dim, md->cap, attn_scratch, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_O], KPICK_OP_LINEAR, dt, attn, layer_at(md, l, L->wo), ybuf, m, H, L->qdim, s));
    KP_TRY(be_add_rmsnorm(dt, resid, ybuf, layer_at(md, l, L->gamma_mlp), hbuf, m, H, d->rms_eps, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_GATE_UP], KPICK_OP_GATED, dt, hbuf, layer_at(md, l, L->wgu), act, m, I, H, s));
    KP_TRY(be_launch(a->cands[KPICK_LIN_DOWN], KPICK_OP_LINEAR, dt, act, layer_at(md, l, L->wdown), ybuf, m, H, I, s));
    pending = ybuf;
  }
  KP_TRY(be_add_rmsnorm(dt, resid, pending, at(md, L->gamma_final), hbuf, m, H, d->rms_eps, s));
  KP_TRY(be_launch(a->cands[KPICK_LIN_LM_HEAD], KPICK_OP_LINEAR, dt, hbuf, at(md, L->lm_head), at(md, L->logits), m,
                   d->vocab, H, s));
  return be_argmax_advance(dt, at(md, L->logits), m, d->vocab, tokens, pos,
                           scratch_at(md, L->argmax_scratch, L->argmax_scratch_bytes), s);
}

/* One eager step whose effect on tokens and positions is undone: it grows the
 * backend's scratch, loads modules and makes BLAS plans outside capture (none
 * of that may happen under capture). The KV slots it writes are written again,
 * with the same values, by the next real step. */
static int warm_up(step_args *a) {
  struct kpick_model *md = a->md;
  const size_t bytes = (size_t)md->d.max_batch * 4;
  int32_t tokens[KP_MODEL_MAX_ROWS], pos[KP_MODEL_MAX_ROWS];
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_download(tokens, at(md, md->L.tokens), bytes));
  KP_TRY(be_dev_download(pos, at(md, md->L.pos), bytes));
  int st = enqueue_step(a);
  const int sync = be_stream_sync(md->stream);
  if (st == KPICK_OK) st = sync;
  const int up1 = be_dev_upload(at(md, md->L.tokens), tokens, bytes);
  const int up2 = be_dev_upload(at(md, md->L.pos), pos, bytes);
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

static int run_once(step_args *a) {
  void *graph = NULL;
  KP_TRY(graph_for(a, &graph));
  KP_TRY(be_graph_launch(graph, a->md->stream));
  return be_stream_sync(a->md->stream);
}

static int step_args_of(struct kpick_model *md, const int32_t *cands, int32_t batch, step_args *a) {
  KP_REQUIRE(batch >= 1 && batch <= md->d.max_batch, "batch must be in 1..%d (the model's max_batch), got %d",
             (int)md->d.max_batch, (int)batch);
  KP_TRY(check_cands(cands, batch));
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
  KP_TRY(step_args_of(md, cands, batch, &a));
  KP_REQUIRE(md->steps < md->d.max_new, "the KV cache holds %d new positions and all are used: reset the model",
             (int)md->d.max_new);
  md->steps++; /* counted before running: a failed step may have written its slot */
  KP_TRY(run_once(&a));
  return be_dev_download(tokens_out, at(md, md->L.tokens), (size_t)batch * 4);
}

int kpick_model_time(kpick_model *md, const int32_t *cands, int32_t batch, int32_t steps, double *step_us_out) {
  kp_clear_error();
  KP_MODEL(md);
  KP_REQUIRE(step_us_out != NULL, "step_us_out is null");
  KP_REQUIRE(steps >= 1 && steps <= md->d.max_new, "steps must be in 1..%d (the model's max_new), got %d",
             (int)md->d.max_new, (int)steps);
  step_args a;
  KP_TRY(step_args_of(md, cands, batch, &a));
  /* one untimed step first: a new graph's first launch uploads it, clocks ramp */
  KP_TRY(set_positions(md));
  md->steps = 1;
  KP_TRY(run_once(&a));
  KP_TRY(set_positions(md));
  md->steps = steps;
  void *graph = NULL;
  KP_TRY(graph_for(&a, &graph));
  return be_graph_time(graph, md->stream, steps, step_us_out);
}

/* ---- self-checks of the non-linear ops against fp64 ---- */

/* Every buffer of one check, released together. */
typedef struct bag {
  void *host[24];
  void *dev[24];
  int nhost, ndev;
  void *stream;
} bag;

static void *bag_host(bag *b, size_t bytes) {
  if (b->nhost == (int)(sizeof b->host / sizeof b->host[0])) return NULL;
  void *p = calloc(1, bytes ? bytes : 1);
  if (p) b->host[b->nhost++] = p;
  return p;
}

static void bag_free(bag *b) {
  for (int i = 0; i < b->nhost; i++) free(b->host[i]);
  for (int i = 0; i < b->ndev; i++) be_dev_free(b->dev[i]);
  if (b->stream) be_stream_destroy(b->stream);
}

/* A device copy of src (bytes); *out NULL on failure with the error recorded. */
static int bag_upload(bag *b, const void *src, size_t bytes, void **out) {
  *out = NULL;
  if (b->ndev == (int)(sizeof b->dev / sizeof b->dev[0])) return kp_fail(KPICK_E_STATE, "selfcheck", "too many buffers");
  void *p = NULL;
  KP_TRY(be_dev_alloc(&p, bytes));
  b->dev[b->ndev++] = p;
  *out = p;
  return be_dev_upload(p, src, bytes);
}

#define KP_HOST(b, ptr, bytes)                                                             \
  do {                                                                                     \
    (ptr) = bag_host((b), (bytes));                                                        \
    if (!(ptr)) return kp_fail(KPICK_E_NOMEM, "selfcheck", "host allocation failed");     \
  } while (0)

static void random_dtype(uint16_t *dst, int64_t n, int dtype, uint64_t seed, float offset, float scale) {
  for (int64_t i = 0; i < n; i++) dst[i] = kp_from_f32(dtype, fmaf(scale, kp_uniform(seed, (uint64_t)i), offset));
}

static double val(int dtype, uint16_t h) { return (double)kp_to_f32(dtype, h); }

/* max |out - ref| / max |ref| over n elements of a dtype output */
static double rel_dtype(const uint16_t *out, const double *ref, int64_t n, int dtype) {
  double err = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs(val(dtype, out[i]) - ref[i]);
    err = e > err || isnan(e) ? e : err;
    mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
  }
  return isnan(err) ? INFINITY : mag > 0 ? err / mag : err;
}

static double rel_f32(const float *out, const double *ref, int64_t n) {
  double err = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs((double)out[i] - ref[i]);
    err = e > err || isnan(e) ? e : err;
    mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
  }
  return isnan(err) ? INFINITY : mag > 0 ? err / mag : err;
}

static double worst(double a, double b) { return isnan(a) || a > b ? a : b; }

/* Shapes with tails: no size a power of two, positions 0, mid and last. */
enum { SC_M = 3, SC_HEADS = 4, SC_KV = 2, SC_CAP = 300, SC_V = 1003 };
/* hidden sizes of the norm and embed checks: a multiple of 8 and one of 2 but
 * not 4 (the GPU kernels read 4 or 8 elements at once only when every row is
 * so aligned), and one over 4096 (two groups of 4 per thread of the norm's
 * 1024-thread block) */
static const int sc_hiddens[] = {328, 330, 4100};
/* head dims of the rotary and attention checks: tiny's, and every preset's */
static const int sc_head_dims[] = {64, 128};
static const int32_t sc_pos[SC_M] = {0, 77, SC_CAP - 1};
static const float sc_theta = 1e6f;

static int check_add_rmsnorm_h(bag *b, int dt, uint64_t seed, int corrupt, int H, double *err) {
  const int64_t n = (int64_t)SC_M * H;
  const float eps = 1e-6f;
  float *resid;
  uint16_t *y, *y_dev_src, *gamma, *out;
  double *r, *ref;
  KP_HOST(b, resid, n * 4);
  KP_HOST(b, y, n * 2);
  KP_HOST(b, y_dev_src, n * 2);
  KP_HOST(b, gamma, H * 2);
  KP_HOST(b, out, n * 2);
  KP_HOST(b, r, n * 8);
  KP_HOST(b, ref, n * 8);
  for (int64_t i = 0; i < n; i++) resid[i] = 3.0f * kp_uniform(seed + 1, (uint64_t)i);
  random_dtype(y, n, dt, seed + 2, 0.0f, 1.0f);
  random_dtype(gamma, H, dt, seed + 3, 1.0f, 0.25f);
  memcpy(y_dev_src, y, n * 2);
  if (corrupt) y_dev_src[H + 5] = kp_from_f32(dt, val(dt, y[H + 5]) + 4.0f);
  void *d_resid, *d_y, *d_gamma, *d_out;
  KP_TRY(bag_upload(b, resid, n * 4, &d_resid));
  KP_TRY(bag_upload(b, y_dev_src, n * 2, &d_y));
  KP_TRY(bag_upload(b, gamma, H * 2, &d_gamma));
  KP_TRY(bag_upload(b, out, n * 2, &d_out));
  for (int64_t i = 0; i < n; i++) r[i] = (double)resid[i] + val(dt, y[i]);
  *err = 0;
  /* with y, then without: the second call normalises the updated residual again */
  for (int pass = 0; pass < 2; pass++) {
    KP_TRY(be_add_rmsnorm(dt, d_resid, pass == 0 ? d_y : NULL, d_gamma, d_out, SC_M, H, eps, b->stream));
    KP_TRY(be_stream_sync(b->stream));
    KP_TRY(be_dev_download(out, d_out, n * 2));
    KP_TRY(be_dev_download(resid, d_resid, n * 4));
    for (int m = 0; m < SC_M; m++) {
      double ss = 0;
      for (int j = 0; j < H; j++) ss += r[m * H + j] * r[m * H + j];
      const double inv = 1.0 / sqrt(ss / H + eps);
      for (int j = 0; j < H; j++) ref[m * H + j] = r[m * H + j] * inv * val(dt, gamma[j]);
    }
    *err = worst(*err, worst(rel_dtype(out, ref, n, dt), rel_f32(resid, r, n)));
  }
  return KPICK_OK;
}

/* fp64 rotate-half rotary embedding of one head vector in place */
static void rope_ref(double *v, int32_t pos, int d, double theta) {
  for (int i = 0; i < d / 2; i++) {
    const double ang = pos * pow(theta, -2.0 * i / d), c = cos(ang), s = sin(ang);
    const double x0 = v[i], x1 = v[i + d / 2];
    v[i] = x0 * c - x1 * s;
    v[i + d / 2] = x1 * c + x0 * s;
  }
}

static int check_rope_append_d(bag *b, int dt, uint64_t seed, int corrupt, int D, double *err) {
  const int64_t nqkv = (int64_t)(SC_HEADS + 2 * SC_KV) * D, n = SC_M * nqkv;
  const int64_t ncache = (int64_t)SC_M * SC_KV * SC_CAP * D;
  uint16_t *qkv, *kc, *vc;
  double *qkv_ref, *kc_ref, *vc_ref;
  int32_t pos[SC_M];
  KP_HOST(b, qkv, n * 2);
  KP_HOST(b, kc, ncache * 2);
  KP_HOST(b, vc, ncache * 2);
  KP_HOST(b, qkv_ref, n * 8);
  KP_HOST(b, kc_ref, ncache * 8);
  KP_HOST(b, vc_ref, ncache * 8);
  random_dtype(qkv, n, dt, seed + 1, 0.0f, 1.0f);
  random_dtype(kc, ncache, dt, seed + 2, 0.0f, 1.0f);
  random_dtype(vc, ncache, dt, seed + 3, 0.0f, 1.0f);
  memcpy(pos, sc_pos, sizeof pos);
  for (int64_t i = 0; i < n; i++) qkv_ref[i] = val(dt, qkv[i]);
  for (int64_t i = 0; i < ncache; i++) kc_ref[i] = val(dt, kc[i]), vc_ref[i] = val(dt, vc[i]);
  for (int m = 0; m < SC_M; m++) {
    for (int h = 0; h < SC_HEADS + SC_KV; h++) rope_ref(qkv_ref + m * nqkv + h * D, pos[m], D, sc_theta);
    for (int g = 0; g < SC_KV; g++) {
      const int64_t slot = (((int64_t)m * SC_KV + g) * SC_CAP + pos[m]) * D;
      for (int e = 0; e < D; e++) {
        kc_ref[slot + e] = qkv_ref[m * nqkv + (SC_HEADS + g) * D + e];
        vc_ref[slot + e] = qkv_ref[m * nqkv + (SC_HEADS + SC_KV + g) * D + e];
      }
    }
  }
  if (corrupt) pos[0] += 1;
  void *d_qkv, *d_kc, *d_vc, *d_pos;
  KP_TRY(bag_upload(b, qkv, n * 2, &d_qkv));
  KP_TRY(bag_upload(b, kc, ncache * 2, &d_kc));
  KP_TRY(bag_upload(b, vc, ncache * 2, &d_vc));
  KP_TRY(bag_upload(b, pos, sizeof pos, &d_pos));
  KP_TRY(be_rope_append(dt, d_qkv, d_pos, d_kc, d_vc, SC_M, SC_HEADS, SC_KV, D, SC_CAP, sc_theta, b->stream));
  KP_TRY(be_stream_sync(b->stream));
  KP_TRY(be_dev_download(qkv, d_qkv, n * 2));
  KP_TRY(be_dev_download(kc, d_kc, ncache * 2));
  KP_TRY(be_dev_download(vc, d_vc, ncache * 2));
  *err = worst(rel_dtype(qkv, qkv_ref, n, dt), worst(rel_dtype(kc, kc_ref, ncache, dt), rel_dtype(vc, vc_ref, ncache, dt)));
  return KPICK_OK;
}

/* The worst error of one sized check over the sizes given. */
typedef int (*check_at_size)(bag *b, int dt, uint64_t seed, int corrupt, int size, double *err);
static int worst_over(check_at_size check, const int *sizes, size_t count, bag *b, int dt, uint64_t seed, int corrupt,
                      double *err) {
  *err = 0;
  for (size_t i = 0; i < count; i++) {
    double e = INFINITY;
    KP_TRY(check(b, dt, seed + 16 * i, corrupt, sizes[i], &e));
    *err = worst(*err, e);
  }
  return KPICK_OK;
}

static int worst_over_head_dims(check_at_size check, bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over(check, sc_head_dims, sizeof sc_head_dims / sizeof sc_head_dims[0], b, dt, seed, corrupt, err);
}

static int check_add_rmsnorm(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over(check_add_rmsnorm_h, sc_hiddens, sizeof sc_hiddens / sizeof sc_hiddens[0], b, dt, seed, corrupt, err);
}

static int check_rope_append(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over_head_dims(check_rope_append_d, b, dt, seed, corrupt, err);
}

static int check_attention_d(bag *b, int dt, uint64_t seed, int corrupt, int D, double *err) {
  const int64_t nqkv = (int64_t)(SC_HEADS + 2 * SC_KV) * D, n = SC_M * nqkv;
  const int64_t ncache = (int64_t)SC_M * SC_KV * SC_CAP * D, nout = (int64_t)SC_M * SC_HEADS * D;
  uint16_t *qkv, *kc, *vc, *vc_dev_src, *out;
  double *ref, *p;
  KP_HOST(b, qkv, n * 2);
  KP_HOST(b, kc, ncache * 2);
  KP_HOST(b, vc, ncache * 2);
  KP_HOST(b, vc_dev_src, ncache * 2);
  KP_HOST(b, out, nout * 2);
  KP_HOST(b, ref, nout * 8);
  KP_HOST(b, p, SC_CAP * 8);
  /* q scaled up so the softmax is far from flat */
  random_dtype(qkv, n, dt, seed + 1, 0.0f, 3.0f);
  random_dtype(kc, ncache, dt, seed + 2, 0.0f, 1.0f);
  random_dtype(vc, ncache, dt, seed + 3, 0.0f, 1.0f);
  memcpy(vc_dev_src, vc, ncache * 2);
  if (corrupt) /* values of row 2, kv head 0, shifted: its heads' outputs move by 2 */
    for (int64_t i = 0; i < (int64_t)SC_CAP * D; i++) {
      const int64_t at_i = ((int64_t)2 * SC_KV + 0) * SC_CAP * D + i;
      vc_dev_src[at_i] = kp_from_f32(dt, val(dt, vc[at_i]) + 2.0f);
    }
  const double scale = 1.0 / sqrt((double)D);
  for (int m = 0; m < SC_M; m++) {
    for (int h = 0; h < SC_HEADS; h++) {
      const int g = h / (SC_HEADS / SC_KV);
      const uint16_t *q = qkv + m * nqkv + h * D;
      const int64_t base = ((int64_t)m * SC_KV + g) * SC_CAP * D;
      double mx = -INFINITY, sum = 0;
      for (int t = 0; t <= sc_pos[m]; t++) {
        double s = 0;
        for (int e = 0; e < D; e++) s += val(dt, q[e]) * val(dt, kc[base + (int64_t)t * D + e]);
        p[t] = s * scale;
        mx = p[t] > mx ? p[t] : mx;
      }
      for (int t = 0; t <= sc_pos[m]; t++) sum += p[t] = exp(p[t] - mx);
      for (int e = 0; e < D; e++) {
        double o = 0;
        for (int t = 0; t <= sc_pos[m]; t++) o += p[t] * val(dt, vc[base + (int64_t)t * D + e]);
        ref[((int64_t)m * SC_HEADS + h) * D + e] = o / sum;
      }
    }
  }
  void *d_qkv, *d_kc, *d_vc, *d_pos, *d_out, *d_scratch = NULL;
  KP_TRY(bag_upload(b, qkv, n * 2, &d_qkv));
  KP_TRY(bag_upload(b, kc, ncache * 2, &d_kc));
  KP_TRY(bag_upload(b, vc_dev_src, ncache * 2, &d_vc));
  KP_TRY(bag_upload(b, sc_pos, sizeof sc_pos, &d_pos));
  KP_TRY(bag_upload(b, out, nout * 2, &d_out));
  /* a row in one block (no scratch), then split over blocks twice: the second
   * split run needs the counters the first put back to 0 */
  const int64_t scratch_bytes = be_attention_scratch(SC_M, SC_HEADS, SC_KV, D, SC_CAP);
  if (scratch_bytes > 0) {
    uint16_t *zeros;
    KP_HOST(b, zeros, (size_t)scratch_bytes);
    KP_TRY(bag_upload(b, zeros, (size_t)scratch_bytes, &d_scratch));
  }
  *err = 0;
  for (int run = 0; run < (d_scratch ? 3 : 1); run++) {
    for (int64_t i = 0; i < nout; i++) out[i] = 0xffffu; /* NaN in both dtypes: an unwritten output fails */
    KP_TRY(be_dev_upload(d_out, out, nout * 2));
    KP_TRY(be_attention(dt, d_qkv, d_kc, d_vc, d_pos, d_out, SC_M, SC_HEADS, SC_KV, D, SC_CAP, run ? d_scratch : NULL,
                        b->stream));
    KP_TRY(be_stream_sync(b->stream));
    KP_TRY(be_dev_download(out, d_out, nout * 2));
    *err = worst(*err, rel_dtype(out, ref, nout, dt));
  }
  return KPICK_OK;
}

static int check_attention(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over_head_dims(check_attention_d, b, dt, seed, corrupt, err);
}

/* lowest index of the largest value; NaN never wins, an all-NaN row gives 0 */
static int32_t argmax_ref(const uint16_t *row, int64_t v, int dt) {
  int32_t best = -1;
  for (int64_t j = 0; j < v; j++) {
    const double x = val(dt, row[j]);
    if (isnan(x)) continue;
    if (best < 0 || x > val(dt, row[best])) best = (int32_t)j;
  }
  return best < 0 ? 0 : best;
}

static int check_argmax(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  const int64_t n = (int64_t)SC_M * SC_V;
  uint16_t *logits;
  KP_HOST(b, logits, n * 2);
  random_dtype(logits, n, dt, seed + 1, 0.0f, 1.0f);
  /* row 1: the maximum twice, the lower index must win; row 2: NaNs */
  uint16_t *r1 = logits + SC_V, *r2 = logits + 2 * SC_V;
  const int32_t j1 = argmax_ref(r1, SC_V, dt);
  r1[j1 > 0 ? j1 / 2 : SC_V - 1] = r1[j1];
  const int32_t j2 = argmax_ref(r2, SC_V, dt);
  r2[0] = r2[(j2 + 1) % SC_V] = kp_from_f32(dt, NAN);
  int32_t want_tok[SC_M], want_pos[SC_M], tokens[SC_M], pos[SC_M];
  for (int m = 0; m < SC_M; m++) {
    want_tok[m] = argmax_ref(logits + m * SC_V, SC_V, dt);
    pos[m] = sc_pos[m];
    want_pos[m] = sc_pos[m] + 1;
    tokens[m] = -1;
  }
  if (corrupt) logits[(want_tok[0] + 1) % SC_V] = kp_from_f32(dt, 8.0f);
  void *d_logits, *d_tokens, *d_pos, *d_scratch = NULL;
  KP_TRY(bag_upload(b, logits, n * 2, &d_logits));
  KP_TRY(bag_upload(b, tokens, sizeof tokens, &d_tokens));
  KP_TRY(bag_upload(b, pos, sizeof pos, &d_pos));
  /* a row in one block (no scratch), then over several blocks twice: the
   * second needs the counters the first put back to 0 */
  const int64_t scratch_bytes = be_argmax_scratch(SC_M, SC_V);
  if (scratch_bytes > 0) {
    uint16_t *zeros;
    KP_HOST(b, zeros, (size_t)scratch_bytes);
    KP_TRY(bag_upload(b, zeros, (size_t)scratch_bytes, &d_scratch));
  }
  const int runs = d_scratch ? 3 : 1;
  int wrong = 0;
  for (int run = 0; run < runs; run++) {
    for (int m = 0; m < SC_M; m++) tokens[m] = -1;
    KP_TRY(be_dev_upload(d_tokens, tokens, sizeof tokens));
    KP_TRY(be_argmax_advance(dt, d_logits, SC_M, SC_V, d_tokens, d_pos, run ? d_scratch : NULL, b->stream));
    KP_TRY(be_stream_sync(b->stream));
    KP_TRY(be_dev_download(tokens, d_tokens, sizeof tokens));
    for (int m = 0; m < SC_M; m++) wrong += tokens[m] != want_tok[m];
  }
  KP_TRY(be_dev_download(pos, d_pos, sizeof pos));
  for (int m = 0; m < SC_M; m++) wrong += pos[m] != want_pos[m] + runs - 1; /* one step per run */
  *err = wrong / ((runs + 1.0) * SC_M);
  return KPICK_OK;
}

static int check_embed_h(bag *b, int dt, uint64_t seed, int corrupt, int H, double *err) {
  const int64_t n = (int64_t)SC_V * H, nout = (int64_t)SC_M * H;
  uint16_t *table;
  float *out;
  KP_HOST(b, table, n * 2);
  KP_HOST(b, out, nout * 4);
  random_dtype(table, n, dt, seed + 1, 0.0f, 1.0f);
  const int32_t want[SC_M] = {17, SC_V - 1, -5}; /* out of range: row 0 */
  int32_t tokens[SC_M] = {17, SC_V - 1, -5};
  if (corrupt) tokens[0] = 18;
  void *d_table, *d_tokens, *d_out;
  KP_TRY(bag_upload(b, table, n * 2, &d_table));
  KP_TRY(bag_upload(b, tokens, sizeof tokens, &d_tokens));
  KP_TRY(bag_upload(b, out, nout * 4, &d_out));
  KP_TRY(be_embed(dt, d_table, d_tokens, d_out, SC_M, H, SC_V, b->stream));
  KP_TRY(be_stream_sync(b->stream));
  KP_TRY(be_dev_download(out, d_out, nout * 4));
  int64_t wrong = 0;
  for (int m = 0; m < SC_M; m++) {
    const int32_t row = want[m] >= 0 && want[m] < SC_V ? want[m] : 0;
    for (int j = 0; j < H; j++) wrong += out[m * H + j] != kp_to_f32(dt, table[(int64_t)row * H + j]);
  }
  *err = (double)wrong / (double)nout;
  return KPICK_OK;
}

static int check_embed(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over(check_embed_h, sc_hiddens, sizeof sc_hiddens / sizeof sc_hiddens[0], b, dt, seed, corrupt, err);
}

int kpick_decode_selfcheck(int32_t op, int32_t dtype, uint64_t seed, int32_t corrupt, double *rel_err_out,
                           double *tol_out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(op >= 0 && op < KPICK_DEC_COUNT, "op must be in 0..%d, got %d", KPICK_DEC_COUNT - 1, (int)op);
  KP_REQUIRE(dtype == KPICK_BF16 || dtype == KPICK_FP16, "dtype must be 0 (bf16) or 1 (fp16), got %d", (int)dtype);
  KP_REQUIRE(corrupt == 0 || corrupt == 1, "corrupt must be 0 or 1, got %d", (int)corrupt);
  KP_REQUIRE(rel_err_out != NULL && tol_out != NULL, "rel_err_out and tol_out must not be null");
  /* one rounding to the dtype at the end: machine epsilon of the output type
   * bounds the error relative to the largest reference value */
  const double eps = dtype == KPICK_BF16 ? 0x1p-7 : 0x1p-10;
  *tol_out = op == KPICK_DEC_ARGMAX || op == KPICK_DEC_EMBED ? 0.0 : eps;
  *rel_err_out = INFINITY;
  bag b;
  memset(&b, 0, sizeof b);
  int st = be_stream_create(&b.stream);
  const uint64_t s = kp_mix64(seed);
  if (st == KPICK_OK) {
    switch (op) {
      case KPICK_DEC_ADD_RMSNORM: st = check_add_rmsnorm(&b, dtype, s, corrupt, rel_err_out); break;
      case KPICK_DEC_ROPE_APPEND: st = check_rope_append(&b, dtype, s, corrupt, rel_err_out); break;
      case KPICK_DEC_ATTENTION: st = check_attention(&b, dtype, s, corrupt, rel_err_out); break;
      case KPICK_DEC_ARGMAX: st = check_argmax(&b, dtype, s, corrupt, rel_err_out); break;
      default: st = check_embed(&b, dtype, s, corrupt, rel_err_out); break;
    }
  }
  bag_free(&b);
  return st;
}

/* ---- the whole step against an fp64 forward on the host ----
 * The reference rounds to the dtype where the step stores the dtype (norm
 * outputs, qkv, rotated q and k, attention, every linear's output) and keeps
 * the residual in fp32 like the step, so only accumulation order and the
 * kernels' fp32 arithmetic separate the two. Compared: the k and v every layer
 * wrote to its cache, every buffer as the last layer left it (qkv, attention,
 * gate_up, down), the final norm, the residual and the logits; a wiring
 * mistake (a wrong buffer, size, cache slot, position or weight) shows there. */

static double rnd(int dt, double x) { return (double)kp_to_f32(dt, kp_from_f32(dt, (float)x)); }

static double dot_w(const uint16_t *w, const double *x, int64_t k, int dt) {
  double acc = 0;
  for (int64_t i = 0; i < k; i++) acc += (double)kp_to_f32(dt, w[i]) * x[i];
  return acc;
}

/* out[n] = round(W[n, k] . x) */
static void linear_ref(const uint16_t *w, const double *x, int64_t n, int64_t k, int dt, double *out) {
  for (int64_t j = 0; j < n; j++) out[j] = rnd(dt, dot_w(w + j * k, x, k, dt));
}

/* residual (fp32 values) += y; out = round(rmsnorm(residual) * gamma) */
static void add_norm_ref(double *x, const double *y, const uint16_t *gamma, int64_t h, double eps, int dt, double *out) {
  double ss = 0;
  for (int64_t j = 0; j < h; j++) {
    if (y) x[j] = (double)((float)x[j] + (float)y[j]);
    ss += x[j] * x[j];
  }
  const double inv = 1.0 / sqrt(ss / (double)h + eps);
  for (int64_t j = 0; j < h; j++) out[j] = rnd(dt, x[j] * inv * (double)kp_to_f32(dt, gamma[j]));
}

/* max |a - b| and max |b| accumulated over several comparisons */
typedef struct diff {
  double err, mag;
} diff;

static void diff_add(diff *f, double got, double want) {
  const double e = fabs(got - want);
  f->err = isnan(e) || isnan(f->err) ? NAN : fmax(f->err, e);
  f->mag = fmax(f->mag, fabs(want));
}

static void diff_dtype(diff *f, const uint16_t *got, const double *want, int64_t n, int dt) {
  for (int64_t i = 0; i < n; i++) diff_add(f, (double)kp_to_f32(dt, got[i]), want[i]);
}

static double diff_rel(const diff *f) { return isnan(f->err) ? INFINITY : f->mag > 0 ? f->err / f->mag : f->err; }

/* Host copies: one layer's weights and caches at a time; the reference's
 * per-row state [m][...]; the step's buffers as it left them. */
typedef struct check_buf {
  uint16_t *layer, *kc, *vc, *table, *lm, *gamma_final;
  double *x, *pending, *h, *qkv, *attn, *act, *gu, *p, *logits;
  diff kv; /* the cache slots every layer wrote */
} check_buf;

static int check_alloc(bag *b, const struct kpick_model *md, int32_t m, check_buf *c) {
  const kpick_model_dims *d = &md->d;
  const int64_t H = d->hidden, I = d->intermediate, V = d->vocab;
  KP_HOST(b, c->layer, md->L.layer_bytes);
  KP_HOST(b, c->kc, md->L.cache_bytes);
  KP_HOST(b, c->vc, md->L.cache_bytes);
  KP_HOST(b, c->table, (size_t)V * H * 2);
  KP_HOST(b, c->lm, d->tied ? 2 : (size_t)V * H * 2);
  KP_HOST(b, c->gamma_final, (size_t)H * 2);
  KP_HOST(b, c->x, (size_t)m * H * 8);
  KP_HOST(b, c->pending, (size_t)m * H * 8);
  KP_HOST(b, c->h, (size_t)m * H * 8);
  KP_HOST(b, c->qkv, (size_t)m * md->L.nqkv * 8);
  KP_HOST(b, c->attn, (size_t)m * md->L.qdim * 8);
  KP_HOST(b, c->act, (size_t)m * I * 8);
  KP_HOST(b, c->gu, (size_t)2 * I * 8);
  KP_HOST(b, c->p, (size_t)md->cap * 8);
  KP_HOST(b, c->logits, (size_t)m * V * 8);
  return KPICK_OK;
}

/* one layer of the reference for row r at position p; kc and vc hold the
 * caches as the step left them: slots before p as they were before it */
static void layer_ref(const struct kpick_model *md, check_buf *c, int32_t r, int32_t p, int first) {
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int dt = d->dtype, D = d->head_dim, half = D / 2, group = d->heads / d->kv_heads;
  const int64_t H = d->hidden, I = d->intermediate, nqkv = L->nqkv;
  const char *lw = (const char *)c->layer;
  double *x = c->x + r * H, *pend = c->pending + r * H, *h = c->h + r * H, *qkv = c->qkv + r * nqkv;
  double *attn = c->attn + r * L->qdim, *act = c->act + r * I;
  add_norm_ref(x, first ? NULL : pend, (const uint16_t *)(lw + L->gamma_attn), H, d->rms_eps, dt, h);
  linear_ref((const uint16_t *)(lw + L->wqkv), h, nqkv, H, dt, qkv);
  for (int hd = 0; hd < d->heads + d->kv_heads; hd++) {
    double *v = qkv + (int64_t)hd * D;
    for (int i = 0; i < half; i++) {
      const double ang = p * pow((double)d->rope_theta, -2.0 * i / D), cs = cos(ang), sn = sin(ang);
      const double x0 = v[i], x1 = v[i + half];
      v[i] = rnd(dt, x0 * cs - x1 * sn);
      v[i + half] = rnd(dt, x1 * cs + x0 * sn);
    }
  }
  for (int g = 0; g < d->kv_heads; g++) {
    const int64_t slot = (((int64_t)r * d->kv_heads + g) * md->cap + p) * D;
    diff_dtype(&c->kv, c->kc + slot, qkv + (int64_t)(d->heads + g) * D, D, dt);
    diff_dtype(&c->kv, c->vc + slot, qkv + (int64_t)(d->heads + d->kv_heads + g) * D, D, dt);
  }
  const double scale = 1.0 / sqrt((double)D);
  for (int hd = 0; hd < d->heads; hd++) {
    const int g = hd / group;
    const double *q = qkv + (int64_t)hd * D;
    const double *kn = qkv + (int64_t)(d->heads + g) * D, *vn = qkv + (int64_t)(d->heads + d->kv_heads + g) * D;
    const int64_t base = ((int64_t)r * d->kv_heads + g) * md->cap * D;
    double mx = -INFINITY, sum = 0;
    for (int32_t t = 0; t <= p; t++) {
      double s = 0;
      for (int e = 0; e < D; e++) s += q[e] * (t < p ? (double)kp_to_f32(dt, c->kc[base + (int64_t)t * D + e]) : kn[e]);
      c->p[t] = s * scale;
      mx = fmax(mx, c->p[t]);
    }
    for (int32_t t = 0; t <= p; t++) sum += c->p[t] = exp(c->p[t] - mx);
    for (int e = 0; e < D; e++) {
      double o = 0;
      for (int32_t t = 0; t <= p; t++) o += c->p[t] * (t < p ? (double)kp_to_f32(dt, c->vc[base + (int64_t)t * D + e]) : vn[e]);
      attn[(int64_t)hd * D + e] = rnd(dt, o / sum);
    }
  }
  linear_ref((const uint16_t *)(lw + L->wo), attn, H, L->qdim, dt, pend);
  add_norm_ref(x, pend, (const uint16_t *)(lw + L->gamma_mlp), H, d->rms_eps, dt, h);
  const uint16_t *wgu = (const uint16_t *)(lw + L->wgu);
  for (int64_t j = 0; j < 2 * I; j++) c->gu[j] = dot_w(wgu + j * H, h, H, dt);
  for (int64_t j = 0; j < I; j++) act[j] = rnd(dt, c->gu[j] / (1.0 + exp(-c->gu[j])) * c->gu[I + j]);
  linear_ref((const uint16_t *)(lw + L->wdown), act, H, I, dt, pend);
}

/* the step's buffer at offset (n dtype elements) against the reference */
static int diff_buffer(struct kpick_model *md, bag *b, size_t offset, const double *want, int64_t n, diff *f) {
  uint16_t *got;
  KP_HOST(b, got, (size_t)n * 2);
  KP_TRY(be_dev_download(got, at(md, offset), (size_t)n * 2));
  diff_dtype(f, got, want, n, md->d.dtype);
  return KPICK_OK;
}

static int step_check(struct kpick_model *md, step_args *a, bag *b, double *err) {
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int32_t m = a->m, dt = d->dtype;
  const int64_t H = d->hidden, V = d->vocab;
  check_buf c;
  memset(&c, 0, sizeof c);
  KP_TRY(check_alloc(b, md, m, &c));
  int32_t tokens[KP_MODEL_MAX_ROWS], pos[KP_MODEL_MAX_ROWS];
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_download(tokens, at(md, L->tokens), (size_t)m * 4));
  KP_TRY(be_dev_download(pos, at(md, L->pos), (size_t)m * 4));
  md->steps++;
  KP_TRY(run_once(a));

  KP_TRY(be_dev_download(c.table, at(md, L->embed), (size_t)V * H * 2));
  for (int32_t r = 0; r < m; r++) {
    const int64_t t = tokens[r] >= 0 && tokens[r] < V ? tokens[r] : 0;
    for (int64_t j = 0; j < H; j++) c.x[r * H + j] = (double)kp_to_f32(dt, c.table[t * H + j]);
  }
  for (int32_t l = 0; l < d->layers; l++) {
    KP_TRY(be_dev_download(c.layer, layer_at(md, l, 0), L->layer_bytes));
    KP_TRY(be_dev_download(c.kc, cache_at(md, l, 0), L->cache_bytes));
    KP_TRY(be_dev_download(c.vc, cache_at(md, l, 1), L->cache_bytes));
    for (int32_t r = 0; r < m; r++) layer_ref(md, &c, r, pos[r], l == 0);
  }
  KP_TRY(be_dev_download(c.gamma_final, at(md, L->gamma_final), (size_t)H * 2));
  const uint16_t *lm = c.table;
  if (!d->tied) {
    KP_TRY(be_dev_download(c.lm, at(md, L->lm_head), (size_t)V * H * 2));
    lm = c.lm;
  }
  for (int32_t r = 0; r < m; r++) {
    add_norm_ref(c.x + r * H, c.pending + r * H, c.gamma_final, H, d->rms_eps, dt, c.h + r * H);
    for (int64_t j = 0; j < V; j++) c.logits[r * V + j] = dot_w(lm + j * H, c.h + r * H, H, dt);
  }

  /* each buffer relative to its own largest value */
  diff f[7];
  memset(f, 0, sizeof f);
  KP_TRY(diff_buffer(md, b, L->qkv, c.qkv, (int64_t)m * L->nqkv, &f[0]));
  KP_TRY(diff_buffer(md, b, L->attn, c.attn, (int64_t)m * L->qdim, &f[1]));
  KP_TRY(diff_buffer(md, b, L->act, c.act, (int64_t)m * d->intermediate, &f[2]));
  KP_TRY(diff_buffer(md, b, L->ybuf, c.pending, (int64_t)m * H, &f[3]));
  KP_TRY(diff_buffer(md, b, L->hbuf, c.h, (int64_t)m * H, &f[4]));
  KP_TRY(diff_buffer(md, b, L->logits, c.logits, (int64_t)m * V, &f[5]));
  float *resid;
  KP_HOST(b, resid, (size_t)m * H * 4);
  KP_TRY(be_dev_download(resid, at(md, L->resid), (size_t)m * H * 4));
  for (int64_t i = 0; i < (int64_t)m * H; i++) diff_add(&f[6], (double)resid[i], c.x[i]);
  *err = diff_rel(&c.kv);
  for (int i = 0; i < 7; i++) *err = worst(*err, diff_rel(&f[i]));
  return KPICK_OK;
}

int kpick_model_check(kpick_model *md, const int32_t *cands, int32_t batch, double *rel_err_out, double *tol_out) {
  kp_clear_error();
  KP_MODEL(md);
  KP_REQUIRE(rel_err_out != NULL && tol_out != NULL, "rel_err_out and tol_out must not be null");
  step_args a;
  KP_TRY(step_args_of(md, cands, batch, &a));
  KP_REQUIRE(md->steps < md->d.max_new, "the KV cache holds %d new positions and all are used: reset the model",
             (int)md->d.max_new);
  *tol_out = md->d.dtype == KPICK_BF16 ? KP_STEP_TOL_BF16 : KP_STEP_TOL_FP16;
  *rel_err_out = INFINITY;
  bag b;
  memset(&b, 0, sizeof b);
  const int st = step_check(md, &a, &b, rel_err_out);
  bag_free(&b);
  return st;
}
