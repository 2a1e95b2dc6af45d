/* check.h: what the fp64 checks (opcheck.c, forward.c) share: the buffers of
 * one check, released together, and the worse of two errors. */
#ifndef KPICK_CHECK_H
#define KPICK_CHECK_H

#include <math.h>
#include <stddef.h>

#include "error.h"

/* Every buffer of one check, released together by bag_free. */
typedef struct bag {
  void *host[32]; /* a moe step check takes 26 */
  void *dev[24];
  int nhost, ndev;
  void *stream;
} bag;

/* zeroed host memory; NULL when the bag is full or the allocation failed */
void *bag_host(bag *b, size_t bytes);
void bag_free(bag *b);
/* A device copy of src (bytes); *out NULL on failure with the error recorded. */
int bag_upload(bag *b, const void *src, size_t bytes, void **out);

#define KP_HOST(b, ptr, bytes)                                                             \
  do {                                                                                     \
    (ptr) = bag_host((b), (bytes));                                                        \
    if (!(ptr)) return kp_fail(KPICK_E_NOMEM, "selfcheck", "host allocation failed");     \
  } while (0)

/* the worse of two relative errors; NaN is the worst */
static inline double kp_worst(double a, double b) { return isnan(a) || a > b ? a : b; }

#endif
