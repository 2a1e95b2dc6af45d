/* space.c: the describer: one kp_family per family and one kp_row per row of
 * space.def for this backend. */
#include "space.h"

#include "../../include/kpick.h"

#define LINEAR KPICK_OP_LINEAR
#define GATED KPICK_OP_GATED
#define MOE KPICK_OP_MOE

const kp_family kp_families[KP_NFAM] = {
#define CPU_FAMILY(...) KP_FAMILY_CPU(__VA_ARGS__)
#define GPU_FAMILY(...) KP_FAMILY_GPU(__VA_ARGS__)
#define KP_FAMILY(family, names) [KP_FAM_##family] = {#family, names},
#define CPU(...)
#define GPU(...)
#include "../space.def"
#undef KP_FAMILY
};

/* KP_FAM_<family> is declared only for a family line of this backend */
const kp_row kp_space[KP_NCAND > 0 ? KP_NCAND : 1] = {
#define CPU(id, ...) KP_ROW_CPU(id, __VA_ARGS__)
#define GPU(id, ...) KP_ROW_GPU(id, __VA_ARGS__)
#define KP_ROW(id, name, family, op, p0, p1, p2, nodes, bw, flags, rmin, rmax) \
  [KP_CAND_##id] = {name, #family, KP_FAM_##family, op, {p0, p1, p2}, nodes, KP_CAND_##bw, flags, rmin, rmax},
#include "../space.def"
#undef KP_ROW
};
