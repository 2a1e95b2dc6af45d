/* run_one.c: run one candidate a few times on one problem, for a profiler
 * (ncu) to look at; prints the candidate's median time too.
 *   run_one NAME OP N K M [RUNS]      OP: 0 linear, 1 gated; bf16 */
#include <stdio.h>
#include <stdlib.h>

#include "../../hip-lib/include/kpick.h"

static int check(int st, const char *what) {
  if (st != KPICK_OK) fprintf(stderr, "run_one: %s failed (%d): %s\n", what, st, kpick_last_error());
  return st;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: run_one NAME OP N K M [RUNS]\n");
    return 2;
  }
  const int op = atoi(argv[2]), m = atoi(argv[5]), runs = argc > 6 ? atoi(argv[6]) : 5;
  const long long n = atoll(argv[3]), k = atoll(argv[4]);
  int32_t cand = -1, copies = 0;
  kpick_problem *p = NULL;
  if (check(kpick_init(), "init") || check(kpick_candidate_find(argv[1], &cand), "find") ||
      check(kpick_problem_create(op, KPICK_BF16, n, k, m, 0, 7, &p), "problem_create") ||
      check(kpick_problem_copies(p, &copies), "copies"))
    return 1;
  for (int i = 0; i < runs; i++)
    if (check(kpick_run(p, cand, i % copies), "run")) return 1;
  double us[9];
  if (check(kpick_time(p, cand, 9, us), "time")) return 1;
  double lo = us[0];
  for (int i = 1; i < 9; i++) lo = us[i] < lo ? us[i] : lo;
  printf("run_one %s op=%d n=%lld k=%lld m=%d: best of 9 batches %.3f us per call\n", argv[1], op, n, k, m, lo);
  return check(kpick_problem_free(p), "free") != KPICK_OK;
}
