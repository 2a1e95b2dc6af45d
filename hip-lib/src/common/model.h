/* model.h: the decode model's state, shared by its files and no one else:
 *   model.c    dims, the arena's layout, memory, weights, create/free/reset
 *   step.c     the step: its ops in order, its graphs, step and time
 *   opcheck.c  each non-linear op of this backend against fp64
 *   forward.c  the whole step against an fp64 forward on the host
 *   check.c    the buffers of one fp64 check (check.h), for opcheck.c and forward.c
 * It sits above the backends (backend.h): a backend never includes it (what
 * the backends share with the model, the random values, is random.h). */
#ifndef KPICK_MODEL_H
#define KPICK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* head_dim limit: the attention kernel gives each thread pair of dims one lane. */
#define KP_MODEL_MAX_HEAD_DIM 512
#define KP_GRAPH_SLOTS 16

/* byte offsets into the arena; model.c's plan() fills them from the dims */
typedef struct layout {
  int64_t nqkv, qdim;         /* qkv width, q width */
  size_t gamma_attn, gamma_mlp, wqkv, wo, wgu, wdown, layer_bytes; /* inside one layer */
  size_t wrouter;             /* inside one layer, moe: [experts, hidden]; wgu and wdown then hold every expert's */
  size_t layers;              /* layer 0 */
  size_t kv, cache_bytes;     /* [layers][k, v] caches of cache_bytes each */
  size_t embed, lm_head, gamma_final;
  size_t resid, hbuf, qkv, attn, act, ybuf, logits, tokens, pos;
  size_t rlogits, ids, gates; /* moe: router logits [batch, E]; each layer's routing [layers][batch, topk] (int32, fp32) */
  size_t attn_scratch, attn_scratch_bytes, argmax_scratch, argmax_scratch_bytes; /* zeroed once; 0 bytes: none */
  size_t total;
} layout;

struct graph_slot {
  int32_t cands[KPICK_LIN_COUNT];
  int32_t m;
  void *graph;
};

struct kpick_model {
  kpick_model_dims d;
  layout L;
  int32_t cap;          /* KV positions: context + max_new */
  char *arena;
  void *stream;
  int32_t steps;        /* since the positions were last put back at context */
  int32_t *pos_host;    /* [max_batch], scratch for position uploads */
  struct graph_slot graphs[KP_GRAPH_SLOTS]; /* step.c's; model.c frees them */
  int32_t ngraphs, evict;
};

/* The dtype of everything but the linears' weights (activations, norms, caches,
 * the embedding): the model's, or bf16 for an fp8 model. */
static inline int32_t kp_act_dtype(int32_t dtype) { return dtype == KPICK_FP8 ? KPICK_BF16 : dtype; }
/* The dtype of one linear kind's weight: an fp8 model has its qkv, o, gate_up
 * and down in fp8 and keeps lm_head in bf16 (as fp8 checkpoints do, and a tied
 * one is the embedding table); a moe model's experts are fp8 too, its router
 * bf16 (as fp8 checkpoints keep it). */
static inline int32_t kp_kind_dtype(int32_t dtype, int32_t kind) {
  const int fp8_kind = kind == KPICK_LIN_QKV || kind == KPICK_LIN_O || kind == KPICK_LIN_GATE_UP ||
                       kind == KPICK_LIN_DOWN || kind == KPICK_LIN_EXPERTS;
  return dtype == KPICK_FP8 && fp8_kind ? KPICK_FP8 : kp_act_dtype(dtype);
}

/* Does the model run this linear kind? A moe model (experts > 0) runs the
 * router and the experts in place of gate_up and down; the cands[] entry of
 * a kind a model does not run is ignored. */
static inline int kp_kind_runs(const kpick_model_dims *d, int32_t kind) {
  if (kind == KPICK_LIN_GATE_UP || kind == KPICK_LIN_DOWN) return d->experts == 0;
  if (kind == KPICK_LIN_ROUTER || kind == KPICK_LIN_EXPERTS) return d->experts > 0;
  return 1;
}

/* 1 when md is a live model: a freed or foreign handle is an error, not a crash */
int kp_model_live(const kpick_model *md);
#define KP_MODEL(md) KP_REQUIRE((md) != NULL && kp_model_live(md), "not a live model handle")

/* positions back at context, steps at 0 */
int kp_model_set_positions(struct kpick_model *md);

static inline void *kp_at(const struct kpick_model *md, size_t offset) { return md->arena + offset; }
static inline void *kp_layer_at(const struct kpick_model *md, int32_t l, size_t offset) {
  return md->arena + md->L.layers + (size_t)l * md->L.layer_bytes + offset;
}
/* which: 0 the k cache, 1 the v cache */
static inline void *kp_cache_at(const struct kpick_model *md, int32_t l, int which) {
  return md->arena + md->L.kv + ((size_t)l * 2 + (size_t)which) * md->L.cache_bytes;
}
/* a region that may be empty: NULL then */
static inline void *kp_scratch_at(const struct kpick_model *md, size_t offset, size_t bytes) {
  return bytes ? md->arena + offset : NULL;
}

/* One step's arguments: the model, a candidate per linear kind, the rows. */
typedef struct step_args {
  struct kpick_model *md;
  int32_t cands[KPICK_LIN_COUNT];
  int32_t m;
} step_args;

/* batch and cands checked against md and the space, into a */
int kp_step_args(struct kpick_model *md, const int32_t *cands, int32_t batch, step_args *a);
/* one step through its graph (captured on first use), synchronised */
int kp_step_run(step_args *a);

#endif
