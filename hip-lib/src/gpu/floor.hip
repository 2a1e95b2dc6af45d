/* floor.hip: the read floors, the per-shape yardstick of table-bench and the
 * report (DESIGN.md "Measuring"): kernels that stream the bytes a call must
 * read, with no math. They choose no kernel (no pick or route reads a floor),
 * so this file is outside the space token, as decode.hip is: mending a floor
 * keeps the table. A table's floor_us is what the floor of its sweep measured.
 *   linear, gated   the weight's bytes;
 *   moe             the active experts' W_gate_up and W_down (fp8: codes and
 *                   scales). */
#include "../common/error.h"
#include "arch.h"
#include "check.h"
#include "launch.h"

extern "C" {
#include "../common/moe.h" /* C: the fp8 buffers' sizes (kp_moe_gate_up_bytes) */
}

/* ---- linear and gated: the weight ---- */
/* Sums the pieces so the loads cannot be dropped; the sink is written only
 * when the sum hits one exact value, so the kernel moves no other bytes.
 * Timed in a step (after the producer), the floor takes the best launch any
 * candidate can: under PDL it lets the next kernel launch at once and issues
 * its loads before it waits for the producer (W is no step data), as a .pdl
 * candidate does, so no candidate beats the yardstick by launching
 * differently. The wait before it ends keeps "the previous kernel is done"
 * meaning every earlier kernel is done (decode.hip, chaining). */
template <bool PDL, int T, int U>
__global__ void __launch_bounds__(T) kp_read_kernel(const kp_v16 *__restrict__ p, size_t n16, float *__restrict__ sink) {
  if (PDL) kp_pdl_trigger();
  const size_t base = (size_t)blockIdx.x * T * U + threadIdx.x;
  kp_v16 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const size_t i = base + (size_t)u * T;
    if (i < n16) v[u] = kp_ld_stream(p + i);
    else v[u] = kp_v16{0u, 0u, 0u, 0u};
  }
  kp_batch_fence(true);
  float a = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u) a += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  if (a == 1.5e-30f) *sink = a;
}

template <int T, int U>
static int kp_read_launch(const kp_v16 *w, size_t n16, float *sink, hipStream_t stream, int pdl) {
  const dim3 grid((unsigned)((n16 + (size_t)T * U - 1) / ((size_t)T * U))), block(T);
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    KP_GPU(kp_launch(kp_read_kernel<true, T, U>, grid, block, stream, true, w, n16, sink));
    return KPICK_OK;
  }
#else
  if (pdl) return kp_fail(KPICK_E_UNSUPPORTED, "floor", "no PDL on this target");
#endif
  KP_GPU(kp_launch(kp_read_kernel<false, T, U>, grid, block, stream, false, w, n16, sink));
  return KPICK_OK;
}

/* The shape of a launch: T threads a block, U 16-byte loads in flight a thread.
 * The widest that still gives every unit two blocks: a small weight (the 0.5 MB
 * router of Qwen3-30B-A3B) in 64 KiB blocks filled 8 of 132 units, and a
 * gemv ran at 0.84 of that "floor" (table-bench at 110c516). */
typedef int (*kp_read_fn)(const kp_v16 *, size_t, float *, hipStream_t, int);
struct kp_read_shape {
  int threads, u;
  kp_read_fn launch;
};
template <int T, int U>
static constexpr kp_read_shape kp_read_shape_of() {
  return {T, U, kp_read_launch<T, U>};
}
/* widest first; the last takes what no other gives two blocks a unit */
static constexpr kp_read_shape kp_read_shapes[] = {kp_read_shape_of<512, 8>(), kp_read_shape_of<512, 4>(),
                                                   kp_read_shape_of<512, 2>(), kp_read_shape_of<512, 1>(),
                                                   kp_read_shape_of<128, 1>()};

/* the device's units, asked here (compat.h, launch.h and hooks.cpp are in the
 * space token, and mending a floor should not void a table) */
static int kp_floor_units(int *units) {
  int dev = 0;
#if defined(KPICK_GPU_CUDA)
  KP_GPU(cudaGetDevice(&dev));
  KP_GPU(cudaDeviceGetAttribute(units, cudaDevAttrMultiProcessorCount, dev));
#else
  KP_GPU(hipGetDevice(&dev));
  KP_GPU(hipDeviceGetAttribute(units, hipDeviceAttributeMultiprocessorCount, dev));
#endif
  return KPICK_OK;
}

int kp_floor_launch(const void *w, size_t bytes, float *sink, hipStream_t stream, int pdl) {
  int units = 0;
  KP_TRY(kp_floor_units(&units));
  const size_t n16 = bytes / 16;
  constexpr int last = (int)(sizeof kp_read_shapes / sizeof kp_read_shapes[0]) - 1;
  int pick = last;
  for (int i = 0; i < last; ++i) {
    const size_t per_block = (size_t)kp_read_shapes[i].threads * kp_read_shapes[i].u;
    if ((n16 + per_block - 1) / per_block >= 2 * (size_t)units) {
      pick = i;
      break;
    }
  }
  return kp_read_shapes[pick].launch((const kp_v16 *)w, n16, sink, stream, pdl);
}


/* ---- moe: the read floor over the experts a call reads ----
 * An expert's bytes are spans of the problem's w, [at + e * stride, + bytes):
 * W_gate_up's rows (bf16), or its codes and its scales (fp8), then W_down's
 * alike. The kernel streams the 16-byte pieces that hold them. */
static constexpr int kp_moe_read_threads = 512, kp_moe_read_u = 8;

struct kp_moe_span {
  int64_t at, stride, bytes;
};
struct kp_moe_spans {
  kp_moe_span s[4]; /* W_gate_up: s[0] then s[1]; W_down: s[2] then s[3] (s[1], s[3] empty for bf16) */
  int64_t pieces;   /* 16-byte pieces in w: none past them is read */
};

/* the pieces of span sp of expert e: first, count */
__device__ __forceinline__ void kp_moe_span_pieces(const kp_moe_span &sp, int64_t e, int64_t pieces, int64_t &first,
                                                   int64_t &count) {
  const int64_t a = sp.at + e * sp.stride, end = (a + sp.bytes + 15) / 16;
  first = a / 16;
  count = sp.bytes > 0 ? (end < pieces ? end : pieces) - first : 0;
  if (count < 0) count = 0;
}

/* blockIdx.y: span y % 4 of expert used[y / 4] (an empty span's blocks return).
 * One span a block, one predicated load a piece, all U in flight before any
 * is used (bc00ad8's kernel chose between two spans at each load). */
template <bool PDL>
__global__ void __launch_bounds__(kp_moe_read_threads)
    kp_moe_read_kernel(const char *w, const int32_t *used, kp_moe_spans sp, float *sink) {
  if (PDL) kp_pdl_trigger();
  const int64_t e = used[blockIdx.y >> 2];
  /* constant indices: sp.s[blockIdx.y & 3] would copy sp to local memory in every thread
   * (104 bytes each), which ran the floor at 40 % of its speed (moe-floor-probe.cu) */
  const int which = blockIdx.y & 3;
  const kp_moe_span s = which == 0 ? sp.s[0] : which == 1 ? sp.s[1] : which == 2 ? sp.s[2] : sp.s[3];
  int64_t f, n;
  kp_moe_span_pieces(s, e, sp.pieces, f, n);
  const int64_t base = (int64_t)blockIdx.x * kp_moe_read_threads * kp_moe_read_u + threadIdx.x;
  if (base >= n) return;
  const kp_v16 *p = (const kp_v16 *)w + f;
  kp_v16 v[kp_moe_read_u];
#pragma unroll
  for (int q = 0; q < kp_moe_read_u; ++q) {
    const int64_t i = base + (int64_t)q * kp_moe_read_threads;
    v[q] = i < n ? kp_ld_stream(p + i) : kp_v16{0u, 0u, 0u, 0u};
  }
  kp_batch_fence(true);
  float a = 0.0f;
#pragma unroll
  for (int q = 0; q < kp_moe_read_u; ++q) a += __uint_as_float(v[q].x ^ v[q].y ^ v[q].z ^ v[q].w);
  if (a == 1.5e-30f) *sink = a;
}

int kp_moe_floor_launch(int32_t dtype, const void *w, const int32_t *used, int32_t nused, int32_t experts, int64_t n,
                        int64_t k, float *sink, hipStream_t stream, int pdl) {
  const int64_t E = experts, gu_bytes = kp_moe_gate_up_bytes(dtype, experts, n, k);
  const int64_t total = gu_bytes + kp_moe_down_bytes(dtype, experts, n, k);
  kp_moe_spans sp;
  if (dtype == KPICK_FP8) {
    sp.s[0] = {0, 2 * n * k, 2 * n * k};
    sp.s[1] = {KPICK_FP8_SCALES_AT(E * 2 * n, k), 2 * n * 4, 2 * n * 4};
    sp.s[2] = {gu_bytes, k * n, k * n};
    sp.s[3] = {gu_bytes + KPICK_FP8_SCALES_AT(E * k, n), k * 4, k * 4};
  } else {
    sp.s[0] = {0, 2 * n * k * 2, 2 * n * k * 2};
    sp.s[1] = {0, 0, 0};
    sp.s[2] = {gu_bytes, k * n * 2, k * n * 2};
    sp.s[3] = {0, 0, 0};
  }
  sp.pieces = total / 16;
  /* the most pieces a span takes: its bytes, and two more where it may start and end inside pieces */
  auto most_of = [](const kp_moe_span &a) {
    return a.bytes / 16 + (a.at % 16 != 0 || a.stride % 16 != 0 || a.bytes % 16 != 0 ? 2 : 0);
  };
  int64_t most = 0;
  for (const kp_moe_span &a : sp.s) most = most_of(a) > most ? most_of(a) : most;
  const int64_t per_block = (int64_t)kp_moe_read_threads * kp_moe_read_u;
  const dim3 grid((unsigned)((most + per_block - 1) / per_block), (unsigned)(4 * nused)), block(kp_moe_read_threads);
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    KP_GPU(kp_launch(kp_moe_read_kernel<true>, grid, block, stream, true, (const char *)w, used, sp, sink));
    return KPICK_OK;
  }
#else
  if (pdl) return kp_fail(KPICK_E_UNSUPPORTED, "floor", "no PDL on this target");
#endif
  KP_GPU(kp_launch(kp_moe_read_kernel<false>, grid, block, stream, false, (const char *)w, used, sp, sink));
  return KPICK_OK;
}
