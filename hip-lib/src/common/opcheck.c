/* opcheck.c: kpick_decode_selfcheck, each non-linear op of this backend on
 * random data with tails against an fp64 reference computed here. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "error.h"
#include "numeric.h"
#include "random.h"

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
/* the attention checks' shapes (rows, query heads, kv heads): a few rows (on
 * the GPU a query head a block, a row's positions split over blocks), then
 * serving rows, (rows x kv heads) past the multiprocessors of a large GPU,
 * where a block takes a whole group of 2, 4 or 8 heads (the GPU's tensor-core
 * kernel) */
typedef struct {
  int m, heads, kv, cap; /* cap: positions the cache holds a (row, kv head) */
} attn_shape;
static const attn_shape sc_attn_shapes[] = {{SC_M, SC_HEADS, SC_KV, SC_CAP}, {80, 4, 2, 160}, {40, 16, 4, 160}, {20, 64, 8, 160}};
/* row m's position: 0, 77 and the cache's last slot first (sc_pos in the
 * 300-slot cache), then spread over the cache (the large shapes' 160 slots:
 * up to 10 tiles of 16 positions) */
static int32_t attn_pos(const attn_shape *a, int m) {
  return m == 0 ? 0 : m == 1 ? 77 % a->cap : m == 2 ? a->cap - 1 : (int32_t)((m * 37 + 13) % a->cap);
}

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
    *err = kp_worst(*err, kp_worst(rel_dtype(out, ref, n, dt), rel_f32(resid, r, n)));
  }
  return KPICK_OK;
}

/* random values in the cache slots the rows read, 0 .. each row's position;
 * the rest stay zero (bag_host's), never read: the large shapes' caches are
 * mostly unread, and filling them would cost the check most of its time */
static void random_cache(uint16_t *c, const attn_shape *a, int D, int dt, uint64_t seed) {
  for (int m = 0; m < a->m; m++)
    for (int g = 0; g < a->kv; g++)
      random_dtype(c + ((int64_t)m * a->kv + g) * a->cap * D, (int64_t)(attn_pos(a, m) + 1) * D, dt,
                   kp_mix64(seed + (uint64_t)(m * a->kv + g)), 0.0f, 1.0f);
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

/* fp64 reference rows of one check: qkv with its q and k heads rotated, and
 * with round, rounded to the dtype as the attention op stores them */
static void rotated_ref(const uint16_t *qkv, int dt, int D, int round, const attn_shape *a, double *out) {
  const int64_t nqkv = (int64_t)(a->heads + 2 * a->kv) * D;
  for (int64_t i = 0; i < a->m * nqkv; i++) out[i] = val(dt, qkv[i]);
  for (int m = 0; m < a->m; m++)
    for (int h = 0; h < a->heads + a->kv; h++) {
      double *v = out + m * nqkv + h * D;
      rope_ref(v, attn_pos(a, m), D, sc_theta);
      for (int e = 0; e < D && round; e++) v[e] = val(dt, kp_from_f32(dt, (float)v[e]));
    }
}

/* scratch for the attention op's split path, zeroed; NULL where it has none */
static int attention_scratch(bag *b, int D, const attn_shape *a, void **out) {
  *out = NULL;
  const int64_t bytes = be_attention_scratch(a->m, a->heads, a->kv, D, a->cap);
  if (bytes <= 0) return KPICK_OK;
  uint16_t *zeros;
  KP_HOST(b, zeros, (size_t)bytes);
  return bag_upload(b, zeros, (size_t)bytes, out);
}

/* The attention op's rotary embedding and KV append: the caches after it
 * (every slot; the row's position holds the rotated k and the v) and qkv,
 * which it must leave as it was; once in one block per row, then split. */
static int check_rope_append_d(bag *b, int dt, uint64_t seed, int corrupt, int D, const attn_shape *a, double *err) {
  const int64_t nqkv = (int64_t)(a->heads + 2 * a->kv) * D, n = a->m * nqkv;
  const int64_t ncache = (int64_t)a->m * a->kv * a->cap * D, nout = (int64_t)a->m * a->heads * D;
  uint16_t *qkv, *qkv_got, *kc, *vc, *kg, *vg, *out;
  double *rot, *qkv_ref, *kc_ref, *vc_ref;
  int32_t *pos;
  KP_HOST(b, pos, a->m * sizeof *pos);
  KP_HOST(b, qkv, n * 2);
  KP_HOST(b, qkv_got, n * 2);
  KP_HOST(b, kc, ncache * 2);
  KP_HOST(b, vc, ncache * 2);
  KP_HOST(b, kg, ncache * 2);
  KP_HOST(b, vg, ncache * 2);
  KP_HOST(b, out, nout * 2);
  KP_HOST(b, rot, n * 8);
  KP_HOST(b, qkv_ref, n * 8);
  KP_HOST(b, kc_ref, ncache * 8);
  KP_HOST(b, vc_ref, ncache * 8);
  random_dtype(qkv, n, dt, seed + 1, 0.0f, 1.0f);
  random_cache(kc, a, D, dt, seed + 2);
  random_cache(vc, a, D, dt, seed + 3);
  for (int m = 0; m < a->m; m++) pos[m] = attn_pos(a, m);
  rotated_ref(qkv, dt, D, 0, a, rot);
  for (int64_t i = 0; i < n; i++) qkv_ref[i] = val(dt, qkv[i]);
  for (int64_t i = 0; i < ncache; i++) kc_ref[i] = val(dt, kc[i]), vc_ref[i] = val(dt, vc[i]);
  for (int m = 0; m < a->m; m++)
    for (int g = 0; g < a->kv; g++) {
      const int64_t slot = (((int64_t)m * a->kv + g) * a->cap + pos[m]) * D;
      for (int e = 0; e < D; e++) {
        kc_ref[slot + e] = rot[m * nqkv + (a->heads + g) * D + e];
        vc_ref[slot + e] = qkv_ref[m * nqkv + (a->heads + a->kv + g) * D + e];
      }
    }
  if (corrupt) pos[0] += 1;
  void *d_qkv, *d_kc, *d_vc, *d_pos, *d_out, *d_scratch;
  KP_TRY(bag_upload(b, qkv, n * 2, &d_qkv));
  KP_TRY(bag_upload(b, kc, ncache * 2, &d_kc));
  KP_TRY(bag_upload(b, vc, ncache * 2, &d_vc));
  KP_TRY(bag_upload(b, pos, a->m * sizeof *pos, &d_pos));
  KP_TRY(bag_upload(b, out, nout * 2, &d_out));
  KP_TRY(attention_scratch(b, D, a, &d_scratch));
  *err = 0;
  for (int run = 0; run < (d_scratch ? 2 : 1); run++) {
    KP_TRY(be_dev_upload(d_kc, kc, ncache * 2)); /* fresh caches: each run must write its slots */
    KP_TRY(be_dev_upload(d_vc, vc, ncache * 2));
    KP_TRY(be_attention(dt, d_qkv, d_pos, d_kc, d_vc, d_out, a->m, a->heads, a->kv, D, a->cap, sc_theta,
                        run ? d_scratch : NULL, b->stream));
    KP_TRY(be_stream_sync(b->stream));
    KP_TRY(be_dev_download(qkv_got, d_qkv, n * 2));
    KP_TRY(be_dev_download(kg, d_kc, ncache * 2));
    KP_TRY(be_dev_download(vg, d_vc, ncache * 2));
    *err = kp_worst(*err, kp_worst(rel_dtype(qkv_got, qkv_ref, n, dt),
                                   kp_worst(rel_dtype(kg, kc_ref, ncache, dt), rel_dtype(vg, vc_ref, ncache, dt))));
  }
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
    *err = kp_worst(*err, e);
  }
  return KPICK_OK;
}

/* The worst error of one attention check over the shapes and head dims. */
typedef int (*attn_check)(bag *b, int dt, uint64_t seed, int corrupt, int D, const attn_shape *a, double *err);
static int worst_over_attn(attn_check check, size_t shapes, bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  const size_t nd = sizeof sc_head_dims / sizeof sc_head_dims[0];
  *err = 0;
  for (size_t i = 0; i < shapes; i++)
    for (size_t j = 0; j < nd; j++) {
      /* each check's buffers in a bag of their own (all of them would overfill one), on b's stream */
      bag one;
      memset(&one, 0, sizeof one);
      one.stream = b->stream;
      double e = INFINITY;
      const int st = check(&one, dt, seed + 16 * (i * nd + j), corrupt, sc_head_dims[j], &sc_attn_shapes[i], &e);
      one.stream = NULL;
      bag_free(&one);
      KP_TRY(st);
      *err = kp_worst(*err, e);
    }
  return KPICK_OK;
}

static int check_add_rmsnorm(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over(check_add_rmsnorm_h, sc_hiddens, sizeof sc_hiddens / sizeof sc_hiddens[0], b, dt, seed, corrupt, err);
}

static int check_rope_append(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  /* the few rows and the first large shape: the append is one path a kernel, its checks
   * of the whole caches the slowest on the CPU */
  return worst_over_attn(check_rope_append_d, 2, b, dt, seed, corrupt, err);
}

/* The attention op's output: q and the new k rotated, the new position's k
 * and v from qkv, the earlier ones from the cache. */
static int check_attention_d(bag *b, int dt, uint64_t seed, int corrupt, int D, const attn_shape *a, double *err) {
  const int64_t nqkv = (int64_t)(a->heads + 2 * a->kv) * D, n = a->m * nqkv;
  const int64_t ncache = (int64_t)a->m * a->kv * a->cap * D, nout = (int64_t)a->m * a->heads * D;
  uint16_t *qkv, *kc, *vc, *vc_dev_src, *out;
  double *rot, *ref, *p;
  KP_HOST(b, qkv, n * 2);
  KP_HOST(b, kc, ncache * 2);
  KP_HOST(b, vc, ncache * 2);
  KP_HOST(b, vc_dev_src, ncache * 2);
  KP_HOST(b, out, nout * 2);
  KP_HOST(b, rot, n * 8);
  KP_HOST(b, ref, nout * 8);
  KP_HOST(b, p, a->cap * 8);
  /* q scaled up so the softmax is far from flat */
  random_dtype(qkv, n, dt, seed + 1, 0.0f, 3.0f);
  random_cache(kc, a, D, dt, seed + 2);
  random_cache(vc, a, D, dt, seed + 3);
  memcpy(vc_dev_src, vc, ncache * 2);
  if (corrupt) /* values of row 2, kv head 0, shifted: its heads' outputs move by 2 */
    for (int64_t i = 0; i < (int64_t)a->cap * D; i++) {
      const int64_t at_i = ((int64_t)2 * a->kv + 0) * a->cap * D + i;
      vc_dev_src[at_i] = kp_from_f32(dt, val(dt, vc[at_i]) + 2.0f);
    }
  rotated_ref(qkv, dt, D, 1, a, rot);
  const double scale = 1.0 / sqrt((double)D);
  for (int m = 0; m < a->m; m++) {
    const int32_t pm = attn_pos(a, m);
    for (int h = 0; h < a->heads; h++) {
      const int g = h / (a->heads / a->kv);
      const double *q = rot + m * nqkv + h * D, *kn = rot + m * nqkv + (a->heads + g) * D;
      const uint16_t *vn = qkv + m * nqkv + (a->heads + a->kv + g) * D;
      const int64_t base = ((int64_t)m * a->kv + g) * a->cap * D;
      double mx = -INFINITY, sum = 0;
      for (int t = 0; t <= pm; t++) {
        double s = 0;
        for (int e = 0; e < D; e++) s += q[e] * (t < pm ? val(dt, kc[base + (int64_t)t * D + e]) : kn[e]);
        p[t] = s * scale;
        mx = p[t] > mx ? p[t] : mx;
      }
      for (int t = 0; t <= pm; t++) sum += p[t] = exp(p[t] - mx);
      for (int e = 0; e < D; e++) {
        double o = 0;
        for (int t = 0; t <= pm; t++)
          o += p[t] * val(dt, t < pm ? vc[base + (int64_t)t * D + e] : vn[e]);
        ref[((int64_t)m * a->heads + h) * D + e] = o / sum;
      }
    }
  }
  void *d_qkv, *d_kc, *d_vc, *d_pos, *d_out, *d_scratch;
  KP_TRY(bag_upload(b, qkv, n * 2, &d_qkv));
  KP_TRY(bag_upload(b, kc, ncache * 2, &d_kc));
  KP_TRY(bag_upload(b, vc_dev_src, ncache * 2, &d_vc));
  int32_t *pos;
  KP_HOST(b, pos, a->m * sizeof *pos);
  for (int m = 0; m < a->m; m++) pos[m] = attn_pos(a, m);
  KP_TRY(bag_upload(b, pos, a->m * sizeof *pos, &d_pos));
  KP_TRY(bag_upload(b, out, nout * 2, &d_out));
  /* a row in one block (no scratch), then split over blocks twice: the second
   * split run needs the counters the first put back to 0 */
  KP_TRY(attention_scratch(b, D, a, &d_scratch));
  *err = 0;
  for (int run = 0; run < (d_scratch ? 3 : 1); run++) {
    for (int64_t i = 0; i < nout; i++) out[i] = 0xffffu; /* NaN in both dtypes: an unwritten output fails */
    KP_TRY(be_dev_upload(d_out, out, nout * 2));
    KP_TRY(be_attention(dt, d_qkv, d_pos, d_kc, d_vc, d_out, a->m, a->heads, a->kv, D, a->cap, sc_theta,
                        run ? d_scratch : NULL, b->stream));
    KP_TRY(be_stream_sync(b->stream));
    KP_TRY(be_dev_download(out, d_out, nout * 2));
    *err = kp_worst(*err, rel_dtype(out, ref, nout, dt));
  }
  return KPICK_OK;
}

static int check_attention(bag *b, int dt, uint64_t seed, int corrupt, double *err) {
  return worst_over_attn(check_attention_d, sizeof sc_attn_shapes / sizeof sc_attn_shapes[0], b, dt, seed, corrupt, err);
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
