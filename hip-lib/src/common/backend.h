/* backend.h: what a backend (src/cpu or src/gpu) gives the common ABI layer.
 * abi.c validates every argument before calling these; a hook may assume a
 * live problem, an id below KP_NCAND and sizes that match the problem. */
#ifndef KPICK_BACKEND_H
#define KPICK_BACKEND_H

#include "../../include/kpick.h"
#include "problem.h"

#ifdef __cplusplus
extern "C" {
#endif

int be_init(void);
/* every field but space, abi and compiler (the ABI layer fills those) */
int be_info(kpick_info *out);
int be_mem(int64_t *free_bytes, int64_t *total_bytes);
/* 1 when the candidate was built for this target and can run here */
int be_available(int32_t cand);
/* 1 when the candidate can run this problem (shape alignment etc.) */
int be_supports(const struct kpick_problem *p, int32_t cand);
/* allocate state for m_max rows (p->m == p->m_max here), upload p->x_host and
 * p->copies copies of p->w_host; later calls use the active rows p->m */
int be_problem_init(struct kpick_problem *p);
void be_problem_free(struct kpick_problem *p);
int be_poison(struct kpick_problem *p);
int be_run(struct kpick_problem *p, int32_t cand, int32_t copy);
int be_time(struct kpick_problem *p, int32_t cand, int32_t nsamples, double *us);
int be_time_floor(struct kpick_problem *p, int32_t nsamples, double *us);
int be_count_nodes(struct kpick_problem *p, int32_t cand, int32_t *out);
int be_download_y(const struct kpick_problem *p, void *dst);
/* One call of cand on caller-owned device pointers, enqueued on stream (NULL:
 * the default stream; the CPU ignores it and returns when y is complete).
 * This is what kpick_linear dispatches to; be_run is this on p's buffers. */
int be_launch(int32_t cand, int32_t op, int32_t dtype, const void *x, const void *w, void *y,
              int32_t m, int64_t n, int64_t k, void *stream);

#ifdef __cplusplus
}
#endif
#endif
