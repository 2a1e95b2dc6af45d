/* util.hip: the kernels that are not candidates.
 *   read floor  streams the same weight bytes a candidate reads, no math: the
 *               per-shape yardstick (DESIGN.md "Measuring");
 *   silu-mul    gated.blaslt's second node: y = silu(g) * u from [m, 2n];
 *   warp probe  reports the device code's warp width so the host can check
 *               that its view (warpSize) agrees with the kernels' constant. */
#include "../common/error.h"
#include "arch.h"
#include "dtype.h"
#include "launch.h"

static constexpr int kp_read_threads = 512;
static constexpr int kp_read_u = 8; /* 16-byte loads in flight per thread */

/* Sums the pieces so the loads cannot be dropped; the sink is written only
 * when the sum hits one exact value, so the kernel moves no other bytes. */
__global__ void __launch_bounds__(kp_read_threads)
    kp_read_kernel(const kp_v16 *__restrict__ p, size_t n16, float *__restrict__ sink) {
  const size_t base = (size_t)blockIdx.x * kp_read_threads * kp_read_u + threadIdx.x;
  kp_v16 v[kp_read_u];
#pragma unroll
  for (int u = 0; u < kp_read_u; ++u) {
    const size_t i = base + (size_t)u * kp_read_threads;
    if (i < n16) v[u] = kp_ld_stream(p + i);
    else v[u] = kp_v16{0u, 0u, 0u, 0u};
  }
  float a = 0.0f;
#pragma unroll
  for (int u = 0; u < kp_read_u; ++u) a += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  if (a == 1.5e-30f) *sink = a;
}

int kp_floor_launch(const void *w, size_t bytes, float *sink, hipStream_t stream) {
  const size_t n16 = bytes / 16, per_block = (size_t)kp_read_threads * kp_read_u;
  const dim3 grid((unsigned)((n16 + per_block - 1) / per_block)), block(kp_read_threads);
  const hipError_t e = kp_launch(kp_read_kernel, grid, block, stream, false, (const kp_v16 *)w, n16, sink);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "floor launch", "%s", hipGetErrorString(e));
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
  const hipError_t e =
      dtype == KP_DT_BF16
          ? kp_launch(kp_silu_mul_kernel<KP_DT_BF16>, grid, block, stream, false, (const uint16_t *)gu, (uint16_t *)y, n, total)
          : kp_launch(kp_silu_mul_kernel<KP_DT_FP16>, grid, block, stream, false, (const uint16_t *)gu, (uint16_t *)y, n, total);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "silu-mul launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}

__global__ void kp_warp_probe_kernel(int *out) { *out = kp_warp; }

int kp_warp_probe(int *device_warp) {
  int *d = nullptr;
  hipError_t e = hipMalloc((void **)&d, sizeof(int));
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "hipMalloc (warp probe)", "%s", hipGetErrorString(e));
  e = kp_launch(kp_warp_probe_kernel, dim3(1), dim3(1), (hipStream_t)0, false, d);
  if (e == hipSuccess) e = hipMemcpy(device_warp, d, sizeof(int), hipMemcpyDeviceToHost);
  (void)hipFree(d);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "warp probe", "%s", hipGetErrorString(e));
  return KPICK_OK;
}
