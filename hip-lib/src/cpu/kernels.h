/* kernels.h: the CPU candidates. Every bitwise-class member accumulates an
 * output the same way (16 fp32 lanes over K, lane = k mod 16, fmaf, then a
 * fixed tree), so row blocking and threading never change a byte. */
#ifndef KPICK_CPU_KERNELS_H
#define KPICK_CPU_KERNELS_H

#include <stdint.h>

typedef struct cpu_call {
  int32_t op, dtype;
  const uint16_t *x; /* [m, k] */
  const uint16_t *w; /* [n or 2n, k] */
  uint16_t *y;       /* [m, n] */
  int32_t m;
  int64_t n, k;
} cpu_call;

/* Each returns a kpick_status; params are the row's p0..p2 from space.def. */
typedef int (*cpu_launcher)(const cpu_call *c, const int32_t params[3]);

int cpu_launch_plain(const cpu_call *c, const int32_t params[3]);   /* reference layout, R=1 */
int cpu_launch_rowblk(const cpu_call *c, const int32_t params[3]);  /* p0 = R rows per block */
int cpu_launch_threads(const cpu_call *c, const int32_t params[3]); /* p0 = R, p1 = threads */
int cpu_launch_splitk(const cpu_call *c, const int32_t params[3]);  /* p0 = S parts of K */
int cpu_launch_wrong(const cpu_call *c, const int32_t params[3]);   /* test builds only */
/* fp8 weights (cpu/fp8.c): w points at the packed codes and scales */
int cpu_launch_w8a16(const cpu_call *c, const int32_t params[3]);   /* p0 = R rows per block */
int cpu_launch_w8a8(const cpu_call *c, const int32_t params[3]);    /* the fp8 class default */
int cpu_launch_wrong8(const cpu_call *c, const int32_t params[3]);  /* test builds only */

/* Passes over memory made since the last reset: the CPU's "graph nodes". */
void cpu_stages_reset(void);
int32_t cpu_stages(void);
/* one more pass: what a launcher calls once per pass it made */
void cpu_stage(void);

/* Stream the weight bytes once with every thread: the read floor. */
uint64_t cpu_read_floor(const void *w, int64_t bytes, int threads);

#endif
