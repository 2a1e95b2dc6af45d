/* tile-bulk-probe.cu: the 16-row tensor-core tile with all of its W asked for at once. The
 * library's W8A16 tile (fp8.hip's w8a16.mma, tile-math.h's loop) keeps two register sets of one
 * or two 64-wide K blocks in flight a warp: at fp8 rows 4-16 it reads at 1.3-1.9x the floor, bound
 * by latency with about 16-32 KB a unit in flight (session 19's profile, 38 % of DRAM peak;
 * session 33's: w8a16.mma.w8.u2 at 39 % on 4096x4096 rows 8, long-scoreboard stalls). Here a
 * block asks for every byte of its 16 rows before it computes: 16 threads each issue their row's
 * C chunks as 1-D bulk copies (cp.async.bulk) into shared memory, chunk c of every row completing
 * on mbarrier c; the 8 warps then take the K blocks as the library does (warp w: w, w + 8, ...),
 * each waiting on the chunk its block lies in, and read their W pieces from shared memory (rows
 * K + 64 bytes apart: each 8-lane phase of a 16-byte load meets 32 distinct banks). x, the mma
 * steps, the warps' sum and the store are the library's (tile-math.h). A block's shared memory is
 * 16 (K WB + 64) bytes: fp8 at K = 4096 65 KB (three blocks a unit), bf16 129 KB (one).
 *   tile.lib     the library's loop (two sets of two blocks a warp), the baseline
 *   bulk.cC      the kernel above with C = 1, 4, 8, 16 chunks
 * Weights and checks as tile-split-probe.cu's (tile-data.h: fp8 at rows 4-16, bf16 at 8-32, every
 * variant against an fp64 reference of every 4th column, error over the largest value at most
 * 1e-2, before it is timed); the down shape (K = 14336) needs more shared memory than a unit
 * has and is skipped. Median us of a launch over batches of 20, W rotating over copies past the
 * L2, launches back to back.
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DKPICK_GPU_CUDA -DKPICK_WGMMA_BUILT -Xptxas -v \
 *     -o build/tile-bulk bench/gpu/tile-bulk-probe.cu && build/tile-bulk     # exit 1: a check failed
 * Not part of the library or its space token. Run in session 33 at 41935c1 on an H100: every bulk
 * variant slower than the library's loop but at rows 16 on qkv (bench/results/h100-2026-12-07-tile-bulk-41935c1/). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <vector>

#include "../../hip-lib/src/gpu/wgmma_core.h" /* the mbarriers */
#include "probe.h"
#include "tile-data.h"
#include "tile-math.h"

#if !defined(KP_WGMMA_DEVICE) && defined(__CUDA_ARCH__)
#error "build for sm_90a (-gencode=arch=compute_90a,code=sm_90a)"
#endif

#define CK(x) KP_PROBE_CK("tile-bulk", x)

static constexpr int kWarps = 8, kMaxChunks = 16, kPad = 64;
static constexpr size_t kSmemCap = 200 * 1024; /* of 227 KB a block: room for red (up to 16 KB) and the barriers */

/* bytes from global src into shared dst, completing on bar (16-byte aligned, a multiple of 16) */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   kp_smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(kp_smem_addr(bar))
               : "memory");
}

template <int T, int WB>
__global__ void __launch_bounds__(kWarps * 32) bulk_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
                                                           const float *__restrict__ scales, uint16_t *__restrict__ y, int M,
                                                           int64_t N, int64_t K, int C) {
  extern __shared__ __align__(128) uint8_t tile[];
  __shared__ uint64_t full[kMaxChunks];
  __shared__ float red[kWarps][32][4 * T];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  const int64_t rowb = K * WB, stride = rowb + kPad, nb = K / 64, per = nb / C; /* nb % C == 0: the host checks */
  const int64_t n0 = (int64_t)blockIdx.x * 16;
  if (threadIdx.x == 0) {
    for (int c = 0; c < C; ++c) kp_mbar_init(&full[c], 1);
    kp_mbar_init_fence();
    for (int c = 0; c < C; ++c) kp_mbar_expect_tx(&full[c], (uint32_t)(16 * per * 64 * WB));
  }
  __syncthreads();
  if (threadIdx.x < 16) { /* row threadIdx.x's chunks, in K order */
    const uint8_t *src = w + (n0 + threadIdx.x) * rowb;
    uint8_t *dst = tile + threadIdx.x * stride;
    const uint32_t bytes = (uint32_t)(per * 64 * WB);
    for (int c = 0; c < C; ++c) bulk_copy(dst + c * bytes, src + c * bytes, bytes, &full[c]);
  }
  const uint16_t *xr[T];
  bool xv[T];
  float acc[T][4];
  tile_start<T>(x, M, K, xr, xv, acc);
  const uint8_t *r0 = tile + g * stride + q * 16 * WB, *r1 = r0 + 8 * stride;
  int have = -1;
#pragma unroll 1
  for (int64_t kb = warp; kb < nb; kb += kWarps) {
    const int c = (int)(kb / per);
    if (c != have) {
      kp_mbar_wait(&full[c], 0);
      have = c;
    }
    kp_v16 wa[WB], wb[WB];
#pragma unroll
    for (int p = 0; p < WB; ++p) {
      wa[p] = *reinterpret_cast<const kp_v16 *>(r0 + kb * 64 * WB + 16 * p);
      wb[p] = *reinterpret_cast<const kp_v16 *>(r1 + kb * 64 * WB + 16 * p);
    }
    block_math<T, WB>(wa, wb, xr, xv, kb, acc);
  }
  tile_sum_store<T>(red, acc, M, N, n0 + g, true, true, WB == 1 ? scales[n0 + g] : 1.0f,
                    WB == 1 ? scales[n0 + g + 8] : 1.0f, y);
}

/* the baseline: the library's tile (tile-math.h) */
template <int T, int WB>
__global__ void __launch_bounds__(kWarps * 32) lib_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
                                                          const float *__restrict__ scales, uint16_t *__restrict__ y, int M,
                                                          int64_t N, int64_t K, int) {
  __shared__ float red[kWarps][32][4 * T];
  tile_lib<T, WB>(red, x, w, scales, y, M, N, K);
}

typedef void (*tile_fn)(const uint16_t *, const uint8_t *, const float *, uint16_t *, int, int64_t, int64_t, int);

struct variant {
  const char *name;
  int chunks; /* 0: tile.lib */
};
static const variant variants[] = {{"tile.lib", 0}, {"bulk.c1", 1}, {"bulk.c4", 4}, {"bulk.c8", 8}, {"bulk.c16", 16}};

template <int WB>
static tile_fn pick_w(int T, bool bulk) {
  if (T == 1) return bulk ? bulk_kernel<1, WB> : lib_kernel<1, WB>;
  if (T == 2) return bulk ? bulk_kernel<2, WB> : lib_kernel<2, WB>;
  return bulk ? bulk_kernel<4, WB> : lib_kernel<4, WB>;
}

static kp_probe_rng rng{0x510e527fade682d1ull};

int main(void) {
  const cudaDeviceProp prop = kp_tile_probe_start("tile-bulk-probe");
  const int units = prop.multiProcessorCount;
  unsigned *sink;
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  int failed = 0;
  kp_tile_each_weights(rng, prop.l2CacheSize, [&](const kp_tile_weight_kind &wk, int64_t N, int64_t K,
                                                 const kp_tile_weights &wt, const kp_tile_device &dev) {
    const int WB = wk.bytes;
    const int64_t wbytes = N * K * WB;
    const size_t smem = (size_t)16 * (K * WB + kPad);
    if (smem > kSmemCap) return; /* the down shape: a tile's rows do not fit a unit */
    char shape[32];
    const float floor_us = kp_tile_floor_line(wk.name, N, K, dev, wbytes, units, sink, shape);
    for (int M : wk.rows) {
      const kp_tile_io io = kp_tile_inputs(rng, M, N, K);
      double rmax = 0.0;
      const std::vector<double> ref = kp_tile_reference(wt, io.x, M, N, K, &rmax);
      const int T = M > 16 ? 4 : M > 8 ? 2 : 1;
      for (const variant &v : variants) {
        const bool bulk = v.chunks > 0;
        if (bulk && (K / 64) % v.chunks != 0) continue;
        const tile_fn k = WB == 1 ? pick_w<1>(T, bulk) : pick_w<2>(T, bulk);
        const size_t dyn = bulk ? smem : 0;
        if (bulk) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
        const dim3 grid((unsigned)(N / 16)), block(kWarps * 32);
        CK(cudaMemset(io.dy, 0xff, (size_t)M * N * 2));
        k<<<grid, block, dyn>>>(io.dx, dev.w, dev.scales, io.dy, M, N, K, v.chunks);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<uint16_t> yh((size_t)(M * N));
        CK(cudaMemcpy(yh.data(), io.dy, yh.size() * 2, cudaMemcpyDeviceToHost));
        const double err = kp_tile_error(yh, ref, M, N, rmax);
        if (!(err <= 1.0e-2)) {
          ++failed;
          printf("%-5s %-12s %5d %-9s %7u %9s %8s %9s %10.2e FAIL\n", wk.name, shape, M, v.name, grid.x, "-", "-", "-", err);
          continue;
        }
        const float us = kp_probe_median_us(
            [&](int c) { k<<<grid, block, dyn>>>(io.dx, dev.w + (size_t)c * wbytes, dev.scales, io.dy, M, N, K, v.chunks); },
            dev.copies);
        CK(cudaGetLastError());
        printf("%-5s %-12s %5d %-9s %7u %9.2f %8.0f %9.3f %10.2e\n", wk.name, shape, M, v.name, grid.x, us,
               wbytes / (us * 1e3), us / floor_us, err);
      }
      kp_tile_io_free(io);
    }
  });
  printf("# %d variant runs failed their checks\n", failed);
  return failed ? 1 : 0;
}
