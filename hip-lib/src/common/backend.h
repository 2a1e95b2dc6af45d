/* backend.h: what a backend (src/cpu or src/gpu) gives the common ABI layer.
 * abi.c validates every argument before calling these; a hook may assume a
 * live problem, an id below KP_NCAND and sizes that match the problem. */
#ifndef KPICK_BACKEND_H
#define KPICK_BACKEND_H

#include "../../include/kpick.h"
#include "problem.h"

#ifdef __cplusplus
extern "C" {
#endif

int be_init(void);
/* every field but space, abi and compiler (the ABI layer fills those) */
int be_info(kpick_info *out);
int be_mem(int64_t *free_bytes, int64_t *total_bytes);
/* 1 when the candidate was built for this target and can run here */
int be_available(int32_t cand);
/* 1 when the candidate can run this problem (shape alignment etc.) */
int be_supports(const struct kpick_problem *p, int32_t cand);
/* allocate state for m_max rows (p->m == p->m_max here), upload p->x_host and
 * p->copies copies of p->w_host; later calls use the active rows p->m */
int be_problem_init(struct kpick_problem *p);
void be_problem_free(struct kpick_problem *p);
int be_poison(struct kpick_problem *p);
int be_run(struct kpick_problem *p, int32_t cand, int32_t copy);
int be_time(struct kpick_problem *p, int32_t cand, int32_t nsamples, double *us);
int be_time_floor(struct kpick_problem *p, int32_t nsamples, double *us);
int be_count_nodes(struct kpick_problem *p, int32_t cand, int32_t *out);
int be_download_y(const struct kpick_problem *p, void *dst);
/* One call of cand on caller-owned device pointers, enqueued on stream (NULL:
 * the default stream; the CPU ignores it and returns when y is complete).
 * This is what kpick_linear dispatches to; be_run is this on p's buffers. */
int be_launch(int32_t cand, int32_t op, int32_t dtype, const void *x, const void *w, void *y,
              int32_t m, int64_t n, int64_t k, void *stream);
/* One call of a moe candidate (kpick.h, KPICK_OP_MOE) on caller memory, as
 * kpick_moe dispatches it. A backend without moe candidates returns
 * KPICK_E_UNSUPPORTED; the CPU refuses ids outside 0..experts-1 itself. */
int be_launch_moe(int32_t cand, int32_t dtype, const void *x, const void *w_gate_up, const void *w_down,
                  const int32_t *ids, const float *weights, void *y, int32_t m, int32_t experts, int32_t topk,
                  int64_t n, int64_t k, void *stream);

/* *is_device = 1 when the kernels may read and write memory at p (GPU:
 * device or managed memory, by the runtime's pointer attributes; CPU: any). */
int be_device_memory(const void *p, int *is_device);

/* ---- the decode step (common/model.h lists its files): device memory, the
 * non-linear ops and graphs. Pointers are device pointers (host pointers on
 * the CPU); each op is enqueued on stream (the CPU ignores it and returns when
 * done). The model validates every size before calling; the ops assume rows
 * 0..m-1 are live.
 * Tensors: residual fp32 [m, hidden]; every other activation the dtype;
 * qkv [m, (heads + 2 kv_heads) head_dim] (q heads, then k heads, then v heads);
 * a layer's k and v caches [max_batch][kv_heads][cap][head_dim]; pos[m] int32,
 * the position the step's token takes. ---- */
int be_dev_alloc(void **out, size_t bytes);
void be_dev_free(void *ptr);
/* synchronous copies between host and device (after the stream's work) */
int be_dev_upload(void *dst, const void *src, size_t bytes);
int be_dev_download(void *dst, const void *src, size_t bytes);
int be_stream_create(void **out); /* the CPU gives NULL */
void be_stream_destroy(void *stream);
int be_stream_sync(void *stream);
/* dst[i] = offset + scale * u(seed, i), u of kp_uniform (random.h): the same
 * values on every backend */
int be_fill_uniform(void *dst, int64_t count, int32_t dtype, uint64_t seed, float offset, float scale,
                    void *stream);
/* residual += y (y NULL: nothing added), then out = rmsnorm(residual) * gamma */
int be_add_rmsnorm(int32_t dtype, float *residual, const void *y, const void *gamma, void *out, int32_t m,
                   int64_t hidden, float eps, void *stream);
/* out[m, heads head_dim]: each row's new token attended, rotary embedding and
 * KV append included. The q heads and the new k head of qkv are rotated
 * (rotate-half pairs i, i + head_dim/2, angle pos * theta^(-2i/head_dim)) and
 * rounded to the dtype, the rotated k and the v written to the caches at pos;
 * q head h then attends to kv head h / (heads / kv_heads) over cache positions
 * 0..pos, scaled by 1/sqrt(head_dim). qkv is not written. scratch: device
 * memory of be_attention_scratch bytes (at these sizes, or more), zero before
 * the first call and left so; NULL (allowed always) keeps each row in one block. */
int be_attention(int32_t dtype, const void *qkv, const int32_t *pos, void *kcache, void *vcache, void *out,
                 int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap, float theta,
                 void *scratch, void *stream);
/* bytes of scratch be_attention uses at m rows; 0: it uses none */
int64_t be_attention_scratch(int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap);
/* The routing of m rows from their router logits [m, experts] (dtype): each
 * row's topk largest (the lower id first on ties; NaN never picked) into ids
 * [m, topk], largest first, and their softmax over those topk into weights
 * [m, topk] (fp32): softmax over all experts, top-k, renormalised. A backend
 * without moe candidates returns KPICK_E_UNSUPPORTED. */
int be_moe_route(int32_t dtype, const void *logits, int32_t m, int32_t experts, int32_t topk, int32_t *ids,
                 float *weights, void *stream);
/* tokens[r] = argmax of logits row r (lowest index on ties; NaN never wins),
 * then pos[r] += 1. scratch as be_attention's, of be_argmax_scratch bytes. */
int be_argmax_advance(int32_t dtype, const void *logits, int32_t m, int64_t vocab, int32_t *tokens, int32_t *pos,
                      void *scratch, void *stream);
int64_t be_argmax_scratch(int32_t m, int64_t vocab);
/* residual[r] = table row tokens[r] (tokens outside 0..vocab-1 give row 0) */
int be_embed(int32_t dtype, const void *table, const int32_t *tokens, float *residual, int32_t m,
             int64_t hidden, int64_t vocab, void *stream);
/* What enqueue(ctx) puts on stream, as a graph to launch again and again: the
 * GPU captures and instantiates it; the CPU keeps enqueue and a copy of the
 * ctx_bytes at ctx, and calls it at every launch. */
int be_graph_capture(void *stream, int (*enqueue)(void *ctx), const void *ctx, size_t ctx_bytes, void **graph_out);
int be_graph_launch(void *graph, void *stream);
/* launches the graph n times back to back; us[i] = the i-th launch's time
 * (GPU: events between launches; CPU: the clock around each) */
int be_graph_time(void *graph, void *stream, int32_t n, double *us);
void be_graph_free(void *graph);

#ifdef __cplusplus
}
#endif
#endif
