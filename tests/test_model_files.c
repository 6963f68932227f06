/*
 * test_model_files.c - models from files this test writes with fresh random
 * weights, against the double-precision model reference (reference_model.c):
 * fairseq's layout with one layerwise projection, post-norm, biases and
 * embeddings (its order: the layer input compressed along time, then
 * k_proj/v_proj); lucidrains' layout with a different k per layer, GLU and
 * ReLU. Then what the model holds on the device, and the errors of bad files
 * and contradicting options.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "st_write.h"
#include "internal.h"
#include "reference_model.h"
#include "safetensors.h"

#define MAX_TENSORS 128

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(model_files, .init = setup, .fini = teardown, .timeout = 900);

/* ---- A safetensors file built tensor by tensor ---- */

typedef struct {
    st_tensor t[MAX_TENSORS];
    char name[MAX_TENSORS][192];
    int64_t shape[MAX_TENSORS][2];
    float *data[MAX_TENSORS];
    size_t count;
    uint64_t rng;
} builder;

/* Adds a random tensor [rows, cols] ([cols] when rows is 0) and returns its data. */
static float *add(builder *b, const char *name, int rows, int cols, float lo, float hi)
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

static void write_file(builder *b, const char *path, const char *const *meta, size_t pairs)
{
    char msg[512];
    cr_assert_eq(st_save(path, b->t, b->count, meta, pairs, NULL, 0, msg, sizeof msg), 0, "%s", msg);
}

static void free_builder(builder *b)
{
    for (size_t i = 0; i < b->count; i++) free(b->data[i]);
}

static void temp_path(char *path, size_t size, const char *what)
{
    snprintf(path, size, "%s/lf_model_%s_%d.safetensors", P_tmpdir, what, (int)getpid());
}

/* ---- Model layouts ---- */

typedef struct {
    int layers, D, heads, n, ff, vocab;
    int k[4];
    bool glu, embeddings;
} model_shape;

/* fairseq's encoder under `stem`: layerwise compress_layer, biases, post-norm. */
static void fairseq_model(builder *b, const char *stem, const model_shape *s, lf_ref_model *m, lf_ref_layer *L)
{
    char name[192];
    const int D = s->D;
    const float w = 0.4f;
    *m = (lf_ref_model){.kind = s->embeddings ? LF_MODEL_TOKEN_ENCODER : LF_MODEL_ENCODER, .layers = s->layers,
                        .d_model = D, .d_ff = s->ff, .vocab = s->vocab, .norm = LF_NORM_POST, .act = LF_ACT_GELU,
                        .eps = 1e-5, .layer = L, .pos_offset = 2, .embed_scale = 1.0};
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    m->shared_e = add(b, NAME("%scompress_layer.weight", stem), s->k[0], s->n, -w, w);
    if (s->embeddings) {
        m->tok = add(b, NAME("%sembed_tokens.weight", stem), s->vocab, D, -1, 1);
        m->pos = add(b, NAME("%sembed_positions.weight", stem), s->n + 2, D, -1, 1);
        m->emb_g = add(b, NAME("%slayernorm_embedding.weight", stem), 0, D, 0.5f, 1.5f);
        m->emb_b = add(b, NAME("%slayernorm_embedding.bias", stem), 0, D, -0.5f, 0.5f);
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
            *wt[j] = add(b, NAME("%sself_attn.%s_proj.weight", base, proj[j]), D, D, -w, w);
            *bs[j] = add(b, NAME("%sself_attn.%s_proj.bias", base, proj[j]), 0, D, -w, w);
        }
        l->ln1_g = add(b, NAME("%sself_attn_layer_norm.weight", base), 0, D, 0.5f, 1.5f);
        l->ln1_b = add(b, NAME("%sself_attn_layer_norm.bias", base), 0, D, -0.5f, 0.5f);
        l->w1 = add(b, NAME("%sfc1.weight", base), s->ff, D, -w, w);
        l->b1 = add(b, NAME("%sfc1.bias", base), 0, s->ff, -w, w);
        l->w2 = add(b, NAME("%sfc2.weight", base), D, s->ff, -w, w);
        l->b2 = add(b, NAME("%sfc2.bias", base), 0, D, -w, w);
        l->ln2_g = add(b, NAME("%sfinal_layer_norm.weight", base), 0, D, 0.5f, 1.5f);
        l->ln2_b = add(b, NAME("%sfinal_layer_norm.bias", base), 0, D, -0.5f, 0.5f);
    }
#undef NAME
}

/* lucidrains' Linformer: per-layer k (proj_k [n, k]: the reference takes E = its transpose), optional GLU. */
static void lucid_model(builder *b, const model_shape *s, lf_ref_model *m, lf_ref_layer *L, float **e_t)
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
        l->ln1_g = add(b, NAME("net.layers.%d.0.norm.weight", i), 0, D, 0.5f, 1.5f);
        l->ln1_b = add(b, NAME("net.layers.%d.0.norm.bias", i), 0, D, -0.5f, 0.5f);
        l->w.wq = add(b, NAME("net.layers.%d.0.fn.to_q.weight", i), D, D, -w, w);
        l->w.wk = add(b, NAME("net.layers.%d.0.fn.to_k.weight", i), D, D, -w, w);
        l->w.wv = add(b, NAME("net.layers.%d.0.fn.to_v.weight", i), D, D, -w, w);
        const float *pk = add(b, NAME("net.layers.%d.0.fn.proj_k", i), s->n, k, -w, w);
        const float *pv = add(b, NAME("net.layers.%d.0.fn.proj_v", i), s->n, k, -w, w);
        float *e = e_t[2 * i] = malloc((size_t)k * s->n * sizeof *e), *f = e_t[2 * i + 1] = malloc((size_t)k * s->n * sizeof *f);
        for (int r = 0; r < s->n; r++)
            for (int c = 0; c < k; c++) e[(size_t)c * s->n + r] = pk[(size_t)r * k + c], f[(size_t)c * s->n + r] = pv[(size_t)r * k + c];
        l->w.e = e, l->w.f = f;
        l->w.wo = add(b, NAME("net.layers.%d.0.fn.to_out.weight", i), D, D, -w, w);
        l->w.bo = add(b, NAME("net.layers.%d.0.fn.to_out.bias", i), 0, D, -w, w);
        l->ln2_g = add(b, NAME("net.layers.%d.1.norm.weight", i), 0, D, 0.5f, 1.5f);
        l->ln2_b = add(b, NAME("net.layers.%d.1.norm.bias", i), 0, D, -0.5f, 0.5f);
        l->w1 = add(b, NAME("net.layers.%d.1.fn.w1.weight", i), R, D, -w, w);
        l->b1 = add(b, NAME("net.layers.%d.1.fn.w1.bias", i), 0, R, -w, w);
        l->w2 = add(b, NAME("net.layers.%d.1.fn.w2.weight", i), D, s->ff, -w, w);
        l->b2 = add(b, NAME("net.layers.%d.1.fn.w2.bias", i), 0, D, -w, w);
    }
#undef NAME
}

/* Runs the model in `path` on fresh input with mixed lengths and compares with the reference. */
static void expect_reference(const char *path, const lf_model_options *opts, const lf_ref_model *ref, int batch, int n,
                             uint64_t *rng)
{
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, opts, &m), LF_OK, "%s", lf_context_last_error(ctx));
    const int D = ref->d_model, width = ref->kind == LF_MODEL_LM ? ref->vocab : D;
    const size_t rows = (size_t)batch * n, out = rows * width;
    float *x = malloc(rows * D * sizeof *x), *y = malloc(out * sizeof *y);
    int64_t *tokens = malloc(rows * sizeof *tokens);
    double *want = malloc(out * sizeof *want);
    lf_test_fill(x, rows * D, rng, -1.0f, 1.0f);
    for (size_t i = 0; i < rows; i++) tokens[i] = ref->vocab ? (int64_t)(lf__rand_next(rng) % (uint64_t)ref->vocab) : 0;
    int32_t lens[4] = {n, n / 2, 1, 0};
    const bool x_in = ref->kind == LF_MODEL_ENCODER;
    lf_test_poison(y, out);
    lf_status st = lf_model_forward(m, x_in ? x : NULL, x_in ? NULL : tokens, y, batch, n, lens);
    cr_assert_eq(st, LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_model_forward(ref, x, tokens, batch, n, lens, want);
    const double e = lf_test_rel_err(y, want, out);
    cr_expect_leq(e, 1e-4, "%s: relative error %.3g against the reference", path, e);
    cr_log_info("relative error %.3g against the reference", e);
    for (size_t i = 0; i < out; i++)
        if (want[i] == 0.0) cr_assert_eq(y[i], 0.0f, "padded entry %zu is %g", i, y[i]);
    free(x), free(y), free(tokens), free(want);
    lf_model_free(m);
}

Test(model_files, fairseq_layerwise_post_norm_encoder_under_a_prefix)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = 3, .D = 16, .heads = 4, .n = 21, .ff = 24, .k = {5}};
    lf_ref_model ref;
    lf_ref_layer L[3];
    fairseq_model(&b, "encoder.sentence_encoder.", &s, &ref, L);
    add(&b, "encoder.lm_head.weight", 3, 16, -1, 1); /* outside the encoder: not the model's */
    char path[256];
    temp_path(path, sizeof path, "fairseq");
    const char *meta[] = {"heads", "4"};
    write_file(&b, path, meta, 1);
    expect_reference(path, NULL, &ref, 4, s.n, &b.rng);
    const lf_model_options opts = {.prefix = "encoder.sentence_encoder.", .norm = LF_NORM_POST, .heads = 4};
    expect_reference(path, &opts, &ref, 3, 13, &b.rng);
    unlink(path);
    free_builder(&b);
}

Test(model_files, fairseq_token_encoder_with_embeddings)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = 2, .D = 12, .heads = 3, .n = 17, .ff = 20, .vocab = 23, .k = {6}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[2];
    fairseq_model(&b, "", &s, &ref, L);
    char path[256];
    temp_path(path, sizeof path, "fairseq_tokens");
    const char *meta[] = {"heads", "3", "activation", "gelu"};
    write_file(&b, path, meta, 2);
    expect_reference(path, NULL, &ref, 3, s.n, &b.rng);
    unlink(path);
    free_builder(&b);
}

Test(model_files, lucidrains_k_per_layer_glu_relu)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = 3, .D = 12, .heads = 2, .n = 19, .ff = 10, .k = {3, 7, 5}, .glu = true};
    lf_ref_model ref;
    lf_ref_layer L[3];
    float *e_t[6];
    lucid_model(&b, &s, &ref, L, e_t);
    char path[256];
    temp_path(path, sizeof path, "lucid_glu");
    const char *meta[] = {"heads", "2", "activation", "relu"};
    write_file(&b, path, meta, 2);
    expect_reference(path, NULL, &ref, 4, s.n, &b.rng);
    unlink(path);
    for (int i = 0; i < 6; i++) free(e_t[i]);
    free_builder(&b);
}

/* ---- What the model holds ---- */

static void write_lucid(const char *what, int layers, char *path, size_t size, lf_ref_model *ref, lf_ref_layer *L,
                        float **e_t)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = layers, .D = 16, .heads = 2, .n = 32, .ff = 20, .k = {4, 4, 4, 4}};
    lucid_model(&b, &s, ref, L, e_t);
    temp_path(path, size, what);
    const char *meta[] = {"heads", "2", "activation", "relu"};
    write_file(&b, path, meta, 2);
    free_builder(&b);
}

/* Device bytes of a model run once at batch 2 x n 32. */
static void bytes_after_forward(const char *path, size_t *weights, size_t *workspace, bool *y_cl_equal)
{
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s", lf_context_last_error(ctx));
    const size_t count = 2 * 32 * 16;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y), *y2 = malloc(count * sizeof *y2);
    uint64_t rng = lf_test_seed();
    lf_test_fill(x, count, &rng, -1, 1);
    cr_assert_eq(lf_model_forward(m, x, NULL, y, 2, 32, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_model_device_bytes(m, weights, workspace), LF_OK);
    /* the same on device buffers gives the same bits */
    cl_mem xb = NULL, yb = NULL;
    cr_assert_eq(lf__alloc(ctx, count * sizeof *x, "x", &xb), LF_OK);
    cr_assert_eq(lf__alloc(ctx, count * sizeof *y, "y", &yb), LF_OK);
    cr_assert_eq(lf__upload(ctx, xb, 0, x, count * sizeof *x), LF_OK);
    cr_assert_eq(lf_model_forward_cl(m, xb, yb, 2, 32, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf__download(ctx, yb, 0, y2, count * sizeof *y2), LF_OK);
    *y_cl_equal = memcmp(y, y2, count * sizeof *y) == 0;
    lf__release(&xb), lf__release(&yb);
    free(x), free(y), free(y2);
    lf_model_free(m);
}

Test(model_files, workspace_does_not_grow_with_depth_and_forward_cl_matches)
{
    char p1[256], p3[256];
    lf_ref_model ref;
    lf_ref_layer L[3];
    float *e_t[6];
    write_lucid("depth1", 1, p1, sizeof p1, &ref, L, e_t);
    for (int i = 0; i < 2; i++) free(e_t[i]);
    write_lucid("depth3", 3, p3, sizeof p3, &ref, L, e_t);
    for (int i = 0; i < 6; i++) free(e_t[i]);
    size_t w1, ws1, w3, ws3;
    bool same1, same3;
    bytes_after_forward(p1, &w1, &ws1, &same1);
    bytes_after_forward(p3, &w3, &ws3, &same3);
    cr_expect_eq(w3, 3 * w1, "weights: 3 layers hold %zu bytes, one %zu", w3, w1);
    cr_expect_eq(ws3, ws1, "workspace: 3 layers %zu bytes, one %zu", ws3, ws1);
    cr_expect(same1 && same3, "lf_model_forward_cl differs from lf_model_forward");
    unlink(p1), unlink(p3);
}

/* ---- Bad files and contradicting options ---- */

static void expect_load_error(const char *path, const lf_model_options *opts, lf_status want, const char *const *parts)
{
    lf_model *m = (lf_model *)1;
    const lf_status st = lf_model_load(ctx, path, opts, &m);
    cr_expect_eq(st, want, "%s: got %s: %s", path, lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_null(m, "*out is not NULL after a failure");
    for (; *parts; parts++)
        cr_expect(strstr(lf_context_last_error(ctx), *parts), "message \"%s\" lacks \"%s\"", lf_context_last_error(ctx),
                  *parts);
}

Test(model_files, options_contradicting_the_metadata_are_errors)
{
    char path[256];
    lf_ref_model ref;
    lf_ref_layer L[1];
    float *e_t[2];
    write_lucid("contradict", 1, path, sizeof path, &ref, L, e_t);
    free(e_t[0]), free(e_t[1]);
    const lf_model_options heads = {.heads = 4};
    expect_load_error(path, &heads, LF_ERR_ARGUMENT, (const char *[]){"heads 4", "says 2", NULL});
    const lf_model_options act = {.activation = LF_ACT_GELU};
    expect_load_error(path, &act, LF_ERR_ARGUMENT, (const char *[]){"activation gelu", "says relu", NULL});
    const lf_model_options prefix = {.prefix = "model."};
    expect_load_error(path, &prefix, LF_ERR_FORMAT, (const char *[]){"under prefix \"model.\"", "expected", NULL});
    unlink(path);
}

Test(model_files, an_attention_layer_file_is_not_a_model)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/pytorch/plain.model.safetensors", LF_SOURCE_DIR);
    expect_load_error(path, NULL, LF_ERR_FORMAT,
                      (const char *[]){"found 7 tensors", "\"proj_k\"", "net.layers.0.0.fn.to_q.weight",
                                       "layers.0.self_attn.q_proj.weight", NULL});
}

/* A one-layer lucidrains file with one change: a tensor added, or one left out. */
static void write_changed(const char *path, const char *extra, const char *omit, int bad_rows)
{
    builder b = {.rng = lf_test_seed()};
    lf_ref_model ref;
    lf_ref_layer L[1];
    float *e_t[2];
    const model_shape s = {.layers = 1, .D = 8, .heads = 2, .n = 9, .ff = 6, .k = {3}};
    lucid_model(&b, &s, &ref, L, e_t);
    free(e_t[0]), free(e_t[1]);
    if (extra) add(&b, extra, bad_rows, 8, -1, 1);
    st_tensor kept[MAX_TENSORS];
    size_t count = 0;
    for (size_t i = 0; i < b.count; i++)
        if (!omit || strcmp(b.name[i], omit)) kept[count++] = b.t[i];
    const char *meta[] = {"heads", "2"};
    char msg[512];
    cr_assert_eq(st_save(path, kept, count, meta, 1, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    free_builder(&b);
}

Test(model_files, bad_files_name_what_is_wrong)
{
    char path[256];
    temp_path(path, sizeof path, "bad");
    write_changed(path, "net.layers.0.0.fn.extra", NULL, 2);
    expect_load_error(path, NULL, LF_ERR_FORMAT, (const char *[]){"unknown tensor \"net.layers.0.0.fn.extra\"", NULL});
    write_changed(path, NULL, "net.layers.0.1.fn.w2.weight", 0);
    expect_load_error(path, NULL, LF_ERR_FORMAT, (const char *[]){"\"net.layers.0.1.fn.w2.weight\" is missing", NULL});
    write_changed(path, "token_emb.weight", NULL, 5);
    expect_load_error(path, NULL, LF_ERR_FORMAT, (const char *[]){"not wrapped as LinformerLM", NULL});
    write_changed(path, "other.linformer.net.layers.0.0.fn.to_q.weight", NULL, 8);
    expect_load_error(path, NULL, LF_ERR_FORMAT, (const char *[]){"more than one model", NULL});
    unlink(path);
}

Test(model_files, bad_forwards_are_refused)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = 1, .D = 12, .heads = 3, .n = 9, .ff = 8, .vocab = 7, .k = {3}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[1];
    fairseq_model(&b, "", &s, &ref, L);
    char path[256];
    temp_path(path, sizeof path, "bad_forward");
    const char *meta[] = {"heads", "3"};
    write_file(&b, path, meta, 1);
    free_builder(&b);
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s", lf_context_last_error(ctx));
    unlink(path);
    int64_t tokens[2 * 9] = {0};
    float y[2 * 9 * 12], x[2 * 9 * 12] = {0};
    tokens[9 + 4] = 7;
    cr_expect_eq(lf_model_forward(m, NULL, tokens, y, 2, 9, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "tokens[1, 4] = 7 is outside the vocabulary [0, 7)"), "%s",
              lf_context_last_error(ctx));
    const int32_t lens[2] = {9, 4}; /* the bad id sits past its sequence's length: not read */
    cr_expect_eq(lf_model_forward(m, NULL, tokens, y, 2, 9, lens), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_model_forward(m, x, NULL, y, 2, 9, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "takes tokens"), "%s", lf_context_last_error(ctx));
    int64_t longer[10] = {0};
    cr_expect_eq(lf_model_forward(m, NULL, longer, y, 1, 10, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "beyond the model's max_seq_len (9)"), "%s", lf_context_last_error(ctx));
    lf_model_free(m);
}

/* ---- A model built from host arrays ---- */

static void set(lf_model *m, int layer, const char *name, const float *data, size_t count)
{
    cr_assert_eq(lf_model_set_weight(m, layer, name, data, count), LF_OK, "%s", lf_context_last_error(ctx));
}

Test(model_files, built_from_host_arrays_layer_by_layer)
{
    builder b = {.rng = lf_test_seed()};
    const model_shape s = {.layers = 2, .D = 12, .heads = 3, .n = 15, .ff = 9, .k = {4, 6}, .glu = true};
    lf_ref_model ref;
    lf_ref_layer L[2];
    float *e_t[4];
    lucid_model(&b, &s, &ref, L, e_t);
    lf_model_config cfg;
    lf_model_config_init(&cfg, LF_MODEL_ENCODER, s.layers, s.D, s.ff, 0);
    cfg.activation = LF_ACT_RELU, cfg.glu = 1;
    lf_attention_config attn[2] = {L[0].attn, L[1].attn};
    lf_model *m = NULL;
    attn[1].d_model = 10;
    cr_expect_eq(lf_model_create(ctx, &cfg, attn, &m), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "layer 1: d_model 10, the model's is 12"), "%s",
              lf_context_last_error(ctx));
    attn[1].d_model = 12;
    cr_assert_eq(lf_model_create(ctx, &cfg, attn, &m), LF_OK, "%s", lf_context_last_error(ctx));
    const size_t D = s.D, R = 2 * s.ff, kn[2] = {4 * 15, 6 * 15};
    for (int i = 0; i < s.layers; i++) {
        const lf_ref_layer *l = &L[i];
        set(m, i, "wq", l->w.wq, D * D), set(m, i, "wk", l->w.wk, D * D), set(m, i, "wv", l->w.wv, D * D);
        set(m, i, "wo", l->w.wo, D * D), set(m, i, "bo", l->w.bo, D);
        set(m, i, "e", l->w.e, kn[i]), set(m, i, "f", l->w.f, kn[i]);
        set(m, i, "ln1_g", l->ln1_g, D), set(m, i, "ln1_b", l->ln1_b, D);
        set(m, i, "ln2_g", l->ln2_g, D), set(m, i, "ln2_b", l->ln2_b, D);
        set(m, i, "w1", l->w1, R * D), set(m, i, "b1", l->b1, R);
        if (i == 0) { /* one weight missing: the forward names it */
            float x[15 * 12] = {0}, y[15 * 12];
            cr_expect_eq(lf_model_forward(m, x, NULL, y, 1, 15, NULL), LF_ERR_STATE);
            cr_expect(strstr(lf_context_last_error(ctx), "weight \"w2\" of layer 0 was never set"), "%s",
                      lf_context_last_error(ctx));
        }
        set(m, i, "w2", l->w2, D * s.ff), set(m, i, "b2", l->b2, D);
    }
    cr_expect_eq(lf_model_set_weight(m, 0, "w2", L[0].w2, 5), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "holds 108 floats, got 5"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_model_set_weight(m, -1, "tok", L[0].w2, 5), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "this model has no weight \"tok\" of its own"), "%s",
              lf_context_last_error(ctx));
    const size_t count = 3 * 15 * D;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    double *want = malloc(count * sizeof *want);
    lf_test_fill(x, count, &b.rng, -1, 1);
    const int32_t lens[3] = {15, 8, 0};
    cr_assert_eq(lf_model_forward(m, x, NULL, y, 3, 15, lens), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_model_forward(&ref, x, NULL, 3, 15, lens, want);
    const double e = lf_test_rel_err(y, want, count);
    cr_expect_leq(e, 1e-4, "relative error %.3g against the reference", e);
    free(x), free(y), free(want);
    lf_model_free(m);
    for (int i = 0; i < 4; i++) free(e_t[i]);
    free_builder(&b);
}
