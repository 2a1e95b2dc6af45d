/* kpick.h: the whole C ABI of libkpick-<backend>.so, bound by lib/ffi.ts.
 *
 * A decode linear is y[M,N] = x[M,K] . W[N,K]^T (op LINEAR). The gated op reads
 * W[2N,K] (rows 0..N-1 gate, N..2N-1 up) and writes y[M,N] = silu(x.Wg^T) * (x.Wu^T).
 * The moe op is one layer's routed experts for M token rows (op MOE below).
 * Data is bf16 or fp16, accumulation fp32, all row-major; or fp8 (KPICK_FP8,
 * linear and gated only): W in e4m3 with an fp32 scale per W row, x and y in
 * bf16 (the layout below).
 *
 * Every entry returns a kpick_status; on failure kpick_last_error() says what
 * failed and why. Nothing here exits or aborts: it runs inside Node.
 * Ownership: the library owns problems, models and kpick_buffer_alloc's
 * buffers (each freed by its own _free; a freed handle is refused, never
 * dereferenced) and the last-error string (valid until the next call); the
 * caller owns every other pointer it passes in, read or written only during
 * the call.
 */
#ifndef KPICK_H
#define KPICK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KPICK_ABI_VERSION 3 /* 2: kpick_abi_value replaces kpick_abi; 3: the moe op, kpick_model_dims.experts/topk, dtype fp8, kpick_candidate.numeric */

/* The limits a caller must know, named once (lib/schema.ts mirrors them and
 * checks them through kpick_abi_value at load). */
#define KPICK_MAX_ROWS 128       /* activation rows of one call, 1..this: the largest rows bucket */
#define KPICK_MAX_POSITIONS 8192 /* KV positions of a decode model: context + max_new */

enum kpick_status {
  KPICK_OK = 0,
  KPICK_E_ARG = 1,         /* null pointer, bad size, unknown id or handle */
  KPICK_E_NOMEM = 2,       /* would not fit, or an allocation failed */
  KPICK_E_UNSUPPORTED = 3, /* candidate not runnable on this problem/target */
  KPICK_E_DEVICE = 4,      /* runtime or BLAS call failed */
  KPICK_E_STATE = 5        /* library could not initialise */
};

/* KPICK_OP_MOE: the routed experts of one layer for M rows, each routed to
 * topk of E experts. Expert e has W_gate_up[e] = [2N, K] (the gated op's W:
 * gate rows, then up rows) and W_down[e] = [K, N] (a linear's W: y = h.Wd^T),
 * stored [E, 2N, K] and [E, K, N]; N is the expert's intermediate size, K the
 * hidden size. Routing inputs per row: ids[M, topk] (int32 in 0..E-1, distinct
 * within a row) and weights[M, topk] (fp32). Output y[M, K]:
 *   y[t] = sum over j of weights[t,j] * down_e(silu(gate_e(x[t])) * up_e(x[t])), e = ids[t,j]
 * Numerics of every CPU candidate (its bitwise class): h = silu*up and each
 * expert's down output rounded to the dtype (as a gated op and a linear store
 * them), then summed per row in fp32 in ascending expert id, rounded once.
 * fp8 experts: the same, in bf16, each GEMM computed as its numeric class
 * computes a linear (W8A8 quantizes x and each pair's h, per row). */
enum kpick_op { KPICK_OP_LINEAR = 0, KPICK_OP_GATED = 1, KPICK_OP_MOE = 2 };
enum kpick_dtype { KPICK_BF16 = 0, KPICK_FP16 = 1, KPICK_FP8 = 2 };
/* KPICK_FP8: x and y are bf16; W (rows = N, or 2N for the gated op) is one
 * buffer: rows * K e4m3 codes (OCP FP8 E4M3FN: 1 sign, 4 exponent bits of
 * bias 7, 3 mantissa bits; no infinities, 0x7F and 0xFF are NaN, largest
 * 448), row-major, then, from the first 16-byte boundary after them, rows fp32
 * scales: W_real[r][k] = scale[r] * e4m3(W[r][k]). kpick_fp8_pack writes it
 * from bf16 weights; kpick_linear checks the whole length. A build with no
 * fp8 candidate of an op (a HIP build) answers KPICK_E_UNSUPPORTED to every
 * fp8 call of it: problem, route lookup, kpick_linear, kpick_moe, model.
 * An fp8 moe's W_gate_up is one such buffer of E * 2N rows ([E, 2N, K] read as
 * [E * 2N, K]: expert e's codes at e * 2N * K, its scales from row e * 2N of
 * the scales), and W_down one of E * K rows: each expert's rows keep their
 * own scales, as in a checkpoint that quantizes each expert per channel. */
#define KPICK_FP8_SCALES_AT(rows, k) ((((int64_t)(rows) * (int64_t)(k)) + 15) / 16 * 16)
#define KPICK_FP8_W_BYTES(rows, k) (KPICK_FP8_SCALES_AT(rows, k) + 4 * (int64_t)(rows))
/* How a candidate computes (kpick_candidate.numeric): w16a16 takes bf16 and
 * fp16 and computes in them; the fp8 classes take fp8 only. W8A16 dequantizes
 * W and keeps x in bf16; W8A8 first quantizes each row of x to e4m3 with its
 * own fp32 scale (amax / 448), multiplies fp8 by fp8 and scales the fp32 sum. */
enum kpick_numeric { KPICK_NUM_W16A16 = 0, KPICK_NUM_W8A16 = 1, KPICK_NUM_W8A8 = 2 };
/* what kpick_download copies out; the expert ids (int32) and weights (fp32)
 * of a moe problem at the active rows, [m, topk] */
enum kpick_buffer {
  KPICK_BUF_Y = 0,
  KPICK_BUF_X = 1,
  KPICK_BUF_W = 2,
  KPICK_BUF_EXPERT_IDS = 3,
  KPICK_BUF_EXPERT_WEIGHTS = 4
};
/* How a moe problem's routing is drawn from its seed. UNIFORM: each row's
 * topk experts uniformly among all E (distinct within the row), as a trained
 * router spreads tokens; SKEWED: each row's topk among one hot set of
 * min(E, 2 topk) experts, so rows share experts (a hot-expert batch).
 * Weights: positive, summing to 1 per row (a renormalised top-k softmax). */
enum kpick_routing { KPICK_ROUTING_UNIFORM = 0, KPICK_ROUTING_SKEWED = 1 };
#define KPICK_MAX_EXPERTS 1024 /* E of a moe problem or call: 1..this */
#define KPICK_MAX_TOPK 32      /* topk: 1..min(E, this) */

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
  int32_t numeric;      /* enum kpick_numeric: which dtypes it takes, how it computes */
} kpick_candidate;

/* The promote gate and the parity bars, for C callers (bench/gpu/selftest.c).
 * lib/promote.ts (DEFAULT_GATE) and lib/parity.ts (PARITY_BAR, CLASS_BAR) hold
 * the same values; tests/promote.test.ts and tests/parity.test.ts read them
 * here and fail when the two disagree. The fp8 bars are per numeric class,
 * against the fp64 product of the bf16 x and the dequantized W: W8A16 adds
 * only fp32 accumulation and the bf16 output, as bf16 does; W8A8's error is
 * mostly its own activation quantization (3 mantissa bits), which its bar
 * includes: on the benchmark's uniform data the CPU's W8A8 default measures
 * 2.5e-2 to 2.7e-2 (linear) and 3.4e-2 to 4.0e-2 (gated, where silu(g) * u
 * compounds two quantized sums); a 10 % error still fails it. */
#define KPICK_MIN_GAIN 0.02        /* a candidate leaves the default at >= 2 % gain */
#define KPICK_PARITY_BAR_BF16 1e-2 /* relative Frobenius error against fp64 */
#define KPICK_PARITY_BAR_FP16 2e-3
#define KPICK_PARITY_BAR_W8A16 1e-2
#define KPICK_PARITY_BAR_W8A8 6e-2
#define KPICK_PARITY_BAR_W8A8_MOE 9e-2 /* moe: x and each pair's h quantized, two GEMMs in a chain */

typedef struct kpick_problem kpick_problem;

int kpick_init(void);                     /* idempotent */
/* One fact of this ABI by name, so a binding can refuse a library whose layout
 * or limits it does not mirror before it passes a struct in: "version"
 * (KPICK_ABI_VERSION), the size of every struct in this header ("kpick_info",
 * "kpick_candidate", "kpick_model_dims") and every limit ("KPICK_MAX_ROWS",
 * "KPICK_MAX_POSITIONS", "KPICK_MAX_EXPERTS", "KPICK_MAX_TOPK"). KPICK_E_ARG
 * for a name it does not know. */
int kpick_abi_value(const char *name, int64_t *out);
const char *kpick_last_error(void);       /* "" when the last call succeeded */
int kpick_get_info(kpick_info *out);

int kpick_candidate_count(int32_t *out);
int kpick_candidate_describe(int32_t id, kpick_candidate *out);
int kpick_candidate_find(const char *name, int32_t *out_id);

/* Random x[m_max,K] and W (never zeros) from seed (fp8: W drawn in bf16 as
 * for bf16, then packed by kpick_fp8_pack: scale = the row's amax / 448). copies <= 0 picks enough
 * rotating weight copies to exceed 8x the last-level cache, bounded by free
 * memory. The active rows start at m_max; kpick_set_rows changes them, so one
 * problem (one weight fill) serves every rows bucket of a shape. */
int kpick_problem_create(int32_t op, int32_t dtype, int64_t n, int64_t k,
                         int32_t m_max, int32_t copies, uint64_t seed,
                         kpick_problem **out);
/* A moe problem (KPICK_OP_MOE; kpick_problem_create refuses that op): random
 * x[m_max, K], W_gate_up and W_down of all E experts, and the routing of m_max
 * rows drawn from seed as `routing` says. Copies <= 0 sizes the rotation by
 * the bytes one row's topk experts read (what a call reads at least).
 * KPICK_E_UNSUPPORTED where the build has no moe candidate it can run (a HIP
 * build has the grouped ones but no moe default, which is CUDA's cuBLAS, so
 * its route has no moe answer). Everything below takes it: y is [m, K], kpick_reference's columns
 * are K's, and the read floor streams the distinct experts of the active rows. */
int kpick_problem_create_moe(int32_t dtype, int32_t experts, int32_t topk, int64_t n, int64_t k, int32_t m_max,
                             int32_t routing, int32_t copies, uint64_t seed, kpick_problem **out);
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
 * warm-up happens before the first sample. On a GPU a sample is the call's
 * served cost where a decode step runs it: calls each after a producer kernel
 * that writes x (as the op before a linear does), minus the producer alone
 * (src/gpu/hooks.cpp says why); on the CPU, one call alone. */
int kpick_time(kpick_problem *p, int32_t cand, int32_t nsamples, double *us_out);
/* the read floor: a kernel streaming the same weight bytes, same rotation,
 * timed the way kpick_time times a candidate */
int kpick_time_floor(kpick_problem *p, int32_t nsamples, double *us_out);
/* graph nodes of one call, measured by capturing it (CPU: passes over memory
 * of its last run at the active rows, or of one run made now) */
int kpick_count_nodes(kpick_problem *p, int32_t cand, int32_t *out);

/* Copy a buffer out (W means copy 0: for moe W_gate_up of every expert, then
 * W_down; X, Y and the routing use the active rows m). bytes must equal the
 * buffer's size (fp8: W is KPICK_FP8_W_BYTES). */
int kpick_download(const kpick_problem *p, int32_t which, void *dst, int64_t bytes);
/* fp64 reference of y for copy 0 at the active rows (fp8: from the bf16 x and
 * the dequantized W, scale[r] * e4m3(W[r][k]); no activation quantization): y_out[m][j] for the
 * output columns cols[0..ncols-1], or all N columns when cols is NULL
 * (ncols must then be N). count must be m * ncols. */
int kpick_reference(const kpick_problem *p, const int64_t *cols, int32_t ncols,
                    double *y_out, int64_t count);

/* ---- fp8 conversions (src/common/numeric.h), on the host ----
 * e4m3 encode: round to nearest even, saturating (beyond +-448 gives +-448,
 * infinities too); NaN gives 0x7F with its sign. Decode: 0x7F and 0xFF give NaN. */
int kpick_e4m3_encode(const float *src, uint8_t *dst, int64_t count);
int kpick_e4m3_decode(const uint8_t *src, float *dst, int64_t count);
/* The KPICK_FP8 weight buffer of bf16 w[rows][k]: per row scale = amax / 448
 * (1 for an all-zero row), codes = e4m3(w / scale). dst_bytes must be
 * KPICK_FP8_W_BYTES(rows, k). */
int kpick_fp8_pack(const uint16_t *w_bf16, int64_t rows, int64_t k, void *dst, int64_t dst_bytes);

/* ---- route: what an engine calls (src/common/route.c, twin of lib/route.ts) ----
 * The route maps (op, dtype, N, K, M) to a candidate through the compact table
 * that promote writes beside the JSON (decode_gemm.route): M goes to the
 * smallest bucket (1, 2, 4 ... KPICK_MAX_ROWS) that holds it; no entry, no table or a
 * refused table gives the class default. Environment knobs that reroute
 * dispatch, read at load: KPICK_FORCE=<candidate> (every call of that
 * candidate's op runs it) and KPICK_NO_BLASLT=1 (the default is never the
 * vendor BLAS); either one, set and non-empty, refuses the table by name. */
#define KPICK_ROUTE_VERSION 2 /* the compact form (2: bound to its JSON by sha256) */
#define KPICK_TABLE_FORMAT 1  /* the JSON table it was written from */

/* Loads the table at path once (NULL: none, the defaults), checking it against
 * this library (kpick_get_info), the knobs and the space, and against the JSON
 * table beside it (same name, .json): a route whose JSON is missing or changed
 * since it was compiled, or whose own text was edited, is refused (`npx tsx
 * scripts/promote.ts --route-only --table X.json` compiles it again). It records a
 * one-line verdict: what it loaded, or why it refused; say = 1 also prints it
 * to stderr. A missing or refused table is not an error (KPICK_OK, defaults).
 * Later lookups never read the file; a second load replaces the first. */
int kpick_route_load(const char *path, int32_t say);
/* The last verdict, NUL-terminated; KPICK_E_ARG when cap is too small. */
int kpick_route_verdict(char *buf, int32_t cap);
/* *used = 1 when a table is in use; entries kept and dropped by the guard. */
int kpick_route_status(int32_t *used, int32_t *kept, int32_t *dropped);
/* The candidate id the route picks for one call (m in 1..KPICK_MAX_ROWS). */
int kpick_route_lookup(int32_t op, int32_t dtype, int64_t n, int64_t k, int32_t m,
                       int32_t *cand_out);
/* The same for the moe op, whose table entries are keyed by E and topk too. */
int kpick_route_lookup_moe(int32_t dtype, int32_t experts, int32_t topk, int64_t n, int64_t k, int32_t m,
                           int32_t *cand_out);
/* y[m,N] = x[m,K] . W^T (or the gated op on W[2N,K]) through the route, on
 * caller-owned device pointers, enqueued on stream (NULL: the default stream;
 * the CPU ignores it and returns when y is complete). y must not overlap x or W. */
int kpick_linear(int32_t op, int32_t dtype, const void *x, const void *w, void *y,
                 int32_t m, int64_t n, int64_t k, void *stream);
/* The moe op through the route (layout above): x[m,K], w_gate_up[E,2N,K],
 * w_down[E,K,N], ids and weights [m,topk], y[m,K], on caller-owned memory as
 * kpick_linear takes it. y must not overlap an input. The CPU refuses an id
 * outside 0..E-1 (KPICK_E_ARG); a build with no moe candidate in dtype answers
 * KPICK_E_UNSUPPORTED. fp8: both weights as KPICK_FP8 above, x and y bf16. */
int kpick_moe(int32_t dtype, const void *x, const void *w_gate_up, const void *w_down, const int32_t *ids,
              const float *weights, void *y, int32_t m, int32_t experts, int32_t topk, int64_t n, int64_t k,
              void *stream);
/* kpick_linear as an engine runs it in a decode step: the routed call captured
 * into a graph on a stream of its own, the graph launched `replays` times
 * (1..1000), then the stream synchronised. The route must have run this call
 * once outside capture first (a GPU grows its scratch only then). */
int kpick_linear_graph(int32_t op, int32_t dtype, const void *x, const void *w, void *y,
                       int32_t m, int64_t n, int64_t k, int32_t replays);

/* ---- caller buffers (src/common/buffers.c) ----
 * Memory for kpick_linear allocated through the library: device memory on a
 * GPU, host memory on the CPU, so a binding without a GPU runtime of its own
 * can call the route. The library knows each buffer's size: kpick_linear and
 * the copies refuse bytes past its end. kpick_linear also takes memory of the
 * caller's own; on a GPU it refuses host memory there (pointer attributes),
 * rather than an illegal access that would poison the context. */
int kpick_buffer_alloc(int64_t bytes, void **out);
int kpick_buffer_free(void *buf);
/* copy bytes between host memory and buf + offset (synchronous) */
int kpick_buffer_upload(void *buf, int64_t offset, const void *src, int64_t bytes);
int kpick_buffer_download(const void *buf, int64_t offset, void *dst, int64_t bytes);

/* ---- decode model: serve-bench's step (src/common/model.h lists its files) ----
 * One decode step of a transformer with a real model's shapes and random
 * weights (every layer its own), one row per sequence: per layer rmsnorm, qkv,
 * rotary embedding, single-query grouped-query attention over a KV cache, o and
 * residual, rmsnorm, gate_up (the gated op), down and residual; then the final
 * norm, lm_head, argmax, and the embedding of the picked token as the next
 * input. Every linear runs the candidate the caller names for its kind, so two
 * routes run on the same weights. The residual stream is fp32, every other
 * activation the model's dtype. On a GPU the step is captured into a graph once
 * per (candidates, batch) and replayed; the CPU runs it call by call.
 * The library owns the model (free with kpick_model_free). */
typedef struct kpick_model kpick_model;

/* the linears of a step, in the order of the cands[] arrays below. A dense
 * model (experts 0) runs gate_up and down and ignores the router and experts
 * entries; a mixture-of-experts model runs the router and experts in their
 * place (its MLP: router logits, softmax top-k renormalised as Qwen3 and
 * Mixtral do, then the moe op) and ignores the gate_up and down entries. */
enum kpick_linear_kind {
  KPICK_LIN_QKV = 0,     /* linear, N = (heads + 2 kv_heads) head_dim, K = hidden */
  KPICK_LIN_O = 1,       /* linear, N = hidden, K = heads head_dim */
  KPICK_LIN_GATE_UP = 2, /* gated, N = intermediate, K = hidden */
  KPICK_LIN_DOWN = 3,    /* linear, N = hidden, K = intermediate */
  KPICK_LIN_LM_HEAD = 4, /* linear, N = vocab, K = hidden */
  KPICK_LIN_ROUTER = 5,  /* moe models: linear, N = experts, K = hidden */
  KPICK_LIN_EXPERTS = 6, /* moe models: moe, E = experts, topk, N = intermediate, K = hidden */
  KPICK_LIN_COUNT = 7
};

typedef struct kpick_model_dims {
  int32_t dtype;        /* enum kpick_dtype; fp8: the qkv, o, gate_up and down weights (moe:
                         * the experts') in fp8 (KPICK_FP8); lm_head, embedding, norms, the
                         * router, KV and activations bf16, as fp8 checkpoints keep them */
  int32_t hidden, intermediate;
  int32_t heads, kv_heads, head_dim; /* heads % kv_heads == 0; head_dim % 8 == 0 */
  int32_t vocab;
  int32_t layers;
  int32_t tied;         /* 1: lm_head is the embedding table */
  int32_t max_batch;    /* rows of a step: 1..KPICK_MAX_ROWS */
  int32_t context;      /* KV positions a reset fills (the prompt), >= 0 */
  int32_t max_new;      /* steps a reset leaves room for, >= 1; context + max_new <= KPICK_MAX_POSITIONS */
  float rms_eps;        /* > 0 */
  float rope_theta;     /* > 1 */
  int32_t experts;      /* 0: a dense MLP; else routed experts of `intermediate` each (moe) */
  int32_t topk;         /* experts per row: 0 with experts 0, else 1..min(experts, KPICK_MAX_TOPK) */
} kpick_model_dims;

/* Bytes of (device) memory kpick_model_create would allocate for d: weights,
 * KV cache, activations, and a reserve for the backend's scratch and graphs. */
int kpick_model_bytes(const kpick_model_dims *d, int64_t *bytes_out);
/* Validates d, checks kpick_model_bytes against free memory (KPICK_E_NOMEM with
 * what would fit when it does not), allocates, fills the weights from seed
 * (never zeros; U(-1,1)/sqrt(K) for a linear's W) and resets with seed. */
int kpick_model_create(const kpick_model_dims *d, uint64_t seed, kpick_model **out);
int kpick_model_free(kpick_model *model);
/* The prompt state from seed, for every batch row: KV positions 0..context-1
 * filled, one random input token per row, the position back at context. Two
 * resets with one seed give identical states. */
int kpick_model_reset(kpick_model *model, uint64_t seed);
/* One decode step of the first batch rows: cands[KPICK_LIN_COUNT] name the
 * candidate of each linear kind; tokens_out[batch] gets the picked tokens,
 * which are also the next step's input. At most max_new steps per reset. */
int kpick_model_step(kpick_model *model, const int32_t *cands, int32_t batch, int32_t *tokens_out);
/* steps timed decode steps (step_us_out[steps], microseconds), each from the
 * position reset leaves (context onwards); the first call for a (cands, batch)
 * also warms up (GPU: runs once, then captures the graph). Tokens and KV
 * contents advance: reset before a kpick_model_step sequence you compare. */
int kpick_model_time(kpick_model *model, const int32_t *cands, int32_t batch, int32_t steps,
                     double *step_us_out);

/* One decode step like kpick_model_step (it advances the state), then an fp64
 * forward of the same step on the host from the model's own weights, cache and
 * tokens: *rel_err_out = max |logit - ref| / max |ref|, *tol_out its bound
 * (KPICK_OK either way: the caller judges). It checks the step's wiring as a
 * whole; slow on a big model (every multiply in fp64 on one host thread). */
int kpick_model_check(kpick_model *model, const int32_t *cands, int32_t batch, double *rel_err_out,
                      double *tol_out);

/* the non-linear ops of a step, each checked by kpick_decode_selfcheck */
enum kpick_decode_op {
  KPICK_DEC_ADD_RMSNORM = 0, /* residual += y (fp32), out = rmsnorm(residual) * gamma */
  KPICK_DEC_ROPE_APPEND = 1, /* the attention op's first part: rotated k and v into the cache, qkv kept */
  KPICK_DEC_ATTENTION = 2,   /* rotated q per row, grouped-query, softmax over 0..position */
  KPICK_DEC_ARGMAX = 3,      /* greedy token (lowest index on ties), position + 1 */
  KPICK_DEC_EMBED = 4,       /* residual = embedding row of the token */
  KPICK_DEC_COUNT = 5
};
/* Runs one op of this backend on random data from seed and compares it with
 * an fp64 reference computed here: *rel_err_out = max |out - ref| / max |ref|
 * over its outputs (argmax, embed: the fraction of wrong elements), *tol_out
 * the bound it must stay within (KPICK_OK either way: the caller judges).
 * corrupt = 1 perturbs the op's input after the reference was taken, so a
 * caller can see the comparison fail. */
int kpick_decode_selfcheck(int32_t op, int32_t dtype, uint64_t seed, int32_t corrupt,
                           double *rel_err_out, double *tol_out);

#ifdef __cplusplus
}
#endif
#endif
