/* profile.c: run each named candidate once per rows bucket on one problem,
 * and the read floor once, for Nsight Compute to profile (ncu flushes the
 * caches before each of its passes, so every launch reads cold weights).
 *   profile OP N K ROWS NAMES [DTYPE]   OP: 0 linear, 1 gated, 2 moe (Qwen3-30B-A3B's E 128,
 *                                  top-8, uniform routing), 3 the same moe under skewed
 *                                  routing; ROWS and NAMES comma lists; DTYPE bf16 (the
 *                                  default) or fp8 (e4m3 weights and their row scales)
 * Prints one "PROFILE seq=... what=... m=..." line per launch, in launch
 * order, so the ncu report (one row per kernel, in the same order) can be
 * read back per candidate; blaslt may launch more than one kernel per call.
 * The floor goes first, through the library's own launcher (not in kpick.h,
 * so its C++ symbol is named here; bench/gpu/profile-wgmma.sh builds this). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../hip-lib/include/kpick.h"

/* hip-lib/src/gpu/launch.h: int kp_floor_launch(const void *, size_t, float *, hipStream_t, int) */
int kp_floor_launch_sym(const void *w, size_t bytes, float *sink, void *stream, int pdl)
    __asm__("_Z15kp_floor_launchPKvmPfP11CUstream_sti");

static int check(int st, const char *what) {
  if (st != KPICK_OK) fprintf(stderr, "profile: %s failed (%d): %s\n", what, st, kpick_last_error());
  return st;
}

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: profile OP N K ROWS NAMES [bf16|fp8]   (ROWS, NAMES: comma lists)\n");
    return 2;
  }
  const int fp8 = argc == 7 && strcmp(argv[6], "fp8") == 0;
  if (argc == 7 && !fp8 && strcmp(argv[6], "bf16") != 0) {
    fprintf(stderr, "profile: DTYPE is bf16 or fp8, got %s\n", argv[6]);
    return 2;
  }
  const int dtype = fp8 ? KPICK_FP8 : KPICK_BF16;
  const int skewed = atoi(argv[1]) == 3, op = skewed ? KPICK_OP_MOE : atoi(argv[1]);
  const long long n = atoll(argv[2]), k = atoll(argv[3]);
  int rows[16], nrows = 0, mmax = 1;
  for (char *s = strtok(argv[4], ","); s && nrows < 16; s = strtok(NULL, ",")) {
    rows[nrows] = atoi(s);
    if (rows[nrows] > mmax) mmax = rows[nrows];
    nrows++;
  }
  kpick_problem *p = NULL;
  if (check(kpick_init(), "init")) return 1;
  if (op == KPICK_OP_MOE ? check(kpick_problem_create_moe(dtype, 128, 8, n, k, mmax, skewed ? KPICK_ROUTING_SKEWED : KPICK_ROUTING_UNIFORM, 1, 7, &p), "problem_create_moe")
                         : check(kpick_problem_create(op, dtype, n, k, mmax, 1, 7, &p), "problem_create"))
    return 1;

  /* the floor: the same weight bytes, its own buffers (fp8: the codes, then a scale a row) */
  const long long wrows = n * (op == KPICK_OP_GATED ? 2 : 1);
  const size_t wbytes = fp8 ? (size_t)KPICK_FP8_SCALES_AT(wrows, k) + (size_t)wrows * 4 : (size_t)wrows * (size_t)k * 2;
  void *w = NULL, *sink = NULL;
  if (check(kpick_buffer_alloc((int64_t)wbytes, &w), "alloc w") || check(kpick_buffer_alloc(64, &sink), "alloc sink"))
    return 1;
  int seq = 0;
  if (op != KPICK_OP_MOE) { /* a moe floor streams the experts the rows read: the sweep times it */
    printf("PROFILE seq=%d what=floor op=%d n=%lld k=%lld m=0\n", seq++, op, n, k);
    fflush(stdout);
    if (check(kp_floor_launch_sym(w, wbytes, (float *)sink, NULL, 0), "floor")) return 1;
  }

  for (int r = 0; r < nrows; r++) {
    if (check(kpick_set_rows(p, rows[r]), "set_rows")) return 1;
    char names[4096];
    snprintf(names, sizeof names, "%s", argv[5]);
    char *save = NULL;
    for (char *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
      int32_t cand = -1, ok = 0;
      if (kpick_candidate_find(name, &cand) != KPICK_OK || kpick_supports(p, cand, &ok) != KPICK_OK || !ok) {
        printf("SKIP what=%s m=%d (unknown or unsupported)\n", name, rows[r]);
        continue;
      }
      printf("PROFILE seq=%d what=%s op=%d n=%lld k=%lld m=%d\n", seq++, name, op, n, k, rows[r]);
      fflush(stdout);
      if (check(kpick_run(p, cand, 0), name)) return 1;
    }
  }
  kpick_buffer_free(w);
  kpick_buffer_free(sink);
  return check(kpick_problem_free(p), "free") != KPICK_OK;
}
