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

#include "loader.h"
#include "safetensors.h"

/* The file's tensors, in one table: name, rank, whether required, and the
 * layer weight each sets (proj_k and proj_v are E^T and F^T: transposed). */
enum { T_WQ, T_WK, T_WV, T_BQ, T_BK, T_BV, T_PK, T_PV, T_WO, T_BO, T_COUNT };
static const struct {
    const char *name;
    int ndim;
    bool required;
    const char *weight;
} tensors[T_COUNT] = {
    [T_WQ] = {"to_q.weight", 2, true, "wq"},  [T_WK] = {"to_k.weight", 2, true, "wk"},
    [T_WV] = {"to_v.weight", 2, false, "wv"}, [T_BQ] = {"to_q.bias", 1, false, "bq"},
    [T_BK] = {"to_k.bias", 1, false, "bk"},   [T_BV] = {"to_v.bias", 1, false, "bv"},
    [T_PK] = {"proj_k", 2, true, "e"},        [T_PV] = {"proj_v", 2, false, "f"},
    [T_WO] = {"to_out.weight", 2, true, "wo"}, [T_BO] = {"to_out.bias", 1, false, "bo"}};

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

/* An integer setting: given (*value != unset), or from __metadata__ `key`
 * within [lo, hi]; a given value that contradicts the file is an error, never
 * a silent override. *value stays unset when neither has it. */
static lf_status meta_int(lf_context *ctx, const lf_st_file *f, const char *path, const char *key, long lo, long hi,
                          int unset, int *value)
{
    const char *text = lf_st_meta(f, key);
    char *end = NULL;
    const long v = text ? strtol(text, &end, 10) : 0;
    const bool valid = text && *text && !*end && v >= lo && v <= hi;
    if (text && !valid)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: __metadata__ \"%s\" is \"%s\", not a number in [%ld, %ld]", path,
                        key, text, lo, hi);
    if (*value != unset && valid && v != *value)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s %d was given but %s says %ld (__metadata__ \"%s\")", key, *value,
                        path, v, key);
    if (*value == unset && valid) *value = (int)v;
    return LF_OK;
}

/* Every tensor of the file is known, each known one has its rank and a float type. */
static lf_status find_tensors(lf_context *ctx, const lf_st_file *f, const char *path, const lf_st_tensor **t)
{
    for (size_t i = 0; i < f->count; i++) {
        int j = 0;
        while (j < T_COUNT && strcmp(f->tensors[i].name, tensors[j].name) != 0) j++;
        if (j == T_COUNT)
            return lf__fail(ctx, LF_ERR_FORMAT, "%s: unknown tensor \"%s\" (not a LinformerSelfAttention weight)",
                            path, f->tensors[i].name);
    }
    for (int j = 0; j < T_COUNT; j++) LF_TRY(get(ctx, f, path, tensors[j].name, tensors[j].ndim, tensors[j].required, &t[j]));
    return LF_OK;
}

/* The layer's config from the shapes; every shape is checked against it. */
static lf_status infer_config(lf_context *ctx, const lf_st_tensor *const *t, const char *path, int heads,
                              lf_attention_config *cfg)
{
    const int64_t D = t[T_WQ]->shape[1], qrows = t[T_WQ]->shape[0];
    if (D <= 0 || qrows <= 0 || qrows % heads != 0)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"to_q.weight\" [%lld, %lld] does not split into %d heads",
                        path, (long long)qrows, (long long)D, heads);
    const int64_t dh = qrows / heads, kvrows = t[T_WK]->shape[0];
    if (kvrows != qrows && kvrows != dh)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"to_k.weight\" has %lld rows: expected %lld (all heads) "
                                            "or %lld (one key/value head)", path, (long long)kvrows,
                        (long long)qrows, (long long)dh);
    const bool share_kv = t[T_WV] == NULL;
    if (share_kv && (t[T_PV] || t[T_BV]))
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" without \"to_v.weight\" (share_kv has no values of its own)",
                        path, t[T_PV] ? "proj_v" : "to_v.bias");
    if (!share_kv && !t[T_PV]) return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"proj_v\" is missing", path);
    const int64_t n = t[T_PK]->shape[0], k = t[T_PK]->shape[1];
    const int64_t want[T_COUNT][2] = {[T_WQ] = {qrows, D}, [T_WK] = {kvrows, D}, [T_WV] = {kvrows, D},
                                      [T_BQ] = {qrows}, [T_BK] = {kvrows}, [T_BV] = {kvrows}, [T_PK] = {n, k},
                                      [T_PV] = {n, k}, [T_WO] = {D, qrows}, [T_BO] = {D}};
    for (int j = 0; j < T_COUNT; j++)
        for (int d = 0; t[j] && d < tensors[j].ndim; d++) LF_TRY(expect_dim(ctx, path, t[j], d, want[j][d]));
    if (D > (1 << 20) || n > (1 << 24) || n <= 0 || k <= 0 || k > (1 << 20))
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: sizes out of range (d_model %lld, proj_k [%lld, %lld])", path,
                        (long long)D, (long long)n, (long long)k);
    lf_attention_config_init(cfg, (int)D, heads, (int)n, (int)k);
    cfg->d_head = (int)dh;
    cfg->kv_heads = kvrows == qrows ? heads : 1;
    cfg->bias_q = t[T_BQ] != NULL, cfg->bias_k = t[T_BK] != NULL, cfg->bias_v = t[T_BV] != NULL;
    cfg->bias_out = t[T_BO] != NULL;
    cfg->share_kv = share_kv;
    cfg->sharing = share_kv ? LF_SHARE_KV : LF_SHARE_HEADWISE;
    return LF_OK;
}

static lf_status load(lf_context *ctx, const lf_st_file *f, const char *path, lf_load_options o,
                      lf_attention **out)
{
    const lf_st_tensor *t[T_COUNT];
    LF_TRY(find_tensors(ctx, f, path, t));
    LF_TRY(meta_int(ctx, f, path, "heads", 1, 65536, 0, &o.heads));
    if (o.heads == 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s: the head count is neither given nor in __metadata__ \"heads\"",
                        path);
    LF_TRY(meta_int(ctx, f, path, "causal", 0, 1, -1, &o.causal));
    lf_attention_config cfg;
    LF_TRY(infer_config(ctx, t, path, o.heads, &cfg));
    cfg.mode = o.mode;
    cfg.causal = o.causal == 1;
    cfg.proj_kind = o.projection;
    cfg.seed = o.seed;
    if (o.k) cfg.k = o.k;
    lf_attention *layer = NULL;
    LF_TRY(lf_attention_create(ctx, &cfg, NULL, &layer));
    const bool learned = o.mode == LF_MODE_LINFORMER && o.projection == LF_PROJ_LEARNED;
    for (int j = 0; j < T_COUNT; j++) {
        const bool projection = j == T_PK || j == T_PV;
        if (!t[j] || (projection && !learned)) continue;
        lf_status st = set_tensor(ctx, layer, path, t[j], tensors[j].weight, projection);
        if (st != LF_OK) {
            lf_attention_free(layer);
            return st;
        }
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
