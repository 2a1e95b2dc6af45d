/* hooks.cpp: the GPU backend's be_* hooks (common/backend.h), for HIP and,
 * through compat.h, CUDA.
 *
 * Ownership:
 *   - device 0, one non-blocking stream and two timing events: backend-global,
 *     made by be_init, kept for the process's life;
 *   - a problem's x (and its source copy), y, weight copies, float sink and
 *     cached graphs: owned by p->be, released by be_problem_free (which copes
 *     with a half-built state);
 *   - the scratch (BLAS workspace, gated.blaslt's product, splitk's partials and
 *     arrival counters): backend-global, grown on demand and never shrunk.
 *     A grown-out buffer is retired, not freed, so a graph captured earlier
 *     (by the tuner or by an engine) never points at freed memory; doubling
 *     bounds the retired total by the live size. One stream at a time may use
 *     the scratch: two streams running splitk or gated.blaslt concurrently
 *     would share it. Growth is refused during stream capture; be_problem_init
 *     grows it up front for everything that problem can run. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/backend.h"
#include "../common/error.h"
extern "C" {
#include "../common/moe.h" /* C: moe.h has no extern "C" of its own */
}
#include "../common/space.h"
#include "arch.h"
#include "blaslt.h"
#include "check.h"
#include "dtype.h"
#include "launch.h"

#ifndef KPICK_GPU_ARCHS
#error "the build names the target archs in KPICK_GPU_ARCHS"
#endif

#define KP_ROWS_SLOTS (KPICK_MAX_ROWS + 1) /* graph cache index: rows 1..KPICK_MAX_ROWS */
static const size_t kp_splitk_cap = 256u << 20; /* largest splitk partial scratch */
static const int64_t kp_batch_bytes = 2LL << 30; /* a timing batch streams at least this much... */
static const int kp_batch_calls = 20;            /* ...or has this many calls, whichever is fewer */

static struct {
  int ready;
  hipDeviceProp_t prop;
  char arch[32];
  int has_mma, has_pdl, has_wgmma;
  hipStream_t stream;
  hipEvent_t e0, e1;
} g;

static struct {
  pthread_mutex_t lock;
  void *blas;
  void *temp;
  size_t temp_bytes;
  uint32_t *counters;
  size_t counters_len;
  void *retired[128];
  int nretired;
} scratch = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, NULL, 0, {NULL}, 0};

struct gpu_problem {
  void *x, *y;
  void *x_src;          /* what the producer writes into x (the same values) */
  float *resid;         /* the producer's residual rows, fp32 [m_max, k], as the norm's */
  void **w;             /* p->copies weight copies */
  float *sink;          /* the read floor's never-written output */
  hipGraphExec_t *graphs; /* [KP_NCAND][KP_ROWS_SLOTS] timing batches: (producer, candidate) pairs */
  hipGraphExec_t floor[KP_ROWS_SLOTS];    /* (producer, read floor) pairs */
  hipGraphExec_t producer[KP_ROWS_SLOTS]; /* the producer alone */
  int calls;            /* calls per timing batch */
  /* moe only: the routing on the device, and per rows slot the experts the
   * active rows read (the read floor's list; kept while its graph lives) */
  int32_t *ids;
  float *gates;
  int32_t *floor_used;  /* [KP_ROWS_SLOTS][experts] */
};

/* ---- scratch ---- */

static int capturing(hipStream_t s, int *out) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  KP_GPU(hipStreamIsCapturing(s, &st));
  *out = st != hipStreamCaptureStatusNone;
  return KPICK_OK;
}

static int retire(void *ptr) {
  if (!ptr) return KPICK_OK;
  if (scratch.nretired == (int)(sizeof scratch.retired / sizeof scratch.retired[0]))
    return kp_fail(KPICK_E_NOMEM, "scratch", "scratch regrown too often (%d times)", scratch.nretired);
  scratch.retired[scratch.nretired++] = ptr;
  return KPICK_OK;
}

static int grow_locked(size_t temp_bytes, size_t counters_len, hipStream_t s) {
  const int need_blas = scratch.blas == NULL;
  const int need_temp = temp_bytes > scratch.temp_bytes, need_counters = counters_len > scratch.counters_len;
  if (!need_blas && !need_temp && !need_counters) return KPICK_OK;
  int cap = 0;
  KP_TRY(capturing(s, &cap));
  if (cap)
    return kp_fail(KPICK_E_STATE, "scratch",
                   "a launch under stream capture needs %.1f MiB of scratch that does not exist yet: "
                   "run it once outside capture first",
                   temp_bytes / 1048576.0);
  if (need_blas) KP_GPU(hipMalloc(&scratch.blas, kp_blas_workspace_bytes()));
  if (need_temp) {
    size_t bytes = scratch.temp_bytes * 2 > temp_bytes ? scratch.temp_bytes * 2 : temp_bytes;
    void *fresh = NULL;
    KP_GPU(hipMalloc(&fresh, bytes));
    int st = retire(scratch.temp);
    if (st != KPICK_OK) {
      (void)hipFree(fresh);
      return st;
    }
    scratch.temp = fresh;
    scratch.temp_bytes = bytes;
  }
  if (need_counters) {
    size_t len = scratch.counters_len * 2 > counters_len ? scratch.counters_len * 2 : counters_len;
    uint32_t *fresh = NULL;
    KP_GPU(hipMalloc((void **)&fresh, len * sizeof *fresh));
    KP_GPU(hipMemset(fresh, 0, len * sizeof *fresh));
    KP_GPU(hipDeviceSynchronize()); /* zero before any stream's kernel reads them */
    int st = retire(scratch.counters);
    if (st != KPICK_OK) {
      (void)hipFree(fresh);
      return st;
    }
    scratch.counters = fresh;
    scratch.counters_len = len;
  }
  return KPICK_OK;
}

static int scratch_get(size_t temp_bytes, size_t counters_len, hipStream_t s, kp_scratch *out) {
  pthread_mutex_lock(&scratch.lock);
  int st = grow_locked(temp_bytes, counters_len, s);
  if (st == KPICK_OK) {
    out->blas = scratch.blas;
    out->blas_bytes = kp_blas_workspace_bytes();
    out->temp = scratch.temp;
    out->temp_bytes = scratch.temp_bytes;
    out->counters = scratch.counters;
    out->counters_len = scratch.counters_len;
  }
  pthread_mutex_unlock(&scratch.lock);
  return st;
}

/* ---- the families of space.def: launch, availability, problem support ----
 * One function of each kind per GPU_FAMILY line, found by the row's family id
 * (the table below is built from the same lines, so a family without its
 * three functions does not compile). */

/* fp8's W8A8 default (space.def w8a8.blaslt): the scratch holds the matmul's
 * output [m, rows] (fp32 at most), then x's codes [m, k] and scales [m] */
static size_t kp_align256(size_t v) { return (v + 255) / 256 * 256; }
struct fp8_scratch_layout {
  size_t codes_at, scales_at, bytes;
};
static fp8_scratch_layout fp8_scratch(int32_t m, int64_t rows, int64_t k) {
  fp8_scratch_layout l;
  l.codes_at = kp_align256((size_t)m * (size_t)rows * 4);
  l.scales_at = l.codes_at + kp_align256((size_t)m * (size_t)k);
  l.bytes = l.scales_at + (size_t)m * 4;
  return l;
}

/* the fp8 rows' first node, the default's own: x's e4m3 codes and row scales
 * into the scratch (let_next: the next node is a PDL launch), and where W's
 * channel scales sit */
struct fp8_quantized {
  char *out;   /* the matmul's output, at the scratch's start */
  void *blas;  /* the BLAS workspace */
  uint8_t *xq;
  float *sx;
  const float *sw;
};
/* x's e4m3 codes and row scales into the scratch; W (rows of it, kp_w_rows) its channel scales */
static int fp8_quantize_x(const kp_call *c, int64_t rows, int let_next, fp8_quantized *f) {
  const fp8_scratch_layout at = fp8_scratch(c->m, rows, c->k);
  kp_scratch ws;
  KP_TRY(scratch_get(at.bytes, 0, c->stream, &ws));
  f->out = (char *)ws.temp;
  f->blas = ws.blas;
  f->xq = (uint8_t *)f->out + at.codes_at;
  f->sx = (float *)(f->out + at.scales_at);
  f->sw = (const float *)((const char *)c->w + KPICK_FP8_SCALES_AT(rows, c->k));
  return kp_e4m3_quant_launch(c->x, f->xq, f->sx, c->m, c->k, let_next, c->stream);
}

static int launch_blaslt_fp8(const kp_row *r, const kp_call *c) {
  const int64_t rows = kp_w_rows(c->op, c->n);
  int count = 0, scaled = 0;
  KP_TRY(kp_blas_fp8_plan(c->m, rows, c->k, &count, &scaled));
  fp8_quantized f;
  KP_TRY(fp8_quantize_x(c, rows, 0, &f));
  /* scaled: the BLAS applies the scales, writing y itself (linear) or the 2n-wide
   * product for silu-mul (gated); else unit-scale fp32 sums for the epilogue */
  void *out = scaled && c->op == KPICK_OP_LINEAR ? c->y : (void *)f.out;
  KP_TRY(kp_blas_fp8_matmul(r->params[0], f.xq, f.sx, c->w, f.sw, out, c->m, rows, c->k, f.blas, c->stream));
  if (!scaled) return kp_w8a8_epilogue_launch(c->op, (const float *)f.out, f.sx, f.sw, c->y, c->m, c->n, c->stream);
  return c->op == KPICK_OP_LINEAR ? KPICK_OK : kp_silu_mul_launch(KP_DT_BF16, f.out, c->y, c->m, c->n, c->stream);
}

static int launch_blaslt(const kp_row *r, const kp_call *c) {
  kp_scratch ws;
  if (c->dtype == KPICK_FP8) return launch_blaslt_fp8(r, c);
  if (c->op == KPICK_OP_LINEAR) {
    KP_TRY(scratch_get(0, 0, c->stream, &ws));
    return kp_blas_matmul(r->params[0], c->dtype, c->x, c->w, c->y, c->m, c->n, c->k, ws.blas, c->stream);
  }
  /* gated: the 2n-wide product into the scratch, then silu-mul: two nodes */
  KP_TRY(scratch_get((size_t)c->m * (size_t)c->n * 2 * 2, 0, c->stream, &ws));
  KP_TRY(kp_blas_matmul(r->params[0], c->dtype, c->x, c->w, ws.temp, c->m, 2 * c->n, c->k, ws.blas, c->stream));
  return kp_silu_mul_launch(c->dtype, ws.temp, c->y, c->m, c->n, c->stream);
}
static int available_blaslt(int32_t cand) { return kp_row_numeric(&kp_space[cand]) == KPICK_NUM_W16A16 || kp_blas_fp8_built(); }
static int supports_blaslt(const struct kpick_problem *p, const kp_row *r) {
  int count = 0;
  const int64_t rows = kp_w_rows(p->op, p->n);
  if (p->dtype == KPICK_FP8) { /* cuBLASLt's fp8 layout rules (blaslt.cpp) */
    int scaled = 0;
    if (p->k % 16 != 0 || rows % 16 != 0 || kp_blas_fp8_plan(p->m, rows, p->k, &count, &scaled) != KPICK_OK) return 0;
    return r->params[0] < count;
  }
  if (kp_blas_algo_count(p->dtype, p->m, rows, p->k, &count) != KPICK_OK) return 0;
  return r->params[0] < count;
}

static int launch_gemv(const kp_row *r, const kp_call *c) {
  return c->op == KPICK_OP_LINEAR ? kp_gemv_launch(c, r->params[0]) : kp_gated_gemv_launch(c, r->params[0]);
}
static int available_gemv(int32_t cand) {
  return kp_space[cand].op == KPICK_OP_LINEAR ? kp_gemv_built(cand) : kp_gated_gemv_built(cand);
}
static int supports_gemv(const struct kpick_problem *p, const kp_row *r) { return 1; }

static int launch_mma(const kp_row *r, const kp_call *c) {
  return c->op == KPICK_OP_LINEAR ? kp_mma_launch(c, r->params[0]) : kp_gated_mma_launch(c, r->params[0]);
}
static int available_mma(int32_t cand) {
  return g.has_mma && (kp_space[cand].op == KPICK_OP_LINEAR ? kp_mma_built(cand) : kp_gated_mma_built(cand));
}
static int supports_mma(const struct kpick_problem *p, const kp_row *r) { return 1; }

static int launch_splitk(const kp_row *r, const kp_call *c) {
  const size_t temp = kp_splitk_temp_bytes(r->params[0], c->m, c->n);
  if (temp > kp_splitk_cap)
    return kp_fail(KPICK_E_UNSUPPORTED, "splitk", "%.0f MiB of partials is past the %.0f MiB cap", temp / 1048576.0,
                   kp_splitk_cap / 1048576.0);
  kp_scratch ws;
  KP_TRY(scratch_get(temp, kp_splitk_counters(c->n), c->stream, &ws));
  return kp_splitk_launch(c, r->params[0], &ws);
}
static int available_splitk(int32_t cand) { return g.has_mma && kp_splitk_built(cand); }
static int supports_splitk(const struct kpick_problem *p, const kp_row *r) {
  return kp_splitk_temp_bytes(r->params[0], p->m, p->n) <= kp_splitk_cap;
}

/* the W8A8 rows: the default's activation quant into the fp8 scratch, then the
 * tile on x's codes (two nodes, as the default's) */
static int launch_wgmma(const kp_row *r, const kp_call *c) {
  if (c->dtype != KPICK_FP8) return kp_wgmma_launch(c, r->params[0], r->params[1], r->params[2], NULL, NULL, NULL);
  fp8_quantized f;
  KP_TRY(fp8_quantize_x(c, kp_w_rows(c->op, c->n), c->pdl, &f));
  return kp_wgmma_launch(c, r->params[0], r->params[1], r->params[2], f.xq, f.sx, f.sw);
}
/* fp8 rows only beside the fp8 class default, as w8a16 */
static int available_wgmma(int32_t cand) {
  return g.has_wgmma && kp_wgmma_built(cand) && (kp_row_numeric(&kp_space[cand]) != KPICK_NUM_W8A8 || kp_blas_fp8_built());
}
static int supports_wgmma(const struct kpick_problem *p, const kp_row *r) {
  /* fp8: the tensor maps' 16-byte row pitch over 1-byte codes */
  return (p->dtype != KPICK_FP8 || p->k % 16 == 0) && kp_wgmma_fits(r->params[0], r->params[1], r->params[2], p->m);
}

/* clusters and griddepcontrol exist from sm_90; tuned and checked on the H200 only, so offered where wgmma is */
static int launch_cmma(const kp_row *r, const kp_call *c) {
  return kp_cmma_launch(c, r->params[0], r->params[1], r->params[2]);
}
static int available_cmma(int32_t cand) { return g.has_wgmma && kp_cmma_built(cand); }
static int supports_cmma(const struct kpick_problem *p, const kp_row *r) {
  return kp_cmma_fits(r->params[0], r->params[1], r->params[2], p->m);
}

static int launch_w8a16(const kp_row *r, const kp_call *c) { return kp_w8a16_launch(c, r->params[0], r->params[2]); }
/* offered only beside the fp8 class default: a HIP build, which has no fp8
 * matmul (blaslt.cpp), keeps answering fp8 calls KPICK_E_UNSUPPORTED */
static int available_w8a16(int32_t cand) { return kp_w8a16_built(cand) && kp_blas_fp8_built(); }
static int supports_w8a16(const struct kpick_problem *p, const kp_row *r) { return p->k % 16 == 0; }

static int launch_w8a16mma(const kp_row *r, const kp_call *c) { return kp_w8a16_mma_launch(c, r->params[0]); }
/* the e4m3 pair conversion it decodes with is sm_89's; beside the W8A8 default only, as w8a16 */
static int available_w8a16mma(int32_t cand) {
  return kp_w8a16_mma_built(cand) && kp_blas_fp8_built() && strncmp(g.arch, "sm_", 3) == 0 && atoi(g.arch + 3) >= 89;
}
static int supports_w8a16mma(const struct kpick_problem *p, const kp_row *r) { return p->k % 16 == 0; }

/* moe: the batched-BLAS default, the grouped gemv and the grouped mma, with the plan and combine kernels or fused (moe.hip) */
static int launch_moe_blas(const kp_row *r, const kp_call *c) { return kp_moe_blas_launch(c); }
static int available_moe_blas(int32_t cand) { return kp_moe_blas_available(); }
static int supports_moe_blas(const struct kpick_problem *p, const kp_row *r) { return 1; }

static int launch_moe_gemv(const kp_row *r, const kp_call *c) { return kp_moe_gemv_launch(c, r->params[0]); }
static int available_moe_gemv(int32_t cand) { return kp_moe_gemv_built(cand); }
static int supports_moe_gemv(const struct kpick_problem *p, const kp_row *r) { return p->n % 8 == 0; }

static int launch_moe_mma(const kp_row *r, const kp_call *c) { return kp_moe_mma_launch(c, r->params[0]); }
static int available_moe_mma(int32_t cand) { return g.has_mma && kp_moe_mma_built(cand); }
static int supports_moe_mma(const struct kpick_problem *p, const kp_row *r) { return p->n % 8 == 0; }

/* moe.fused and moe.tiles: moe.mma's launcher and kernels (moe.fused routes in one warp: up to 64 pairs,
 * rows 1..8 at top-8 or fewer) */
static int launch_moe_fused(const kp_row *r, const kp_call *c) { return launch_moe_mma(r, c); }
static int available_moe_fused(int32_t cand) { return available_moe_mma(cand); }
static int supports_moe_fused(const struct kpick_problem *p, const kp_row *r) { return supports_moe_mma(p, r) && p->topk <= 8; }
static int launch_moe_tiles(const kp_row *r, const kp_call *c) { return launch_moe_mma(r, c); }
static int available_moe_tiles(int32_t cand) { return available_moe_mma(cand); }
static int supports_moe_tiles(const struct kpick_problem *p, const kp_row *r) { return supports_moe_mma(p, r); }

/* moe.wgmma: the grouped wgmma tile (sm_90a, as the wgmma rows); the tensor maps' 16-byte row pitch */
static int launch_moe_wgmma(const kp_row *r, const kp_call *c) {
  return kp_moe_wgmma_launch(c, r->params[0], r->params[1], r->params[2]);
}
static int available_moe_wgmma(int32_t cand) { return g.has_wgmma && kp_wgmma_moe_built(cand); }
static int supports_moe_wgmma(const struct kpick_problem *p, const kp_row *r) {
  return p->n % 8 == 0 && p->k % 8 == 0 && kp_wgmma_moe_fits(r->params[0], r->params[1], r->params[2], 64);
}
/* moe.wgmma.x128: the same tile with items of up to 128 rows of one expert */
static int launch_moe_wgmma_x128(const kp_row *r, const kp_call *c) { return launch_moe_wgmma(r, c); }
static int available_moe_wgmma_x128(int32_t cand) { return available_moe_wgmma(cand); }
static int supports_moe_wgmma_x128(const struct kpick_problem *p, const kp_row *r) {
  return p->n % 8 == 0 && p->k % 8 == 0 && kp_wgmma_moe_fits(r->params[0], r->params[1], r->params[2], 128);
}

/* fp8 experts (moe.hip): the W8A8 default over cuBLASLt's pointer-array fp8 batch and the
 * W8A16 grouped gemv, offered only beside the W8A8 default, as the dense fp8 rows (a HIP
 * build has neither); N and K multiples of 16 (the BLAS's fp8 rules, 16 codes a load) */
static int launch_moe_w8a8_blas(const kp_row *r, const kp_call *c) { return kp_moe_w8a8_blas_launch(c); }
static int available_moe_w8a8_blas(int32_t cand) { return kp_blas_fp8_built(); }
static int supports_moe_w8a8_blas(const struct kpick_problem *p, const kp_row *r) {
  const int32_t pairs = p->m * p->topk;
  int gu = 0, dn = 0;
  return p->n % 16 == 0 && p->k % 16 == 0 && kp_blas_fp8_batch_plan(pairs, 2 * p->n, p->k, &gu) == KPICK_OK &&
         kp_blas_fp8_batch_plan(pairs, p->k, p->n, &dn) == KPICK_OK && gu > 0 && dn > 0;
}
static int launch_moe_w8a16(const kp_row *r, const kp_call *c) { return kp_moe_w8a16_launch(c, r->params[0]); }
static int available_moe_w8a16(int32_t cand) { return kp_moe_w8a16_built(cand) && kp_blas_fp8_built(); }
static int supports_moe_w8a16(const struct kpick_problem *p, const kp_row *r) { return p->n % 16 == 0 && p->k % 16 == 0; }
/* moe.fused and moe.tiles over e4m3 codes: moe.mma's launcher and kernels, beside the W8A8 default only */
static int launch_moe_w8a16_fused(const kp_row *r, const kp_call *c) { return launch_moe_mma(r, c); }
static int available_moe_w8a16_fused(int32_t cand) { return available_moe_mma(cand) && kp_blas_fp8_built(); }
static int supports_moe_w8a16_fused(const struct kpick_problem *p, const kp_row *r) {
  return supports_moe_w8a16(p, r) && p->topk <= 8;
}
static int launch_moe_w8a16_tiles(const kp_row *r, const kp_call *c) { return launch_moe_mma(r, c); }
static int available_moe_w8a16_tiles(int32_t cand) { return available_moe_mma(cand) && kp_blas_fp8_built(); }
static int supports_moe_w8a16_tiles(const struct kpick_problem *p, const kp_row *r) { return supports_moe_w8a16(p, r); }

struct kp_family_hooks {
  int (*launch)(const kp_row *r, const kp_call *c);
  /* this build holds the row's kernels and the device runs them */
  int (*available)(int32_t cand);
  /* the row can run this problem (beyond op, rows and availability) */
  int (*supports)(const struct kpick_problem *p, const kp_row *r);
};

/* indexed by kp_family_id: both come from the GPU_FAMILY lines, in order */
static const kp_family_hooks families[] = {
#define GPU_FAMILY(family, names) {launch_##family, available_##family, supports_##family},
#define CPU(...)
#define GPU(...)
#include "../space.def"
};
static_assert(sizeof families / sizeof families[0] == KP_NFAM, "one entry per family");

/* ---- init and info ---- */

static int arch_built(const char *arch) {
  char list[256];
  snprintf(list, sizeof list, " %s ", KPICK_GPU_ARCHS);
  char want[40];
  snprintf(want, sizeof want, " %s ", arch);
  return strstr(list, want) != NULL;
}

int be_init(void) {
  int n = 0;
  hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess) return kp_fail(KPICK_E_STATE, "be_init", "no usable GPU runtime: %s", hipGetErrorString(e));
  if (n < 1) return kp_fail(KPICK_E_STATE, "be_init", "no GPU device found");
  KP_GPU(hipSetDevice(0));
  KP_GPU(hipGetDeviceProperties(&g.prop, 0));
#if defined(KPICK_GPU_CUDA)
  snprintf(g.arch, sizeof g.arch, "sm_%d%d", g.prop.major, g.prop.minor);
#else
  snprintf(g.arch, sizeof g.arch, "%s", g.prop.gcnArchName);
  g.arch[strcspn(g.arch, ":")] = '\0'; /* "gfx942:sramecc+:xnack-" -> "gfx942" */
#endif
  if (!arch_built(g.arch))
    return kp_fail(KPICK_E_STATE, "be_init", "this library holds kernels for %s, but device 0 (%s) is %s: rebuild with ARCH=%s",
                   KPICK_GPU_ARCHS, g.prop.name, g.arch, g.arch);
  int device_warp = 0;
  KP_TRY(kp_warp_probe(&device_warp));
  if (device_warp != g.prop.warpSize)
    return kp_fail(KPICK_E_STATE, "be_init", "kernels were built for a warp of %d, the device runs %d", device_warp,
                   g.prop.warpSize);
  if (!g.stream) KP_GPU(hipStreamCreateWithFlags(&g.stream, hipStreamNonBlocking));
  if (!g.e0) KP_GPU(hipEventCreate(&g.e0));
  if (!g.e1) KP_GPU(hipEventCreate(&g.e1));
  KP_TRY(kp_blas_init());
  g.has_mma = kp_host_has_mma(g.arch);
  g.has_pdl = kp_host_has_pdl(g.arch);
  g.has_wgmma = kp_host_has_wgmma(g.arch);
  g.ready = 1;
  return KPICK_OK;
}

static void version_str(char *out, size_t cap, const char *what, int v) {
#if defined(KPICK_GPU_CUDA)
  snprintf(out, cap, "%s %d.%d", what, v / 1000, (v % 1000) / 10);
#else
  snprintf(out, cap, "%s %d", what, v);
#endif
}

int be_info(kpick_info *out) {
  int rt = 0, drv = 0;
  KP_GPU(hipRuntimeGetVersion(&rt));
  KP_GPU(hipDriverGetVersion(&drv));
  char a[32], b[32];
#if defined(KPICK_GPU_CUDA)
  snprintf(out->backend, sizeof out->backend, "cuda");
  version_str(a, sizeof a, "cudart", rt);
  version_str(b, sizeof b, "driver", drv);
#else
  snprintf(out->backend, sizeof out->backend, "hip");
  version_str(a, sizeof a, "hip", rt);
  version_str(b, sizeof b, "driver", drv);
#endif
  snprintf(out->runtime, sizeof out->runtime, "%s, %s", a, b);
  snprintf(out->arch, sizeof out->arch, "%s", g.arch);
  snprintf(out->device, sizeof out->device, "%s", g.prop.name);
  KP_TRY(kp_blas_version(out->blas, sizeof out->blas));
  out->warp = g.prop.warpSize;
  out->units = g.prop.multiProcessorCount;
  out->pdl = g.has_pdl;
  out->llc_bytes = g.prop.l2CacheSize;
  return be_mem(&out->mem_free, &out->mem_total);
}

int be_mem(int64_t *free_bytes, int64_t *total_bytes) {
  size_t f = 0, t = 0;
  KP_GPU(hipMemGetInfo(&f, &t));
  *free_bytes = (int64_t)f;
  *total_bytes = (int64_t)t;
  return KPICK_OK;
}

/* ---- candidates ---- */

int be_available(int32_t cand) {
  if (!g.ready) return 0;
  const kp_row *r = &kp_space[cand];
  if ((r->flags & KF_PDL) && !g.has_pdl) return 0;
  return families[r->family_id].available(cand);
}

int be_supports(const struct kpick_problem *p, int32_t cand) {
  const kp_row *r = &kp_space[cand];
  /* the kernels read rows in 16-byte pieces; the BLAS takes any K */
  if (r->family_id != KP_FAM_blaslt && p->k % 8 != 0) return 0;
  return families[r->family_id].supports(p, r);
}

/* ---- problems ---- */

/* the most scratch any candidate of this problem may want */
static void scratch_need(const struct kpick_problem *p, size_t *temp, size_t *counters) {
  *temp = 0;
  *counters = 0;
  if (p->op == KPICK_OP_GATED) *temp = (size_t)p->m_max * (size_t)p->n * 2 * 2;
  if (p->dtype == KPICK_FP8) *temp = fp8_scratch(p->m_max, p->w_rows, p->k).bytes;
  if (p->op == KPICK_OP_MOE) *temp = kp_moe_scratch_bytes(p->dtype, p->m_max, p->topk, p->n, p->k);
  for (int32_t i = 0; i < KP_NCAND; i++) {
    const kp_row *r = &kp_space[i];
    if (r->op != p->op || r->family_id != KP_FAM_splitk) continue;
    const int32_t m = p->m_max < r->rows_max ? p->m_max : r->rows_max;
    const size_t bytes = kp_splitk_temp_bytes(r->params[0], m, p->n);
    if (bytes <= kp_splitk_cap && bytes > *temp) *temp = bytes;
    *counters = kp_splitk_counters(p->n);
  }
}

int be_problem_init(struct kpick_problem *p) {
  struct gpu_problem *gp = (struct gpu_problem *)calloc(1, sizeof *gp);
  if (!gp) return kp_fail(KPICK_E_NOMEM, "problem_init", "host allocation failed");
  p->be = gp;
  gp->w = (void **)calloc((size_t)p->copies, sizeof *gp->w);
  gp->graphs = (hipGraphExec_t *)calloc((size_t)KP_NCAND * KP_ROWS_SLOTS, sizeof *gp->graphs);
  if (!gp->w || !gp->graphs) return kp_fail(KPICK_E_NOMEM, "problem_init", "host allocation failed");

  size_t temp = 0, counters = 0;
  scratch_need(p, &temp, &counters);
  const size_t x_bytes = (size_t)p->m_max * (size_t)p->k * 2, y_bytes = (size_t)p->m_max * (size_t)p->y_cols * 2;
  const size_t grow = (temp > scratch.temp_bytes ? temp : 0) + (scratch.blas ? 0 : kp_blas_workspace_bytes());
  const double need = (double)p->copies * (double)p->w_bytes + 4.0 * (double)x_bytes + (double)y_bytes + (double)grow;
  int64_t free_b = 0, total_b = 0;
  KP_TRY(be_mem(&free_b, &total_b));
  if (need + (64 << 20) > (double)free_b)
    return kp_fail(KPICK_E_NOMEM, "problem_init", "needs %.1f MiB of device memory (%d weight copies of %.1f MiB), %.1f MiB free",
                   need / 1048576.0, (int)p->copies, p->w_bytes / 1048576.0, free_b / 1048576.0);

  KP_GPU(hipMalloc(&gp->x, x_bytes));
  KP_GPU(hipMalloc(&gp->x_src, x_bytes));
  KP_GPU(hipMalloc((void **)&gp->resid, 2 * x_bytes));
  KP_GPU(hipMemset(gp->resid, 0, 2 * x_bytes));
  KP_GPU(hipMalloc(&gp->y, y_bytes));
  KP_GPU(hipMalloc((void **)&gp->sink, sizeof(float)));
  for (int32_t i = 0; i < p->copies; i++) KP_GPU(hipMalloc(&gp->w[i], p->w_bytes));
  KP_GPU(hipMemcpy(gp->x, p->x_host, x_bytes, hipMemcpyHostToDevice));
  KP_GPU(hipMemcpy(gp->x_src, p->x_host, x_bytes, hipMemcpyHostToDevice));
  KP_GPU(hipMemcpy(gp->w[0], p->w_host, p->w_bytes, hipMemcpyHostToDevice));
  for (int32_t i = 1; i < p->copies; i++) KP_GPU(hipMemcpy(gp->w[i], gp->w[0], p->w_bytes, hipMemcpyDeviceToDevice));
  if (p->op == KPICK_OP_MOE) {
    const size_t routed = (size_t)p->m_max * (size_t)p->topk * 4;
    KP_GPU(hipMalloc((void **)&gp->ids, routed));
    KP_GPU(hipMalloc((void **)&gp->gates, routed));
    KP_GPU(hipMalloc((void **)&gp->floor_used, (size_t)KP_ROWS_SLOTS * (size_t)p->experts * 4));
    KP_GPU(hipMemcpy(gp->ids, p->ids_host, routed, hipMemcpyHostToDevice));
    KP_GPU(hipMemcpy(gp->gates, p->gates_host, routed, hipMemcpyHostToDevice));
  }
  KP_GPU(hipDeviceSynchronize());

  kp_scratch ws;
  KP_TRY(scratch_get(temp, counters, g.stream, &ws));

  /* a batch rotates over every copy, repeated until it is long enough */
  int64_t want = (kp_batch_bytes + (int64_t)p->w_bytes - 1) / (int64_t)p->w_bytes;
  if (want > kp_batch_calls) want = kp_batch_calls;
  if (want < 2) want = 2;
  gp->calls = p->copies * (int)((want + p->copies - 1) / p->copies);
  return KPICK_OK;
}

void be_problem_free(struct kpick_problem *p) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  if (!gp) return;
  if (gp->graphs)
    for (size_t i = 0; i < (size_t)KP_NCAND * KP_ROWS_SLOTS; i++)
      if (gp->graphs[i]) (void)hipGraphExecDestroy(gp->graphs[i]);
  for (int i = 0; i < KP_ROWS_SLOTS; i++) {
    if (gp->floor[i]) (void)hipGraphExecDestroy(gp->floor[i]);
    if (gp->producer[i]) (void)hipGraphExecDestroy(gp->producer[i]);
  }
  if (gp->w)
    for (int32_t i = 0; i < p->copies; i++)
      if (gp->w[i]) (void)hipFree(gp->w[i]);
  if (gp->x) (void)hipFree(gp->x);
  if (gp->x_src) (void)hipFree(gp->x_src);
  if (gp->resid) (void)hipFree(gp->resid);
  if (gp->y) (void)hipFree(gp->y);
  if (gp->sink) (void)hipFree(gp->sink);
  if (gp->ids) (void)hipFree(gp->ids);
  if (gp->gates) (void)hipFree(gp->gates);
  if (gp->floor_used) (void)hipFree(gp->floor_used);
  free(gp->w);
  free(gp->graphs);
  free(gp);
  p->be = NULL;
}

int be_poison(struct kpick_problem *p) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  KP_GPU(hipMemsetAsync(gp->y, 0xFF, (size_t)p->m_max * (size_t)p->y_cols * 2, g.stream));
  KP_GPU(hipStreamSynchronize(g.stream));
  return KPICK_OK;
}

/* ---- launching ---- */

/* what every launch checks first: the backend, the row's op, and its rows range
 * (which the route cannot know) */
static int launch_checks(const kp_row *r, int32_t op, int32_t m) {
  if (!g.ready) return kp_fail(KPICK_E_STATE, "launch", "the GPU backend is not initialised");
  if (r->op != op) return kp_fail(KPICK_E_ARG, "launch", "%s is a candidate of op %d, not %d", r->name, (int)r->op, (int)op);
  if (m < r->rows_min || m > r->rows_max)
    return kp_fail(KPICK_E_UNSUPPORTED, "launch", "%s takes %d..%d rows, not %d", r->name, (int)r->rows_min,
                   (int)r->rows_max, (int)m);
  return KPICK_OK;
}

int be_launch(int32_t cand, int32_t op, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n,
              int64_t k, void *stream) {
  const kp_row *r = &kp_space[cand];
  KP_TRY(launch_checks(r, op, m));
  /* the kernels' 16-byte pieces */
  if (r->family_id != KP_FAM_blaslt && (k % 8 != 0 || (((uintptr_t)x | (uintptr_t)w) & 15) != 0))
    return kp_fail(KPICK_E_UNSUPPORTED, "launch", "%s needs K %% 8 == 0 and 16-byte aligned x and w", r->name);
  kp_call c = {cand, op, dtype, x, w, y, m, n, k, (hipStream_t)stream, (r->flags & KF_PDL) != 0, g.prop.warpSize, NULL};
  return families[r->family_id].launch(r, &c);
}

/* ids and weights are device memory the kernels read (never the host: the
 * call is graph-capturable); an id outside 0..experts-1 contributes nothing. */
int be_launch_moe(int32_t cand, int32_t dtype, const void *x, const void *w_gate_up, const void *w_down,
                  const int32_t *ids, const float *weights, void *y, int32_t m, int32_t experts, int32_t topk,
                  int64_t n, int64_t k, void *stream) {
  const kp_row *r = &kp_space[cand];
  KP_TRY(launch_checks(r, KPICK_OP_MOE, m));
  if (r->family_id != KP_FAM_moe_blas &&
      (k % 8 != 0 || n % 8 != 0 || (((uintptr_t)x | (uintptr_t)w_gate_up | (uintptr_t)w_down) & 15) != 0))
    return kp_fail(KPICK_E_UNSUPPORTED, "launch", "%s needs N %% 8 == 0, K %% 8 == 0 and 16-byte aligned x and weights",
                   r->name);
  kp_scratch ws;
  if (!kp_row_takes(r, dtype)) /* the rows of one numeric class read one weight layout */
    return kp_fail(KPICK_E_UNSUPPORTED, "launch", "%s does not take dtype %d", r->name, (int)dtype);
  if (dtype == KPICK_FP8 && (n % 16 != 0 || k % 16 != 0))
    return kp_fail(KPICK_E_UNSUPPORTED, "launch", "%s: fp8 experts need N %% 16 == 0 and K %% 16 == 0", r->name);
  KP_TRY(scratch_get(kp_moe_scratch_bytes(dtype, m, topk, n, k), 0, (hipStream_t)stream, &ws));
  const kp_moe_call mc = {w_down, ids, weights, experts, topk, &ws};
  kp_call c = {cand, KPICK_OP_MOE, dtype, x, w_gate_up, y, m, n, k, (hipStream_t)stream, (r->flags & KF_PDL) != 0,
               g.prop.warpSize, &mc};
  return families[r->family_id].launch(r, &c);
}

int be_moe_route(int32_t dtype, const void *logits, int32_t m, int32_t experts, int32_t topk, int32_t *ids,
                 float *weights, void *stream) {
  if (!g.ready) return kp_fail(KPICK_E_STATE, "moe", "the GPU backend is not initialised");
  return kp_moe_route_launch(dtype, logits, m, experts, topk, ids, weights, (hipStream_t)stream, g.prop.warpSize);
}

static int launch_copy(struct kpick_problem *p, int32_t cand, int32_t copy) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  if (p->op == KPICK_OP_MOE) {
    const char *w = (const char *)gp->w[copy]; /* W_gate_up, then W_down (common/moe.h) */
    return be_launch_moe(cand, p->dtype, gp->x, w, w + kp_moe_gate_up_bytes(p->dtype, p->experts, p->n, p->k), gp->ids,
                         gp->gates, gp->y, p->m, p->experts, p->topk, p->n, p->k, g.stream);
  }
  return be_launch(cand, p->op, p->dtype, gp->x, gp->w[copy], gp->y, p->m, p->n, p->k, g.stream);
}

int be_run(struct kpick_problem *p, int32_t cand, int32_t copy) {
  KP_TRY(launch_copy(p, cand, copy));
  KP_GPU(hipStreamSynchronize(g.stream));
  KP_GPU(hipGetLastError());
  return KPICK_OK;
}

/* Capture calls enqueued by body(i), i = 0..calls-1, and instantiate them. */
template <class F>
static int capture(int calls, hipGraphExec_t *out, F body) {
  hipGraph_t graph = NULL;
  KP_GPU(hipStreamBeginCapture(g.stream, hipStreamCaptureModeThreadLocal));
  int st = KPICK_OK;
  for (int i = 0; i < calls && st == KPICK_OK; i++) st = body(i);
  const hipError_t e = hipStreamEndCapture(g.stream, &graph);
  if (st != KPICK_OK) {
    if (graph) (void)hipGraphDestroy(graph);
    return st;
  }
  if (e != hipSuccess) return KP_GPU_FAIL("hipStreamEndCapture", e);
  const hipError_t ei = hipGraphInstantiateWithFlags(out, graph, 0);
  (void)hipGraphDestroy(graph);
  if (ei != hipSuccess) return KP_GPU_FAIL("hipGraphInstantiateWithFlags", ei);
  return KPICK_OK;
}

/* ---- timing: each call where a decode step runs it ----
 * A decode step never runs a linear after itself: the op before it (a norm,
 * attention, another linear) writes its input x, and the op after it waits for
 * its output. Timed back to back with itself, a .pdl candidate (it lets the
 * next kernel launch at its start) overlaps its own previous launch, which no
 * step allows, and looked faster than it serves (lib/promote.ts, --pdl-rows).
 * So a timing batch is `calls` pairs (producer, candidate), rotating weight
 * copies: the producer (util.hip) writes x the way a decode op does: launched
 * with PDL on sm_90, it waits for the kernel before it, then lets the next one
 * launch. A .pdl candidate so overlaps the producer exactly as it overlaps the
 * op before it in a step, and can start only once its own previous launch has
 * ended; a plain candidate waits for the producer to end, as in a step.
 * A sample is what the candidate adds to the step, its served cost:
 *   (one replay of the pair batch - the median replay of a producer-only batch
 *    of the same calls, timed interleaved in the same pass) / calls.
 * The pass's median, not the neighbouring replay, is subtracted: a sample's
 * spread is then the pair's own (promote's noise check reads it), and the
 * producer, timed between the pairs, sees the same clocks and drift. The read
 * floor is timed the same way, so pick / floor compares costs served alike.
 * Timings of this kind and the older back-to-back kind never meet in one
 * table: this file is in the space token (gpu.mk). */

/* instantiate once, then a first replay that loads modules and warms clocks */
template <class F>
static int batch(hipGraphExec_t *slot, int calls, F body) {
  if (*slot) return KPICK_OK;
  KP_TRY(capture(calls, slot, body));
  KP_GPU(hipGraphLaunch(*slot, g.stream));
  return KPICK_OK;
}

static int time_replay(hipGraphExec_t ge, double *ms_out) {
  float ms = 0.0f;
  KP_GPU(hipEventRecord(g.e0, g.stream));
  KP_GPU(hipGraphLaunch(ge, g.stream));
  KP_GPU(hipEventRecord(g.e1, g.stream));
  KP_GPU(hipEventSynchronize(g.e1));
  KP_GPU(hipEventElapsedTime(&ms, g.e0, g.e1));
  *ms_out = (double)ms;
  return KPICK_OK;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* one warm-up replay of each, then nsamples replays of each, in alternating
 * order; us[i] = (pair replay i - median producer replay) / calls, in us */
static int served(hipGraphExec_t pairs, hipGraphExec_t producer, int calls, int32_t nsamples, double *us) {
  double *prod = (double *)malloc((size_t)nsamples * sizeof *prod);
  if (!prod) return kp_fail(KPICK_E_NOMEM, "time", "host allocation failed");
  double warm = 0.0;
  int st = time_replay(pairs, &warm);
  if (st == KPICK_OK) st = time_replay(producer, &warm);
  for (int32_t i = 0; i < nsamples && st == KPICK_OK; i++) {
    if (i % 2 == 0) {
      st = time_replay(pairs, &us[i]);
      if (st == KPICK_OK) st = time_replay(producer, &prod[i]);
    } else {
      st = time_replay(producer, &prod[i]);
      if (st == KPICK_OK) st = time_replay(pairs, &us[i]);
    }
  }
  if (st == KPICK_OK) {
    const hipError_t e = hipGetLastError();
    if (e != hipSuccess) st = KP_GPU_FAIL("hipGetLastError (timing)", e);
  }
  if (st == KPICK_OK) {
    qsort(prod, (size_t)nsamples, sizeof *prod, cmp_double);
    const double mid = nsamples % 2 ? prod[nsamples / 2] : 0.5 * (prod[nsamples / 2 - 1] + prod[nsamples / 2]);
    for (int32_t i = 0; i < nsamples && st == KPICK_OK; i++) {
      /* a pair batch holds the producer batch's kernels and more: not faster
       * unless the clock cannot resolve the difference, which is no timing */
      if (!(us[i] > mid))
        st = kp_fail(KPICK_E_DEVICE, "time", "a pair batch (%.1f us) ran no slower than the producer alone (%.1f us): "
                     "the difference is below what the clock resolves", us[i] * 1000.0, mid * 1000.0);
      else us[i] = (us[i] - mid) * 1000.0 / calls;
    }
  }
  free(prod);
  return st;
}

static int launch_producer(struct kpick_problem *p) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  const int32_t x_dtype = p->dtype == KPICK_FP16 ? KP_DT_FP16 : KP_DT_BF16; /* fp8's x is bf16 */
  return kp_producer_launch(x_dtype, gp->resid, gp->x_src, gp->x, p->m, p->k, g.stream, g.has_pdl);
}

/* after the producer batch's first replay: x holds exactly the values parity
 * checked, or the timings would be of another input */
static int producer_check(struct kpick_problem *p) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  const size_t bytes = (size_t)p->m * (size_t)p->k * 2;
  void *got = malloc(bytes);
  if (!got) return kp_fail(KPICK_E_NOMEM, "producer", "host allocation failed");
  hipError_t e = hipStreamSynchronize(g.stream);
  if (e == hipSuccess) e = hipMemcpy(got, gp->x, bytes, hipMemcpyDeviceToHost);
  const bool same = e == hipSuccess && memcmp(got, p->x_host, bytes) == 0;
  free(got);
  if (e != hipSuccess) return KP_GPU_FAIL("hipMemcpy (producer check)", e);
  if (!same) return kp_fail(KPICK_E_DEVICE, "producer", "x after the producer differs from its source at m=%d", (int)p->m);
  return KPICK_OK;
}

static int producer_batch(struct kpick_problem *p, hipGraphExec_t *out) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  hipGraphExec_t *slot = &gp->producer[p->m];
  const bool made = *slot != NULL;
  KP_TRY(batch(slot, gp->calls, [&](int) { return launch_producer(p); }));
  if (!made) KP_TRY(producer_check(p));
  *out = *slot;
  return KPICK_OK;
}

int be_time(struct kpick_problem *p, int32_t cand, int32_t nsamples, double *us) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  hipGraphExec_t *slot = &gp->graphs[(size_t)cand * KP_ROWS_SLOTS + (size_t)p->m];
  KP_TRY(batch(slot, gp->calls, [&](int i) {
    KP_TRY(launch_producer(p));
    return launch_copy(p, cand, i % p->copies);
  }));
  hipGraphExec_t producer = NULL;
  KP_TRY(producer_batch(p, &producer));
  return served(*slot, producer, gp->calls, nsamples, us);
}

/* moe: the floor streams W_gate_up and W_down of each expert the active rows
 * route to (fp8: their codes and scales), in one kernel: the bytes a call must
 * read at least */
static int moe_floor_list(struct kpick_problem *p, int32_t *nused) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  int32_t used[KPICK_MAX_EXPERTS];
  *nused = kp_moe_experts_used(p->ids_host, (int64_t)p->m * p->topk, p->experts, used);
  KP_GPU(hipMemcpy(gp->floor_used + (size_t)p->m * p->experts, used, (size_t)*nused * 4, hipMemcpyHostToDevice));
  return KPICK_OK;
}

int be_time_floor(struct kpick_problem *p, int32_t nsamples, double *us) {
  struct gpu_problem *gp = (struct gpu_problem *)p->be;
  hipGraphExec_t *slot = &gp->floor[p->m];
  int32_t nused = 0;
  if (p->op == KPICK_OP_MOE && !*slot) KP_TRY(moe_floor_list(p, &nused));
  KP_TRY(batch(slot, gp->calls, [&](int i) {
    KP_TRY(launch_producer(p));
    if (p->op == KPICK_OP_MOE)
      return kp_moe_floor_launch(p->dtype, gp->w[i % p->copies], gp->floor_used + (size_t)p->m * p->experts, nused,
                                 p->experts, p->n, p->k, gp->sink, g.stream, g.has_pdl);
    return kp_floor_launch(gp->w[i % p->copies], p->w_bytes, gp->sink, g.stream, g.has_pdl);
  }));
  hipGraphExec_t producer = NULL;
  KP_TRY(producer_batch(p, &producer));
  return served(*slot, producer, gp->calls, nsamples, us);
}

int be_count_nodes(struct kpick_problem *p, int32_t cand, int32_t *out) {
  hipGraph_t graph = NULL;
  KP_GPU(hipStreamBeginCapture(g.stream, hipStreamCaptureModeThreadLocal));
  const int st = launch_copy(p, cand, 0);
  const hipError_t e = hipStreamEndCapture(g.stream, &graph);
  if (st != KPICK_OK) {
    if (graph) (void)hipGraphDestroy(graph);
    return st;
  }
  if (e != hipSuccess) return KP_GPU_FAIL("hipStreamEndCapture", e);
  size_t nodes = 0;
  const hipError_t en = hipGraphGetNodes(graph, NULL, &nodes);
  (void)hipGraphDestroy(graph);
  if (en != hipSuccess) return KP_GPU_FAIL("hipGraphGetNodes", en);
  *out = (int32_t)nodes;
  return KPICK_OK;
}

int be_download_y(const struct kpick_problem *p, void *dst) {
  const struct gpu_problem *gp = (const struct gpu_problem *)p->be;
  KP_GPU(hipStreamSynchronize(g.stream));
  KP_GPU(hipMemcpy(dst, gp->y, p->y_bytes, hipMemcpyDeviceToHost));
  return KPICK_OK;
}

/* ---- caller memory (kpick_linear's pointers, common/buffers.c) ---- */

int be_device_memory(const void *p, int *is_device) {
  hipPointerAttribute_t a;
  memset(&a, 0, sizeof a);
  const hipError_t e = hipPointerGetAttributes(&a, p);
  if (e != hipSuccess) {
    (void)hipGetLastError(); /* unregistered host memory on some runtimes: an answer, not a sticky error */
    *is_device = 0;
    return KPICK_OK;
  }
  *is_device = kp_device_attr(a);
  return KPICK_OK;
}
