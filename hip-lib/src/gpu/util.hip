/* util.hip: the kernels that are not candidates (the read floors are in floor.hip).
 *   producer    stands for the op before a linear in a decode step: writes x,
 *               so the tuner times each candidate where a step runs it
 *               (hooks.cpp, be_time);
 *   silu-mul    gated.blaslt's second node: y = silu(g) * u from [m, 2n];
 *   warp probe  reports the device code's warp width so the host can check
 *               that its view (warpSize) agrees with the kernels' constant. */
#include "../common/error.h"
#include "arch.h"
#include "block_sum.h"
#include "check.h"
#include "dtype.h"
#include "launch.h"

/* The op before a linear in a decode step, as the sweep times it: the norm
 * before qkv and gate_up (decode.hip, add_rmsnorm), in its launch, its block
 * shape and its chain of latencies. One block per row, the fewest threads of
 * whole 64-lane groups that cover the row in C groups of 4; gamma (a weight)
 * is loaded before the wait; after the wait it lets the next kernel launch
 * (decode.hip, chaining mode 3), reads its row of the fp32 residual and of
 * src, sums squares over the block, then writes the residual row back and
 * x's row. So a .pdl candidate overlaps this kernel as long as it overlaps
 * the norm in a step: a shorter stand-in (a copy) under-counted that overlap
 * and the sweep kept cuBLASLt where a .pdl row served faster
 * (bench/results/h200-2026-12-02-serve-ab-3ac3ffa). x gets src's bits, not
 * the norm's values: the select on the sum keeps the write after the
 * reduction without changing the timed data. The residual is stored unchanged
 * (the norm stores its sum): the same bytes, and no drift over a batch. */
static constexpr int kp_producer_group = 4;
static constexpr int kp_producer_max_chunks = 8; /* as the norm: rows up to 8 * 4 * 1024 in registers */

template <int DT, int C>
__global__ void __launch_bounds__(1024)
    kp_producer_kernel(float *resid, const uint16_t *__restrict__ src, const uint16_t *__restrict__ gamma, uint16_t *x,
                       int64_t K) {
  __shared__ float red[kp_max_warps];
  const int64_t row = blockIdx.x;
  float gm[C][kp_producer_group];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_producer_group;
#pragma unroll
    for (int e = 0; e < kp_producer_group; ++e) gm[c][e] = j + e < K ? kp_load1<DT>(gamma + j + e) : 0.0f;
  }
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  float *r = resid + row * K;
  const uint16_t *s = src + row * K;
  const bool vec = K % kp_producer_group == 0; /* then rows of resid and src are 16- and 8-byte aligned */
  float rv[C][kp_producer_group];
  uint16_t sv[C][kp_producer_group];
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_producer_group;
    if (vec && j < K) { /* the norm's loads: 16 bytes of the residual, 8 of the input */
      const float4 a = *reinterpret_cast<const float4 *>(r + j);
      const uint2 b = *reinterpret_cast<const uint2 *>(s + j);
      rv[c][0] = a.x, rv[c][1] = a.y, rv[c][2] = a.z, rv[c][3] = a.w;
      sv[c][0] = (uint16_t)b.x, sv[c][1] = (uint16_t)(b.x >> 16), sv[c][2] = (uint16_t)b.y, sv[c][3] = (uint16_t)(b.y >> 16);
    } else {
#pragma unroll
      for (int e = 0; e < kp_producer_group; ++e) {
        rv[c][e] = j + e < K ? r[j + e] : 0.0f;
        sv[c][e] = j + e < K ? s[j + e] : (uint16_t)0;
      }
    }
#pragma unroll
    for (int e = 0; e < kp_producer_group; ++e) {
      const float v = rv[c][e] + kp_lo<DT>(sv[c][e]) * gm[c][e];
      ss = fmaf(v, v, ss);
    }
  }
  ss = kp_block_sum(ss, red);
  const bool write = ss == ss; /* true for finite data; unknown to the compiler */
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_producer_group;
#pragma unroll
    for (int e = 0; e < kp_producer_group; ++e) {
      if (j + e < K) {
        r[j + e] = rv[c][e];
        x[row * K + j + e] = write ? sv[c][e] : (uint16_t)0;
      }
    }
  }
}

template <int DT>
static hipError_t kp_producer_launch_dt(int chunks, dim3 grid, dim3 block, hipStream_t s, bool pdl, float *resid,
                                        const uint16_t *src, uint16_t *x, int64_t K) {
  const uint16_t *gamma = src; /* any K values no kernel writes: src's first row */
  switch (chunks) {
    case 1: return kp_launch(kp_producer_kernel<DT, 1>, grid, block, s, pdl, resid, src, gamma, x, K);
    case 2: return kp_launch(kp_producer_kernel<DT, 2>, grid, block, s, pdl, resid, src, gamma, x, K);
    case 4: return kp_launch(kp_producer_kernel<DT, 4>, grid, block, s, pdl, resid, src, gamma, x, K);
    default: return kp_launch(kp_producer_kernel<DT, 8>, grid, block, s, pdl, resid, src, gamma, x, K);
  }
}

int kp_producer_launch(int32_t dtype, float *resid, const void *src, void *x, int32_t m, int64_t k,
                       hipStream_t stream, int pdl) {
  const int64_t groups = (k + kp_producer_group - 1) / kp_producer_group;
  int chunks = 1;
  while (chunks < kp_producer_max_chunks && groups > (int64_t)chunks * 1024) chunks *= 2;
  if (groups > (int64_t)chunks * 1024)
    return kp_fail(KPICK_E_UNSUPPORTED, "producer", "k %lld: the norm-shaped producer takes at most %d", (long long)k,
                   kp_producer_max_chunks * kp_producer_group * 1024);
  int64_t threads = (groups + chunks - 1) / chunks;
  threads = (threads + 63) / 64 * 64;
  const dim3 grid((unsigned)m), block((unsigned)threads);
  const uint16_t *s = (const uint16_t *)src;
  uint16_t *d = (uint16_t *)x;
  KP_GPU(dtype == KP_DT_FP16 ? kp_producer_launch_dt<KP_DT_FP16>(chunks, grid, block, stream, pdl != 0, resid, s, d, k)
                             : kp_producer_launch_dt<KP_DT_BF16>(chunks, grid, block, stream, pdl != 0, resid, s, d, k));
  return KPICK_OK;
}

template <int DT>
__global__ void kp_silu_mul_kernel(const uint16_t *__restrict__ gu, uint16_t *__restrict__ y, int64_t n,
                                   int64_t total) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = i / n, j = i - m * n;
    const float g = kp_load1<DT>(gu + m * 2 * n + j), u = kp_load1<DT>(gu + m * 2 * n + n + j);
    y[i] = kp_round<DT>(kp_silu_mul(g, u));
  }
}

int kp_silu_mul_launch(int32_t dtype, const void *gu, void *y, int32_t m, int64_t n, hipStream_t stream) {
  const int64_t total = (int64_t)m * n;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  const dim3 grid((unsigned)blocks), block(256);
  const auto k = dtype == KP_DT_BF16 ? kp_silu_mul_kernel<KP_DT_BF16> : kp_silu_mul_kernel<KP_DT_FP16>;
  KP_GPU(kp_launch(k, grid, block, stream, false, (const uint16_t *)gu, (uint16_t *)y, n, total));
  return KPICK_OK;
}

__global__ void kp_warp_probe_kernel(int *out) { *out = kp_warp; }

static int kp_warp_probe_on(int *d, int *device_warp) {
  KP_GPU(kp_launch(kp_warp_probe_kernel, dim3(1), dim3(1), (hipStream_t)0, false, d));
  KP_GPU(hipMemcpy(device_warp, d, sizeof(int), hipMemcpyDeviceToHost));
  return KPICK_OK;
}

int kp_warp_probe(int *device_warp) {
  int *d = nullptr;
  KP_GPU(hipMalloc((void **)&d, sizeof(int)));
  const int st = kp_warp_probe_on(d, device_warp);
  (void)hipFree(d);
  return st;
}
