/*
 * attention.c - the public attention layer: a plan (plan.c), its weights on
 * the device, a workspace, and forwards that run the stages (stages.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "projection.h"
#include "stages.h"
#include "weight_shape.h"

struct lf_attention {
    lf_context *ctx; /* held: the context lives while the layer does */
    lf_plan plan;
    lf_projection *shared;
    lf_layer_weights w;
    bool set[LF_W_COUNT]; /* which weights were set */
    size_t weight_bytes;
    cl_mem x, y; /* host forwards' input and output */
    size_t x_cap, y_cap;
    lf_workspace ws;
    lf_timeline tl;
};

void lf_attention_config_init(lf_attention_config *cfg, int d_model, int heads, int max_seq_len, int k)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->d_model = d_model;
    cfg->heads = heads;
    cfg->max_seq_len = max_seq_len;
    cfg->k = k;
    cfg->bias_q = cfg->bias_k = cfg->bias_v = cfg->bias_out = 1;
    cfg->mode = LF_MODE_LINFORMER;
    cfg->sharing = LF_SHARE_HEADWISE;
    cfg->proj_kind = LF_PROJ_LEARNED;
    cfg->position = LF_POSITION_KV;
    cfg->path = LF_PATH_AUTO;
}

/* ---- Creating a layer ---- */

static lf_status check_shared(lf_context *ctx, const lf_attention_config *c, const lf_projection *shared)
{
    if (!shared) return LF_OK;
    if (shared->ctx != ctx) return lf__fail(ctx, LF_ERR_ARGUMENT, "shared belongs to another context");
    if (shared->k != c->k || shared->max_seq_len != c->max_seq_len)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "shared is [%d, %d], the layer needs [k, max_seq_len] = [%d, %d]",
                        shared->k, shared->max_seq_len, c->k, c->max_seq_len);
    return LF_OK;
}

static lf_status fill(lf_context *ctx, cl_mem buf, float value, size_t floats)
{
    LF_CL_CHECK(ctx, clEnqueueFillBuffer(ctx->queue, buf, &value, sizeof value, 0, floats * sizeof(float), 0, NULL, NULL),
                "clEnqueueFillBuffer(weights)");
    return LF_OK;
}

/* Allocates the weight buffers; biases that are off stay zero, so one bias
 * kernel serves every column; mean pooling and random projections get their
 * fixed values. */
static lf_status allocate_weights(lf_attention *L)
{
    static const char *const what[LF_BUF_COUNT] = {"weights wq|wk|wv", "biases bq|bk|bv", "weight wo", "bias bo",
                                                   "projections e|f"};
    lf_context *ctx = L->ctx;
    const lf_plan *p = &L->plan;
    for (int i = 0; i < LF_BUF_COUNT; i++) {
        LF_TRY(lf__alloc(ctx, p->buf_floats[i] * sizeof(float), what[i], &L->w.buf[i]));
        L->weight_bytes += p->buf_floats[i] * sizeof(float);
    }
    LF_TRY(fill(ctx, L->w.buf[LF_BUF_B_QKV], 0.0f, p->buf_floats[LF_BUF_B_QKV]));
    LF_TRY(fill(ctx, L->w.buf[LF_BUF_B_O], 0.0f, p->buf_floats[LF_BUF_B_O]));
    if (p->linformer && p->cfg.proj_kind == LF_PROJ_MEAN_POOL)
        LF_TRY(fill(ctx, L->w.buf[LF_BUF_PROJ], 1.0f / (float)p->window, p->buf_floats[LF_BUF_PROJ]));
    if (p->linformer && p->cfg.proj_kind == LF_PROJ_RANDOM && p->cfg.sharing != LF_SHARE_LAYERWISE) {
        uint64_t state = p->cfg.seed; /* E then F, row-major, from one stream */
        LF_TRY(lf__upload_normal(ctx, L->w.buf[LF_BUF_PROJ], 0, p->buf_floats[LF_BUF_PROJ], &state,
                                 1.0 / sqrt((double)p->cfg.k)));
    }
    LF_CL_CHECK(ctx, clFinish(ctx->queue), "clFinish");
    return LF_OK;
}

static void attention_release(lf_attention *L)
{
    for (int i = 0; i < LF_BUF_COUNT; i++) lf__release(&L->w.buf[i]);
    lf__release(&L->x);
    lf__release(&L->y);
    lf__workspace_release(&L->ws);
    lf__timeline_reset(&L->tl);
}

lf_status lf_attention_create(lf_context *ctx, const lf_attention_config *cfg, lf_projection *shared,
                              lf_attention **out)
{
    if (out) *out = NULL;
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    if (!cfg) return lf__fail(ctx, LF_ERR_ARGUMENT, "cfg is NULL");
    lf_attention *L = calloc(1, sizeof *L);
    if (!L) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for the layer");
    lf_status st = lf__plan_resolve(cfg, &ctx->info, shared != NULL, &L->plan, ctx->error, sizeof ctx->error);
    if (st == LF_OK) st = check_shared(ctx, cfg, shared);
    if (st != LF_OK) {
        free(L);
        return st;
    }
    L->ctx = ctx;
    st = lf__context_lock(ctx);
    if (st == LF_OK) {
        st = allocate_weights(L);
        if (st == LF_OK && shared) lf__projection_retain(shared);
        lf__context_unlock(ctx);
    }
    if (st != LF_OK) {
        attention_release(L);
        free(L);
        return st;
    }
    L->shared = shared;
    L->w.shared_e = shared ? shared->e : NULL;
    lf__context_retain(ctx);
    *out = L;
    return LF_OK;
}

void lf_attention_free(lf_attention *layer)
{
    if (!layer || lf__context_inherited(layer->ctx)) return;
    lf_context *ctx = layer->ctx;
    pthread_mutex_lock(&ctx->lock);
    clFinish(ctx->queue);
    attention_release(layer);
    pthread_mutex_unlock(&ctx->lock);
    lf_projection_free(layer->shared);
    free(layer);
    lf__context_release(ctx);
}

lf_status lf_attention_config_get(const lf_attention *layer, lf_attention_config *cfg)
{
    if (!layer || !cfg) return LF_ERR_ARGUMENT;
    *cfg = layer->plan.cfg;
    return LF_OK;
}

/* ---- Weights ---- */

static const lf_weight_slot *find_slot(const lf_attention *L, const char *name, int *id)
{
    for (*id = 0; *id < LF_W_COUNT; ++*id)
        if (strcmp(L->plan.weights[*id].name, name) == 0) return &L->plan.weights[*id];
    return NULL;
}

/* Both setters: dims NULL checks count, else the shape (weight_shape.c). */
static lf_status set_weight(lf_attention *layer, const char *name, const size_t *dims, size_t ndims,
                            const float *data, size_t count)
{
    if (!layer) return LF_ERR_ARGUMENT;
    lf_context *ctx = layer->ctx;
    if (!name) return lf__fail(ctx, LF_ERR_ARGUMENT, "name is NULL");
    int id;
    const lf_weight_slot *s = find_slot(layer, name, &id);
    if (!s) return lf__fail(ctx, LF_ERR_ARGUMENT, "no weight named \"%s\" (wq wk wv wo bq bk bv bo e f)", name);
    if (!s->count)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "weight \"%s\" does not exist in this layer's configuration", name);
    if (!data) return lf__fail(ctx, LF_ERR_ARGUMENT, "data for weight \"%s\" is NULL", name);
    char what[32];
    snprintf(what, sizeof what, "weight \"%s\"", name);
    const lf_shape want = lf__slot_shape(&layer->plan, (lf_weight_id)id);
    LF_TRY(lf__weight_check(ctx, what, &want, dims, ndims, count));
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__upload(ctx, layer->w.buf[s->buf], s->offset * sizeof(float), data, s->count * sizeof(float));
    if (st == LF_OK) layer->set[id] = true;
    lf__context_unlock(ctx);
    return st;
}

lf_status lf_attention_set_weight(lf_attention *layer, const char *name, const float *data, size_t count)
{
    return set_weight(layer, name, NULL, 0, data, count);
}

lf_status lf_attention_set_weight_shaped(lf_attention *layer, const char *name, const size_t *dims, size_t ndims,
                                         const float *data)
{
    if (layer && !dims) return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "dims is NULL");
    return set_weight(layer, name, dims, ndims, data, 0);
}

const lf_plan *lf__attention_plan(const lf_attention *layer) { return &layer->plan; }

lf_status lf__attention_copy_weight(lf_attention *layer, lf_weight_id id, cl_mem from, size_t offset)
{
    const lf_weight_slot *s = &layer->plan.weights[id];
    LF_CL_CHECK(layer->ctx, clEnqueueCopyBuffer(layer->ctx->queue, from, layer->w.buf[s->buf], offset * sizeof(float),
                                                s->offset * sizeof(float), s->count * sizeof(float), 0, NULL, NULL),
                "clEnqueueCopyBuffer(weights)");
    layer->set[id] = true;
    return LF_OK;
}

lf_status lf_attention_weight_info(const lf_attention *layer, int index, lf_weight_info *info)
{
    if (!layer) return LF_ERR_ARGUMENT;
    if (!info) return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "info is NULL");
    int present = 0;
    for (int i = 0; i < LF_W_COUNT; i++) {
        const lf_weight_slot *s = &layer->plan.weights[i];
        if (!s->count || present++ != index) continue;
        *info = (lf_weight_info){s->name, s->count, s->rows, s->cols};
        return LF_OK;
    }
    return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "weight index %d is outside [0, %d)", index, present);
}

lf_status lf_attention_init_random(lf_attention *layer, uint64_t seed)
{
    if (!layer) return LF_ERR_ARGUMENT;
    uint64_t state = seed;
    for (int i = 0; i < LF_W_COUNT; i++) {
        const lf_weight_slot *s = &layer->plan.weights[i];
        if (!s->count) continue;
        float *tmp = malloc(s->count * sizeof *tmp);
        if (!tmp) return lf__fail(layer->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for \"%s\"", s->name);
        const double std = 1.0 / sqrt((double)layer->plan.cfg.k);
        for (size_t j = 0; j < s->count; j++)
            tmp[j] = s->init_bound > 0 ? (float)((2.0 * lf__rand_uniform(&state) - 1.0) * s->init_bound)
                                       : (float)(lf__rand_normal(&state) * std);
        lf_status st = lf_attention_set_weight(layer, s->name, tmp, s->count);
        free(tmp);
        LF_TRY(st);
    }
    return LF_OK;
}

lf_status lf_attention_device_bytes(const lf_attention *layer, size_t *weights, size_t *workspace)
{
    if (!layer) return LF_ERR_ARGUMENT;
    const lf_attention *L = layer;
    LF_TRY(lf__context_lock(L->ctx)); /* a forward on another thread may grow the workspace */
    if (weights)
        *weights = L->weight_bytes + (L->shared ? (size_t)L->shared->k * L->shared->max_seq_len * sizeof(float) : 0);
    if (workspace) *workspace = L->x_cap + L->y_cap + lf__workspace_bytes(&L->ws);
    lf__context_unlock(L->ctx);
    return LF_OK;
}

/* ---- Forward ---- */

static lf_status check_forward(lf_attention *L, int batch, int n, const int32_t *lengths)
{
    lf_context *ctx = L->ctx;
    LF_TRY(lf__check_batch(ctx, batch, n, L->plan.cfg.max_seq_len, "max_seq_len", lengths));
    for (int i = 0; i < LF_W_COUNT; i++)
        if (L->plan.weights[i].count && !L->set[i])
            return lf__fail(ctx, LF_ERR_STATE, "weight \"%s\" was never set", L->plan.weights[i].name);
    if (L->shared && !L->shared->set) return lf__fail(ctx, LF_ERR_STATE, "the shared projection was never set");
    return LF_OK;
}

/* What a run computes: the layer's output, the heads' outputs before W_O, or
 * one head's attention probabilities. */
typedef enum { RUN_OUTPUT, RUN_HEADS, RUN_PROBABILITIES } lf_run;

static lf_status run_locked(lf_attention *L, cl_mem x, cl_mem y, int batch, int n, const int32_t *lengths,
                            lf_run what, int head)
{
    lf_context *ctx = L->ctx;
    int32_t *lens = malloc(batch * sizeof *lens);
    if (!lens) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for lengths");
    for (int b = 0; b < batch; b++) lens[b] = lengths ? lengths[b] : n;
    lf__timeline_reset(&L->tl);
    /* A marker opens the timeline: CLBlast's event covers only its last kernel. */
    lf_status st = LF_OK;
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, lf__event(&L->tl));
    if (err != CL_SUCCESS) st = lf__cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
    lf__event_done(&L->tl, NULL);
    const lf_pass pass = {ctx, &L->plan, &L->w, &L->ws, &L->tl, batch, n, lens, false};
    if (st == LF_OK && what == RUN_OUTPUT) st = lf__attention_pass(&pass, x, y, 0.0f);
    if (st == LF_OK && what == RUN_HEADS) st = lf__attention_heads(&pass, x);
    if (st == LF_OK && what == RUN_PROBABILITIES) st = lf__attention_probabilities(&pass, x, head);
    free(lens);
    return st;
}

lf_status lf_attention_forward_cl(lf_attention *layer, cl_mem x, cl_mem y, int batch, int n, const int32_t *lengths)
{
    if (!layer) return LF_ERR_ARGUMENT;
    lf_context *ctx = layer->ctx;
    LF_TRY(lf__context_lock(ctx));
    lf_status st = check_forward(layer, batch, n, lengths);
    const size_t bytes = (size_t)batch * n * layer->plan.cfg.d_model * sizeof(float);
    if (st == LF_OK) st = lf__check_io_buffers(ctx, x, bytes, "x", y, bytes, "y");
    if (st == LF_OK) st = run_locked(layer, x, y, batch, n, lengths, RUN_OUTPUT, 0);
    lf__context_unlock(ctx);
    return st;
}

/* Uploads x, runs, and downloads what the run computed: y, the heads' outputs
 * or one head's probabilities. */
static lf_status run_host(lf_attention *L, const float *x, float *out, int batch, int n, const int32_t *lengths,
                          lf_run what, int head)
{
    lf_context *ctx = L->ctx;
    if (!x) return lf__fail(ctx, LF_ERR_ARGUMENT, "x is NULL");
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is NULL", what == RUN_OUTPUT ? "y" : what == RUN_HEADS ? "o" : "p");
    LF_TRY(lf__context_lock(ctx));
    lf_status st = check_forward(L, batch, n, lengths);
    const size_t rows = (size_t)batch * n, bytes = rows * L->plan.cfg.d_model * sizeof(float);
    const size_t out_bytes = what == RUN_OUTPUT ? bytes
                             : what == RUN_HEADS ? rows * L->plan.qdim * sizeof(float)
                                                 : (size_t)n * n * sizeof(float);
    if (st == LF_OK) st = lf__reserve(ctx, &L->x, &L->x_cap, bytes, "x");
    if (st == LF_OK && what == RUN_OUTPUT) st = lf__reserve(ctx, &L->y, &L->y_cap, bytes, "y");
    if (st == LF_OK) st = lf__upload(ctx, L->x, 0, x, bytes);
    if (st == LF_OK) st = run_locked(L, L->x, L->y, batch, n, lengths, what, head);
    cl_mem result = what == RUN_OUTPUT ? L->y : L->ws.buf[what == RUN_HEADS ? LF_WS_ATTENTION : LF_WS_SCORES];
    if (st == LF_OK) st = lf__download(ctx, result, 0, out, out_bytes);
    lf__context_unlock(ctx);
    return st;
}

lf_status lf_attention_forward(lf_attention *layer, const float *x, float *y, int batch, int n,
                               const int32_t *lengths)
{
    if (!layer) return LF_ERR_ARGUMENT;
    return run_host(layer, x, y, batch, n, lengths, RUN_OUTPUT, 0);
}

lf_status lf_attention_head_outputs(lf_attention *layer, const float *x, float *o, int batch, int n,
                                    const int32_t *lengths)
{
    if (!layer) return LF_ERR_ARGUMENT;
    return run_host(layer, x, o, batch, n, lengths, RUN_HEADS, 0);
}

lf_status lf_attention_probabilities(lf_attention *layer, const float *x, float *p, int n, int head)
{
    if (!layer) return LF_ERR_ARGUMENT;
    if (head < 0 || head >= layer->plan.cfg.heads)
        return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "head %d is outside [0, %d)", head, layer->plan.cfg.heads);
    return run_host(layer, x, p, 1, n, NULL, RUN_PROBABILITIES, head);
}

lf_status lf_attention_last_profile(lf_attention *layer, lf_stage_time *stages, size_t capacity, size_t *count)
{
    if (!layer) return LF_ERR_ARGUMENT;
    return lf__last_profile(layer->ctx, &layer->tl, stages, capacity, count);
}

lf_status lf_attention_last_time_ms(lf_attention *layer, double *ms)
{
    if (!layer) return LF_ERR_ARGUMENT;
    return lf__last_time_ms(layer->ctx, &layer->tl, ms);
}
