/* placement.c: does a candidate's time depend on where its buffers sit in
 * device memory? One process times the same candidates on the same problem
 * once per placement: before each placement's problem is created, a spacer of
 * a different size is allocated (and kept), so the problem's buffers land on
 * other pages. Run it in several processes to tell a per-placement shift from
 * a per-process one (issue 15: near-tie picks flipped between two sweeps).
 *   placement OP N K M PLACEMENTS NAME...     OP: 0 linear, 1 gated; bf16
 * Prints one line per (placement, candidate): median of 15 samples in us. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../hip-lib/include/kpick.h"

static int check(int st, const char *what) {
  if (st != KPICK_OK) fprintf(stderr, "placement: %s failed (%d): %s\n", what, st, kpick_last_error());
  return st;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: placement OP N K M PLACEMENTS NAME...\n");
    return 2;
  }
  const int op = atoi(argv[1]), m = atoi(argv[4]), places = atoi(argv[5]);
  const long long n = atoll(argv[2]), k = atoll(argv[3]);
  if (check(kpick_init(), "init")) return 1;
  for (int pl = 0; pl < places; pl++) {
    /* spacers of 0, 37, 74, ... MiB plus an odd 2 MiB page count: other pages each time */
    void *spacer = NULL;
    const size_t bytes = ((size_t)pl * 37 + (pl % 2) * 3) << 20;
    if (bytes && cudaMalloc(&spacer, bytes) != cudaSuccess) {
      fprintf(stderr, "placement: spacer of %zu bytes failed\n", bytes);
      return 1;
    }
    kpick_problem *p = NULL;
    if (check(kpick_problem_create(op, KPICK_BF16, n, k, m, 0, 7, &p), "problem_create")) return 1;
    for (int c = 6; c < argc; c++) {
      int32_t cand = -1, ok = 0;
      double us[15];
      if (check(kpick_candidate_find(argv[c], &cand), "find") || check(kpick_supports(p, cand, &ok), "supports")) return 1;
      if (!ok) continue;
      if (check(kpick_time(p, cand, 15, us), "time")) return 1;
      qsort(us, 15, sizeof us[0], by_value);
      printf("placement %d spacer %zu MiB %s op=%d n=%lld k=%lld m=%d: median %.3f us (p25 %.3f, p75 %.3f)\n", pl,
             bytes >> 20, argv[c], op, n, k, m, us[7], us[3], us[11]);
    }
    fflush(stdout);
    if (check(kpick_problem_free(p), "free")) return 1;
    /* the spacer stays allocated: the next placement's spacer goes beside it */
  }
  return 0;
}
