/* handles.c: the live-handle registry of handles.h. */
#include "handles.h"

#include <stdlib.h>

int kp_handles_add(kp_handles *h, const void *p) {
  int ok = 1;
  pthread_mutex_lock(&h->lock);
  if (h->limit && h->len >= h->limit) {
    ok = 0;
  } else if (h->len == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 16;
    const void **grown = realloc((void *)h->items, cap * sizeof *grown);
    if (grown) {
      h->items = grown;
      h->cap = cap;
    } else {
      ok = 0;
    }
  }
  if (ok) h->items[h->len++] = p;
  pthread_mutex_unlock(&h->lock);
  return ok;
}

int kp_handles_remove(kp_handles *h, const void *p) {
  int found = 0;
  pthread_mutex_lock(&h->lock);
  for (size_t i = 0; i < h->len && !found; i++) {
    if (h->items[i] == p) {
      h->items[i] = h->items[--h->len];
      found = 1;
    }
  }
  pthread_mutex_unlock(&h->lock);
  return found;
}

int kp_handles_has(kp_handles *h, const void *p) {
  int found = 0;
  pthread_mutex_lock(&h->lock);
  for (size_t i = 0; i < h->len && !found; i++) found = h->items[i] == p;
  pthread_mutex_unlock(&h->lock);
  return found;
}

size_t kp_handles_count(kp_handles *h) {
  pthread_mutex_lock(&h->lock);
  size_t n = h->len;
  pthread_mutex_unlock(&h->lock);
  return n;
}
