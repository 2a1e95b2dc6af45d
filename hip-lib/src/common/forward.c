/* forward.c: kpick_model_check, one step of the model (model.h) against an
 * fp64 forward of the same step on the host. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "error.h"
#include "fp8.h"
#include "model.h"
#include "numeric.h"
#include "space.h"

/* each buffer against the fp64 forward, relative to its largest value:
 * 4 units in the last place of the dtype, at most */
#define KP_STEP_TOL_BF16 0x1p-5
#define KP_STEP_TOL_FP16 0x1p-8
/* A step that runs a W8A8 linear quantizes each linear's input to e4m3 (3
 * mantissa bits), which the fp64 forward does not, and that error compounds
 * through the layers: measured on the CPU 0.05-0.07 (tiny, 2 layers), 0.11-0.18
 * (Qwen3-0.6B, 8 layers), 0.10-0.19 (Qwen3-1.7B, 3 layers), where the W8A16
 * route of the same steps stays at 0.005-0.019. Modelling the quant in the
 * reference does not close it (a code flips wherever the two inputs differ by
 * an ulp near a rounding boundary: 0.04-0.09 at 2 layers). A wiring mistake
 * (a wrong weight, scale, buffer or dtype) is of order 1 or more, so the W8A8
 * bound is a wiring check only; the parity bar (KPICK_PARITY_BAR_W8A8) judges
 * the class's arithmetic. */
#define KP_STEP_TOL_W8A8 0x1p-1

/* ---- the whole step against an fp64 forward on the host ----
 * The reference rounds to the dtype where the step stores the dtype (norm
 * outputs, qkv, rotated q and k, attention, every linear's output) and keeps
 * the residual in fp32 like the step, so only accumulation order and the
 * kernels' fp32 arithmetic separate the two. Compared: the k and v every layer
 * wrote to its cache, every buffer as the last layer left it (qkv unrotated, attention,
 * gate_up, down), the final norm, the residual and the logits; a wiring
 * mistake (a wrong buffer, size, cache slot, position or weight) shows there.
 * A moe layer: the reference takes each row's experts from the step's own
 * routing (an fp64 top-k could differ from it on a near tie, which is no
 * error) and checks that routing instead: no expert left out may have a
 * router logit above a chosen one's by more than the tolerance, and the
 * routing weights must be the softmax of the chosen logits.
 * An fp8 model's linears read their weights dequantized, scale[r] * e4m3, and
 * their inputs as bf16 (kpick.h, kpick_reference). */

static double rnd(int dt, double x) { return (double)kp_to_f32(dt, kp_from_f32(dt, (float)x)); }

static double dot_w(const uint16_t *w, const double *x, int64_t k, int dt) {
  double acc = 0;
  for (int64_t i = 0; i < k; i++) acc += (double)kp_to_f32(dt, w[i]) * x[i];
  return acc;
}

/* One linear's weight as the step holds it: rows x k in wt (16-bit, or fp8
 * packed); scales: an fp8 weight's, where its rows are part of a larger packed
 * buffer (one moe expert's), else NULL: the scales after w's own codes. */
typedef struct wref {
  const void *w;
  int64_t rows, k;
  int32_t wt;
  const float *scales;
} wref;

/* row j of W . x */
static double dot_ref(const wref *w, int64_t j, const double *x) {
  if (w->wt != KPICK_FP8) return dot_w((const uint16_t *)w->w + j * w->k, x, w->k, w->wt);
  const uint8_t *codes = (const uint8_t *)w->w + j * w->k;
  double acc = 0;
  for (int64_t i = 0; i < w->k; i++) acc += (double)kp_e4m3_to_f32(codes[i]) * x[i];
  return acc * (double)(w->scales ? w->scales : kp_fp8_scales(w->w, w->rows, w->k))[j];
}

/* ---- the host's cores for the reference's dot products ----
 * A whole-step check of an 8B model at 16 rows is ~15 G multiply-adds in
 * fp64: minutes on one core, which kept the GPU machine's checks to c = 1.
 * Each output is one dot product in a fixed order whatever thread runs it,
 * so the reference's values do not depend on the thread count. */
enum { KP_REF_MAX_THREADS = 64 };
static const int64_t kp_ref_serial_macs = 1 << 20; /* below this one thread is faster than starting more */

typedef struct ref_dots {
  const wref *w;
  const double *x;
  double *out;
  int dt; /* round to this dtype, or -1: keep fp64 */
  int64_t j0, j1;
} ref_dots;

static void *ref_dots_run(void *arg) {
  const ref_dots *t = (const ref_dots *)arg;
  for (int64_t j = t->j0; j < t->j1; j++) {
    const double v = dot_ref(t->w, j, t->x);
    t->out[j] = t->dt < 0 ? v : rnd(t->dt, v);
  }
  return NULL;
}

static int ref_threads(void) {
  static int n = 0;
  if (n == 0) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    n = cores < 1 ? 1 : cores > KP_REF_MAX_THREADS ? KP_REF_MAX_THREADS : (int)cores;
  }
  return n;
}

/* out[j] = W[j, k] . x for every row j, rounded to dt (or not: dt -1), over
 * the host's cores; a thread that cannot start runs its share here */
static void dots_ref(const wref *w, const double *x, int dt, double *out) {
  int n = ref_threads();
  if (w->rows * w->k < kp_ref_serial_macs || w->rows < n) n = 1;
  pthread_t tid[KP_REF_MAX_THREADS];
  ref_dots part[KP_REF_MAX_THREADS];
  int started[KP_REF_MAX_THREADS];
  for (int i = 0; i < n; i++) {
    part[i] = (ref_dots){w, x, out, dt, w->rows * i / n, w->rows * (i + 1) / n};
    started[i] = i > 0 && pthread_create(&tid[i], NULL, ref_dots_run, &part[i]) == 0;
  }
  for (int i = 0; i < n; i++)
    if (!started[i]) ref_dots_run(&part[i]);
  for (int i = 1; i < n; i++)
    if (started[i]) pthread_join(tid[i], NULL);
}

/* out[n] = round(W[n, k] . x) */
static void linear_ref(const wref *w, const double *x, int dt, double *out) { dots_ref(w, x, dt, out); }

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
  double *x, *pending, *h, *qkv, *rot, *attn, *act, *gu, *p, *logits;
  diff kv; /* the cache slots every layer wrote */
  /* moe: the layer's routing as the step made it, the router logits [m, E]
   * of the last layer, one expert's output row, and the routing's checks */
  int32_t *ids;
  float *gates;
  double *rl, *o;
  diff route, weights;
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
  KP_HOST(b, c->rot, (size_t)md->L.nqkv * 8);
  KP_HOST(b, c->attn, (size_t)m * md->L.qdim * 8);
  KP_HOST(b, c->act, (size_t)m * I * 8);
  KP_HOST(b, c->gu, (size_t)2 * I * 8);
  KP_HOST(b, c->p, (size_t)md->cap * 8);
  KP_HOST(b, c->logits, (size_t)m * V * 8);
  if (d->experts > 0) {
    KP_HOST(b, c->ids, (size_t)m * d->topk * 4);
    KP_HOST(b, c->gates, (size_t)m * d->topk * 4);
    KP_HOST(b, c->rl, (size_t)m * d->experts * 8);
    KP_HOST(b, c->o, (size_t)H * 8);
  }
  return KPICK_OK;
}

/* Expert e's W_gate_up [2I, H] and W_down [H, I] of a layer's experts at gu
 * ([E * 2I, H]) and dn ([E * H, I]), in wt (fp8: e's codes and its rows of
 * the buffers' scales, kpick.h). */
static void expert_refs(const char *gu, const char *dn, int64_t E, int64_t e, int64_t I, int64_t H, int32_t wt,
                        wref *wgu, wref *wdn) {
  const kp_weight_rows g = kp_weight_rows_at(wt, gu, E * 2 * I, H, e * 2 * I), d = kp_weight_rows_at(wt, dn, E * H, I, e * H);
  *wgu = (wref){g.w, 2 * I, H, wt, g.scales};
  *wdn = (wref){d.w, H, I, wt, d.scales};
}

/* A moe layer's MLP for row r from its normed input h into out: the router
 * logits, the step's routing checked against them, then each chosen expert's
 * output (h and its down output rounded to the dtype, as the step stores
 * them) weighted by the softmax of the chosen logits, in ascending expert id. */
static void moe_ref(const struct kpick_model *md, check_buf *c, int32_t r, const double *h, double *out) {
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int dt = kp_act_dtype(d->dtype), E = d->experts, k = d->topk;
  const int32_t wt = kp_kind_dtype(d->dtype, KPICK_LIN_EXPERTS);
  const int64_t H = d->hidden, I = d->intermediate;
  const char *lw = (const char *)c->layer;
  double *rl = c->rl + (int64_t)r * E;
  const wref wrouter = {lw + L->wrouter, E, H, kp_kind_dtype(d->dtype, KPICK_LIN_ROUTER), NULL};
  linear_ref(&wrouter, h, dt, rl);
  const int32_t *ids = c->ids + r * k;
  const float *gates = c->gates + r * k;
  /* the routing: every expert left out at or below the lowest chosen logit */
  double lowest = INFINITY, top = -INFINITY, left = -INFINITY, mag = 0;
  for (int j = 0; j < k; j++) {
    const int32_t e = ids[j] >= 0 && ids[j] < E ? ids[j] : 0;
    lowest = fmin(lowest, rl[e]);
    top = fmax(top, rl[e]);
  }
  for (int e = 0; e < E; e++) {
    int chosen = 0;
    for (int j = 0; j < k; j++) chosen |= ids[j] == e;
    if (!chosen) left = fmax(left, rl[e]);
    mag = fmax(mag, fabs(rl[e]));
  }
  diff_add(&c->route, fmax(left - lowest, 0.0), 0.0);
  c->route.mag = fmax(c->route.mag, mag);
  double w[KPICK_MAX_TOPK], sum = 0;
  for (int j = 0; j < k; j++) sum += w[j] = exp(rl[ids[j] >= 0 && ids[j] < E ? ids[j] : 0] - top);
  for (int j = 0; j < k; j++) diff_add(&c->weights, (double)gates[j], w[j] /= sum);
  for (int64_t i = 0; i < H; i++) out[i] = 0;
  for (int e = 0; e < E; e++) {
    for (int j = 0; j < k; j++) {
      if (ids[j] != e) continue;
      wref wgu, wdn;
      expert_refs(lw + L->wgu, lw + L->wdown, E, e, I, H, wt, &wgu, &wdn);
      dots_ref(&wgu, h, -1, c->gu);
      double *act = c->act + (int64_t)r * I; /* scratch here: the step keeps no act in a moe layer */
      for (int64_t q = 0; q < I; q++) act[q] = rnd(dt, c->gu[q] / (1.0 + exp(-c->gu[q])) * c->gu[I + q]);
      linear_ref(&wdn, act, dt, c->o);
      for (int64_t q = 0; q < H; q++) out[q] += w[j] * c->o[q];
    }
  }
  for (int64_t q = 0; q < H; q++) out[q] = rnd(dt, out[q]);
}

/* one layer of the reference for row r at position p; kc and vc hold the
 * caches as the step left them: slots before p as they were before it */
static void layer_ref(const struct kpick_model *md, check_buf *c, int32_t r, int32_t p, int first) {
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int dt = kp_act_dtype(d->dtype), D = d->head_dim, half = D / 2, group = d->heads / d->kv_heads;
  const int64_t H = d->hidden, I = d->intermediate, nqkv = L->nqkv;
  const char *lw = (const char *)c->layer;
  const int32_t wt = kp_kind_dtype(d->dtype, KPICK_LIN_QKV);
  const wref wqkv = {lw + L->wqkv, nqkv, H, wt, NULL}, wo = {lw + L->wo, H, L->qdim, wt, NULL};
  const wref wgu = {lw + L->wgu, 2 * I, H, wt, NULL}, wdown = {lw + L->wdown, H, I, wt, NULL};
  double *x = c->x + r * H, *pend = c->pending + r * H, *h = c->h + r * H, *qkv = c->qkv + r * nqkv;
  double *attn = c->attn + r * L->qdim, *act = c->act + r * I;
  add_norm_ref(x, first ? NULL : pend, (const uint16_t *)(lw + L->gamma_attn), H, d->rms_eps, dt, h);
  linear_ref(&wqkv, h, dt, qkv);
  /* attention rotates q and k for itself: qkv stays as the linear left it */
  double *rot = c->rot;
  memcpy(rot, qkv, (size_t)nqkv * sizeof *rot);
  for (int hd = 0; hd < d->heads + d->kv_heads; hd++) {
    double *v = rot + (int64_t)hd * D;
    for (int i = 0; i < half; i++) {
      const double ang = p * pow((double)d->rope_theta, -2.0 * i / D), cs = cos(ang), sn = sin(ang);
      const double x0 = v[i], x1 = v[i + half];
      v[i] = rnd(dt, x0 * cs - x1 * sn);
      v[i + half] = rnd(dt, x1 * cs + x0 * sn);
    }
  }
  for (int g = 0; g < d->kv_heads; g++) {
    const int64_t slot = (((int64_t)r * d->kv_heads + g) * md->cap + p) * D;
    diff_dtype(&c->kv, c->kc + slot, rot + (int64_t)(d->heads + g) * D, D, dt);
    diff_dtype(&c->kv, c->vc + slot, rot + (int64_t)(d->heads + d->kv_heads + g) * D, D, dt);
  }
  const double scale = 1.0 / sqrt((double)D);
  for (int hd = 0; hd < d->heads; hd++) {
    const int g = hd / group;
    const double *q = rot + (int64_t)hd * D;
    const double *kn = rot + (int64_t)(d->heads + g) * D, *vn = rot + (int64_t)(d->heads + d->kv_heads + g) * D;
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
  linear_ref(&wo, attn, dt, pend);
  add_norm_ref(x, pend, (const uint16_t *)(lw + L->gamma_mlp), H, d->rms_eps, dt, h);
  if (d->experts > 0) {
    moe_ref(md, c, r, h, pend);
    return;
  }
  dots_ref(&wgu, h, -1, c->gu);
  for (int64_t j = 0; j < I; j++) act[j] = rnd(dt, c->gu[j] / (1.0 + exp(-c->gu[j])) * c->gu[I + j]);
  linear_ref(&wdown, act, dt, pend);
}

/* the step's buffer at offset (n dtype elements) against the reference */
static int diff_buffer(struct kpick_model *md, bag *b, size_t offset, const double *want, int64_t n, diff *f) {
  uint16_t *got;
  KP_HOST(b, got, (size_t)n * 2);
  KP_TRY(be_dev_download(got, kp_at(md, offset), (size_t)n * 2));
  diff_dtype(f, got, want, n, kp_act_dtype(md->d.dtype));
  return KPICK_OK;
}

static int step_check(struct kpick_model *md, step_args *a, bag *b, double *err) {
  const kpick_model_dims *d = &md->d;
  const layout *L = &md->L;
  const int32_t m = a->m, dt = kp_act_dtype(d->dtype);
  const int64_t H = d->hidden, V = d->vocab;
  check_buf c;
  memset(&c, 0, sizeof c);
  KP_TRY(check_alloc(b, md, m, &c));
  int32_t tokens[KPICK_MAX_ROWS], pos[KPICK_MAX_ROWS];
  KP_TRY(be_stream_sync(md->stream));
  KP_TRY(be_dev_download(tokens, kp_at(md, L->tokens), (size_t)m * 4));
  KP_TRY(be_dev_download(pos, kp_at(md, L->pos), (size_t)m * 4));
  md->steps++;
  KP_TRY(kp_step_run(a));

  KP_TRY(be_dev_download(c.table, kp_at(md, L->embed), (size_t)V * H * 2));
  for (int32_t r = 0; r < m; r++) {
    const int64_t t = tokens[r] >= 0 && tokens[r] < V ? tokens[r] : 0;
    for (int64_t j = 0; j < H; j++) c.x[r * H + j] = (double)kp_to_f32(dt, c.table[t * H + j]);
  }
  for (int32_t l = 0; l < d->layers; l++) {
    KP_TRY(be_dev_download(c.layer, kp_layer_at(md, l, 0), L->layer_bytes));
    KP_TRY(be_dev_download(c.kc, kp_cache_at(md, l, 0), L->cache_bytes));
    KP_TRY(be_dev_download(c.vc, kp_cache_at(md, l, 1), L->cache_bytes));
    if (d->experts > 0) { /* this layer's routing, as the step made it */
      const size_t at = (size_t)l * d->max_batch * d->topk * 4, bytes = (size_t)m * d->topk * 4;
      KP_TRY(be_dev_download(c.ids, (char *)kp_at(md, L->ids) + at, bytes));
      KP_TRY(be_dev_download(c.gates, (char *)kp_at(md, L->gates) + at, bytes));
    }
    for (int32_t r = 0; r < m; r++) layer_ref(md, &c, r, pos[r], l == 0);
  }
  KP_TRY(be_dev_download(c.gamma_final, kp_at(md, L->gamma_final), (size_t)H * 2));
  const uint16_t *lm = c.table;
  if (!d->tied) {
    KP_TRY(be_dev_download(c.lm, kp_at(md, L->lm_head), (size_t)V * H * 2));
    lm = c.lm;
  }
  const wref wlm = {lm, V, H, dt, NULL};
  for (int32_t r = 0; r < m; r++) {
    add_norm_ref(c.x + r * H, c.pending + r * H, c.gamma_final, H, d->rms_eps, dt, c.h + r * H);
    dots_ref(&wlm, c.h + r * H, -1, c.logits + r * V);
  }

  /* each buffer relative to its own largest value; a moe layer keeps its
   * router logits where a dense one keeps its gate_up output */
  diff f[7];
  memset(f, 0, sizeof f);
  KP_TRY(diff_buffer(md, b, L->qkv, c.qkv, (int64_t)m * L->nqkv, &f[0]));
  KP_TRY(diff_buffer(md, b, L->attn, c.attn, (int64_t)m * L->qdim, &f[1]));
  if (d->experts > 0) KP_TRY(diff_buffer(md, b, L->rlogits, c.rl, (int64_t)m * d->experts, &f[2]));
  else KP_TRY(diff_buffer(md, b, L->act, c.act, (int64_t)m * d->intermediate, &f[2]));
  KP_TRY(diff_buffer(md, b, L->ybuf, c.pending, (int64_t)m * H, &f[3]));
  KP_TRY(diff_buffer(md, b, L->hbuf, c.h, (int64_t)m * H, &f[4]));
  KP_TRY(diff_buffer(md, b, L->logits, c.logits, (int64_t)m * V, &f[5]));
  float *resid;
  KP_HOST(b, resid, (size_t)m * H * 4);
  KP_TRY(be_dev_download(resid, kp_at(md, L->resid), (size_t)m * H * 4));
  for (int64_t i = 0; i < (int64_t)m * H; i++) diff_add(&f[6], (double)resid[i], c.x[i]);
  *err = diff_rel(&c.kv);
  for (int i = 0; i < 7; i++) *err = kp_worst(*err, diff_rel(&f[i]));
  if (d->experts > 0) *err = kp_worst(*err, kp_worst(diff_rel(&c.route), diff_rel(&c.weights)));
  return KPICK_OK;
}

int kpick_model_check(kpick_model *md, const int32_t *cands, int32_t batch, double *rel_err_out, double *tol_out) {
  kp_clear_error();
  KP_MODEL(md);
  KP_REQUIRE(rel_err_out != NULL && tol_out != NULL, "rel_err_out and tol_out must not be null");
  step_args a;
  KP_TRY(kp_step_args(md, cands, batch, &a));
  KP_REQUIRE(md->steps < md->d.max_new, "the KV cache holds %d new positions and all are used: reset the model",
             (int)md->d.max_new);
  *tol_out = kp_act_dtype(md->d.dtype) == KPICK_BF16 ? KP_STEP_TOL_BF16 : KP_STEP_TOL_FP16;
  for (int i = 0; i < KPICK_LIN_COUNT; i++)
    if (kp_kind_runs(&md->d, i) && kp_row_numeric(&kp_space[a.cands[i]]) == KPICK_NUM_W8A8) *tol_out = KP_STEP_TOL_W8A8;
  *rel_err_out = INFINITY;
  bag b;
  memset(&b, 0, sizeof b);
  const int st = step_check(md, &a, &b, rel_err_out);
  bag_free(&b);
  return st;
}
