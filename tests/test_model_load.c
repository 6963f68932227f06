/*
 * test_model_load.c - lf_model_load on generated files: a model thousands of
 * layers deep loads (the tensor lookup is linear in the depth) and matches
 * the reference; __metadata__ "causal" is read as the layer loader reads it;
 * files the loader cannot serve are refused with messages that name the
 * tensor, the layout or the feature.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "runtime.h"
#include "model_case.h"
#include "reference_model.h"

static lf_context *ctx;
static char dir[64];
static void setup(void)
{
    ctx = lf_test_context();
    lf_test_make_dir(dir, "model-load");
}
static void teardown(void)
{
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}
TestSuite(model_load, .init = setup, .fini = teardown, .timeout = 900);

/* ---- A deep lucidrains Linformer whose layers all hold the same weights ---- */

enum { D = 4, N = 5, K = 2, FF = 6, ROLES = 14 };

typedef struct {
    float ln_g[D], ln_b[D], wq[D * D], wk[D * D], wv[D * D], pk[N * K], pv[N * K], wo[D * D], bo[D];
    float w1[FF * D], b1[FF], w2[D * FF], b2[D];
    float e[K * N], f[K * N]; /* proj_k, proj_v transposed, for the reference */
} layer_weights;

/* The first roles_per_layer tensors of each layer (ROLES for a whole model; to_q comes first). */
static void write_deep(const char *path, int layers, int roles_per_layer, layer_weights *w, const char *causal)
{
    uint64_t rng = lf_test_seed();
    lf_test_fill((float *)w, sizeof *w / sizeof(float), &rng, -0.3f, 0.3f);
    for (int i = 0; i < D; i++) w->ln_g[i] += 1.0f;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < K; c++) w->e[c * N + r] = w->pk[r * K + c], w->f[c * N + r] = w->pv[r * K + c];
    static const int64_t vec[] = {D}, sq[] = {D, D}, sp[] = {N, K}, s1[] = {FF, D}, sb1[] = {FF}, s2[] = {D, FF};
    const struct { const char *suffix; const int64_t *shape; int ndim; const float *data; } roles[ROLES] = {
        {"0.fn.to_q.weight", sq, 2, w->wq},     {"0.norm.bias", vec, 1, w->ln_b},   {"0.norm.weight", vec, 1, w->ln_g},
        {"0.fn.to_k.weight", sq, 2, w->wk},     {"0.fn.to_v.weight", sq, 2, w->wv}, {"0.fn.proj_k", sp, 2, w->pk},
        {"0.fn.proj_v", sp, 2, w->pv},          {"0.fn.to_out.weight", sq, 2, w->wo},
        {"0.fn.to_out.bias", vec, 1, w->bo},    {"1.norm.weight", vec, 1, w->ln_g}, {"1.norm.bias", vec, 1, w->ln_b},
        {"1.fn.w1.weight", s1, 2, w->w1},       {"1.fn.w1.bias", sb1, 1, w->b1},    {"1.fn.w2.weight", s2, 2, w->w2}};
    const size_t count = (size_t)layers * roles_per_layer;
    st_tensor *t = malloc(count * sizeof *t);
    char *names = malloc(count * 48);
    for (int i = 0; i < layers; i++)
        for (int r = 0; r < roles_per_layer; r++) {
            const size_t at = (size_t)i * roles_per_layer + r;
            snprintf(names + at * 48, 48, "net.layers.%d.%s", i, roles[r].suffix);
            t[at] = (st_tensor){names + at * 48, ST_F32, roles[r].ndim, roles[r].shape, roles[r].data};
        }
    const char *meta[] = {"heads", "1", "causal", causal};
    char msg[512];
    cr_assert_eq(st_save(path, t, count, meta, causal ? 2 : 1, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    free(t), free(names);
}

Test(model_load, thousands_of_layers_load_and_match_the_reference)
{
    enum { LAYERS = 2000, BATCH = 2 };
    char path[128];
    snprintf(path, sizeof path, "%s/deep.safetensors", dir);
    static layer_weights w;
    write_deep(path, LAYERS, ROLES, &w, NULL);
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s", lf_context_last_error(ctx));
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(m, &info), LF_OK);
    cr_expect_eq(info.layers, LAYERS);

    lf_ref_layer *L = calloc(LAYERS, sizeof *L);
    for (int i = 0; i < LAYERS; i++) {
        lf_attention_config_init(&L[i].attn, D, 1, N, K);
        L[i].attn.bias_q = L[i].attn.bias_k = L[i].attn.bias_v = 0;
        lf_ref_resolve(&L[i].attn);
        L[i].w = (lf_ref_weights){.wq = w.wq, .wk = w.wk, .wv = w.wv, .wo = w.wo, .bo = w.bo, .e = w.e, .f = w.f};
        L[i].ln1_g = L[i].ln2_g = w.ln_g, L[i].ln1_b = L[i].ln2_b = w.ln_b;
        L[i].w1 = w.w1, L[i].b1 = w.b1, L[i].w2 = w.w2; /* no b2 */
    }
    const lf_ref_model ref = {.kind = LF_MODEL_ENCODER, .layers = LAYERS, .d_model = D, .d_ff = FF,
                              .norm = LF_NORM_PRE, .act = LF_ACT_GELU, .eps = 1e-5, .layer = L, .embed_scale = 1.0};
    uint64_t rng = lf_test_seed();
    float x[BATCH * N * D], y[BATCH * N * D];
    double want[BATCH * N * D];
    const int32_t lens[BATCH] = {N, 3};
    lf_test_fill(x, BATCH * N * D, &rng, -1, 1);
    lf_test_poison(y, BATCH * N * D);
    cr_assert_eq(lf_model_forward(m, x, NULL, y, BATCH, N, lens), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_model_forward(&ref, x, NULL, BATCH, N, lens, want);
    const double e = lf_test_rel_err(y, want, BATCH * N * D);
    cr_expect_leq(e, 1e-4, "%d layers: relative error %.3g", LAYERS, e);
    free(L);
    lf_model_free(m);
}

/* Writes the builder's tensors to a file of the test's folder (its path in
 * `path`), with heads and activation in __metadata__, and loads the model. */
static lf_model *write_and_load(lf_builder *b, const char *file, const char *heads, const char *activation, char *path,
                                size_t size)
{
    snprintf(path, size, "%s/%s", dir, file);
    const char *meta[] = {"heads", heads, "activation", activation};
    lf_builder_write(b, path, meta, 2);
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s: %s", path, lf_context_last_error(ctx));
    return m;
}

Test(model_load, more_layers_than_the_limit_are_refused_by_name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/too-deep.safetensors", dir);
    static layer_weights w;
    write_deep(path, 4097, 1, &w, NULL); /* the layers are counted by their to_q */
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_UNSUPPORTED,
                           (const char *[]){"more than 4096 layers", "net.layers.4096.0.fn.to_q.weight", NULL});
}

/* "causal" as lf_attention_load reads it: "0" loads, a value outside 0, 1
 * is malformed, and "1" cannot be honoured by learned projections. */
Test(model_load, causal_metadata_is_read)
{
    char path[128];
    snprintf(path, sizeof path, "%s/causal.safetensors", dir);
    static layer_weights w;
    write_deep(path, 2, ROLES, &w, "0");
    lf_model *m = NULL;
    cr_expect_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s", lf_context_last_error(ctx));
    lf_model_free(m);
    write_deep(path, 2, ROLES, &w, "1");
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_UNSUPPORTED, (const char *[]){path, "__metadata__ \"causal\" is \"1\"", "learned", NULL});
    write_deep(path, 2, ROLES, &w, "yes");
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"\"causal\" is \"yes\"", NULL});
}

/* ---- Files that cannot be served, named as such ---- */

static void set_rows(lf_builder *b, const char *name, int rows)
{
    for (size_t i = 0; i < b->count; i++)
        if (!strcmp(b->name[i], name)) b->shape[i][0] = rows;
}

/* A fairseq token encoder with `tensor` cut to `rows` rows. */
static void write_fairseq_cut(const char *path, const char *tensor, int rows)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 2, .D = 8, .heads = 2, .n = 9, .ff = 10, .vocab = 11, .k = {3}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[2];
    lf_fairseq_model(&b, "", &s, &ref, L);
    set_rows(&b, tensor, rows);
    const char *meta[] = {"heads", "2"};
    lf_builder_write(&b, path, meta, 1);
    lf_builder_free(&b);
}

Test(model_load, empty_vocabulary_and_missing_positions_name_the_tensor)
{
    char path[128];
    snprintf(path, sizeof path, "%s/cut.safetensors", dir);
    write_fairseq_cut(path, "embed_tokens.weight", 0);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){path, "\"embed_tokens.weight\" has 0 rows", NULL});
    /* position 0 is row padding_idx + 1 = 2 */
    write_fairseq_cut(path, "embed_positions.weight", 2);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT,
                   (const char *[]){path, "\"embed_positions.weight\" has 2 rows", "position 0 is row 2", NULL});
    write_fairseq_cut(path, "embed_positions.weight", 0);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"\"embed_positions.weight\" has 0 rows", NULL});
}

/* A fairseq token encoder with __metadata__ "heads" (`heads`) and `key`: `value`. */
static void write_fairseq_meta(const char *path, const char *heads, const char *key, const char *value)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 1, .D = 8, .heads = 2, .n = 9, .ff = 10, .vocab = 11, .k = {3}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[1];
    lf_fairseq_model(&b, "", &s, &ref, L);
    const char *meta[] = {"heads", heads, key, value};
    lf_builder_write(&b, path, meta, 2);
    lf_builder_free(&b);
}

/* __metadata__ numbers are plain decimals that a float holds: strtod's and
 * strtol's hex, spaces, '+', inf and nan, and a value a float turns into inf
 * or 0, are refused by key and value, never read as something else. */
Test(model_load, metadata_numbers_are_plain_and_in_range)
{
    char path[128];
    snprintf(path, sizeof path, "%s/meta.safetensors", dir);
    static const char *const good[][2] = {{"eps", "1e-05"}, {"eps", "0.5"}, {"embed_scale", "2.5E+1"}, {"padding_idx", "-1"}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        write_fairseq_meta(path, "2", good[i][0], good[i][1]);
        lf_model *m = NULL;
        cr_expect_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s %s: %s", good[i][0], good[i][1],
                     lf_context_last_error(ctx));
        lf_model_free(m);
    }
    static const char *const bad[][2] = {
        {"eps", "1e300"}, {"eps", "1e-300"}, {"embed_scale", "1e39"}, {"eps", "0x10"}, {"eps", " 1e-5"},
        {"eps", "+1e-5"}, {"eps", "inf"},  {"eps", "nan"}, {"eps", "1."}, {"eps", ".5"}, {"eps", "1e"},
        {"padding_idx", " 1"}, {"padding_idx", "+1"}, {"padding_idx", "0x1"}, {"causal", " 0"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "__metadata__ \"%s\" is \"%s\"", bad[i][0], bad[i][1]);
        write_fairseq_meta(path, "2", bad[i][0], bad[i][1]);
        lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){path, want, NULL});
    }
    write_fairseq_meta(path, " 2", "eps", "1e-05");
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){path, "__metadata__ \"heads\" is \" 2\"", NULL});
}

/* Takes tensor `name` out of b. */
static void drop(lf_builder *b, const char *name)
{
    size_t i = 0;
    while (i < b->count && strcmp(b->name[i], name)) i++;
    cr_assert_lt(i, b->count, "no tensor \"%s\"", name);
    const size_t last = --b->count;
    free(b->data[i]);
    memcpy(b->name[i], b->name[last], sizeof b->name[i]);
    memcpy(b->shape[i], b->shape[last], sizeof b->shape[i]);
    b->data[i] = b->data[last];
    b->t[i] = (st_tensor){b->name[i], ST_F32, b->t[last].ndim, b->shape[i], b->data[i]};
}

/* Writes b without its query weight `q` (of layer 1) and expects the load to
 * name that weight as missing. */
static void expect_missing_query(lf_builder *b, const char *path, const char *q)
{
    const char *meta[] = {"heads", "2"};
    drop(b, q);
    lf_builder_write(b, path, meta, 1);
    lf_builder_free(b);
    char words[160];
    snprintf(words, sizeof words, "tensor \"%s\" is missing, yet layer 1 has", q);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){path, words, NULL});
}

/* Layers are counted by their query weight: one missing past layer 0 is
 * named as missing, beside a tensor of its layer, in either layout. */
Test(model_load, a_layers_missing_query_weight_is_named)
{
    const lf_model_shape s = {.layers = 3, .D = 8, .heads = 2, .n = 9, .ff = 10, .vocab = 11, .k = {3, 3, 3}};
    char path[128];
    snprintf(path, sizeof path, "%s/no-q.safetensors", dir);
    lf_ref_model ref;
    lf_ref_layer L[3];
    lf_builder b = {.rng = lf_test_seed()};
    float *e_t[6];
    lf_lucid_model(&b, &s, &ref, L, e_t);
    for (int i = 0; i < 6; i++) free(e_t[i]);
    expect_missing_query(&b, path, "net.layers.1.0.fn.to_q.weight");
    b = (lf_builder){.rng = lf_test_seed()};
    lf_fairseq_model(&b, "", &s, &ref, L);
    expect_missing_query(&b, path, "layers.1.self_attn.q_proj.weight");
}

Test(model_load, two_models_are_named_by_their_tensors)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 1, .D = 8, .heads = 2, .n = 9, .ff = 10, .k = {3}};
    lf_ref_model ref;
    lf_ref_layer L[1];
    float *e_t[2];
    lf_fairseq_model(&b, "", &s, &ref, L);
    lf_lucid_model(&b, &s, &ref, L, e_t);
    free(e_t[0]), free(e_t[1]);
    char path[128];
    snprintf(path, sizeof path, "%s/two.safetensors", dir);
    const char *meta[] = {"heads", "2"};
    lf_builder_write(&b, path, meta, 1);
    lf_builder_free(&b);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT,
                   (const char *[]){"fairseq's encoder at tensor \"layers.0.self_attn.q_proj.weight\"",
                                    "lucidrains' Linformer at \"net.layers.0.0.fn.to_q.weight\"", "cannot tell them apart",
                                    NULL});
}

/* lucidrains' reversible=True: the same weights under ReversibleSequence's
 * names, run as two streams (reference_model.c), forward and layer inputs. */
Test(model_load, a_reversible_linformer_matches_the_reference)
{
    enum { LAYERS = 2, BATCH = 3, SEQ = 9, WIDTH = 8 };
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = LAYERS, .D = WIDTH, .heads = 2, .n = SEQ, .ff = 10, .k = {3, 4}};
    lf_ref_model ref;
    lf_ref_layer L[LAYERS];
    float *e_t[2 * LAYERS];
    lf_lucid_model(&b, &s, &ref, L, e_t);
    ref.reversible = 1;
    for (size_t i = 0; i < b.count; i++) { /* net.layers.{i}.0.X -> net.blocks.{i}.f.net.X, .1. -> .g.net. */
        int layer = 0, sub = 0, used = 0;
        cr_assert_eq(sscanf(b.name[i], "net.layers.%d.%d.%n", &layer, &sub, &used), 2);
        char rest[128];
        snprintf(rest, sizeof rest, "%.120s", b.name[i] + used);
        snprintf(b.name[i], sizeof b.name[i], "net.blocks.%d.%s.net.%s", layer, sub ? "g" : "f", rest);
    }
    char path[128];
    lf_model *m = write_and_load(&b, "reversible.safetensors", "2", "relu", path, sizeof path);
    float x[BATCH * SEQ * WIDTH], y[BATCH * SEQ * WIDTH];
    double want[BATCH * SEQ * WIDTH];
    const int32_t lens[BATCH] = {SEQ, 4, 7};
    lf_test_fill(x, BATCH * SEQ * WIDTH, &b.rng, -1, 1);
    lf_test_poison(y, BATCH * SEQ * WIDTH);
    cr_assert_eq(lf_model_forward(m, x, NULL, y, BATCH, SEQ, lens), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_model_forward(&ref, x, NULL, BATCH, SEQ, lens, want);
    double e = lf_test_rel_err(y, want, BATCH * SEQ * WIDTH);
    cr_expect_leq(e, 1e-5, "reversible forward: relative error %.3g", e);
    for (int layer = 0; layer < LAYERS; layer++) {
        lf_test_poison(y, BATCH * SEQ * WIDTH);
        cr_assert_eq(lf_model_layer_input(m, layer, x, NULL, y, BATCH, SEQ, lens), LF_OK, "%s", lf_context_last_error(ctx));
        lf_ref_model_layer_input(&ref, layer, x, NULL, BATCH, SEQ, lens, want);
        e = lf_test_rel_err(y, want, BATCH * SEQ * WIDTH);
        cr_expect_leq(e, 1e-5, "layer %d's input: relative error %.3g", layer, e);
    }
    lf_model_free(m);
    const lf_model_options post = {.norm = LF_NORM_POST};
    lf_expect_load_refused(ctx, path, &post, LF_ERR_UNSUPPORTED, (const char *[]){"reversible", "pre-norm", NULL});
    for (int i = 0; i < 2 * LAYERS; i++) free(e_t[i]);
    lf_builder_free(&b);
}

/* ---- fairseq's masked-LM head ---- */

/* A fairseq RoBERTa-style file: the encoder at "encoder.sentence_encoder.",
 * its LM head at "encoder.lm_head." (logits weight tied to embed_tokens, or
 * its own); the model gives logits that match the reference's. */
static void expect_lm_head(bool tied)
{
    enum { LAYERS = 2, WIDTH = 12, VOCAB = 23, SEQ = 11, BATCH = 3 };
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = LAYERS, .D = WIDTH, .heads = 3, .n = SEQ, .ff = 16, .vocab = VOCAB, .k = {4},
                              .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[LAYERS];
    lf_fairseq_model(&b, "encoder.sentence_encoder.", &s, &ref, L);
    ref.kind = LF_MODEL_LM;
    ref.head_dense_w = lf_builder_add(&b, "encoder.lm_head.dense.weight", WIDTH, WIDTH, -0.4f, 0.4f);
    ref.head_dense_b = lf_builder_add(&b, "encoder.lm_head.dense.bias", 0, WIDTH, -0.4f, 0.4f);
    ref.head_ln_g = lf_builder_add(&b, "encoder.lm_head.layer_norm.weight", 0, WIDTH, 0.5f, 1.5f);
    ref.head_ln_b = lf_builder_add(&b, "encoder.lm_head.layer_norm.bias", 0, WIDTH, -0.5f, 0.5f);
    ref.logits_w = tied ? ref.tok : lf_builder_add(&b, "encoder.lm_head.weight", VOCAB, WIDTH, -1, 1);
    ref.logits_b = lf_builder_add(&b, "encoder.lm_head.bias", 0, VOCAB, -0.5f, 0.5f);
    char path[128];
    lf_model *m = write_and_load(&b, "roberta.safetensors", "3", "gelu", path, sizeof path);
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(m, &info), LF_OK);
    cr_expect_eq(info.kind, LF_MODEL_LM, "a fairseq encoder with its LM head is a %s", lf_model_kind_name(info.kind));
    cr_expect_eq(info.vocab, VOCAB);
    int64_t tokens[BATCH * SEQ];
    for (int i = 0; i < BATCH * SEQ; i++) tokens[i] = (int64_t)(lf__rand_next(&b.rng) % VOCAB);
    const int32_t lens[BATCH] = {SEQ, 6, 1};
    static float y[BATCH * SEQ * VOCAB];
    static double want[BATCH * SEQ * VOCAB];
    lf_test_poison(y, BATCH * SEQ * VOCAB);
    cr_assert_eq(lf_model_forward(m, NULL, tokens, y, BATCH, SEQ, lens), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_model_forward(&ref, NULL, tokens, BATCH, SEQ, lens, want);
    const double e = lf_test_rel_err(y, want, BATCH * SEQ * VOCAB);
    cr_expect_leq(e, 1e-5, "%s logits: relative error %.3g", tied ? "tied" : "own", e);
    lf_model_free(m);
    lf_builder_free(&b);
}

Test(model_load, fairseq_lm_head_tied_gives_logits) { expect_lm_head(true); }
Test(model_load, fairseq_lm_head_of_its_own_gives_logits) { expect_lm_head(false); }
