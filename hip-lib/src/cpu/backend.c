/* backend.c: the CPU backend's hooks (common/backend.h). Timing: one call per
 * sample on the next weight copy of a rotation shared by every candidate of the
 * problem, so each call reads weights last touched `copies` calls ago (cold:
 * the copies exceed 8x the last-level cache).
 * The GPU times each call after a producer kernel that writes x, as a decode
 * step runs it (gpu/hooks.cpp), because a GPU kernel may overlap the one
 * before it. A CPU call starts when the previous one has returned and nothing
 * overlaps it, so a producer would only add its own time, which the
 * subtraction would take away again, plus its noise: the CPU keeps one call
 * alone per sample, which already is what a step serves. */
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "../common/backend.h"
#include "../common/error.h"
#include "../common/fp8.h"
#include "../common/moe.h"
#include "../common/space.h"
#include "kernels.h"

typedef struct cpu_state {
  uint16_t *w;   /* copies 1.. (copy 0 is the problem's w_host), w_rows * k each */
  uint16_t *y;   /* m_max * n */
  int32_t next;  /* rotation cursor */
  uint8_t warm[KP_NCAND > 0 ? KP_NCAND : 1];
  /* passes of each candidate's last run and the rows it ran at (0: none yet) */
  int32_t passes[KP_NCAND > 0 ? KP_NCAND : 1];
  int32_t passes_rows[KP_NCAND > 0 ? KP_NCAND : 1];
  volatile uint64_t sink; /* keeps the floor's reads alive */
} cpu_state;

static const cpu_launcher launchers[KP_NCAND > 0 ? KP_NCAND : 1] = {
#define CPU(id, ...) KP_ROW_CPU(id, __VA_ARGS__)
#define GPU(id, ...) KP_ROW_GPU(id, __VA_ARGS__)
#define KP_ROW(id, name, family, ...) [KP_CAND_##id] = cpu_launch_##family,
#include "../space.def"
#undef KP_ROW
#undef CPU
#undef GPU
};

static int threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

static void read_line_value(const char *path, const char *key, char *dst, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[512];
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) != 0) continue;
    char *v = strchr(line, ':');
    if (!v) continue;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    snprintf(dst, cap, "%s", v);
    break;
  }
  fclose(f);
}

int be_mem(int64_t *free_bytes, int64_t *total_bytes) {
  char avail[64] = "", total[64] = "";
  read_line_value("/proc/meminfo", "MemAvailable", avail, sizeof avail);
  read_line_value("/proc/meminfo", "MemTotal", total, sizeof total);
  long long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  *total_bytes = total[0] ? atoll(total) * 1024LL : pages * psize;
  *free_bytes = avail[0] ? atoll(avail) * 1024LL : *total_bytes / 2;
  return KPICK_OK;
}

/* The first line of dir/file, without its newline; "" when absent. */
static void sysfs_text(const char *dir, const char *file, char *dst, size_t cap) {
  char path[320];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  dst[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(dst, (int)cap, f)) dst[0] = '\0';
  fclose(f);
  dst[strcspn(dst, "\n")] = '\0';
}

/* A sysfs cache size ("32768K") in bytes; 0 when absent. */
static int64_t sysfs_bytes(const char *dir) {
  char text[32];
  sysfs_text(dir, "size", text, sizeof text);
  char *end;
  long long v = strtoll(text, &end, 10);
  int64_t unit = *end == 'K' ? 1LL << 10 : *end == 'M' ? 1LL << 20 : *end == 'G' ? 1LL << 30 : 1;
  return v > 0 ? v * unit : 0;
}

/* The cache a weight rotation must outrun: every data or unified cache of
 * level 2 and up, each instance once (counted at the first CPU of its
 * shared_cpu_list), so the per-core L2s plus the shared L3s; on AMD the L3 is
 * filled by L2 victims, so the two add up. sysfs, not sysconf: glibc reads
 * CPUID, which a hypervisor may fill with the host's figures (this 2-vCPU VM's
 * sysconf reports a 256 MiB L3, its sysfs one 32 MiB L3, and the rotation
 * then held 4096 copies of a small weight). Capped at 64 MiB a CPU and 2 GiB:
 * no CPU made has more than 48 MiB of cache a core (EPYC 7373X) or 1152 MiB
 * of L3 a socket (EPYC 9684X), so a larger figure is a misreport; a small VM
 * on a larger L3 that the cap cuts still rotates past 5x that L3, as the
 * rotation is 8x this figure (common/abi.c). */
static int64_t cache_bytes(void) {
  int64_t total = 0;
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long cpu = 0; cpu < cpus && cpu < 8192; cpu++) {
    for (int index = 0; index < 16; index++) {
      char dir[96], level[16], type[32], shared[16];
      snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu%ld/cache/index%d", cpu, index);
      sysfs_text(dir, "level", level, sizeof level);
      if (!level[0]) break;
      sysfs_text(dir, "type", type, sizeof type);
      sysfs_text(dir, "shared_cpu_list", shared, sizeof shared);
      if (atoi(level) < 2 || strcmp(type, "Instruction") == 0 || atol(shared) != cpu) continue;
      total += sysfs_bytes(dir);
    }
  }
  if (total <= 0) { /* no sysfs: glibc's figures */
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    total = (l2 > 0 ? (int64_t)l2 * threads() : 0) + (l3 > 0 ? l3 : 0);
  }
  if (total <= 0) total = 32LL << 20;
  int64_t cap = (int64_t)threads() * (64LL << 20);
  if (cap > (2LL << 30)) cap = 2LL << 30;
  return total < cap ? total : cap;
}

/* read once: be_info runs for every problem created */
static int64_t llc_bytes;

int be_init(void) {
  llc_bytes = cache_bytes();
  return KPICK_OK;
}

int be_info(kpick_info *out) {
  struct utsname u;
  snprintf(out->backend, sizeof out->backend, "cpu");
  snprintf(out->arch, sizeof out->arch, "%.63s", uname(&u) == 0 ? u.machine : "unknown");
  snprintf(out->device, sizeof out->device, "unknown cpu");
  read_line_value("/proc/cpuinfo", "model name", out->device, sizeof out->device);
  snprintf(out->runtime, sizeof out->runtime, "glibc %s", gnu_get_libc_version());
  snprintf(out->blas, sizeof out->blas, "none");
  out->warp = 1;
  out->units = threads();
  out->pdl = 0;
  out->llc_bytes = llc_bytes;
  return be_mem(&out->mem_free, &out->mem_total);
}

int be_available(int32_t cand) { return 1; }
/* the CPU's "device" memory is host memory: any pointer will do */
int be_device_memory(const void *p, int *is_device) {
  *is_device = 1;
  return KPICK_OK;
}
int be_supports(const struct kpick_problem *p, int32_t cand) { return 1; }

int be_problem_init(struct kpick_problem *p) {
  cpu_state *s = calloc(1, sizeof *s);
  if (!s) return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation failed");
  p->be = s;
  /* copy 0 is the generated weight itself, which nothing writes: one copy
   * fewer to allocate and fault in (lm_head's 311 MB cost a third of a second) */
  s->w = p->copies > 1 ? malloc(p->w_bytes * (size_t)(p->copies - 1)) : NULL;
  s->y = malloc(p->y_bytes);
  if ((p->copies > 1 && !s->w) || !s->y)
    return kp_fail(KPICK_E_NOMEM, "problem_create", "allocating %d weight copies of %.1f MiB failed",
                   (int)p->copies - 1, p->w_bytes / 1048576.0);
  for (int32_t c = 1; c < p->copies; c++) memcpy((char *)s->w + (size_t)(c - 1) * p->w_bytes, p->w_host, p->w_bytes);
  return KPICK_OK;
}

void be_problem_free(struct kpick_problem *p) {
  cpu_state *s = p->be;
  if (!s) return;
  free(s->w);
  free(s->y);
  free(s);
  p->be = NULL;
}

int be_poison(struct kpick_problem *p) {
  cpu_state *s = p->be;
  memset(s->y, 0xff, p->y_bytes);
  return KPICK_OK;
}

int be_launch(int32_t cand, int32_t op, int32_t dtype, const void *x, const void *w, void *y, int32_t m,
              int64_t n, int64_t k, void *stream) {
  cpu_call c = {.op = op, .dtype = dtype, .x = x, .w = w, .y = y, .m = m, .n = n, .k = k};
  return launchers[cand](&c, kp_space[cand].params);
}

int be_launch_moe(int32_t cand, int32_t dtype, const void *x, const void *w_gate_up, const void *w_down,
                  const int32_t *ids, const float *weights, void *y, int32_t m, int32_t experts, int32_t topk,
                  int64_t n, int64_t k, void *stream) {
  KP_TRY(kp_moe_check_ids(ids, m, topk, experts));
  cpu_call c = {.op = KPICK_OP_MOE, .dtype = dtype, .x = x, .w = w_gate_up, .y = y, .m = m, .n = n, .k = k,
                .w_down = w_down, .ids = ids, .weights = weights, .experts = experts, .topk = topk};
  return launchers[cand](&c, kp_space[cand].params);
}

static const uint16_t *weights(const struct kpick_problem *p, int32_t copy) {
  const cpu_state *s = p->be;
  if (copy == 0) return p->w_host;
  return (const uint16_t *)((const char *)s->w + (size_t)(copy - 1) * p->w_bytes);
}

int be_run(struct kpick_problem *p, int32_t cand, int32_t copy) {
  cpu_state *s = p->be;
  cpu_stages_reset();
  if (p->op == KPICK_OP_MOE) {
    const char *w = (const char *)weights(p, copy);
    KP_TRY(be_launch_moe(cand, p->dtype, p->x_host, w, w + kp_moe_gate_up_bytes(p->dtype, p->experts, p->n, p->k),
                         p->ids_host, p->gates_host, s->y, p->m, p->experts, p->topk, p->n, p->k, NULL));
  } else {
    KP_TRY(be_launch(cand, p->op, p->dtype, p->x_host, weights(p, copy), s->y, p->m, p->n, p->k, NULL));
  }
  s->passes[cand] = cpu_stages();
  s->passes_rows[cand] = p->m;
  return KPICK_OK;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int32_t next_copy(struct kpick_problem *p) {
  cpu_state *s = p->be;
  int32_t c = s->next;
  s->next = (s->next + 1) % p->copies;
  return c;
}

int be_time(struct kpick_problem *p, int32_t cand, int32_t nsamples, double *us) {
  cpu_state *s = p->be;
  if (!s->warm[cand]) {
    KP_TRY(be_run(p, cand, next_copy(p)));
    s->warm[cand] = 1;
  }
  for (int32_t i = 0; i < nsamples; i++) {
    int32_t copy = next_copy(p);
    double t0 = now_us();
    KP_TRY(be_run(p, cand, copy));
    us[i] = now_us() - t0;
  }
  return KPICK_OK;
}

/* Below this many weight bytes, starting threads costs more than they save. */
#define FLOOR_THREADED_BYTES (8u << 20)

/* The weight regions one call reads from copy w: the whole weight (fp8 codes
 * and scales included), or for moe W_gate_up[e] and W_down[e] of each expert
 * the active rows route to (fp8: their codes and their scales). */
static int32_t read_regions(const struct kpick_problem *p, const uint16_t *w, cpu_region *out) {
  if (p->op != KPICK_OP_MOE) {
    out[0] = (cpu_region){w, (int64_t)p->w_bytes};
    return 1;
  }
  int32_t used[KPICK_MAX_EXPERTS];
  const int32_t nused = kp_moe_experts_used(p->ids_host, (int64_t)p->m * p->topk, p->experts, used);
  const int64_t N = p->n, K = p->k, E = p->experts, size = p->dtype == KPICK_FP8 ? 1 : 2;
  const char *gu = (const char *)w, *dn = gu + kp_moe_gate_up_bytes(p->dtype, p->experts, N, K);
  int32_t count = 0;
  for (int32_t u = 0; u < nused; u++) {
    /* each expert's elements, then (fp8) their scales, of W_gate_up, then W_down */
    const kp_weight_rows g = kp_weight_rows_at(p->dtype, gu, E * 2 * N, K, used[u] * 2 * N);
    const kp_weight_rows d = kp_weight_rows_at(p->dtype, dn, E * K, N, used[u] * K);
    out[count++] = (cpu_region){g.w, 2 * N * K * size};
    if (g.scales) out[count++] = (cpu_region){g.scales, 2 * N * 4};
    out[count++] = (cpu_region){d.w, K * N * size};
    if (d.scales) out[count++] = (cpu_region){d.scales, K * 4};
  }
  return count;
}

int be_time_floor(struct kpick_problem *p, int32_t nsamples, double *us) {
  cpu_state *s = p->be;
  cpu_region regions[4 * KPICK_MAX_EXPERTS]; /* fp8 moe: 4 an expert */
  int32_t count = read_regions(p, weights(p, 0), regions);
  int64_t bytes = 0;
  for (int32_t r = 0; r < count; r++) bytes += regions[r].bytes;
  int t = bytes >= FLOOR_THREADED_BYTES ? threads() : 1;
  for (int32_t i = -1; i < nsamples; i++) { /* i = -1: the warm-up */
    count = read_regions(p, weights(p, next_copy(p)), regions);
    double t0 = now_us();
    s->sink ^= cpu_read_floor(regions, count, t);
    if (i >= 0) us[i] = now_us() - t0;
  }
  return KPICK_OK;
}

/* The passes of the candidate's last run at the active rows (a sweep has just
 * run it for parity: a call of lm_head costs up to a tenth of a second), or of
 * a run made now. A CPU candidate's passes depend on the rows and the shape,
 * never on the data or the weight copy. */
int be_count_nodes(struct kpick_problem *p, int32_t cand, int32_t *out) {
  cpu_state *s = p->be;
  if (s->passes_rows[cand] != p->m) KP_TRY(be_run(p, cand, 0));
  *out = s->passes[cand];
  return KPICK_OK;
}

int be_download_y(const struct kpick_problem *p, void *dst) {
  const cpu_state *s = p->be;
  memcpy(dst, s->y, p->y_bytes);
  return KPICK_OK;
}
