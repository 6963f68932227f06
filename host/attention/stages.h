/*
 * stages.h - the forward of one attention layer as a pipeline of stages:
 *   project q/k/v -> compress (Linformer) -> attend -> output.
 * A stage reads the layer's plan and weights, works in a workspace, and
 * records its commands on a timeline. A workspace may serve several layers in
 * turn (a model's layers run one after another), so it is apart from the
 * weights.
 */
#ifndef LF_STAGES_H
#define LF_STAGES_H

#include "launch.h"
#include "plan.h"

/* The device buffers of one layer's weights, by lf_weight_buf, and the
 * layerwise projection E = F [k, max_seq_len] when the plan shares one. */
typedef struct {
    cl_mem buf[LF_BUF_COUNT];
    cl_mem shared_e;
} lf_layer_weights;

/* Scratch buffers of forwards, each grown to the largest size asked for. */
typedef enum { LF_WS_QKV, LF_WS_COMPRESSED, LF_WS_INPUT_COMPRESSED, LF_WS_ATTENTION, LF_WS_SCORES, LF_WS_LENGTHS,
               LF_WS_ONES, LF_WS_ROW_SUMS, LF_WS_SLICES, LF_WS_COUNT } lf_ws_id;
typedef struct {
    cl_mem buf[LF_WS_COUNT];
    size_t cap[LF_WS_COUNT];
} lf_workspace;

size_t lf__workspace_bytes(const lf_workspace *ws);
void lf__workspace_release(lf_workspace *ws);

/* One forward of one layer. lengths: the host copy, [batch], all in [0, n]. */
typedef struct {
    lf_context *ctx;
    const lf_plan *plan;
    const lf_layer_weights *w;
    lf_workspace *ws;
    lf_timeline *tl;
    int batch, n;
    const int32_t *lengths;
    bool lengths_ready; /* the caller has put lengths into the workspace (a model, once per forward) */
} lf_pass;

/* The shape of a forward, checked before any work: batch and n positive,
 * n <= max_seq_len (`limit` names that bound in the message), batch x n
 * within int indexing, and lengths (NULL = all n) in [0, n]. */
lf_status lf__check_batch(lf_context *ctx, int batch, int n, int max_seq_len, const char *limit,
                          const int32_t *lengths);

/* y = attention(x) + beta y, x and y [batch, n, d_model] on the device; rows
 * past each length 0. y may be x: the last stage reads only the heads' output.
 * With beta 1 a model adds the attention into its residual stream in the
 * output GEMM itself, without a pass that zeroes y first (the host BLAS's
 * beta-0 GEMMs do one) or a second buffer to add from. */
lf_status lf__attention_pass(const lf_pass *p, cl_mem x, cl_mem y, float beta);

/* The first three stages: the heads' outputs O [batch, n, heads d_head], before
 * W_O, in ws->buf[LF_WS_ATTENTION]. */
lf_status lf__attention_heads(const lf_pass *p, cl_mem x);

/* The exact attention probabilities of one head over one sequence (batch 1),
 * P = softmax(scale q k^T) [n, n] (causal when the plan is), in
 * ws->buf[LF_WS_SCORES], whatever the plan's mode. */
lf_status lf__attention_probabilities(const lf_pass *p, cl_mem x, int head);

/* Bytes of one head's score block that dense attention may hold, leaving as
 * much again for the padded copy CLBlast may make of it. */
size_t lf__scores_budget(const lf_device_info *device);

#endif
