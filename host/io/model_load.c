/*
 * model_load.c - a model from a safetensors file in the state-dict names of
 * one of layouts.c's rows (lucidrains' Linformer / LinformerLM, reversible or
 * not, or fairseq's Linformer encoder).
 *
 * The file's names say the layout and where the model sits in it (a stem such
 * as "encoder.sentence_encoder." or "model."); every tensor under that stem
 * must be one the layout knows, tensors outside it are not the model's. The
 * shapes give each layer's sizes (per-layer k included), __metadata__ or the
 * caller what shapes cannot say (heads, activation, norm); the two must agree.
 * model_config.c turns the tensors into configs.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_load.h"

static bool ends_with(const char *s, const char *suffix)
{
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- Which layout, and where in the file ---- */

/* The name of a model row's first tensor (layer 0's wq) after the stem. */
static void probe(const lf_layout *l, char *out, size_t size) { lf__layout_layer_name(l, "", 0, LF_R_WQ, out, size); }

/* A model found at `name`, the first row whose first tensor it is (and whose
 * marker is there): its layout and stem. */
static bool candidate(lf_source *s, const char *name, const char *prefix)
{
    for (int r = LF_LAYOUT_FIRST_MODEL; r < LF_LAYOUT_COUNT; r++) {
        const lf_layout *l = &lf__layouts[r];
        char first[LF_LAYOUT_NAME_MAX], marker[LF_LAYOUT_NAME_MAX + LF_NAME_MAX];
        probe(l, first, sizeof first);
        if (!ends_with(name, first)) continue;
        const size_t stem_len = strlen(name) - strlen(first);
        if (stem_len >= sizeof s->stem) return false;
        if (l->marker) {
            snprintf(marker, sizeof marker, "%.*s%s", (int)stem_len, name, l->marker);
            if (!lf_st_find(s->f, marker)) continue;
        }
        memcpy(s->stem, name, stem_len);
        s->stem[stem_len] = 0;
        s->layout = l;
        return !prefix || strcmp(s->stem, prefix) == 0;
    }
    return false;
}

/* No model in the file: say what is there and what each row looks for. */
static lf_status unrecognised(lf_source *s, const char *prefix)
{
    char found[600] = "", expected[1200] = "";
    size_t used = 0;
    for (size_t i = 0; i < s->f->count && i < 6 && used < sizeof found; i++)
        used += snprintf(found + used, sizeof found - used, "%s\"%s\"", i ? ", " : "", s->f->tensors[i].name);
    used = 0;
    for (int r = LF_LAYOUT_FIRST_MODEL; r < LF_LAYOUT_COUNT && used < sizeof expected; r++) {
        const lf_layout *l = &lf__layouts[r];
        char first[LF_LAYOUT_NAME_MAX];
        probe(l, first, sizeof first);
        used += snprintf(expected + used, sizeof expected - used, "%s%s (%s%s%s\"%s\")",
                         r == LF_LAYOUT_FIRST_MODEL ? "" : r + 1 < LF_LAYOUT_COUNT ? ", " : " or ", l->name,
                         l->marker ? "\"" : "", l->marker ? l->marker : "", l->marker ? "\", " : "", first);
    }
    return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: no Linformer model%s%s%s: found %zu tensors (%s%s); expected %s",
                    s->path, prefix ? " under prefix \"" : "", prefix ? prefix : "", prefix ? "\"" : "",
                    s->f->count, found, s->f->count > 6 ? ", ..." : "", expected);
}

/* Two models found: each by its layout and first tensor, and whether a prefix tells them apart. */
static lf_status two_models(const lf_source *a, const char *a_name, const lf_source *b, const char *b_name)
{
    if (strcmp(a->stem, b->stem) == 0)
        return lf__fail(a->ctx, LF_ERR_FORMAT, "%s: more than one model: %s at tensor \"%s\" and %s at \"%s\", both "
                        "under the prefix \"%s\", which cannot tell them apart: convert them to separate files",
                        a->path, a->layout->name, a_name, b->layout->name, b_name, a->stem);
    return lf__fail(a->ctx, LF_ERR_FORMAT, "%s: more than one model: %s at tensor \"%s\" and %s at \"%s\"; choose "
                    "one with the prefix \"%s\" or \"%s\"", a->path, a->layout->name, a_name, b->layout->name, b_name,
                    a->stem, b->stem);
}

static lf_status find_layout(lf_source *s, const char *prefix)
{
    const char *first_name = NULL;
    lf_source first = *s; /* small: its tensor tables are not filled yet */
    for (size_t i = 0; i < s->f->count; i++) {
        lf_source c = *s;
        if (!candidate(&c, s->f->tensors[i].name, prefix)) continue;
        if (first_name) return two_models(&first, first_name, &c, s->f->tensors[i].name);
        first = c, first_name = s->f->tensors[i].name;
    }
    if (!first_name) return unrecognised(s, prefix);
    *s = first;
    return LF_OK;
}

/* ---- The tensors of each layer and of the model ---- */

/* Whether a tensor under the stem is one of the layout's: one pass over the
 * roles, never over the layers, so loading stays linear in the depth. */
static bool known(const lf_source *s, const char *name)
{
    const lf_layout *l = s->layout;
    for (size_t r = 0; r < l->model_count; r++)
        if (!strcmp(name + strlen(s->stem), l->model[r].suffix)) return true;
    int layer;
    return lf__layout_layer_role(l, s->stem, s->layers, name, &layer) >= 0;
}

/* The model's own tensors, stem + each role's suffix, into s->m. */
static lf_status collect_model(lf_source *s, const char *stem, const lf_role *roles, size_t count)
{
    char name[LF_LAYOUT_NAME_MAX];
    for (size_t r = 0; r < count; r++) {
        snprintf(name, sizeof name, "%s%s", stem, roles[r].suffix);
        const lf_st_tensor *t;
        LF_TRY(lf__layout_get(s->ctx, s->path, s->f, name, &roles[r], &t));
        for (int m = 0; t && m < LF_M_COUNT; m++)
            if (!strcmp(roles[r].weight, lf__model_tensor_name(m))) s->m[m] = t;
    }
    return LF_OK;
}

/* A head beside a token encoder (fairseq's masked-LM head: "X.lm_head." beside
 * "X.sentence_encoder."), where its first tensor is there: then the model gives logits. */
static lf_status collect_head(lf_source *s)
{
    const lf_layout *l = s->layout;
    if (!l->head || !s->m[LF_M_TOK] || !ends_with(s->stem, l->head_beside)) return LF_OK;
    char stem[LF_NAME_MAX + 16], first[LF_LAYOUT_NAME_MAX];
    snprintf(stem, sizeof stem, "%.*s%s", (int)(strlen(s->stem) - strlen(l->head_beside)), s->stem, l->head_at);
    snprintf(first, sizeof first, "%s%s", stem, l->head[0].suffix);
    if (!lf_st_find(s->f, first)) return LF_OK;
    LF_TRY(collect_model(s, stem, l->head, l->head_count));
    if (!s->m[LF_M_HEAD_W]) s->m[LF_M_HEAD_W] = s->m[LF_M_TOK]; /* tied */
    return LF_OK;
}

static lf_status collect(lf_source *s)
{
    char name[LF_LAYOUT_NAME_MAX];
    lf__layout_layer_name(s->layout, s->stem, 0, LF_R_WQ, name, sizeof name);
    for (s->layers = 0; lf_st_find(s->f, name) && s->layers < LF_MAX_LAYERS;)
        lf__layout_layer_name(s->layout, s->stem, ++s->layers, LF_R_WQ, name, sizeof name);
    if (lf_st_find(s->f, name)) /* a layer past the last one counted */
        return lf__fail(s->ctx, LF_ERR_UNSUPPORTED, "%s: more than %d layers (tensor \"%s\")", s->path, LF_MAX_LAYERS,
                        name);
    if (!(s->t = calloc(s->layers, sizeof *s->t))) return lf__fail(s->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < s->f->count; i++) {
        const char *t = s->f->tensors[i].name;
        int layer;
        if (strncmp(t, s->stem, strlen(s->stem)) || known(s, t)) continue;
        /* a layer's tensor past the last layer counted: that layer's query weight is what is missing */
        if (lf__layout_layer_role(s->layout, s->stem, INT_MAX, t, &layer) >= 0)
            return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is missing, yet layer %d has \"%s\" (the "
                            "layers are counted by their query weight)", s->path, name, layer, t);
        return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: unknown tensor \"%s\" (not part of %s)", s->path, t,
                        s->layout->name);
    }
    for (int i = 0; i < s->layers; i++)
        LF_TRY(lf__layout_get_layer(s->ctx, s->path, s->f, s->layout, s->stem, i, s->t[i]));
    LF_TRY(collect_model(s, s->stem, s->layout->model, s->layout->model_count));
    return collect_head(s);
}

/* ---- Uploading ---- */

/* Converts a tensor and sets it as `weight` of `layer` (-1: the model's). */
static lf_status set(const lf_source *s, lf_model *m, int layer, const char *weight, const lf_st_tensor *t,
                     bool transposed)
{
    float *data;
    LF_TRY(lf__layout_floats(s->ctx, s->path, t, transposed, &data));
    const lf_status st = lf__model_set(m, layer, weight, NULL, 0, data, t->count);
    free(data);
    return st;
}

static lf_status upload(const lf_source *s, lf_model *m)
{
    const lf_role *roles = s->layout->layer;
    for (int i = 0; i < s->layers; i++)
        for (int r = 0; r < LF_R_COUNT; r++) {
            const lf_st_tensor *t = s->t[i][r];
            /* a layer's copy of the layerwise projection is the model's */
            if (t && !((r == LF_R_E || r == LF_R_F) && s->layerwise))
                LF_TRY(set(s, m, i, roles[r].weight, t, roles[r].transposed));
        }
    for (int t = 0; t < LF_M_COUNT; t++)
        if (s->m[t]) LF_TRY(set(s, m, -1, lf__model_tensor_name(t), s->m[t], false));
    return LF_OK;
}

static lf_status load(lf_source *s, const lf_model_options *opts, lf_model **out)
{
    LF_TRY(find_layout(s, opts->prefix));
    LF_TRY(collect(s));
    lf_model_spec cfg;
    lf_attention_config *attn = calloc(s->layers, sizeof *attn);
    if (!attn) return lf__fail(s->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    lf_status st = lf__model_source_config(s, opts, &cfg, attn);
    if (st == LF_OK) st = lf__model_create(s->ctx, &cfg, attn, out);
    free(attn);
    if (st == LF_OK && (st = upload(s, *out)) != LF_OK) {
        lf_model_free(*out);
        *out = NULL;
    }
    return st;
}

lf_status lf_model_load(lf_context *ctx, const char *path, const lf_model_options *opts, lf_model **out)
{
    if (out) *out = NULL;
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    if (!path) return lf__fail(ctx, LF_ERR_ARGUMENT, "path is NULL");
    const lf_model_options none = {0};
    if (!opts) opts = &none;
    if (opts->heads < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "heads must be 0 (from the file) or positive, got %d", opts->heads);
    lf_source *s = calloc(1, sizeof *s);
    if (!s) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    char msg[1024];
    lf_status st = lf_st_open(path, &s->file, msg, sizeof msg);
    if (st != LF_OK) {
        free(s);
        return lf__fail(ctx, st, "%s", msg);
    }
    s->ctx = ctx, s->path = path, s->f = &s->file;
    st = load(s, opts, out);
    lf_st_close(&s->file);
    free(s->t);
    free(s);
    return st;
}
