// fp8-batch-probe.cu: does this cuBLASLt run a pointer-array batched e4m3 x e4m3
// matmul (one GEMV per (row, expert) pair, each from its own device pointers), the
// vendor call an fp8 moe default would make as moe.blas makes cuBLAS's batched GEMM?
// Tries bf16 (the control: what moe.blas does through cuBLASLt) and e4m3, D in fp32
// and bf16, unit scales. One line per try: the heuristic's answer, the matmul's
// status, and whether every pair's output is right.
//   nvcc -O2 -o /tmp/bprobe bench/gpu/fp8-batch-probe.cu -lcublasLt && /tmp/bprobe
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <vector>

static const int N = 256, K = 256, P = 8; // W rows, reduction, pairs (each: one x row, its own W)

static float bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// pair p's W: every element = the code of (p + 1) / 8 (exact in e4m3 and bf16); x = 1:
// out[p][n] = K (p + 1) / 8
static void try_batch(cublasLtHandle_t h, cudaDataType_t in, cudaDataType_t out) {
  const int es = in == CUDA_R_8F_E4M3 ? 1 : 2, os = out == CUDA_R_32F ? 4 : 2;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn);
  cublasLtMatrixLayoutCreate(&a, in, K, N, K);
  cublasLtMatrixLayoutCreate(&b, in, K, 1, K);
  cublasLtMatrixLayoutCreate(&d, out, N, 1, N);
  const int32_t mode = 1; // CUBLASLT_BATCH_MODE_POINTER_ARRAY
  const int32_t count = P;
  cublasStatus_t sm = CUBLAS_STATUS_SUCCESS;
  for (cublasLtMatrixLayout_t l : {a, b, d}) {
    if (sm == CUBLAS_STATUS_SUCCESS) sm = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    if (sm == CUBLAS_STATUS_SUCCESS) sm = cublasLtMatrixLayoutSetAttribute(l, (cublasLtMatrixLayoutAttribute_t)8, &mode, sizeof mode);
  }
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = 32u << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t res[8];
  int found = 0;
  cublasStatus_t sh = sm == CUBLAS_STATUS_SUCCESS ? cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, d, d, pref, 8, res, &found)
                                                  : CUBLAS_STATUS_NOT_SUPPORTED;
  char *w, *x, *y;
  void **ptrs, *wsp;
  cudaMalloc((void **)&w, (size_t)P * N * K * es);
  cudaMalloc((void **)&x, (size_t)P * K * es);
  cudaMalloc((void **)&y, (size_t)P * N * os);
  cudaMalloc((void **)&ptrs, 3 * P * sizeof(void *));
  cudaMalloc(&wsp, ws);
  std::vector<uint8_t> hw((size_t)N * K * es);
  for (int p = 0; p < P; p++) {
    // (p + 1) / 8 in e4m3: exponent bias 7; in bf16: exact too
    float v = (p + 1) / 8.0f;
    uint8_t code = 0;
    if (in == CUDA_R_8F_E4M3) {
      int e = 0;
      float m = frexpf(v, &e); // v = m 2^e, m in [0.5, 1)
      int mant = (int)((m * 2 - 1) * 8 + 0.5f);
      code = (uint8_t)(((e - 1 + 7) << 3) | mant);
      memset(hw.data(), code, hw.size());
    } else {
      uint32_t u;
      memcpy(&u, &v, 4);
      uint16_t b16 = (uint16_t)(u >> 16);
      for (size_t i = 0; i < (size_t)N * K; i++) memcpy(hw.data() + 2 * i, &b16, 2);
    }
    cudaMemcpy(w + (size_t)p * N * K * es, hw.data(), hw.size(), cudaMemcpyHostToDevice);
  }
  std::vector<uint8_t> hx((size_t)P * K * es);
  for (size_t i = 0; i < (size_t)P * K; i++) {
    if (es == 1) hx[i] = 0x38; // 1.0
    else { uint16_t one = 0x3f80; memcpy(hx.data() + 2 * i, &one, 2); }
  }
  cudaMemcpy(x, hx.data(), hx.size(), cudaMemcpyHostToDevice);
  std::vector<void *> hp(3 * P);
  for (int p = 0; p < P; p++) {
    hp[p] = w + (size_t)p * N * K * es;
    hp[P + p] = x + (size_t)p * K * es;
    hp[2 * P + p] = y + (size_t)p * N * os;
  }
  cudaMemcpy(ptrs, hp.data(), hp.size() * sizeof(void *), cudaMemcpyHostToDevice);
  cudaMemset(y, 0, (size_t)P * N * os);
  cublasStatus_t sr = CUBLAS_STATUS_NOT_SUPPORTED;
  int right = -1;
  float first_bad = 0;
  if (sh == CUBLAS_STATUS_SUCCESS && found > 0) {
    float one = 1, zero = 0;
    sr = cublasLtMatmul(h, desc, &one, ptrs, a, ptrs + P, b, &zero, ptrs + 2 * P, d, ptrs + 2 * P, d, &res[0].algo, wsp, ws, 0);
    cudaError_t e = cudaDeviceSynchronize();
    if (sr == CUBLAS_STATUS_SUCCESS && e == cudaSuccess) {
      std::vector<uint8_t> hy((size_t)P * N * os);
      cudaMemcpy(hy.data(), y, hy.size(), cudaMemcpyDeviceToHost);
      right = 1;
      for (int p = 0; p < P && right; p++)
        for (int n = 0; n < N; n++) {
          float got;
          if (os == 4) memcpy(&got, hy.data() + 4 * ((size_t)p * N + n), 4);
          else { uint16_t v; memcpy(&v, hy.data() + 2 * ((size_t)p * N + n), 2); got = bf16_to_f32(v); }
          if (got != K * (p + 1) / 8.0f) { right = 0; first_bad = got; break; }
        }
    } else {
      printf("  cuda: %s\n", cudaGetErrorString(e));
    }
  }
  printf("pointer-array x%d, A/B %s, D %s: set batch mode %d, heuristic %d (%d algos), matmul %d (%s), outputs %s",
         P, in == CUDA_R_8F_E4M3 ? "e4m3" : "bf16", out == CUDA_R_32F ? "fp32" : "bf16", (int)sm, (int)sh, found, (int)sr,
         cublasLtGetStatusString(sr), right == 1 ? "right" : right == 0 ? "WRONG" : "none");
  if (right == 0) printf(" (got %g)", first_bad);
  printf("\n");
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  cudaFree(ptrs);
  cudaFree(wsp);
}

int main() {
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("%s sm_%d%d, cublasLt %zu\n", p.name, p.major, p.minor, cublasLtGetVersion());
  try_batch(h, CUDA_R_16BF, CUDA_R_16BF);
  try_batch(h, CUDA_R_16BF, CUDA_R_32F);
  try_batch(h, CUDA_R_8F_E4M3, CUDA_R_32F);
  try_batch(h, CUDA_R_8F_E4M3, CUDA_R_16BF);
  return 0;
}
