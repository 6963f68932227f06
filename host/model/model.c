/*
 * model.c - the model object: a stack of layers (each an attention plan with
 * its weights, LayerNorms and a feed-forward network), the embeddings and the
 * head around them, their weights by name, and what the public API reports.
 * The forward is in model_forward.c, loading from a file in model_load.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "weight_shape.h"

static const char *const layer_names[LF_L_COUNT] = {"ln1_g", "ln1_b", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2"};
static const char *const model_names[LF_M_COUNT] = {"tok",  "pos",    "emb_ln_g", "emb_ln_b", "final_ln_g",
                                                    "final_ln_b", "head_w", "head_b", "shared_e", "head_dense_w",
                                                    "head_dense_b", "head_ln_g", "head_ln_b"};

const char *lf__model_tensor_name(int t) { return t >= 0 && t < LF_M_COUNT ? model_names[t] : "?"; }

const char *lf_model_kind_name(lf_model_kind kind)
{
    switch (kind) {
    case LF_MODEL_ENCODER: return "encoder";
    case LF_MODEL_TOKEN_ENCODER: return "token encoder";
    case LF_MODEL_LM: return "language model";
    }
    return "unknown";
}

const char *lf_activation_name(lf_activation act)
{
    switch (act) {
    case LF_ACT_GELU: return "gelu";
    case LF_ACT_GELU_TANH: return "gelu_tanh";
    case LF_ACT_RELU: return "relu";
    }
    return "unknown";
}

const char *lf_norm_name(lf_norm norm)
{
    switch (norm) {
    case LF_NORM_PRE: return "pre";
    case LF_NORM_POST: return "post";
    }
    return "unknown";
}

lf_status lf_activation_parse(const char *name, lf_activation *act)
{
    if (!name || !act) return LF_ERR_ARGUMENT;
    static const struct {
        const char *name;
        lf_activation act;
    } names[] = {{"gelu", LF_ACT_GELU},           {"gelu_tanh", LF_ACT_GELU_TANH}, {"gelu_accurate", LF_ACT_GELU_TANH},
                 {"gelu_fast", LF_ACT_GELU_TANH}, {"relu", LF_ACT_RELU}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return *act = names[i].act, LF_OK;
    return LF_ERR_ARGUMENT;
}

lf_status lf_norm_parse(const char *name, lf_norm *norm)
{
    if (!name || !norm) return LF_ERR_ARGUMENT;
    for (int v = LF_NORM_PRE; v <= LF_NORM_POST; v++)
        if (strcmp(name, lf_norm_name((lf_norm)v)) == 0) return *norm = (lf_norm)v, LF_OK;
    return LF_ERR_ARGUMENT;
}

/* ---- Weight sizes ---- */

static size_t ff_rows(const lf_model_spec *c) { return (size_t)c->info.d_ff * (c->info.glu ? 2 : 1); }

#define SHAPE1(a) ((lf_shape){1, {(a)}})
#define SHAPE2(a, b) ((lf_shape){2, {(a), (b)}})

static lf_shape layer_shape(const lf_model_spec *c, lf_layer_tensor t)
{
    const size_t D = c->info.d_model;
    switch (t) {
    case LF_L_LN1_G: case LF_L_LN1_B: case LF_L_LN2_G: case LF_L_LN2_B: return SHAPE1(D);
    case LF_L_W1: return SHAPE2(ff_rows(c), D);
    case LF_L_B1: return SHAPE1(c->bias_ff1 ? ff_rows(c) : 0);
    case LF_L_W2: return SHAPE2(D, (size_t)c->info.d_ff);
    case LF_L_B2: return SHAPE1(c->bias_ff2 ? D : 0);
    case LF_L_COUNT: break;
    }
    return SHAPE1(0);
}

static lf_shape model_shape(const lf_model_spec *c, lf_model_tensor t)
{
    const size_t D = c->info.d_model, V = c->info.vocab;
    const bool tokens = c->info.kind != LF_MODEL_ENCODER, lm = c->info.kind == LF_MODEL_LM;
    switch (t) {
    case LF_M_TOK: return SHAPE2(tokens ? V : 0, D);
    case LF_M_POS: return SHAPE2((size_t)c->positions, D);
    case LF_M_EMB_G: case LF_M_EMB_B: return SHAPE1(c->emb_norm ? D : 0);
    case LF_M_FINAL_G: case LF_M_FINAL_B: return SHAPE1(c->final_norm ? D : 0);
    case LF_M_HEAD_W: return SHAPE2(lm ? V : 0, D);
    case LF_M_HEAD_B: return SHAPE1(lm && c->head_bias ? V : 0);
    case LF_M_SHARED_E: return SHAPE2(c->info.layerwise ? (size_t)c->shared_k : 0, (size_t)c->shared_n);
    case LF_M_HEAD_DENSE_W: return SHAPE2(lm && c->head_dense ? D : 0, D);
    case LF_M_HEAD_DENSE_B: case LF_M_HEAD_LN_G: case LF_M_HEAD_LN_B: return SHAPE1(lm && c->head_dense ? D : 0);
    case LF_M_COUNT: break;
    }
    return SHAPE1(0);
}

static size_t layer_count(const lf_model_spec *c, lf_layer_tensor t)
{
    const lf_shape s = layer_shape(c, t);
    return lf__shape_count(&s);
}

static size_t model_count(const lf_model_spec *c, lf_model_tensor t)
{
    const lf_shape s = model_shape(c, t);
    return lf__shape_count(&s);
}

/* ---- Creating ---- */

static lf_status check_config(lf_context *ctx, const lf_model_spec *c)
{
    const lf_model_info *i = &c->info;
    if (i->kind < LF_MODEL_ENCODER || i->kind > LF_MODEL_LM)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "kind %d is not an lf_model_kind", (int)i->kind);
    if (i->layers <= 0 || i->d_model <= 0 || i->d_ff <= 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "layers (%d), d_model (%d) and d_ff (%d) must be positive", i->layers,
                        i->d_model, i->d_ff);
    if (i->norm < LF_NORM_PRE || i->norm > LF_NORM_POST)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "norm %d is not an lf_norm", (int)i->norm);
    if (i->activation < LF_ACT_GELU || i->activation > LF_ACT_RELU)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "activation %d is not an lf_activation", (int)i->activation);
    if (i->kind != LF_MODEL_ENCODER && i->vocab <= 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "a %s needs a vocabulary, got %d", lf_model_kind_name(i->kind), i->vocab);
    if (i->layerwise && (c->shared_k <= 0 || c->shared_n <= 0))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "the layerwise projection needs its size [k, n]");
    return LF_OK;
}

/* Layer i's attention: resolved into its plan; the layerwise projection's size is the model's. */
static lf_status plan_layer(lf_model *m, int i, const lf_attention_config *a)
{
    const lf_model_spec *c = &m->cfg;
    const bool layerwise = a->mode == LF_MODE_LINFORMER && a->sharing == LF_SHARE_LAYERWISE;
    if (a->d_model != c->info.d_model)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "layer %d: d_model %d, the model's is %d", i, a->d_model,
                        c->info.d_model);
    if (layerwise != (bool)c->info.layerwise)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "layer %d: %s the model's layerwise projection", i,
                        layerwise ? "uses" : "does not use");
    if (layerwise && (a->k != c->shared_k || a->max_seq_len != c->shared_n))
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "layer %d: k %d and max_seq_len %d, the layerwise projection is [%d, %d]",
                        i, a->k, a->max_seq_len, c->shared_k, c->shared_n);
    if (a->mode == LF_MODE_LINFORMER && a->proj_kind != LF_PROJ_LEARNED)
        return lf__fail(m->ctx, LF_ERR_UNSUPPORTED, "layer %d: a model's projections are learned matrices", i);
    lf_status st = lf__plan_resolve(a, &m->ctx->info, layerwise, &m->layer[i].plan, m->ctx->error,
                                    sizeof m->ctx->error);
    if (st != LF_OK) {
        char what[LF_MSG_SIZE];
        snprintf(what, sizeof what, "%s", m->ctx->error);
        lf__fail(m->ctx, st, "layer %d: %s", i, what);
    }
    return st;
}

static lf_status alloc_zero(lf_model *m, size_t floats, const char *what, cl_mem *buf)
{
    if (!floats) return LF_OK;
    LF_TRY(lf__alloc(m->ctx, floats * sizeof(float), what, buf));
    const float zero = 0.0f;
    LF_CL_CHECK(m->ctx, clEnqueueFillBuffer(m->ctx->queue, *buf, &zero, sizeof zero, 0, floats * sizeof(float), 0, NULL,
                                            NULL),
                "clEnqueueFillBuffer(weights)");
    m->weight_bytes += floats * sizeof(float);
    return LF_OK;
}

static lf_status allocate(lf_model *m)
{
    for (int i = 0; i < m->cfg.info.layers; i++) {
        lf_model_layer *L = &m->layer[i];
        for (int b = 0; b < LF_BUF_COUNT; b++) LF_TRY(alloc_zero(m, L->plan.buf_floats[b], "layer weights", &L->w.buf[b]));
        for (int t = 0; t < LF_L_COUNT; t++)
            LF_TRY(alloc_zero(m, layer_count(&m->cfg, (lf_layer_tensor)t), layer_names[t], &L->t[t]));
    }
    for (int t = 0; t < LF_M_COUNT; t++)
        LF_TRY(alloc_zero(m, model_count(&m->cfg, (lf_model_tensor)t), model_names[t], &m->m[t]));
    for (int i = 0; i < m->cfg.info.layers; i++) m->layer[i].w.shared_e = m->m[LF_M_SHARED_E];
    LF_CL_CHECK(m->ctx, clFinish(m->ctx->queue), "clFinish");
    return LF_OK;
}

static void release(lf_model *m)
{
    for (int i = 0; m->layer && i < m->cfg.info.layers; i++) {
        for (int b = 0; b < LF_BUF_COUNT; b++) lf__release(&m->layer[i].w.buf[b]);
        for (int t = 0; t < LF_L_COUNT; t++) lf__release(&m->layer[i].t[t]);
    }
    for (int t = 0; t < LF_M_COUNT; t++) lf__release(&m->m[t]);
    for (int a = 0; a < LF_A_COUNT; a++) lf__release(&m->act[a]);
    lf__workspace_release(&m->ws);
    lf__timeline_reset(&m->tl);
}

static lf_status create(lf_context *ctx, lf_model *m, const lf_attention_config *attn)
{
    LF_TRY(check_config(ctx, &m->cfg));
    LF_TRY(lf__kernel_params(&ctx->info, &m->params, ctx->error, sizeof ctx->error));
    if (!(m->layer = calloc(m->cfg.info.layers, sizeof *m->layer)))
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %d layers", m->cfg.info.layers);
    int max_len = m->cfg.positions ? m->cfg.positions - m->cfg.pos_offset : 1 << 24;
    for (int i = 0; i < m->cfg.info.layers; i++) {
        LF_TRY(plan_layer(m, i, &attn[i]));
        if (attn[i].max_seq_len < max_len) max_len = attn[i].max_seq_len;
    }
    if (max_len <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "the positional embedding has no row for position 0");
    m->cfg.info.max_seq_len = max_len;
    m->cfg.info.heads = m->layer[0].plan.cfg.heads;
    LF_TRY(lf__context_lock(ctx));
    lf_status st = allocate(m);
    lf__context_unlock(ctx);
    return st;
}

lf_status lf__model_create(lf_context *ctx, const lf_model_spec *cfg, const lf_attention_config *attn,
                           lf_model **out)
{
    *out = NULL;
    lf_model *m = calloc(1, sizeof *m);
    if (!m) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for the model");
    m->ctx = ctx;
    m->cfg = *cfg;
    lf_status st = create(ctx, m, attn);
    if (st != LF_OK) {
        release(m);
        free(m->layer);
        free(m);
        return st;
    }
    lf__context_retain(ctx);
    *out = m;
    return LF_OK;
}

void lf_model_config_init(lf_model_config *cfg, lf_model_kind kind, int layers, int d_model, int d_ff, int vocab)
{
    if (!cfg) return;
    *cfg = (lf_model_config){.kind = kind, .layers = layers, .d_model = d_model, .d_ff = d_ff, .vocab = vocab,
                             .norm = LF_NORM_PRE, .activation = LF_ACT_GELU, .bias_ff1 = 1, .bias_ff2 = 1,
                             .embed_scale = 1.0f, .eps = 1e-5f, .head_bias = 1};
}

/* The spec of a model built by hand; the layerwise projection's size from its layers. */
static lf_status spec_from_config(lf_context *ctx, const lf_model_config *c, const lf_attention_config *layers,
                                  lf_model_spec *s)
{
    if (!(c->eps > 0.0f) || !(c->embed_scale == c->embed_scale) || c->positions < 0 || c->pos_offset < 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "eps must be > 0, embed_scale a number, positions and pos_offset >= 0");
    *s = (lf_model_spec){.info = {.kind = c->kind, .layout = "host arrays", .layers = c->layers, .d_model = c->d_model,
                                  .d_ff = c->d_ff, .vocab = c->vocab, .norm = c->norm, .activation = c->activation,
                                  .glu = c->glu != 0},
                         .positions = c->kind == LF_MODEL_ENCODER ? 0 : c->positions, .pos_offset = c->pos_offset,
                         .embed_scale = c->embed_scale, .eps = c->eps, .bias_ff1 = c->bias_ff1 != 0,
                         .bias_ff2 = c->bias_ff2 != 0, .head_bias = c->head_bias != 0, .emb_norm = c->emb_norm != 0,
                         .final_norm = c->final_norm != 0};
    for (int i = 0; i < c->layers; i++)
        if (layers[i].mode == LF_MODE_LINFORMER && layers[i].sharing == LF_SHARE_LAYERWISE) {
            s->info.layerwise = 1, s->shared_k = layers[i].k, s->shared_n = layers[i].max_seq_len;
            break;
        }
    return LF_OK;
}

lf_status lf_model_create(lf_context *ctx, const lf_model_config *cfg, const lf_attention_config *layers,
                          lf_model **out)
{
    if (out) *out = NULL;
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    if (!cfg) return lf__fail(ctx, LF_ERR_ARGUMENT, "cfg is NULL");
    if (!layers) return lf__fail(ctx, LF_ERR_ARGUMENT, "layers is NULL");
    if (cfg->layers <= 0 || cfg->layers > 65536)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "layers must be in [1, 65536], got %d", cfg->layers);
    lf_model_spec spec;
    LF_TRY(spec_from_config(ctx, cfg, layers, &spec));
    return lf__model_create(ctx, &spec, layers, out);
}

lf_status lf_model_set_weight(lf_model *model, int layer, const char *name, const float *data, size_t count)
{
    if (!model) return LF_ERR_ARGUMENT;
    if (!name) return lf__fail(model->ctx, LF_ERR_ARGUMENT, "name is NULL");
    if (!data) return lf__fail(model->ctx, LF_ERR_ARGUMENT, "data for weight \"%s\" is NULL", name);
    return lf__model_set(model, layer, name, NULL, 0, data, count);
}

lf_status lf_model_set_weight_shaped(lf_model *model, int layer, const char *name, const size_t *dims, size_t ndims,
                                     const float *data)
{
    if (!model) return LF_ERR_ARGUMENT;
    if (!name || !dims) return lf__fail(model->ctx, LF_ERR_ARGUMENT, "%s is NULL", !name ? "name" : "dims");
    if (!data) return lf__fail(model->ctx, LF_ERR_ARGUMENT, "data for weight \"%s\" is NULL", name);
    return lf__model_set(model, layer, name, dims, ndims, data, 0);
}

void lf_model_free(lf_model *model)
{
    if (!model || lf__context_inherited(model->ctx)) return;
    lf_context *ctx = model->ctx;
    pthread_mutex_lock(&ctx->lock);
    clFinish(ctx->queue);
    release(model);
    pthread_mutex_unlock(&ctx->lock);
    free(model->layer);
    free(model);
    lf__context_release(ctx);
}

/* ---- Weights by name ---- */

/* The buffer, offset and shape of a weight; *flag is its "set" mark. */
typedef struct {
    cl_mem buf;
    size_t offset;
    lf_shape shape;
    bool *flag;
} lf_weight_ref;

static bool find_weight(lf_model *m, int layer, const char *name, lf_weight_ref *r)
{
    if (layer < 0) {
        for (int t = 0; t < LF_M_COUNT; t++)
            if (!strcmp(name, model_names[t]))
                return *r = (lf_weight_ref){m->m[t], 0, model_shape(&m->cfg, (lf_model_tensor)t), &m->m_set[t]}, true;
        return false;
    }
    lf_model_layer *L = &m->layer[layer];
    for (int t = 0; t < LF_L_COUNT; t++)
        if (!strcmp(name, layer_names[t]))
            return *r = (lf_weight_ref){L->t[t], 0, layer_shape(&m->cfg, (lf_layer_tensor)t), &L->set[LF_W_COUNT + t]},
                   true;
    for (int w = 0; w < LF_W_COUNT; w++) {
        const lf_weight_slot *s = &L->plan.weights[w];
        if (!strcmp(name, s->name))
            return *r = (lf_weight_ref){L->w.buf[s->buf], s->offset, lf__slot_shape(&L->plan, (lf_weight_id)w), &L->set[w]}, true;
    }
    return false;
}

size_t lf__model_weight_count(const lf_model *m, int layer, const char *name)
{
    lf_weight_ref r;
    return find_weight((lf_model *)m, layer, name, &r) ? lf__shape_count(&r.shape) : 0;
}

lf_status lf__model_set(lf_model *m, int layer, const char *name, const size_t *dims, size_t ndims, const float *data,
                        size_t count)
{
    lf_context *ctx = m->ctx;
    if (layer < -1 || layer >= m->cfg.info.layers)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "layer %d is outside [-1, %d)", layer, m->cfg.info.layers);
    lf_weight_ref r;
    const size_t floats = find_weight(m, layer, name, &r) ? lf__shape_count(&r.shape) : 0;
    if (!floats) {
        if (layer < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "this model has no weight \"%s\" of its own", name);
        return lf__fail(ctx, LF_ERR_ARGUMENT, "layer %d of this model has no weight \"%s\"", layer, name);
    }
    char what[64];
    if (layer < 0) snprintf(what, sizeof what, "weight \"%s\" of the model", name);
    else snprintf(what, sizeof what, "weight \"%s\" of layer %d", name, layer);
    LF_TRY(lf__weight_check(ctx, what, &r.shape, dims, ndims, count));
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__upload(ctx, r.buf, r.offset * sizeof(float), data, floats * sizeof(float));
    if (st == LF_OK) *r.flag = true;
    lf__context_unlock(ctx);
    return st;
}

/* The first weight that exists and was never set, as a message; LF_OK when none. */
lf_status lf__model_check_set(lf_model *m)
{
    for (int i = 0; i < m->cfg.info.layers; i++) {
        const lf_model_layer *L = &m->layer[i];
        for (int w = 0; w < LF_W_COUNT; w++)
            if (L->plan.weights[w].count && !L->set[w])
                return lf__fail(m->ctx, LF_ERR_STATE, "weight \"%s\" of layer %d was never set", L->plan.weights[w].name, i);
        for (int t = 0; t < LF_L_COUNT; t++)
            if (layer_count(&m->cfg, (lf_layer_tensor)t) && !L->set[LF_W_COUNT + t])
                return lf__fail(m->ctx, LF_ERR_STATE, "weight \"%s\" of layer %d was never set", layer_names[t], i);
    }
    for (int t = 0; t < LF_M_COUNT; t++)
        if (model_count(&m->cfg, (lf_model_tensor)t) && !m->m_set[t])
            return lf__fail(m->ctx, LF_ERR_STATE, "weight \"%s\" of the model was never set", model_names[t]);
    return LF_OK;
}

/* ---- What the model reports ---- */

lf_status lf_model_info_get(const lf_model *model, lf_model_info *info)
{
    if (!model || !info) return LF_ERR_ARGUMENT;
    *info = model->cfg.info;
    return LF_OK;
}

lf_status lf_model_device_bytes(const lf_model *model, size_t *weights, size_t *workspace)
{
    if (!model) return LF_ERR_ARGUMENT;
    LF_TRY(lf__context_lock(model->ctx));
    if (weights) *weights = model->weight_bytes;
    if (workspace) {
        *workspace = lf__workspace_bytes(&model->ws);
        for (int a = 0; a < LF_A_COUNT; a++) *workspace += model->act_cap[a];
    }
    lf__context_unlock(model->ctx);
    return LF_OK;
}

lf_status lf_model_last_profile(lf_model *model, lf_stage_time *stages, size_t capacity, size_t *count)
{
    if (!model) return LF_ERR_ARGUMENT;
    return lf__last_profile(model->ctx, &model->tl, stages, capacity, count);
}

lf_status lf_model_last_time_ms(lf_model *model, double *ms)
{
    if (!model) return LF_ERR_ARGUMENT;
    return lf__last_time_ms(model->ctx, &model->tl, ms);
}
