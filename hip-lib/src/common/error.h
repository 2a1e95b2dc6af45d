/* error.h: the library's last-error string and its check macros. */
#ifndef KPICK_ERROR_H
#define KPICK_ERROR_H

#include "../../include/kpick.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records "where: message" as the last error and returns status. */
int kp_fail(int status, const char *where, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void kp_clear_error(void);

#ifdef __cplusplus
}
#endif

/* Argument guard: on a false condition, record it and return KPICK_E_ARG. */
#define KP_REQUIRE(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) return kp_fail(KPICK_E_ARG, __func__, __VA_ARGS__); \
  } while (0)

/* Propagate a non-OK status from a call that already recorded its error. */
#define KP_TRY(call)              \
  do {                            \
    int kp_st_ = (call);          \
    if (kp_st_ != KPICK_OK) return kp_st_; \
  } while (0)

#endif
