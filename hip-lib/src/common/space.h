/* space.h: the family and candidate ids of this backend, expanded from space.def. */
#ifndef KPICK_SPACE_H
#define KPICK_SPACE_H

#include <stdint.h>

#include "../../include/kpick.h"

#define KF_DEFAULT 1
#define KF_STACK 2
#define KF_PDL 4
#define KF_TEST 8
#define KF_W8A16 16 /* numeric class (kpick.h enum kpick_numeric): fp8 weights, bf16 x */
#define KF_W8A8 32  /* fp8 weights, x quantized per row to e4m3 */

/* Each backend's build defines exactly one of KPICK_BACKEND_CPU / _GPU. */
#if defined(KPICK_BACKEND_CPU)
#define KP_ROW_CPU(...) KP_ROW(__VA_ARGS__)
#define KP_ROW_GPU(...)
#define KP_FAMILY_CPU(...) KP_FAMILY(__VA_ARGS__)
#define KP_FAMILY_GPU(...)
#elif defined(KPICK_BACKEND_GPU)
#define KP_ROW_CPU(...)
#define KP_ROW_GPU(...) KP_ROW(__VA_ARGS__)
#define KP_FAMILY_CPU(...)
#define KP_FAMILY_GPU(...) KP_FAMILY(__VA_ARGS__)
#else
#error "define KPICK_BACKEND_CPU or KPICK_BACKEND_GPU"
#endif

/* this backend's families, in space.def order */
enum kp_family_id {
#define CPU_FAMILY(...) KP_FAMILY_CPU(__VA_ARGS__)
#define GPU_FAMILY(...) KP_FAMILY_GPU(__VA_ARGS__)
#define KP_FAMILY(family, names) KP_FAM_##family,
#define CPU(...)
#define GPU(...)
#include "../space.def"
#undef KP_FAMILY
  KP_NFAM
};

typedef struct kp_family {
  const char *name;
  const char *param_names; /* "R,U": one per used params[] slot */
} kp_family;

/* families[id] for every family of this backend */
extern const kp_family kp_families[KP_NFAM];

enum kp_candidate_id {
  KP_CAND_none = -1,
#define CPU(id, ...) KP_ROW_CPU(id, __VA_ARGS__)
#define GPU(id, ...) KP_ROW_GPU(id, __VA_ARGS__)
#define KP_ROW(id, ...) KP_CAND_##id,
#include "../space.def"
#undef KP_ROW
  KP_NCAND
};

typedef struct kp_row {
  const char *name;
  const char *family;
  int32_t family_id;  /* enum kp_family_id */
  int32_t op;
  int32_t params[3];
  int32_t nodes;
  int32_t bitwise_with;
  int32_t flags;
  int32_t rows_min, rows_max;
} kp_row;

/* rows[id] for every candidate of this backend */
extern const kp_row kp_space[KP_NCAND > 0 ? KP_NCAND : 1];

/* A row's numeric class: its KF_W8A* flag, else w16a16. */
static inline int32_t kp_row_numeric(const kp_row *r) {
  return (r->flags & KF_W8A8) ? KPICK_NUM_W8A8 : (r->flags & KF_W8A16) ? KPICK_NUM_W8A16 : KPICK_NUM_W16A16;
}
/* 1 when the row computes problems of dtype: the fp8 classes take fp8 alone,
 * w16a16 takes bf16 and fp16. */
static inline int kp_row_takes(const kp_row *r, int32_t dtype) {
  return (kp_row_numeric(r) != KPICK_NUM_W16A16) == (dtype == KPICK_FP8);
}
/* 1 when an available candidate of this build computes op in dtype (abi.c);
 * else the op's calls in dtype are KPICK_E_UNSUPPORTED (a HIP build's fp8). */
int kp_space_takes(int32_t op, int32_t dtype);

#endif
