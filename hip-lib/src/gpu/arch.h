/* arch.h: the target families, named once, with a device view (what the code
 * being compiled may use) and a host view (what the device we run on has).
 * hooks.cpp checks at init that the two agree on the warp width. */
#ifndef KPICK_GPU_ARCH_H
#define KPICK_GPU_ARCH_H

#include <stdlib.h>
#include <string.h>

#include "compat.h"

/* ---- device view ---- */
/* Warp (wavefront) width of the target being compiled: 32 on NVIDIA and RDNA,
 * 64 on gfx9 CDNA. Device code only: hipcc's host pass parses kernels but
 * generates no device code, and its value there (64) says nothing about the
 * target, so host code sizes blocks from the device's warpSize instead
 * (kp_call.warp), which be_init checks against this constant. */
#if defined(KPICK_GPU_CUDA)
#define KP_WARP 32
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
#define KP_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define KP_WARP 64
#endif
static constexpr int kp_warp = KP_WARP;

/* Matrix instruction of the target, if any:
 *   KP_MMA_NV    mma.sync m16n8k16 (bf16/fp16 -> fp32), NVIDIA sm_80 and later
 *   KP_MMA_MFMA  v_mfma_f32_16x16x16 bf16_1k / f16, CDNA2 and later (gfx90a, gfx94x, gfx950)
 * RDNA (gfx10/11) and older CDNA have neither: the mma kernels compile to a trap
 * there and the host never launches them (kp_host_has_mma says no). */
#if defined(KPICK_GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define KP_MMA_NV 1
#elif defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || \
    defined(__gfx950__)
#define KP_MMA_MFMA 1
#endif

/* One matrix instruction multiplies a 16-row tile of W by this many activation
 * rows: m16n8k16 takes 8, the 16x16x16 MFMA 16. The host uses the same number
 * to size the grid. */
#if defined(KPICK_GPU_CUDA)
static constexpr int kp_mma_cols = 8;
#else
static constexpr int kp_mma_cols = 16;
#endif

/* ---- host view ---- */
/* arch: "sm_90" or "gfx942" as be_info reports it. */
static inline int kp_host_has_mma(const char *arch) {
#if defined(KPICK_GPU_CUDA)
  return strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 80;
#else
  return strcmp(arch, "gfx90a") == 0 || strncmp(arch, "gfx94", 5) == 0 || strncmp(arch, "gfx95", 5) == 0;
#endif
}

/* Programmatic dependent launch: CUDA on sm_90 and later; HIP has none. */
static inline int kp_host_has_pdl(const char *arch) {
#if defined(KPICK_GPU_CUDA)
  return strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 90;
#else
  (void)arch;
  return 0;
#endif
}

/* wgmma and the other sm_90a instructions: compute capability 9.0 exactly
 * (sm_90a code runs on no other device), CUDA only. */
static inline int kp_host_has_wgmma(const char *arch) {
#if defined(KPICK_GPU_CUDA)
  return strcmp(arch, "sm_90") == 0;
#else
  (void)arch;
  return 0;
#endif
}

#endif
