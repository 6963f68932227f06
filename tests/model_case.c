/* model_case.c - model files with random weights and their references (see model_case.h). */
#include "model_case.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* Adds a random tensor [rows, cols] ([cols] when rows is 0) and returns its data. */
float *lf_builder_add(lf_builder *b, const char *name, int rows, int cols, float lo, float hi)
{
    cr_assert(b->count < MAX_TENSORS);
    const size_t i = b->count++, count = (size_t)(rows ? rows : 1) * cols;
    snprintf(b->name[i], sizeof b->name[i], "%s", name);
    b->shape[i][0] = rows ? rows : cols, b->shape[i][1] = cols;
    b->data[i] = malloc(count * sizeof(float));
    lf_test_fill(b->data[i], count, &b->rng, lo, hi);
    b->t[i] = (st_tensor){b->name[i], ST_F32, rows ? 2 : 1, b->shape[i], b->data[i]};
    return b->data[i];
}

void lf_builder_write(lf_builder *b, const char *path, const char *const *meta, size_t pairs)
{
    char msg[512];
    cr_assert_eq(st_save(path, b->t, b->count, meta, pairs, NULL, 0, msg, sizeof msg), 0, "%s", msg);
}

void lf_builder_free(lf_builder *b)
{
    for (size_t i = 0; i < b->count; i++) free(b->data[i]);
}

/* fairseq's encoder under `stem`: layerwise compress_layer, biases, post-norm. */
void lf_fairseq_model(lf_builder *b, const char *stem, const lf_model_shape *s, lf_ref_model *m, lf_ref_layer *L)
{
    char name[192];
    const int D = s->D;
    const float w = 0.4f;
    *m = (lf_ref_model){.kind = s->embeddings ? LF_MODEL_TOKEN_ENCODER : LF_MODEL_ENCODER, .layers = s->layers,
                        .d_model = D, .d_ff = s->ff, .vocab = s->vocab, .norm = LF_NORM_POST, .act = LF_ACT_GELU,
                        .eps = 1e-5, .layer = L, .pos_offset = 2, .embed_scale = 1.0};
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    m->shared_e = lf_builder_add(b, NAME("%scompress_layer.weight", stem), s->k[0], s->n, -w, w);
    if (s->embeddings) {
        m->tok = lf_builder_add(b, NAME("%sembed_tokens.weight", stem), s->vocab, D, -1, 1);
        m->pos = lf_builder_add(b, NAME("%sembed_positions.weight", stem), s->n + 2, D, -1, 1);
        m->emb_g = lf_builder_add(b, NAME("%slayernorm_embedding.weight", stem), 0, D, 0.5f, 1.5f);
        m->emb_b = lf_builder_add(b, NAME("%slayernorm_embedding.bias", stem), 0, D, -0.5f, 0.5f);
    }
    for (int i = 0; i < s->layers; i++) {
        lf_ref_layer *l = &L[i];
        lf_attention_config_init(&l->attn, D, s->heads, s->n, s->k[0]);
        l->attn.sharing = LF_SHARE_LAYERWISE, l->attn.position = LF_POSITION_INPUT;
        lf_ref_resolve(&l->attn);
        char base[64];
        snprintf(base, sizeof base, "%.40slayers.%d.", stem, i);
        static const char *const proj[] = {"q", "k", "v", "out"};
        const float **wt[] = {&l->w.wq, &l->w.wk, &l->w.wv, &l->w.wo}, **bs[] = {&l->w.bq, &l->w.bk, &l->w.bv, &l->w.bo};
        for (int j = 0; j < 4; j++) {
            *wt[j] = lf_builder_add(b, NAME("%sself_attn.%s_proj.weight", base, proj[j]), D, D, -w, w);
            *bs[j] = lf_builder_add(b, NAME("%sself_attn.%s_proj.bias", base, proj[j]), 0, D, -w, w);
        }
        l->ln1_g = lf_builder_add(b, NAME("%sself_attn_layer_norm.weight", base), 0, D, 0.5f, 1.5f);
        l->ln1_b = lf_builder_add(b, NAME("%sself_attn_layer_norm.bias", base), 0, D, -0.5f, 0.5f);
        l->w1 = lf_builder_add(b, NAME("%sfc1.weight", base), s->ff, D, -w, w);
        l->b1 = lf_builder_add(b, NAME("%sfc1.bias", base), 0, s->ff, -w, w);
        l->w2 = lf_builder_add(b, NAME("%sfc2.weight", base), D, s->ff, -w, w);
        l->b2 = lf_builder_add(b, NAME("%sfc2.bias", base), 0, D, -w, w);
        l->ln2_g = lf_builder_add(b, NAME("%sfinal_layer_norm.weight", base), 0, D, 0.5f, 1.5f);
        l->ln2_b = lf_builder_add(b, NAME("%sfinal_layer_norm.bias", base), 0, D, -0.5f, 0.5f);
    }
#undef NAME
}

/* lucidrains' Linformer: per-layer k (proj_k [n, k]: the reference takes E = its transpose), optional GLU. */
void lf_lucid_model(lf_builder *b, const lf_model_shape *s, lf_ref_model *m, lf_ref_layer *L, float **e_t)
{
    char name[128];
    const int D = s->D, R = s->ff * (s->glu ? 2 : 1);
    const float w = 0.4f;
    *m = (lf_ref_model){.kind = LF_MODEL_ENCODER, .layers = s->layers, .d_model = D, .d_ff = s->ff, .norm = LF_NORM_PRE,
                        .act = LF_ACT_RELU, .glu = s->glu, .eps = 1e-5, .layer = L, .embed_scale = 1.0};
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    for (int i = 0; i < s->layers; i++) {
        lf_ref_layer *l = &L[i];
        const int k = s->k[i];
        lf_attention_config_init(&l->attn, D, s->heads, s->n, k);
        l->attn.bias_q = l->attn.bias_k = l->attn.bias_v = 0;
        lf_ref_resolve(&l->attn);
        l->ln1_g = lf_builder_add(b, NAME("net.layers.%d.0.norm.weight", i), 0, D, 0.5f, 1.5f);
        l->ln1_b = lf_builder_add(b, NAME("net.layers.%d.0.norm.bias", i), 0, D, -0.5f, 0.5f);
        l->w.wq = lf_builder_add(b, NAME("net.layers.%d.0.fn.to_q.weight", i), D, D, -w, w);
        l->w.wk = lf_builder_add(b, NAME("net.layers.%d.0.fn.to_k.weight", i), D, D, -w, w);
        l->w.wv = lf_builder_add(b, NAME("net.layers.%d.0.fn.to_v.weight", i), D, D, -w, w);
        const float *pk = lf_builder_add(b, NAME("net.layers.%d.0.fn.proj_k", i), s->n, k, -w, w);
        const float *pv = lf_builder_add(b, NAME("net.layers.%d.0.fn.proj_v", i), s->n, k, -w, w);
        float *e = e_t[2 * i] = malloc((size_t)k * s->n * sizeof *e), *f = e_t[2 * i + 1] = malloc((size_t)k * s->n * sizeof *f);
        for (int r = 0; r < s->n; r++)
            for (int c = 0; c < k; c++) e[(size_t)c * s->n + r] = pk[(size_t)r * k + c], f[(size_t)c * s->n + r] = pv[(size_t)r * k + c];
        l->w.e = e, l->w.f = f;
        l->w.wo = lf_builder_add(b, NAME("net.layers.%d.0.fn.to_out.weight", i), D, D, -w, w);
        l->w.bo = lf_builder_add(b, NAME("net.layers.%d.0.fn.to_out.bias", i), 0, D, -w, w);
        l->ln2_g = lf_builder_add(b, NAME("net.layers.%d.1.norm.weight", i), 0, D, 0.5f, 1.5f);
        l->ln2_b = lf_builder_add(b, NAME("net.layers.%d.1.norm.bias", i), 0, D, -0.5f, 0.5f);
        l->w1 = lf_builder_add(b, NAME("net.layers.%d.1.fn.w1.weight", i), R, D, -w, w);
        l->b1 = lf_builder_add(b, NAME("net.layers.%d.1.fn.w1.bias", i), 0, R, -w, w);
        l->w2 = lf_builder_add(b, NAME("net.layers.%d.1.fn.w2.weight", i), D, s->ff, -w, w);
        l->b2 = lf_builder_add(b, NAME("net.layers.%d.1.fn.w2.bias", i), 0, D, -w, w);
    }
#undef NAME
}


void lf_expect_load_refused(lf_context *ctx, const char *path, const lf_model_options *opts, lf_status want,
                            const char *const *parts)
{
    lf_model *m = (lf_model *)1;
    const lf_status st = lf_model_load(ctx, path, opts, &m);
    cr_expect_eq(st, want, "%s: got %s: %s", path, lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_null(m, "*out is not NULL after a failure");
    for (; *parts; parts++)
        cr_expect(strstr(lf_context_last_error(ctx), *parts), "message \"%s\" lacks \"%s\"", lf_context_last_error(ctx),
                  *parts);
}
