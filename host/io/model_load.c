/*
 * model_load.c - a model from a safetensors file in the state-dict names of
 * lucidrains' Linformer / LinformerLM or fairseq's Linformer encoder.
 *
 * The file's names say the layout and where the model sits in it (a stem such
 * as "encoder.sentence_encoder." or "model."); every tensor under that stem
 * must be one the layout knows, tensors outside it are not the model's. The
 * shapes give each layer's sizes (per-layer k included), __metadata__ or the
 * caller what shapes cannot say (heads, activation, norm); the two must agree.
 * model_config.c turns the tensors into configs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_load.h"

/* lucidrains: under "net.layers.{i}." of the stem (LinformerLM: "linformer.net.layers.{i}."). */
static const lf_role lucid_layer[LF_R_COUNT] = {
    [LF_R_LN1_G] = {"0.norm.weight", "ln1_g", 1, true},      [LF_R_LN1_B] = {"0.norm.bias", "ln1_b", 1, true},
    [LF_R_WQ] = {"0.fn.to_q.weight", "wq", 2, true},         [LF_R_BQ] = {"0.fn.to_q.bias", "bq", 1, false},
    [LF_R_WK] = {"0.fn.to_k.weight", "wk", 2, true},         [LF_R_BK] = {"0.fn.to_k.bias", "bk", 1, false},
    [LF_R_WV] = {"0.fn.to_v.weight", "wv", 2, false},        [LF_R_BV] = {"0.fn.to_v.bias", "bv", 1, false},
    [LF_R_E] = {"0.fn.proj_k", "e", 2, true},                [LF_R_F] = {"0.fn.proj_v", "f", 2, false},
    [LF_R_WO] = {"0.fn.to_out.weight", "wo", 2, true},       [LF_R_BO] = {"0.fn.to_out.bias", "bo", 1, false},
    [LF_R_LN2_G] = {"1.norm.weight", "ln2_g", 1, true},      [LF_R_LN2_B] = {"1.norm.bias", "ln2_b", 1, true},
    [LF_R_W1] = {"1.fn.w1.weight", "w1", 2, true},           [LF_R_B1] = {"1.fn.w1.bias", "b1", 1, false},
    [LF_R_W2] = {"1.fn.w2.weight", "w2", 2, true},           [LF_R_B2] = {"1.fn.w2.bias", "b2", 1, false}};

/* fairseq: under "layers.{i}." of the stem. */
static const lf_role fairseq_layer[LF_R_COUNT] = {
    [LF_R_LN1_G] = {"self_attn_layer_norm.weight", "ln1_g", 1, true},
    [LF_R_LN1_B] = {"self_attn_layer_norm.bias", "ln1_b", 1, true},
    [LF_R_WQ] = {"self_attn.q_proj.weight", "wq", 2, true},  [LF_R_BQ] = {"self_attn.q_proj.bias", "bq", 1, false},
    [LF_R_WK] = {"self_attn.k_proj.weight", "wk", 2, true},  [LF_R_BK] = {"self_attn.k_proj.bias", "bk", 1, false},
    [LF_R_WV] = {"self_attn.v_proj.weight", "wv", 2, true},  [LF_R_BV] = {"self_attn.v_proj.bias", "bv", 1, false},
    [LF_R_E] = {"self_attn.compress_k.weight", "e", 2, false},
    [LF_R_F] = {"self_attn.compress_v.weight", "f", 2, false},
    [LF_R_WO] = {"self_attn.out_proj.weight", "wo", 2, true}, [LF_R_BO] = {"self_attn.out_proj.bias", "bo", 1, false},
    [LF_R_LN2_G] = {"final_layer_norm.weight", "ln2_g", 1, true},
    [LF_R_LN2_B] = {"final_layer_norm.bias", "ln2_b", 1, true},
    [LF_R_W1] = {"fc1.weight", "w1", 2, true},               [LF_R_B1] = {"fc1.bias", "b1", 1, false},
    [LF_R_W2] = {"fc2.weight", "w2", 2, true},               [LF_R_B2] = {"fc2.bias", "b2", 1, false}};

/* The model's own tensors, under the stem (lucidrains: LinformerLM's). */
static const lf_role lucid_model[] = {{"token_emb.weight", "tok", 2, false}, {"pos_emb.weight", "pos", 2, false},
                                      {"to_logits.weight", "head_w", 2, false}, {"to_logits.bias", "head_b", 1, false}};
static const lf_role fairseq_model[] = {
    {"embed_tokens.weight", "tok", 2, false},        {"embed_positions.weight", "pos", 2, false},
    {"layernorm_embedding.weight", "emb_ln_g", 1, false}, {"layernorm_embedding.bias", "emb_ln_b", 1, false},
    {"emb_layer_norm.weight", "emb_ln_g", 1, false}, {"emb_layer_norm.bias", "emb_ln_b", 1, false},
    {"layer_norm.weight", "final_ln_g", 1, false},   {"layer_norm.bias", "final_ln_b", 1, false},
    {"compress_layer.weight", "shared_e", 2, false}};

/* fairseq's RobertaLMHead, "lm_head." beside an encoder at "...sentence_encoder.": its
 * logits weight is usually tied to embed_tokens and then may be absent. */
static const lf_role fairseq_head[] = {
    {"dense.weight", "head_dense_w", 2, true},   {"dense.bias", "head_dense_b", 1, true},
    {"layer_norm.weight", "head_ln_g", 1, true}, {"layer_norm.bias", "head_ln_b", 1, true},
    {"weight", "head_w", 2, false},              {"bias", "head_b", 1, false}};

static const char LUCID_PROBE[] = "net.layers.0.0.fn.to_q.weight";
/* lucidrains' reversible=True: ReversibleSequence's blocks, each the same two
 * sub-layers as a layer's "0." and "1.", as "f.net." and "g.net.". */
static const char REVERSIBLE_PROBE[] = "net.blocks.0.f.net.fn.to_q.weight";
static const char FAIRSEQ_PROBE[] = "layers.0.self_attn.q_proj.weight";

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool ends_with(const char *s, const char *suffix)
{
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- Which layout, and where in the file ---- */

/* A model found at a probe's name: its layout, stem and layer base. */
static bool candidate(lf_source *s, const char *name, const char *prefix)
{
    const bool fair = ends_with(name, FAIRSEQ_PROBE), rev = ends_with(name, REVERSIBLE_PROBE);
    const bool lucid = rev || ends_with(name, LUCID_PROBE);
    if (!lucid && !fair) return false;
    s->reversible = rev;
    const size_t stem_len = strlen(name) - strlen(rev ? REVERSIBLE_PROBE : lucid ? LUCID_PROBE : FAIRSEQ_PROBE);
    if (stem_len >= sizeof s->stem) return false;
    memcpy(s->stem, name, stem_len);
    s->stem[stem_len] = 0;
    s->fairseq = fair;
    snprintf(s->base, sizeof s->base, "%s%s", s->stem, lucid ? "net." : "");
    char lm[LF_NAME_MAX + 32];
    const size_t wrapper = strlen("linformer.");
    snprintf(lm, sizeof lm, "%.*stoken_emb.weight", (int)(stem_len > wrapper ? stem_len - wrapper : 0), s->stem);
    s->lm = lucid && ends_with(s->stem, "linformer.") && lf_st_find(s->f, lm);
    if (s->lm) s->stem[stem_len - wrapper] = 0; /* the LM's own tensors sit above the wrapped Linformer */
    return !prefix || strcmp(s->stem, prefix) == 0;
}

/* No model in the file: say what is there and what was looked for. */
static lf_status unrecognised(lf_source *s, const char *prefix)
{
    char found[600] = "";
    size_t used = 0;
    for (size_t i = 0; i < s->f->count && i < 6 && used < sizeof found; i++)
        used += snprintf(found + used, sizeof found - used, "%s\"%s\"", i ? ", " : "", s->f->tensors[i].name);
    return lf__fail(s->ctx, LF_ERR_FORMAT,
                    "%s: no Linformer model%s%s%s: found %zu tensors (%s%s); expected lucidrains' Linformer "
                    "(\"%s\"), LinformerLM (\"token_emb.weight\", \"linformer.%s\") or fairseq's encoder (\"%s\")",
                    s->path, prefix ? " under prefix \"" : "", prefix ? prefix : "", prefix ? "\"" : "",
                    s->f->count, found, s->f->count > 6 ? ", ..." : "", LUCID_PROBE, LUCID_PROBE, FAIRSEQ_PROBE);
}

static const char *layout_name(const lf_source *s)
{
    if (s->fairseq) return "fairseq's encoder";
    if (s->reversible) return s->lm ? "lucidrains' reversible LinformerLM" : "lucidrains' reversible Linformer";
    return s->lm ? "lucidrains' LinformerLM" : "lucidrains' Linformer";
}

/* Two models found: each by its layout and first tensor, and whether a prefix tells them apart. */
static lf_status two_models(const lf_source *a, const char *a_name, const lf_source *b, const char *b_name)
{
    if (strcmp(a->stem, b->stem) == 0)
        return lf__fail(a->ctx, LF_ERR_FORMAT, "%s: more than one model: %s at tensor \"%s\" and %s at \"%s\", both "
                        "under the prefix \"%s\", which cannot tell them apart: convert them to separate files",
                        a->path, layout_name(a), a_name, layout_name(b), b_name, a->stem);
    return lf__fail(a->ctx, LF_ERR_FORMAT, "%s: more than one model: %s at tensor \"%s\" and %s at \"%s\"; choose "
                    "one with the prefix \"%s\" or \"%s\"", a->path, layout_name(a), a_name, layout_name(b), b_name,
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

static const lf_role *layer_roles(const lf_source *s) { return s->fairseq ? fairseq_layer : lucid_layer; }

static void model_roles(const lf_source *s, const lf_role **roles, size_t *count)
{
    *roles = s->fairseq ? fairseq_model : lucid_model;
    *count = s->fairseq ? sizeof fairseq_model / sizeof *fairseq_model : sizeof lucid_model / sizeof *lucid_model;
}

/* What follows the layer's index: "layers.{i}.", or a reversible block's
 * "blocks.{i}." with a role's "0." and "1." as "f.net." and "g.net.". */
static const char *stack_word(const lf_source *s) { return s->reversible ? "blocks." : "layers."; }

static void layer_name(const lf_source *s, int layer, const char *suffix, char *out, size_t size)
{
    if (s->reversible)
        snprintf(out, size, "%sblocks.%d.%s.net.%s", s->base, layer, suffix[0] == '0' ? "f" : "g", suffix + 2);
    else
        snprintf(out, size, "%slayers.%d.%s", s->base, layer, suffix);
}

/* Whether `rest`, what follows a layer's index, is a role's suffix as layer_name writes it. */
static bool is_suffix(const lf_source *s, const char *rest, const char *suffix)
{
    if (!s->reversible) return strcmp(rest, suffix) == 0;
    return starts_with(rest, suffix[0] == '0' ? "f.net." : "g.net.") && strcmp(rest + 6, suffix + 2) == 0;
}

/* The layer of a name "BASE layers.{i}." (or "blocks.{i}.") as layer_name writes it (no
 * leading zeros), -1 for another name; *rest gets what follows. */
static int layer_of(const lf_source *s, const char *name, const char **rest)
{
    if (!starts_with(name, s->base) || !starts_with(name + strlen(s->base), stack_word(s))) return -1;
    const char *p = name + strlen(s->base) + strlen(stack_word(s));
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return -1;
    long i = 0;
    for (; *p >= '0' && *p <= '9' && i < s->layers; p++) i = i * 10 + (*p - '0');
    if (*p != '.' || i >= s->layers) return -1;
    *rest = p + 1;
    return (int)i;
}

/* Whether a tensor under the stem is one of the layout's: one pass over the
 * roles, never over the layers, so loading stays linear in the depth. */
static bool known(const lf_source *s, const char *name)
{
    const lf_role *roles;
    size_t count;
    model_roles(s, &roles, &count);
    const char *rest = name + strlen(s->stem);
    for (size_t r = 0; r < count; r++)
        if (!strcmp(rest, roles[r].suffix)) return true;
    if (layer_of(s, name, &rest) < 0) return false;
    for (int r = 0; r < LF_R_COUNT; r++)
        if (is_suffix(s, rest, layer_roles(s)[r].suffix)) return true;
    return false;
}

/* Finds a tensor, checks its rank and type; a missing required one is an error. */
static lf_status get(const lf_source *s, const char *name, const lf_role *role, const lf_st_tensor **out)
{
    *out = lf_st_find(s->f, name);
    if (!*out) return role->required ? lf__fail(s->ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is missing", s->path, name) : LF_OK;
    if ((*out)->ndim != role->ndim)
        return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" has %d dimensions, expected %d", s->path, name,
                        (*out)->ndim, role->ndim);
    if ((*out)->dtype == LF_ST_I32 || (*out)->dtype == LF_ST_I64)
        return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: tensor \"%s\" is %s, expected a float type", s->path, name,
                        lf_st_dtype_name((*out)->dtype));
    return LF_OK;
}

/* The model's own tensors, stem + each role's suffix, into s->m. */
static lf_status collect_model(lf_source *s, const char *stem, const lf_role *roles, size_t count)
{
    char name[LF_NAME_MAX + 128];
    for (size_t r = 0; r < count; r++) {
        snprintf(name, sizeof name, "%s%s", stem, roles[r].suffix);
        const lf_st_tensor *t;
        LF_TRY(get(s, name, &roles[r], &t));
        for (int m = 0; t && m < LF_M_COUNT; m++)
            if (!strcmp(roles[r].weight, lf__model_tensor_name(m))) s->m[m] = t;
    }
    return LF_OK;
}

/* fairseq's masked-LM head beside a token encoder ("X.sentence_encoder." and
 * "X.lm_head."), where its dense layer is there: then the model gives logits. */
static lf_status collect_head(lf_source *s)
{
    static const char encoder[] = "sentence_encoder.";
    if (!s->fairseq || !s->m[LF_M_TOK] || !ends_with(s->stem, encoder)) return LF_OK;
    char stem[LF_NAME_MAX + 16], probe[LF_NAME_MAX + 64];
    snprintf(stem, sizeof stem, "%.*slm_head.", (int)(strlen(s->stem) - strlen(encoder)), s->stem);
    snprintf(probe, sizeof probe, "%s%s", stem, fairseq_head[0].suffix);
    if (!lf_st_find(s->f, probe)) return LF_OK;
    LF_TRY(collect_model(s, stem, fairseq_head, sizeof fairseq_head / sizeof *fairseq_head));
    if (!s->m[LF_M_HEAD_W]) s->m[LF_M_HEAD_W] = s->m[LF_M_TOK]; /* tied */
    return LF_OK;
}

static lf_status collect(lf_source *s)
{
    char name[LF_NAME_MAX + 128];
    layer_name(s, 0, layer_roles(s)[LF_R_WQ].suffix, name, sizeof name);
    for (s->layers = 0; lf_st_find(s->f, name) && s->layers < LF_MAX_LAYERS;)
        layer_name(s, ++s->layers, layer_roles(s)[LF_R_WQ].suffix, name, sizeof name);
    if (lf_st_find(s->f, name)) /* a layer past the last one counted */
        return lf__fail(s->ctx, LF_ERR_UNSUPPORTED, "%s: more than %d layers (tensor \"%s\")", s->path, LF_MAX_LAYERS,
                        name);
    if (!(s->t = calloc(s->layers, sizeof *s->t))) return lf__fail(s->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < s->f->count; i++) {
        const char *t = s->f->tensors[i].name;
        if (starts_with(t, s->stem) && !known(s, t))
            return lf__fail(s->ctx, LF_ERR_FORMAT, "%s: unknown tensor \"%s\" (not part of %s)", s->path, t,
                            layout_name(s));
    }
    for (int i = 0; i < s->layers; i++)
        for (int r = 0; r < LF_R_COUNT; r++) {
            layer_name(s, i, layer_roles(s)[r].suffix, name, sizeof name);
            LF_TRY(get(s, name, &layer_roles(s)[r], &s->t[i][r]));
        }
    const lf_role *roles;
    size_t count;
    model_roles(s, &roles, &count);
    LF_TRY(collect_model(s, s->stem, roles, count));
    return collect_head(s);
}

/* ---- Uploading ---- */

/* Converts a tensor and sets it as `weight` of `layer` (-1: the model's);
 * lucidrains' proj_k, proj_v are E^T, F^T: transposed. */
static lf_status set(const lf_source *s, lf_model *m, int layer, const char *weight, const lf_st_tensor *t,
                     bool transpose)
{
    float *data = malloc(t->count * sizeof *data), *tr = NULL;
    if (!data) return lf__fail(s->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for tensor \"%s\"", t->name);
    char msg[512];
    lf_status st = lf_st_to_f32(t, data, msg, sizeof msg);
    if (st != LF_OK) lf__fail(s->ctx, st, "%s: %s", s->path, msg);
    if (st == LF_OK && transpose) {
        const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];
        if (!(tr = malloc(t->count * sizeof *tr))) st = lf__fail(s->ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
        for (size_t r = 0; tr && r < rows; r++)
            for (size_t c = 0; c < cols; c++) tr[c * rows + r] = data[r * cols + c];
    }
    if (st == LF_OK) st = lf__model_set(m, layer, weight, NULL, 0, tr ? tr : data, t->count);
    free(data);
    free(tr);
    return st;
}

static lf_status upload(const lf_source *s, lf_model *m)
{
    for (int i = 0; i < s->layers; i++)
        for (int r = 0; r < LF_R_COUNT; r++) {
            const lf_st_tensor *t = s->t[i][r];
            const bool projection = r == LF_R_E || r == LF_R_F;
            /* a layer's copy of the layerwise projection is the model's */
            if (t && !(projection && s->layerwise))
                LF_TRY(set(s, m, i, layer_roles(s)[r].weight, t, projection && !s->fairseq));
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
