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

typedef struct kp_blas_plan {
  int32_t dtype, m;
  int64_t n, k;
  int count; /* usable heuristic answers */
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

static int plan_build(kp_blas_plan *pl) {
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
