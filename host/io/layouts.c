/*
 * layouts.c - the state-dict layouts, one row each (see layouts.h): the
 * tensors' names, and what shapes cannot say; then the names of a layer's
 * tensors, and a layer's attention config from the tensors found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layouts.h"

/* lucidrains' LinformerSelfAttention, at `at`: its proj_k, proj_v are E^T, F^T. */
#define LUCID_ATTENTION(at)                                                                                      \
    [LF_R_WQ] = {at "to_q.weight", "wq", 2, true, false}, [LF_R_BQ] = {at "to_q.bias", "bq", 1, false, false},     \
    [LF_R_WK] = {at "to_k.weight", "wk", 2, true, false}, [LF_R_BK] = {at "to_k.bias", "bk", 1, false, false},     \
    [LF_R_WV] = {at "to_v.weight", "wv", 2, false, false}, [LF_R_BV] = {at "to_v.bias", "bv", 1, false, false},    \
    [LF_R_E] = {at "proj_k", "e", 2, true, true}, [LF_R_F] = {at "proj_v", "f", 2, false, true},                   \
    [LF_R_WO] = {at "to_out.weight", "wo", 2, true, false}, [LF_R_BO] = {at "to_out.bias", "bo", 1, false, false}

static const lf_role lucid_attention[LF_R_COUNT] = {LUCID_ATTENTION("")};

/* One block of lucidrains' Linformer: PreNorm(attention) as "0.", PreNorm(FeedForward) as "1.". */
static const lf_role lucid_layer[LF_R_COUNT] = {
    LUCID_ATTENTION("0.fn."),
    [LF_R_LN1_G] = {"0.norm.weight", "ln1_g", 1, true, false}, [LF_R_LN1_B] = {"0.norm.bias", "ln1_b", 1, true, false},
    [LF_R_LN2_G] = {"1.norm.weight", "ln2_g", 1, true, false}, [LF_R_LN2_B] = {"1.norm.bias", "ln2_b", 1, true, false},
    [LF_R_W1] = {"1.fn.w1.weight", "w1", 2, true, false},      [LF_R_B1] = {"1.fn.w1.bias", "b1", 1, false, false},
    [LF_R_W2] = {"1.fn.w2.weight", "w2", 2, true, false},      [LF_R_B2] = {"1.fn.w2.bias", "b2", 1, false, false}};

/* One layer of fairseq's Linformer sentence encoder. */
static const lf_role fairseq_layer[LF_R_COUNT] = {
    [LF_R_LN1_G] = {"self_attn_layer_norm.weight", "ln1_g", 1, true, false},
    [LF_R_LN1_B] = {"self_attn_layer_norm.bias", "ln1_b", 1, true, false},
    [LF_R_WQ] = {"self_attn.q_proj.weight", "wq", 2, true, false},
    [LF_R_BQ] = {"self_attn.q_proj.bias", "bq", 1, false, false},
    [LF_R_WK] = {"self_attn.k_proj.weight", "wk", 2, true, false},
    [LF_R_BK] = {"self_attn.k_proj.bias", "bk", 1, false, false},
    [LF_R_WV] = {"self_attn.v_proj.weight", "wv", 2, true, false},
    [LF_R_BV] = {"self_attn.v_proj.bias", "bv", 1, false, false},
    [LF_R_E] = {"self_attn.compress_k.weight", "e", 2, false, false},
    [LF_R_F] = {"self_attn.compress_v.weight", "f", 2, false, false},
    [LF_R_WO] = {"self_attn.out_proj.weight", "wo", 2, true, false},
    [LF_R_BO] = {"self_attn.out_proj.bias", "bo", 1, false, false},
    [LF_R_LN2_G] = {"final_layer_norm.weight", "ln2_g", 1, true, false},
    [LF_R_LN2_B] = {"final_layer_norm.bias", "ln2_b", 1, true, false},
    [LF_R_W1] = {"fc1.weight", "w1", 2, true, false}, [LF_R_B1] = {"fc1.bias", "b1", 1, false, false},
    [LF_R_W2] = {"fc2.weight", "w2", 2, true, false}, [LF_R_B2] = {"fc2.bias", "b2", 1, false, false}};

/* LinformerLM's own tensors (a plain Linformer knows them only to refuse them). */
static const lf_role lucid_model[] = {
    {"token_emb.weight", "tok", 2, false, false}, {"pos_emb.weight", "pos", 2, false, false},
    {"to_logits.weight", "head_w", 2, false, false}, {"to_logits.bias", "head_b", 1, false, false}};

static const lf_role fairseq_model[] = {
    {"embed_tokens.weight", "tok", 2, false, false},
    {"embed_positions.weight", "pos", 2, false, false},
    {"layernorm_embedding.weight", "emb_ln_g", 1, false, false},
    {"layernorm_embedding.bias", "emb_ln_b", 1, false, false},
    {"emb_layer_norm.weight", "emb_ln_g", 1, false, false},
    {"emb_layer_norm.bias", "emb_ln_b", 1, false, false},
    {"layer_norm.weight", "final_ln_g", 1, false, false},
    {"layer_norm.bias", "final_ln_b", 1, false, false},
    {"compress_layer.weight", "shared_e", 2, false, false}};

/* fairseq's RobertaLMHead ("X.lm_head." beside "X.sentence_encoder."); its logits'
 * weight is usually tied to embed_tokens and then may be absent. */
static const lf_role fairseq_head[] = {
    {"dense.weight", "head_dense_w", 2, true, false},   {"dense.bias", "head_dense_b", 1, true, false},
    {"layer_norm.weight", "head_ln_g", 1, true, false}, {"layer_norm.bias", "head_ln_b", 1, true, false},
    {"weight", "head_w", 2, false, false},              {"bias", "head_b", 1, false, false}};

#define COUNT(a) (sizeof a / sizeof *a)
/* What lucidrains' model rows share. */
#define LUCID_MODEL                                                                                             \
    .family = "lucidrains", .layer = lucid_layer, .model = lucid_model, .model_count = COUNT(lucid_model),      \
    .position = LF_POSITION_KV, .norm = LF_NORM_PRE, .padding_idx = -1

const lf_layout lf__layouts[LF_LAYOUT_COUNT] = {
    [LF_LAYOUT_LUCID_ATTENTION] = {.name = "lucidrains' LinformerSelfAttention", .key = "lucidrains-attention",
                                   .family = "lucidrains", .base = "", .layer = lucid_attention,
                                   .position = LF_POSITION_KV, .norm = LF_NORM_PRE, .padding_idx = -1},
    /* an LM's row before the Linformer's it wraps: its marker decides */
    [LF_LAYOUT_LUCID_LM] = {.name = "lucidrains' LinformerLM", .key = "lucidrains-lm", .base = "linformer.net.",
                            .stack = "layers.", .marker = "token_emb.weight", .embed = LF_EMBED_REQUIRED, LUCID_MODEL},
    [LF_LAYOUT_LUCID] = {.name = "lucidrains' Linformer", .key = "lucidrains", .base = "net.", .stack = "layers.",
                         LUCID_MODEL},
    /* reversible=True: ReversibleSequence's blocks, each the same two sub-layers */
    [LF_LAYOUT_LUCID_REV_LM] = {.name = "lucidrains' reversible LinformerLM", .key = "lucidrains-reversible-lm",
                                .base = "linformer.net.", .stack = "blocks.", .reversible = true,
                                .marker = "token_emb.weight", .embed = LF_EMBED_REQUIRED, LUCID_MODEL},
    [LF_LAYOUT_LUCID_REV] = {.name = "lucidrains' reversible Linformer", .key = "lucidrains-reversible", .base = "net.",
                             .stack = "blocks.", .reversible = true, LUCID_MODEL},
    [LF_LAYOUT_FAIRSEQ] = {.name = "fairseq's encoder", .key = "fairseq", .family = "fairseq", .base = "",
                           .stack = "layers.", .layer = fairseq_layer, .model = fairseq_model,
                           .model_count = COUNT(fairseq_model), .head = fairseq_head, .head_count = COUNT(fairseq_head),
                           .head_beside = "sentence_encoder.", .head_at = "lm_head.", .embed = LF_EMBED_OPTIONAL,
                           .f_from_e = true, .position = LF_POSITION_INPUT, .norm = LF_NORM_POST, .padding_idx = 1}};

/* ---- Names ---- */

/* What follows `prefix` in s, NULL when s does not start with it. */
static const char *after(const char *s, const char *prefix)
{
    const size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

void lf__layout_role_name(const lf_layout *l, lf_role_id role, char *out, size_t size)
{
    const char *suffix = l->layer[role].suffix;
    if (l->reversible)
        snprintf(out, size, "%s.net.%s", suffix[0] == '0' ? "f" : "g", suffix + 2);
    else
        snprintf(out, size, "%s", suffix);
}

void lf__layout_layer_name(const lf_layout *l, const char *stem, int layer, lf_role_id role, char *out, size_t size)
{
    char rest[LF_ROLE_NAME_MAX];
    lf__layout_role_name(l, role, rest, sizeof rest);
    if (!l->stack)
        snprintf(out, size, "%s%s", stem, rest);
    else
        snprintf(out, size, "%s%s%s%d.%s", stem, l->base, l->stack, layer, rest);
}

/* What follows "{i}." of a layer below `layers` as lf__layout_layer_name
 * writes it (no leading zeros), NULL for another name. */
static const char *layer_rest(const lf_layout *l, const char *p, int layers, int *layer)
{
    if (!(p = after(p, l->base)) || !(p = after(p, l->stack))) return NULL;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return NULL;
    long i = 0;
    for (; *p >= '0' && *p <= '9' && i < layers; p++) i = i * 10 + (*p - '0');
    if (*p != '.' || i >= layers) return NULL;
    *layer = (int)i;
    return p + 1;
}

/* Whether `rest`, what follows a layer's index, names role r as lf__layout_layer_name writes it. */
static bool is_role(const lf_layout *l, const char *rest, int r)
{
    char name[LF_ROLE_NAME_MAX];
    if (!l->layer[r].suffix) return false;
    lf__layout_role_name(l, (lf_role_id)r, name, sizeof name);
    return strcmp(rest, name) == 0;
}

int lf__layout_layer_role(const lf_layout *l, const char *stem, int layers, const char *name, int *layer)
{
    const char *rest = after(name, stem);
    *layer = 0;
    if (rest && l->stack) rest = layer_rest(l, rest, layers, layer);
    for (int r = 0; rest && r < LF_R_COUNT; r++)
        if (is_role(l, rest, r)) return r;
    return -1;
}

const lf_role *lf__layout_model_role(const lf_layout *l, const char *weight)
{
    for (size_t r = 0; r < l->model_count; r++)
        if (strcmp(l->model[r].weight, weight) == 0) return &l->model[r];
    return NULL;
}

/* ---- The table for hosts (linformer.h) ---- */

_Static_assert(sizeof((lf_layout_tensor *)0)->name == LF_ROLE_NAME_MAX, "lf_layout_tensor.name holds a role's name");

lf_status lf_layout_tensors(const char *layout, lf_layout_part part, lf_layout_tensor *out, size_t capacity,
                            size_t *count, char *errbuf, size_t errbuf_size)
{
    if (!count) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "count is NULL");
    *count = 0;
    if (!out && capacity)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL but capacity is %zu", capacity);
    if (part != LF_LAYOUT_LAYER && part != LF_LAYOUT_MODEL)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "part %d is neither LF_LAYOUT_LAYER nor "
                            "LF_LAYOUT_MODEL", (int)part);
    const lf_layout *l = NULL;
    char keys[256] = "";
    for (int i = 0; i < LF_LAYOUT_COUNT && !l; i++) {
        if (layout && strcmp(layout, lf__layouts[i].key) == 0) l = &lf__layouts[i];
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? ", " : "", lf__layouts[i].key);
    }
    if (!l)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "layout %s%s%s is not one of %s",
                            layout ? "\"" : "", layout ? layout : "NULL", layout ? "\"" : "", keys);
    const bool model = part == LF_LAYOUT_MODEL;
    const lf_role *roles = model ? l->model : l->layer;
    size_t n = 0;
    for (size_t r = 0; r < (model ? l->model_count : LF_R_COUNT); r++) {
        if (!roles[r].suffix) continue;
        if (n < capacity) {
            lf_layout_tensor *t = &out[n];
            *t = (lf_layout_tensor){.weight = roles[r].weight, .ndim = roles[r].ndim, .required = roles[r].required,
                                    .transposed = roles[r].transposed};
            if (model)
                snprintf(t->name, sizeof t->name, "%s", roles[r].suffix);
            else
                lf__layout_role_name(l, (lf_role_id)r, t->name, sizeof t->name);
        }
        n++;
    }
    *count = n;
    return LF_OK;
}

/* ---- __metadata__ ---- */

/* Skips the decimal digits at *p; false when there are none. */
static bool digits(const char **p)
{
    const size_t n = strspn(*p, "0123456789");
    *p += n;
    return n > 0;
}

bool lf__plain_number(const char *v, bool real)
{
    const char *p = v + (*v == '-');
    if (!digits(&p)) return false;
    if (real && *p == '.' && (++p, !digits(&p))) return false;
    if (real && (*p == 'e' || *p == 'E')) {
        p += p[1] == '+' || p[1] == '-' ? 2 : 1;
        if (!digits(&p)) return false;
    }
    return *p == 0;
}

/* ---- Tensors ---- */

lf_status lf__layout_get(lf_context *ctx, const char *path, const lf_st_file *f, const char *name,
                         const lf_role *role, const lf_st_tensor **out)
{
    *out = lf_st_find(f, name);
    if (!*out) return role->required ? lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is missing", path, name) : LF_OK;
    if ((*out)->ndim != role->ndim)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" has %d dimensions, expected %d", path, name,
                        (*out)->ndim, role->ndim);
    if ((*out)->dtype == LF_ST_I32 || (*out)->dtype == LF_ST_I64)
        return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is %s, expected a float type", path, name,
                        lf_st_dtype_name((*out)->dtype));
    return LF_OK;
}

lf_status lf__layout_get_layer(lf_context *ctx, const char *path, const lf_st_file *f, const lf_layout *l,
                               const char *stem, int layer, const lf_st_tensor **t)
{
    char name[LF_LAYOUT_NAME_MAX];
    for (int r = 0; r < LF_R_COUNT; r++) {
        t[r] = NULL;
        if (!l->layer[r].suffix) continue;
        lf__layout_layer_name(l, stem, layer, (lf_role_id)r, name, sizeof name);
        LF_TRY(lf__layout_get(ctx, path, f, name, &l->layer[r], &t[r]));
    }
    return LF_OK;
}

lf_status lf__layout_floats(lf_context *ctx, const char *path, const lf_st_tensor *t, bool transposed, float **out)
{
    float *data = malloc(t->count * sizeof *data);
    *out = NULL;
    if (!data) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for tensor \"%s\"", t->name);
    char msg[512];
    const lf_status st = lf_st_to_f32(t, data, msg, sizeof msg);
    if (st != LF_OK) {
        free(data);
        return lf__fail(ctx, st, "%s: %s", path, msg);
    }
    if (!transposed) {
        *out = data;
        return LF_OK;
    }
    float *tr = malloc(t->count * sizeof *tr);
    if (!tr) {
        free(data);
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for tensor \"%s\"", t->name);
    }
    const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) tr[c * rows + r] = data[r * cols + c];
    free(data);
    *out = tr;
    return LF_OK;
}

lf_status lf__expect_shape(lf_context *ctx, const char *path, const lf_st_tensor *t, int64_t rows, int64_t cols)
{
    for (int d = 0; t && d < t->ndim && d < 2; d++) {
        const int64_t want = d ? cols : rows;
        if (t->shape[d] != want)
            return lf__fail(ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" has %lld in dimension %d, expected %lld", path,
                            t->name, (long long)t->shape[d], d, (long long)want);
    }
    return LF_OK;
}

/* ---- A layer's config ---- */

#define FAIL(status, ...) lf__fail(l->ctx, (status), __VA_ARGS__)

/* The name of the layer's tensor `role`, present or not, for a message. */
static const char *name_of(const lf_layer_tensors *l, lf_role_id role, char *out, size_t size)
{
    if (l->t[role]) return l->t[role]->name;
    lf__layout_layer_name(l->layout, l->stem, l->layer, role, out, size);
    return out;
}

/* Whether a layer's projection is the model's layerwise one (fairseq keeps a
 * copy under every layer). */
static bool same_tensor(const lf_st_tensor *a, const lf_st_tensor *b)
{
    return a && b && a->dtype == b->dtype && a->count == b->count && a->shape[0] == b->shape[0] &&
           memcmp(a->data, b->data, a->count * (a->dtype == LF_ST_F64 ? 8 : a->dtype == LF_ST_F32 ? 4 : 2)) == 0;
}

/* E's sequence length n and k, from the layer's own E or the model's layerwise
 * one (stored [k, n], or [n, k] where transposed); F must match E. */
static lf_status projection(const lf_layer_tensors *l, int64_t *n, int64_t *k, bool *layerwise)
{
    const lf_st_tensor *const *t = l->t, *shared = l->shared_e;
    const lf_role *shared_role = lf__layout_model_role(l->layout, "shared_e");
    const bool own = t[LF_R_E] && !(shared && same_tensor(t[LF_R_E], shared));
    const bool own_f = t[LF_R_F] && !(shared && same_tensor(t[LF_R_F], shared));
    const char *e_name = l->layout->layer[LF_R_E].suffix, *shared_name = shared_role ? shared_role->suffix : "";
    if (!own && !shared)
        return FAIL(LF_ERR_FORMAT, "%s: layer %d has no \"%s\" and the model no \"%s\"", l->path, l->layer, e_name,
                    shared_name);
    /* with a layerwise projection a layer's E and F may only be copies of it */
    if (shared && (own || own_f))
        return FAIL(LF_ERR_FORMAT, "%s: layer %d has a \"%s\" of its own beside the layerwise \"%s\"", l->path,
                    l->layer, own ? e_name : l->layout->layer[LF_R_F].suffix, shared_name);
    *layerwise = !own;
    const lf_st_tensor *e = own ? t[LF_R_E] : shared;
    const bool transposed = own ? l->layout->layer[LF_R_E].transposed : shared_role->transposed;
    *n = e->shape[transposed ? 0 : 1], *k = e->shape[transposed ? 1 : 0];
    if (*n <= 0 || *n > (1 << 24) || *k <= 0 || *k > (1 << 20))
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" [%lld, %lld] is out of range", l->path, e->name,
                    (long long)e->shape[0], (long long)e->shape[1]);
    if (!own || !t[LF_R_F] || same_tensor(t[LF_R_F], shared)) return LF_OK;
    const bool f_transposed = l->layout->layer[LF_R_F].transposed;
    return lf__expect_shape(l->ctx, l->path, t[LF_R_F], f_transposed ? *n : *k, f_transposed ? *k : *n);
}

/* d_model, the query rows and the key/value rows: all heads' or one head's. */
static lf_status widths(const lf_layer_tensors *l, int heads, int64_t *D, int64_t *qrows, int64_t *kvrows)
{
    const lf_st_tensor *wq = l->t[LF_R_WQ];
    *D = wq->shape[1], *qrows = wq->shape[0], *kvrows = l->t[LF_R_WK]->shape[0];
    if (*D <= 0 || *D > (1 << 20))
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" [%lld, %lld] is out of range", l->path, wq->name,
                    (long long)*qrows, (long long)*D);
    if (*qrows <= 0 || *qrows % heads)
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" [%lld, %lld] does not split into %d heads", l->path, wq->name,
                    (long long)*qrows, (long long)*D, heads);
    const int64_t dh = *qrows / heads;
    if (*kvrows != *qrows && *kvrows != dh)
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" has %lld rows: expected %lld (all heads) or %lld (one key/value "
                                   "head)", l->path, l->t[LF_R_WK]->name, (long long)*kvrows, (long long)*qrows,
                    (long long)dh);
    return LF_OK;
}

/* Values of their own (to_v), or share_kv's keys as values; each needs its projection. */
static lf_status values(const lf_layer_tensors *l)
{
    const lf_st_tensor *const *t = l->t;
    char v[LF_LAYOUT_NAME_MAX], f[LF_LAYOUT_NAME_MAX];
    if (!t[LF_R_WV] && (t[LF_R_F] || t[LF_R_BV]))
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" without \"%s\" (share_kv has no values of its own)", l->path,
                    (t[LF_R_F] ? t[LF_R_F] : t[LF_R_BV])->name, name_of(l, LF_R_WV, v, sizeof v));
    if (t[LF_R_WV] && !t[LF_R_F] && !l->layout->f_from_e)
        return FAIL(LF_ERR_FORMAT, "%s: tensor \"%s\" is missing beside \"%s\"", l->path,
                    name_of(l, LF_R_F, f, sizeof f), t[LF_R_WV]->name);
    return LF_OK;
}

lf_status lf__layer_config(const lf_layer_tensors *l, int heads, lf_attention_config *c)
{
    const lf_st_tensor *const *t = l->t;
    int64_t D, qrows, kvrows, n = 0, k = 0;
    bool layerwise = false;
    LF_TRY(widths(l, heads, &D, &qrows, &kvrows));
    LF_TRY(values(l));
    LF_TRY(projection(l, &n, &k, &layerwise));
    const int64_t shapes[][3] = {{LF_R_WK, kvrows, D}, {LF_R_WV, kvrows, D}, {LF_R_BQ, qrows, 0}, {LF_R_BK, kvrows, 0},
                                 {LF_R_BV, kvrows, 0}, {LF_R_WO, D, qrows},  {LF_R_BO, D, 0}};
    for (size_t j = 0; j < COUNT(shapes); j++)
        LF_TRY(lf__expect_shape(l->ctx, l->path, t[shapes[j][0]], shapes[j][1], shapes[j][2]));
    lf_attention_config_init(c, (int)D, heads, (int)n, (int)k);
    c->d_head = (int)(qrows / heads);
    c->kv_heads = kvrows == qrows ? heads : 1;
    c->bias_q = t[LF_R_BQ] != NULL, c->bias_k = t[LF_R_BK] != NULL, c->bias_v = t[LF_R_BV] != NULL;
    c->bias_out = t[LF_R_BO] != NULL;
    c->share_kv = !t[LF_R_WV];
    c->sharing = layerwise ? LF_SHARE_LAYERWISE : (c->share_kv || !t[LF_R_F]) ? LF_SHARE_KV : LF_SHARE_HEADWISE;
    c->position = l->layout->position;
    return LF_OK;
}
