/*
 * stages.c - one attention layer's forward, stage by stage (see stages.h):
 *   x [B,n,D] -> Q,K,V = x W^T + b (one GEMM over the fused weights)
 *   linformer: K~ = E K, V~ = F V per sequence (a GEMM per sequence, or
 *              seq_project.cl for pooling and convolution; padded rows never
 *              enter), or E x, F x first and then Wk, Wv (the plan's order:
 *              fairseq's meaning, or the cheaper one where both are exact)
 *   attend:    attention.cl tiled over keys (flash, fused Linformer), or scores
 *              through GEMMs and the masked softmax (dense, Linformer's GEMM path)
 *   -> y = O Wo^T + bo, rows past each length set to 0.
 */
#include "blas.h"
#include "stages.h"

static lf_status reserve(const lf_pass *p, lf_ws_id id, size_t bytes, const char *what)
{
    return lf__reserve(p->ctx, &p->ws->buf[id], &p->ws->cap[id], bytes, what);
}

static lf_status fill(const lf_pass *p, cl_mem buf, size_t offset, size_t floats, float value)
{
    LF_CL_CHECK(p->ctx, clEnqueueFillBuffer(p->ctx->queue, buf, &value, sizeof value, offset * sizeof(float),
                                            floats * sizeof(float), 0, NULL, lf__event(p->tl)),
                "clEnqueueFillBuffer");
    lf__event_work(p->tl, 0, 4.0 * (double)floats);
    lf__event_done(p->tl, "fill");
    return LF_OK;
}

size_t lf__workspace_bytes(const lf_workspace *ws)
{
    size_t sum = 0;
    for (int i = 0; i < LF_WS_COUNT; i++) sum += ws->cap[i];
    return sum;
}

void lf__workspace_release(lf_workspace *ws)
{
    for (int i = 0; i < LF_WS_COUNT; i++) {
        lf__release(&ws->buf[i]);
        ws->cap[i] = 0;
    }
}

lf_status lf__check_batch(lf_context *ctx, int batch, int n, int max_seq_len, const char *limit,
                          const int32_t *lengths)
{
    if (batch <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "batch must be positive, got %d", batch);
    if (n <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "n must be positive, got %d", n);
    if (n > max_seq_len) return lf__fail(ctx, LF_ERR_ARGUMENT, "n (%d) is beyond %s (%d)", n, limit, max_seq_len);
    if ((uint64_t)batch * (uint64_t)n > (1u << 30))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "batch x n (%d x %d) is too large", batch, n);
    for (int b = 0; lengths && b < batch; b++)
        if (lengths[b] < 0 || lengths[b] > n)
            return lf__fail(ctx, LF_ERR_ARGUMENT, "lengths[%d] = %d is outside [0, n = %d]", b, lengths[b], n);
    return LF_OK;
}

size_t lf__scores_budget(const lf_device_info *device)
{
    size_t budget = device->max_alloc_bytes;
    if (budget > device->global_mem_bytes / 2) budget = device->global_mem_bytes / 2;
    return budget / 2;
}

/* ---- Stage 1: Q, K, V = x W^T + b ---- */

/* The columns of the projected rows: Q|K|V, or only Q when the sequence
 * projection comes first and the sequence's own keys are not asked for. They
 * are also the rows' stride, so Q alone lies packed. */
static size_t projected_width(const lf_plan *pl, bool own_keys)
{
    return pl->input_side && !own_keys ? pl->qdim : pl->cols;
}

static lf_status project_qkv(const lf_pass *p, cl_mem x, bool own_keys)
{
    const lf_plan *pl = p->plan;
    const size_t rows = (size_t)p->batch * p->n, width = projected_width(pl, own_keys);
    LF_TRY(reserve(p, LF_WS_QKV, rows * width * sizeof(float), width == pl->cols ? "Q|K|V" : "Q"));
    cl_mem qkv = p->ws->buf[LF_WS_QKV];
    lf_gemm_args g = {.trans_b = true, .m = rows, .n = width, .k = pl->cfg.d_model, .alpha = 1.0f,
                      .a = x, .lda = pl->cfg.d_model, .b = p->w->buf[LF_BUF_QKV], .ldb = pl->cfg.d_model,
                      .c = qkv, .ldc = width, .seq_rows = p->n, .seq_lengths = p->lengths,
                      .what = width == pl->cols ? "gemm qkv" : "gemm q"};
    LF_TRY(lf__gemm(p->ctx, &g, p->tl));
    const lf_bias_rows_args b = {.y = qkv, .ld = (int)width, .cols = (int)width, .rows = (int)rows,
                                 .bias = p->w->buf[LF_BUF_B_QKV], .lengths = p->ws->buf[LF_WS_LENGTHS],
                                 .rows_per_seq = p->n,
                                 .has_bias = pl->cfg.bias_q || pl->cfg.bias_k || pl->cfg.bias_v,
                                 .params = &pl->params};
    return lf__launch_bias_rows(p->ctx, &b, p->tl);
}

/* ---- Stage 2: the sequence projection ---- */

/* What one sequence projection reads and writes: rows [batch, n, in_ld] with
 * group g (0: E, 1: F) at column g in_gstride, to rows [batch, k, out_ld] with
 * group g at column g cols; with per-head projections, head h = c / head_cols. */
typedef struct {
    cl_mem in;
    size_t in_off;
    int in_ld, in_gstride;
    cl_mem out;
    int out_ld, cols, head_cols, groups;
    const char *what; /* the stage's name in the profile */
} lf_compress_args;

/* Slices of one sequence's sum of `len` terms for a GEMM of `tiles` 32 x 32
 * output tiles (CLBlast's direct kernel's, bench/NOTES.md "GPU"): the
 * override's split, else 1 on a CPU device, else enough for four tiles a
 * compute unit, each slice of 256 terms or more, at most 16. */
static int slices_of(const lf_pass *p, size_t tiles, int len)
{
    const size_t want = 4 * (size_t)p->ctx->info.compute_units;
    int s = p->plan->params.split_sums;
    if (!s && p->ctx->info.type != LF_DEVICE_CPU && tiles < want) {
        s = (int)((want + tiles - 1) / tiles);
        if (s > len / 256) s = len / 256;
        if (s > 16) s = 16;
    }
    return s < 1 ? 1 : s > len ? len : s;
}

/* g, a GEMM of one sequence's E X into C (its k x ldc rows whole), in
 * `slices` slices of its inner dimension: each slice's GEMM into the
 * workspace, then C = ones^T [slices x k ldc], the slices added in order. */
static lf_status gemm_in_slices(const lf_pass *p, const lf_gemm_args *g, int slices)
{
    const size_t len = g->k, step = (len + (size_t)slices - 1) / (size_t)slices, part = g->m * g->ldc;
    const size_t count = (len + step - 1) / step; /* slices of step terms, the last one shorter */
    LF_TRY(reserve(p, LF_WS_SLICES, (count * part + count) * sizeof(float), "slices of E x"));
    cl_mem ws = p->ws->buf[LF_WS_SLICES];
    for (size_t i = 0; i < count; i++) {
        lf_gemm_args s = *g;
        s.k = i + 1 < count ? step : len - i * step;
        s.a_off = g->a_off + i * step;
        s.b_off = g->b_off + i * step * g->ldb;
        s.c = ws, s.c_off = i * part;
        LF_TRY(lf__gemm(p->ctx, &s, p->tl));
    }
    LF_TRY(fill(p, ws, count * part, count, 1.0f));
    const lf_gemm_args sum = {.m = 1, .n = part, .k = count, .alpha = 1.0f, .a = ws, .a_off = count * part,
                              .lda = count, .b = ws, .ldb = part, .c = g->c, .c_off = g->c_off, .ldc = part,
                              .what = "sum of slices"};
    return lf__gemm(p->ctx, &sum, p->tl);
}

/* A matrix projection: one GEMM per sequence whose inner dimension is that
 * sequence's length (strided-batched over groups and heads), or its slices. */
static lf_status compress_matrix(const lf_pass *p, const lf_compress_args *a, cl_mem e, size_t e_gstride)
{
    const lf_plan *pl = p->plan;
    const int k = pl->cfg.k;
    const size_t N = pl->cfg.max_seq_len;
    const bool per_head = pl->per_head_proj;
    const size_t width = per_head ? (size_t)a->head_cols : (size_t)a->cols;
    const size_t gemms = per_head ? (size_t)a->groups * pl->kvh : (size_t)a->groups;
    const size_t tiles = gemms * (((size_t)k + 31) / 32) * ((width + 31) / 32);
    for (int b = 0; b < p->batch; b++) {
        const size_t out_off = (size_t)b * k * a->out_ld;
        if (p->lengths[b] == 0) { /* the sum is empty: zero rows */
            LF_TRY(fill(p, a->out, out_off, (size_t)k * a->out_ld, 0.0f));
            continue;
        }
        lf_gemm_args g = {.m = k, .n = width, .k = p->lengths[b], .alpha = 1.0f,
                          .a = e, .lda = N, .a_stride = per_head ? k * N : e_gstride,
                          .b = a->in, .b_off = a->in_off + (size_t)b * p->n * a->in_ld, .ldb = a->in_ld,
                          .b_stride = per_head ? width : (size_t)a->in_gstride,
                          .c = a->out, .c_off = out_off, .ldc = a->out_ld, .c_stride = width,
                          .batch = gemms, .what = a->what};
        /* slices only where the GEMMs write every column of the output rows, which the sum then adds whole */
        const int slices = gemms * width == (size_t)a->out_ld ? slices_of(p, tiles, p->lengths[b]) : 1;
        LF_TRY(slices > 1 ? gemm_in_slices(p, &g, slices) : lf__gemm(p->ctx, &g, p->tl));
    }
    return LF_OK;
}

static lf_status compress(const lf_pass *p, const lf_compress_args *a)
{
    const lf_plan *pl = p->plan;
    const lf_attention_config *c = &pl->cfg;
    cl_mem e = c->sharing == LF_SHARE_LAYERWISE ? p->w->shared_e : p->w->buf[LF_BUF_PROJ];
    const size_t e_gstride = pl->f_separate ? pl->weights[LF_P_F].offset : 0;
    if (pl->matrix_proj) return compress_matrix(p, a, e, e_gstride);
    const lf_seq_project_window_args w = {
        .in = a->in, .in_off = a->in_off, .in_ld = a->in_ld, .in_gstride = a->in_gstride, .n = p->n,
        .out = a->out, .out_ld = a->out_ld, .weights = c->proj_kind == LF_PROJ_MAX_POOL ? NULL : e,
        .window = pl->window, .w_gstride = (int)e_gstride, .w_hstride = pl->per_head_proj ? pl->window : 0,
        .head_cols = a->head_cols, .lengths = p->ws->buf[LF_WS_LENGTHS], .cols = a->cols, .k = c->k,
        .groups = a->groups, .batch = p->batch, .max = c->proj_kind == LF_PROJ_MAX_POOL};
    return lf__launch_seq_project_window(p->ctx, &w, p->tl);
}

/* K~ += (E[:, :len] 1) bk^T, V~ += (F[:, :len] 1) bv^T: the biases through
 * the row sums of E over each sequence's own length (a GEMM with a ones vector). */
static lf_status bias_row_sums(const lf_pass *p, cl_mem comp, size_t comp_ld, int xgroups)
{
    const lf_plan *pl = p->plan;
    const size_t rows = (size_t)p->batch * pl->cfg.k, ones = (size_t)p->batch * p->n, kv = pl->kvdim;
    if (!pl->cfg.bias_k && !pl->cfg.bias_v) return LF_OK;
    LF_TRY(reserve(p, LF_WS_ONES, ones * sizeof(float), "ones"));
    LF_TRY(reserve(p, LF_WS_ROW_SUMS, rows * xgroups * sizeof(float), "row sums of E"));
    LF_TRY(fill(p, p->ws->buf[LF_WS_ONES], 0, ones, 1.0f));
    cl_mem sums = p->ws->buf[LF_WS_ROW_SUMS];
    const lf_compress_args a = {.in = p->ws->buf[LF_WS_ONES], .in_ld = 1, .out = sums, .out_ld = xgroups,
                                .cols = 1, .head_cols = 1, .groups = xgroups, .what = "row sums of E"};
    LF_TRY(compress(p, &a));
    for (int g = 0; g < pl->groups; g++) {
        if (!(g == 0 ? pl->cfg.bias_k : pl->cfg.bias_v)) continue;
        lf_gemm_args bg = {.m = rows, .n = kv, .k = 1, .alpha = 1.0f, .beta = 1.0f,
                           .a = sums, .a_off = xgroups == 2 ? g : 0, .lda = xgroups,
                           .b = p->w->buf[LF_BUF_B_QKV], .b_off = pl->qdim + g * kv, .ldb = kv,
                           .c = comp, .c_off = g * kv, .ldc = comp_ld, .seq_rows = pl->cfg.k,
                           .what = "bias kv (row sums)"};
        LF_TRY(lf__gemm(p->ctx, &bg, p->tl));
    }
    return LF_OK;
}

/* Input first: E x (and F x), then K~ = (E x) Wk^T, V~ = (F x) Wv^T, and the
 * biases either as they are (fairseq's meaning, LF_POSITION_INPUT) or through
 * E's row sums (the same result as projecting first, LF_POSITION_KV). */
static lf_status compress_input_side(const lf_pass *p, cl_mem x, cl_mem comp, size_t comp_ld)
{
    const lf_plan *pl = p->plan;
    const size_t D = pl->cfg.d_model, rows = (size_t)p->batch * pl->cfg.k, q = pl->qdim, kv = pl->kvdim;
    const int xgroups = pl->f_separate ? 2 : 1;
    const size_t xc_ld = xgroups * D;
    LF_TRY(reserve(p, LF_WS_INPUT_COMPRESSED, rows * xc_ld * sizeof(float), "E x|F x"));
    cl_mem xc = p->ws->buf[LF_WS_INPUT_COMPRESSED];
    const lf_compress_args a = {.in = x, .in_ld = (int)D, .out = xc, .out_ld = (int)xc_ld, .cols = (int)D,
                                .head_cols = (int)D, .groups = xgroups, .what = "seq_project, input first"};
    LF_TRY(compress(p, &a));
    for (int g = 0; g < pl->groups; g++) {
        lf_gemm_args kvg = {.trans_b = true, .m = rows, .n = kv, .k = D, .alpha = 1.0f,
                            .a = xc, .a_off = (xgroups == 2 ? g : 0) * D, .lda = xc_ld,
                            .b = p->w->buf[LF_BUF_QKV], .b_off = (q + g * kv) * D, .ldb = D,
                            .c = comp, .c_off = g * kv, .ldc = comp_ld, .seq_rows = pl->cfg.k,
                            .what = "gemm kv"};
        LF_TRY(lf__gemm(p->ctx, &kvg, p->tl));
    }
    if (pl->bias_row_sums) return bias_row_sums(p, comp, comp_ld, xgroups);
    const lf_bias_rows_args b = {.y = comp, .ld = (int)comp_ld, .cols = (int)comp_ld, .rows = (int)rows,
                                 .bias = p->w->buf[LF_BUF_B_QKV], .bias_off = q,
                                 .has_bias = pl->cfg.bias_k || pl->cfg.bias_v,
                                 .lengths = p->ws->buf[LF_WS_LENGTHS], .rows_per_seq = pl->cfg.k,
                                 .params = &pl->params};
    return lf__launch_bias_rows(p->ctx, &b, p->tl);
}

/* The sequence's own keys and values, in the fused Q|K|V rows. */
static void own_keys_values(const lf_pass *p, lf_view *keys, lf_view *values)
{
    const lf_plan *pl = p->plan;
    const size_t q = pl->qdim, kv = pl->kvdim, C = pl->cols, n = p->n;
    *keys = (lf_view){p->ws->buf[LF_WS_QKV], q, (int)C, n * C};
    *values = (lf_view){p->ws->buf[LF_WS_QKV], pl->cfg.share_kv ? q : q + kv, (int)C, n * C};
}

/* Keys and values for the attention step: the sequence's own (exact modes)
 * or the k compressed rows (Linformer). */
static lf_status keys_values(const lf_pass *p, cl_mem x, lf_view *keys, lf_view *values)
{
    const lf_plan *pl = p->plan;
    const size_t q = pl->qdim, kv = pl->kvdim, C = pl->cols, k = pl->cfg.k;
    const bool share = pl->cfg.share_kv;
    if (!pl->linformer) {
        own_keys_values(p, keys, values);
        return LF_OK;
    }
    const size_t comp_ld = pl->groups * kv;
    LF_TRY(reserve(p, LF_WS_COMPRESSED, p->batch * k * comp_ld * sizeof(float), "K~|V~"));
    cl_mem comp = p->ws->buf[LF_WS_COMPRESSED];
    if (pl->input_side) {
        LF_TRY(compress_input_side(p, x, comp, comp_ld));
    } else {
        const lf_compress_args a = {.in = p->ws->buf[LF_WS_QKV], .in_off = q, .in_ld = (int)C, .in_gstride = (int)kv,
                                    .out = comp, .out_ld = (int)comp_ld, .cols = (int)kv, .head_cols = pl->dh,
                                    .groups = pl->groups, .what = "seq_project"};
        LF_TRY(compress(p, &a));
    }
    *keys = (lf_view){comp, 0, (int)comp_ld, k * comp_ld};
    *values = (lf_view){comp, share ? 0 : kv, (int)comp_ld, k * comp_ld};
    return LF_OK;
}

/* ---- Stage 3: attention ---- */

static lf_status attend_tiled(const lf_pass *p, lf_view q, lf_view k, lf_view v, lf_view o, int key_count)
{
    const lf_plan *pl = p->plan;
    lf_view self_k = {0}, self_v = {0};
    if (pl->cfg.causal && key_count) own_keys_values(p, &self_k, &self_v);
    const lf_attention_tiled_args a = {.q = q, .k = k, .v = v, .o = o, .self_k = self_k, .self_v = self_v,
                                       .causal = pl->cfg.causal, .window = pl->window,
                                       .lengths = p->ws->buf[LF_WS_LENGTHS],
                                       .batch = p->batch, .n_rows = p->n, .key_count = key_count,
                                       .heads = pl->cfg.heads, .kv_heads = pl->kvh, .d_head = pl->dh,
                                       .scale = pl->cfg.scale, .tiles = pl->tiles};
    return lf__launch_attention_tiled(p->ctx, &a, p->tl);
}

/* Heads of one sequence at a time whose n x nk scores fit the budget together. */
static lf_status scores_chunk(const lf_pass *p, size_t nk, size_t *chunk)
{
    const size_t heads = p->plan->cfg.heads, per_head = (size_t)p->n * nk * sizeof(float);
    const size_t budget = lf__scores_budget(&p->ctx->info);
    if (per_head > budget)
        return lf__fail(p->ctx, LF_ERR_OUT_OF_MEMORY,
                        "%s attention needs a %d x %zu score matrix (%zu bytes) per head, and as much again for "
                        "its GEMM's temporary; the device allows %zu bytes for it",
                        lf_mode_name(p->plan->cfg.mode), p->n, nk, per_head, budget);
    *chunk = budget / per_head < heads ? budget / per_head : heads;
    return reserve(p, LF_WS_SCORES, *chunk * per_head, "attention scores");
}

/* Scores in memory: per sequence and chunk of heads, S = scale Q K^T [n, nk],
 * masked softmax, O = P V. key_count 0 = the sequence's own keys (dense). */
static lf_status attend_gemm(const lf_pass *p, lf_view q, lf_view k, lf_view v, lf_view o, int key_count)
{
    const lf_plan *pl = p->plan;
    const size_t dh = pl->dh, heads = pl->cfg.heads, n = p->n, nk = key_count ? (size_t)key_count : n;
    size_t chunk = 0;
    LF_TRY(scores_chunk(p, nk, &chunk));
    cl_mem scores = p->ws->buf[LF_WS_SCORES];
    const size_t kv_step = pl->kvh == 1 ? 0 : dh; /* one key/value head serves all queries */
    for (int b = 0; b < p->batch; b++) {
        const int len = p->lengths[b], keys_valid = key_count ? key_count : len;
        /* rows past the length are 0, never P V: 0 x NaN there would be NaN */
        if ((size_t)len < n) LF_TRY(fill(p, o.buf, o.off + b * o.bstride + len * o.ld, (n - len) * o.ld, 0.0f));
        if (len == 0) continue;
        for (size_t h0 = 0; h0 < heads; h0 += chunk) {
            const size_t hc = heads - h0 < chunk ? heads - h0 : chunk, kvh0 = pl->kvh == 1 ? 0 : h0;
            /* the valid queries and keys only: the GEMM a sequence alone of its length makes */
            lf_gemm_args s = {.trans_b = true, .m = (size_t)len, .n = (size_t)keys_valid, .k = dh,
                              .alpha = pl->cfg.scale,
                              .a = q.buf, .a_off = q.off + b * q.bstride + h0 * dh, .lda = q.ld, .a_stride = dh,
                              .b = k.buf, .b_off = k.off + b * k.bstride + kvh0 * dh, .ldb = k.ld,
                              .b_stride = kv_step, .c = scores, .ldc = nk, .c_stride = n * nk, .batch = hc,
                              .what = "gemm scores"};
            LF_TRY(lf__gemm(p->ctx, &s, p->tl));
            const lf_softmax_rows_args sm = {.scores = scores, .ld = (int)nk, .n_rows = (int)n, .rows_valid = len,
                                             .cols_valid = keys_valid, .causal = pl->cfg.causal, .count = hc,
                                             .params = &pl->params};
            LF_TRY(lf__launch_softmax_rows(p->ctx, &sm, p->tl));
            /* only the valid queries and keys: 0 x NaN in a padded value row would be NaN */
            lf_gemm_args pv = {.m = (size_t)len, .n = dh, .k = (size_t)keys_valid, .alpha = 1.0f,
                               .a = scores, .lda = nk, .a_stride = n * nk,
                               .b = v.buf, .b_off = v.off + b * v.bstride + kvh0 * dh, .ldb = v.ld,
                               .b_stride = kv_step, .c = o.buf, .c_off = o.off + b * o.bstride + h0 * dh,
                               .ldc = o.ld, .c_stride = dh, .batch = hc, .what = "gemm pv"};
            LF_TRY(lf__gemm(p->ctx, &pv, p->tl));
        }
    }
    return LF_OK;
}

/* ---- Stage 4: y = O Wo^T + bo + beta y, rows past each length 0 ---- */

static lf_status output(const lf_pass *p, cl_mem y, float beta)
{
    const lf_plan *pl = p->plan;
    const size_t rows = (size_t)p->batch * p->n, D = pl->cfg.d_model;
    lf_gemm_args g = {.trans_b = true, .m = rows, .n = D, .k = pl->qdim, .alpha = 1.0f,
                      .a = p->ws->buf[LF_WS_ATTENTION], .lda = pl->qdim, .b = p->w->buf[LF_BUF_O], .ldb = pl->qdim,
                      .beta = beta, .c = y, .ldc = D, .seq_rows = p->n, .seq_lengths = p->lengths,
                      .what = "gemm out"};
    LF_TRY(lf__gemm(p->ctx, &g, p->tl));
    const lf_bias_rows_args b = {.y = y, .ld = (int)D, .cols = (int)D, .rows = (int)rows,
                                 .bias = p->w->buf[LF_BUF_B_O], .has_bias = pl->cfg.bias_out,
                                 .lengths = p->ws->buf[LF_WS_LENGTHS], .rows_per_seq = p->n, .mask = true,
                                 .params = &pl->params};
    return lf__launch_bias_rows(p->ctx, &b, p->tl);
}

/* ---- The pipeline ---- */

static lf_status prepare(const lf_pass *p)
{
    const lf_plan *pl = p->plan;
    const size_t rows = (size_t)p->batch * p->n, lens_bytes = (size_t)p->batch * sizeof(int32_t);
    LF_TRY(reserve(p, LF_WS_LENGTHS, lens_bytes, "lengths"));
    if (!p->lengths_ready) LF_TRY(lf__upload(p->ctx, p->ws->buf[LF_WS_LENGTHS], 0, p->lengths, lens_bytes));
    return reserve(p, LF_WS_ATTENTION, rows * pl->qdim * sizeof(float), "attention output");
}

lf_status lf__attention_heads(const lf_pass *p, cl_mem x)
{
    const lf_plan *pl = p->plan;
    const size_t n = p->n, q = pl->qdim, width = projected_width(pl, false);
    LF_TRY(prepare(p));
    LF_TRY(project_qkv(p, x, false));
    lf_view keys, values;
    LF_TRY(keys_values(p, x, &keys, &values));
    const lf_view queries = {p->ws->buf[LF_WS_QKV], 0, (int)width, n * width};
    const lf_view out = {p->ws->buf[LF_WS_ATTENTION], 0, (int)q, n * q};
    const int key_count = pl->linformer ? pl->cfg.k : 0;
    return pl->tiled ? attend_tiled(p, queries, keys, values, out, key_count)
                     : attend_gemm(p, queries, keys, values, out, key_count);
}

lf_status lf__attention_pass(const lf_pass *p, cl_mem x, cl_mem y, float beta)
{
    LF_TRY(lf__attention_heads(p, x));
    return output(p, y, beta);
}

lf_status lf__attention_probabilities(const lf_pass *p, cl_mem x, int head)
{
    const lf_plan *pl = p->plan;
    const size_t n = p->n, C = pl->cols, dh = pl->dh, bytes = n * n * sizeof(float);
    const size_t budget = lf__scores_budget(&p->ctx->info);
    if (bytes > budget)
        return lf__fail(p->ctx, LF_ERR_OUT_OF_MEMORY, "the %zu x %zu attention matrix of a head needs %zu bytes; "
                                                      "the device allows %zu bytes for it", n, n, bytes, budget);
    LF_TRY(prepare(p));
    LF_TRY(project_qkv(p, x, true)); /* the n keys, whatever order the layer's own keys come in */
    LF_TRY(reserve(p, LF_WS_SCORES, bytes, "attention scores"));
    lf_view keys, values;
    own_keys_values(p, &keys, &values);
    const size_t hk = (size_t)head / (pl->cfg.heads / pl->kvh); /* the key/value head this head reads */
    lf_gemm_args s = {.trans_b = true, .m = n, .n = n, .k = dh, .alpha = pl->cfg.scale,
                      .a = p->ws->buf[LF_WS_QKV], .a_off = head * dh, .lda = C,
                      .b = keys.buf, .b_off = keys.off + hk * dh, .ldb = keys.ld,
                      .c = p->ws->buf[LF_WS_SCORES], .ldc = n, .what = "gemm scores"};
    LF_TRY(lf__gemm(p->ctx, &s, p->tl));
    const lf_softmax_rows_args sm = {.scores = p->ws->buf[LF_WS_SCORES], .ld = (int)n, .n_rows = (int)n,
                                     .rows_valid = p->lengths[0], .cols_valid = p->lengths[0],
                                     .causal = pl->cfg.causal, .count = 1, .params = &pl->params};
    return lf__launch_softmax_rows(p->ctx, &sm, p->tl);
}
