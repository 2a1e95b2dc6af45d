/* kernels.h: the CPU candidates. Every bitwise-class member accumulates an
 * output the same way (16 fp32 lanes over K, lane = k mod 16, fmaf, then a
 * fixed tree), so row blocking and threading never change a byte. */
#ifndef KPICK_CPU_KERNELS_H
#define KPICK_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>

typedef struct cpu_call {
  int32_t op, dtype;
  const uint16_t *x; /* [m, k] */
  const uint16_t *w; /* [n or 2n, k]; moe: W_gate_up [experts, 2n, k] */
  uint16_t *y;       /* [m, n]; moe: [m, k] */
  int32_t m;
  int64_t n, k;
  /* moe only (kpick.h, KPICK_OP_MOE) */
  const uint16_t *w_down; /* [experts, k, n] */
  const int32_t *ids;     /* [m, topk], checked: in 0..experts-1, distinct per row */
  const float *weights;   /* [m, topk] */
  int32_t experts, topk;
  /* fp8: W's scales where w is one expert's rows of a larger packed weight
   * (the moe op's); NULL: w is a whole KPICK_FP8 buffer, its scales after its codes */
  const float *w_scales;
} cpu_call;

/* Each returns a kpick_status; params are the row's p0..p2 from space.def. */
typedef int (*cpu_launcher)(const cpu_call *c, const int32_t params[3]);

int cpu_launch_plain(const cpu_call *c, const int32_t params[3]);   /* reference layout, R=1 */
int cpu_launch_rowblk(const cpu_call *c, const int32_t params[3]);  /* p0 = R rows per block */
int cpu_launch_threads(const cpu_call *c, const int32_t params[3]); /* p0 = R, p1 = threads */
int cpu_launch_splitk(const cpu_call *c, const int32_t params[3]);  /* p0 = S parts of K */
int cpu_launch_wrong(const cpu_call *c, const int32_t params[3]);   /* test builds only */
/* the moe op (cpu/moe.c) */
int cpu_launch_moe_loop(const cpu_call *c, const int32_t params[3]);    /* per expert: gated.plain, plain */
int cpu_launch_moe_grouped(const cpu_call *c, const int32_t params[3]); /* p0 = R, fused, one pass */
int cpu_launch_moe_threads(const cpu_call *c, const int32_t params[3]); /* p0 = R, p1 = threads over experts */
/* fp8 weights (cpu/fp8.c): w points at the packed codes and scales */
int cpu_launch_w8a16(const cpu_call *c, const int32_t params[3]);   /* p0 = R rows per block */
int cpu_launch_w8a8(const cpu_call *c, const int32_t params[3]);    /* the fp8 class default */
int cpu_launch_wrong8(const cpu_call *c, const int32_t params[3]);  /* test builds only */

/* silu(g) * u, as every CPU gated candidate computes it */
static inline float cpu_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
/* A gated class default: `linear` over all 2N rows of W into a 16-bit buffer of
 * the activations' type (bf16 for fp8 weights), then silu-mul into y: two passes. */
int cpu_gated_by_linear(const cpu_call *c, int (*linear)(const cpu_call *lin));

/* Passes over memory made since the last reset: the CPU's "graph nodes". */
void cpu_stages_reset(void);
int32_t cpu_stages(void);
/* one more pass: what a launcher calls once per pass it made */
void cpu_stage(void);
void cpu_stages_set(int32_t n); /* a candidate that counts its own passes */

/* bytes from w: one stretch of weights a call reads (fp8: codes and scales) */
typedef struct cpu_region {
  const void *w;
  int64_t bytes;
} cpu_region;
/* Stream the regions' bytes once, split evenly over threads: the read floor. */
uint64_t cpu_read_floor(const cpu_region *regions, int32_t nregions, int threads);

#endif
