/*
 * loader.c - an attention layer from a safetensors file in the state-dict names
 * of lucidrains' LinformerSelfAttention:
 *   to_q.weight [H*dh, D]   to_k.weight [KV*dh, D]   to_v.weight (absent: share_kv)
 *   proj_k [max_seq_len, k] (E^T)   proj_v (absent: share_kv)
 *   to_out.weight [D, H*dh]   to_out.bias [D]   to_{q,k,v}.bias (optional)
 * (layouts.c's first row). The head count comes from the caller or from
 * __metadata__ "heads"; the rest from the shapes (lf__layer_config):
 * one_kv_head when to_k has d_head rows.
 */
#include <stdlib.h>

#include "layouts.h"
#include "loader.h"

/* An integer setting: given (*value != unset), or from __metadata__ `key`
 * within [lo, hi], written plainly; a given value that contradicts the file is an error, never
 * a silent override. *value stays unset when neither has it. */
static lf_status meta_int(lf_context *ctx, const lf_st_file *f, const char *path, const char *key, long lo, long hi,
                          int unset, int *value)
{
    const char *text = lf_st_meta(f, key);
    const long v = text ? strtol(text, NULL, 10) : 0;
    const bool valid = text && lf__plain_number(text, false) && v >= lo && v <= hi;
    if (text && !valid)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", not a number in [%ld, %ld]", path,
                        key, text, lo, hi);
    if (*value != unset && valid && v != *value)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s %d was given but %s says %ld (__metadata__ \"%s\")", key, *value,
                        path, v, key);
    if (*value == unset && valid) *value = (int)v;
    return LF_OK;
}

static const lf_layout *const layer_layout = &lf__layouts[LF_LAYOUT_LUCID_ATTENTION];

/* Every tensor of the file is known, each known one has its rank and a float type. */
static lf_status find_tensors(lf_context *ctx, const lf_st_file *f, const char *path, const lf_st_tensor **t)
{
    for (size_t i = 0; i < f->count; i++) {
        int layer;
        if (lf__layout_layer_role(layer_layout, "", 1, f->tensors[i].name, &layer) < 0)
            return lf__fail(ctx, LF_ERR_FORMAT, "%s: unknown tensor \"%s\" (not part of %s)", path,
                            f->tensors[i].name, layer_layout->name);
    }
    return lf__layout_get_layer(ctx, path, f, layer_layout, "", 0, t);
}

/* Sets each tensor of the file as its weight; the projections only where the layer learns them. */
static lf_status set_weights(lf_context *ctx, const char *path, const lf_st_tensor *const *t, bool learned,
                             lf_attention *layer)
{
    for (int r = 0; r < LF_R_COUNT; r++) {
        const lf_role *role = &layer_layout->layer[r];
        if (!t[r] || ((r == LF_R_E || r == LF_R_F) && !learned)) continue;
        float *data;
        LF_TRY(lf__layout_floats(ctx, path, t[r], role->transposed, &data));
        const lf_status st = lf_attention_set_weight(layer, role->weight, data, t[r]->count);
        free(data);
        LF_TRY(st);
    }
    return LF_OK;
}

static lf_status load(lf_context *ctx, const lf_st_file *f, const char *path, lf_load_options o,
                      lf_attention **out)
{
    const lf_st_tensor *t[LF_R_COUNT];
    LF_TRY(find_tensors(ctx, f, path, t));
    LF_TRY(meta_int(ctx, f, path, "heads", 1, 65536, 0, &o.heads));
    if (o.heads == 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s: the head count is neither given nor in __metadata__ \"heads\"",
                        path);
    LF_TRY(meta_int(ctx, f, path, "causal", 0, 1, -1, &o.causal));
    lf_attention_config cfg;
    const lf_layer_tensors found = {.ctx = ctx, .path = path, .layout = layer_layout, .stem = "", .t = t};
    LF_TRY(lf__layer_config(&found, o.heads, &cfg));
    cfg.mode = o.mode;
    cfg.causal = o.causal == 1;
    cfg.proj_kind = o.projection;
    cfg.seed = o.seed;
    if (o.k) cfg.k = o.k;
    lf_attention *layer = NULL;
    LF_TRY(lf_attention_create(ctx, &cfg, NULL, &layer));
    const bool learned = o.mode == LF_MODE_LINFORMER && o.projection == LF_PROJ_LEARNED;
    const lf_status st = set_weights(ctx, path, t, learned, layer);
    if (st != LF_OK) {
        lf_attention_free(layer);
        return st;
    }
    *out = layer;
    return LF_OK;
}

void lf_load_options_init(lf_load_options *opts)
{
    if (opts) *opts = (lf_load_options){.heads = 0, .mode = LF_MODE_LINFORMER, .causal = -1,
                                        .projection = LF_PROJ_LEARNED};
}

lf_status lf__load_options_check(lf_context *ctx, const lf_load_options *o)
{
    if (o->heads < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "heads must be 0 (from the file) or positive, got %d", o->heads);
    if (o->mode < LF_MODE_LINFORMER || o->mode > LF_MODE_FLASH)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "mode %d is not an lf_mode", (int)o->mode);
    if (o->causal < -1 || o->causal > 1)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "causal must be -1 (from the file), 0 or 1, got %d", o->causal);
    if (o->projection != LF_PROJ_LEARNED && o->projection != LF_PROJ_MEAN_POOL && o->projection != LF_PROJ_MAX_POOL &&
        o->projection != LF_PROJ_RANDOM)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "projection must be LF_PROJ_LEARNED (the file's), LF_PROJ_MEAN_POOL, "
                                              "LF_PROJ_MAX_POOL or LF_PROJ_RANDOM, got %d", (int)o->projection);
    if (o->k < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "k must be 0 (the file's) or positive, got %d", o->k);
    if (o->k && o->projection == LF_PROJ_LEARNED)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "k %d differs from the file's learned projections: choose a "
                                              "pooling or random projection for it", o->k);
    return LF_OK;
}

lf_status lf_attention_load_with(lf_context *ctx, const char *path, const lf_load_options *opts, lf_attention **out)
{
    if (out) *out = NULL;
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    if (!path) return lf__fail(ctx, LF_ERR_ARGUMENT, "path is NULL");
    lf_load_options o;
    lf_load_options_init(&o);
    if (opts) o = *opts;
    LF_TRY(lf__load_options_check(ctx, &o));
    lf_st_file f;
    char msg[1024];
    lf_status st = lf_st_open(path, &f, msg, sizeof msg);
    if (st != LF_OK) return lf__fail(ctx, st, "%s", msg);
    st = load(ctx, &f, path, o, out);
    lf_st_close(&f);
    return st;
}

lf_status lf_attention_load(lf_context *ctx, const char *path, int heads, lf_mode mode, lf_attention **out)
{
    lf_load_options o;
    lf_load_options_init(&o);
    o.heads = heads;
    o.mode = mode;
    return lf_attention_load_with(ctx, path, &o, out);
}
