/* rows.h: the GPU rows of space.def as compile-time values, so that each
 * family's kernel file instantiates exactly the kernels its rows name and no
 * row can go without them (llm.c dev/cuda style: the list is the source).
 *
 * A kernel file keeps one table indexed by candidate id, filled by an X-macro
 * over space.def with a function template of the row id:
 *     #define CPU(...)
 *     #define GPU(id, ...) kp_<family>_row<KP_CAND_##id>(),
 *     #include "../space.def"
 * Rows of another family give an empty entry, rows of its own family give
 * their kernels (every dtype, every tile or row count their rows range
 * needs), and a row whose parameters the family cannot build fails the build
 * with a static_assert naming the limit. hooks.cpp asks the table
 * (kp_<family>_built) only to say which rows the target lacks: PDL rows on
 * HIP, and wgmma rows without an sm_90a pass. */
#ifndef KPICK_GPU_ROWS_H
#define KPICK_GPU_ROWS_H

#include "../../include/kpick.h"
#include "../common/space.h"

struct kp_def {
  int family; /* enum kp_family_id */
  int op;     /* enum kpick_op */
  int p0, p1, p2;
  int flags;
  int rows_min, rows_max;
  constexpr bool pdl() const { return (flags & KF_PDL) != 0; }
};

#define LINEAR KPICK_OP_LINEAR
#define GATED KPICK_OP_GATED
#define MOE KPICK_OP_MOE
static constexpr kp_def kp_defs[] = {
#define CPU(...)
#define GPU(id, name, family, op, p0, p1, p2, nodes, bw, flags, rmin, rmax) \
  {KP_FAM_##family, op, p0, p1, p2, flags, rmin, rmax},
#include "../space.def"
};
#undef LINEAR
#undef GATED
#undef MOE
/* the same rows as the ids, in the same order (both expand the GPU rows) */
static_assert(sizeof kp_defs / sizeof kp_defs[0] == KP_NCAND, "one kp_def per candidate id");

/* the most activation rows a call has (the ABI's limit: kpick_problem_create,
 * kpick_linear) */
static constexpr int kp_rows_limit = KPICK_MAX_ROWS;

/* PDL kernels exist only where the compiler can build them (CUDA) */
#if defined(KPICK_GPU_CUDA)
static constexpr bool kp_pdl_built = true;
#else
static constexpr bool kp_pdl_built = false;
#endif

/* log2 of a power of two, for tables indexed by tile count */
static constexpr int kp_log2(int v) { return v <= 1 ? 0 : 1 + kp_log2(v / 2); }

#endif
