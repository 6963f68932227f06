/* plan.c - checks a layer's config and resolves it, once, into an lf_plan. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define FAIL(status, ...) (lf__fail_buf(msg, msg_size, (status), __VA_ARGS__))

static bool in_enum(int value, int first, int last) { return value >= first && value <= last; }

/* The fields every mode uses. */
static lf_status check_common(const lf_attention_config *c, char *msg, size_t msg_size)
{
    if (c->d_model <= 0) return FAIL(LF_ERR_ARGUMENT, "d_model must be positive, got %d", c->d_model);
    if (c->heads <= 0) return FAIL(LF_ERR_ARGUMENT, "heads must be positive, got %d", c->heads);
    if (c->d_head < 0) return FAIL(LF_ERR_ARGUMENT, "d_head must be 0 or positive, got %d", c->d_head);
    if (c->d_head == 0 && c->d_model % c->heads != 0)
        return FAIL(LF_ERR_ARGUMENT, "d_model (%d) is not divisible by heads (%d); set d_head", c->d_model, c->heads);
    if (c->kv_heads != 0 && c->kv_heads != 1 && c->kv_heads != c->heads)
        return FAIL(LF_ERR_ARGUMENT, "kv_heads must be 1 or heads (%d), got %d", c->heads, c->kv_heads);
    if (c->max_seq_len <= 0) return FAIL(LF_ERR_ARGUMENT, "max_seq_len must be positive, got %d", c->max_seq_len);
    if (!in_enum(c->mode, LF_MODE_LINFORMER, LF_MODE_FLASH))
        return FAIL(LF_ERR_ARGUMENT, "mode %d is not an lf_mode", (int)c->mode);
    if (c->causal != 0 && c->causal != 1) return FAIL(LF_ERR_ARGUMENT, "causal must be 0 or 1, got %d", c->causal);
    if (!in_enum(c->path, LF_PATH_AUTO, LF_PATH_GEMM))
        return FAIL(LF_ERR_ARGUMENT, "path %d is not an lf_path", (int)c->path);
    if (!(c->scale >= 0.0f) || isinf(c->scale))
        return FAIL(LF_ERR_ARGUMENT, "scale must be finite and >= 0 (0 = 1/sqrt(d_head))");
    const int dh = c->d_head ? c->d_head : c->d_model / c->heads;
    /* sizes whose products index buffers with int arithmetic in kernels */
    if ((int64_t)c->heads * dh > (1 << 20) || c->d_model > (1 << 20) || c->max_seq_len > (1 << 24))
        return FAIL(LF_ERR_ARGUMENT, "d_model, heads x d_head or max_seq_len is too large");
    if (c->mode == LF_MODE_FLASH && dh > LF_MAX_DH_TILED)
        return FAIL(LF_ERR_UNSUPPORTED, "flash mode supports d_head up to %d, got %d", LF_MAX_DH_TILED, dh);
    return LF_OK;
}

/* Causal Linformer: slots with local support, and the fused kernel that
 * adds each query's own window. */
static lf_status check_causal(const lf_attention_config *c, int dh, char *msg, size_t msg_size)
{
    if (c->proj_kind == LF_PROJ_LEARNED || c->proj_kind == LF_PROJ_RANDOM)
        return FAIL(LF_ERR_UNSUPPORTED, "causal Linformer needs compressed slots with local support: a %s projection "
                                        "mixes every position into every slot; use LF_PROJ_MEAN_POOL, "
                                        "LF_PROJ_MAX_POOL or LF_PROJ_CONV",
                    c->proj_kind == LF_PROJ_LEARNED ? "learned" : "random");
    if (c->position != LF_POSITION_KV)
        return FAIL(LF_ERR_UNSUPPORTED, "causal Linformer projects keys and values (LF_POSITION_KV), not the input");
    if (c->path == LF_PATH_GEMM)
        return FAIL(LF_ERR_UNSUPPORTED, "causal Linformer runs on the fused path, not LF_PATH_GEMM");
    if (dh > LF_MAX_DH_TILED)
        return FAIL(LF_ERR_UNSUPPORTED, "causal Linformer supports d_head up to %d, got %d", LF_MAX_DH_TILED, dh);
    return LF_OK;
}

/* The fields of Linformer's sequence projection. */
static lf_status check_linformer(const lf_attention_config *c, bool has_shared, char *msg, size_t msg_size)
{
    const int dh = c->d_head ? c->d_head : c->d_model / c->heads;
    if (c->path == LF_PATH_FUSED && dh > LF_MAX_DH_TILED)
        return FAIL(LF_ERR_UNSUPPORTED, "the fused path supports d_head up to %d, got %d", LF_MAX_DH_TILED, dh);
    if (c->k <= 0) return FAIL(LF_ERR_ARGUMENT, "k must be positive, got %d", c->k);
    if (!in_enum(c->sharing, LF_SHARE_NONE, LF_SHARE_LAYERWISE))
        return FAIL(LF_ERR_ARGUMENT, "sharing %d is not an lf_sharing", (int)c->sharing);
    if (!in_enum(c->proj_kind, LF_PROJ_LEARNED, LF_PROJ_CONV))
        return FAIL(LF_ERR_ARGUMENT, "proj_kind %d is not an lf_proj_kind", (int)c->proj_kind);
    if (!in_enum(c->position, LF_POSITION_KV, LF_POSITION_INPUT))
        return FAIL(LF_ERR_ARGUMENT, "position %d is not an lf_position", (int)c->position);
    if (c->position == LF_POSITION_INPUT && c->sharing == LF_SHARE_NONE)
        return FAIL(LF_ERR_ARGUMENT, "position LF_POSITION_INPUT projects the layer input, which has no heads: "
                                     "sharing must not be LF_SHARE_NONE");
    if (c->sharing == LF_SHARE_LAYERWISE) {
        if (!has_shared) return FAIL(LF_ERR_ARGUMENT, "shared is NULL but sharing is LF_SHARE_LAYERWISE");
        if (c->proj_kind != LF_PROJ_LEARNED && c->proj_kind != LF_PROJ_RANDOM)
            return FAIL(LF_ERR_ARGUMENT, "LF_SHARE_LAYERWISE takes a matrix projection (learned or random)");
    } else if (has_shared) {
        return FAIL(LF_ERR_ARGUMENT, "shared is given but sharing is not LF_SHARE_LAYERWISE");
    }
    if ((uint64_t)c->k * (uint64_t)c->max_seq_len > (1ull << 32))
        return FAIL(LF_ERR_ARGUMENT, "k x max_seq_len (%d x %d) is too large", c->k, c->max_seq_len);
    return c->causal ? check_causal(c, dh, msg, msg_size) : LF_OK;
}

static void slot(lf_plan *p, lf_weight_id id, const char *name, lf_weight_buf buf, size_t offset, bool present,
                 size_t rows, size_t cols, float bound)
{
    const size_t count = present ? (rows ? rows : 1) * cols : 0;
    p->weights[id] = (lf_weight_slot){name, buf, offset, count, rows, cols, bound};
}

/* The weight table: fused QKV rows [Q | K | V] and their biases, Wo, bo, then E and F. */
static void layout_weights(lf_plan *p)
{
    const lf_attention_config *c = &p->cfg;
    const int D = c->d_model, q = (int)p->qdim, kv = (int)p->kvdim;
    const float in_bound = (float)(1.0 / sqrt((double)D)), out_bound = (float)(1.0 / sqrt((double)q));
    slot(p, LF_W_Q, "wq", LF_BUF_QKV, 0, true, q, D, in_bound);
    slot(p, LF_W_K, "wk", LF_BUF_QKV, (size_t)q * D, true, kv, D, in_bound);
    slot(p, LF_W_V, "wv", LF_BUF_QKV, (size_t)(q + kv) * D, !c->share_kv, kv, D, in_bound);
    slot(p, LF_W_O, "wo", LF_BUF_O, 0, true, D, q, out_bound);
    slot(p, LF_B_Q, "bq", LF_BUF_B_QKV, 0, c->bias_q, 0, q, in_bound);
    slot(p, LF_B_K, "bk", LF_BUF_B_QKV, q, c->bias_k, 0, kv, in_bound);
    slot(p, LF_B_V, "bv", LF_BUF_B_QKV, (size_t)q + kv, c->bias_v, 0, kv, in_bound);
    slot(p, LF_B_O, "bo", LF_BUF_B_O, 0, c->bias_out, 0, D, out_bound);

    /* E (and F): a matrix or a window's weights, per key/value head or shared by heads */
    const bool own = p->linformer && c->sharing != LF_SHARE_LAYERWISE;
    const bool settable = own && (c->proj_kind == LF_PROJ_LEARNED || c->proj_kind == LF_PROJ_CONV);
    const size_t copies = p->per_head_proj ? (size_t)p->kvh : 0; /* 0: no leading dimension */
    const size_t cols = c->proj_kind == LF_PROJ_CONV ? (size_t)p->window : (size_t)c->k * c->max_seq_len;
    size_t per = 0; /* floats of one E in the buffer */
    if (own && (p->matrix_proj || c->proj_kind == LF_PROJ_CONV)) per = (copies ? copies : 1) * cols;
    if (own && c->proj_kind == LF_PROJ_MEAN_POOL) per = p->window; /* uniform 1/w, one copy serves all */
    const float e_bound = c->proj_kind == LF_PROJ_CONV ? (float)(1.0 / sqrt((double)p->window)) : 0.0f;
    slot(p, LF_P_E, "e", LF_BUF_PROJ, 0, settable, copies, cols, e_bound);
    slot(p, LF_P_F, "f", LF_BUF_PROJ, per, settable && p->f_separate, copies, cols, e_bound);

    const size_t qkv_rows = p->cols;
    p->buf_floats[LF_BUF_QKV] = qkv_rows * D;
    p->buf_floats[LF_BUF_B_QKV] = qkv_rows;
    p->buf_floats[LF_BUF_O] = (size_t)D * q;
    p->buf_floats[LF_BUF_B_O] = D;
    p->buf_floats[LF_BUF_PROJ] = per * (p->f_separate ? 2 : 1);
}

/* Linformer's attention path. The fused kernel (attention.cl) beats scores
 * through two GEMMs and the softmax on CPU devices, whose variant of it (QB >
 * 1, lf__attention_tiles) keeps nothing in local memory, at every k measured
 * (bench/NOTES.md, item 9); where the kernel stages keys in local memory and
 * a head's k keys and values do not fit at once, the GEMM path is taken until
 * measurements there say otherwise. */
static lf_path auto_path(const lf_plan *p, const lf_device_info *dev)
{
    const bool fits = p->tiles.query_block > 1 || 2ull * p->cfg.k * p->dh * sizeof(float) <= dev->local_mem_bytes;
    return p->dh <= LF_MAX_DH_TILED && fits ? LF_PATH_FUSED : LF_PATH_GEMM;
}

/* The GPU variant's DS at head width dh: the one asked for, or DH / 64 (at
 * least 1) down to a power of two, lowered until it divides the row's DH /
 * VW vectors; 1 in the CPU variant. */
static int d_split(const lf_kernel_params *kp, int dh)
{
    if (kp->query_block > 1) return 1;
    int ds = kp->d_split;
    if (ds < 1)
        for (ds = 1; ds * 2 <= dh / 64;) ds *= 2;
    const int vectors = dh / lf__attention_vector_width(dh);
    while (vectors % ds) ds /= 2;
    return ds;
}

lf_attention_tiles lf__attention_tiles(const lf_kernel_params *kp, int dh, const lf_device_info *dev)
{
    lf_attention_tiles t = {kp->tile_keys, (size_t)kp->tile_queries, kp->query_block, kp->query_vectors, kp->key_block,
                            d_split(kp, dh)};
    /* per key of a tile: its key and value rows, and with DS > 1 each work-item's partial score */
    const uint64_t per_key = (2ull * dh + (t.d_split > 1 ? t.tile_queries * t.d_split : 0)) * sizeof(float);
    while (t.tile_keys > 1 && t.tile_keys * per_key > dev->local_mem_bytes / 2) t.tile_keys /= 2;
    return t;
}

/* CPU: float16s (AVX-512's width, two AVX2 registers), 4 of them a
 * work-item, in work-groups of one: Intel's compiler otherwise spreads a
 * group's work-items over its vector lanes, each lane a row or run apart
 * (gathers, 3-5x slower; vec_type_hint stops it too, with a warning in the
 * build log). bench/NOTES.md, item 14. GPU: one float a work-item,
 * neighbours in neighbouring work-items, groups of the runtime's choice. */
/* Flops of the key/value side of one sequence of max_seq_len rows, in each
 * order: projecting first, K = x Wk^T on n rows then E K; or compressing
 * first, E x on D columns (with E's row sums for the biases) then Wk on k
 * rows. With share_kv one matrix serves K and V; where E = F (key-value or
 * layerwise sharing) E x is computed once for both. */
static bool input_first_cheaper(const lf_plan *p)
{
    const double D = p->cfg.d_model, k = p->cfg.k, n = p->cfg.max_seq_len, kv = (double)p->kvdim;
    const double xgroups = p->f_separate ? 2 : 1;
    const double project_first = p->groups * (2 * n * D * kv + 2 * k * n * kv);
    const double input_first = xgroups * (2 * k * n * D + 2 * k * n) + p->groups * (2 * k * D * kv + 2 * k * kv);
    return input_first < project_first;
}

/* The order of evaluation of Linformer's key/value side. LF_POSITION_INPUT
 * means input first. For LF_POSITION_KV the input-first order gives the same
 * result up to rounding where one matrix E (and F) serves every head and no
 * causal mask applies: E (x Wk^T + 1 bk^T) = (E x) Wk^T + (E 1) bk^T. There
 * the cheaper order at max_seq_len is taken, once per layer, so that a
 * sequence's result does not depend on the padded length of its batch.
 * LINFORMER_ORDER=input-first|project-first forces one where both are exact. */
static lf_status kv_order(lf_plan *p, char *msg, size_t msg_size)
{
    const lf_attention_config *c = &p->cfg;
    p->input_side = p->linformer && c->position == LF_POSITION_INPUT;
    const bool exact = p->linformer && c->position == LF_POSITION_KV && p->matrix_proj && !p->per_head_proj &&
                       !c->causal;
    const char *env = getenv("LINFORMER_ORDER");
    bool first = exact && input_first_cheaper(p);
    if (env && strcmp(env, "input-first") == 0) first = exact;
    else if (env && strcmp(env, "project-first") == 0) first = false;
    else if (env && *env && strcmp(env, "auto") != 0)
        return FAIL(LF_ERR_ARGUMENT, "LINFORMER_ORDER is \"%s\": use \"input-first\", \"project-first\" or \"auto\"",
                    env);
    p->bias_row_sums = first;
    p->input_side = p->input_side || first;
    return LF_OK;
}

lf_status lf__plan_resolve(const lf_attention_config *cfg, const lf_device_info *device, bool has_shared,
                           lf_plan *plan, char *msg, size_t msg_size)
{
    LF_TRY(check_common(cfg, msg, msg_size));
    if (cfg->mode == LF_MODE_LINFORMER) {
        LF_TRY(check_linformer(cfg, has_shared, msg, msg_size));
    } else if (has_shared) {
        return FAIL(LF_ERR_ARGUMENT, "shared is given but mode %s has no projection", lf_mode_name(cfg->mode));
    }
    lf_plan *p = plan;
    memset(p, 0, sizeof *p);
    lf_attention_config *c = &p->cfg;
    *c = *cfg;
    p->linformer = c->mode == LF_MODE_LINFORMER;
    p->dh = c->d_head = c->d_head ? c->d_head : c->d_model / c->heads;
    p->kvh = c->kv_heads = c->kv_heads ? c->kv_heads : c->heads;
    if (c->scale == 0.0f) c->scale = (float)(1.0 / sqrt((double)p->dh));
    if (c->share_kv) c->bias_v = 0;
    if (!p->linformer) c->k = 0;
    p->window = c->k ? (c->max_seq_len + c->k - 1) / c->k : 0;
    p->qdim = (size_t)c->heads * p->dh;
    p->kvdim = (size_t)p->kvh * p->dh;
    p->cols = p->qdim + (c->share_kv ? 1 : 2) * p->kvdim;
    p->groups = c->share_kv ? 1 : 2;
    p->f_separate = !c->share_kv && (c->sharing == LF_SHARE_NONE || c->sharing == LF_SHARE_HEADWISE);
    p->matrix_proj = c->proj_kind == LF_PROJ_LEARNED || c->proj_kind == LF_PROJ_RANDOM;
    p->per_head_proj = c->sharing == LF_SHARE_NONE && c->proj_kind != LF_PROJ_MEAN_POOL;
    lf_kernel_params kp;
    LF_TRY(lf__kernel_params(device, &kp, msg, msg_size));
    p->tiles = lf__attention_tiles(&kp, p->dh, device);
    LF_TRY(kv_order(p, msg, msg_size));
    if (p->linformer && c->path == LF_PATH_AUTO) c->path = c->causal ? LF_PATH_FUSED : auto_path(p, device);
    if (!p->linformer) c->path = LF_PATH_AUTO;
    p->tiled = c->mode == LF_MODE_FLASH || (p->linformer && c->path == LF_PATH_FUSED);
    p->params = kp;
    layout_weights(p);
    return LF_OK;
}
