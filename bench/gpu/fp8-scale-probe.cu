// fp8-scale-probe.cu: which scale modes does this cuBLASLt take for an e4m3 x e4m3
// matmul on this device? (blaslt.cpp's W8A8 default uses outer-vector scales where
// they run, else unit scales and an epilogue.) Prints one line per try: each step's
// status, the heuristic's answer count, and whether the outputs are right.
//   nvcc -O2 -o /tmp/probe bench/gpu/fp8-scale-probe.cu -lcublasLt && /tmp/probe
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

static const int N = 64, K = 64, M = 2;

// D[n][m] = sum_k A[k][n] B[k][m] * (outer ? sw[n] * sx[m] : 1); every code 0x38 = 1.0
static void try_mode(cublasLtHandle_t h, bool outer, cudaDataType_t out, bool align_prefs) {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasStatus_t st = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn);
  cublasStatus_t sm = CUBLAS_STATUS_SUCCESS;
  if (outer) {
    cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    sm = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
    if (sm == CUBLAS_STATUS_SUCCESS) sm = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
  }
  cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, K);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, M, K);
  cublasLtMatrixLayoutCreate(&d, out, N, M, N);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = 32u << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (align_prefs) {
    uint32_t al = 16;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
  }
  cublasLtMatmulHeuristicResult_t res[8];
  int count = 0;
  cublasStatus_t sh = cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, d, d, pref, 8, res, &count);
  char *buf;
  void *wsp;
  cudaMalloc((void **)&buf, 1 << 16);
  cudaMalloc(&wsp, ws);
  cudaMemset(buf, 0x38, N * K + M * K);
  float sc[N + M];
  for (int i = 0; i < N; i++) sc[i] = (float)(i + 1);
  for (int i = 0; i < M; i++) sc[N + i] = (float)(2 + i);
  cudaMemcpy(buf + 8192, sc, sizeof sc, cudaMemcpyHostToDevice);
  const float *sw = (const float *)(buf + 8192), *sx = sw + N;
  cublasStatus_t sp = CUBLAS_STATUS_SUCCESS, sr = CUBLAS_STATUS_NOT_SUPPORTED;
  if (outer) {
    sp = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw);
    if (sp == CUBLAS_STATUS_SUCCESS) sp = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx);
  }
  int right = -1;
  if (sh == CUBLAS_STATUS_SUCCESS && count > 0) {
    float one = 1, zero = 0;
    sr = cublasLtMatmul(h, desc, &one, buf, a, buf + N * K, b, &zero, buf + 16384, d, buf + 16384, d, &res[0].algo, wsp, ws, 0);
    cudaError_t e = cudaDeviceSynchronize();
    if (sr == CUBLAS_STATUS_SUCCESS && e == cudaSuccess) {
      right = 1;
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          float want = outer ? (float)K * (n + 1) * (2 + m) : (float)K, got;
          if (out == CUDA_R_32F) cudaMemcpy(&got, buf + 16384 + 4 * (m * N + n), 4, cudaMemcpyDeviceToHost);
          else {
            uint16_t v;
            cudaMemcpy(&v, buf + 16384 + 2 * (m * N + n), 2, cudaMemcpyDeviceToHost);
            uint32_t u = (uint32_t)v << 16;
            memcpy(&got, &u, 4);
          }
          if (got != want) right = 0;
        }
    } else {
      printf("  cuda: %s\n", cudaGetErrorString(e));
    }
  }
  printf("scale %s, D %s, align prefs %d: set mode %d, heuristic %d (%d algos), set pointers %d, matmul %d (%s), outputs %s\n",
         outer ? "outer-vector" : "unit", out == CUDA_R_32F ? "fp32" : "bf16", (int)align_prefs, (int)sm, (int)sh, count,
         (int)sp, (int)sr, cublasLtGetStatusString(sr), right == 1 ? "right" : right == 0 ? "WRONG" : "none");
  cudaFree(buf);
  cudaFree(wsp);
}

int main() {
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  size_t v = cublasLtGetVersion();
  printf("%s sm_%d%d, cublasLt %zu\n", p.name, p.major, p.minor, v);
  for (int outer = 1; outer >= 0; outer--)
    for (int o = 0; o < 2; o++)
      for (int al = 1; al >= 0; al--) try_mode(h, outer != 0, o ? CUDA_R_32F : CUDA_R_16BF, al != 0);
  return 0;
}
