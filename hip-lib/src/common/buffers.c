/* buffers.c: memory a caller hands to kpick_linear, allocated through the
 * library (device memory on a GPU, host memory on the CPU), so a binding with
 * no GPU runtime of its own (lib/ffi.ts) can run the route on device memory.
 * The library keeps each buffer's size: a copy or a kpick_linear whose bytes
 * run past the end of one is refused, and a pointer no buffer holds is checked
 * by the backend (a GPU refuses host memory where it needs device memory). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "buffers.h"
#include "error.h"

#define KP_MAX_BUFFERS 4096
#define KP_MAX_BUFFER_BYTES (1LL << 40)

typedef struct buffer {
  char *base;
  int64_t bytes;
} buffer;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static buffer live[KP_MAX_BUFFERS];
static int nlive;

/* the live buffer holding address p, or -1; caller holds the lock */
static int find(const void *p) {
  for (int i = 0; i < nlive; i++)
    if ((const char *)p >= live[i].base && (const char *)p < live[i].base + live[i].bytes) return i;
  return -1;
}

int kp_buffer_span(const void *p, int64_t bytes, int64_t *room) {
  pthread_mutex_lock(&lock);
  int i = find(p);
  int64_t left = i < 0 ? 0 : live[i].bytes - ((const char *)p - live[i].base);
  pthread_mutex_unlock(&lock);
  if (i < 0) return 0;
  *room = left;
  return bytes <= left ? 1 : -1;
}

int kp_check_memory(const char *what, const void *p, int64_t bytes) {
  int64_t room = 0;
  int span = kp_buffer_span(p, bytes, &room);
  if (span < 0)
    return kp_fail(KPICK_E_ARG, "kpick_linear", "%s needs %lld bytes, its kpick buffer has %lld from there", what,
                   (long long)bytes, (long long)room);
  if (span > 0) return KPICK_OK;
  int device = 0;
  KP_TRY(be_device_memory(p, &device));
  if (!device)
    return kp_fail(KPICK_E_ARG, "kpick_linear", "%s is host memory: this backend needs device memory (kpick_buffer_alloc)",
                   what);
  return KPICK_OK;
}

int kpick_buffer_alloc(int64_t bytes, void **out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(out != NULL, "out is null");
  KP_REQUIRE(bytes > 0 && bytes <= KP_MAX_BUFFER_BYTES, "bytes must be in 1..%lld, got %lld", (long long)KP_MAX_BUFFER_BYTES,
             (long long)bytes);
  void *p = NULL;
  pthread_mutex_lock(&lock);
  int full = nlive == KP_MAX_BUFFERS;
  pthread_mutex_unlock(&lock);
  if (full) return kp_fail(KPICK_E_NOMEM, __func__, "%d buffers are live: free some first", KP_MAX_BUFFERS);
  KP_TRY(be_dev_alloc(&p, (size_t)bytes));
  pthread_mutex_lock(&lock);
  full = nlive == KP_MAX_BUFFERS;
  if (!full) live[nlive++] = (buffer){(char *)p, bytes};
  pthread_mutex_unlock(&lock);
  if (full) {
    be_dev_free(p);
    return kp_fail(KPICK_E_NOMEM, __func__, "%d buffers are live: free some first", KP_MAX_BUFFERS);
  }
  *out = p;
  return KPICK_OK;
}

int kpick_buffer_free(void *buf) {
  KP_TRY(kpick_init());
  KP_REQUIRE(buf != NULL, "buf is null");
  pthread_mutex_lock(&lock);
  int i = find(buf);
  int whole = i >= 0 && live[i].base == (char *)buf;
  if (whole) live[i] = live[--nlive];
  pthread_mutex_unlock(&lock);
  KP_REQUIRE(whole, "not a live kpick buffer (freed twice, or not the start of one?)");
  be_dev_free(buf);
  return KPICK_OK;
}

/* the live buffer that starts at buf, its bytes in *size; 0 when none */
static int whole_buffer(const void *buf, int64_t *size) {
  pthread_mutex_lock(&lock);
  int i = find(buf);
  int whole = i >= 0 && live[i].base == (const char *)buf;
  if (whole) *size = live[i].bytes;
  pthread_mutex_unlock(&lock);
  return whole;
}

/* a copy of bytes at offset into or out of buf, a live kpick buffer, with a
 * non-null host side; errors name fn, the ABI call */
static int copy_fits(const char *fn, const void *buf, int64_t offset, const void *host, const char *host_name,
                     int64_t bytes) {
  KP_TRY(kpick_init());
  int64_t size = 0;
  if (!(buf != NULL && whole_buffer(buf, &size))) return kp_fail(KPICK_E_ARG, fn, "buf is not a live kpick buffer");
  if (host == NULL) return kp_fail(KPICK_E_ARG, fn, "%s is null", host_name);
  if (!(offset >= 0 && bytes > 0 && offset <= size && bytes <= size - offset))
    return kp_fail(KPICK_E_ARG, fn, "%lld bytes at offset %lld do not fit a buffer of %lld", (long long)bytes,
                   (long long)offset, (long long)size);
  return KPICK_OK;
}

int kpick_buffer_upload(void *buf, int64_t offset, const void *src, int64_t bytes) {
  KP_TRY(copy_fits(__func__, buf, offset, src, "src", bytes));
  return be_dev_upload((char *)buf + offset, src, (size_t)bytes);
}

int kpick_buffer_download(const void *buf, int64_t offset, void *dst, int64_t bytes) {
  KP_TRY(copy_fits(__func__, buf, offset, dst, "dst", bytes));
  return be_dev_download(dst, (const char *)buf + offset, (size_t)bytes);
}
