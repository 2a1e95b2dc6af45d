/* check.h: the one check of a GPU runtime call or kernel launch. On failure it
 * records the function, the call as written, the runtime's reason, file and line, and
 * returns KPICK_E_DEVICE from the enclosing function. A launch is checked by
 * wrapping kp_launch (compat.h), which returns the launch's error. */
#ifndef KPICK_GPU_CHECK_H
#define KPICK_GPU_CHECK_H

#include "../common/error.h"
#include "compat.h"

/* The record itself, for the few sites that must clean up before returning:
 * "function: call: reason at file:line" (the call's text cut at 120 characters). */
static inline int kp_gpu_fail(const char *func, const char *call, hipError_t e, const char *file, int line) {
  return kp_fail(KPICK_E_DEVICE, func, "%.120s: %s at %s:%d", call, hipGetErrorString(e), file, line);
}
#define KP_GPU_FAIL(call_text, e) kp_gpu_fail(__func__, call_text, e, __FILE__, __LINE__)

#define KP_GPU(call)                                                 \
  do {                                                               \
    const hipError_t kp_e_ = (call);                                 \
    if (kp_e_ != hipSuccess) return KP_GPU_FAIL(#call, kp_e_);       \
  } while (0)

#endif
