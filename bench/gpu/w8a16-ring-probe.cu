/* w8a16-ring-probe.cu: does a shared-memory ring lift the W8A16 tensor-core tile off its
 * latency bound at rows 4-16? (issue 14's fp8 floor target; session 19's Nsight Compute run
 * put w8a16.mma.w8.u2.pdl at 38 % of DRAM peak on qkv 6144x4096 at rows 8, the read floor at
 * 65 %: bench/results/h200-2026-12-04-prune-8334bb9/NOTES.md.) And the same tile over bf16
 * weights at rows 8-32, where issue 11's picks sit at 1.26-1.37x the floor.
 *
 * The tile is fp8.hip's w8a16.mma, R = 1: a block of W warps owns 16 weight rows, warp w
 * takes the 64-wide K blocks w, w + W, ...; in a block lane l (g = l / 4, q = l % 4) holds
 * 16 codes of rows g and g + 8 at k = 16 q and the x values of x rows g (and g + 8 past 8
 * rows) at the same k; four m16n8k16 bf16 steps a block, codes decoded by fp8_core.h's
 * kp_e4m3_bf16x2; the warps' sums added in warp order through shared memory; y = bf16(sum
 * x the row's scale). bf16 weights: 32 bytes (16 weights) a lane a row a block, fed as they
 * are, no scale. What changes is how a warp keeps W in flight:
 *   regs.wW      fp8.hip's loop: two register sets of U = 2 blocks, the next batch's loads
 *                issued while this one computes (about one DRAM round trip in flight); over
 *                bf16 weights the same loop, not mma_core.h's (the bf16 library tile)
 *   ring.wW.sS   a ring of S stages in shared memory a warp, one 64-wide block (1 KB of
 *                the tile; 2 KB bf16) a stage, filled by cp.async (16 bytes a copy, L1 bypassed):
 *                S blocks in flight without registers (S - 1 while a block's math runs:
 *                a slot is refilled after its codes are used); each lane reads back only
 *                what it copied, so the ring needs no barrier, only cp.async.wait_group;
 *                .xr: x loaded a stage ahead into registers, .xc: x copied into the stage
 * Every variant sums in the same order, so its y must equal regs.wW's of the same W byte
 * for byte; each is also checked against an fp64 reference of the decoded codes before it
 * is timed. Beside them the read floor: every thread of a full grid reads 16-byte pieces of
 * the same bytes, grid-stride. W rotates over copies that outsize the L2, so every launch
 * reads from DRAM; launches run back to back (no producer kernel: a probe, not the sweep's
 * in-step timing). One line per (shape, rows, variant): median us of a launch (over
 * batches of 20), GB/s, time over the floor's, the error, and the bitwise verdict.
 *   nvcc -O3 -std=c++17 -arch=sm_90 -DKPICK_GPU_CUDA -o build/w8a16-ring \
 *     bench/gpu/w8a16-ring-probe.cu && build/w8a16-ring     # exit 1: a check failed
 * Not part of the library or its space token. Run in session 20: every ring loses to the
 * register loop, 1.4-2.4x, with x after the wait, a stage ahead or in the stage alike
 * (bench/results/h200-2026-12-04-ring-peer-facdb24/NOTES.md says why; the runs were of 72ded38
 * and facdb24). Since session 21 its block math, register loop and block end come from
 * tile-math.h, shared with tile-read-probe.cu: the same sums in the same order, but ptxas gives
 * some kernels other register counts, so a rerun times slightly different code. Since session 22
 * its weights, reference and error come from tile-data.h (tile-split-probe.cu's too): the same
 * draws in the same order, the same data; its read floor is probe.h's (the same kernel). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "../../hip-lib/src/common/numeric.h"
#include "../../hip-lib/src/gpu/fp8_core.h"
#include "probe.h"
#include "tile-data.h"
#include "tile-math.h"

/* the variants: name, warps a block, ring stages (0: the registers' loop); a ring past
 * kMaxRing bytes a block is left out */
struct variant {
  const char *name;
  int warps, stages, xs; /* xs: how a ring stage's x arrives (below) */
};
static const variant variants[] = {
    {"regs.w8", 8, 0, 0},        {"regs.w4", 4, 0, 0},        {"regs.w16", 16, 0, 0},
    {"ring.w8.s4", 8, 4, 0},     {"ring.w8.s4.xr", 8, 4, 1},  {"ring.w8.s8.xr", 8, 8, 1},
    {"ring.w4.s8.xr", 4, 8, 1},  {"ring.w4.s16.xr", 4, 16, 1}, {"ring.w16.s4.xr", 16, 4, 1},
    {"ring.w8.s4.xc", 8, 4, 2},  {"ring.w4.s8.xc", 4, 8, 2},  {"ring.w16.s4.xc", 16, 4, 2},
};

#define CK(x) KP_PROBE_CK("w8a16-ring", x)

static constexpr int kMaxWarps = 16;
static constexpr int kMaxRing = 192 * 1024; /* warps x stages x a stage's bytes, at most */

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* T x-row tiles of 8; WB weight bytes; S ring stages a warp (0: two register sets of two blocks);
 * XS, how a ring stage's x arrives: 0 loaded from global after the stage's wait (its L2 round
 * trip then sits in every stage's chain: the first run's rings, 2x slower than registers),
 * 1 loaded a stage ahead into registers, 2 copied into the stage by cp.async with its W (rows
 * past M copy row 0: their columns of the product are never stored) */
template <int T, int WB, int S, int XS>
__global__ void __launch_bounds__(kMaxWarps * 32) tile_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
                                                              const float *__restrict__ scales, uint16_t *__restrict__ y,
                                                              int M, int64_t N, int64_t K) {
  extern __shared__ __align__(16) uint8_t ring_raw[];
  __shared__ float red[kMaxWarps][32][4 * T];
  constexpr int piece = 16 * WB, stage = 64 * piece; /* a lane's bytes of a row, a warp's of a block */
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t n0 = (int64_t)blockIdx.x * 16 + g, rowb = K * WB;
  const uint8_t *w0 = w + (n0 < N ? n0 : N - 1) * rowb + q * piece;
  const uint8_t *w1 = w + (n0 + 8 < N ? n0 + 8 : N - 1) * rowb + q * piece;
  const uint16_t *xr[T];
  bool xv[T];
  tile_x_rows<T>(x, M, K, xr, xv);
  float acc[T][4];
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
  const int64_t nblocks = K / 64, bstride = 64 * WB; /* the probe's K are multiples of 64 */
  if constexpr (S == 0) {
    /* the library's loop (fp8.hip, U = 2): batch b + step loads while batch b computes */
    tile_loop<WB>(w0, w1, nblocks, [&](int64_t kb, const kp_v16(&wa)[WB], const kp_v16(&wb)[WB]) {
      block_math<T, WB>(wa, wb, xr, xv, kb, acc);
    });
  } else {
    /* this warp's ring: S stages; lane l's 2 * piece bytes of W at l * 2 * piece of a stage,
     * then (XS 2) its 32 * T bytes of x at 32 * (2 * piece + 32 * T) + l * 32 * T */
    constexpr int xstage = XS == 2 ? 32 * 32 * T : 0, wstage = stage + xstage;
    uint8_t *ring = ring_raw + (size_t)warp * S * wstage + lane * 2 * piece;
    uint8_t *xring = ring_raw + (size_t)warp * S * wstage + stage + lane * 32 * T;
    const int64_t mine = nblocks > warp ? (nblocks - warp + nwarps - 1) / nwarps : 0; /* blocks warp, warp + W, ... */
    auto fill = [&](int slot, int64_t kb) {
      uint8_t *at = ring + slot * wstage;
#pragma unroll
      for (int p = 0; p < WB; ++p) {
        cp_async16(at + 16 * p, w0 + kb * bstride + 16 * p);
        cp_async16(at + piece + 16 * p, w1 + kb * bstride + 16 * p);
      }
      if constexpr (XS == 2) {
        uint8_t *xat = xring + slot * wstage;
#pragma unroll
        for (int t = 0; t < T; ++t) {
          cp_async16(xat + 32 * t, xr[t] + kb * 64);
          cp_async16(xat + 32 * t + 16, xr[t] + kb * 64 + 8);
        }
      }
    };
#pragma unroll
    for (int i = 0; i < S; ++i) { /* one commit group a stage, empty past the slice: the wait counts stay uniform */
      if (i < mine) fill(i, warp + (int64_t)i * nwarps);
      cp_commit();
    }
    kp_v16 xa[T], xb[T];
    if constexpr (XS == 1)
      if (mine > 0) load_x<T>(xr, xv, warp, xa, xb);
#pragma unroll 1
    for (int64_t i = 0; i < mine; ++i) {
      kp_v16 xna[T], xnb[T]; /* XS 1: the next stage's x, in flight across this stage's wait */
      if constexpr (XS == 1)
        if (i + 1 < mine) load_x<T>(xr, xv, warp + (i + 1) * nwarps, xna, xnb);
      cp_wait<S - 1>(); /* stage i has landed (this lane's own copies) */
      const int slot = (int)(i % S);
      uint8_t *st = ring + slot * wstage;
      kp_v16 wa[WB], wb[WB];
#pragma unroll
      for (int p = 0; p < WB; ++p) {
        wa[p] = *reinterpret_cast<const kp_v16 *>(st + 16 * p);
        wb[p] = *reinterpret_cast<const kp_v16 *>(st + piece + 16 * p);
      }
      if constexpr (XS == 0) {
        block_math<T, WB>(wa, wb, xr, xv, warp + i * nwarps, acc);
      } else if constexpr (XS == 1) {
        block_math_x<T, WB>(wa, wb, xa, xb, acc);
#pragma unroll
        for (int t = 0; t < T; ++t) xa[t] = xna[t], xb[t] = xnb[t];
      } else {
        const uint8_t *xst = xring + slot * wstage;
        kp_v16 ca[T], cb[T];
#pragma unroll
        for (int t = 0; t < T; ++t) {
          ca[t] = *reinterpret_cast<const kp_v16 *>(xst + 32 * t);
          cb[t] = *reinterpret_cast<const kp_v16 *>(xst + 32 * t + 16);
        }
        block_math_x<T, WB>(wa, wb, ca, cb, acc);
      }
      if (i + S < mine) fill(slot, warp + (i + S) * nwarps); /* refilled once its weights are used */
      cp_commit();
    }
    cp_wait<0>();
  }
  const float s0 = WB == 1 ? scales[n0 < N ? n0 : N - 1] : 1.0f, s1 = WB == 1 ? scales[n0 + 8 < N ? n0 + 8 : N - 1] : 1.0f;
  tile_sum_store<T>(red, acc, M, N, n0, n0 < N, n0 + 8 < N, s0, s1, y);
}

typedef void (*tile_fn)(const uint16_t *, const uint8_t *, const float *, uint16_t *, int, int64_t, int64_t);

static tile_fn pick(int T, int WB, int S, int XS) {
#define KP_PICK(wb, s, xs) \
  if (WB == wb && S == s && XS == xs) \
    return T == 1 ? tile_kernel<1, wb, s, xs> : T == 2 ? tile_kernel<2, wb, s, xs> : tile_kernel<4, wb, s, xs>;
#define KP_PICK_S(wb, s) KP_PICK(wb, s, 0) KP_PICK(wb, s, 1) KP_PICK(wb, s, 2)
  KP_PICK(1, 0, 0) KP_PICK_S(1, 4) KP_PICK_S(1, 8) KP_PICK_S(1, 16)
  KP_PICK(2, 0, 0) KP_PICK_S(2, 4) KP_PICK_S(2, 8) KP_PICK_S(2, 16)
#undef KP_PICK_S
#undef KP_PICK
  return nullptr;
}

static kp_probe_rng rng{0x853c49e6748fea9bull};

int main(void) {
  /* W8A16_RING_ONLY="fp8:4096x4096:8": that weight kind, shape and rows alone; W8A16_RING_ONCE=1:
   * each variant launched once after its check, untimed (for Nsight Compute) */
  const char *only = getenv("W8A16_RING_ONLY");
  const bool once = getenv("W8A16_RING_ONCE") != nullptr;
  const cudaDeviceProp prop =
      kp_probe_device("w8a16-ring-probe", "median us a launch over batches of 20, W rotating over copies past the L2");
  const int units = prop.multiProcessorCount;
  printf("%-5s %-12s %5s %-12s %9s %8s %9s %10s %s\n", "w", "shape", "rows", "variant", "us", "GB/s", "x floor", "rel_err",
         "bitwise");
  /* one opt-in size for every ring kernel: variants of one S share a kernel */
  for (int wb = 1; wb <= 2; ++wb)
    for (int t : {1, 2, 4})
      for (int st : {4, 8, 16})
        for (int xs : {0, 1, 2}) CK(cudaFuncSetAttribute(pick(t, wb, st, xs), cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxRing));
  unsigned *sink;
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  int failed = 0;
  kp_tile_each_weights(rng, prop.l2CacheSize, [&](const kp_tile_weight_kind &wk, int64_t N, int64_t K,
                                                 const kp_tile_weights &wt, const kp_tile_device &dev) {
      const int WB = wk.bytes;
      const int64_t wbytes = N * K * WB;
      uint8_t *const dw = dev.w;
      float *const dsc = dev.scales;
      const int copies = dev.copies;
      auto time_it = [&](auto launch) {
        if (once) {
          launch(0);
          CK(cudaDeviceSynchronize());
          return 1.0f;
        }
        return kp_probe_median_us(launch, copies);
      };
      char shape[32];
      snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
      char tag[64];
      snprintf(tag, sizeof tag, "%s:%s:", wk.name, shape);
      if (only && strncmp(only, tag, strlen(tag)) != 0) return;
      const int64_t pieces = wbytes / 16;
      const float floor_us = time_it([&](int c) {
        kp_probe_floor_kernel<<<2 * units, 512>>>(reinterpret_cast<const kp_v16 *>(dw + (size_t)c * wbytes), pieces, sink);
      });
      CK(cudaGetLastError());
      printf("%-5s %-12s %5s %-12s %9.2f %8.0f %9s %10s %s\n", wk.name, shape, "-", "floor", floor_us, wbytes / (floor_us * 1e3),
             "1.000", "-", "-");
      for (int M : wk.rows) {
        if (only && atoi(only + strlen(tag)) != M) continue;
        const kp_tile_io io = kp_tile_inputs(rng, M, N, K);
        const std::vector<uint16_t> &xh = io.x;
        uint16_t *dx = io.dx, *dy = io.dy;
        /* the fp64 reference, every 4th output row (the bitwise check covers all) */
        double rmax = 0.0;
        const std::vector<double> ref = kp_tile_reference(wt, xh, M, N, K, &rmax);
        std::vector<uint16_t> base[kMaxWarps + 1]; /* regs.wW's y, by W */
        const int T = M > 16 ? 4 : M > 8 ? 2 : 1;
        for (const variant &v : variants) {
          const tile_fn k = pick(T, WB, v.stages, v.xs);
          const size_t smem = (size_t)v.warps * v.stages * (1024 * WB + (v.xs == 2 ? 1024 * T : 0));
          if (smem > (size_t)kMaxRing) continue;
          const dim3 grid((unsigned)((N + 15) / 16)), block(v.warps * 32);
          CK(cudaMemset(dy, 0xff, (size_t)M * N * 2));
          k<<<grid, block, smem>>>(dx, dw, dsc, dy, M, N, K);
          CK(cudaGetLastError());
          CK(cudaDeviceSynchronize());
          std::vector<uint16_t> yh((size_t)(M * N));
          CK(cudaMemcpy(yh.data(), dy, yh.size() * 2, cudaMemcpyDeviceToHost));
          const double err = kp_tile_error(yh, ref, M, N, rmax);
          const char *bitwise = "-";
          if (v.stages == 0) {
            base[v.warps] = yh;
          } else if (!base[v.warps].empty()) {
            bitwise = memcmp(base[v.warps].data(), yh.data(), yh.size() * 2) == 0 ? "same" : "DIFFERS";
          }
          const bool ok = err <= 1.0e-2 && strcmp(bitwise, "DIFFERS") != 0;
          if (!ok) {
            ++failed;
            printf("%-5s %-12s %5d %-12s %9s %8s %9s %10.2e %s FAIL\n", wk.name, shape, M, v.name, "-", "-", "-", err, bitwise);
            continue;
          }
          const float us = time_it([&](int c) { k<<<grid, block, smem>>>(dx, dw + (size_t)c * wbytes, dsc, dy, M, N, K); });
          CK(cudaGetLastError());
          printf("%-5s %-12s %5d %-12s %9.2f %8.0f %9.3f %10.2e %s\n", wk.name, shape, M, v.name, us, wbytes / (us * 1e3),
                 us / floor_us, err, bitwise);
        }
        kp_tile_io_free(io);
      }
    });
  printf("# %d variant runs failed their checks\n", failed);
  return failed ? 1 : 0;
}
