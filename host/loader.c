/*
 * loader.c - an attention layer from a safetensors file in the state-dict names
 * of lucidrains' LinformerSelfAttention:
 *   to_q.weight [H*dh, D]   to_k.weight [KV*dh, D]   to_v.weight (absent: share_kv)
 *   proj_k [max_seq_len, k] (E^T)   proj_v (absent: share_kv)
 *   to_out.weight [D, H*dh]   to_out.bias [D]   to_{q,k,v}.bias (optional)
 * The head count comes from the caller or from __metadata__ "heads"; the rest
 * from the shapes: one_kv_head when to_k has d_head rows.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "safetensors.h"

static const char *const known[] = {"to_q.weight", "to_k.weight", "to_v.weight", "to_q.bias", "to_k.bias",
                                    "to_v.bias", "proj_k", "proj_v", "to_out.weight", "to_out.bias"};

/* Finds a 2-D (or 1-D) tensor and checks its rank; NULL with a message if absent and required. */
static lf_status get(lf_context *ctx, const lf_st_file *f, const char *path, const char *name, int ndim,
                     bool required, const lf_st_tensor **out)
{
    *out = lf_st_find(f, name);
    if (!*out)
        return required ? lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is missing", path, name) : LF_OK;
    if ((*out)->ndim != ndim)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" has %d dimensions, expected %d", path, name,
                        (*out)->ndim, ndim);
    if ((*out)->dtype == LF_ST_I32 || (*out)->dtype == LF_ST_I64)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is %s, expected a float type", path, name,
                        lf_st_dtype_name((*out)->dtype));
    return LF_OK;
}

static lf_status expect_dim(lf_context *ctx, const char *path, const lf_st_tensor *t, int dim, int64_t want)
{
    if (t->shape[dim] == want) return LF_OK;
    return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" has %lld in dimension %d, expected %lld", path, t->name,
                    (long long)t->shape[dim], dim, (long long)want);
}

/* Converts a tensor and sets it as weight `name`; proj_k/proj_v are transposed to E [k, n]. */
static lf_status set_tensor(lf_context *ctx, lf_attention *layer, const char *path, const lf_st_tensor *t,
                            const char *name, bool transpose)
{
    float *data = malloc(t->count * sizeof *data), *tr = NULL;
    if (!data) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for tensor \"%s\"", t->name);
    char msg[512];
    lf_status st = lf_st_to_f32(t, data, msg, sizeof msg);
    if (st != LF_OK) lf__fail(ctx, st, "%s: %s", path, msg);
    if (st == LF_OK && transpose) {
        const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];
        if (!(tr = malloc(t->count * sizeof *tr))) {
            st = lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for tensor \"%s\"", t->name);
        } else {
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) tr[c * rows + r] = data[r * cols + c];
        }
    }
    if (st == LF_OK) st = lf_attention_set_weight(layer, name, tr ? tr : data, t->count);
    free(data);
    free(tr);
    return st;
}

static lf_status load(lf_context *ctx, const lf_st_file *f, const char *path, int heads, lf_mode mode,
                      lf_attention **out)
{
    for (size_t i = 0; i < f->count; i++) {
        size_t j = 0;
        while (j < sizeof known / sizeof known[0] && strcmp(f->tensors[i].name, known[j]) != 0) j++;
        if (j == sizeof known / sizeof known[0])
            return lf__fail(ctx, LF_ERR_FORMAT, "%s: unknown tensor \"%s\" (not a LinformerSelfAttention weight)",
                            path, f->tensors[i].name);
    }
    if (heads <= 0) {
        const char *h = lf_st_meta(f, "heads");
        char *end = NULL;
        long v = h ? strtol(h, &end, 10) : 0;
        if (!h || *end || v <= 0 || v > 65536)
            return lf__fail(ctx, LF_ERR_ARGUMENT, "%s: the head count is neither given nor a positive "
                                                  "__metadata__ \"heads\" entry", path);
        heads = (int)v;
    }
    const lf_st_tensor *wq, *wk, *wv, *bq, *bk, *bv, *pk, *pv, *wo, *bo;
    LF_TRY(get(ctx, f, path, "to_q.weight", 2, true, &wq));
    LF_TRY(get(ctx, f, path, "to_k.weight", 2, true, &wk));
    LF_TRY(get(ctx, f, path, "to_v.weight", 2, false, &wv));
    LF_TRY(get(ctx, f, path, "to_q.bias", 1, false, &bq));
    LF_TRY(get(ctx, f, path, "to_k.bias", 1, false, &bk));
    LF_TRY(get(ctx, f, path, "to_v.bias", 1, false, &bv));
    LF_TRY(get(ctx, f, path, "proj_k", 2, true, &pk));
    LF_TRY(get(ctx, f, path, "proj_v", 2, false, &pv));
    LF_TRY(get(ctx, f, path, "to_out.weight", 2, true, &wo));
    LF_TRY(get(ctx, f, path, "to_out.bias", 1, false, &bo));

    const int64_t D = wq->shape[1], qrows = wq->shape[0];
    if (D <= 0 || qrows <= 0 || qrows % heads != 0)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"to_q.weight\" [%lld, %lld] does not split into %d heads",
                        path, (long long)qrows, (long long)D, heads);
    const int64_t dh = qrows / heads, kvrows = wk->shape[0];
    if (kvrows != qrows && kvrows != dh)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"to_k.weight\" has %lld rows: expected %lld (all heads) "
                                            "or %lld (one key/value head)", path, (long long)kvrows,
                        (long long)qrows, (long long)dh);
    const bool share_kv = wv == NULL;
    if (share_kv && (pv || bv))
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" without \"to_v.weight\" (share_kv has no values of its own)",
                        path, pv ? "proj_v" : "to_v.bias");
    if (!share_kv && !pv) return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"proj_v\" is missing", path);
    LF_TRY(expect_dim(ctx, path, wk, 1, D));
    if (wv) {
        LF_TRY(expect_dim(ctx, path, wv, 0, kvrows));
        LF_TRY(expect_dim(ctx, path, wv, 1, D));
    }
    if (bq) LF_TRY(expect_dim(ctx, path, bq, 0, qrows));
    if (bk) LF_TRY(expect_dim(ctx, path, bk, 0, kvrows));
    if (bv) LF_TRY(expect_dim(ctx, path, bv, 0, kvrows));
    if (pv) {
        LF_TRY(expect_dim(ctx, path, pv, 0, pk->shape[0]));
        LF_TRY(expect_dim(ctx, path, pv, 1, pk->shape[1]));
    }
    LF_TRY(expect_dim(ctx, path, wo, 0, D));
    LF_TRY(expect_dim(ctx, path, wo, 1, qrows));
    if (bo) LF_TRY(expect_dim(ctx, path, bo, 0, D));
    if (D > (1 << 20) || pk->shape[0] > (1 << 24) || pk->shape[0] <= 0 || pk->shape[1] <= 0 || pk->shape[1] > (1 << 20))
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: sizes out of range (d_model %lld, proj_k [%lld, %lld])", path,
                        (long long)D, (long long)pk->shape[0], (long long)pk->shape[1]);

    lf_attention_config cfg;
    lf_attention_config_init(&cfg, (int)D, heads, (int)pk->shape[0], (int)pk->shape[1]);
    cfg.d_head = (int)dh;
    cfg.kv_heads = kvrows == qrows ? heads : 1;
    cfg.bias_q = bq != NULL, cfg.bias_k = bk != NULL, cfg.bias_v = bv != NULL, cfg.bias_out = bo != NULL;
    cfg.share_kv = share_kv;
    cfg.sharing = share_kv ? LF_SHARE_KV : LF_SHARE_HEADWISE;
    cfg.mode = mode;
    lf_attention *layer = NULL;
    LF_TRY(lf_attention_create(ctx, &cfg, NULL, &layer));
    const struct { const lf_st_tensor *t; const char *name; bool transpose; } sets[] = {
        {wq, "wq", false}, {wk, "wk", false}, {wv, "wv", false}, {wo, "wo", false}, {bq, "bq", false},
        {bk, "bk", false}, {bv, "bv", false}, {bo, "bo", false},
        {mode == LF_MODE_LINFORMER ? pk : NULL, "e", true}, {mode == LF_MODE_LINFORMER ? pv : NULL, "f", true}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        if (!sets[i].t) continue;
        lf_status st = set_tensor(ctx, layer, path, sets[i].t, sets[i].name, sets[i].transpose);
        if (st != LF_OK) {
            lf_attention_free(layer);
            return st;
        }
    }
    *out = layer;
    return LF_OK;
}

lf_status lf_attention_load(lf_context *ctx, const char *path, int heads, lf_mode mode, lf_attention **out)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!path) return lf__fail(ctx, LF_ERR_ARGUMENT, "path is NULL");
    if (heads < 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "heads must be 0 (from the file) or positive, got %d", heads);
    if (mode < LF_MODE_LINFORMER || mode > LF_MODE_FLASH)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "mode %d is not an lf_mode", (int)mode);
    lf_st_file f;
    char msg[1024];
    lf_status st = lf_st_open(path, &f, msg, sizeof msg);
    if (st != LF_OK) return lf__fail(ctx, st, "%s", msg);
    st = load(ctx, &f, path, heads, mode, out);
    lf_st_close(&f);
    return st;
}
