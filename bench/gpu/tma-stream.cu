/* tma-stream.cu: how fast can one block stream a weight tile through a TMA ring,
 * and what slows the wgmma family's blocks down? (issue 11: its kernels move about
 * one stage per DRAM round trip whatever the ring depth or the stage's bytes,
 * h200-2026-12-01-wgmma-kb-b8d363c, h200-2026-12-01-fp8wg-91a43a7.)
 *
 * Each variant streams W[n, k] (bf16) the way wgmma.hip's producer does: a block
 * owns 64 rows of W and 1/S of K; one producer thread issues TMA boxes into a ring
 * of T stages of KB boxes each (full and empty mbarriers); one consumer warpgroup
 * takes the stages. What the consumer does is the variable:
 *   arrive   frees a stage as soon as it is full (pure streaming: the ring's rate)
 *   lag      frees stage i - 1 when stage i is full (the kernel's hand-over, no math)
 *   wg8      the kernel's loop: four wgmma m64n8k16 a box, commit, wait for the
 *            previous group, free the previous stage (rows <= 8)
 *   wg128    the same with m64n128k16 (rows 65-128)
 *   wg8x     wg8 with x as the kernel has it: an x box (8 rows x 64 K, 128-byte swizzle, 1 KB)
 *            loaded by TMA with each W box into the stage, and the wgmmas' B operand
 * and the box: `sw` boxes of 64 rows x 64 K (128-byte swizzle, what the kernel
 * loads: 128 contiguous bytes of each of 64 rows) or `wide` boxes of 16 rows x 256 K
 * (no swizzle: 512 contiguous bytes of each of 16 rows; four of them a stage, the
 * same 32 KB as KB = 4). Beside them the read floor: every thread of a full grid
 * reads 16-byte pieces, grid-stride. W rotates over copies that outsize the L2, so
 * every launch reads from DRAM. One line per variant: median of the launches' times,
 * GB/s, and GB/s per block.
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DKPICK_GPU_CUDA \
 *     -o build/tma-stream bench/gpu/tma-stream.cu -lcuda && build/tma-stream
 * Not part of the library or its space token: a probe whose records go under bench/results. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "../../hip-lib/src/gpu/wgmma_core.h"

#if !defined(KP_WGMMA_DEVICE) && defined(__CUDA_ARCH__)
#error "build for sm_90a (-gencode=arch=compute_90a,code=sm_90a)"
#endif

enum { ARRIVE = 0, LAG = 1, WG8 = 2, WG128 = 3, WG8X = 4 };
static const char *mode_name[] = {"arrive", "lag", "wg8", "wg128", "wg8x"};

struct ring_args {
  int nbox;  /* K / 64 */
  int T, KB; /* stages, boxes a stage */
  int wide;  /* 16-row x 256-K boxes, 4 a stage */
  unsigned long long *sink;
};

template <int MODE>
__global__ void __launch_bounds__(160) ring_kernel(const __grid_constant__ CUtensorMap map,
                                                   const __grid_constant__ CUtensorMap xmap, ring_args a) {
#if defined(KP_WGMMA_DEVICE)
  extern __shared__ uint8_t raw[];
  __shared__ uint64_t full[kp_wg_max_stages], empty[kp_wg_max_stages];
  __shared__ __align__(1024) uint8_t xtile[128 * 128]; /* the wgmma modes' B operand (zeros) */
  uint8_t *const ring = (uint8_t *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
  const int T = a.T, KB = a.wide ? 4 : a.KB;
  /* a wide box is 16 x 512 B: the same 8 KB; wg8x: the stage's x boxes after its W boxes */
  const uint32_t box = 64 * 128, xbox = MODE == WG8X ? 8 * 128 : 0, stage = (uint32_t)KB * (box + xbox);
  const int tid = threadIdx.x, S = gridDim.y, sp = blockIdx.y;
  const int b0 = (int)((int64_t)sp * a.nbox / S), b1 = (int)((int64_t)(sp + 1) * a.nbox / S);
  const int nst = (b1 - b0 + KB - 1) / KB;
  const int32_t row0 = blockIdx.x * 64;
  if (tid == 0) {
    for (int s = 0; s < T; ++s) {
      kp_mbar_init(&full[s], 1);
      kp_mbar_init(&empty[s], 4);
    }
    kp_mbar_init_fence();
  }
  for (int i = tid; i < 128 * 128 / 4; i += blockDim.x) reinterpret_cast<uint32_t *>(xtile)[i] = 0;
  __syncthreads();
  if (tid >= 128) { /* producer */
    if (tid == 128) {
      kp_prefetch_tensormap(&map);
      if (MODE == WG8X) kp_prefetch_tensormap(&xmap);
      const uint64_t pol = kp_policy_evict_first(), pol_x = kp_policy_evict_last();
      for (int i = 0; i < nst; ++i) {
        const int s = i % T, boxes = min(KB, b1 - b0 - i * KB);
        if (i >= T) kp_mbar_wait(&empty[s], (uint32_t)(i / T - 1) & 1u);
        kp_mbar_expect_tx(&full[s], (uint32_t)boxes * (box + xbox));
        for (int j = 0; j < boxes; ++j) {
          uint8_t *dst = ring + (size_t)s * stage + (size_t)j * box;
          if (a.wide) kp_tma_load(dst, &map, (b0 + i * KB) * 64, row0 + 16 * j, &full[s], pol);
          else kp_tma_load(dst, &map, (b0 + i * KB + j) * 64, row0, &full[s], pol);
        }
        if (MODE == WG8X)
          for (int j = 0; j < boxes; ++j)
            kp_tma_load(ring + (size_t)s * stage + (size_t)KB * box + (size_t)j * xbox, &xmap, (b0 + i * KB + j) * 64, 0,
                        &full[s], pol_x);
      }
    }
    return;
  }
  /* consumer warpgroup */
  const int lane = tid % 32;
  constexpr int BN = MODE == WG128 ? 128 : 8;
  float d[BN / 2];
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const uint32_t ring_addr = kp_smem_addr(ring), xaddr = kp_smem_addr(xtile);
  unsigned long long acc = 0;
  for (int i = 0; i < nst; ++i) {
    const int s = i % T;
    kp_mbar_wait(&full[s], (uint32_t)(i / T) & 1u);
    if (MODE == ARRIVE) {
      acc += ring[(size_t)s * stage + (size_t)(tid % 64) * 128];
      __syncwarp();
      if (lane == 0) kp_mbar_arrive(&empty[s]);
      continue;
    }
    if (MODE == WG8 || MODE == WG128 || MODE == WG8X) {
      for (int j = 0; j < KB; ++j) {
        const uint32_t w = ring_addr + (uint32_t)s * stage + (uint32_t)j * box;
        const uint32_t xb = MODE == WG8X ? ring_addr + (uint32_t)s * stage + (uint32_t)KB * box + (uint32_t)j * xbox : xaddr;
        kp_wg_fence();
#pragma unroll
        for (int kk = 0; kk < kp_wg_slices; ++kk) kp_wgmma<KP_DT_BF16, BN>(d, kp_wg_desc(w + kk * 32), kp_wg_desc(xb + kk * 32));
        kp_wg_commit();
        kp_wg_wait<1>();
      }
    } else {
      acc += ring[(size_t)s * stage + (size_t)(tid % 64) * 128];
    }
    __syncwarp();
    if (i > 0 && lane == 0) kp_mbar_arrive(&empty[(i - 1) % T]);
  }
  if (MODE == WG8 || MODE == WG128 || MODE == WG8X) kp_wg_wait<0>();
  for (int i = 0; i < BN / 2; ++i) acc += (unsigned long long)d[i];
  if (acc == 0x5eed) *a.sink = acc; /* never true: keeps the reads */
#endif
}

/* four 16-byte loads in flight a thread, grid-stride */
__global__ void floor_kernel(const int4 *__restrict__ w, size_t n16, unsigned long long *sink) {
  int acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const int4 v0 = __ldg(w + i), v1 = __ldg(w + i + stride), v2 = __ldg(w + i + 2 * stride), v3 = __ldg(w + i + 3 * stride);
    acc ^= v0.x ^ v1.y ^ v2.z ^ v3.w;
  }
  for (; i < n16; i += stride) acc ^= __ldg(w + i).x;
  if (acc == 0x5eed) *sink = acc;
}

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "tma-stream: %s: %s\n", #x, cudaGetErrorString(e_));        \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* boxes of 64 rows x 64 K (wide: 16 x 256, no swizzle); box_rows 8: x's 8 rows x 64 K */
static CUtensorMap make_map(const void *base, int64_t rows, int64_t k, int wide, unsigned box_rows = 64) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k * 2};
  const cuuint32_t box[2] = {wide ? 256u : 64u, wide ? 16u : box_rows}, unit[2] = {1, 1};
  const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims,
                                            strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            wide ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "tma-stream: cuTensorMapEncodeTiled failed (%d)\n", (int)r);
    exit(1);
  }
  return m;
}

static const int copies = 6; /* x 64 MB at the largest shape: past the 60 MB L2 */
static const int reps = 12;

template <class F>
static double median_us(F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = -2; r < reps; ++r) { /* two warm-up launches */
    CK(cudaEventRecord(e0));
    launch(((r + 2) % copies));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 0) t.push_back(ms * 1000.0);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long *sink;
  CK(cudaMalloc(&sink, 8));
  struct shape { const char *name; int64_t n, k; } shapes[] = {
      {"o 4096x4096", 4096, 4096}, {"qkv 6144x4096", 6144, 4096}, {"down 4096x14336", 4096, 14336},
      {"gate_up 28672x4096", 28672, 4096}};
  size_t most = 0, kmax = 0; /* the largest W and the longest K of the shapes */
  for (const shape &sh : shapes) {
    most = std::max(most, (size_t)(sh.n * sh.k * 2));
    kmax = std::max(kmax, (size_t)sh.k);
  }
  std::vector<void *> w(copies);
  for (int c = 0; c < copies; ++c) {
    CK(cudaMalloc(&w[c], most));
    CK(cudaMemset(w[c], c + 1, most));
  }
  void *x; /* the wg8x modes' activations: 8 rows of the longest K, zeros */
  CK(cudaMalloc(&x, 8 * kmax * 2));
  CK(cudaMemset(x, 0, 8 * kmax * 2));
  printf("%-20s %-7s %-4s %-3s %-3s %-2s %7s %9s %8s %9s\n", "shape", "mode", "box", "T", "KB", "S", "blocks", "us", "GB/s",
         "GB/s/blk");
  for (const shape &sh : shapes) {
    const double bytes = (double)sh.n * sh.k * 2;
    const double fl = median_us([&](int c) {
      floor_kernel<<<sms * 8, 256>>>((const int4 *)w[c], (size_t)(bytes / 16), sink);
    });
    printf("%-20s %-7s %-4s %-3s %-3s %-2s %7d %9.2f %8.0f %9s\n", sh.name, "floor", "-", "-", "-", "-", sms * 8, fl,
           bytes / fl / 1e3, "-");
    std::vector<CUtensorMap> sw(copies), wide(copies);
    for (int c = 0; c < copies; ++c) {
      sw[c] = make_map(w[c], sh.n, sh.k, 0);
      wide[c] = make_map(w[c], sh.n, sh.k, 1);
    }
    const CUtensorMap xm = make_map(x, 8, sh.k, 0, 8);
    const int tiles = (int)(sh.n / 64);
    struct cfg { int mode, wide, T, KB, S; } cfgs[] = {
        {ARRIVE, 0, 4, 1, 1}, {ARRIVE, 0, 8, 1, 1},  {ARRIVE, 0, 16, 1, 1}, {ARRIVE, 0, 4, 4, 1}, {ARRIVE, 1, 4, 4, 1},
        {ARRIVE, 0, 4, 1, 2}, {ARRIVE, 0, 16, 1, 2}, {ARRIVE, 0, 4, 4, 2}, {ARRIVE, 1, 4, 4, 2}, {ARRIVE, 0, 4, 1, 4},
        {LAG, 0, 4, 1, 1},    {LAG, 0, 16, 1, 1},    {LAG, 0, 4, 4, 1},    {LAG, 0, 4, 1, 2},    {LAG, 0, 4, 4, 2},
        {WG8, 0, 4, 1, 1},    {WG8, 0, 16, 1, 1},    {WG8, 0, 4, 4, 1},    {WG8, 0, 4, 1, 2},    {WG8, 0, 4, 4, 2},
        {WG8, 1, 4, 4, 2},    {WG128, 0, 4, 1, 1},   {WG128, 0, 4, 4, 1},  {WG128, 0, 4, 1, 2},  {WG128, 0, 4, 4, 2},
        {WG8X, 0, 4, 1, 1},   {WG8X, 0, 16, 1, 1},   {WG8X, 0, 4, 4, 1},   {WG8X, 0, 4, 1, 2},   {WG8X, 0, 4, 4, 2}};
    for (const cfg &g : cfgs) {
      const int kb = g.wide ? 4 : g.KB;
      const size_t smem = (size_t)g.T * kb * (64 + (g.mode == WG8X ? 8 : 0)) * 128 + 1024;
      if (smem > 200 * 1024) continue;
      ring_args a = {(int)(sh.k / 64), g.T, g.KB, g.wide, sink};
      void (*k)(const CUtensorMap, const CUtensorMap, ring_args) = g.mode == ARRIVE ? ring_kernel<ARRIVE>
                                                                   : g.mode == LAG  ? ring_kernel<LAG>
                                                                   : g.mode == WG8  ? ring_kernel<WG8>
                                                                   : g.mode == WG8X ? ring_kernel<WG8X>
                                                                                    : ring_kernel<WG128>;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      const dim3 grid((unsigned)tiles, (unsigned)g.S);
      const double us = median_us([&](int c) { k<<<grid, 160, smem>>>(g.wide ? wide[c] : sw[c], xm, a); });
      const int blocks = tiles * g.S;
      printf("%-20s %-7s %-4s %-3d %-3d %-2d %7d %9.2f %8.0f %9.1f\n", sh.name, mode_name[g.mode], g.wide ? "wide" : "sw",
             g.T, kb, g.S, blocks, us, bytes / us / 1e3, bytes / us / 1e3 / blocks);
    }
  }
  return 0;
}
