/* util.hip: the kernels that are not candidates.
 *   read floor  streams the same weight bytes a candidate reads, no math: the
 *               per-shape yardstick (DESIGN.md "Measuring");
 *   producer    stands for the op before a linear in a decode step: writes x,
 *               so the tuner times each candidate where a step runs it
 *               (hooks.cpp, be_time);
 *   silu-mul    gated.blaslt's second node: y = silu(g) * u from [m, 2n];
 *   warp probe  reports the device code's warp width so the host can check
 *               that its view (warpSize) agrees with the kernels' constant. */
#include "../common/error.h"
#include "arch.h"
#include "check.h"
#include "dtype.h"
#include "launch.h"

static constexpr int kp_read_threads = 512;
static constexpr int kp_read_u = 8; /* 16-byte loads in flight per thread */

/* Sums the pieces so the loads cannot be dropped; the sink is written only
 * when the sum hits one exact value, so the kernel moves no other bytes.
 * Timed in a step (after the producer), the floor takes the best launch any
 * candidate can: under PDL it lets the next kernel launch at once and issues
 * its loads before it waits for the producer (W is no step data), as a .pdl
 * candidate does, so no candidate beats the yardstick by launching
 * differently. The wait before it ends keeps "the previous kernel is done"
 * meaning every earlier kernel is done (decode.hip, chaining). */
template <bool PDL>
__global__ void __launch_bounds__(kp_read_threads)
    kp_read_kernel(const kp_v16 *__restrict__ p, size_t n16, float *__restrict__ sink) {
  if (PDL) kp_pdl_trigger();
  const size_t base = (size_t)blockIdx.x * kp_read_threads * kp_read_u + threadIdx.x;
  kp_v16 v[kp_read_u];
#pragma unroll
  for (int u = 0; u < kp_read_u; ++u) {
    const size_t i = base + (size_t)u * kp_read_threads;
    if (i < n16) v[u] = kp_ld_stream(p + i);
    else v[u] = kp_v16{0u, 0u, 0u, 0u};
  }
  kp_batch_fence(true);
  float a = 0.0f;
#pragma unroll
  for (int u = 0; u < kp_read_u; ++u) a += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  if (a == 1.5e-30f) *sink = a;
}

int kp_floor_launch(const void *w, size_t bytes, float *sink, hipStream_t stream, int pdl) {
  const size_t n16 = bytes / 16, per_block = (size_t)kp_read_threads * kp_read_u;
  const dim3 grid((unsigned)((n16 + per_block - 1) / per_block)), block(kp_read_threads);
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    KP_GPU(kp_launch(kp_read_kernel<true>, grid, block, stream, true, (const kp_v16 *)w, n16, sink));
    return KPICK_OK;
  }
#else
  if (pdl) return kp_fail(KPICK_E_UNSUPPORTED, "floor", "no PDL on this target");
#endif
  KP_GPU(kp_launch(kp_read_kernel<false>, grid, block, stream, false, (const kp_v16 *)w, n16, sink));
  return KPICK_OK;
}

/* One block per row, as the decode ops before a linear (add_rmsnorm) run:
 * like them it waits for the previous kernel, then lets the next one launch
 * (decode.hip, chaining mode 3), then writes its row of x from src. x is
 * what the next kernel reads, so a .pdl candidate overlaps this kernel as it
 * overlaps the op before it in a step, and never the candidate's own previous
 * launch: this kernel starts its writes only after that launch has ended. */
static constexpr int kp_producer_threads = 256;

__global__ void __launch_bounds__(kp_producer_threads)
    kp_producer_kernel(const uint16_t *__restrict__ src, uint16_t *x, int64_t K) {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int64_t row = blockIdx.x;
  const uint16_t *s = src + row * K;
  uint16_t *d = x + row * K;
  if (K % 8 == 0) { /* rows are 16-byte aligned */
    for (int64_t i = threadIdx.x; i < K / 8; i += kp_producer_threads)
      reinterpret_cast<kp_v16 *>(d)[i] = reinterpret_cast<const kp_v16 *>(s)[i];
  } else {
    for (int64_t i = threadIdx.x; i < K; i += kp_producer_threads) d[i] = s[i];
  }
}

int kp_producer_launch(const void *src, void *x, int32_t m, int64_t k, hipStream_t stream, int pdl) {
  KP_GPU(kp_launch(kp_producer_kernel, dim3((unsigned)m), dim3(kp_producer_threads), stream, pdl != 0,
                   (const uint16_t *)src, (uint16_t *)x, k));
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
