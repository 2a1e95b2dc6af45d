/* space.c: the describer: one kp_row per space.def row of this backend. */
#include "space.h"

#include "../../include/kpick.h"

#define LINEAR KPICK_OP_LINEAR
#define GATED KPICK_OP_GATED

const kp_row kp_space[KP_NCAND > 0 ? KP_NCAND : 1] = {
#define CPU(id, ...) KP_ROW_CPU(id, __VA_ARGS__)
#define GPU(id, ...) KP_ROW_GPU(id, __VA_ARGS__)
#define KP_ROW(id, name, family, op, p0, p1, p2, nodes, bw, flags, rmin, rmax) \
  [KP_CAND_##id] = {name, #family, op, {p0, p1, p2}, nodes, KP_CAND_##bw, flags, rmin, rmax},
#include "../space.def"
#undef KP_ROW
#undef CPU
#undef GPU
};
