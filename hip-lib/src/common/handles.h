/* handles.h: a registry of live handles, so a freed or foreign handle passed
 * to the ABI is an error, not a crash. Thread-safe. */
#ifndef KPICK_HANDLES_H
#define KPICK_HANDLES_H

#include <pthread.h>
#include <stddef.h>

typedef struct kp_handles {
  pthread_mutex_t lock;
  const void **items;
  size_t len, cap;
  size_t limit; /* most live at once; 0: no limit */
} kp_handles;

#define KP_HANDLES_INIT(limit) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, (limit)}

/* 1 when added; 0 when the limit is reached or an allocation failed */
int kp_handles_add(kp_handles *h, const void *p);
/* 1 when p was live (and now is not) */
int kp_handles_remove(kp_handles *h, const void *p);
int kp_handles_has(kp_handles *h, const void *p);
size_t kp_handles_count(kp_handles *h);

#endif
