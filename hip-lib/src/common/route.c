/* route.c: the route an engine dispatches through, and its guard: the C twin of
 * lib/route.ts and lib/guard.ts (same checks, same order, same verdict line).
 *
 * kpick_route_load reads the compact table once, checks it against the library
 * actually loaded (kpick_get_info), the dispatch knobs and the space, keeps the
 * entries that pass and records one verdict line. Lookups and kpick_linear only
 * read the kept entries in memory, under a read lock; a load swaps them whole.
 * A missing or refused table is not an error: the route keeps the defaults. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "buffers.h"
#include "error.h"
#include "fp8.h"
#include "moe.h"
#include "route.h"
#include "sha256.h"
#include "space.h"

/* ---- knobs: environment variables that reroute dispatch. Any one of them set
 * (non-empty) refuses the table by name, so a tuned table never mixes with a
 * manual override. Read when a table is loaded (or at the first lookup). ---- */
#define KNOB_FORCE "KPICK_FORCE"         /* every call of its op runs this candidate */
#define KNOB_NO_BLASLT "KPICK_NO_BLASLT" /* the class default is not the vendor BLAS (class_default) */
static const char *const knobs[] = {KNOB_FORCE, KNOB_NO_BLASLT};
#define KNOB_SHOWN 64 /* bytes of a knob's value quoted in the verdict */

static const char *knob_value(const char *name) {
  const char *v = getenv(name);
  return v && v[0] ? v : NULL;
}

/* ---- drop reasons of one entry, in the order they are checked and listed ---- */
enum drop {
  DROP_NOT_IN_SPACE,
  DROP_UNAVAILABLE,
  DROP_OTHER_OP,
  DROP_OTHER_DTYPE,
  DROP_UNMEASURED,
  DROP_FAILED_PARITY,
  DROP_DID_NOT_RUN,
  DROP_UNCHECKED,
  DROP_STACK,
  DROP_ROWS,
  DROP_COUNT,
  DROP_NONE = -1
};
static const char *const drop_text[DROP_COUNT] = {
    "choice not in this build's space", "choice not available on this target",
    "choice is for another op",         "choice does not take this dtype", "choice not measured",
    "choice failed parity",             "choice did not run",
    "choice not parity-checked",        "stack-bound and the BLAS differs",
    "choice does not take these rows",
};

enum status_word { ST_OK, ST_UNSUPPORTED, ST_FAILED, ST_UNMEASURED };
enum parity_word { PA_PASS, PA_FAIL, PA_SKIPPED, PA_NONE };
static const char *const op_words[] = {"linear", "gated", "moe"};
#define OP_COUNT 3
static const char *const dtype_words[] = {"bf16", "fp16", "fp8"};
#define DTYPE_COUNT 3
static const char *const status_words[] = {"ok", "unsupported", "failed", "unmeasured"};
static const char *const parity_words[] = {"pass", "fail", "skipped", "none"};
static const char *const header_keys[] = {"backend", "arch", "device", "runtime", "blas", "compiler", "space"};
enum { H_BACKEND, H_ARCH, H_DEVICE, H_RUNTIME, H_BLAS, H_COMPILER, H_SPACE, H_COUNT };

/* One entry line as read. */
typedef struct parsed_entry {
  int64_t n, k;
  int32_t experts, topk; /* moe only; 0 for linear and gated */
  int32_t op, dtype, bucket, status, parity, stack, line;
  char choice[KP_ROUTE_MAX_NAME + 1];
} parsed_entry;

typedef struct parsed {
  char json_sha[65]; /* sha256 of the JSON table it was compiled from */
  char header[H_COUNT][KP_ROUTE_MAX_VALUE + 1];
  parsed_entry *e;
  size_t len, cap;
} parsed;

/* One kept entry: the key and the candidate it routes to. */
typedef struct kept_entry {
  int64_t n, k;
  int32_t experts, topk;
  int32_t op, dtype, bucket, cand;
} kept_entry;

typedef struct route {
  kept_entry *e; /* sorted by key */
  size_t len;
  int32_t used, dropped;
  int32_t defaults[OP_COUNT][DTYPE_COUNT]; /* per op and dtype; -1: none */
  int32_t forced;      /* KPICK_FORCE's candidate; -1: unset or unknown */
  char verdict[KP_ROUTE_VERDICT_MAX];
} route;

static pthread_rwlock_t route_lock = PTHREAD_RWLOCK_INITIALIZER;
static route current; /* guarded by route_lock */
static int current_ready;

/* ---- small text helpers ---- */

static void append(char *dst, size_t cap, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void append(char *dst, size_t cap, const char *fmt, ...) {
  size_t used = strlen(dst);
  if (used + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst + used, cap - used, fmt, ap);
  va_end(ap);
}

static int word_index(const char *s, size_t len, const char *const *words, int count) {
  for (int i = 0; i < count; i++)
    if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0) return i;
  return -1;
}

/* A decimal integer as the writer prints it: "0" or no leading zero, <= 9 digits. */
static int parse_uint(const char *s, size_t len, int64_t *out) {
  if (len == 0 || len > 9 || (len > 1 && s[0] == '0')) return 0;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 1;
}

static int is_name(const char *s, size_t len) {
  if (len == 0 || len > KP_ROUTE_MAX_NAME) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '_' || c == '-';
    if (!ok) return 0;
  }
  return 1;
}

/* lowercase hex digits, as a sha256 is written */
static int is_hex(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* ---- the file: same checks and order as readTableFile in lib/guard.ts ---- */

enum kind { K_USED, K_MISSING, K_REFUSED };

/* Opens path for reading after the checks every table file gets: missing, a
 * symlink to another folder, not a regular file, larger than limit. Returns
 * an fd (>= 0), or -1 - K_MISSING / -1 - K_REFUSED with the reason in why. */
static int open_checked(const char *path, long long limit, char *why, size_t cap) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return -1 - K_MISSING;
    snprintf(why, cap, "unreadable: %s", strerror(errno));
    return -1 - K_REFUSED;
  }
  if (S_ISLNK(st.st_mode)) {
    /* A table belongs to its folder: a link to another folder's table would
     * apply one device's tuning to another's name. */
    char target[PATH_MAX], dir_real[PATH_MAX], copy[PATH_MAX], target_copy[PATH_MAX];
    if (!realpath(path, target)) {
      snprintf(why, cap, "unreadable: a symlink to nothing");
      return -1 - K_REFUSED;
    }
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(target_copy, sizeof target_copy, "%s", target);
    if (!realpath(dirname(copy), dir_real) || strcmp(dir_real, dirname(target_copy)) != 0) {
      snprintf(why, cap, "unreadable: a symlink to another folder (%s)", target);
      return -1 - K_REFUSED;
    }
  }
  if (stat(path, &st) != 0) {
    snprintf(why, cap, "unreadable: %s", strerror(errno));
    return -1 - K_REFUSED;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, cap, "unreadable: not a regular file");
    return -1 - K_REFUSED;
  }
  if (st.st_size > limit) {
    snprintf(why, cap, "unreadable: %lld bytes, larger than any real table (limit %lld)", (long long)st.st_size,
             limit);
    return -1 - K_REFUSED;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, cap, "unreadable: %s", strerror(errno));
    return -1 - K_REFUSED;
  }
  return fd;
}

/* Reads up to limit + 1 bytes of fd into consume(ctx, bytes, n), so a file
 * that grew past limit since the stat is still caught. Closes fd. Returns
 * K_USED, or K_REFUSED with the reason in why. */
static int read_all(int fd, long long limit, void (*consume)(void *, const char *, size_t), void *ctx, char *why,
                    size_t cap) {
  char chunk[65536];
  long long got = 0;
  for (;;) {
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(why, cap, "unreadable: %s", strerror(errno));
      close(fd);
      return K_REFUSED;
    }
    if (r == 0) break;
    got += r;
    if (got > limit) {
      snprintf(why, cap, "unreadable: more than %lld bytes, larger than any real table", limit);
      close(fd);
      return K_REFUSED;
    }
    consume(ctx, chunk, (size_t)r);
  }
  close(fd);
  return K_USED;
}

typedef struct text_sink {
  char *buf;
  size_t len;
} text_sink;

static void to_text(void *ctx, const char *bytes, size_t n) {
  text_sink *t = ctx;
  memcpy(t->buf + t->len, bytes, n);
  t->len += n;
}

static void to_hash(void *ctx, const char *bytes, size_t n) { kp_sha256_update(ctx, bytes, n); }

/* Reads path into *text (NUL-terminated). Returns K_USED when read, K_MISSING,
 * or K_REFUSED with the reason in why; -1 when out of memory. */
static int read_file(const char *path, char **text, size_t *len, char *why, size_t cap) {
  int fd = open_checked(path, KP_ROUTE_MAX_BYTES, why, cap);
  if (fd < 0) return -1 - fd;
  text_sink t = {malloc(KP_ROUTE_MAX_BYTES + 1), 0};
  if (!t.buf) {
    close(fd);
    return -1;
  }
  int kind = read_all(fd, KP_ROUTE_MAX_BYTES, to_text, &t, why, cap);
  if (kind != K_USED) {
    free(t.buf);
    return kind;
  }
  t.buf[t.len] = '\0';
  *text = t.buf;
  *len = t.len;
  return K_USED;
}

/* The sha256 of the file at path as 64 hex digits: K_USED, K_MISSING or K_REFUSED (why). */
static int hash_file(const char *path, char hex[65], char *why, size_t cap) {
  int fd = open_checked(path, KP_TABLE_MAX_BYTES, why, cap);
  if (fd < 0) return -1 - fd;
  kp_sha256 s;
  kp_sha256_init(&s);
  int kind = read_all(fd, KP_TABLE_MAX_BYTES, to_hash, &s, why, cap);
  if (kind == K_USED) kp_sha256_hex(&s, hex);
  return kind;
}

/* ---- the parser: same rules and messages as parseCompactRoute in lib/route.ts ---- */

enum parse_result { P_OK, P_INVALID, P_OLDER, P_NEWER, P_NOMEM, P_EDITED };

/* Writes why a route is invalid; returns P_INVALID. */
static int invalid(char *why, size_t cap, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int invalid(char *why, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return P_INVALID;
}

typedef struct cursor {
  const char *text;
  size_t len, pos;
  int32_t line;     /* lines read so far */
  const char *cur;  /* the current line, without its '\n' */
  size_t cur_len;
} cursor;

/* 1: a line is in cur; 0: end of text; -1: a bad line (message in why) */
static int next_line(cursor *c, char *why, size_t cap) {
  if (c->pos >= c->len) return 0;
  c->line++;
  size_t i = c->pos;
  for (; i < c->len && c->text[i] != '\n'; i++) {
    unsigned char b = (unsigned char)c->text[i];
    if (b < 0x20 || b > 0x7e) {
      snprintf(why, cap, "line %d: byte 0x%02x is not printable ASCII", (int)c->line, b);
      return -1;
    }
  }
  if (i >= c->len) {
    snprintf(why, cap, "line %d: no newline at the end (truncated?)", (int)c->line);
    return -1;
  }
  c->cur = c->text + c->pos;
  c->cur_len = i - c->pos;
  c->pos = i + 1;
  return 1;
}

/* "key <integer>" in cur: 1 and *out, or 0 */
static int keyed_uint(const cursor *c, const char *key, int64_t *out) {
  size_t kl = strlen(key);
  return c->cur_len > kl + 1 && memcmp(c->cur, key, kl) == 0 && c->cur[kl] == ' ' &&
         parse_uint(c->cur + kl + 1, c->cur_len - kl - 1, out);
}

static int version_check(const char *what, int64_t got, int64_t want, char *why, size_t cap) {
  if (got == want) return P_OK;
  snprintf(why, cap, "%s format (%s %lld, this kpick reads %lld)", got < want ? "older" : "newer", what,
           (long long)got, (long long)want);
  return got < want ? P_OLDER : P_NEWER;
}

/* One entry line in cur: P_OK, or P_INVALID with the first bad field named.
 * A moe line has two more fields, experts and topk, after its dtype. */
#define ENTRY_FIELDS 9
#define MOE_FIELDS 11
static int parse_entry(const cursor *c, parsed_entry *e, char *why, size_t cap) {
  const char *f[MOE_FIELDS];
  size_t fl[MOE_FIELDS];
  int count = 1;
  for (size_t i = 0; i < c->cur_len; i++) count += c->cur[i] == ' ';
  const int moe = c->cur_len > 4 && memcmp(c->cur, "moe ", 4) == 0;
  const int want = moe ? MOE_FIELDS : ENTRY_FIELDS;
  if (count != want)
    return moe ? invalid(why, cap,
                         "line %d: expected 11 fields (moe dtype experts topk n k bucket choice status parity stack), got %d",
                         (int)c->line, count)
               : invalid(why, cap, "line %d: expected 9 fields (op dtype n k bucket choice status parity stack), got %d",
                         (int)c->line, count);
  const char *s = c->cur, *end = c->cur + c->cur_len;
  for (int i = 0; i < want; i++) {
    const char *sp = memchr(s, ' ', (size_t)(end - s));
    if (!sp) sp = end;
    f[i] = s;
    fl[i] = (size_t)(sp - s);
    s = sp + 1;
  }
  int L = (int)c->line;
  int64_t n, k, bucket, stack, experts = 0, topk = 0;
  e->line = c->line;
  if ((e->op = word_index(f[0], fl[0], op_words, OP_COUNT)) < 0)
    return invalid(why, cap, "line %d: op must be linear, gated or moe", L);
  if ((e->dtype = word_index(f[1], fl[1], dtype_words, DTYPE_COUNT)) < 0)
    return invalid(why, cap, "line %d: dtype must be bf16, fp16 or fp8", L);
  const int x = moe ? 2 : 0; /* the fields after dtype move by two on a moe line */
  if (moe && (!parse_uint(f[2], fl[2], &experts) || experts < 1 || experts > KPICK_MAX_EXPERTS))
    return invalid(why, cap, "line %d: experts must be an integer in 1..%d", L, KPICK_MAX_EXPERTS);
  if (moe && (!parse_uint(f[3], fl[3], &topk) || topk < 1 || topk > KPICK_MAX_TOPK || topk > experts))
    return invalid(why, cap, "line %d: topk must be an integer in 1..%d, at most experts", L, KPICK_MAX_TOPK);
  if (!parse_uint(f[2 + x], fl[2 + x], &n) || n < 1 || n > KP_ROUTE_MAX_DIM)
    return invalid(why, cap, "line %d: n must be an integer in 1..%d", L, KP_ROUTE_MAX_DIM);
  if (!parse_uint(f[3 + x], fl[3 + x], &k) || k < 1 || k > KP_ROUTE_MAX_DIM)
    return invalid(why, cap, "line %d: k must be an integer in 1..%d", L, KP_ROUTE_MAX_DIM);
  if (!parse_uint(f[4 + x], fl[4 + x], &bucket) || bucket > KPICK_MAX_ROWS || kp_route_bucket((int32_t)bucket) != bucket) {
    char list[64] = "1"; /* the buckets, as lib/route.ts lists them */
    for (int b = 2; b <= KPICK_MAX_ROWS; b *= 2) snprintf(list + strlen(list), sizeof list - strlen(list), ",%d", b);
    return invalid(why, cap, "line %d: bucket must be one of %s", L, list);
  }
  if (!is_name(f[5 + x], fl[5 + x]))
    return invalid(why, cap, "line %d: choice must be a candidate name (1..%d of A-Z a-z 0-9 . _ -)", L,
                   KP_ROUTE_MAX_NAME);
  if ((e->status = word_index(f[6 + x], fl[6 + x], status_words, 4)) < 0)
    return invalid(why, cap, "line %d: status must be ok, unsupported, failed or unmeasured", L);
  if ((e->parity = word_index(f[7 + x], fl[7 + x], parity_words, 4)) < 0)
    return invalid(why, cap, "line %d: parity must be pass, fail, skipped or none", L);
  if (!parse_uint(f[8 + x], fl[8 + x], &stack) || stack > 1)
    return invalid(why, cap, "line %d: stack must be 0 or 1", L);
  e->n = n;
  e->k = k;
  e->experts = (int32_t)experts;
  e->topk = (int32_t)topk;
  e->bucket = (int32_t)bucket;
  e->stack = (int32_t)stack;
  memcpy(e->choice, f[5 + x], fl[5 + x]);
  e->choice[fl[5 + x]] = '\0';
  return P_OK;
}

/* An entry's key: op, dtype, experts, topk (0 but for moe), n, k, bucket. */
typedef struct route_key {
  int32_t op, dtype, experts, topk;
  int64_t n, k;
  int32_t bucket;
} route_key;

#define KEY_OF(e) ((route_key){(e)->op, (e)->dtype, (e)->experts, (e)->topk, (e)->n, (e)->k, (e)->bucket})

static int key_cmp(route_key a, route_key b) {
  if (a.op != b.op) return a.op < b.op ? -1 : 1;
  if (a.dtype != b.dtype) return a.dtype < b.dtype ? -1 : 1;
  if (a.experts != b.experts) return a.experts < b.experts ? -1 : 1;
  if (a.topk != b.topk) return a.topk < b.topk ? -1 : 1;
  if (a.n != b.n) return a.n < b.n ? -1 : 1;
  if (a.k != b.k) return a.k < b.k ? -1 : 1;
  if (a.bucket != b.bucket) return a.bucket < b.bucket ? -1 : 1;
  return 0;
}

static int parsed_cmp(const void *a, const void *b) {
  const parsed_entry *x = a, *y = b;
  int c = key_cmp(KEY_OF(x), KEY_OF(y));
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* The first repeated key in file order: the smallest line that repeats an
 * earlier one, named with the first line of its key (as a Map walk finds it). */
static int find_duplicate(parsed *p, char *why, size_t cap) {
  if (p->len < 2) return 0;
  qsort(p->e, p->len, sizeof *p->e, parsed_cmp);
  const parsed_entry *best = NULL, *best_first = NULL, *first = &p->e[0];
  for (size_t i = 1; i < p->len; i++) {
    const parsed_entry *a = &p->e[i - 1], *b = &p->e[i];
    if (key_cmp(KEY_OF(a), KEY_OF(b)) != 0) {
      first = b;
      continue;
    }
    if (a == first && (!best || b->line < best->line)) { /* b is the first repeat of its key */
      best = b;
      best_first = first;
    }
  }
  if (!best) return 0;
  char experts[48] = ""; /* " E128 top8" on a moe key, as lib/guard.ts writes it */
  if (best->op == KPICK_OP_MOE) snprintf(experts, sizeof experts, " E%d top%d", (int)best->experts, (int)best->topk);
  snprintf(why, cap, "line %d repeats line %d (%s %s %lldx%lld%s, bucket %d)", (int)best->line,
           (int)best_first->line, op_words[best->op], dtype_words[best->dtype], (long long)best->n,
           (long long)best->k, experts, (int)best->bucket);
  return 1;
}

static int parse_route(const char *text, size_t len, parsed *p, char *why, size_t cap) {
  cursor c = {text, len, 0, 0, NULL, 0};
  int r = next_line(&c, why, cap);
  if (r < 0) return P_INVALID;
  int64_t num;
  if (r == 0) return invalid(why, cap, "empty file");
  if (!keyed_uint(&c, "kpick-route", &num)) return invalid(why, cap, "line 1: not a kpick route file");
  int v = version_check("route", num, KPICK_ROUTE_VERSION, why, cap);
  if (v != P_OK) return v;

  if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
  if (r == 0) return invalid(why, cap, "truncated after line %d", (int)c.line);
  if (c.cur_len != 5 + 64 || memcmp(c.cur, "json ", 5) != 0 || !is_hex(c.cur + 5, 64))
    return invalid(why, cap, "line %d: expected 'json <sha256 of the JSON table: 64 hex digits>'", (int)c.line);
  memcpy(p->json_sha, c.cur + 5, 64);
  p->json_sha[64] = '\0';

  if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
  if (r == 0) return invalid(why, cap, "truncated after line %d", (int)c.line);
  if (!keyed_uint(&c, "format", &num)) return invalid(why, cap, "line %d: expected 'format <number>'", (int)c.line);
  if ((v = version_check("format", num, KPICK_TABLE_FORMAT, why, cap)) != P_OK) return v;

  for (int h = 0; h < H_COUNT; h++) {
    if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
    size_t kl = strlen(header_keys[h]);
    if (r == 0) return invalid(why, cap, "truncated after line %d", (int)c.line);
    if (c.cur_len < kl + 2 || c.cur_len - kl - 1 > KP_ROUTE_MAX_VALUE || memcmp(c.cur, header_keys[h], kl) != 0 ||
        c.cur[kl] != ' ')
      return invalid(why, cap, "line %d: expected '%s <value>' (1..%d characters)", (int)c.line, header_keys[h],
                     KP_ROUTE_MAX_VALUE);
    memcpy(p->header[h], c.cur + kl + 1, c.cur_len - kl - 1);
    p->header[h][c.cur_len - kl - 1] = '\0';
  }

  if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
  if (r == 0) return invalid(why, cap, "truncated after line %d", (int)c.line);
  int64_t count;
  if (!keyed_uint(&c, "entries", &count) || count > KP_ROUTE_MAX_ENTRIES)
    return invalid(why, cap, "line %d: expected 'entries <count up to %d>'", (int)c.line, KP_ROUTE_MAX_ENTRIES);

  for (int64_t i = 0; i < count; i++) {
    if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
    if (r == 0)
      return invalid(why, cap, "truncated after line %d: expected %lld entries and 'end'", (int)c.line,
                    (long long)count);
    if (p->len == p->cap) { /* grown as lines arrive: the count line alone allocates nothing */
      size_t cap2 = p->cap ? p->cap * 2 : 64;
      parsed_entry *grown = realloc(p->e, cap2 * sizeof *grown);
      if (!grown) return P_NOMEM;
      p->e = grown;
      p->cap = cap2;
    }
    if (parse_entry(&c, &p->e[p->len], why, cap) != P_OK) return P_INVALID;
    p->len++;
  }
  if ((r = next_line(&c, why, cap)) < 0) return P_INVALID;
  if (r == 0)
    return invalid(why, cap, "truncated after line %d: expected %lld entries and 'end'", (int)c.line,
                   (long long)count);
  if (c.cur_len != 4 + 64 || memcmp(c.cur, "end ", 4) != 0 || !is_hex(c.cur + 4, 64))
    return invalid(why, cap, "line %d: expected 'end <sha256 of the lines above: 64 hex digits>' after %lld entries",
                   (int)c.line, (long long)count);
  if (c.pos < c.len) return invalid(why, cap, "line %d: text after 'end'", (int)c.line + 1);
  if (find_duplicate(p, why, cap)) return P_INVALID;
  /* the route's own text, so a hand edit of it is caught like one of its JSON */
  kp_sha256 s;
  char sum[65];
  kp_sha256_init(&s);
  kp_sha256_update(&s, text, (size_t)(c.cur - text));
  kp_sha256_hex(&s, sum);
  if (memcmp(sum, c.cur + 4, 64) != 0) return P_EDITED;
  return P_OK;
}

/* ---- the build: defaults, knobs, candidates by name ---- */

static int32_t find_candidate(const char *name) {
  for (int32_t i = 0; i < KP_NCAND; i++)
    if (strcmp(kp_space[i].name, name) == 0) return i;
  return -1;
}

/* A family that calls the vendor BLAS (cuBLASLt / hipBLASLt, or cuBLAS for moe). */
static int vendor_blas(const kp_row *r) { return strcmp(r->family, "blaslt") == 0 || strcmp(r->family, "moe_blas") == 0; }

/* The class default of op (what runs without a table). Under KPICK_NO_BLASLT a
 * vendor-BLAS default gives way to the first available candidate of the op, in
 * space.def order, that is neither BLAS nor stack-bound and takes every rows
 * count the default takes (a default serves any rows); with none such, the
 * BLAS default stays. */
static int32_t class_default(int32_t op, int32_t dtype, int no_blaslt) {
  int32_t head = -1;
  for (int32_t i = 0; i < KP_NCAND && head < 0; i++)
    if (kp_space[i].op == op && kp_row_takes(&kp_space[i], dtype) && (kp_space[i].flags & KF_DEFAULT) &&
        be_available(i))
      head = i;
  if (head < 0 || !no_blaslt || !vendor_blas(&kp_space[head])) return head;
  for (int32_t i = 0; i < KP_NCAND; i++)
    if (kp_space[i].op == op && kp_row_takes(&kp_space[i], dtype) && be_available(i) && !vendor_blas(&kp_space[i]) &&
        !(kp_space[i].flags & KF_STACK) && kp_space[i].rows_min <= kp_space[head].rows_min &&
        kp_space[i].rows_max >= kp_space[head].rows_max)
      return i;
  return head;
}

static int rows_fit(int32_t cand, int32_t lo, int32_t hi) {
  return kp_space[cand].rows_min <= lo && kp_space[cand].rows_max >= hi;
}

static enum drop judge_entry(const parsed_entry *e, const char *table_blas, const char *build_blas, int32_t *cand) {
  int32_t id = find_candidate(e->choice);
  *cand = id;
  if (id < 0) return DROP_NOT_IN_SPACE;
  if (!be_available(id)) return DROP_UNAVAILABLE;
  const kp_row *r = &kp_space[id];
  if (r->op != e->op) return DROP_OTHER_OP;
  if (!kp_row_takes(r, e->dtype)) return DROP_OTHER_DTYPE;
  /* The class default runs on a miss anyway: routing to it needs no evidence. */
  if (!(r->flags & KF_DEFAULT)) {
    if (e->status == ST_UNMEASURED) return DROP_UNMEASURED;
    if (e->parity == PA_FAIL) return DROP_FAILED_PARITY;
    if (e->status != ST_OK) return DROP_DID_NOT_RUN;
    if (e->parity != PA_PASS) return DROP_UNCHECKED;
  }
  if (((r->flags & KF_STACK) || e->stack) && strcmp(table_blas, build_blas) != 0) return DROP_STACK;
  int32_t lo = e->bucket == 1 ? 1 : e->bucket / 2 + 1;
  if (!rows_fit(id, lo, e->bucket)) return DROP_ROWS;
  return DROP_NONE;
}

static int kept_cmp(const void *a, const void *b) {
  const kept_entry *x = a, *y = b;
  return key_cmp(KEY_OF(x), KEY_OF(y));
}

/* ---- building a route ---- */

static void refuse_line(route *rt, const char *path, const char *reason, const char *remedy) {
  snprintf(rt->verdict, sizeof rt->verdict, "kpick: table %s refused: %s; %s; using the defaults", path, reason,
           remedy);
}

/* The JSON table a route was compiled from: beside it, same name, .json. */
static void json_path_of(const char *route_path, char *out, size_t cap) {
  size_t len = strlen(route_path);
  if (len > 6 && strcmp(route_path + len - 6, ".route") == 0) len -= 6;
  snprintf(out, cap, "%.*s.json", (int)len, route_path);
}

static void remedy_route_only(char *out, size_t cap, const char *json) {
  snprintf(out, cap, "run `npx tsx scripts/promote.ts --route-only --table %s`", json);
}

static void refuse_edited(route *rt, const char *path) {
  char json[PATH_MAX + 8], remedy[PATH_MAX + 128];
  json_path_of(path, json, sizeof json);
  remedy_route_only(remedy, sizeof remedy, json);
  refuse_line(rt, path, "edited since it was written (its checksum does not match)", remedy);
}

/* One table, one truth: a route is used only beside the JSON it was compiled
 * from, byte for byte; 1 with the verdict written when it is not. */
static int refuse_stale(route *rt, const char *path, const parsed *p) {
  char json[PATH_MAX + 8], why[PATH_MAX + 256], hex[65], reason[2 * PATH_MAX + 512], remedy[PATH_MAX + 128];
  json_path_of(path, json, sizeof json);
  int kind = hash_file(json, hex, why, sizeof why);
  if (kind == K_USED && strcmp(hex, p->json_sha) == 0) return 0;
  if (kind == K_USED) {
    snprintf(reason, sizeof reason, "%s changed since the route was written (sha256 %.12s, the route was made from %.12s)",
             json, hex, p->json_sha);
    remedy_route_only(remedy, sizeof remedy, json);
  } else {
    if (kind == K_MISSING) snprintf(reason, sizeof reason, "no JSON table beside it (%s)", json);
    else snprintf(reason, sizeof reason, "%s %s", json, why);
    snprintf(remedy, sizeof remedy, "a route is used only beside the JSON it was made from: restore it or run promote again");
  }
  refuse_line(rt, path, reason, remedy);
  return 1;
}

/* The identity, compiler, space and knob checks, in DESIGN.md's order;
 * 1 with the verdict written when the table is refused. */
static int refuse_by_build(route *rt, const char *path, const parsed *p, const kpick_info *info) {
  const char *here[H_COUNT] = {info->backend, info->arch,     info->device, info->runtime,
                               info->blas,    info->compiler, info->space};
  char reason[1024];
  for (int h = H_BACKEND; h <= H_DEVICE; h++) {
    if (strcmp(p->header[h], here[h]) != 0) {
      snprintf(reason, sizeof reason, "other %s (table \"%s\", here \"%s\")", header_keys[h], p->header[h], here[h]);
      refuse_line(rt, path, reason, "run the tuner on this machine");
      return 1;
    }
  }
  if (strcmp(p->header[H_COMPILER], here[H_COMPILER]) != 0) {
    snprintf(reason, sizeof reason, "other compiler (table \"%s\", here \"%s\")", p->header[H_COMPILER],
             here[H_COMPILER]);
    refuse_line(rt, path, reason, "run the tuner again");
    return 1;
  }
  if (strcmp(p->header[H_SPACE], here[H_SPACE]) != 0) {
    snprintf(reason, sizeof reason, "other space (table %s, here %s)", p->header[H_SPACE], here[H_SPACE]);
    refuse_line(rt, path, reason, "the kernels changed: run the tuner again");
    return 1;
  }
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
    const char *value = knob_value(knobs[i]);
    if (value) {
      snprintf(reason, sizeof reason, "%s=%.*s is set", knobs[i], KNOB_SHOWN, value);
      refuse_line(rt, path, reason, "it reroutes dispatch: unset it to use the table");
      return 1;
    }
  }
  return 0;
}

/* Keeps the entries that pass and writes the "loaded" verdict. */
static int use_table(route *rt, const char *path, const parsed *p, const kpick_info *info) {
  int32_t counts[DROP_COUNT] = {0};
  rt->e = p->len ? malloc(p->len * sizeof *rt->e) : NULL;
  if (p->len && !rt->e) return KPICK_E_NOMEM;
  for (size_t i = 0; i < p->len; i++) {
    const parsed_entry *e = &p->e[i];
    int32_t cand;
    enum drop d = judge_entry(e, p->header[H_BLAS], info->blas, &cand);
    if (d != DROP_NONE) {
      counts[d]++;
      rt->dropped++;
      continue;
    }
    rt->e[rt->len++] = (kept_entry){e->n, e->k, e->experts, e->topk, e->op, e->dtype, e->bucket, cand};
  }
  if (rt->len > 1) qsort(rt->e, rt->len, sizeof *rt->e, kept_cmp); /* qsort takes no NULL: rt->e is NULL for a table of no entries */
  rt->used = 1;
  snprintf(rt->verdict, sizeof rt->verdict, "kpick: table %s: loaded %zu entries, dropped %d", path, rt->len,
           (int)rt->dropped);
  const char *sep = " (";
  for (int d = 0; d < DROP_COUNT; d++) {
    if (!counts[d]) continue;
    append(rt->verdict, sizeof rt->verdict, "%s%d %s", sep, (int)counts[d], drop_text[d]);
    sep = ", ";
  }
  if (rt->dropped) append(rt->verdict, sizeof rt->verdict, ")");
  if (strcmp(p->header[H_RUNTIME], info->runtime) != 0)
    append(rt->verdict, sizeof rt->verdict, "; note: tuned with runtime \"%s\", this is \"%s\"",
           p->header[H_RUNTIME], info->runtime);
  if (strcmp(p->header[H_BLAS], info->blas) != 0)
    append(rt->verdict, sizeof rt->verdict, "; note: tuned with blas \"%s\", this is \"%s\"", p->header[H_BLAS],
           info->blas);
  return KPICK_OK;
}

/* A new route from path (NULL: none): never fails but for memory. */
static int build_route(route *rt, const char *path) {
  memset(rt, 0, sizeof *rt);
  kpick_info info;
  KP_TRY(kpick_get_info(&info));
  const char *force = knob_value(KNOB_FORCE);
  rt->forced = force ? find_candidate(force) : -1;
  if (rt->forced >= 0 && !be_available(rt->forced)) rt->forced = -1;
  for (int32_t op = 0; op < OP_COUNT; op++)
    for (int32_t dt = 0; dt < DTYPE_COUNT; dt++)
      rt->defaults[op][dt] = class_default(op, dt, knob_value(KNOB_NO_BLASLT) != NULL);

  int st = KPICK_OK;
  if (!path) {
    snprintf(rt->verdict, sizeof rt->verdict, "kpick: no table loaded: using the defaults");
  } else {
    char why[PATH_MAX + 1024] = "";
    char *text = NULL;
    size_t len = 0;
    parsed p;
    memset(&p, 0, sizeof p);
    int kind = read_file(path, &text, &len, why, sizeof why);
    if (kind < 0) {
      st = kp_fail(KPICK_E_NOMEM, "kpick_route_load", "host allocation failed");
    } else if (kind == K_MISSING) {
      snprintf(rt->verdict, sizeof rt->verdict, "kpick: no table at %s: using the defaults", path);
    } else if (kind == K_REFUSED) {
      refuse_line(rt, path, why, "run promote again");
    } else {
      int pr = parse_route(text, len, &p, why, sizeof why);
      if (pr == P_NOMEM) {
        st = kp_fail(KPICK_E_NOMEM, "kpick_route_load", "host allocation failed");
      } else if (pr == P_INVALID) {
        char reason[PATH_MAX + 1100];
        snprintf(reason, sizeof reason, "invalid: %s", why);
        refuse_line(rt, path, reason, "run promote again");
      } else if (pr == P_OLDER || pr == P_NEWER) {
        refuse_line(rt, path, why, pr == P_OLDER ? "run promote again" : "upgrade kpick");
      } else if (pr == P_EDITED || refuse_stale(rt, path, &p)) {
        if (pr == P_EDITED) refuse_edited(rt, path);
      } else if (!refuse_by_build(rt, path, &p, &info)) {
        st = use_table(rt, path, &p, &info);
        if (st != KPICK_OK) st = kp_fail(st, "kpick_route_load", "host allocation failed");
      }
    }
    free(text);
    free(p.e);
  }
  if (force && rt->forced < 0)
    append(rt->verdict, sizeof rt->verdict, "; note: %s=%.*s names no candidate here", KNOB_FORCE, KNOB_SHOWN,
           force);
  return st;
}

/* The route before any load: defaults, knobs read now. Caller holds the write lock. */
static int ensure_current(void) {
  if (current_ready) return KPICK_OK;
  KP_TRY(build_route(&current, NULL));
  current_ready = 1;
  return KPICK_OK;
}

/* Caller holds a lock on the route. */
static int32_t route_pick(const route *rt, route_key want, int32_t m) {
  const int32_t op = want.op, dtype = want.dtype;
  if (rt->forced >= 0 && kp_space[rt->forced].op == op && kp_row_takes(&kp_space[rt->forced], dtype) &&
      rows_fit(rt->forced, m, m))
    return rt->forced;
  want.bucket = kp_route_bucket(m);
  size_t lo = 0, hi = rt->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const kept_entry *e = &rt->e[mid];
    int c = key_cmp(KEY_OF(e), want);
    if (c == 0) return e->cand;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return rt->defaults[op][dtype];
}

/* want: the key but its bucket, which m gives */
static int lookup(route_key want, int32_t m, int32_t *cand) {
  const int32_t op = want.op;
  pthread_rwlock_rdlock(&route_lock);
  int ready = current_ready;
  if (ready) *cand = route_pick(&current, want, m);
  pthread_rwlock_unlock(&route_lock);
  if (!ready) {
    pthread_rwlock_wrlock(&route_lock);
    int st = ensure_current();
    if (st == KPICK_OK) *cand = route_pick(&current, want, m);
    pthread_rwlock_unlock(&route_lock);
    KP_TRY(st);
  }
  if (*cand < 0)
    return kp_fail(KPICK_E_UNSUPPORTED, "route", "no class default for op %d in dtype %d in this build", (int)op,
                   (int)want.dtype);
  return KPICK_OK;
}

/* ---- the ABI ---- */

#define KP_ROUTE_DIMS(dtype, n, k, m)                                                                      \
  do {                                                                                                     \
    KP_REQUIRE((dtype) >= KPICK_BF16 && (dtype) <= KPICK_FP8, "dtype must be 0 (bf16), 1 (fp16) or 2 (fp8), got %d", \
               (int)(dtype));                                                                              \
    KP_REQUIRE((n) > 0 && (n) <= KP_ROUTE_MAX_DIM, "n must be in 1..%d, got %lld", KP_ROUTE_MAX_DIM,        \
               (long long)(n));                                                                            \
    KP_REQUIRE((k) > 0 && (k) <= KP_ROUTE_MAX_DIM, "k must be in 1..%d, got %lld", KP_ROUTE_MAX_DIM,        \
               (long long)(k));                                                                            \
    KP_REQUIRE((m) > 0 && (m) <= KPICK_MAX_ROWS, "m must be in 1..%d, got %d", KPICK_MAX_ROWS, (int)(m));   \
  } while (0)

#define KP_ROUTE_ARGS(op, dtype, n, k, m)                                                                  \
  do {                                                                                                     \
    KP_REQUIRE((op) != KPICK_OP_MOE, "op 2 (moe) is routed by kpick_route_lookup_moe and run by kpick_moe"); \
    KP_REQUIRE((op) == KPICK_OP_LINEAR || (op) == KPICK_OP_GATED, "op must be 0 (linear) or 1 (gated), got %d", \
               (int)(op));                                                                                 \
    KP_ROUTE_DIMS(dtype, n, k, m);                                                                         \
  } while (0)

int kpick_route_load(const char *path, int32_t say) {
  KP_TRY(kpick_init());
  KP_REQUIRE(say == 0 || say == 1, "say must be 0 or 1, got %d", (int)say);
  KP_REQUIRE(path == NULL || (path[0] != '\0' && strnlen(path, 4096) < 4096),
             "path must be NULL or 1..4095 bytes");
  route fresh;
  int st = build_route(&fresh, path);
  if (st != KPICK_OK) {
    free(fresh.e);
    return st;
  }
  pthread_rwlock_wrlock(&route_lock);
  kept_entry *old = current.e;
  current = fresh;
  current_ready = 1;
  pthread_rwlock_unlock(&route_lock);
  free(old);
  if (say) fprintf(stderr, "%s\n", fresh.verdict);
  return KPICK_OK;
}

int kpick_route_verdict(char *buf, int32_t cap) {
  KP_TRY(kpick_init());
  KP_REQUIRE(buf != NULL, "buf is null");
  KP_REQUIRE(cap > 0, "cap must be positive, got %d", (int)cap);
  pthread_rwlock_wrlock(&route_lock);
  int st = ensure_current();
  size_t need = strlen(current.verdict) + 1;
  if (st == KPICK_OK && need <= (size_t)cap) memcpy(buf, current.verdict, need);
  pthread_rwlock_unlock(&route_lock);
  KP_TRY(st);
  KP_REQUIRE(need <= (size_t)cap, "buffer of %d bytes is too small: the verdict needs %zu", (int)cap, need);
  return KPICK_OK;
}

int kpick_route_status(int32_t *used, int32_t *kept, int32_t *dropped) {
  KP_TRY(kpick_init());
  KP_REQUIRE(used != NULL && kept != NULL && dropped != NULL, "null argument");
  pthread_rwlock_wrlock(&route_lock);
  int st = ensure_current();
  *used = current.used;
  *kept = (int32_t)current.len;
  *dropped = current.dropped;
  pthread_rwlock_unlock(&route_lock);
  return st;
}

int kpick_route_lookup(int32_t op, int32_t dtype, int64_t n, int64_t k, int32_t m, int32_t *cand_out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(cand_out != NULL, "cand_out is null");
  KP_ROUTE_ARGS(op, dtype, n, k, m);
  return lookup((route_key){op, dtype, 0, 0, n, k, 0}, m, cand_out);
}

/* experts and topk (the dtype, up to fp8, is KP_ROUTE_DIMS's) */
#define KP_MOE_ARGS(dtype, experts, topk)                                                                        \
  do {                                                                                                           \
    KP_REQUIRE((experts) > 0 && (experts) <= KPICK_MAX_EXPERTS, "experts must be in 1..%d, got %d",               \
               KPICK_MAX_EXPERTS, (int)(experts));                                                               \
    KP_REQUIRE((topk) > 0 && (topk) <= KPICK_MAX_TOPK && (topk) <= (experts),                                     \
               "topk must be in 1..%d and at most experts (%d), got %d", KPICK_MAX_TOPK, (int)(experts), (int)(topk)); \
  } while (0)

int kpick_route_lookup_moe(int32_t dtype, int32_t experts, int32_t topk, int64_t n, int64_t k, int32_t m,
                           int32_t *cand_out) {
  KP_TRY(kpick_init());
  KP_REQUIRE(cand_out != NULL, "cand_out is null");
  KP_ROUTE_DIMS(dtype, n, k, m);
  KP_MOE_ARGS(dtype, experts, topk);
  return lookup((route_key){KPICK_OP_MOE, dtype, experts, topk, n, k, 0}, m, cand_out);
}

static int overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + b_bytes && y < x + a_bytes;
}

/* kpick_linear's checks: arguments, that y overlaps neither input, and that
 * the memory takes the bytes the call reads and writes; then the route's pick. */
static int linear_args(int32_t op, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n,
                       int64_t k, int32_t *cand) {
  KP_ROUTE_ARGS(op, dtype, n, k, m);
  KP_REQUIRE(x != NULL && w != NULL && y != NULL, "x, w and y must not be null");
  size_t x_bytes = (size_t)m * (size_t)k * 2, y_bytes = (size_t)m * (size_t)n * 2; /* fp8: x, y bf16 */
  size_t w_bytes = (size_t)kp_weight_bytes(dtype, op == KPICK_OP_GATED ? 2 * n : n, k);   /* fp8: codes + scales */
  KP_REQUIRE(!overlaps(y, y_bytes, x, x_bytes) && !overlaps(y, y_bytes, w, w_bytes),
             "y must not overlap x or w");
  KP_TRY(kp_check_memory("x", x, (int64_t)x_bytes));
  KP_TRY(kp_check_memory("w", w, (int64_t)w_bytes));
  KP_TRY(kp_check_memory("y", y, (int64_t)y_bytes));
  return lookup((route_key){op, dtype, 0, 0, n, k, 0}, m, cand);
}

int kpick_linear(int32_t op, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n, int64_t k,
                 void *stream) {
  KP_TRY(kpick_init());
  int32_t cand;
  KP_TRY(linear_args(op, dtype, x, w, y, m, n, k, &cand));
  return be_launch(cand, op, dtype, x, w, y, m, n, k, stream);
}

typedef struct linear_call {
  int32_t cand, op, dtype, m;
  const void *x, *w;
  void *y;
  int64_t n, k;
  void *stream;
} linear_call;

static int enqueue_linear(void *ctx) {
  const linear_call *c = ctx;
  return be_launch(c->cand, c->op, c->dtype, c->x, c->w, c->y, c->m, c->n, c->k, c->stream);
}

int kpick_linear_graph(int32_t op, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n,
                       int64_t k, int32_t replays) {
  KP_TRY(kpick_init());
  KP_REQUIRE(replays >= 1 && replays <= 1000, "replays must be in 1..1000, got %d", (int)replays);
  int32_t cand;
  KP_TRY(linear_args(op, dtype, x, w, y, m, n, k, &cand));
  void *stream = NULL, *graph = NULL;
  KP_TRY(be_stream_create(&stream));
  linear_call c = {cand, op, dtype, m, x, w, y, n, k, stream};
  int st = be_graph_capture(stream, enqueue_linear, &c, sizeof c, &graph);
  for (int32_t i = 0; i < replays && st == KPICK_OK; i++) st = be_graph_launch(graph, stream);
  if (st == KPICK_OK) st = be_stream_sync(stream);
  if (graph) be_graph_free(graph);
  be_stream_destroy(stream);
  return st;
}

/* kpick_moe's checks: arguments, y against every input, the memory of each;
 * then the route's pick. */
static int moe_args(int32_t dtype, const void *x, const void *w_gate_up, const void *w_down, const int32_t *ids,
                    const float *weights, void *y, int32_t m, int32_t experts, int32_t topk, int64_t n, int64_t k,
                    int32_t *cand) {
  KP_ROUTE_DIMS(dtype, n, k, m);
  KP_MOE_ARGS(dtype, experts, topk);
  KP_REQUIRE(x != NULL && w_gate_up != NULL && w_down != NULL && ids != NULL && weights != NULL && y != NULL,
             "x, w_gate_up, w_down, ids, weights and y must not be null");
  KP_REQUIRE(n * k <= (1LL << 34) / 3 / experts, "%d experts of 3 x %lld x %lld elements are too large", (int)experts,
             (long long)n, (long long)k);
  /* x and y are 16-bit for every dtype; fp8 weights are codes and scales */
  const size_t x_bytes = (size_t)m * (size_t)k * 2, y_bytes = x_bytes;
  const size_t gu_bytes = (size_t)kp_moe_gate_up_bytes(dtype, experts, n, k);
  const size_t dn_bytes = (size_t)kp_moe_down_bytes(dtype, experts, n, k);
  const size_t route_bytes = (size_t)m * (size_t)topk * 4;
  KP_REQUIRE(!overlaps(y, y_bytes, x, x_bytes) && !overlaps(y, y_bytes, w_gate_up, gu_bytes) &&
                 !overlaps(y, y_bytes, w_down, dn_bytes) && !overlaps(y, y_bytes, ids, route_bytes) &&
                 !overlaps(y, y_bytes, weights, route_bytes),
             "y must not overlap an input");
  KP_TRY(kp_check_memory("x", x, (int64_t)x_bytes));
  KP_TRY(kp_check_memory("w_gate_up", w_gate_up, (int64_t)gu_bytes));
  KP_TRY(kp_check_memory("w_down", w_down, (int64_t)dn_bytes));
  KP_TRY(kp_check_memory("ids", ids, (int64_t)route_bytes));
  KP_TRY(kp_check_memory("weights", weights, (int64_t)route_bytes));
  KP_TRY(kp_check_memory("y", y, (int64_t)y_bytes));
  return lookup((route_key){KPICK_OP_MOE, dtype, experts, topk, n, k, 0}, m, cand);
}

int kpick_moe(int32_t dtype, const void *x, const void *w_gate_up, const void *w_down, const int32_t *ids,
              const float *weights, void *y, int32_t m, int32_t experts, int32_t topk, int64_t n, int64_t k,
              void *stream) {
  KP_TRY(kpick_init());
  int32_t cand;
  KP_TRY(moe_args(dtype, x, w_gate_up, w_down, ids, weights, y, m, experts, topk, n, k, &cand));
  return be_launch_moe(cand, dtype, x, w_gate_up, w_down, ids, weights, y, m, experts, topk, n, k, stream);
}
