/* data.h: random inputs and the fp64 reference, on the host, for every backend. */
#ifndef KPICK_DATA_H
#define KPICK_DATA_H

#include "problem.h"

/* Fill p->x_host and p->w_host (copy 0) from p->seed: uniform in [-1, 1),
 * counter-based so the same seed gives the same data on every backend. */
int kp_fill_inputs(struct kpick_problem *p);
void kp_free_inputs(struct kpick_problem *p);
/* y[m][j] in fp64 from x and weight copy 0, for output columns cols[j]
 * (all columns when cols is NULL) */
int kp_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y);

#endif
