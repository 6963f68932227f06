/*
 * model_forward.c - one forward of a model, all on the device:
 *   in -> X (x copied, or token + positional embeddings) [-> LayerNorm]
 *   per layer, pre-norm:  H = LN1(X); X += attn(H); H = LN2(X);
 *                         X += act(H W1^T + b1) W2^T + b2
 *              post-norm: X += attn(X); X = LN1(X); X += act(X W1^T + b1) W2^T + b2;
 *                         X = LN2(X)
 *   Each += is the last GEMM's own (beta 1): no second buffer to add from, and
 *   no pass of the host BLAS zeroing its output first.
 *   [-> LayerNorm] -> y = X, or logits = X Wh^T + bh (fairseq's masked-LM head first
 *   makes X = LN(act(X Wd^T + bd))); rows past each length 0.
 * A reversible stack (lucidrains) runs pre-norm on two streams, X1 = X and X2,
 * both the input: X1 += attn(LN1(X2)), X2 += ffn(LN2(X1)); X = X1 + X2 at the end.
 * Every layer's attention runs in the model's one workspace; the lengths are
 * uploaded once for all of them. A forward may instead stop where layer i's
 * attention reads its input (lf_model_layer_input, for measuring that layer).
 */
#include <stdlib.h>

#include "blas.h"
#include "model.h"

typedef struct {
    lf_model *m;
    int batch, n;
    size_t rows;
    const int32_t *lengths; /* host copy, every entry set */
} lf_run;

static cl_mem act(const lf_run *r, lf_act_buf b) { return r->m->act[b]; }

static lf_status layernorm(const lf_run *r, cl_mem x, cl_mem res, cl_mem out, cl_mem g, cl_mem b, bool write_sum)
{
    const lf_layernorm_args a = {.x = x, .r = res, .out = out, .gamma = g, .beta = b, .d = r->m->cfg.info.d_model,
                                 .rows = (int)r->rows, .eps = r->m->cfg.eps, .has_r = res != NULL,
                                 .write_sum = write_sum, .params = &r->m->params};
    return lf__launch_layernorm(r->m->ctx, &a, &r->m->tl);
}

/* out += act(in W1^T + b1) W2^T + b2; out may be in (the first GEMM has read
 * it when the second writes). */
static lf_status feed_forward(const lf_run *r, const lf_model_layer *L, cl_mem in, cl_mem out)
{
    lf_model *m = r->m;
    const lf_model_spec *c = &m->cfg;
    const size_t D = c->info.d_model, F = c->info.d_ff, F2 = F * (c->info.glu ? 2 : 1);
    lf_gemm_args g1 = {.trans_b = true, .m = r->rows, .n = F2, .k = D, .alpha = 1.0f, .a = in, .lda = D,
                       .b = L->t[LF_L_W1], .ldb = D, .c = act(r, LF_A_FF), .ldc = F2, .seq_rows = r->n,
                       .seq_lengths = r->lengths, .what = "gemm ffn1"};
    LF_TRY(lf__gemm(m->ctx, &g1, &m->tl));
    const lf_bias_act_args ba = {.y = act(r, LF_A_FF), .ld = (int)F2, .cols = (int)F, .rows = (int)r->rows,
                                 .bias = L->t[LF_L_B1], .has_bias = c->bias_ff1, .glu = c->info.glu,
                                 .act = c->info.activation, .params = &m->params};
    LF_TRY(lf__launch_bias_act(m->ctx, &ba, &m->tl));
    lf_gemm_args g2 = {.trans_b = true, .m = r->rows, .n = D, .k = F, .alpha = 1.0f, .beta = 1.0f,
                       .a = act(r, LF_A_FF), .lda = F2, .b = L->t[LF_L_W2], .ldb = F, .c = out, .ldc = D,
                       .seq_rows = r->n, .seq_lengths = r->lengths, .what = "gemm ffn2"};
    LF_TRY(lf__gemm(m->ctx, &g2, &m->tl));
    const lf_bias_rows_args b2 = {.y = out, .ld = (int)D, .cols = (int)D, .rows = (int)r->rows,
                                  .bias = L->t[LF_L_B2], .has_bias = c->bias_ff2, .params = &m->params};
    return lf__launch_bias_rows(m->ctx, &b2, &m->tl);
}

/* out += attention(in); rows past each length 0. */
static lf_status add_attention(const lf_run *r, const lf_model_layer *L, cl_mem in, cl_mem out)
{
    const lf_pass p = {.ctx = r->m->ctx, .plan = &L->plan, .w = &L->w, .ws = &r->m->ws, .tl = &r->m->tl,
                       .batch = r->batch, .n = r->n, .lengths = r->lengths, .lengths_ready = true};
    return lf__attention_pass(&p, in, out, 1.0f);
}

/* The stream the attention reads and the feed-forward adds into: X, or a
 * reversible stack's X2 (its attention adds into X1 = X). */
static cl_mem second_stream(const lf_run *r) { return act(r, r->m->cfg.reversible ? LF_A_X2 : LF_A_X); }

/* What the layer's attention reads: LN1(X) in H (pre-norm), or X itself (post-norm). */
static lf_status attention_input(const lf_run *r, const lf_model_layer *L, cl_mem *in)
{
    *in = second_stream(r);
    if (r->m->cfg.info.norm != LF_NORM_PRE) return LF_OK;
    *in = act(r, LF_A_H);
    return layernorm(r, second_stream(r), NULL, *in, L->t[LF_L_LN1_G], L->t[LF_L_LN1_B], false);
}

static lf_status layer_forward(const lf_run *r, const lf_model_layer *L)
{
    cl_mem X = act(r, LF_A_X), H = act(r, LF_A_H), in;
    const cl_mem *t = L->t;
    LF_TRY(attention_input(r, L, &in));
    LF_TRY(add_attention(r, L, in, X));
    if (r->m->cfg.info.norm == LF_NORM_PRE) {
        LF_TRY(layernorm(r, X, NULL, H, t[LF_L_LN2_G], t[LF_L_LN2_B], false));
        return feed_forward(r, L, H, second_stream(r));
    }
    LF_TRY(layernorm(r, X, NULL, X, t[LF_L_LN1_G], t[LF_L_LN1_B], false));
    LF_TRY(feed_forward(r, L, X, X));
    return layernorm(r, X, NULL, X, t[LF_L_LN2_G], t[LF_L_LN2_B], false);
}

static lf_status copy(const lf_run *r, cl_mem from, cl_mem to, size_t bytes, const char *what)
{
    LF_CL_CHECK(r->m->ctx, clEnqueueCopyBuffer(r->m->ctx->queue, from, to, 0, 0, bytes, 0, NULL, lf__event(&r->m->tl)),
                "clEnqueueCopyBuffer");
    lf__event_work(&r->m->tl, 0, 2.0 * (double)bytes);
    lf__event_done(&r->m->tl, what);
    return LF_OK;
}

/* X from the input: a copy of x, or the embeddings of the tokens. */
static lf_status input(const lf_run *r, cl_mem in)
{
    lf_model *m = r->m;
    const lf_model_spec *c = &m->cfg;
    const size_t D = c->info.d_model;
    if (c->info.kind == LF_MODEL_ENCODER) LF_TRY(copy(r, in, act(r, LF_A_X), r->rows * D * sizeof(float), "copy"));
    else {
        const lf_embed_args e = {.tokens = in, .tok = m->m[LF_M_TOK], .pos = m->m[LF_M_POS], .pos_offset = c->pos_offset,
                                 .scale = c->embed_scale, .out = act(r, LF_A_X), .d = (int)D, .n = r->n,
                                 .batch = r->batch, .lengths = m->ws.buf[LF_WS_LENGTHS]};
        LF_TRY(lf__launch_embed(m->ctx, &e, &m->tl));
    }
    if (c->emb_norm) LF_TRY(layernorm(r, act(r, LF_A_X), NULL, act(r, LF_A_X), m->m[LF_M_EMB_G], m->m[LF_M_EMB_B], false));
    return c->reversible ? copy(r, act(r, LF_A_X), act(r, LF_A_X2), r->rows * D * sizeof(float), "copy") : LF_OK;
}

/* A reversible stack's X = X1 + X2, through the LayerNorm kernel's fused
 * residual add (its normalised output in H is not used). */
static lf_status join_streams(const lf_run *r)
{
    const lf_model_layer *L = &r->m->layer[0];
    return layernorm(r, act(r, LF_A_X), act(r, LF_A_X2), act(r, LF_A_H), L->t[LF_L_LN1_G], L->t[LF_L_LN1_B], true);
}

/* fairseq's masked-LM head before its logits: *X becomes H = LN(act(X Wd^T + bd)). */
static lf_status head_transform(const lf_run *r, cl_mem *X)
{
    lf_model *m = r->m;
    const size_t D = m->cfg.info.d_model;
    cl_mem H = act(r, LF_A_H);
    lf_gemm_args g = {.trans_b = true, .m = r->rows, .n = D, .k = D, .alpha = 1.0f, .a = *X, .lda = D,
                      .b = m->m[LF_M_HEAD_DENSE_W], .ldb = D, .c = H, .ldc = D, .seq_rows = r->n,
                      .seq_lengths = r->lengths, .what = "gemm head"};
    LF_TRY(lf__gemm(m->ctx, &g, &m->tl));
    const lf_bias_act_args ba = {.y = H, .ld = (int)D, .cols = (int)D, .rows = (int)r->rows,
                                 .bias = m->m[LF_M_HEAD_DENSE_B], .has_bias = 1, .act = m->cfg.info.activation,
                                 .params = &m->params};
    LF_TRY(lf__launch_bias_act(m->ctx, &ba, &m->tl));
    *X = H;
    return layernorm(r, H, NULL, H, m->m[LF_M_HEAD_LN_G], m->m[LF_M_HEAD_LN_B], false);
}

/* y = X, or the logits; rows past each length 0. */
static lf_status output(const lf_run *r, cl_mem y)
{
    lf_model *m = r->m;
    const lf_model_spec *c = &m->cfg;
    const size_t D = c->info.d_model, V = c->info.vocab;
    cl_mem X = act(r, LF_A_X);
    if (c->reversible) LF_TRY(join_streams(r));
    if (c->final_norm) LF_TRY(layernorm(r, X, NULL, X, m->m[LF_M_FINAL_G], m->m[LF_M_FINAL_B], false));
    const bool lm = c->info.kind == LF_MODEL_LM;
    const size_t width = lm ? V : D;
    if (lm && c->head_dense) LF_TRY(head_transform(r, &X));
    if (lm) {
        lf_gemm_args g = {.trans_b = true, .m = r->rows, .n = V, .k = D, .alpha = 1.0f, .a = X, .lda = D,
                          .b = m->m[LF_M_HEAD_W], .ldb = D, .c = y, .ldc = V, .seq_rows = r->n,
                          .seq_lengths = r->lengths, .what = "gemm logits"};
        LF_TRY(lf__gemm(m->ctx, &g, &m->tl));
    }
    const lf_bias_rows_args b = {.y = lm ? y : X, .ld = (int)width, .cols = (int)width, .rows = (int)r->rows,
                                 .bias = m->m[LF_M_HEAD_B], .has_bias = lm && c->head_bias,
                                 .lengths = m->ws.buf[LF_WS_LENGTHS], .rows_per_seq = r->n, .mask = true,
                                 .params = &m->params};
    LF_TRY(lf__launch_bias_rows(m->ctx, &b, &m->tl));
    return lm ? LF_OK : copy(r, X, y, r->rows * D * sizeof(float), "copy");
}

/* out = layer L's attention input; rows past each length 0. */
static lf_status layer_input(const lf_run *r, const lf_model_layer *L, cl_mem out)
{
    const int D = r->m->cfg.info.d_model;
    cl_mem in;
    LF_TRY(attention_input(r, L, &in));
    LF_TRY(copy(r, in, out, r->rows * D * sizeof(float), "copy"));
    const lf_bias_rows_args b = {.y = out, .ld = D, .cols = D, .rows = (int)r->rows,
                                 .lengths = r->m->ws.buf[LF_WS_LENGTHS], .rows_per_seq = r->n, .mask = true,
                                 .params = &r->m->params};
    return lf__launch_bias_rows(r->m->ctx, &b, &r->m->tl);
}

/* Grows the activations to this batch x n and puts the lengths on the device. */
static lf_status prepare(const lf_run *r)
{
    lf_model *m = r->m;
    const lf_model_spec *c = &m->cfg;
    const size_t X = r->rows * c->info.d_model * sizeof(float);
    const size_t FF = r->rows * c->info.d_ff * (c->info.glu ? 2 : 1) * sizeof(float);
    LF_TRY(lf__reserve(m->ctx, &m->act[LF_A_X], &m->act_cap[LF_A_X], X, "activations X"));
    LF_TRY(lf__reserve(m->ctx, &m->act[LF_A_H], &m->act_cap[LF_A_H], X, "activations H"));
    LF_TRY(lf__reserve(m->ctx, &m->act[LF_A_FF], &m->act_cap[LF_A_FF], FF, "activations of the feed-forward"));
    if (c->reversible) LF_TRY(lf__reserve(m->ctx, &m->act[LF_A_X2], &m->act_cap[LF_A_X2], X, "activations X2"));
    const size_t lens = (size_t)r->batch * sizeof(int32_t);
    LF_TRY(lf__reserve(m->ctx, &m->ws.buf[LF_WS_LENGTHS], &m->ws.cap[LF_WS_LENGTHS], lens, "lengths"));
    return lf__upload(m->ctx, m->ws.buf[LF_WS_LENGTHS], 0, r->lengths, lens);
}

/* The forward into y; with stop < layers, it ends at layer `stop` and y is
 * that layer's attention input [batch, n, d_model]. */
static lf_status run(lf_model *m, cl_mem in, cl_mem y, int batch, int n, const int32_t *lengths, int stop)
{
    int32_t *lens = malloc(batch * sizeof *lens);
    if (!lens) return lf__fail(m->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for lengths");
    for (int b = 0; b < batch; b++) lens[b] = lengths ? lengths[b] : n;
    const lf_run r = {m, batch, n, (size_t)batch * n, lens};
    lf__timeline_reset(&m->tl);
    /* A marker opens the timeline: CLBlast's event covers only its last kernel. */
    lf_status st = LF_OK;
    cl_int err = clEnqueueMarkerWithWaitList(m->ctx->queue, 0, NULL, lf__event(&m->tl));
    if (err != CL_SUCCESS) st = lf__cl_fail(m->ctx, err, "clEnqueueMarkerWithWaitList");
    lf__event_done(&m->tl, NULL);
    if (st == LF_OK) st = prepare(&r);
    if (st == LF_OK) st = input(&r, in);
    for (int i = 0; st == LF_OK && i < stop; i++) st = layer_forward(&r, &m->layer[i]);
    if (st == LF_OK) st = stop < m->cfg.info.layers ? layer_input(&r, &m->layer[stop], y) : output(&r, y);
    free(lens);
    return st;
}

/* ---- The public forwards ---- */

static lf_status check_forward(lf_model *m, int batch, int n, const int32_t *lengths)
{
    LF_TRY(lf__check_batch(m->ctx, batch, n, m->cfg.info.max_seq_len, "the model's max_seq_len", lengths));
    return lf__model_check_set(m);
}

/* Token ids inside the lengths must be in [0, vocab): found here, before any upload. */
static lf_status check_tokens(lf_model *m, const int64_t *tokens, int batch, int n, const int32_t *lengths)
{
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < (lengths ? lengths[b] : n); i++) {
            const int64_t t = tokens[(size_t)b * n + i];
            if (t < 0 || t >= m->cfg.info.vocab)
                return lf__fail(m->ctx, LF_ERR_ARGUMENT, "tokens[%d, %d] = %lld is outside the vocabulary [0, %d)", b,
                                i, (long long)t, m->cfg.info.vocab);
        }
    return LF_OK;
}

static size_t in_bytes(const lf_model *m, int batch, int n)
{
    return (size_t)batch * n * (m->cfg.info.kind == LF_MODEL_ENCODER ? m->cfg.info.d_model * sizeof(float) : sizeof(int64_t));
}

/* Bytes of what a run up to `stop` gives: y or logits, or a layer's input. */
static size_t out_bytes(const lf_model *m, int batch, int n, int stop)
{
    const lf_model_info *i = &m->cfg.info;
    const bool logits = i->kind == LF_MODEL_LM && stop == i->layers;
    return (size_t)batch * n * (logits ? i->vocab : i->d_model) * sizeof(float);
}

/* A forward on host arrays up to `stop` (layers = the whole model); `out`
 * names the output in messages. */
static lf_status forward_host(lf_model *m, const float *x, const int64_t *tokens, float *y, const char *out,
                              int batch, int n, const int32_t *lengths, int stop)
{
    const bool want_x = m->cfg.info.kind == LF_MODEL_ENCODER;
    if (want_x ? !x || tokens : !tokens || x)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "this %s takes %s (and the other NULL)",
                        lf_model_kind_name(m->cfg.info.kind), want_x ? "x" : "tokens");
    if (!y) return lf__fail(m->ctx, LF_ERR_ARGUMENT, "%s is NULL", out);
    LF_TRY(lf__context_lock(m->ctx));
    lf_status st = check_forward(m, batch, n, lengths);
    if (st == LF_OK && !want_x) st = check_tokens(m, tokens, batch, n, lengths);
    const size_t ib = in_bytes(m, batch, n), ob = out_bytes(m, batch, n, stop);
    if (st == LF_OK) st = lf__reserve(m->ctx, &m->act[LF_A_IN], &m->act_cap[LF_A_IN], ib, "input");
    if (st == LF_OK) st = lf__reserve(m->ctx, &m->act[LF_A_OUT], &m->act_cap[LF_A_OUT], ob, "output");
    if (st == LF_OK) st = lf__upload(m->ctx, m->act[LF_A_IN], 0, want_x ? (const void *)x : (const void *)tokens, ib);
    if (st == LF_OK) st = run(m, m->act[LF_A_IN], m->act[LF_A_OUT], batch, n, lengths, stop);
    if (st == LF_OK) st = lf__download(m->ctx, m->act[LF_A_OUT], 0, y, ob);
    lf__context_unlock(m->ctx);
    return st;
}

lf_status lf_model_forward(lf_model *model, const float *x, const int64_t *tokens, float *y, int batch, int n,
                           const int32_t *lengths)
{
    if (!model) return LF_ERR_ARGUMENT;
    return forward_host(model, x, tokens, y, "y", batch, n, lengths, model->cfg.info.layers);
}

lf_status lf_model_layer_input(lf_model *model, int layer, const float *x, const int64_t *tokens, float *out,
                               int batch, int n, const int32_t *lengths)
{
    if (!model) return LF_ERR_ARGUMENT;
    if (layer < 0 || layer >= model->cfg.info.layers)
        return lf__fail(model->ctx, LF_ERR_ARGUMENT, "layer %d is outside [0, %d)", layer, model->cfg.info.layers);
    return forward_host(model, x, tokens, out, "out", batch, n, lengths, layer);
}

/* Token ids in a device buffer are read back and checked: the embedding
 * kernel indexes with them. */
static lf_status check_device_tokens(lf_model *m, cl_mem in, int batch, int n, const int32_t *lengths)
{
    int64_t *tokens = malloc(in_bytes(m, batch, n));
    if (!tokens) return lf__fail(m->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for the tokens");
    lf_status st = lf__download(m->ctx, in, 0, tokens, in_bytes(m, batch, n));
    if (st == LF_OK) st = check_tokens(m, tokens, batch, n, lengths);
    free(tokens);
    return st;
}

lf_status lf_model_forward_cl(lf_model *model, cl_mem in, cl_mem y, int batch, int n, const int32_t *lengths)
{
    if (!model) return LF_ERR_ARGUMENT;
    lf_model *m = model;
    LF_TRY(lf__context_lock(m->ctx));
    lf_status st = check_forward(m, batch, n, lengths);
    if (st == LF_OK)
        st = lf__check_io_buffers(m->ctx, in, in_bytes(m, batch, n), "in", y, out_bytes(m, batch, n, m->cfg.info.layers),
                                  "y");
    if (st == LF_OK && m->cfg.info.kind != LF_MODEL_ENCODER) st = check_device_tokens(m, in, batch, n, lengths);
    if (st == LF_OK) st = run(m, in, y, batch, n, lengths, m->cfg.info.layers);
    lf__context_unlock(m->ctx);
    return st;
}
