/* decode.c: the CPU backend's decode-step hooks (common/backend.h): host
 * memory for "device" memory, no streams, no graphs, and the non-linear ops
 * as plain loops with fp32 arithmetic, rounding once to the dtype.
 *   fill         kp_uniform values, as every backend makes them
 *   add_rmsnorm  residual += y, then rmsnorm * gamma
 *   attention    rotate-half rotary embedding of q and the new k, k and v
 *                into the cache, then one query per head, grouped-query,
 *                two-pass softmax
 *   argmax       lowest index of the largest value; then the position moves on
 *   embed        residual = the token's row of the table
 *   moe_route    each row's top-k experts of its router logits, softmax over them
 *   graphs       the step's enqueue and arguments, called again per launch */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/backend.h"
#include "../common/error.h"
#include "../common/numeric.h"
#include "../common/random.h"

int be_dev_alloc(void **out, size_t bytes) {
  const size_t align = 256, rounded = (bytes + align - 1) / align * align;
  *out = aligned_alloc(align, rounded ? rounded : align);
  if (!*out) return kp_fail(KPICK_E_NOMEM, "alloc", "host allocation of %.1f MiB failed", bytes / 1048576.0);
  return KPICK_OK;
}

void be_dev_free(void *ptr) { free(ptr); }

int be_dev_upload(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return KPICK_OK;
}

int be_dev_download(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return KPICK_OK;
}

int be_stream_create(void **out) {
  *out = NULL;
  return KPICK_OK;
}
void be_stream_destroy(void *stream) {}
int be_stream_sync(void *stream) { return KPICK_OK; }

int be_fill_uniform(void *dst, int64_t count, int32_t dtype, uint64_t seed, float offset, float scale, void *stream) {
  uint16_t *d = dst;
  for (int64_t i = 0; i < count; i++) d[i] = kp_from_f32(dtype, fmaf(scale, kp_uniform(seed, (uint64_t)i), offset));
  return KPICK_OK;
}

int be_add_rmsnorm(int32_t dtype, float *residual, const void *y, const void *gamma, void *out, int32_t m,
                   int64_t hidden, float eps, void *stream) {
  const uint16_t *yv = y, *g = gamma;
  uint16_t *o = out;
  for (int32_t r = 0; r < m; r++) {
    float *x = residual + r * hidden;
    float ss = 0.0f;
    for (int64_t j = 0; j < hidden; j++) {
      if (yv) x[j] += kp_to_f32(dtype, yv[r * hidden + j]);
      ss += x[j] * x[j];
    }
    const float inv = 1.0f / sqrtf(ss / (float)hidden + eps);
    for (int64_t j = 0; j < hidden; j++) o[r * hidden + j] = kp_from_f32(dtype, x[j] * inv * kp_to_f32(dtype, g[j]));
  }
  return KPICK_OK;
}

/* one head vector of qkv rotated (rotate-half) into dst, rounded to the dtype */
static void rope_head(int32_t dtype, const uint16_t *src, uint16_t *dst, int32_t pos, int32_t head_dim, float theta) {
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; i++) {
    const float ang = (float)pos * powf(theta, -2.0f * (float)i / (float)head_dim);
    const float c = cosf(ang), s = sinf(ang);
    const float x0 = kp_to_f32(dtype, src[i]), x1 = kp_to_f32(dtype, src[i + half]);
    dst[i] = kp_from_f32(dtype, x0 * c - x1 * s);
    dst[i + half] = kp_from_f32(dtype, x1 * c + x0 * s);
  }
}

int be_attention(int32_t dtype, const void *qkv, const int32_t *pos, void *kcache, void *vcache, void *out, int32_t m,
                 int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap, float theta, void *scratch,
                 void *stream) {
  const int64_t nqkv = (int64_t)(heads + 2 * kv_heads) * head_dim;
  const float scale = 1.0f / sqrtf((float)head_dim);
  float *p = malloc(sizeof(float) * (size_t)cap), *acc = malloc(sizeof(float) * (size_t)head_dim);
  uint16_t *q = malloc(2 * (size_t)head_dim);
  if (!p || !acc || !q) {
    free(p);
    free(acc);
    free(q);
    return kp_fail(KPICK_E_NOMEM, "attention", "host allocation failed");
  }
  uint16_t *kc = kcache, *vc = vcache;
  for (int32_t r = 0; r < m; r++) {
    const uint16_t *row = (const uint16_t *)qkv + r * nqkv;
    /* the new position's rotated k and its v into the caches first */
    for (int32_t g = 0; g < kv_heads && pos[r] < cap; g++) {
      const int64_t slot = (((int64_t)r * kv_heads + g) * cap + pos[r]) * head_dim;
      rope_head(dtype, row + (int64_t)(heads + g) * head_dim, kc + slot, pos[r], head_dim, theta);
      memcpy(vc + slot, row + (int64_t)(heads + kv_heads + g) * head_dim, (size_t)head_dim * 2);
    }
    const int32_t len = pos[r] + 1 < cap ? pos[r] + 1 : cap;
    for (int32_t h = 0; h < heads; h++) {
      const int32_t g = h / (heads / kv_heads);
      rope_head(dtype, row + (int64_t)h * head_dim, q, pos[r], head_dim, theta);
      const int64_t base = ((int64_t)r * kv_heads + g) * cap * head_dim;
      const uint16_t *k = kc + base, *v = vc + base;
      float mx = -INFINITY, sum = 0.0f;
      for (int32_t t = 0; t < len; t++) {
        float s = 0.0f;
        for (int32_t e = 0; e < head_dim; e++) s += kp_to_f32(dtype, q[e]) * scale * kp_to_f32(dtype, k[(int64_t)t * head_dim + e]);
        p[t] = s;
        mx = s > mx ? s : mx;
      }
      for (int32_t t = 0; t < len; t++) sum += p[t] = expf(p[t] - mx);
      for (int32_t e = 0; e < head_dim; e++) acc[e] = 0.0f;
      for (int32_t t = 0; t < len; t++)
        for (int32_t e = 0; e < head_dim; e++) acc[e] += p[t] * kp_to_f32(dtype, v[(int64_t)t * head_dim + e]);
      uint16_t *o = (uint16_t *)out + ((int64_t)r * heads + h) * head_dim;
      for (int32_t e = 0; e < head_dim; e++) o[e] = kp_from_f32(dtype, acc[e] / sum);
    }
  }
  free(p);
  free(acc);
  free(q);
  return KPICK_OK;
}

/* one pass per row: no scratch */
int64_t be_attention_scratch(int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap) { return 0; }

int be_argmax_advance(int32_t dtype, const void *logits, int32_t m, int64_t vocab, int32_t *tokens, int32_t *pos,
                      void *scratch, void *stream) {
  for (int32_t r = 0; r < m; r++) {
    const uint16_t *row = (const uint16_t *)logits + r * vocab;
    int64_t best = -1;
    float bv = 0.0f;
    for (int64_t j = 0; j < vocab; j++) {
      const float x = kp_to_f32(dtype, row[j]);
      if (x != x) continue; /* NaN never wins */
      if (best < 0 || x > bv) best = j, bv = x;
    }
    tokens[r] = best < 0 ? 0 : (int32_t)best;
    pos[r] += 1;
  }
  return KPICK_OK;
}

int64_t be_argmax_scratch(int32_t m, int64_t vocab) { return 0; }

int be_moe_route(int32_t dtype, const void *logits, int32_t m, int32_t experts, int32_t topk, int32_t *ids,
                 float *weights, void *stream) {
  for (int32_t r = 0; r < m; r++) {
    const uint16_t *row = (const uint16_t *)logits + (int64_t)r * experts;
    int32_t *id = ids + r * topk;
    float *w = weights + r * topk;
    for (int32_t j = 0; j < topk; j++) { /* the j-th largest not taken yet, lower id first on ties */
      int32_t best = -1;
      float bv = 0.0f;
      for (int32_t e = 0; e < experts; e++) {
        const float x = kp_to_f32(dtype, row[e]);
        int taken = x != x; /* NaN never picked */
        for (int32_t i = 0; i < j && !taken; i++) taken = id[i] == e;
        if (!taken && (best < 0 || x > bv)) best = e, bv = x;
      }
      id[j] = best < 0 ? j : best; /* an all-NaN row: the first experts, still distinct */
      w[j] = bv;
    }
    /* softmax over the chosen: the renormalised top-k of a softmax over all */
    const float top = w[0];
    float sum = 0.0f;
    for (int32_t j = 0; j < topk; j++) sum += w[j] = expf(w[j] - top);
    for (int32_t j = 0; j < topk; j++) w[j] /= sum;
  }
  return KPICK_OK;
}

int be_embed(int32_t dtype, const void *table, const int32_t *tokens, float *residual, int32_t m, int64_t hidden,
             int64_t vocab, void *stream) {
  for (int32_t r = 0; r < m; r++) {
    const int64_t t = tokens[r] >= 0 && tokens[r] < vocab ? tokens[r] : 0;
    const uint16_t *row = (const uint16_t *)table + t * hidden;
    for (int64_t j = 0; j < hidden; j++) residual[r * hidden + j] = kp_to_f32(dtype, row[j]);
  }
  return KPICK_OK;
}

/* A "graph" on the CPU: the step's enqueue and its arguments, called again at
 * every launch, so the model's graph cache works (and is tested) here as on
 * a GPU. */
typedef struct cpu_graph {
  int (*enqueue)(void *ctx);
  void *ctx;
} cpu_graph;

int be_graph_capture(void *stream, int (*enqueue)(void *ctx), const void *ctx, size_t ctx_bytes, void **graph_out) {
  *graph_out = NULL;
  cpu_graph *g = malloc(sizeof *g);
  void *copy = malloc(ctx_bytes ? ctx_bytes : 1);
  if (!g || !copy) {
    free(g);
    free(copy);
    return kp_fail(KPICK_E_NOMEM, "graph", "host allocation failed");
  }
  memcpy(copy, ctx, ctx_bytes);
  g->enqueue = enqueue;
  g->ctx = copy;
  *graph_out = g;
  return KPICK_OK;
}

int be_graph_launch(void *graph, void *stream) {
  const cpu_graph *g = graph;
  return g->enqueue(g->ctx);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int be_graph_time(void *graph, void *stream, int32_t n, double *us) {
  for (int32_t i = 0; i < n; i++) {
    const double t0 = now_us();
    KP_TRY(be_graph_launch(graph, stream));
    us[i] = now_us() - t0;
  }
  return KPICK_OK;
}

void be_graph_free(void *graph) {
  cpu_graph *g = graph;
  if (!g) return;
  free(g->ctx);
  free(g);
}
