/* sha256.h: SHA-256 (FIPS 180-4), for the route's binding to its JSON table:
 * a .route carries the digest of the JSON bytes it was compiled from and of
 * its own text, and route.c checks both before using it. */
#ifndef KPICK_SHA256_H
#define KPICK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kp_sha256 {
  uint32_t h[8];
  uint64_t bytes;   /* message length so far */
  uint8_t block[64];
  size_t used;      /* bytes waiting in block */
} kp_sha256;

void kp_sha256_init(kp_sha256 *s);
void kp_sha256_update(kp_sha256 *s, const void *data, size_t len);
/* the digest as 64 lowercase hex digits and a NUL */
void kp_sha256_hex(kp_sha256 *s, char out[65]);

#endif
