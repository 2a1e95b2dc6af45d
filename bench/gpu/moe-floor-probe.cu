// moe-floor-probe.cu: why the moe read floor slowed (18.8 us at f0f72a1, 35.0 at
// bc00ad8, 52.6 at 9c0af4a for the 8 bf16 experts of a Qwen3-30B-A3B row), timed on
// the same bytes in three shapes of its kernel:
//   regions  f0f72a1's: a block per (expert, W_gate_up or W_down), pointer and length
//            from two scalars
//   indexed  9c0af4a's: a block per (expert, span of four), the span taken from the
//            kernel's parameter struct by a runtime index (sp.s[blockIdx.y & 3]), which
//            copies the struct to local memory in every thread
//   selected the same spans picked by constant indices (a select of four): no copy
// Weights of E experts [E][2N][K] then [E][K][N], bf16 or fp8 (codes then scales, as
// kpick.h lays them out); 8 experts read, rotating over copies so every launch is cold
// in L2. cudaEvent median of 50 launches each; the bytes read; GB/s.
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/mfp bench/gpu/moe-floor-probe.cu && /tmp/mfp
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <vector>

struct __attribute__((aligned(16))) v16 {
  uint32_t x, y, z, w;
};
__device__ __forceinline__ v16 ld_stream(const void *p) {
  v16 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
static constexpr int threads = 512, unroll = 8;

__device__ __forceinline__ void consume(const v16 (&v)[unroll], float *sink) {
  float a = 0.0f;
#pragma unroll
  for (int q = 0; q < unroll; ++q) a += __uint_as_float(v[q].x ^ v[q].y ^ v[q].z ^ v[q].w);
  if (a == 1.5e-30f) *sink = a;
}

__global__ void __launch_bounds__(threads) regions(const char *w, const int32_t *used, int64_t gu, int64_t dn, int64_t E,
                                                   float *sink) {
  const int64_t e = used[blockIdx.y >> 1];
  const bool g = (blockIdx.y & 1) == 0;
  const v16 *p = (const v16 *)(g ? w + e * gu : w + E * gu + e * dn);
  const int64_t n = (g ? gu : dn) / 16, base = (int64_t)blockIdx.x * threads * unroll + threadIdx.x;
  v16 v[unroll];
#pragma unroll
  for (int q = 0; q < unroll; ++q) {
    const int64_t i = base + (int64_t)q * threads;
    v[q] = i < n ? ld_stream(p + i) : v16{0u, 0u, 0u, 0u};
  }
  consume(v, sink);
}

struct span {
  int64_t at, stride, bytes;
};
struct spans {
  span s[4];
  int64_t pieces;
};
__device__ __forceinline__ void pieces_of(const span &sp, int64_t e, int64_t pieces, int64_t &first, int64_t &count) {
  const int64_t a = sp.at + e * sp.stride, end = (a + sp.bytes + 15) / 16;
  first = a / 16;
  count = sp.bytes > 0 ? (end < pieces ? end : pieces) - first : 0;
  if (count < 0) count = 0;
}
template <bool SELECT>
__global__ void __launch_bounds__(threads) spanned(const char *w, const int32_t *used, spans sp, float *sink) {
  const int64_t e = used[blockIdx.y >> 2];
  const int which = blockIdx.y & 3;
  span s;
  if (SELECT) s = which == 0 ? sp.s[0] : which == 1 ? sp.s[1] : which == 2 ? sp.s[2] : sp.s[3];
  else s = sp.s[which];
  int64_t f, n;
  pieces_of(s, e, sp.pieces, f, n);
  const int64_t base = (int64_t)blockIdx.x * threads * unroll + threadIdx.x;
  if (base >= n) return;
  const v16 *p = (const v16 *)w + f;
  v16 v[unroll];
#pragma unroll
  for (int q = 0; q < unroll; ++q) {
    const int64_t i = base + (int64_t)q * threads;
    v[q] = i < n ? ld_stream(p + i) : v16{0u, 0u, 0u, 0u};
  }
  consume(v, sink);
}

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main() {
  const int64_t E = 128, N = 768, K = 2048, nused = 8, copies = 4;
  const int32_t ids[nused] = {3, 17, 30, 44, 61, 77, 95, 120};
  int32_t *used;
  float *sink;
  CK(cudaMalloc(&used, sizeof ids));
  CK(cudaMemcpy(used, ids, sizeof ids, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&sink, 4));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    const int64_t es = fp8 ? 1 : 2;
    const int64_t scales_gu = (E * 2 * N * K + 15) / 16 * 16, scales_dn = (E * K * N + 15) / 16 * 16;
    const int64_t gu_bytes = fp8 ? scales_gu + 4 * E * 2 * N : E * 2 * N * K * 2;
    const int64_t total = gu_bytes + (fp8 ? scales_dn + 4 * E * K : E * K * N * 2);
    std::vector<char *> w(copies);
    for (auto &p : w) {
      CK(cudaMalloc(&p, total));
      CK(cudaMemset(p, 1, total));
    }
    const int64_t read = nused * (3 * N * K * es + (fp8 ? 4 * (2 * N + K) : 0));
    spans sp;
    if (fp8) {
      sp.s[0] = {0, 2 * N * K, 2 * N * K};
      sp.s[1] = {scales_gu, 2 * N * 4, 2 * N * 4};
      sp.s[2] = {gu_bytes, K * N, K * N};
      sp.s[3] = {gu_bytes + scales_dn, K * 4, K * 4};
    } else {
      sp.s[0] = {0, 2 * N * K * 2, 2 * N * K * 2};
      sp.s[1] = {0, 0, 0};
      sp.s[2] = {gu_bytes, K * N * 2, K * N * 2};
      sp.s[3] = {0, 0, 0};
    }
    sp.pieces = total / 16;
    const int64_t per_block = (int64_t)threads * unroll, most = (2 * N * K * es + 32) / 16;
    const dim3 g4((unsigned)((most + per_block - 1) / per_block), (unsigned)(4 * nused));
    const dim3 g2((unsigned)((2 * N * K * es / 16 + per_block - 1) / per_block), (unsigned)(2 * nused));
    for (int kind = 0; kind < 3; ++kind) {
      if (fp8 && kind == 0) continue; /* regions knows no scales */
      std::vector<float> t;
      for (int it = 0; it < 60; ++it) {
        const char *p = w[it % copies];
        CK(cudaEventRecord(a));
        if (kind == 0) regions<<<g2, threads>>>(p, used, 2 * N * K * 2, K * N * 2, E, sink);
        else if (kind == 1) spanned<false><<<g4, threads>>>(p, used, sp, sink);
        else spanned<true><<<g4, threads>>>(p, used, sp, sink);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (it >= 10) t.push_back(ms * 1000.0f);
      }
      std::sort(t.begin(), t.end());
      const float med = t[t.size() / 2];
      printf("%s %-8s %8.2f us  %6.1f MB  %7.1f GB/s\n", fp8 ? "fp8 " : "bf16", kind == 0 ? "regions" : kind == 1 ? "indexed" : "selected",
             med, read / 1e6, read / (med * 1e3));
    }
    for (auto p : w) CK(cudaFree(p));
  }
  return 0;
}
