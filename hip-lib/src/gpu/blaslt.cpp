/* blaslt.cpp: blaslt.h over hipBLASLt, or over cuBLASLt when nvcc builds it
 * (the hipBLASLt names below map to their cuBLASLt twins; both libraries have
 * the same shape of API).
 *
 * Row-major y[m, n] = x[m, k] W[n, k]^T is, in the column-major terms of the
 * library, D[n, m] = A^T B with A = W as a k x n matrix (ld k, transposed) and
 * B = x as a k x m matrix (ld k): a "TN" GEMM. Descriptors and heuristic
 * answers are cached per (dtype, m, n, k) and kept for the process's life. */
#include "blaslt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"

#if defined(KPICK_GPU_CUDA)
#include <cublasLt.h>
#define hipblasStatus_t cublasStatus_t
#define HIPBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define hipblasLtHandle_t cublasLtHandle_t
#define hipblasLtCreate cublasLtCreate
#define hipblasLtMatmulDesc_t cublasLtMatmulDesc_t
#define hipblasLtMatmulDescCreate cublasLtMatmulDescCreate
#define hipblasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define hipblasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define HIPBLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define HIPBLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define hipblasOperation_t cublasOperation_t
#define HIPBLAS_OP_T CUBLAS_OP_T
#define HIPBLAS_OP_N CUBLAS_OP_N
#define hipblasLtMatrixLayout_t cublasLtMatrixLayout_t
#define hipblasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define hipblasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define hipblasLtMatmulPreference_t cublasLtMatmulPreference_t
#define hipblasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define hipblasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define hipblasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define hipblasLtMatmulHeuristicResult_t cublasLtMatmulHeuristicResult_t
#define hipblasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define hipblasLtMatmul cublasLtMatmul
#define HIPBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define hipDataType cudaDataType_t
#define HIP_R_32F CUDA_R_32F
#define HIP_R_16BF CUDA_R_16BF
#define HIP_R_16F CUDA_R_16F
#else
#include <hipblaslt/hipblaslt.h>
#endif

static const size_t kp_blas_ws = 32u << 20;

/* One BLAS call, checked: records the call, file and line on failure. */
#if defined(KPICK_GPU_CUDA)
#define KP_BLAS_WHY(st) cublasLtGetStatusString(st)
#else
#define KP_BLAS_WHY(st) "hipBLASLt status"
#endif
#define KP_BLAS(call)                                                                                   \
  do {                                                                                                  \
    hipblasStatus_t kp_bs_ = (call);                                                                    \
    if (kp_bs_ != HIPBLAS_STATUS_SUCCESS)                                                               \
      return kp_fail(KPICK_E_DEVICE, #call, "%s (%d) at %s:%d", KP_BLAS_WHY(kp_bs_), (int)kp_bs_, __FILE__, \
                     __LINE__);                                                                         \
  } while (0)

/* plan kinds beyond the kpick dtypes (0 bf16, 1 fp16, 2 fp8): */
enum { KP_PLAN_FP8_BATCH = 3 }; /* fp8 pointer-array batch of GEMVs; m is the batch count */

typedef struct kp_blas_plan {
  int32_t dtype, m;
  int64_t n, k;
  int count; /* usable heuristic answers */
  int scaled; /* fp8: 1 when the library applies the outer-vector scales */
  hipblasLtMatmulDesc_t desc;
  hipblasLtMatrixLayout_t a, b, d;
  hipblasLtMatmulHeuristicResult_t algos[KP_BLAS_MAX_ALGOS];
} kp_blas_plan;

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static hipblasLtHandle_t handle;
static int have_handle;
/* plans live until the process ends: launches captured in graphs use them */
static kp_blas_plan **plans;
static size_t nplans, cap_plans;

int kp_blas_init(void) {
  pthread_mutex_lock(&blas_lock);
  int st = KPICK_OK;
  if (!have_handle) {
    hipblasStatus_t bs = hipblasLtCreate(&handle);
    if (bs == HIPBLAS_STATUS_SUCCESS)
      have_handle = 1;
    else
      st = kp_fail(KPICK_E_DEVICE, "hipblasLtCreate", "%s (%d) at %s:%d", KP_BLAS_WHY(bs), (int)bs, __FILE__,
                   __LINE__);
  }
  pthread_mutex_unlock(&blas_lock);
  return st;
}

int kp_blas_version(char *out, size_t cap) {
#if defined(KPICK_GPU_CUDA)
  const size_t v = cublasLtGetVersion();
  snprintf(out, cap, "cublasLt %zu.%zu.%zu", v / 10000, (v / 100) % 100, v % 100);
#else
  int v = 0;
  if (!have_handle) return kp_fail(KPICK_E_STATE, "blas_version", "hipBLASLt is not initialised");
  KP_BLAS(hipblasLtGetVersion(handle, &v));
  snprintf(out, cap, "hipblaslt %d", v);
#endif
  return KPICK_OK;
}

size_t kp_blas_workspace_bytes(void) { return kp_blas_ws; }

static int plan_build_fp8(kp_blas_plan *pl);
static int plan_build_fp8_batch(kp_blas_plan *pl);

static int plan_build(kp_blas_plan *pl) {
  if (pl->dtype == 2) return plan_build_fp8(pl); /* KPICK_FP8 */
  if (pl->dtype == KP_PLAN_FP8_BATCH) return plan_build_fp8_batch(pl);
  const hipDataType t = pl->dtype == 0 ? HIP_R_16BF : HIP_R_16F;
  const hipblasOperation_t opt = HIPBLAS_OP_T, opn = HIPBLAS_OP_N;
  KP_BLAS(hipblasLtMatmulDescCreate(&pl->desc, HIPBLAS_COMPUTE_32F, HIP_R_32F));
  KP_BLAS(hipblasLtMatmulDescSetAttribute(pl->desc, HIPBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt));
  KP_BLAS(hipblasLtMatmulDescSetAttribute(pl->desc, HIPBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn));
  KP_BLAS(hipblasLtMatrixLayoutCreate(&pl->a, t, (uint64_t)pl->k, (uint64_t)pl->n, (int64_t)pl->k));
  KP_BLAS(hipblasLtMatrixLayoutCreate(&pl->b, t, (uint64_t)pl->k, (uint64_t)pl->m, (int64_t)pl->k));
  KP_BLAS(hipblasLtMatrixLayoutCreate(&pl->d, t, (uint64_t)pl->n, (uint64_t)pl->m, (int64_t)pl->n));
  hipblasLtMatmulPreference_t pref;
  KP_BLAS(hipblasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kp_blas_ws;
  hipblasStatus_t bs = hipblasLtMatmulPreferenceSetAttribute(pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  int returned = 0;
  if (bs == HIPBLAS_STATUS_SUCCESS)
    bs = hipblasLtMatmulAlgoGetHeuristic(handle, pl->desc, pl->a, pl->b, pl->d, pl->d, pref, KP_BLAS_MAX_ALGOS,
                                         pl->algos, &returned);
  hipblasLtMatmulPreferenceDestroy(pref);
  KP_BLAS(bs);
  /* keep the leading answers that the library marks usable */
  pl->count = 0;
  while (pl->count < returned && pl->algos[pl->count].state == HIPBLAS_STATUS_SUCCESS &&
         pl->algos[pl->count].workspaceSize <= kp_blas_ws)
    pl->count++;
  return KPICK_OK;
}

static int plan_get(int32_t dtype, int32_t m, int64_t n, int64_t k, kp_blas_plan **out) {
  if (!have_handle) return kp_fail(KPICK_E_STATE, "blaslt", "the BLAS is not initialised");
  pthread_mutex_lock(&blas_lock);
  for (size_t i = 0; i < nplans; i++) {
    kp_blas_plan *pl = plans[i];
    if (pl->dtype == dtype && pl->m == m && pl->n == n && pl->k == k) {
      pthread_mutex_unlock(&blas_lock);
      *out = pl;
      return KPICK_OK;
    }
  }
  int st = KPICK_OK;
  kp_blas_plan *pl = (kp_blas_plan *)calloc(1, sizeof *pl);
  if (nplans == cap_plans) {
    size_t cap = cap_plans ? cap_plans * 2 : 32;
    kp_blas_plan **grown = (kp_blas_plan **)realloc(plans, cap * sizeof *plans);
    if (grown) {
      plans = grown;
      cap_plans = cap;
    }
  }
  if (!pl || nplans == cap_plans) {
    st = kp_fail(KPICK_E_NOMEM, "blaslt", "host allocation failed");
  } else {
    pl->dtype = dtype;
    pl->m = m;
    pl->n = n;
    pl->k = k;
    st = plan_build(pl); /* on failure the plan's descriptors leak: a failed BLAS is not retried */
    if (st == KPICK_OK) plans[nplans++] = pl;
  }
  pthread_mutex_unlock(&blas_lock);
  if (st != KPICK_OK) {
    free(pl);
    return st;
  }
  *out = pl;
  return KPICK_OK;
}

int kp_blas_algo_count(int32_t dtype, int32_t m, int64_t n, int64_t k, int *count) {
  kp_blas_plan *pl;
  KP_TRY(plan_get(dtype, m, n, k, &pl));
  *count = pl->count;
  return KPICK_OK;
}

int kp_blas_matmul(int algo, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n, int64_t k,
                   void *workspace, hipStream_t stream) {
  kp_blas_plan *pl;
  KP_TRY(plan_get(dtype, m, n, k, &pl));
  if (algo < 0 || algo >= pl->count)
    return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "heuristic algo %d of %d for m=%d n=%lld k=%lld", algo, pl->count,
                   (int)m, (long long)n, (long long)k);
  const float one = 1.0f, zero = 0.0f;
  KP_BLAS(hipblasLtMatmul(handle, pl->desc, &one, w, pl->a, x, pl->b, &zero, y, pl->d, y, pl->d,
                          &pl->algos[algo].algo, workspace, kp_blas_ws, stream));
  return KPICK_OK;
}

/* ---- fp8: the W8A8 default's matmul (blaslt.h) ----
 * cuBLASLt's fp8 rules: A transposed and B not (the TN form above), e4m3
 * inputs, fp32 compute and scale type, K and the leading dimensions multiples
 * of 16 (the caller's problems have K % 16 == 0), 16-byte aligned pointers.
 * Per-row x scales and per-channel W scales go in as outer-vector scales
 * (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: A's vector has one scale per
 * row of op(A), our W rows; B's one per column of B, our x rows) where the
 * library and the device take them: a small matmul tries it once per process
 * (the heuristic alone may offer an algo that the call then refuses). Where
 * they are refused, the matmul runs with unit scales into fp32 and fp8.hip's
 * epilogue applies x scale * W scale, one more graph node. cuBLASLt 13.1.0
 * on the H200 (sm_90) refuses them (bench/gpu/fp8-scale-probe.cu): the
 * epilogue path is the one that runs there.
 * hipBLASLt: its e4m3 type on gfx942 is the FNUZ encoding (bias 8, another
 * code for every value), not the OCP E4M3FN of KPICK_FP8; the OCP type runs
 * on gfx950 only. So the HIP build has no fp8 matmul: its W8A8 default is
 * absent there, which KPICK_FP8's GEMVs do not need. */
#if defined(KPICK_GPU_CUDA)
static int fp8_outer = -1; /* -1 untried, 0 refused, 1 works; under blas_lock */

static void plan_drop(kp_blas_plan *pl) {
  if (pl->desc) cublasLtMatmulDescDestroy(pl->desc);
  if (pl->a) cublasLtMatrixLayoutDestroy(pl->a);
  if (pl->b) cublasLtMatrixLayoutDestroy(pl->b);
  if (pl->d) cublasLtMatrixLayoutDestroy(pl->d);
  pl->desc = NULL;
  pl->a = pl->b = pl->d = NULL;
  pl->count = 0;
}

/* descriptors and heuristic answers for one mode; no record on refusal (the
 * caller may try the other mode). batch: a pointer-array batch of pl->m GEMVs
 * (A, B and D each an array of device pointers, one matrix per entry; B k x 1,
 * D rows x 1), unit scales; else one matmul of pl->m columns. */
static cublasStatus_t fp8_try(kp_blas_plan *pl, int outer, int batch) {
  const cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
  const cudaDataType_t out = outer ? CUDA_R_16BF : CUDA_R_32F;
  cublasStatus_t st = cublasLtMatmulDescCreate(&pl->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn);
  if (outer) {
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&pl->a, CUDA_R_8F_E4M3, (uint64_t)pl->k, (uint64_t)pl->n, (int64_t)pl->k);
  const uint64_t cols = batch ? 1 : (uint64_t)pl->m;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&pl->b, CUDA_R_8F_E4M3, (uint64_t)pl->k, cols, (int64_t)pl->k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&pl->d, out, (uint64_t)pl->n, cols, (int64_t)pl->n);
  if (batch) { /* C is D's layout (the calls pass it twice) */
    const int32_t count = pl->m;
    const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    cublasLtMatrixLayout_t all[3] = {pl->a, pl->b, pl->d};
    for (int i = 0; i < 3 && st == CUBLAS_STATUS_SUCCESS; i++) {
      st = cublasLtMatrixLayoutSetAttribute(all[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutSetAttribute(all[i], CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof mode);
    }
  }
  cublasLtMatmulPreference_t pref = NULL;
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
  const uint64_t ws = kp_blas_ws;
  const uint32_t align = 16; /* the scratch and y are 16-byte aligned, W's scales too */
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align);
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle, pl->desc, pl->a, pl->b, pl->d, pl->d, pref, KP_BLAS_MAX_ALGOS, pl->algos,
                                        &returned);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  pl->count = 0;
  while (st == CUBLAS_STATUS_SUCCESS && pl->count < returned && pl->algos[pl->count].state == CUBLAS_STATUS_SUCCESS &&
         pl->algos[pl->count].workspaceSize <= kp_blas_ws)
    pl->count++;
  if (st == CUBLAS_STATUS_SUCCESS && pl->count == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (st != CUBLAS_STATUS_SUCCESS) plan_drop(pl);
  pl->scaled = st == CUBLAS_STATUS_SUCCESS ? outer : 0;
  return st;
}

static cublasStatus_t fp8_call(const kp_blas_plan *pl, int algo, const void *xq, const float *sx, const void *wq,
                               const float *sw, void *d, void *workspace, cudaStream_t stream) {
  if (pl->scaled) {
    /* the vectors of this call: set on the plan's descriptor, read by the enqueue (under blas_lock) */
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(handle, pl->desc, &one, wq, pl->a, xq, pl->b, &zero, d, pl->d, d, pl->d, &pl->algos[algo].algo,
                        workspace, kp_blas_ws, stream);
}

/* Once per process: does a 64 x 64 x 1 matmul with outer-vector scales run,
 * and give the scaled sums? Codes 0x38 (1.0) everywhere, x scale 2, W row i's
 * scale i + 1: output i is 64 * 2 * (i + 1), exact in bf16, and a vector read
 * on the wrong side gives other values. Under blas_lock. */
static int fp8_probe_outer(void) {
  if (fp8_outer >= 0) return fp8_outer;
  const int64_t n = 64, k = 64;
  kp_blas_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.dtype = 2;
  pl.m = 1;
  pl.n = n;
  pl.k = k;
  int ok = 0;
  if (fp8_try(&pl, 1, 0) == CUBLAS_STATUS_SUCCESS) {
    char *buf = NULL;
    void *ws = NULL;
    const size_t at_x = 4096, at_s = 8192, at_d = 12288, bytes = 16384;
    if (cudaMalloc((void **)&buf, bytes) == cudaSuccess && cudaMalloc(&ws, kp_blas_ws) == cudaSuccess) {
      float scales[65];
      for (int i = 0; i < 64; i++) scales[i] = (float)(i + 1);
      scales[64] = 2.0f;
      uint16_t out[64] = {0};
      cudaStream_t s = NULL;
      if (cudaMemset(buf, 0x38, (size_t)(n * k + k)) == cudaSuccess &&
          cudaMemcpy(buf + at_s, scales, sizeof scales, cudaMemcpyHostToDevice) == cudaSuccess &&
          fp8_call(&pl, 0, buf + at_x, (const float *)(buf + at_s + 256), buf, (const float *)(buf + at_s), buf + at_d, ws, s) ==
              CUBLAS_STATUS_SUCCESS &&
          cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(out, buf + at_d, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess) {
        ok = 1;
        for (int i = 0; i < 64; i++) {
          const float want = 128.0f * (float)(i + 1);
          uint32_t bits;
          memcpy(&bits, &want, 4);
          ok &= out[i] == (uint16_t)(bits >> 16);
        }
      }
    }
    (void)cudaGetLastError();
    if (buf) cudaFree(buf);
    if (ws) cudaFree(ws);
    plan_drop(&pl);
  }
  fp8_outer = ok;
  return ok;
}

static int plan_build_fp8(kp_blas_plan *pl) {
  if (fp8_probe_outer() && fp8_try(pl, 1, 0) == CUBLAS_STATUS_SUCCESS) return KPICK_OK;
  const cublasStatus_t st = fp8_try(pl, 0, 0);
  if (st != CUBLAS_STATUS_SUCCESS)
    return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "no fp8 matmul for m=%d rows=%lld k=%lld: %s", (int)pl->m,
                   (long long)pl->n, (long long)pl->k, KP_BLAS_WHY(st));
  return KPICK_OK;
}

/* the batch takes unit scales only: per-matrix scale vectors have no pointer-array form */
static int plan_build_fp8_batch(kp_blas_plan *pl) {
  const cublasStatus_t st = fp8_try(pl, 0, 1);
  if (st != CUBLAS_STATUS_SUCCESS)
    return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "no pointer-array fp8 batch of %d x rows=%lld k=%lld: %s", (int)pl->m,
                   (long long)pl->n, (long long)pl->k, KP_BLAS_WHY(st));
  return KPICK_OK;
}

int kp_blas_fp8_built(void) { return 1; }
#else
static int plan_build_fp8(kp_blas_plan *pl) {
  return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "no fp8 matmul on HIP (hipBLASLt's gfx942 e4m3 is FNUZ, not KPICK_FP8's)");
}
static int plan_build_fp8_batch(kp_blas_plan *pl) { return plan_build_fp8(pl); }
int kp_blas_fp8_built(void) { return 0; }
#endif

int kp_blas_fp8_plan(int32_t m, int64_t rows, int64_t k, int *count, int *scaled) {
  kp_blas_plan *pl;
  KP_TRY(plan_get(2, m, rows, k, &pl));
  *count = pl->count;
  *scaled = pl->scaled;
  return KPICK_OK;
}

int kp_blas_fp8_matmul(int algo, const void *xq, const float *sx, const void *wq, const float *sw, void *d, int32_t m,
                       int64_t rows, int64_t k, void *workspace, hipStream_t stream) {
#if defined(KPICK_GPU_CUDA)
  kp_blas_plan *pl;
  KP_TRY(plan_get(2, m, rows, k, &pl));
  if (algo < 0 || algo >= pl->count)
    return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "fp8 heuristic algo %d of %d for m=%d rows=%lld k=%lld", algo, pl->count,
                   (int)m, (long long)rows, (long long)k);
  pthread_mutex_lock(&blas_lock);
  const cublasStatus_t st = fp8_call(pl, algo, xq, sx, wq, sw, d, workspace, stream);
  pthread_mutex_unlock(&blas_lock);
  KP_BLAS(st);
  return KPICK_OK;
#else
  return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "no fp8 matmul on HIP");
#endif
}

/* ---- fp8 pointer-array batch (the fp8 moe default, moe.hip) ----
 * Entry i: d[i][rows] = A[i] b[i], A[i] = rows x k e4m3 codes row-major (the
 * TN form above: a k x rows column-major matrix, transposed), b[i] k codes,
 * d[i] fp32, unit scales. One plan per (batch, rows, k), cached with the
 * others; the pointer arrays are device memory the caller's kernel filled. */
int kp_blas_fp8_batch_plan(int32_t batch, int64_t rows, int64_t k, int *count) {
  kp_blas_plan *pl;
  KP_TRY(plan_get(KP_PLAN_FP8_BATCH, batch, rows, k, &pl));
  *count = pl->count;
  return KPICK_OK;
}

int kp_blas_fp8_batch(int algo, const void *const *a, const void *const *b, void *const *d, int32_t batch, int64_t rows,
                      int64_t k, void *workspace, hipStream_t stream) {
#if defined(KPICK_GPU_CUDA)
  kp_blas_plan *pl;
  KP_TRY(plan_get(KP_PLAN_FP8_BATCH, batch, rows, k, &pl));
  if (algo < 0 || algo >= pl->count)
    return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "fp8 batch heuristic algo %d of %d for %d x rows=%lld k=%lld", algo,
                   pl->count, (int)batch, (long long)rows, (long long)k);
  const float one = 1.0f, zero = 0.0f;
  /* in pointer-array mode the A, B, C and D arguments are the arrays themselves */
  KP_BLAS(cublasLtMatmul(handle, pl->desc, &one, a, pl->a, b, pl->b, &zero, d, pl->d, (void *)d, pl->d,
                         &pl->algos[algo].algo, workspace, kp_blas_ws, stream));
  return KPICK_OK;
#else
  return kp_fail(KPICK_E_UNSUPPORTED, "blaslt", "no fp8 matmul on HIP");
#endif
}
