/* moe-prefetch-probe.cu: can the routed experts' down weights stream into L2 while their gate/up
 * runs? At one row the moe block of Qwen3-30B-A3B reads its 8 experts' gate/up (50 MB) and then,
 * once their silu(g) * u exists, their down (25 MB): moe.fused takes 27.3 us where the read floor
 * of all 75 MB is 18.7 (issue 14: rows 1-8 at 1.33x the floor against 1.3; Qwen3-30B-A3B c=1 at
 * 1.20x the default against 1.3). The down phase waits for the gate/up phase, and the bandwidth
 * idles between their tails and ramps. Its weights are known before either starts (the ids), and
 * the L2 (50 MB) holds them: if the gate/up kernel asks for them while it streams its own, the
 * down phase reads L2 instead of DRAM.
 *   two       gate/up, then down (PDL: its first loads before the wait), gemv_core.h's warps (a
 *             warp per gate/up column pair, then a warp per output column over the row's experts
 *             in order)
 *   pf.start  the same, each gate/up warp first asking the L2 for its share of the down weights
 *             (cp.async.bulk.prefetch.L2, 4 KB a warp, sm_90)
 *   pf.end    the share asked for after the warp's own dot product
 * Rows 1 (8 experts) and 2 (16, no expert shared: the uniform routing's usual case), hidden
 * 2048, moe_intermediate 768, bf16; each row's 8 gates 1/8. The experts' weights rotate over
 * copies past the L2; a launch pair (gate/up plain, down PDL) at a time, median of batches
 * (probe.h); beside it the read floor of the same bytes. Each variant checked against an fp64
 * reference (host, from the same hashed values: hash-data.h) before it is timed.
 *   nvcc -O3 -std=c++17 -arch=sm_90 -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU -o build/moe-prefetch \
 *     bench/gpu/moe-prefetch-probe.cu && build/moe-prefetch          # exit 1: a check failed
 * Not part of the library or its space token. Run in session 22 at 111fb16: no gain from the
 * prefetch (bench/results/h200-2026-12-05-probes-peer-111fb16/NOTES.md). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <vector>

#include "../../hip-lib/src/gpu/gemv_core.h"
#include "hash-data.h"
#include "probe.h"

#define CK(x) KP_PROBE_CK("moe-prefetch", x)

static constexpr int64_t kHidden = 2048, kInter = 768;
static constexpr int kTopk = 8, kMaxPairs = 16, kWarpsPerBlock = 4, kPrefetchBytes = 4096;
/* one expert: gate/up [2 I, H] then down [H, I], bf16 */
static constexpr int64_t kGuElems = 2 * kInter * kHidden, kDownElems = kHidden * kInter;
static constexpr int64_t kExpertBytes = (kGuElems + kDownElems) * 2;

/* pairs p = t * 8 + j: row t's j-th expert, at expert slot p of the copy (the probe lays the
 * active experts out one after another: where they sit in a 128-expert table does not change
 * the bytes read) */
struct Call {
  const uint16_t *experts; /* P experts of kExpertBytes */
  const uint16_t *x;       /* [M, H] */
  uint16_t *h;             /* [P, I] */
  uint16_t *y;             /* [M, H] */
  int M;
};

__device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/* h[p][n] = silu(gate_n . x_t) * (up_n . x_t); PF 1/2: the warp's share of the down weights asked
 * of the L2 before / after its dot product */
template <int PF>
__global__ void __launch_bounds__(8 * KP_WARP) gate_up_kernel(Call c) {
  kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp, P = c.M * kTopk;
  const int64_t warp = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  const int p = (int)(warp / kInter), n = (int)(warp % kInter);
  if (p >= P) return;
  const uint16_t *e = c.experts + (int64_t)p * (kExpertBytes / 2);
  /* the down weights of all P experts, in kPrefetchBytes shares over the grid's warps */
  auto ask = [&]() {
    const int64_t share = warp * kPrefetchBytes, downs = (int64_t)P * kDownElems * 2;
    if (lane != 0) return;
    for (int64_t b = share; b < downs; b += (int64_t)P * kInter * kPrefetchBytes) {
      const int64_t q = b / (kDownElems * 2), off = b % (kDownElems * 2); /* expert q's down, at off */
      const int64_t len = kDownElems * 2 - off < kPrefetchBytes ? kDownElems * 2 - off : kPrefetchBytes;
      prefetch_l2(reinterpret_cast<const char *>(c.experts + q * (kExpertBytes / 2) + kGuElems) + off, (uint32_t)len);
    }
  };
  if (PF == 1) ask();
  const uint16_t *rows[2] = {e + (int64_t)n * kHidden, e + (int64_t)(kInter + n) * kHidden};
  float acc[2][1];
  kp_gemv_rows<KP_DT_BF16, 1, 2, 8>(rows, c.x + (int64_t)(p / kTopk) * kHidden, kHidden, lane, acc);
  const float g = kp_warp_sum<kp_warp>(acc[0][0]), u = kp_warp_sum<kp_warp>(acc[1][0]);
  if (lane == 0) c.h[(int64_t)p * kInter + n] = kp_round<KP_DT_BF16>(kp_silu_mul(g, u));
  if (PF == 2) ask();
}

/* y[t][col] = sum over row t's experts j, in order, of (1/8) down_col . h[t * 8 + j] */
__global__ void __launch_bounds__(8 * KP_WARP) down_kernel(Call c) {
  const int lane = threadIdx.x % kp_warp;
  const int64_t col = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (col >= kHidden) return;
  for (int t = 0; t < c.M; ++t) {
    float y = 0.0f;
    for (int j = 0; j < kTopk; ++j) {
      const int p = t * kTopk + j;
      const uint16_t *rows[1] = {c.experts + (int64_t)p * (kExpertBytes / 2) + kGuElems + col * kInter};
      float acc[1][1];
      kp_gemv_rows<KP_DT_BF16, 1, 1, 8>(rows, c.h + (int64_t)p * kInter, kInter, lane, acc); /* its first batch waits (PDL) */
      y = fmaf(kp_warp_sum<kp_warp>(acc[0][0]), 1.0f / kTopk, y);
    }
    if (lane == 0) c.y[(int64_t)t * kHidden + col] = kp_round<KP_DT_BF16>(y);
  }
}

static void run(int pf, const Call &c, cudaStream_t s) {
  const int64_t gu_blocks = (int64_t)c.M * kTopk * kInter / kWarpsPerBlock, down_blocks = kHidden / kWarpsPerBlock;
  kp_probe_launch(pf == 0 ? gate_up_kernel<0> : pf == 1 ? gate_up_kernel<1> : gate_up_kernel<2>, gu_blocks, kWarpsPerBlock * 32, false, s, c);
  kp_probe_launch(down_kernel, down_blocks, kWarpsPerBlock * 32, true, s, c);
}

int main() {
  const cudaDeviceProp prop =
      kp_probe_device("moe-prefetch", "median us of a (gate/up, down) pair over batches of 20, experts past the L2");
  const int units = prop.multiProcessorCount;
  /* copies of the 16 experts that together outsize the L2 four times */
  const int64_t copy_bytes = kMaxPairs * kExpertBytes;
  const int copies = (int)std::max<int64_t>(2, (int64_t)(4 * prop.l2CacheSize) / copy_bytes + 1);
  uint16_t *w, *x, *h, *y;
  CK(cudaMalloc(&w, (size_t)copy_bytes * copies));
  for (int k = 0; k < copies; ++k) {
    fill_kernel<<<1024, 256>>>(w + (size_t)k * (copy_bytes / 2), copy_bytes / 2, 7, 0); /* every copy the same values */
    CK(cudaGetLastError());
  }
  CK(cudaMalloc(&x, 2 * kHidden * 2));
  fill_kernel<<<16, 256>>>(x, 2 * kHidden, 8, 1);
  CK(cudaMalloc(&h, kMaxPairs * kInter * 2));
  CK(cudaMalloc(&y, 2 * kHidden * 2));
  CK(cudaDeviceSynchronize());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  static const char *const names[] = {"two", "pf.start", "pf.end"};
  printf("%4s %-9s %9s %9s %8s %10s\n", "rows", "variant", "us", "x floor", "GB/s", "rel_err");
  int failed = 0;
  for (int M : {1, 2}) {
    const int P = M * kTopk;
    const int64_t bytes = P * kExpertBytes;
    /* fp64 reference from the hashed values */
    std::vector<double> hv((size_t)P * kInter), want((size_t)M * kHidden, 0.0);
    for (int p = 0; p < P; ++p)
      for (int64_t n = 0; n < kInter; ++n) {
        double g = 0.0, u = 0.0;
        const uint64_t e0 = (uint64_t)p * (kExpertBytes / 2), xt = (uint64_t)(p / kTopk) * kHidden;
        for (int64_t k = 0; k < kHidden; ++k) {
          const double xv = from_bf16(x_val(8, xt + k));
          g += from_bf16(w_val(7, e0 + n * kHidden + k)) * xv;
          u += from_bf16(w_val(7, e0 + (kInter + n) * kHidden + k)) * xv;
        }
        hv[(size_t)p * kInter + n] = from_bf16(to_bf16((float)(g / (1.0 + exp(-g)) * u))); /* h is stored in bf16 */
      }
    double big = 0.0;
    for (int t = 0; t < M; ++t)
      for (int64_t col = 0; col < kHidden; ++col) {
        double sum = 0.0;
        for (int j = 0; j < kTopk; ++j) {
          const int p = t * kTopk + j;
          const uint64_t d0 = (uint64_t)p * (kExpertBytes / 2) + kGuElems + col * kInter;
          double dot = 0.0;
          for (int64_t k = 0; k < kInter; ++k) dot += from_bf16(w_val(7, d0 + k)) * hv[(size_t)p * kInter + k];
          sum += dot / kTopk;
        }
        want[(size_t)t * kHidden + col] = sum;
        big = fmax(big, fabs(sum));
      }
    /* the floor reads the same P experts' bytes of each copy */
    const float floor_us = kp_probe_median_us(
        [&](int k) {
          kp_probe_floor_kernel<<<2 * units, 512, 0, s>>>(reinterpret_cast<const kp_v16 *>(w + (size_t)k * (copy_bytes / 2)),
                                                          bytes / 16, reinterpret_cast<unsigned *>(y));
        },
        copies, 15, 20, s);
    printf("%4d %-9s %9.2f %9s %8.0f %10s\n", M, "floor", floor_us, "1.000", bytes / (floor_us * 1e3), "-");
    for (int pf = 0; pf < 3; ++pf) {
      Call c = {w, x, h, y, M};
      CK(cudaMemsetAsync(y, 0xff, 2 * kHidden * 2, s)); /* a NaN poison: an unwritten output fails */
      run(pf, c, s);
      CK(cudaStreamSynchronize(s));
      std::vector<uint16_t> got((size_t)M * kHidden);
      CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
      double err = 0.0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double d = fabs(from_bf16(got[i]) - want[i]);
        if (!(d <= err)) err = d; /* NaN sticks */
      }
      err = big > 0 ? err / big : err;
      if (!(err <= 1e-2)) {
        ++failed;
        printf("%4d %-9s %9s %9s %8s %10.2e FAIL\n", M, names[pf], "-", "-", "-", err);
        continue;
      }
      const float us = kp_probe_median_us(
          [&](int k) {
            Call ck = {w + (size_t)k * (copy_bytes / 2), x, h, y, M};
            run(pf, ck, s);
          },
          copies, 15, 20, s);
      printf("%4d %-9s %9.2f %9.3f %8.0f %10.2e\n", M, names[pf], us, us / floor_us, bytes / (us * 1e3), err);
    }
  }
  printf("# %d variant runs failed their checks\n", failed);
  return failed ? 1 : 0;
}
