/* selftest.c: the GPU backend checked and timed through the public C ABI
 * (kpick.h), on the device machine, with no Node there.
 *
 *   selftest [parity] [time] [quick] [tiny]    (default: parity time)
 *
 * quick takes the first two shapes of each list; tiny divides every shape by
 * 16 (a dry run of the harness itself, e.g. against the CPU backend).
 * parity  every candidate on a few shapes (linear and gated, bf16 and fp16,
 *         odd sizes, rows 1..128): y poisoned before each run, every element
 *         must be written and finite; relative Frobenius error against the fp64
 *         reference (within kpick.h's KPICK_PARITY_BAR_*) on sampled columns; the same
 *         bytes on a second run; the same bytes as its bitwise class head; graph
 *         nodes as declared (the BLAS's own count is reported, not judged).
 * time    the Llama-3.1-8B decode shapes (and one small-N shape), bf16, rows
 *         1..128: the read floor and every runnable candidate, interleaved in
 *         passes; a candidate counts only if it also passes parity there. Then
 *         the route a table would take (best if its gain over the default is
 *         at least kpick.h's KPICK_MIN_GAIN, no more graph nodes unless gated;
 *         promote's noise check is left out) against the default and the floor.
 * Always: every candidate whose family the device has is available (AVAIL):
 * a space.def row the build holds no kernels for fails here, not silently.
 * Lines start with a tag (INFO, CAND, AVAIL, PARITY, SAMEBITS, TIME, ROUTE, SUMMARY) for
 * grep; the exit status is 1 when any parity or availability check failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../hip-lib/include/kpick.h"

#define MAX_CAND 256
#define MAX_ROWS 128

static int failures;
static int64_t shrink = 1; /* tiny: shapes / 16 */

static void die_on(int st, const char *what) {
  if (st != KPICK_OK) {
    fprintf(stderr, "selftest: %s failed (%d): %s\n", what, st, kpick_last_error());
    exit(2);
  }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static float half_to_f32(int dtype, uint16_t h) {
  if (dtype == KPICK_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0 && man == 0) u = sign;
  else if (exp == 0) { /* subnormal */
    float f = ldexpf((float)man, -24);
    return sign ? -f : f;
  } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
  else u = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int32_t ncand;
static kpick_candidate cands[MAX_CAND];

/* ---- parity of one candidate on one problem at the active rows ---- */

typedef struct {
  int64_t *cols;
  int32_t ncols;
  double *ref; /* [m][ncols] */
} ref_t;

static void make_cols(int64_t n, int32_t want, ref_t *r) {
  if (n <= want) want = (int32_t)n;
  r->ncols = want;
  r->cols = malloc(sizeof(int64_t) * (size_t)want);
  /* the first and last 8 columns (tails of tiles), the rest spread evenly */
  int32_t j = 0;
  for (; j < want && j < 8; j++) r->cols[j] = j;
  int32_t spread = want - j - 8 > 0 ? want - j - 8 : 0;
  for (int32_t s = 0; s < spread; s++, j++) r->cols[j] = 8 + (int64_t)s * (n - 16) / (spread > 0 ? spread : 1);
  for (int64_t c = n - (want - j); j < want; j++, c++) r->cols[j] = c;
}

typedef struct {
  int ok;
  double err;
  int64_t bad; /* NaN, inf or never written */
  int det, bits, nodes;
} check_t;

static double tol_of(int dtype) { return dtype == KPICK_BF16 ? KPICK_PARITY_BAR_BF16 : KPICK_PARITY_BAR_FP16; }

/* run cand once into y (poisoned first) and judge it */
static check_t check_run(kpick_problem *p, int dtype, int32_t m, int64_t n, int32_t cand, const ref_t *r,
                         uint16_t *y, int copy) {
  check_t c = {0, NAN, 0, 1, 1, -1};
  die_on(kpick_poison(p), "poison");
  if (kpick_run(p, cand, copy) != KPICK_OK) {
    printf("PARITY run-error %s: %s\n", cands[cand].name, kpick_last_error());
    return c;
  }
  die_on(kpick_download(p, KPICK_BUF_Y, y, (int64_t)m * n * 2), "download y");
  for (int64_t i = 0; i < (int64_t)m * n; i++)
    if (!isfinite(half_to_f32(dtype, y[i]))) c.bad++;
  double num = 0, den = 0;
  for (int32_t i = 0; i < m; i++)
    for (int32_t j = 0; j < r->ncols; j++) {
      double want = r->ref[(int64_t)i * r->ncols + j], got = half_to_f32(dtype, y[(int64_t)i * n + r->cols[j]]);
      num += (got - want) * (got - want);
      den += want * want;
    }
  c.err = sqrt(num / (den > 0 ? den : 1));
  c.ok = c.bad == 0 && c.err <= tol_of(dtype);
  return c;
}

static const char *op_name(int op) { return op == KPICK_OP_GATED ? "gated" : "linear"; }
static const char *dt_name(int dt) { return dt == KPICK_BF16 ? "bf16" : "fp16"; }

/* every candidate of op on p at rows m; heads first so members can compare */
static void parity_rows(kpick_problem *p, int op, int dtype, int64_t n, int64_t k, int32_t m, int32_t ref_cols,
                        int *passed, const char *label) {
  ref_t r;
  make_cols(n, ref_cols, &r);
  r.ref = malloc(sizeof(double) * (size_t)m * (size_t)r.ncols);
  die_on(kpick_set_rows(p, m), "set_rows");
  die_on(kpick_reference(p, r.cols, r.ncols, r.ref, (int64_t)m * r.ncols), "reference");
  uint16_t *heads[MAX_CAND] = {0};
  uint16_t *y = malloc((size_t)m * (size_t)n * 2), *y2 = malloc((size_t)m * (size_t)n * 2);
  for (int pass = 0; pass < 2; pass++) {
    for (int32_t id = 0; id < ncand; id++) {
      const kpick_candidate *cd = &cands[id];
      const int head = cd->bitwise_with == id;
      if (cd->op != op || (pass == 0) != head) continue;
      int32_t ok = 0;
      die_on(kpick_supports(p, id, &ok), "supports");
      if (!ok) continue;
      int32_t copies = 1;
      die_on(kpick_problem_copies(p, &copies), "copies");
      check_t c = check_run(p, dtype, m, n, id, &r, y, copies - 1);
      if (c.bad >= 0 && !isnan(c.err)) {
        /* a second run on weight copy 0 (the same values): the same bytes */
        check_t c2 = check_run(p, dtype, m, n, id, &r, y2, 0);
        c.det = c2.bad == c.bad && memcmp(y, y2, (size_t)m * (size_t)n * 2) == 0;
        if (head) {
          heads[id] = malloc((size_t)m * (size_t)n * 2);
          memcpy(heads[id], y, (size_t)m * (size_t)n * 2);
          /* two classes whose heads agree here could be one (reported, never judged) */
          for (int32_t h = 0; h < id; h++)
            if (heads[h] && memcmp(heads[h], y, (size_t)m * (size_t)n * 2) == 0)
              printf("SAMEBITS %s %s %s m=%d: %s = %s\n", op_name(op), dt_name(dtype), label, (int)m, cd->name,
                     cands[h].name);
        } else if (cd->bitwise_with >= 0) {
          c.bits = heads[cd->bitwise_with] && memcmp(heads[cd->bitwise_with], y, (size_t)m * (size_t)n * 2) == 0;
        }
        int32_t nodes = -1;
        if (kpick_count_nodes(p, id, &nodes) != KPICK_OK) printf("PARITY nodes-error %s: %s\n", cd->name, kpick_last_error());
        c.nodes = nodes;
      }
      const int nodes_ok = strcmp(cd->family, "blaslt") == 0 || c.nodes == cd->nodes;
      const int pass_all = c.ok && c.det && c.bits && nodes_ok;
      if (!pass_all) failures++;
      if (passed) passed[id] = pass_all;
      printf("PARITY %-7s %s %-18s n=%-6lld k=%-6lld m=%-3d %-24s err=%.2e bad=%lld det=%s bits=%s nodes=%d/%d %s\n",
             op_name(op), dt_name(dtype), label, (long long)n, (long long)k, (int)m, cd->name, c.err, (long long)c.bad,
             c.det ? "ok" : "DIFF", cd->bitwise_with < 0 || head ? "-" : (c.bits ? "ok" : "DIFF"), c.nodes, cd->nodes,
             pass_all ? "PASS" : "FAIL");
    }
  }
  for (int32_t i = 0; i < ncand; i++) free(heads[i]);
  free(y);
  free(y2);
  free(r.cols);
  free(r.ref);
}

typedef struct {
  int op;
  int64_t n, k;
  const char *label;
} shape_t;

static void parity(int quick) {
  static const shape_t shapes[] = {
      {KPICK_OP_LINEAR, 4096, 4096, "o"},          {KPICK_OP_LINEAR, 1024, 3072, "small-n"},
      {KPICK_OP_LINEAR, 28672, 4096, "wide"},      {KPICK_OP_GATED, 14336, 4096, "gate_up"},
      {KPICK_OP_LINEAR, 1000, 1000, "odd"},        {KPICK_OP_GATED, 1001, 1000, "odd-gated"},
  };
  static const int32_t rows[] = {1, 2, 3, 8, 16, 33, 128};
  const int nshapes = quick ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
  for (int s = 0; s < nshapes; s++)
    for (int dtype = 0; dtype < 2; dtype++) {
      shape_t shv = shapes[s], *sh = &shv;
      sh->n = (sh->n + shrink - 1) / shrink;
      sh->k = (sh->k / shrink + 7) / 8 * 8;
      kpick_problem *p = NULL;
      double t0 = now_s();
      die_on(kpick_problem_create(sh->op, dtype, sh->n, sh->k, MAX_ROWS, 2, 1234 + s * 2 + dtype, &p), "problem_create");
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        parity_rows(p, sh->op, dtype, sh->n, sh->k, rows[i], 384, NULL, sh->label);
      die_on(kpick_problem_free(p), "problem_free");
      printf("INFO parity %s %s took %.1f s\n", sh->label, dt_name(dtype), now_s() - t0);
      fflush(stdout);
    }
}

/* ---- availability ---- */

/* Whether the device has the candidate's family: the test's own statement of
 * the targets (hip-lib/src/gpu/arch.h is the library's), so a row the build
 * holds no kernels for shows up as available=0 where this says 1. */
static int family_expected(const kpick_info *info, const kpick_candidate *c) {
  if (c->pdl && !info->pdl) return 0;
  if (!strcmp(info->backend, "cpu")) return 1;
  const int cuda = !strcmp(info->backend, "cuda");
  const int cc = cuda && !strncmp(info->arch, "sm_", 3) ? atoi(info->arch + 3) : 0;
  const int matrix = cuda ? cc >= 80
                          : !strcmp(info->arch, "gfx90a") || !strncmp(info->arch, "gfx94", 5) ||
                                !strncmp(info->arch, "gfx95", 5);
  if (!strcmp(c->family, "mma") || !strcmp(c->family, "splitk")) return matrix;
  if (!strcmp(c->family, "wgmma")) return cuda && cc == 90; /* sm_90a code runs on 9.0 only */
  return 1; /* blaslt, gemv, and any family this list does not know yet */
}

static void availability(const kpick_info *info) {
  int missing = 0, available = 0;
  for (int32_t i = 0; i < ncand; i++) {
    available += cands[i].available != 0;
    if (cands[i].available || !family_expected(info, &cands[i])) continue;
    printf("AVAIL FAIL %s (family %s, pdl %d): the device has its family, the library says unavailable\n",
           cands[i].name, cands[i].family, (int)cands[i].pdl);
    missing++;
  }
  printf("AVAIL %d of %d candidates available, %d missing where the device has the family\n",
         available, (int)ncand, missing);
  failures += missing;
}

/* ---- timing ---- */

#define NROWS 8
static const int32_t buckets[NROWS] = {1, 2, 4, 8, 16, 32, 64, 128};
#define PASSES 2
#define SAMPLES 5

typedef struct {
  const char *label;
  int op;
  int64_t n, k;
  int preset; /* part of the Llama-3.1-8B decode step */
  double floor_us[NROWS], default_us[NROWS], best_us[NROWS], route_us[NROWS];
  int32_t best[NROWS], route[NROWS];
} timed_t;

static void time_shape(timed_t *t) {
  kpick_problem *p = NULL;
  die_on(kpick_problem_create(t->op, KPICK_BF16, t->n, t->k, MAX_ROWS, 0, 99, &p), "problem_create");
  int32_t copies = 0;
  die_on(kpick_problem_copies(p, &copies), "copies");
  double t0 = now_s(), parity_s = 0;
  for (int b = 0; b < NROWS; b++) {
    const int32_t m = buckets[b];
    int passed[MAX_CAND] = {0};
    double tp = now_s();
    parity_rows(p, t->op, KPICK_BF16, t->n, t->k, m, 64, passed, t->label);
    parity_s += now_s() - tp;
    die_on(kpick_set_rows(p, m), "set_rows");
    static double samples[MAX_CAND + 1][PASSES * SAMPLES];
    int runnable[MAX_CAND] = {0};
    for (int32_t id = 0; id < ncand; id++) {
      int32_t ok = 0;
      die_on(kpick_supports(p, id, &ok), "supports");
      runnable[id] = ok && cands[id].op == t->op;
    }
    for (int pass = 0; pass < PASSES; pass++) {
      die_on(kpick_time_floor(p, SAMPLES, &samples[MAX_CAND][pass * SAMPLES]), "time_floor");
      for (int32_t id = 0; id < ncand; id++) {
        if (!runnable[id]) continue;
        if (kpick_time(p, id, SAMPLES, &samples[id][pass * SAMPLES]) != KPICK_OK) {
          printf("TIME error %s: %s\n", cands[id].name, kpick_last_error());
          runnable[id] = 0;
        }
      }
    }
    t->floor_us[b] = median(samples[MAX_CAND], PASSES * SAMPLES);
    int32_t def = -1, best = -1;
    double best_us = INFINITY, med[MAX_CAND];
    for (int32_t id = 0; id < ncand; id++) {
      if (!runnable[id]) continue;
      double raw[PASSES * SAMPLES];
      memcpy(raw, samples[id], sizeof raw);
      med[id] = median(samples[id], PASSES * SAMPLES);
      printf("TIME %-8s m=%-3d %-24s median=%9.3f us floor=%9.3f ratio_floor=%.3f parity=%s samples=", t->label, (int)m,
             cands[id].name, med[id], t->floor_us[b], med[id] / t->floor_us[b], passed[id] ? "ok" : "FAIL");
      for (int i = 0; i < PASSES * SAMPLES; i++) printf("%s%.3f", i ? "," : "", raw[i]);
      printf("\n");
      if (cands[id].is_default) def = id;
      if (passed[id] && med[id] < best_us) {
        best_us = med[id];
        best = id;
      }
    }
    if (def < 0) {
      printf("TIME %s m=%d: the default did not run\n", t->label, (int)m);
      failures++;
      continue;
    }
    t->default_us[b] = med[def];
    t->best[b] = best;
    t->best_us[b] = best_us;
    /* what promote would route: the gate's gain, and no more nodes unless gated */
    int32_t route = def;
    if (best >= 0 && med[def] / best_us - 1.0 >= KPICK_MIN_GAIN &&
        (t->op == KPICK_OP_GATED || cands[best].nodes <= cands[def].nodes))
      route = best;
    t->route[b] = route;
    t->route_us[b] = med[route];
    printf("ROUTE %-8s m=%-3d floor=%8.2f default=%8.2f best=%-22s %8.2f route=%-22s %8.2f speedup=%.3f route/floor=%.3f\n",
           t->label, (int)m, t->floor_us[b], med[def], best >= 0 ? cands[best].name : "-", best_us, cands[route].name,
           t->route_us[b], med[def] / t->route_us[b], t->route_us[b] / t->floor_us[b]);
    fflush(stdout);
  }
  die_on(kpick_problem_free(p), "problem_free");
  printf("INFO timed %s (%lld x %lld, %d copies): %.1f s, of which parity %.1f s\n", t->label, (long long)t->n,
         (long long)t->k, (int)copies, now_s() - t0, parity_s);
}

static void timing(int quick) {
  static timed_t shapes[] = {
      {"qkv", KPICK_OP_LINEAR, 6144, 4096, 1},     {"o", KPICK_OP_LINEAR, 4096, 4096, 1},
      {"gate_up", KPICK_OP_GATED, 14336, 4096, 1}, {"down", KPICK_OP_LINEAR, 4096, 14336, 1},
      {"lm_head", KPICK_OP_LINEAR, 128256, 4096, 1}, {"small-n", KPICK_OP_LINEAR, 1024, 3072, 0},
      {"q06-o", KPICK_OP_LINEAR, 1024, 2048, 0},
  };
  const int nshapes = quick ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
  for (int s = 0; s < nshapes; s++) {
    shapes[s].n = (shapes[s].n + shrink - 1) / shrink;
    shapes[s].k = (shapes[s].k / shrink + 7) / 8 * 8;
    time_shape(&shapes[s]);
  }

  /* the targets, over the preset shapes */
  double lg_small = 0, lg_r1 = 0, lg_floor = 0, worst = INFINITY, lg_big = 0, lg_big_floor = 0;
  int n_small = 0, n_r1 = 0, slow_big = 0, n_big = 0;
  for (int s = 0; s < nshapes; s++) {
    const timed_t *t = &shapes[s];
    if (!t->preset) continue;
    for (int b = 0; b < NROWS; b++) {
      if (t->route_us[b] <= 0) continue;
      const double sp = t->default_us[b] / t->route_us[b];
      if (buckets[b] <= 16) {
        lg_small += log(sp);
        lg_floor += log(t->route_us[b] / t->floor_us[b]);
        n_small++;
        if (sp < worst) worst = sp;
        if (buckets[b] == 1) {
          lg_r1 += log(sp);
          n_r1++;
        }
      } else {
        lg_big += log(sp);
        lg_big_floor += log(t->route_us[b] / t->floor_us[b]);
        n_big++;
        if (t->best_us[b] > t->default_us[b] * 1.02) slow_big++;
      }
    }
  }
  if (n_small) {
    printf("SUMMARY rows 1-16: route speedup vs default geomean %.3f (target >= 1.3), min %.3f (target >= 0.98)\n",
           exp(lg_small / n_small), worst);
    printf("SUMMARY rows 1: route speedup vs default geomean %.3f (target >= 1.4)\n", n_r1 ? exp(lg_r1 / n_r1) : NAN);
    printf("SUMMARY rows 1-16: route time / read floor geomean %.3f (target <= 1.10)\n", exp(lg_floor / n_small));
    if (n_big)
      printf("SUMMARY rows 32-128: route speedup vs default geomean %.3f (target >= 1.15), route time / read floor "
             "geomean %.3f (target <= 1.12)\n", exp(lg_big / n_big), exp(lg_big_floor / n_big));
    printf("SUMMARY rows 32-128: buckets where the best kernel is > 2 %% slower than the default: %d "
           "(the route keeps the default there)\n", slow_big);
  }
}

int main(int argc, char **argv) {
  int do_parity = 0, do_time = 0, quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "parity")) do_parity = 1;
    else if (!strcmp(argv[i], "time")) do_time = 1;
    else if (!strcmp(argv[i], "quick")) quick = 1;
    else if (!strcmp(argv[i], "tiny")) shrink = 16;
    else {
      fprintf(stderr, "usage: selftest [parity] [time] [quick] [tiny]\n");
      return 2;
    }
  }
  if (!do_parity && !do_time) do_parity = do_time = 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  die_on(kpick_init(), "init");
  kpick_info info;
  die_on(kpick_get_info(&info), "get_info");
  printf("INFO backend=%s arch=%s device=%s\nINFO runtime=%s blas=%s\nINFO compiler=%s\nINFO space=%s warp=%d units=%d "
         "pdl=%d mem_free=%.1f GiB mem_total=%.1f GiB llc=%.1f MiB\n",
         info.backend, info.arch, info.device, info.runtime, info.blas, info.compiler, info.space, (int)info.warp,
         (int)info.units, (int)info.pdl, info.mem_free / 1073741824.0, info.mem_total / 1073741824.0,
         info.llc_bytes / 1048576.0);
  die_on(kpick_candidate_count(&ncand), "candidate_count");
  if (ncand > MAX_CAND) ncand = MAX_CAND;
  for (int32_t i = 0; i < ncand; i++) {
    die_on(kpick_candidate_describe(i, &cands[i]), "describe");
    const kpick_candidate *c = &cands[i];
    printf("CAND %2d %-24s family=%-7s op=%d rows=%d..%d nodes=%d bitwise_with=%d default=%d stack=%d pdl=%d available=%d\n",
           (int)i, c->name, c->family, (int)c->op, (int)c->rows_min, (int)c->rows_max, (int)c->nodes,
           (int)c->bitwise_with, (int)c->is_default, (int)c->stack_bound, (int)c->pdl, (int)c->available);
  }
  availability(&info);
  const double t0 = now_s();
  if (do_parity) parity(quick);
  const double t1 = now_s();
  if (do_time) timing(quick);
  printf("SUMMARY parity failures: %d; parity %.1f s, timing %.1f s\n", failures, t1 - t0, now_s() - t1);
  return failures ? 1 : 0;
}
