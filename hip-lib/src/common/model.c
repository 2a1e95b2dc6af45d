/* model.c: the decode model of serve-bench (kpick.h, "decode model"): what
 * it is and the memory it lives in (model.h lists the other files).
 *   dims      validated once; every size below derives from them
 *   layout    one arena: per-layer weights, the KV caches, the embedding,
 *             lm_head, activations; offsets 256-byte aligned
 *   memory    the arena plus a backend reserve, against free memory, with what
 *             would fit when it does not
 *   weights   filled from the seed with random.h's values, the same on every backend
 * The residual stream is fp32; every linear reads and writes the dtype (an
 * fp8 model: bf16, with the qkv, o, gate_up and down weights in fp8, packed
 * as kpick.h's KPICK_FP8 says, from the bf16 values a bf16 model would get). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "fp8.h"
#include "handles.h"
#include "model.h"
#include "numeric.h"
#include "random.h"
#include "space.h"

#define KP_ALIGN 256
#define KP_MAX_LAYERS 4096
#define KP_MAX_HEADS 1024
#define KP_MODEL_MAX_DIM (1 << 24)
#define GIB (1024.0 * 1024.0 * 1024.0)

/* Room the arena leaves for what the backend allocates on its own: the BLAS
 * workspace, split-K partials (capped at 256 MiB), graphs, runtime state. */
#if defined(KPICK_BACKEND_GPU)
static const double kp_reserve_bytes = 768.0 * 1024 * 1024;
#else
static const double kp_reserve_bytes = 16.0 * 1024 * 1024;
#endif

static size_t round_up(size_t n) { return (n + KP_ALIGN - 1) / KP_ALIGN * KP_ALIGN; }

static size_t take(size_t *cursor, size_t bytes) {
  size_t at = *cursor;
  *cursor += round_up(bytes);
  return at;
}

/* Sizes fit: check_dims bounds the total far below 2^62 first. */
static size_t lin_bytes(const kpick_model_dims *d, int32_t kind, size_t rows, size_t k) {
  return (size_t)kp_weight_bytes(kp_kind_dtype(d->dtype, kind), (int64_t)rows, (int64_t)k);
}

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
  L->wqkv = take(&in_layer, lin_bytes(d, KPICK_LIN_QKV, (size_t)L->nqkv, H));
  L->wo = take(&in_layer, lin_bytes(d, KPICK_LIN_O, H, (size_t)L->qdim));
  const size_t E = d->experts > 0 ? (size_t)d->experts : 1; /* a dense MLP is one expert */
  if (d->experts > 0) L->wrouter = take(&in_layer, lin_bytes(d, KPICK_LIN_ROUTER, E, H));
  /* every expert's rows as one weight (fp8: one packed buffer each, kpick.h) */
  L->wgu = take(&in_layer, lin_bytes(d, KPICK_LIN_GATE_UP, E * 2 * I, H));
  L->wdown = take(&in_layer, lin_bytes(d, KPICK_LIN_DOWN, E * H, I));
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
  if (d->experts > 0) {
    const size_t routed = (size_t)d->layers * B * (size_t)d->topk * 4;
    L->rlogits = take(&c, B * E * e);
    L->ids = take(&c, routed);
    L->gates = take(&c, routed);
  }
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
  const double E = d->experts > 0 ? d->experts : 1;
  const double layer = 2 * H + nqkv * H + H * qdim + 3 * I * H * E + E * H + 2 * B * E * 4;
  const double per_layer = 2 * layer + 2 * 2 * B * d->kv_heads * cap * D + 20 * KP_ALIGN;
  /* scratch: at most 64 splits of (head_dim + 2) floats per head and row, 64 pairs per row, and counters */
  const double scratch = B * (d->heads * 64.0 * (D + 2) * 4 + 64.0 * 8) + KPICK_MAX_ROWS * (d->heads + 1) * 4.0;
  return d->layers * per_layer + 2 * 2 * V * H + B * (4 * H + 2 * (H + qdim + nqkv + I + H + V) + 8) + scratch + 20 * KP_ALIGN;
}

#define KP_DIM(x, lo, hi) \
  KP_REQUIRE((x) >= (lo) && (x) <= (hi), #x " must be in %lld..%lld, got %lld", (long long)(lo), (long long)(hi), (long long)(x))

static int check_dims(const kpick_model_dims *d) {
  KP_REQUIRE(d != NULL, "dims is null");
  KP_REQUIRE(d->dtype >= KPICK_BF16 && d->dtype <= KPICK_FP8, "dtype must be 0 (bf16), 1 (fp16) or 2 (fp8), got %d",
             (int)d->dtype);
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
  KP_DIM(d->max_batch, 1, KPICK_MAX_ROWS);
  KP_DIM(d->max_new, 1, KPICK_MAX_POSITIONS);
  KP_DIM(d->context, 0, KPICK_MAX_POSITIONS - d->max_new);
  KP_REQUIRE(isfinite(d->rms_eps) && d->rms_eps > 0 && d->rms_eps < 1, "rms_eps must be in (0, 1), got %g", (double)d->rms_eps);
  KP_REQUIRE(isfinite(d->rope_theta) && d->rope_theta > 1, "rope_theta must be finite and > 1, got %g", (double)d->rope_theta);
  KP_DIM(d->experts, 0, KPICK_MAX_EXPERTS);
  if (d->experts == 0) KP_REQUIRE(d->topk == 0, "topk must be 0 in a dense model (experts 0), got %d", (int)d->topk);
  else KP_DIM(d->topk, 1, d->experts < KPICK_MAX_TOPK ? d->experts : KPICK_MAX_TOPK);
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

/* ---- live models ---- */

#define KP_MAX_MODELS 256
static kp_handles models = KP_HANDLES_INIT(KP_MAX_MODELS);

int kp_model_live(const kpick_model *md) { return kp_handles_has(&models, md); }

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

enum { S_GAMMA_ATTN = 1, S_GAMMA_MLP, S_WQKV, S_WO, S_WGU, S_WDOWN, S_EMBED, S_LM_HEAD, S_GAMMA_FINAL, S_KV, S_TOKENS, S_WROUTER };

static int fill(struct kpick_model *md, void *dst, int64_t count, uint64_t stream, float offset, float scale) {
  return be_fill_uniform(dst, count, kp_act_dtype(md->d.dtype), stream, offset, scale, md->stream);
}

/* An fp8 linear's rows r0..r1-1: drawn as fill() draws them, with each row's
 * gain (kp_fp8_row_gain), rounded to bf16, packed. */
typedef struct fp8_rows_job {
  uint16_t *w16;
  void *packed;
  int64_t rows, k, r0, r1;
  uint64_t stream;
  float scale;
} fp8_rows_job;

static void *fp8_rows(void *arg) {
  const fp8_rows_job *j = arg;
  for (int64_t i = j->r0 * j->k; i < j->r1 * j->k; i++)
    j->w16[i] = kp_f32_to_bf16(kp_fp8_row_gain(i / j->k) * j->scale * kp_uniform(j->stream, (uint64_t)i));
  kp_fp8_pack_rows(j->w16, j->rows, j->k, j->r0, j->r1, j->packed);
  return NULL;
}

/* One linear's weight [rows][k]: filled as fill() does; in an fp8 model the
 * same values with each row's gain, in bf16, packed on the host and uploaded.
 * The host work is split over the cores by rows (a Llama-3.1-8B step has 7e9
 * fp8 weights: minutes on one core); the bytes do not depend on the split. */
static int fill_linear(struct kpick_model *md, int32_t kind, void *dst, int64_t rows, int64_t k, uint64_t stream, float scale) {
  if (kp_kind_dtype(md->d.dtype, kind) != KPICK_FP8) return fill(md, dst, rows * k, stream, 0.0f, scale);
  const int64_t bytes = kp_weight_bytes(KPICK_FP8, rows, k);
  uint16_t *w16 = malloc((size_t)(rows * k) * 2);
  void *packed = malloc((size_t)bytes);
  int st = w16 && packed ? KPICK_OK : kp_fail(KPICK_E_NOMEM, "model", "host allocation failed");
  if (st == KPICK_OK) {
    enum { MAX_THREADS = 32 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : cores;
    if (n > rows) n = rows;
    fp8_rows_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int64_t t = 0; t < n; t++) {
      jobs[t] = (fp8_rows_job){w16, packed, rows, k, rows * t / n, rows * (t + 1) / n, stream, scale};
      started[t] = t > 0 && pthread_create(&tid[t], NULL, fp8_rows, &jobs[t]) == 0;
    }
    for (int64_t t = 0; t < n; t++)
      if (!started[t]) fp8_rows(&jobs[t]); /* job 0, and any a thread could not take */
    for (int64_t t = 0; t < n; t++)
      if (started[t]) pthread_join(tid[t], NULL);
    st = be_stream_sync(md->stream);
    if (st == KPICK_OK) st = be_dev_upload(dst, packed, (size_t)bytes);
  }
  free(w16);
  free(packed);
  return st;
}

/* Weights ~U(-1,1)/sqrt(K): a linear keeps its input's scale, so with the norms
 * the residual stream stays bounded over any number of steps. qkv's are twice
 * that (and the prompt's cache matches), so attention scores spread over a few
 * units and the softmax picks some positions over others, as in a real model. */
static int fill_weights(struct kpick_model *md, uint64_t seed) {
  const kpick_model_dims *d = &md->d;
  const int64_t H = d->hidden, I = d->intermediate, V = d->vocab, E = d->experts > 0 ? d->experts : 1;
  const float gamma_spread = 0.25f;
  for (int32_t l = 0; l < d->layers; l++) {
    KP_TRY(fill(md, kp_layer_at(md, l, md->L.gamma_attn), H, stream_of(seed, S_GAMMA_ATTN, l), 1.0f, gamma_spread));
    KP_TRY(fill(md, kp_layer_at(md, l, md->L.gamma_mlp), H, stream_of(seed, S_GAMMA_MLP, l), 1.0f, gamma_spread));
    KP_TRY(fill_linear(md, KPICK_LIN_QKV, kp_layer_at(md, l, md->L.wqkv), md->L.nqkv, H, stream_of(seed, S_WQKV, l), kp_qkv_gain / sqrtf((float)H)));
    KP_TRY(fill_linear(md, KPICK_LIN_O, kp_layer_at(md, l, md->L.wo), H, md->L.qdim, stream_of(seed, S_WO, l), 1.0f / sqrtf((float)md->L.qdim)));
    /* a moe layer's experts one after another: [E * 2I][H] and [E * H][I] */
    KP_TRY(fill_linear(md, KPICK_LIN_GATE_UP, kp_layer_at(md, l, md->L.wgu), E * 2 * I, H, stream_of(seed, S_WGU, l), 1.0f / sqrtf((float)H)));
    KP_TRY(fill_linear(md, KPICK_LIN_DOWN, kp_layer_at(md, l, md->L.wdown), E * H, I, stream_of(seed, S_WDOWN, l), 1.0f / sqrtf((float)I)));
    /* router logits spread over a few units, as a trained router's: the top-k stands apart */
    if (d->experts > 0)
      KP_TRY(fill_linear(md, KPICK_LIN_ROUTER, kp_layer_at(md, l, md->L.wrouter), E, H, stream_of(seed, S_WROUTER, l), 4.0f / sqrtf((float)H)));
  }
  /* a tied table serves as lm_head too, so it takes lm_head's scale */
  const float embed_scale = d->tied ? 1.0f / sqrtf((float)H) : 1.0f;
  KP_TRY(fill(md, kp_at(md, md->L.embed), V * H, stream_of(seed, S_EMBED, 0), 0.0f, embed_scale));
  if (!d->tied) KP_TRY(fill(md, kp_at(md, md->L.lm_head), V * H, stream_of(seed, S_LM_HEAD, 0), 0.0f, 1.0f / sqrtf((float)H)));
  KP_TRY(fill(md, kp_at(md, md->L.gamma_final), H, stream_of(seed, S_GAMMA_FINAL, 0), 1.0f, gamma_spread));
  return be_stream_sync(md->stream);
}

/* bytes at offset set to 0: the ops' counters start there */
static int zero(struct kpick_model *md, size_t offset, size_t bytes) {
  if (bytes == 0) return KPICK_OK;
  void *host = calloc(1, bytes);
  if (!host) return kp_fail(KPICK_E_NOMEM, "model", "host allocation failed");
  const int st = be_dev_upload(kp_at(md, offset), host, bytes);
  free(host);
  return st;
}

int kp_model_set_positions(struct kpick_model *md) {
  for (int32_t b = 0; b < md->d.max_batch; b++) md->pos_host[b] = md->d.context;
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_upload(kp_at(md, md->L.pos), md->pos_host, (size_t)md->d.max_batch * 4));
  md->steps = 0;
  return KPICK_OK;
}

static int reset(struct kpick_model *md, uint64_t seed) {
  const kpick_model_dims *d = &md->d;
  /* the whole KV region: positions past the context are written before they are read */
  KP_TRY(fill(md, kp_at(md, md->L.kv), (int64_t)(md->L.cache_bytes / 2) * 2 * d->layers, stream_of(seed, S_KV, 0), 0.0f, kp_qkv_gain));
  const uint64_t s = stream_of(seed, S_TOKENS, 0);
  for (int32_t b = 0; b < d->max_batch; b++) md->pos_host[b] = (int32_t)(kp_mix64(s ^ (uint64_t)b) % (uint64_t)d->vocab);
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_upload(kp_at(md, md->L.tokens), md->pos_host, (size_t)d->max_batch * 4));
  return kp_model_set_positions(md);
}

int kpick_model_create(const kpick_model_dims *d, uint64_t seed, kpick_model **out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(out != NULL, "out is null");
  *out = NULL;
  KP_TRY(check_dims(d));
  if (d->experts > 0 && !kp_space_takes(KPICK_OP_MOE, kp_kind_dtype(d->dtype, KPICK_LIN_EXPERTS)))
    return kp_fail(KPICK_E_UNSUPPORTED, __func__, "this build has no moe candidate in the model's dtype: a moe model cannot run here");
  if (d->dtype == KPICK_FP8 && !(kp_space_takes(KPICK_OP_LINEAR, KPICK_FP8) && kp_space_takes(KPICK_OP_GATED, KPICK_FP8)))
    return kp_fail(KPICK_E_UNSUPPORTED, __func__, "no candidate of this build computes fp8 linears: an fp8 model cannot run here");
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
