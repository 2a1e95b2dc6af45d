/* error.c: one thread-local last-error string; the ABI never exits. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

int kp_fail(int status, const char *where, const char *fmt, ...) {
  int n = snprintf(last_error, sizeof last_error, "%s: ", where);
  if (n < 0 || (size_t)n >= sizeof last_error) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

void kp_clear_error(void) { last_error[0] = '\0'; }

const char *kpick_last_error(void) { return last_error; }
