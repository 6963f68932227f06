/*
 * model_config.c - a loaded model's configs: sizes from the tensors' shapes
 * (every shape checked against them), per layer; what shapes cannot say from
 * the caller's options or the file's __metadata__ ("heads", "activation",
 * "norm", "eps", "padding_idx", "embed_scale", "causal"), which must agree.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_load.h"

#define FAIL(status, ...) lf__fail(s->ctx, (status), __VA_ARGS__)

static lf_status expect_shape(const lf_source *s, const lf_st_tensor *t, int64_t rows, int64_t cols)
{
    return lf__expect_shape(s->ctx, s->path, t, rows, cols);
}

/* ---- __metadata__ against the caller ---- */

/* An integer entry in [lo, hi], written plainly; *out unchanged when absent. */
static lf_status meta_int(const lf_source *s, const char *key, long lo, long hi, long *out)
{
    const char *v = lf_st_meta(s->f, key);
    if (!v) return LF_OK;
    const long x = strtol(v, NULL, 10);
    if (!lf__plain_number(v, false) || x < lo || x > hi)
        return FAIL(LF_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", not an integer in [%ld, %ld]", s->path, key, v, lo, hi);
    *out = x;
    return LF_OK;
}

/* A number >= 0, written plainly, that a float holds: neither inf nor, when
 * not 0, 0 (as 1e300 and 1e-300 would become); *out unchanged when absent. */
static lf_status meta_double(const lf_source *s, const char *key, double *out)
{
    const char *v = lf_st_meta(s->f, key);
    if (!v) return LF_OK;
    const double x = strtod(v, NULL);
    if (!lf__plain_number(v, true) || x < 0 || !isfinite((float)x) || (x != 0 && (float)x == 0))
        return FAIL(LF_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", not a decimal number >= 0 in float range",
                    s->path, key, v);
    *out = x;
    return LF_OK;
}

/* A named choice (activation, norm): given (0 = not), in __metadata__, or the default. */
static lf_status choice(const lf_source *s, const char *key, int given, int fallback,
                        lf_status (*parse)(const char *, int *), const char *(*name)(int), int *out)
{
    const char *v = lf_st_meta(s->f, key);
    int from_file = 0;
    if (v && parse(v, &from_file) != LF_OK)
        return FAIL(LF_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", which is not known", s->path, key, v);
    if (given && v && given != from_file)
        return FAIL(LF_ERR_ARGUMENT, "%s %s was given but %s says %s (__metadata__ \"%s\")", key, name(given), s->path,
                    v, key);
    *out = given ? given : v ? from_file : fallback;
    return LF_OK;
}

static lf_status parse_act(const char *v, int *out) { return lf_activation_parse(v, (lf_activation *)out); }
static lf_status parse_norm(const char *v, int *out) { return lf_norm_parse(v, (lf_norm *)out); }
static const char *act_name(int v) { return lf_activation_name((lf_activation)v); }
static const char *norm_name(int v) { return lf_norm_name((lf_norm)v); }

static lf_status head_count(const lf_source *s, int given, int *heads)
{
    long v = 0;
    LF_TRY(meta_int(s, "heads", 1, 65536, &v));
    if (given && v && v != given)
        return FAIL(LF_ERR_ARGUMENT, "heads %d was given but %s says %ld (__metadata__ \"heads\")", given, s->path, v);
    *heads = given ? given : (int)v;
    if (!*heads) return FAIL(LF_ERR_ARGUMENT, "%s: the head count is neither given nor in __metadata__ \"heads\"", s->path);
    return LF_OK;
}

/* __metadata__ "causal", read as lf_attention_load reads it: "1" cannot be
 * honoured, as a model's layers project with learned E, F (a causal
 * Linformer needs windows: see linformer.h), so it is refused. */
static lf_status causal(const lf_source *s)
{
    long v = 0;
    LF_TRY(meta_int(s, "causal", 0, 1, &v));
    if (!v) return LF_OK;
    return FAIL(LF_ERR_UNSUPPORTED, "%s: __metadata__ \"causal\" is \"1\", but causal Linformer needs compressed slots "
                                    "with local support (pooling or convolution windows), and a model's layers project "
                                    "with learned matrices E, F that mix every position", s->path);
}

/* ---- Each layer ---- */

static lf_status layer_attention(const lf_source *s, int i, int heads, lf_attention_config *c)
{
    const lf_layer_tensors l = {.ctx = s->ctx, .path = s->path, .layout = s->layout, .stem = s->stem, .layer = i,
                                .t = s->t[i], .shared_e = s->m[LF_M_SHARED_E]};
    return lf__layer_config(&l, heads, c);
}

/* The feed-forward and norms of layer i; layer 0 sets d_ff, glu and the biases, the others must agree. */
static lf_status layer_ffn(const lf_source *s, int i, lf_model_spec *cfg)
{
    const lf_st_tensor *const *t = s->t[i];
    const int64_t D = cfg->info.d_model, R = t[LF_R_W1]->shape[0], F = t[LF_R_W2]->shape[1];
    if (F <= 0 || F > (1 << 24) || (R != F && R != 2 * F))
        return FAIL(LF_ERR_FORMAT, "%s: tensors \"%s\" [%lld, ...] and \"%s\" [..., %lld] do not make a feed-forward "
                                   "(rows of the first = columns of the second, or twice that for GLU)",
                    s->path, t[LF_R_W1]->name, (long long)R, t[LF_R_W2]->name, (long long)F);
    if (i == 0) {
        cfg->info.d_ff = (int)F, cfg->info.glu = R == 2 * F;
        cfg->bias_ff1 = t[LF_R_B1] != NULL, cfg->bias_ff2 = t[LF_R_B2] != NULL;
    }
    if (F != cfg->info.d_ff || (R == 2 * F) != cfg->info.glu || (t[LF_R_B1] != NULL) != cfg->bias_ff1 ||
        (t[LF_R_B2] != NULL) != cfg->bias_ff2)
        return FAIL(LF_ERR_UNSUPPORTED, "%s: layer %d's feed-forward differs from layer 0's in width, gating or biases",
                    s->path, i);
    const int64_t shapes[][3] = {{LF_R_W1, R, D},     {LF_R_B1, R, 0},     {LF_R_W2, D, F},     {LF_R_B2, D, 0},
                                 {LF_R_LN1_G, D, 0}, {LF_R_LN1_B, D, 0}, {LF_R_LN2_G, D, 0}, {LF_R_LN2_B, D, 0}};
    for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
        LF_TRY(expect_shape(s, t[shapes[j][0]], shapes[j][1], shapes[j][2]));
    return LF_OK;
}

/* ---- The model around the layers ---- */

static lf_status pair(const lf_source *s, lf_model_tensor g, lf_model_tensor b, int64_t D, int *present)
{
    const lf_st_tensor *const *m = s->m;
    if (!m[g] != !m[b])
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" without its pair", s->path, (m[g] ? m[g] : m[b])->name);
    *present = m[g] != NULL;
    LF_TRY(expect_shape(s, m[g], D, 0));
    return expect_shape(s, m[b], D, 0);
}

static lf_status model_tensors(const lf_source *s, lf_model_spec *cfg)
{
    const lf_st_tensor *const *m = s->m;
    const int64_t D = cfg->info.d_model;
    const lf_embed_rule embed = s->layout->embed;
    if (embed == LF_EMBED_NONE && (m[LF_M_TOK] || m[LF_M_POS] || m[LF_M_HEAD_W]))
        return FAIL(LF_ERR_FORMAT, "%s: embeddings or logits beside a Linformer that is not wrapped as "
                                   "LinformerLM (\"linformer.net.layers...\")", s->path);
    if (embed == LF_EMBED_REQUIRED && (!m[LF_M_TOK] || !m[LF_M_HEAD_W]))
        return FAIL(LF_ERR_FORMAT, "%s: %s needs \"%s%s\" and \"%s%s\"", s->path, s->layout->name, s->stem,
                    lf__layout_model_role(s->layout, "tok")->suffix, s->stem,
                    lf__layout_model_role(s->layout, "head_w")->suffix);
    if (m[LF_M_POS] && !m[LF_M_TOK])
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" without token embeddings", s->path, m[LF_M_POS]->name);
    const bool logits = embed == LF_EMBED_REQUIRED || m[LF_M_HEAD_DENSE_W];
    cfg->info.kind = logits ? LF_MODEL_LM : m[LF_M_TOK] ? LF_MODEL_TOKEN_ENCODER : LF_MODEL_ENCODER;
    const int64_t V = m[LF_M_TOK] ? m[LF_M_TOK]->shape[0] : 0, P = m[LF_M_POS] ? m[LF_M_POS]->shape[0] : 0;
    if (V < 0 || V > (1 << 24) || P > (1 << 24))
        return FAIL(LF_ERR_FORMAT, "%s: the embeddings' sizes are out of range", s->path);
    if (m[LF_M_TOK] && V == 0)
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" has 0 rows: a vocabulary needs at least one token", s->path,
                    m[LF_M_TOK]->name);
    cfg->info.vocab = (int)V, cfg->positions = (int)P;
    LF_TRY(expect_shape(s, m[LF_M_TOK], V, D));
    LF_TRY(expect_shape(s, m[LF_M_POS], P, D));
    LF_TRY(expect_shape(s, m[LF_M_HEAD_W], V, D));
    LF_TRY(expect_shape(s, m[LF_M_HEAD_B], V, 0));
    cfg->head_bias = m[LF_M_HEAD_B] != NULL;
    cfg->head_dense = m[LF_M_HEAD_DENSE_W] != NULL;
    LF_TRY(expect_shape(s, m[LF_M_HEAD_DENSE_W], D, D));
    for (int t = LF_M_HEAD_DENSE_B; t <= LF_M_HEAD_LN_B; t++) LF_TRY(expect_shape(s, m[t], D, 0));
    LF_TRY(pair(s, LF_M_EMB_G, LF_M_EMB_B, D, &cfg->emb_norm));
    LF_TRY(pair(s, LF_M_FINAL_G, LF_M_FINAL_B, D, &cfg->final_norm));
    if (s->layerwise) {
        const lf_st_tensor *e = m[LF_M_SHARED_E];
        cfg->info.layerwise = 1, cfg->shared_k = (int)e->shape[0], cfg->shared_n = (int)e->shape[1];
    }
    return LF_OK;
}

/* eps, and fairseq's position offset (padding_idx + 1) and embedding scale. */
static lf_status numbers(const lf_source *s, lf_model_spec *cfg)
{
    double eps = 1e-5, scale = 1.0;
    long padding = s->layout->padding_idx;
    LF_TRY(meta_double(s, "eps", &eps));
    LF_TRY(meta_double(s, "embed_scale", &scale));
    LF_TRY(meta_int(s, "padding_idx", -1, 1 << 20, &padding));
    cfg->eps = (float)eps, cfg->embed_scale = (float)scale, cfg->pos_offset = (int)padding + 1;
    const lf_st_tensor *pos = s->m[LF_M_POS];
    if (pos && cfg->positions <= cfg->pos_offset)
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" has %d rows, but position 0 is row %d (padding_idx %ld + 1): "
                                   "no row for any position", s->path, pos->name, cfg->positions, cfg->pos_offset, padding);
    return LF_OK;
}

lf_status lf__model_source_config(lf_source *s, const lf_model_options *opts, lf_model_spec *cfg,
                                  lf_attention_config *attn)
{
    memset(cfg, 0, sizeof *cfg);
    int heads, act = 0, norm = 0;
    LF_TRY(head_count(s, opts->heads, &heads));
    LF_TRY(causal(s));
    LF_TRY(choice(s, "activation", opts->activation, LF_ACT_GELU, parse_act, act_name, &act));
    LF_TRY(choice(s, "norm", opts->norm, s->layout->norm, parse_norm, norm_name, &norm));
    if (s->layout->reversible && norm != LF_NORM_PRE)
        return FAIL(LF_ERR_UNSUPPORTED, "%s: a reversible stack's blocks are pre-norm, not %s", s->path, norm_name(norm));
    cfg->info.layout = s->layout->family;
    cfg->reversible = s->layout->reversible;
    s->layerwise = s->m[LF_M_SHARED_E] != NULL; /* then every layer's E is it (lf__layer_config checks) */
    cfg->info.layers = s->layers, cfg->info.activation = (lf_activation)act, cfg->info.norm = (lf_norm)norm;
    for (int i = 0; i < s->layers; i++) {
        LF_TRY(layer_attention(s, i, heads, &attn[i]));
        cfg->info.d_model = attn[0].d_model;
        if (attn[i].d_model != cfg->info.d_model)
            return FAIL(LF_ERR_FORMAT, "%s: layer %d has d_model %d, layer 0 %d", s->path, i, attn[i].d_model,
                        cfg->info.d_model);
        LF_TRY(layer_ffn(s, i, cfg));
    }
    LF_TRY(model_tensors(s, cfg));
    return numbers(s, cfg);
}
