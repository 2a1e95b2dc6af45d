/* buffers.h: what route.c asks of the caller buffers (buffers.c). */
#ifndef KPICK_BUFFERS_H
#define KPICK_BUFFERS_H

#include <stdint.h>

/* 1: p lies in a live kpick buffer with bytes to spare; -1: in one, but it
 * ends first (*room: what is left from p); 0: in none. */
int kp_buffer_span(const void *p, int64_t bytes, int64_t *room);
/* KPICK_OK when kpick_linear may read or write bytes at p (named what): inside
 * a kpick buffer that holds them, or memory the backend takes (be_device_memory). */
int kp_check_memory(const char *what, const void *p, int64_t bytes);

#endif
