/* check.c: the bag of check.h. */
#include <stdlib.h>

#include "backend.h"
#include "check.h"

void *bag_host(bag *b, size_t bytes) {
  if (b->nhost == (int)(sizeof b->host / sizeof b->host[0])) return NULL;
  void *p = calloc(1, bytes ? bytes : 1);
  if (p) b->host[b->nhost++] = p;
  return p;
}

void bag_free(bag *b) {
  for (int i = 0; i < b->nhost; i++) free(b->host[i]);
  for (int i = 0; i < b->ndev; i++) be_dev_free(b->dev[i]);
  if (b->stream) be_stream_destroy(b->stream);
}

int bag_upload(bag *b, const void *src, size_t bytes, void **out) {
  *out = NULL;
  if (b->ndev == (int)(sizeof b->dev / sizeof b->dev[0])) return kp_fail(KPICK_E_STATE, "selfcheck", "too many buffers");
  void *p = NULL;
  KP_TRY(be_dev_alloc(&p, bytes));
  b->dev[b->ndev++] = p;
  *out = p;
  return be_dev_upload(p, src, bytes);
}
