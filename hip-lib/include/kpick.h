/* kpick.h: the whole C ABI of libkpick-<backend>.so, bound by lib/ffi.ts.
 *
 * A decode linear is y[M,N] = x[M,K] . W[N,K]^T (op LINEAR). The gated op reads
 * W[2N,K] (rows 0..N-1 gate, N..2N-1 up) and writes y[M,N] = silu(x.Wg^T) * (x.Wu^T).
 * Data is bf16 or fp16, accumulation fp32, all row-major.
 *
 * Every entry returns a kpick_status; on failure kpick_last_error() says what
 * failed and why. Nothing here exits or aborts: it runs inside Node.
 * Ownership: the library owns problems (free with kpick_problem_free) and the
 * last-error string; the caller owns every buffer it passes in.
 */
#ifndef KPICK_H
#define KPICK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KPICK_ABI_VERSION 1

enum kpick_status {
  KPICK_OK = 0,
  KPICK_E_ARG = 1,         /* null pointer, bad size, unknown id or handle */
  KPICK_E_NOMEM = 2,       /* would not fit, or an allocation failed */
  KPICK_E_UNSUPPORTED = 3, /* candidate not runnable on this problem/target */
  KPICK_E_DEVICE = 4,      /* runtime or BLAS call failed */
  KPICK_E_STATE = 5        /* library could not initialise */
};

enum kpick_op { KPICK_OP_LINEAR = 0, KPICK_OP_GATED = 1 };
enum kpick_dtype { KPICK_BF16 = 0, KPICK_FP16 = 1 };
/* what kpick_download copies out */
enum kpick_buffer { KPICK_BUF_Y = 0, KPICK_BUF_X = 1, KPICK_BUF_W = 2 };

typedef struct kpick_info {
  char backend[16];   /* "cpu" | "cuda" | "hip" */
  char arch[64];      /* "x86_64", "sm_90", "gfx942" */
  char device[128];   /* marketing name of the device or CPU */
  char runtime[64];   /* version of the runtime library actually loaded */
  char blas[64];      /* version of the BLAS library actually loaded, "none" */
  char compiler[256]; /* toolchain and flags the library was built with */
  char space[48];     /* token of space.def and the kernel sources */
  int32_t abi;        /* KPICK_ABI_VERSION */
  int32_t warp;       /* warp/wavefront width (1 on the CPU) */
  int32_t units;      /* SMs / CUs / CPU threads the backend uses */
  int32_t pdl;        /* 1 when programmatic dependent launch is available */
  int64_t mem_free;   /* bytes */
  int64_t mem_total;  /* bytes */
  int64_t llc_bytes;  /* last-level cache, sizes the weight rotation */
} kpick_info;

typedef struct kpick_candidate {
  char name[48];        /* unique in the space: "gemv.rpb4.u4", "gated.mma.w4.u2" */
  char family[16];      /* "blaslt", "gemv", "mma", "splitk", "plain", ... */
  char param_names[32]; /* comma separated, one per used params[] slot: "R,U" */
  int32_t params[3];
  int32_t op;           /* enum kpick_op */
  int32_t nodes;        /* declared graph nodes per call */
  int32_t bitwise_with; /* id whose output this must match byte for byte; -1: none */
  int32_t is_default;   /* 1: the class default of its op (what runs without a table) */
  int32_t rows_min;     /* M range the candidate accepts */
  int32_t rows_max;
  int32_t stack_bound;  /* valid only with the BLAS version it was tuned on */
  int32_t pdl;          /* programmatic dependent launch variant */
  int32_t available;    /* built for and runnable on this target */
} kpick_candidate;

typedef struct kpick_problem kpick_problem;

int kpick_init(void);                     /* idempotent */
const char *kpick_last_error(void);       /* "" when the last call succeeded */
int kpick_get_info(kpick_info *out);

int kpick_candidate_count(int32_t *out);
int kpick_candidate_describe(int32_t id, kpick_candidate *out);
int kpick_candidate_find(const char *name, int32_t *out_id);

/* Random x[m_max,K] and W (never zeros) from seed. copies <= 0 picks enough
 * rotating weight copies to exceed 8x the last-level cache, bounded by free
 * memory. The active rows start at m_max; kpick_set_rows changes them, so one
 * problem (one weight fill) serves every rows bucket of a shape. */
int kpick_problem_create(int32_t op, int32_t dtype, int64_t n, int64_t k,
                         int32_t m_max, int32_t copies, uint64_t seed,
                         kpick_problem **out);
int kpick_problem_free(kpick_problem *p);
int kpick_problem_copies(const kpick_problem *p, int32_t *out);
/* active rows m, 1..m_max: x is its first m rows, y is [m, N] */
int kpick_set_rows(kpick_problem *p, int32_t m);
/* *out = 1 when cand can run this problem (rows range, shape alignment) */
int kpick_supports(const kpick_problem *p, int32_t cand, int32_t *out);

/* Fill y with the poison pattern 0xFFFF (a NaN in bf16 and fp16). */
int kpick_poison(kpick_problem *p);
/* y = cand(x, W[copy]); returns when y is complete. */
int kpick_run(kpick_problem *p, int32_t cand, int32_t copy);
/* nsamples timings of one call in microseconds, rotating weight copies;
 * warm-up happens before the first sample. */
int kpick_time(kpick_problem *p, int32_t cand, int32_t nsamples, double *us_out);
/* the read floor: a kernel streaming the same weight bytes, same rotation */
int kpick_time_floor(kpick_problem *p, int32_t nsamples, double *us_out);
/* graph nodes of one call, measured by capturing it (CPU: calls made) */
int kpick_count_nodes(kpick_problem *p, int32_t cand, int32_t *out);

/* Copy a buffer out (W means copy 0; X and Y use the active rows m).
 * bytes must equal the buffer's size. */
int kpick_download(const kpick_problem *p, int32_t which, void *dst, int64_t bytes);
/* fp64 reference of y for copy 0 at the active rows: y_out[m][j] for the
 * output columns cols[0..ncols-1], or all N columns when cols is NULL
 * (ncols must then be N). count must be m * ncols. */
int kpick_reference(const kpick_problem *p, const int64_t *cols, int32_t ncols,
                    double *y_out, int64_t count);

/* ---- route: what an engine calls (src/common/route.c, twin of lib/route.ts) ----
 * The route maps (op, dtype, N, K, M) to a candidate through the compact table
 * that promote writes beside the JSON (decode_gemm.route): M goes to the
 * smallest bucket (1, 2, 4 ... 128) that holds it; no entry, no table or a
 * refused table gives the class default. Environment knobs that reroute
 * dispatch, read at load: KPICK_FORCE=<candidate> (every call of that
 * candidate's op runs it) and KPICK_NO_BLASLT=1 (the default is never the
 * vendor BLAS); either one, set and non-empty, refuses the table by name. */
#define KPICK_ROUTE_VERSION 1 /* the compact form */
#define KPICK_TABLE_FORMAT 1  /* the JSON table it was written from */

/* Loads the table at path once (NULL: none, the defaults), checking it against
 * this library (kpick_get_info), the knobs and the space, and records a
 * one-line verdict: what it loaded, or why it refused; say = 1 also prints it
 * to stderr. A missing or refused table is not an error (KPICK_OK, defaults).
 * Later lookups never read the file; a second load replaces the first. */
int kpick_route_load(const char *path, int32_t say);
/* The last verdict, NUL-terminated; KPICK_E_ARG when cap is too small. */
int kpick_route_verdict(char *buf, int32_t cap);
/* *used = 1 when a table is in use; entries kept and dropped by the guard. */
int kpick_route_status(int32_t *used, int32_t *kept, int32_t *dropped);
/* The candidate id the route picks for one call (m in 1..128). */
int kpick_route_lookup(int32_t op, int32_t dtype, int64_t n, int64_t k, int32_t m,
                       int32_t *cand_out);
/* y[m,N] = x[m,K] . W^T (or the gated op on W[2N,K]) through the route, on
 * caller-owned device pointers, enqueued on stream (NULL: the default stream;
 * the CPU ignores it and returns when y is complete). y must not overlap x or W. */
int kpick_linear(int32_t op, int32_t dtype, const void *x, const void *w, void *y,
                 int32_t m, int64_t n, int64_t k, void *stream);

#ifdef __cplusplus
}
#endif
#endif
