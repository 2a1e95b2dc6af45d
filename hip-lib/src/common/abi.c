/* abi.c: the public entry points. Every argument is validated here, once, so
 * a backend hook only ever sees a live problem and sizes that fit. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "data.h"
#include "error.h"
#include "fp8.h"
#include "handles.h"
#include "moe.h"
#include "space.h"

#ifndef KPICK_SPACE_TOKEN
#define KPICK_SPACE_TOKEN "unknown"
#endif
#ifndef KPICK_COMPILER
#define KPICK_COMPILER "unknown"
#endif

/* Largest dimension accepted: keeps every byte count far inside int64. */
#define KP_MAX_DIM (1LL << 24)
#define KP_MAX_COPIES 4096
#define KP_MAX_SAMPLES 100000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_status = -1;

/* Live problems, so a freed or foreign handle is an error, not a crash. */
static kp_handles live = KP_HANDLES_INIT(0);

static int is_live(const kpick_problem *p) { return kp_handles_has(&live, p); }

int kpick_init(void) {
  kp_clear_error();
  pthread_mutex_lock(&lock);
  if (init_status != KPICK_OK) init_status = be_init();
  int st = init_status;
  pthread_mutex_unlock(&lock);
  return st;
}

#define KP_READY()                      \
  do {                                  \
    int kp_init_ = kpick_init();        \
    if (kp_init_ != KPICK_OK) return kp_init_; \
  } while (0)

#define KP_LIVE(p) KP_REQUIRE((p) != NULL && is_live(p), "not a live problem handle")
#define KP_CAND(c) \
  KP_REQUIRE((c) >= 0 && (c) < KP_NCAND, "unknown candidate id %d (space has %d)", (int)(c), (int)KP_NCAND)

static void copy_str(char *dst, size_t cap, const char *src) {
  strncpy(dst, src, cap - 1);
  dst[cap - 1] = '\0';
}

int kpick_abi_value(const char *name, int64_t *out) {
  kp_clear_error();
  KP_REQUIRE(name != NULL && out != NULL, "null argument");
  static const struct { const char *name; int64_t value; } facts[] = {
      {"version", KPICK_ABI_VERSION},
      {"kpick_info", sizeof(kpick_info)},
      {"kpick_candidate", sizeof(kpick_candidate)},
      {"kpick_model_dims", sizeof(kpick_model_dims)},
      {"KPICK_MAX_ROWS", KPICK_MAX_ROWS},
      {"KPICK_MAX_POSITIONS", KPICK_MAX_POSITIONS},
      {"KPICK_MAX_EXPERTS", KPICK_MAX_EXPERTS},
      {"KPICK_MAX_TOPK", KPICK_MAX_TOPK},
  };
  for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
    if (strcmp(facts[i].name, name) == 0) {
      *out = facts[i].value;
      return KPICK_OK;
    }
  }
  return kp_fail(KPICK_E_ARG, __func__, "no ABI fact named '%.60s'", name);
}

int kpick_get_info(kpick_info *out) {
  KP_READY();
  KP_REQUIRE(out != NULL, "out is null");
  memset(out, 0, sizeof *out);
  KP_TRY(be_info(out));
  out->abi = KPICK_ABI_VERSION;
  copy_str(out->space, sizeof out->space, KPICK_SPACE_TOKEN);
  copy_str(out->compiler, sizeof out->compiler, KPICK_COMPILER);
  return KPICK_OK;
}

int kpick_candidate_count(int32_t *out) {
  KP_READY();
  KP_REQUIRE(out != NULL, "out is null");
  *out = KP_NCAND;
  return KPICK_OK;
}

int kpick_candidate_describe(int32_t id, kpick_candidate *out) {
  KP_READY();
  KP_REQUIRE(out != NULL, "out is null");
  KP_CAND(id);
  const kp_row *r = &kp_space[id];
  memset(out, 0, sizeof *out);
  copy_str(out->name, sizeof out->name, r->name);
  copy_str(out->family, sizeof out->family, r->family);
  copy_str(out->param_names, sizeof out->param_names, kp_families[r->family_id].param_names);
  memcpy(out->params, r->params, sizeof out->params);
  out->op = r->op;
  out->nodes = r->nodes;
  out->bitwise_with = r->bitwise_with;
  out->is_default = (r->flags & KF_DEFAULT) != 0;
  out->rows_min = r->rows_min;
  out->rows_max = r->rows_max;
  out->stack_bound = (r->flags & KF_STACK) != 0;
  out->pdl = (r->flags & KF_PDL) != 0;
  out->available = be_available(id);
  out->numeric = kp_row_numeric(r);
  return KPICK_OK;
}

int kpick_candidate_find(const char *name, int32_t *out_id) {
  KP_READY();
  KP_REQUIRE(name != NULL && out_id != NULL, "null argument");
  for (int32_t i = 0; i < KP_NCAND; i++) {
    if (strcmp(kp_space[i].name, name) == 0) {
      *out_id = i;
      return KPICK_OK;
    }
  }
  return kp_fail(KPICK_E_ARG, __func__, "no candidate named '%.60s' in this space", name);
}

/* The rotation and the problem itself, once the shape is checked: shape
 * holds op, dtype, n, k, w_rows, y_cols, w_bytes and the moe fields; read_bytes
 * is what one call reads at least (the rotation outruns the cache by it). */
static int problem_new(const struct kpick_problem *shape, size_t read_bytes, int32_t m, int32_t copies,
                       uint64_t seed, kpick_problem **out) {
  const size_t w_bytes = shape->w_bytes;
  kpick_info info;
  KP_TRY(kpick_get_info(&info));
  int64_t free_b = info.mem_free;
  /* Keep a quarter of free memory for everything else. */
  int64_t budget = free_b - free_b / 4 - (int64_t)(m * shape->k * 2 + m * shape->y_cols * 4) - (64LL << 20);
  int64_t fit = budget > 0 ? budget / (int64_t)w_bytes : 0;
  if (fit < 1)
    return kp_fail(KPICK_E_NOMEM, "kpick_problem_create",
                   "a %lld x %lld weight (%.1f MiB) does not fit: %.1f MiB free", (long long)shape->w_rows,
                   (long long)shape->k, w_bytes / 1048576.0, free_b / 1048576.0);
  if (copies <= 0) {
    int64_t want = (int64_t)(8 * (double)info.llc_bytes / (double)read_bytes) + 1;
    /* at least two: a call must not start on weights the previous call left
     * in the cache (a weight past 8x the cache would otherwise get one copy) */
    if (want < 2) want = 2;
    if (want > KP_MAX_COPIES) want = KP_MAX_COPIES;
    copies = (int32_t)(want < fit ? want : fit);
  } else if (copies > fit) {
    return kp_fail(KPICK_E_NOMEM, "kpick_problem_create", "%d copies of %.1f MiB do not fit; at most %lld would",
                   (int)copies, w_bytes / 1048576.0, (long long)fit);
  }

  struct kpick_problem *p = calloc(1, sizeof *p);
  if (!p) return kp_fail(KPICK_E_NOMEM, "kpick_problem_create", "host allocation failed");
  *p = *shape;
  p->m = m;
  p->m_max = m;
  p->copies = copies;
  p->seed = seed;
  p->x_bytes = (size_t)(m * p->k * 2);
  p->y_bytes = (size_t)(m * p->y_cols * 2);
  int st = kp_fill_inputs(p);
  if (st == KPICK_OK) st = be_problem_init(p);
  if (st == KPICK_OK && !kp_handles_add(&live, p))
    st = kp_fail(KPICK_E_NOMEM, "kpick_problem_create", "host allocation failed");
  if (st != KPICK_OK) {
    be_problem_free(p);
    kp_free_inputs(p);
    free(p);
    return st;
  }
  *out = p;
  return KPICK_OK;
}

#define KP_SHAPE_ARGS(dtype, n, k, m, copies)                                                                    \
  do {                                                                                                         \
    KP_REQUIRE((dtype) >= KPICK_BF16 && (dtype) <= KPICK_FP8, "dtype must be 0 (bf16), 1 (fp16) or 2 (fp8), got %d", \
               (int)(dtype));                                                                                  \
    KP_REQUIRE((n) > 0 && (n) <= KP_MAX_DIM, "n must be in 1..%lld, got %lld", KP_MAX_DIM, (long long)(n));    \
    KP_REQUIRE((k) > 0 && (k) <= KP_MAX_DIM, "k must be in 1..%lld, got %lld", KP_MAX_DIM, (long long)(k));    \
    KP_REQUIRE((m) > 0 && (m) <= KPICK_MAX_ROWS, "m must be in 1..%d, got %d", KPICK_MAX_ROWS, (int)(m));      \
    KP_REQUIRE((copies) <= KP_MAX_COPIES, "copies must be at most %d, got %d", KP_MAX_COPIES, (int)(copies));  \
  } while (0)

int kpick_problem_create(int32_t op, int32_t dtype, int64_t n, int64_t k, int32_t m,
                         int32_t copies, uint64_t seed, kpick_problem **out) {
  KP_READY();
  KP_REQUIRE(out != NULL, "out is null");
  *out = NULL;
  KP_REQUIRE(op != KPICK_OP_MOE, "op 2 (moe) takes kpick_problem_create_moe (experts, topk, routing)");
  KP_REQUIRE(op == KPICK_OP_LINEAR || op == KPICK_OP_GATED, "op must be 0 (linear) or 1 (gated), got %d", (int)op);
  KP_SHAPE_ARGS(dtype, n, k, m, copies);
  if (!kp_space_takes(op, dtype))
    return kp_fail(KPICK_E_UNSUPPORTED, __func__, "no candidate of this build computes op %d in dtype %d", (int)op,
                   (int)dtype);
  int64_t w_rows = op == KPICK_OP_GATED ? 2 * n : n;
  KP_REQUIRE(w_rows <= KP_MAX_DIM && w_rows * k <= (1LL << 34), "weight of %lld x %lld elements is too large",
             (long long)w_rows, (long long)k);
  struct kpick_problem shape = {.op = op, .dtype = dtype, .n = n, .k = k, .w_rows = w_rows, .y_cols = n,
                                .w_bytes = (size_t)kp_weight_bytes(dtype, w_rows, k)};
  return problem_new(&shape, shape.w_bytes, m, copies, seed, out);
}

int kpick_problem_create_moe(int32_t dtype, int32_t experts, int32_t topk, int64_t n, int64_t k, int32_t m_max,
                             int32_t routing, int32_t copies, uint64_t seed, kpick_problem **out) {
  KP_READY();
  KP_REQUIRE(out != NULL, "out is null");
  *out = NULL;
  KP_SHAPE_ARGS(dtype, n, k, m_max, copies);
  KP_REQUIRE(experts > 0 && experts <= KPICK_MAX_EXPERTS, "experts must be in 1..%d, got %d", KPICK_MAX_EXPERTS,
             (int)experts);
  KP_REQUIRE(topk > 0 && topk <= KPICK_MAX_TOPK && topk <= experts, "topk must be in 1..%d and at most experts (%d), got %d",
             KPICK_MAX_TOPK, (int)experts, (int)topk);
  KP_REQUIRE(routing == KPICK_ROUTING_UNIFORM || routing == KPICK_ROUTING_SKEWED,
             "routing must be 0 (uniform) or 1 (skewed), got %d", (int)routing);
  KP_REQUIRE(n * k <= (1LL << 34) / 3 / experts, "%d experts of 3 x %lld x %lld elements are too large", (int)experts,
             (long long)n, (long long)k);
  if (!kp_space_takes(KPICK_OP_MOE, dtype))
    return kp_fail(KPICK_E_UNSUPPORTED, __func__,
                   "this build has no moe candidate in dtype %d (the GPU's moe defaults, cuBLAS and cuBLASLt batched GEMMs, are CUDA-only)",
                   (int)dtype);
  struct kpick_problem shape = {.op = KPICK_OP_MOE, .dtype = dtype, .n = n, .k = k, .w_rows = 3 * n, .y_cols = k,
                                .w_bytes = (size_t)(kp_moe_gate_up_bytes(dtype, experts, n, k) +
                                                    kp_moe_down_bytes(dtype, experts, n, k)),
                                .experts = experts, .topk = topk, .routing = routing};
  /* one row reads its topk experts: the least any call reads */
  return problem_new(&shape, (size_t)(topk * kp_moe_expert_bytes(dtype, n, k)), m_max, copies, seed, out);
}

int kpick_problem_free(kpick_problem *p) {
  kp_clear_error();
  KP_REQUIRE(p != NULL, "problem is null");
  KP_REQUIRE(kp_handles_remove(&live, p), "not a live problem handle (freed twice?)");
  be_problem_free(p);
  kp_free_inputs(p);
  free(p);
  return KPICK_OK;
}

int kpick_problem_copies(const kpick_problem *p, int32_t *out) {
  kp_clear_error();
  KP_LIVE(p);
  KP_REQUIRE(out != NULL, "out is null");
  *out = p->copies;
  return KPICK_OK;
}

int kp_space_takes(int32_t op, int32_t dtype) {
  for (int32_t i = 0; i < KP_NCAND; i++)
    if (kp_space[i].op == op && kp_row_takes(&kp_space[i], dtype) && be_available(i)) return 1;
  return 0;
}

static int runnable(const kpick_problem *p, int32_t cand) {
  const kp_row *r = &kp_space[cand];
  return r->op == p->op && kp_row_takes(r, p->dtype) && p->m >= r->rows_min && p->m <= r->rows_max && be_available(cand) &&
         be_supports(p, cand);
}

int kpick_set_rows(kpick_problem *p, int32_t m) {
  kp_clear_error();
  KP_LIVE(p);
  KP_REQUIRE(m > 0 && m <= p->m_max, "m must be in 1..%d (the problem's m_max), got %d", (int)p->m_max, (int)m);
  p->m = m;
  p->x_bytes = (size_t)(m * p->k * 2);
  p->y_bytes = (size_t)(m * p->y_cols * 2);
  return KPICK_OK;
}

int kpick_supports(const kpick_problem *p, int32_t cand, int32_t *out) {
  kp_clear_error();
  KP_LIVE(p);
  KP_CAND(cand);
  KP_REQUIRE(out != NULL, "out is null");
  *out = runnable(p, cand);
  return KPICK_OK;
}

#define KP_RUNNABLE(p, cand)                                                             \
  do {                                                                                   \
    KP_LIVE(p);                                                                          \
    KP_CAND(cand);                                                                       \
    if (!runnable(p, cand))                                                              \
      return kp_fail(KPICK_E_UNSUPPORTED, __func__, "%s cannot run op %d dtype %d, %lld x %lld, m=%d here", \
                     kp_space[cand].name, (int)p->op, (int)p->dtype, (long long)p->n, (long long)p->k, (int)p->m); \
  } while (0)

int kpick_poison(kpick_problem *p) {
  kp_clear_error();
  KP_LIVE(p);
  return be_poison(p);
}

int kpick_run(kpick_problem *p, int32_t cand, int32_t copy) {
  kp_clear_error();
  KP_RUNNABLE(p, cand);
  KP_REQUIRE(copy >= 0 && copy < p->copies, "copy %d out of 0..%d", (int)copy, (int)p->copies - 1);
  return be_run(p, cand, copy);
}

int kpick_time(kpick_problem *p, int32_t cand, int32_t nsamples, double *us_out) {
  kp_clear_error();
  KP_RUNNABLE(p, cand);
  KP_REQUIRE(us_out != NULL, "us_out is null");
  KP_REQUIRE(nsamples > 0 && nsamples <= KP_MAX_SAMPLES, "nsamples must be in 1..%d", KP_MAX_SAMPLES);
  return be_time(p, cand, nsamples, us_out);
}

int kpick_time_floor(kpick_problem *p, int32_t nsamples, double *us_out) {
  kp_clear_error();
  KP_LIVE(p);
  KP_REQUIRE(us_out != NULL, "us_out is null");
  KP_REQUIRE(nsamples > 0 && nsamples <= KP_MAX_SAMPLES, "nsamples must be in 1..%d", KP_MAX_SAMPLES);
  return be_time_floor(p, nsamples, us_out);
}

int kpick_count_nodes(kpick_problem *p, int32_t cand, int32_t *out) {
  kp_clear_error();
  KP_RUNNABLE(p, cand);
  KP_REQUIRE(out != NULL, "out is null");
  return be_count_nodes(p, cand, out);
}

int kpick_download(const kpick_problem *p, int32_t which, void *dst, int64_t bytes) {
  kp_clear_error();
  KP_LIVE(p);
  const size_t routed = p->op == KPICK_OP_MOE ? (size_t)p->m * (size_t)p->topk * 4 : 0;
  size_t want = which == KPICK_BUF_Y ? p->y_bytes
                : which == KPICK_BUF_X ? p->x_bytes
                : which == KPICK_BUF_W ? p->w_bytes
                : which == KPICK_BUF_EXPERT_IDS || which == KPICK_BUF_EXPERT_WEIGHTS ? routed
                                       : 0;
  KP_REQUIRE(which >= KPICK_BUF_Y && which <= KPICK_BUF_EXPERT_WEIGHTS,
             "which must be 0 (y), 1 (x), 2 (w), 3 (expert ids) or 4 (expert weights), got %d", (int)which);
  KP_REQUIRE(want != 0, "buffer %d is a moe problem's routing; this problem is op %d", (int)which, (int)p->op);
  KP_REQUIRE(dst != NULL, "dst is null");
  KP_REQUIRE(bytes == (int64_t)want, "buffer is %lld bytes, expected %zu", (long long)bytes, want);
  if (which == KPICK_BUF_Y) return be_download_y(p, dst);
  const void *src = which == KPICK_BUF_X ? p->x_host
                    : which == KPICK_BUF_W ? p->w_host
                    : which == KPICK_BUF_EXPERT_IDS ? (const void *)p->ids_host
                                                    : (const void *)p->gates_host;
  memcpy(dst, src, want);
  return KPICK_OK;
}

int kpick_reference(const kpick_problem *p, const int64_t *cols, int32_t ncols, double *y_out,
                    int64_t count) {
  kp_clear_error();
  KP_LIVE(p);
  KP_REQUIRE(y_out != NULL, "y_out is null");
  const int64_t C = p->y_cols; /* N, or K for moe */
  if (cols == NULL) {
    KP_REQUIRE(ncols == C, "ncols must be the %lld output columns when cols is null", (long long)C);
  } else {
    KP_REQUIRE(ncols > 0 && ncols <= C, "ncols must be in 1..%lld", (long long)C);
    for (int32_t j = 0; j < ncols; j++)
      KP_REQUIRE(cols[j] >= 0 && cols[j] < C, "cols[%d] = %lld is outside 0..%lld", (int)j,
                 (long long)cols[j], (long long)C - 1);
  }
  KP_REQUIRE(count == (int64_t)p->m * ncols, "count is %lld, expected m*ncols = %lld", (long long)count,
             (long long)p->m * ncols);
  return kp_reference(p, cols, ncols, y_out);
}
