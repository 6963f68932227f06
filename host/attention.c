/*
 * attention.c - the multi-head attention layer: weights, workspace, forward.
 *
 * Data path of one forward (see DESIGN.md):
 *   x [B,n,D] -> Q,K,V = x W^T + b (one CLBlast GEMM over the fused weights)
 *   linformer: K~ = E K, V~ = F V per sequence (CLBlast, or seq_project.cl for
 *              pooling and convolution; padded rows never enter), then attention
 *              over the k compressed rows, fused (attention.cl) or through an
 *              n x k score matrix (CLBlast + softmax.cl)
 *   flash:     attention.cl over the sequence's own keys
 *   dense:     n x n scores per head chunk, masked softmax, P V (CLBlast + softmax.cl)
 *   -> y = O Wo^T + bo, rows past each length set to 0 (elementwise.cl).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LF_MAX_DH_TILED 256 /* private arrays of the tiled kernel stay this small */

struct lf_projection {
    lf_context *ctx;
    int k, max_seq_len, refs;
    bool set;
    cl_mem e; /* [k, max_seq_len] */
};

/* Where a named weight lives: a buffer, an element offset and a count. */
typedef struct {
    const char *name;
    cl_mem *buf;
    size_t offset, count;
    bool required, set;
    float init_bound; /* uniform(+-bound) for lf_attention_init_random; 0 = normal(1/sqrt k) */
} lf_weight_slot;

enum { W_Q, W_K, W_V, W_O, B_Q, B_K, B_V, B_O, P_E, P_F, W_COUNT };

struct lf_attention {
    lf_context *ctx;
    lf_attention_config cfg;
    int dh, kvh, window;
    size_t qdim, kvdim, cols; /* H*dh, KV*dh, columns of the fused QKV output */
    int groups;               /* compressed groups: 2 (K~ and V~), 1 with share_kv */
    bool f_separate;          /* F is its own matrix (else F = E) */
    lf_projection *shared;

    cl_mem w_qkv, b_qkv, w_o, b_o, proj;
    lf_weight_slot slots[W_COUNT];
    size_t weight_bytes;

    /* workspace, grown to the largest batch x n seen */
    cl_mem x, y, qkv, comp, xc, att, scores, lens;
    size_t x_cap, y_cap, qkv_cap, comp_cap, xc_cap, att_cap, scores_cap, lens_cap;
    lf_timeline tl;
};

const char *lf_mode_name(lf_mode mode)
{
    switch (mode) {
    case LF_MODE_LINFORMER: return "linformer";
    case LF_MODE_DENSE: return "dense";
    case LF_MODE_FLASH: return "flash";
    }
    return "unknown";
}

lf_status lf_mode_parse(const char *name, lf_mode *mode)
{
    if (!name || !mode) return LF_ERR_ARGUMENT;
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++)
        if (strcmp(name, lf_mode_name((lf_mode)m)) == 0) return *mode = (lf_mode)m, LF_OK;
    return LF_ERR_ARGUMENT;
}

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

/* ---- Projections shared by layers ---- */

static void fill_normal(float *p, size_t count, uint64_t *state, double std)
{
    for (size_t i = 0; i < count; i++) p[i] = (float)(lf__rand_normal(state) * std);
}

static lf_status upload_random_normal(lf_context *ctx, cl_mem buf, size_t offset, size_t count,
                                      uint64_t *state, double std)
{
    float *tmp = malloc(count * sizeof *tmp);
    if (!tmp) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for a projection");
    fill_normal(tmp, count, state, std);
    lf_status st = lf__upload(ctx, buf, offset * sizeof(float), tmp, count * sizeof *tmp);
    free(tmp);
    return st;
}

lf_status lf_projection_create(lf_context *ctx, int k, int max_seq_len, lf_proj_kind kind,
                               uint64_t seed, lf_projection **out)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (k <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "k must be positive, got %d", k);
    if (max_seq_len <= 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "max_seq_len must be positive, got %d", max_seq_len);
    if (kind != LF_PROJ_LEARNED && kind != LF_PROJ_RANDOM)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "a shared projection is LF_PROJ_LEARNED or LF_PROJ_RANDOM");
    if ((uint64_t)k * (uint64_t)max_seq_len > (1ull << 40))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "k x max_seq_len (%d x %d) is too large", k, max_seq_len);
    lf_projection *p = calloc(1, sizeof *p);
    if (!p) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for a projection");
    p->ctx = ctx;
    p->k = k;
    p->max_seq_len = max_seq_len;
    p->refs = 1;
    pthread_mutex_lock(&ctx->lock);
    size_t count = (size_t)k * max_seq_len;
    lf_status st = lf__alloc(ctx, count * sizeof(float), "projection E", &p->e);
    if (st == LF_OK && kind == LF_PROJ_RANDOM) {
        uint64_t state = seed;
        st = upload_random_normal(ctx, p->e, 0, count, &state, 1.0 / sqrt((double)k));
        p->set = st == LF_OK;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (st != LF_OK) {
        lf__release(&p->e);
        free(p);
        return st;
    }
    *out = p;
    return LF_OK;
}

lf_status lf_projection_set(lf_projection *proj, const float *data, size_t count)
{
    if (!proj) return LF_ERR_ARGUMENT;
    lf_context *ctx = proj->ctx;
    if (!data) return lf__fail(ctx, LF_ERR_ARGUMENT, "data is NULL");
    size_t want = (size_t)proj->k * proj->max_seq_len;
    if (count != want)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "projection: expected [%d, %d] = %zu floats, got %zu",
                        proj->k, proj->max_seq_len, want, count);
    pthread_mutex_lock(&ctx->lock);
    lf_status st = lf__upload(ctx, proj->e, 0, data, count * sizeof(float));
    if (st == LF_OK) proj->set = true;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

void lf_projection_free(lf_projection *proj)
{
    if (!proj) return;
    lf_context *ctx = proj->ctx;
    pthread_mutex_lock(&ctx->lock);
    bool last = --proj->refs == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (!last) return;
    lf__release(&proj->e);
    free(proj);
}

/* ---- Creating a layer ---- */

static lf_status check_config(lf_context *ctx, const lf_attention_config *c, lf_projection *shared)
{
    if (c->d_model <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "d_model must be positive, got %d", c->d_model);
    if (c->heads <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "heads must be positive, got %d", c->heads);
    if (c->d_head < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "d_head must be 0 or positive, got %d", c->d_head);
    if (c->d_head == 0 && c->d_model % c->heads != 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "d_model (%d) is not divisible by heads (%d); set d_head",
                        c->d_model, c->heads);
    if (c->kv_heads != 0 && c->kv_heads != 1 && c->kv_heads != c->heads)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "kv_heads must be 1 or heads (%d), got %d", c->heads, c->kv_heads);
    if (c->max_seq_len <= 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "max_seq_len must be positive, got %d", c->max_seq_len);
    if (c->mode < LF_MODE_LINFORMER || c->mode > LF_MODE_FLASH)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "mode %d is not an lf_mode", (int)c->mode);
    if (c->path < LF_PATH_AUTO || c->path > LF_PATH_GEMM)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "path %d is not an lf_path", (int)c->path);
    if (!(c->scale >= 0.0f) || isinf(c->scale))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "scale must be finite and >= 0 (0 = 1/sqrt(d_head))");
    int dh = c->d_head ? c->d_head : c->d_model / c->heads;
    /* sizes whose products index buffers with int arithmetic in kernels */
    if ((int64_t)c->heads * dh > (1 << 20) || c->d_model > (1 << 20) || c->max_seq_len > (1 << 24))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "d_model, heads x d_head or max_seq_len is too large");
    if (c->mode == LF_MODE_FLASH && dh > LF_MAX_DH_TILED)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "flash mode supports d_head up to %d, got %d", LF_MAX_DH_TILED, dh);
    if (c->mode == LF_MODE_LINFORMER && c->path == LF_PATH_FUSED && dh > LF_MAX_DH_TILED)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the fused path supports d_head up to %d, got %d", LF_MAX_DH_TILED, dh);
    if (c->mode != LF_MODE_LINFORMER && shared)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "shared is given but mode %s has no projection", lf_mode_name(c->mode));
    if (c->mode != LF_MODE_LINFORMER) return LF_OK;

    if (c->k <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "k must be positive, got %d", c->k);
    if (c->sharing < LF_SHARE_NONE || c->sharing > LF_SHARE_LAYERWISE)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "sharing %d is not an lf_sharing", (int)c->sharing);
    if (c->proj_kind < LF_PROJ_LEARNED || c->proj_kind > LF_PROJ_CONV)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "proj_kind %d is not an lf_proj_kind", (int)c->proj_kind);
    if (c->position != LF_POSITION_KV && c->position != LF_POSITION_INPUT)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "position %d is not an lf_position", (int)c->position);
    if (c->position == LF_POSITION_INPUT && c->sharing == LF_SHARE_NONE)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "position LF_POSITION_INPUT projects the layer input, which has no heads: "
                                              "sharing must not be LF_SHARE_NONE");
    if (c->sharing == LF_SHARE_LAYERWISE) {
        if (!shared) return lf__fail(ctx, LF_ERR_ARGUMENT, "shared is NULL but sharing is LF_SHARE_LAYERWISE");
        if (shared->ctx != ctx) return lf__fail(ctx, LF_ERR_ARGUMENT, "shared belongs to another context");
        if (shared->k != c->k || shared->max_seq_len != c->max_seq_len)
            return lf__fail(ctx, LF_ERR_ARGUMENT, "shared is [%d, %d], the layer needs [k, max_seq_len] = [%d, %d]",
                            shared->k, shared->max_seq_len, c->k, c->max_seq_len);
        if (c->proj_kind != LF_PROJ_LEARNED && c->proj_kind != LF_PROJ_RANDOM)
            return lf__fail(ctx, LF_ERR_ARGUMENT, "LF_SHARE_LAYERWISE takes a matrix projection (learned or random)");
    } else if (shared) {
        return lf__fail(ctx, LF_ERR_ARGUMENT, "shared is given but sharing is not LF_SHARE_LAYERWISE");
    }
    if ((uint64_t)c->k * (uint64_t)c->max_seq_len > (1ull << 32))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "k x max_seq_len (%d x %d) is too large", c->k, c->max_seq_len);
    return LF_OK;
}

static void slot(lf_attention *L, int id, const char *name, cl_mem *buf, size_t offset,
                 size_t count, bool required, float bound)
{
    L->slots[id] = (lf_weight_slot){name, buf, offset, count, required, false, bound};
}

/* Lays out the weights: fused QKV rows [Q | K | V], biases alike, Wo, bo, E then F. */
static lf_status layout_weights(lf_attention *L)
{
    const lf_attention_config *c = &L->cfg;
    lf_context *ctx = L->ctx;
    const size_t D = c->d_model, q = L->qdim, kv = L->kvdim;
    const bool lin = c->mode == LF_MODE_LINFORMER;
    const float in_bound = (float)(1.0 / sqrt((double)D)), out_bound = (float)(1.0 / sqrt((double)q));

    slot(L, W_Q, "wq", &L->w_qkv, 0, q * D, true, in_bound);
    slot(L, W_K, "wk", &L->w_qkv, q * D, kv * D, true, in_bound);
    slot(L, W_V, "wv", &L->w_qkv, (q + kv) * D, c->share_kv ? 0 : kv * D, !c->share_kv, in_bound);
    slot(L, W_O, "wo", &L->w_o, 0, D * q, true, out_bound);
    slot(L, B_Q, "bq", &L->b_qkv, 0, c->bias_q ? q : 0, c->bias_q, in_bound);
    slot(L, B_K, "bk", &L->b_qkv, q, c->bias_k ? kv : 0, c->bias_k, in_bound);
    slot(L, B_V, "bv", &L->b_qkv, q + kv, c->bias_v && !c->share_kv ? kv : 0, c->bias_v && !c->share_kv, in_bound);
    slot(L, B_O, "bo", &L->b_o, 0, c->bias_out ? D : 0, c->bias_out, out_bound);

    size_t per = 0; /* floats of one E */
    bool settable = false;
    if (lin && c->sharing != LF_SHARE_LAYERWISE) {
        const size_t copies = c->sharing == LF_SHARE_NONE ? (size_t)L->kvh : 1;
        switch (c->proj_kind) {
        case LF_PROJ_LEARNED: per = copies * c->k * (size_t)c->max_seq_len; settable = true; break;
        case LF_PROJ_RANDOM: per = copies * c->k * (size_t)c->max_seq_len; break;
        case LF_PROJ_CONV: per = copies * L->window; settable = true; break;
        case LF_PROJ_MEAN_POOL: per = L->window; break; /* uniform 1/w, one copy serves all */
        case LF_PROJ_MAX_POOL: break;
        }
    }
    const float e_bound = c->proj_kind == LF_PROJ_CONV ? (float)(1.0 / sqrt((double)L->window)) : 0.0f;
    slot(L, P_E, "e", &L->proj, 0, settable ? per : 0, settable, e_bound);
    slot(L, P_F, "f", &L->proj, per, settable && L->f_separate ? per : 0, settable && L->f_separate, e_bound);

    size_t qkv_rows = q + (c->share_kv ? 1 : 2) * kv;
    size_t proj_floats = per * (L->f_separate ? 2 : 1);
    LF_TRY(lf__alloc(ctx, qkv_rows * D * sizeof(float), "weights wq|wk|wv", &L->w_qkv));
    LF_TRY(lf__alloc(ctx, qkv_rows * sizeof(float), "biases bq|bk|bv", &L->b_qkv));
    LF_TRY(lf__alloc(ctx, D * q * sizeof(float), "weight wo", &L->w_o));
    LF_TRY(lf__alloc(ctx, D * sizeof(float), "bias bo", &L->b_o));
    LF_TRY(lf__alloc(ctx, proj_floats * sizeof(float), "projections e|f", &L->proj));
    L->weight_bytes = (qkv_rows * D + qkv_rows + D * q + D + proj_floats) * sizeof(float);

    /* Biases that are off stay zero, so one bias kernel serves every column. */
    const float zero = 0.0f;
    LF_CL_CHECK(ctx, clEnqueueFillBuffer(ctx->queue, L->b_qkv, &zero, sizeof zero, 0, qkv_rows * sizeof(float),
                                         0, NULL, NULL), "clEnqueueFillBuffer(biases)");
    LF_CL_CHECK(ctx, clEnqueueFillBuffer(ctx->queue, L->b_o, &zero, sizeof zero, 0, D * sizeof(float), 0, NULL, NULL),
                "clEnqueueFillBuffer(bo)");
    if (lin && c->proj_kind == LF_PROJ_MEAN_POOL) {
        const float inv = 1.0f / (float)L->window;
        LF_CL_CHECK(ctx, clEnqueueFillBuffer(ctx->queue, L->proj, &inv, sizeof inv, 0, proj_floats * sizeof(float), 0, NULL, NULL),
                    "clEnqueueFillBuffer(mean pooling)");
    }
    if (lin && c->proj_kind == LF_PROJ_RANDOM && c->sharing != LF_SHARE_LAYERWISE) {
        uint64_t state = c->seed; /* E then F, row-major, from one stream */
        LF_TRY(upload_random_normal(ctx, L->proj, 0, proj_floats, &state, 1.0 / sqrt((double)c->k)));
    }
    LF_CL_CHECK(ctx, clFinish(ctx->queue), "clFinish");
    return LF_OK;
}

static void attention_release(lf_attention *L)
{
    cl_mem *all[] = {&L->w_qkv, &L->b_qkv, &L->w_o, &L->b_o, &L->proj, &L->x, &L->y, &L->qkv,
                     &L->comp, &L->xc, &L->att, &L->scores, &L->lens};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lf__release(all[i]);
    lf__timeline_reset(&L->tl);
}

lf_status lf_attention_create(lf_context *ctx, const lf_attention_config *cfg, lf_projection *shared,
                              lf_attention **out)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!cfg) return lf__fail(ctx, LF_ERR_ARGUMENT, "cfg is NULL");
    LF_TRY(check_config(ctx, cfg, shared));
    lf_attention *L = calloc(1, sizeof *L);
    if (!L) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for the layer");
    L->ctx = ctx;
    L->cfg = *cfg;
    lf_attention_config *c = &L->cfg;
    L->dh = c->d_head ? c->d_head : c->d_model / c->heads;
    c->d_head = L->dh;
    L->kvh = c->kv_heads ? c->kv_heads : c->heads;
    c->kv_heads = L->kvh;
    if (c->scale == 0.0f) c->scale = (float)(1.0 / sqrt((double)L->dh));
    if (c->mode != LF_MODE_LINFORMER) c->k = 0;
    /* Fused while a head's k keys and values fit the local memory at once. */
    const bool fits = L->dh <= LF_MAX_DH_TILED && 2ull * c->k * L->dh * sizeof(float) <= ctx->info.local_mem_bytes;
    if (c->mode == LF_MODE_LINFORMER && c->path == LF_PATH_AUTO) c->path = fits ? LF_PATH_FUSED : LF_PATH_GEMM;
    if (c->mode != LF_MODE_LINFORMER) c->path = LF_PATH_AUTO;
    if (c->share_kv) c->bias_v = 0;
    L->window = c->k ? (c->max_seq_len + c->k - 1) / c->k : 0;
    L->qdim = (size_t)c->heads * L->dh;
    L->kvdim = (size_t)L->kvh * L->dh;
    L->cols = L->qdim + (c->share_kv ? 1 : 2) * L->kvdim;
    L->groups = c->share_kv ? 1 : 2;
    L->f_separate = !c->share_kv && (c->sharing == LF_SHARE_NONE || c->sharing == LF_SHARE_HEADWISE);

    pthread_mutex_lock(&ctx->lock);
    lf_status st = layout_weights(L);
    if (st == LF_OK && shared) shared->refs++;
    pthread_mutex_unlock(&ctx->lock);
    if (st != LF_OK) {
        attention_release(L);
        free(L);
        return st;
    }
    L->shared = shared;
    *out = L;
    return LF_OK;
}

void lf_attention_free(lf_attention *layer)
{
    if (!layer) return;
    lf_context *ctx = layer->ctx;
    pthread_mutex_lock(&ctx->lock);
    clFinish(ctx->queue);
    attention_release(layer);
    pthread_mutex_unlock(&ctx->lock);
    lf_projection_free(layer->shared);
    free(layer);
}

lf_status lf_attention_config_get(const lf_attention *layer, lf_attention_config *cfg)
{
    if (!layer || !cfg) return LF_ERR_ARGUMENT;
    *cfg = layer->cfg;
    return LF_OK;
}

/* ---- Weights ---- */

static lf_weight_slot *find_slot(lf_attention *L, const char *name)
{
    for (int i = 0; i < W_COUNT; i++)
        if (strcmp(L->slots[i].name, name) == 0) return &L->slots[i];
    return NULL;
}

lf_status lf_attention_set_weight(lf_attention *layer, const char *name, const float *data, size_t count)
{
    if (!layer) return LF_ERR_ARGUMENT;
    lf_context *ctx = layer->ctx;
    if (!name) return lf__fail(ctx, LF_ERR_ARGUMENT, "name is NULL");
    lf_weight_slot *s = find_slot(layer, name);
    if (!s) return lf__fail(ctx, LF_ERR_ARGUMENT, "no weight named \"%s\" (wq wk wv wo bq bk bv bo e f)", name);
    if (!s->required)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "weight \"%s\" does not exist in this layer's configuration", name);
    if (!data) return lf__fail(ctx, LF_ERR_ARGUMENT, "data for weight \"%s\" is NULL", name);
    if (count != s->count)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "weight \"%s\" holds %zu floats, got %zu", name, s->count, count);
    pthread_mutex_lock(&ctx->lock);
    lf_status st = lf__upload(ctx, *s->buf, s->offset * sizeof(float), data, count * sizeof(float));
    if (st == LF_OK) s->set = true;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

lf_status lf_attention_init_random(lf_attention *layer, uint64_t seed)
{
    if (!layer) return LF_ERR_ARGUMENT;
    uint64_t state = seed;
    for (int i = 0; i < W_COUNT; i++) {
        lf_weight_slot *s = &layer->slots[i];
        if (!s->required) continue;
        float *tmp = malloc(s->count * sizeof *tmp);
        if (!tmp) return lf__fail(layer->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for \"%s\"", s->name);
        if (s->init_bound > 0)
            for (size_t j = 0; j < s->count; j++)
                tmp[j] = (float)((2.0 * lf__rand_uniform(&state) - 1.0) * s->init_bound);
        else
            fill_normal(tmp, s->count, &state, 1.0 / sqrt((double)layer->cfg.k));
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
    pthread_mutex_lock(&L->ctx->lock); /* a forward on another thread may grow the workspace */
    if (weights)
        *weights = L->weight_bytes +
                   (L->shared ? (size_t)L->shared->k * L->shared->max_seq_len * sizeof(float) : 0);
    if (workspace)
        *workspace = L->x_cap + L->y_cap + L->qkv_cap + L->comp_cap + L->xc_cap + L->att_cap +
                     L->scores_cap + L->lens_cap;
    pthread_mutex_unlock(&L->ctx->lock);
    return LF_OK;
}

/* ---- Forward ---- */

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* y[rows, cols] (+)= bias; with mask, rows past their sequence's length become 0. */
static lf_status bias_rows(lf_attention *L, cl_mem y, size_t y_off, int ld, int cols, int rows,
                           cl_mem bias, size_t b_off, bool has_bias, int rows_per_seq, bool mask)
{
    lf_context *ctx = L->ctx;
    if (!has_bias && !mask) return LF_OK;
    cl_kernel k;
    LF_TRY(lf__kernel(ctx, "elementwise.cl", "", "bias_rows", &k));
    cl_ulong off = y_off, boff = b_off;
    int hb = has_bias, ml = mask;
    LF_TRY(lf__set_args(ctx, k, "bias_rows", 10, sizeof(cl_mem), &y, sizeof off, &off, sizeof ld, &ld,
                        sizeof cols, &cols, sizeof(cl_mem), &bias, sizeof boff, &boff, sizeof hb, &hb, sizeof(cl_mem), &L->lens,
                        sizeof rows_per_seq, &rows_per_seq, sizeof ml, &ml));
    size_t global[2] = {(size_t)cols, (size_t)rows};
    return lf__launch(ctx, k, "bias_rows", 2, global, NULL, &L->tl);
}

/* K~ / V~ (or E x, F x): out[b, j, g*cols + c] = sum over i < len[b] of
 * P_g[j, i] in[b, i, g*in_gstride + c] for group g (0: E, 1: F) and column c;
 * with per-head projections, head h = c / head_cols has its own P. Padded rows
 * never enter: a matrix projection is one CLBlast GEMM per sequence whose inner
 * dimension is that sequence's length (strided-batched over groups and heads);
 * pooling and convolution are one launch of seq_project.cl for the batch. */
static lf_status seq_project(lf_attention *L, cl_mem in, size_t in_off, int in_ld, int in_gstride, int n,
                             cl_mem out, int out_ld, int cols, int head_cols, int groups, int batch,
                             const int32_t *lengths)
{
    lf_context *ctx = L->ctx;
    const lf_attention_config *c = &L->cfg;
    const bool matrix = c->proj_kind == LF_PROJ_LEARNED || c->proj_kind == LF_PROJ_RANDOM;
    cl_mem e = c->sharing == LF_SHARE_LAYERWISE ? L->shared->e : L->proj;
    const bool per_head = c->sharing == LF_SHARE_NONE && c->proj_kind != LF_PROJ_MEAN_POOL;
    const int e_gstride = L->f_separate ? (int)L->slots[P_F].offset : 0;
    const int kk = c->k;
    if (matrix) {
        const size_t width = per_head ? (size_t)head_cols : (size_t)cols, N = c->max_seq_len;
        for (int b = 0; b < batch; b++) {
            const size_t out_off = (size_t)b * kk * out_ld;
            if (lengths[b] == 0) { /* nothing to project: zero rows, as the sum is empty */
                const float zero = 0.0f;
                cl_int err = clEnqueueFillBuffer(ctx->queue, out, &zero, sizeof zero, out_off * sizeof(float),
                                                 (size_t)kk * out_ld * sizeof(float), 0, NULL, lf__event(&L->tl));
                if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, "clEnqueueFillBuffer(seq_project)");
                lf__event_done(&L->tl, "seq_project");
                continue;
            }
            lf_gemm_args g = {.m = kk, .n = width, .k = lengths[b], .alpha = 1.0f,
                              .a = e, .lda = N, .a_stride = per_head ? kk * N : (size_t)e_gstride,
                              .b = in, .b_off = in_off + (size_t)b * n * in_ld, .ldb = in_ld,
                              .b_stride = per_head ? width : (size_t)in_gstride,
                              .c = out, .c_off = out_off, .ldc = out_ld, .c_stride = width,
                              .batch = per_head ? (size_t)groups * L->kvh : (size_t)groups, .what = "seq_project"};
            LF_TRY(lf__gemm(ctx, &g, &L->tl));
        }
        return LF_OK;
    }
    const int e_hstride = per_head ? L->window : 0;
    char opts[64];
    snprintf(opts, sizeof opts, "-DWINDOW_MAX=%d", c->proj_kind == LF_PROJ_MAX_POOL);
    cl_kernel k;
    LF_TRY(lf__kernel(ctx, "seq_project.cl", opts, "seq_project_window", &k));
    cl_ulong ioff = in_off, ooff = 0;
    const int w = L->window;
    LF_TRY(lf__set_args(ctx, k, "seq_project_window", 17, sizeof(cl_mem), &in, sizeof ioff, &ioff, sizeof in_ld,
                        &in_ld, sizeof in_gstride, &in_gstride, sizeof n, &n, sizeof(cl_mem), &out, sizeof ooff,
                        &ooff, sizeof out_ld, &out_ld, sizeof(cl_mem), &e, sizeof w, &w, sizeof e_gstride,
                        &e_gstride, sizeof e_hstride, &e_hstride, sizeof head_cols, &head_cols,
                        sizeof(cl_mem), &L->lens, sizeof cols, &cols, sizeof kk, &kk, sizeof groups, &groups));
    size_t global[3] = {(size_t)cols, (size_t)kk, (size_t)batch * groups};
    return lf__launch(ctx, k, "seq_project_window", 3, global, NULL, &L->tl);
}

/* Where queries, keys and values sit for the attention step. */
typedef struct {
    cl_mem buf;
    size_t off;   /* elements */
    int ld;       /* row stride */
    size_t bstride; /* between sequences */
} lf_view;

static lf_status attention_tiled(lf_attention *L, lf_view q, lf_view k, lf_view v, lf_view o,
                                 int batch, int n, int key_count)
{
    lf_context *ctx = L->ctx;
    const int dh = L->dh;
    /* keys and values of a tile take 2 TK DH floats: at most half the local memory */
    size_t tk = 32;
    while (tk > 1 && 2 * tk * dh * sizeof(float) > ctx->info.local_mem_bytes / 2) tk /= 2;
    char opts[96];
    snprintf(opts, sizeof opts, "-DDH=%d -DTK=%zu -DVW=%d", dh, tk, dh % 4 == 0 ? 4 : 1);
    cl_kernel kr;
    size_t tq = 1;
    LF_TRY(lf__kernel_sized(ctx, "attention.cl", opts, "attention_tiled", "TQ", 64, 1, &kr, &tq));
    cl_ulong qo = q.off, ko = k.off, vo = v.off, oo = o.off;
    cl_ulong qb = q.bstride, kb = k.bstride, vb = v.bstride, ob = o.bstride;
    const int heads = L->cfg.heads, kvh = L->kvh;
    const float scale = L->cfg.scale;
    LF_TRY(lf__set_args(ctx, kr, "attention_tiled", 22, sizeof(cl_mem), &q.buf, sizeof qo, &qo, sizeof q.ld, &q.ld,
                        sizeof qb, &qb, sizeof(cl_mem), &k.buf, sizeof ko, &ko, sizeof k.ld, &k.ld, sizeof kb, &kb,
                        sizeof(cl_mem), &v.buf, sizeof vo, &vo, sizeof v.ld, &v.ld, sizeof vb, &vb,
                        sizeof(cl_mem), &o.buf, sizeof oo, &oo, sizeof o.ld, &o.ld, sizeof ob, &ob,
                        sizeof(cl_mem), &L->lens, sizeof n, &n, sizeof key_count, &key_count,
                        sizeof heads, &heads, sizeof kvh, &kvh, sizeof scale, &scale));
    size_t local[3] = {tq, 1, 1};
    size_t global[3] = {round_up((size_t)n, tq), (size_t)heads, (size_t)batch};
    return lf__launch(ctx, kr, "attention_tiled", 3, global, local, &L->tl);
}

/* Scores in memory: per sequence and chunk of heads, S = scale Q K^T [n, nk],
 * masked softmax, O = P V. key_count 0 = the sequence's own keys (dense). */
static lf_status attention_gemm(lf_attention *L, lf_view q, lf_view k, lf_view v, lf_view o, int batch,
                                int n, int key_count, const int32_t *lengths)
{
    lf_context *ctx = L->ctx;
    const size_t dh = L->dh, heads = L->cfg.heads, nk = key_count ? (size_t)key_count : (size_t)n;
    const size_t per_head = (size_t)n * nk * sizeof(float);
    /* Heads per chunk: bounded by the max allocation and half the device memory. */
    size_t budget = ctx->info.max_alloc_bytes;
    if (budget > ctx->info.global_mem_bytes / 2) budget = ctx->info.global_mem_bytes / 2;
    if (per_head > budget)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                        "%s attention needs a %zu x %zu score matrix (%zu bytes) per head; the device allows %zu bytes",
                        lf_mode_name(L->cfg.mode), (size_t)n, nk, per_head, budget);
    size_t chunk = budget / per_head;
    if (chunk > heads) chunk = heads;
    LF_TRY(lf__reserve(ctx, &L->scores, &L->scores_cap, chunk * per_head, "attention scores"));
    cl_kernel sm;
    size_t wg = 1;
    LF_TRY(lf__kernel_sized(ctx, "softmax.cl", "", "softmax_rows", "WG", 256, 1, &sm, &wg));
    const size_t kv_step = L->kvh == 1 ? 0 : dh; /* one key/value head serves all queries */
    for (int b = 0; b < batch; b++) {
        const int len = lengths[b];
        const int cols_valid = key_count ? key_count : len;
        if (cols_valid == 0) continue; /* rows past the length are set to 0 at the end */
        for (size_t h0 = 0; h0 < heads; h0 += chunk) {
            const size_t hc = heads - h0 < chunk ? heads - h0 : chunk;
            const size_t kvh0 = L->kvh == 1 ? 0 : h0;
            lf_gemm_args s = {.trans_b = true, .m = n, .n = nk, .k = dh, .alpha = L->cfg.scale,
                              .a = q.buf, .a_off = q.off + b * q.bstride + h0 * dh, .lda = q.ld, .a_stride = dh,
                              .b = k.buf, .b_off = k.off + b * k.bstride + kvh0 * dh, .ldb = k.ld, .b_stride = kv_step,
                              .c = L->scores, .ldc = nk, .c_stride = (size_t)n * nk, .batch = hc,
                              .what = "gemm scores"};
            LF_TRY(lf__gemm(ctx, &s, &L->tl));
            const int ldi = (int)nk, rows = n;
            LF_TRY(lf__set_args(ctx, sm, "softmax_rows", 5, sizeof(cl_mem), &L->scores, sizeof ldi, &ldi,
                                sizeof rows, &rows, sizeof len, &len, sizeof cols_valid, &cols_valid));
            size_t local[2] = {wg, 1}, global[2] = {wg, hc * n};
            LF_TRY(lf__launch(ctx, sm, "softmax_rows", 2, global, local, &L->tl));
            /* only the valid keys: 0 x NaN in a padded value row would be NaN */
            lf_gemm_args pv = {.m = n, .n = dh, .k = (size_t)cols_valid, .alpha = 1.0f,
                               .a = L->scores, .lda = nk, .a_stride = (size_t)n * nk,
                               .b = v.buf, .b_off = v.off + b * v.bstride + kvh0 * dh, .ldb = v.ld, .b_stride = kv_step,
                               .c = o.buf, .c_off = o.off + b * o.bstride + h0 * dh, .ldc = o.ld, .c_stride = dh,
                               .batch = hc, .what = "gemm pv"};
            LF_TRY(lf__gemm(ctx, &pv, &L->tl));
        }
    }
    return LF_OK;
}

static lf_status check_forward(lf_attention *L, int batch, int n, const int32_t *lengths)
{
    lf_context *ctx = L->ctx;
    if (batch <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "batch must be positive, got %d", batch);
    if (n <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "n must be positive, got %d", n);
    if (n > L->cfg.max_seq_len)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "n (%d) is beyond max_seq_len (%d)", n, L->cfg.max_seq_len);
    if ((uint64_t)batch * (uint64_t)n > (1u << 30))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "batch x n (%d x %d) is too large", batch, n);
    for (int b = 0; lengths && b < batch; b++)
        if (lengths[b] < 0 || lengths[b] > n)
            return lf__fail(ctx, LF_ERR_ARGUMENT, "lengths[%d] = %d is outside [0, n = %d]", b, lengths[b], n);
    for (int i = 0; i < W_COUNT; i++)
        if (L->slots[i].required && !L->slots[i].set)
            return lf__fail(ctx, LF_ERR_STATE, "weight \"%s\" was never set", L->slots[i].name);
    if (L->shared && !L->shared->set)
        return lf__fail(ctx, LF_ERR_STATE, "the shared projection was never set");
    return LF_OK;
}

static lf_status forward_locked(lf_attention *L, cl_mem x, cl_mem y, int batch, int n, const int32_t *lengths)
{
    lf_context *ctx = L->ctx;
    const lf_attention_config *c = &L->cfg;
    const size_t D = c->d_model, rows = (size_t)batch * n, C = L->cols, q = L->qdim, kv = L->kvdim;
    const size_t kc = (size_t)c->k;

    int32_t *lens = malloc(batch * sizeof *lens);
    if (!lens) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for lengths");
    for (int b = 0; b < batch; b++) lens[b] = lengths ? lengths[b] : n;
    lf_status st = lf__reserve(ctx, &L->lens, &L->lens_cap, batch * sizeof *lens, "lengths");
    if (st == LF_OK) st = lf__upload(ctx, L->lens, 0, lens, batch * sizeof *lens);
    if (st == LF_OK) st = lf__reserve(ctx, &L->qkv, &L->qkv_cap, rows * C * sizeof(float), "Q|K|V");
    if (st == LF_OK) st = lf__reserve(ctx, &L->att, &L->att_cap, rows * q * sizeof(float), "attention output");
    if (st != LF_OK) goto done;
    lf__timeline_reset(&L->tl);
    /* A marker opens the timeline: CLBlast's event covers only its last kernel. */
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, lf__event(&L->tl));
    if (err != CL_SUCCESS) {
        st = lf__cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
        goto done;
    }
    lf__event_done(&L->tl, NULL);

    const bool lin = c->mode == LF_MODE_LINFORMER;
    const bool input_side = lin && c->position == LF_POSITION_INPUT;
    /* Q, K, V = x W^T (only Q when the sequence projection comes first) */
    lf_gemm_args g = {.trans_b = true, .m = rows, .n = input_side ? q : C, .k = D, .alpha = 1.0f,
                      .a = x, .lda = D, .b = L->w_qkv, .ldb = D, .c = L->qkv, .ldc = C,
                      .what = input_side ? "gemm q" : "gemm qkv"};
    if ((st = lf__gemm(ctx, &g, &L->tl)) != LF_OK) goto done;
    if ((st = bias_rows(L, L->qkv, 0, (int)C, input_side ? (int)q : (int)C, (int)rows, L->b_qkv, 0,
                        c->bias_q || c->bias_k || c->bias_v, n, false)) != LF_OK) goto done;

    lf_view qv = {L->qkv, 0, (int)C, (size_t)n * C}, ov = {L->att, 0, (int)q, (size_t)n * q};
    lf_view kview = {L->qkv, q, (int)C, (size_t)n * C}, vview = {L->qkv, c->share_kv ? q : q + kv, (int)C, (size_t)n * C};
    int key_count = 0;
    if (lin) {
        const size_t comp_ld = L->groups * kv;
        if ((st = lf__reserve(ctx, &L->comp, &L->comp_cap, batch * kc * comp_ld * sizeof(float), "K~|V~")) != LF_OK)
            goto done;
        if (!input_side) {
            st = seq_project(L, L->qkv, q, (int)C, (int)kv, n, L->comp, (int)comp_ld, (int)kv, L->dh, L->groups,
                             batch, lens);
        } else {
            /* E x (and F x), then K~ = (E x) Wk^T + bk, V~ = (F x) Wv^T + bv */
            const int xgroups = L->f_separate ? 2 : 1;
            const size_t xc_ld = xgroups * D;
            st = lf__reserve(ctx, &L->xc, &L->xc_cap, batch * kc * xc_ld * sizeof(float), "E x|F x");
            if (st == LF_OK)
                st = seq_project(L, x, 0, (int)D, 0, n, L->xc, (int)xc_ld, (int)D, (int)D, xgroups, batch, lens);
            for (int gi = 0; st == LF_OK && gi < L->groups; gi++) {
                lf_gemm_args kvg = {.trans_b = true, .m = batch * kc, .n = kv, .k = D, .alpha = 1.0f,
                                    .a = L->xc, .a_off = (xgroups == 2 ? gi : 0) * D, .lda = xc_ld,
                                    .b = L->w_qkv, .b_off = (q + gi * kv) * D, .ldb = D,
                                    .c = L->comp, .c_off = gi * kv, .ldc = comp_ld, .what = "gemm kv"};
                st = lf__gemm(ctx, &kvg, &L->tl);
            }
            if (st == LF_OK)
                st = bias_rows(L, L->comp, 0, (int)comp_ld, (int)comp_ld, (int)(batch * kc), L->b_qkv,
                               q, c->bias_k || c->bias_v, (int)kc, false);
        }
        if (st != LF_OK) goto done;
        kview = (lf_view){L->comp, 0, (int)comp_ld, kc * comp_ld};
        vview = (lf_view){L->comp, c->share_kv ? 0 : kv, (int)comp_ld, kc * comp_ld};
        key_count = (int)kc;
    }

    const bool tiled = c->mode == LF_MODE_FLASH || (lin && c->path == LF_PATH_FUSED);
    st = tiled ? attention_tiled(L, qv, kview, vview, ov, batch, n, key_count)
               : attention_gemm(L, qv, kview, vview, ov, batch, n, key_count, lens);
    if (st != LF_OK) goto done;

    /* y = O Wo^T + bo, padded rows 0 */
    lf_gemm_args og = {.trans_b = true, .m = rows, .n = D, .k = q, .alpha = 1.0f,
                       .a = L->att, .lda = q, .b = L->w_o, .ldb = q, .c = y, .ldc = D, .what = "gemm out"};
    if ((st = lf__gemm(ctx, &og, &L->tl)) != LF_OK) goto done;
    st = bias_rows(L, y, 0, (int)D, (int)D, (int)rows, L->b_o, 0, c->bias_out, n, true);
done:
    free(lens);
    return st;
}

static lf_status check_buffer(lf_context *ctx, cl_mem buf, size_t need, const char *what)
{
    if (!buf) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is NULL", what);
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is not a valid cl_mem: %s", what, lf_cl_error_string(err));
    if (owner != ctx->cl) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s belongs to another cl_context", what);
    if (size < need)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s holds %zu bytes, needs %zu", what, size, need);
    return LF_OK;
}

lf_status lf_attention_forward_cl(lf_attention *layer, cl_mem x, cl_mem y, int batch, int n,
                                  const int32_t *lengths)
{
    if (!layer) return LF_ERR_ARGUMENT;
    lf_context *ctx = layer->ctx;
    pthread_mutex_lock(&ctx->lock);
    lf_status st = check_forward(layer, batch, n, lengths);
    const size_t bytes = (size_t)batch * n * layer->cfg.d_model * sizeof(float);
    if (st == LF_OK) st = check_buffer(ctx, x, bytes, "x");
    if (st == LF_OK) st = check_buffer(ctx, y, bytes, "y");
    if (st == LF_OK && x == y) st = lf__fail(ctx, LF_ERR_ARGUMENT, "x and y must be different buffers");
    if (st == LF_OK) st = forward_locked(layer, x, y, batch, n, lengths);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

lf_status lf_attention_forward(lf_attention *layer, const float *x, float *y, int batch, int n,
                               const int32_t *lengths)
{
    if (!layer) return LF_ERR_ARGUMENT;
    lf_context *ctx = layer->ctx;
    if (!x) return lf__fail(ctx, LF_ERR_ARGUMENT, "x is NULL");
    if (!y) return lf__fail(ctx, LF_ERR_ARGUMENT, "y is NULL");
    pthread_mutex_lock(&ctx->lock);
    lf_status st = check_forward(layer, batch, n, lengths);
    const size_t bytes = (size_t)batch * n * layer->cfg.d_model * sizeof(float);
    if (st == LF_OK) st = lf__reserve(ctx, &layer->x, &layer->x_cap, bytes, "x");
    if (st == LF_OK) st = lf__reserve(ctx, &layer->y, &layer->y_cap, bytes, "y");
    if (st == LF_OK) st = lf__upload(ctx, layer->x, 0, x, bytes);
    if (st == LF_OK) st = forward_locked(layer, layer->x, layer->y, batch, n, lengths);
    if (st == LF_OK) st = lf__download(ctx, layer->y, 0, y, bytes);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

lf_status lf_attention_last_profile(lf_attention *layer, lf_stage_time *stages, size_t capacity, size_t *count)
{
    if (!layer) return LF_ERR_ARGUMENT;
    if (!count) return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "count is NULL");
    if (!stages && capacity) return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "stages is NULL but capacity is %zu", capacity);
    pthread_mutex_lock(&layer->ctx->lock);
    lf_status st = lf__timeline_stages(layer->ctx, &layer->tl, stages, capacity, count);
    pthread_mutex_unlock(&layer->ctx->lock);
    return st;
}

lf_status lf_attention_last_time_ms(lf_attention *layer, double *ms)
{
    if (!layer) return LF_ERR_ARGUMENT;
    if (!ms) return lf__fail(layer->ctx, LF_ERR_ARGUMENT, "ms is NULL");
    pthread_mutex_lock(&layer->ctx->lock);
    lf_status st = lf__timeline_ms(layer->ctx, &layer->tl, ms);
    pthread_mutex_unlock(&layer->ctx->lock);
    return st;
}
