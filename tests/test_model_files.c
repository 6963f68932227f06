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
#include "model_case.h"
#include "st_write.h"
#include "runtime.h"
#include "reference_model.h"
#include "safetensors.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(model_files, .init = setup, .fini = teardown, .timeout = 900);

static void temp_path(char *path, size_t size, const char *what)
{
    snprintf(path, size, "%s/lf_model_%s_%d.safetensors", P_tmpdir, what, (int)getpid());
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
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 3, .D = 16, .heads = 4, .n = 21, .ff = 24, .k = {5}};
    lf_ref_model ref;
    lf_ref_layer L[3];
    lf_fairseq_model(&b, "encoder.sentence_encoder.", &s, &ref, L);
    lf_builder_add(&b, "encoder.lm_head.weight", 3, 16, -1, 1); /* outside the encoder: not the model's */
    char path[256];
    temp_path(path, sizeof path, "fairseq");
    const char *meta[] = {"heads", "4"};
    lf_builder_write(&b, path, meta, 1);
    expect_reference(path, NULL, &ref, 4, s.n, &b.rng);
    const lf_model_options opts = {.prefix = "encoder.sentence_encoder.", .norm = LF_NORM_POST, .heads = 4};
    expect_reference(path, &opts, &ref, 3, 13, &b.rng);
    unlink(path);
    lf_builder_free(&b);
}

/* A layer's E or F beside fairseq's layerwise projection may only be a copy of
 * it: one of its own would be a model the layerwise one does not run. */
Test(model_files, fairseq_a_layers_own_projection_beside_the_layerwise_one_is_refused)
{
    static const char *own[] = {"layers.1.self_attn.compress_k.weight", "layers.1.self_attn.compress_v.weight"};
    for (int i = 0; i < 2; i++) {
        lf_builder b = {.rng = lf_test_seed()};
        const lf_model_shape s = {.layers = 2, .D = 8, .heads = 2, .n = 11, .ff = 12, .k = {3}};
        lf_ref_model ref;
        lf_ref_layer L[2];
        lf_fairseq_model(&b, "", &s, &ref, L);
        lf_builder_add(&b, own[i], 3, 11, -1, 1);
        char path[256];
        temp_path(path, sizeof path, "fairseq_own");
        const char *meta[] = {"heads", "2"};
        lf_builder_write(&b, path, meta, 1);
        lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT,
                               (const char *[]){own[i] + strlen("layers.1."), "of its own beside the layerwise", NULL});
        unlink(path);
        lf_builder_free(&b);
    }
}

Test(model_files, fairseq_token_encoder_with_embeddings)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 2, .D = 12, .heads = 3, .n = 17, .ff = 20, .vocab = 23, .k = {6}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[2];
    lf_fairseq_model(&b, "", &s, &ref, L);
    char path[256];
    temp_path(path, sizeof path, "fairseq_tokens");
    const char *meta[] = {"heads", "3", "activation", "gelu"};
    lf_builder_write(&b, path, meta, 2);
    expect_reference(path, NULL, &ref, 3, s.n, &b.rng);
    unlink(path);
    lf_builder_free(&b);
}

Test(model_files, lucidrains_k_per_layer_glu_relu)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 3, .D = 12, .heads = 2, .n = 19, .ff = 10, .k = {3, 7, 5}, .glu = true};
    lf_ref_model ref;
    lf_ref_layer L[3];
    float *e_t[6];
    lf_lucid_model(&b, &s, &ref, L, e_t);
    char path[256];
    temp_path(path, sizeof path, "lucid_glu");
    const char *meta[] = {"heads", "2", "activation", "relu"};
    lf_builder_write(&b, path, meta, 2);
    expect_reference(path, NULL, &ref, 4, s.n, &b.rng);
    unlink(path);
    for (int i = 0; i < 6; i++) free(e_t[i]);
    lf_builder_free(&b);
}

/* ---- What the model holds ---- */

static void write_lucid(const char *what, int layers, char *path, size_t size, lf_ref_model *ref, lf_ref_layer *L,
                        float **e_t)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = layers, .D = 16, .heads = 2, .n = 32, .ff = 20, .k = {4, 4, 4, 4}};
    lf_lucid_model(&b, &s, ref, L, e_t);
    temp_path(path, size, what);
    const char *meta[] = {"heads", "2", "activation", "relu"};
    lf_builder_write(&b, path, meta, 2);
    lf_builder_free(&b);
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
    cr_expect_eq(lf_model_forward_cl(m, xb, xb, 2, 32, NULL), LF_ERR_ARGUMENT, "in and y the same buffer");
    cr_expect(strstr(lf_context_last_error(ctx), "in and y overlap"), "%s", lf_context_last_error(ctx));
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

Test(model_files, options_contradicting_the_metadata_are_errors)
{
    char path[256];
    lf_ref_model ref;
    lf_ref_layer L[1];
    float *e_t[2];
    write_lucid("contradict", 1, path, sizeof path, &ref, L, e_t);
    free(e_t[0]), free(e_t[1]);
    const lf_model_options heads = {.heads = 4};
    lf_expect_load_refused(ctx, path, &heads, LF_ERR_ARGUMENT, (const char *[]){"heads 4", "says 2", NULL});
    const lf_model_options act = {.activation = LF_ACT_GELU};
    lf_expect_load_refused(ctx, path, &act, LF_ERR_ARGUMENT, (const char *[]){"activation gelu", "says relu", NULL});
    const lf_model_options prefix = {.prefix = "model."};
    lf_expect_load_refused(ctx, path, &prefix, LF_ERR_FORMAT, (const char *[]){"under prefix \"model.\"", "expected", NULL});
    unlink(path);
}

Test(model_files, an_attention_layer_file_is_not_a_model)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/pytorch/plain.model.safetensors", LF_SOURCE_DIR);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT,
                      (const char *[]){"found 7 tensors", "\"proj_k\"", "net.layers.0.0.fn.to_q.weight",
                                       "layers.0.self_attn.q_proj.weight", "reversible Linformer",
                                       "net.blocks.0.f.net.fn.to_q.weight", NULL});
}

/* A one-layer lucidrains file with one change: a tensor added, or one left out. */
static void write_changed(const char *path, const char *extra, const char *omit, int bad_rows)
{
    lf_builder b = {.rng = lf_test_seed()};
    lf_ref_model ref;
    lf_ref_layer L[1];
    float *e_t[2];
    const lf_model_shape s = {.layers = 1, .D = 8, .heads = 2, .n = 9, .ff = 6, .k = {3}};
    lf_lucid_model(&b, &s, &ref, L, e_t);
    free(e_t[0]), free(e_t[1]);
    if (extra) lf_builder_add(&b, extra, bad_rows, 8, -1, 1);
    st_tensor kept[MAX_TENSORS];
    size_t count = 0;
    for (size_t i = 0; i < b.count; i++)
        if (!omit || strcmp(b.name[i], omit)) kept[count++] = b.t[i];
    const char *meta[] = {"heads", "2"};
    char msg[512];
    cr_assert_eq(st_save(path, kept, count, meta, 1, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    lf_builder_free(&b);
}

Test(model_files, bad_files_name_what_is_wrong)
{
    char path[256];
    temp_path(path, sizeof path, "bad");
    write_changed(path, "net.layers.0.0.fn.extra", NULL, 2);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"unknown tensor \"net.layers.0.0.fn.extra\"", NULL});
    write_changed(path, NULL, "net.layers.0.1.fn.w2.weight", 0);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"\"net.layers.0.1.fn.w2.weight\" is missing", NULL});
    write_changed(path, "token_emb.weight", NULL, 5);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"not wrapped as LinformerLM", NULL});
    write_changed(path, "other.linformer.net.layers.0.0.fn.to_q.weight", NULL, 8);
    lf_expect_load_refused(ctx, path, NULL, LF_ERR_FORMAT, (const char *[]){"more than one model", NULL});
    unlink(path);
}

Test(model_files, bad_forwards_are_refused)
{
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 1, .D = 12, .heads = 3, .n = 9, .ff = 8, .vocab = 7, .k = {3}, .embeddings = true};
    lf_ref_model ref;
    lf_ref_layer L[1];
    lf_fairseq_model(&b, "", &s, &ref, L);
    char path[256];
    temp_path(path, sizeof path, "bad_forward");
    const char *meta[] = {"heads", "3"};
    lf_builder_write(&b, path, meta, 1);
    lf_builder_free(&b);
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
    lf_builder b = {.rng = lf_test_seed()};
    const lf_model_shape s = {.layers = 2, .D = 12, .heads = 3, .n = 15, .ff = 9, .k = {4, 6}, .glu = true};
    lf_ref_model ref;
    lf_ref_layer L[2];
    float *e_t[4];
    lf_lucid_model(&b, &s, &ref, L, e_t);
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
    lf_builder_free(&b);
}

/* ---- One layer of a model, for measuring it ---- */

/* A 3-layer model of each layout, written and loaded: fairseq's token encoder
 * (post-norm, embeddings, one layerwise projection) or lucidrains' encoder
 * (pre-norm, k per layer); ref and L its reference, e_t the lucidrains E and F. */
typedef struct {
    char path[256];
    lf_ref_model ref;
    lf_ref_layer L[3];
    float *e_t[6];
    lf_builder b;
    lf_model *m;
} measured_model;

static void measured_open(measured_model *mm, bool fairseq)
{
    const lf_model_shape fs = {.layers = 3, .D = 12, .heads = 3, .n = 14, .ff = 10, .vocab = 11, .k = {5},
                               .embeddings = true};
    const lf_model_shape ls = {.layers = 3, .D = 12, .heads = 2, .n = 14, .ff = 10, .k = {3, 7, 4}};
    *mm = (measured_model){.b = {.rng = lf_test_seed()}};
    if (fairseq) lf_fairseq_model(&mm->b, "", &fs, &mm->ref, mm->L);
    else lf_lucid_model(&mm->b, &ls, &mm->ref, mm->L, mm->e_t);
    temp_path(mm->path, sizeof mm->path, fairseq ? "measured_fairseq" : "measured_lucid");
    const char *meta[] = {"heads", fairseq ? "3" : "2", "activation", fairseq ? "gelu" : "relu"};
    lf_builder_write(&mm->b, mm->path, meta, 2);
    cr_assert_eq(lf_model_load(ctx, mm->path, NULL, &mm->m), LF_OK, "%s", lf_context_last_error(ctx));
}

static void measured_close(measured_model *mm)
{
    lf_model_free(mm->m);
    unlink(mm->path);
    for (int i = 0; i < 6; i++) free(mm->e_t[i]);
    lf_builder_free(&mm->b);
}

Test(model_files, each_layers_input_matches_the_reference_forward_up_to_it)
{
    enum { B = 3, N = 14, D = 12 };
    for (int layout = 0; layout < 2; layout++) {
        measured_model mm;
        measured_open(&mm, layout == 0);
        lf_model *m = mm.m;
        static float x[B * N * D], out[B * N * D];
        static int64_t tokens[B * N];
        static double want[B * N * D];
        lf_test_fill(x, B * N * D, &mm.b.rng, -1, 1);
        for (int i = 0; i < B * N; i++) tokens[i] = (int64_t)(lf__rand_next(&mm.b.rng) % 11);
        const int32_t lens[B] = {N, 9, 0};
        const bool x_in = mm.ref.kind == LF_MODEL_ENCODER;
        for (int layer = 0; layer < 3; layer++) {
            lf_test_poison(out, B * N * D);
            cr_assert_eq(lf_model_layer_input(m, layer, x_in ? x : NULL, x_in ? NULL : tokens, out, B, N, lens), LF_OK,
                         "%s", lf_context_last_error(ctx));
            lf_ref_model_layer_input(&mm.ref, layer, x, tokens, B, N, lens, want);
            const double e = lf_test_rel_err(out, want, B * N * D);
            cr_expect_leq(e, 1e-5, "%s, layer %d: relative error %.3g against the reference", mm.ref.norm == LF_NORM_PRE ?
                          "pre-norm" : "post-norm", layer, e);
            for (int i = 0; i < B * N * D; i++)
                if (want[i] == 0.0) cr_assert_eq(out[i], 0.0f, "layer %d: padded entry %d is %g", layer, i, out[i]);
        }
        measured_close(&mm);
    }
}

/* Layer i's attention from the model against the reference layer, on one input. */
static void expect_layer_attention(lf_model *m, int layer, const lf_load_options *o, const lf_attention_config *ref_cfg,
                                   const lf_ref_weights *w, const float *shared_e, const float *x, int batch, int n,
                                   const int32_t *lens)
{
    const int D = ref_cfg->d_model;
    const size_t count = (size_t)batch * n * D;
    lf_attention *a = NULL;
    cr_assert_eq(lf_model_layer_attention(m, layer, o, &a), LF_OK, "%s", lf_context_last_error(ctx));
    float *y = malloc(count * sizeof *y);
    double *want = malloc(count * sizeof *want);
    lf_test_poison(y, count);
    cr_assert_eq(lf_attention_forward(a, x, y, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_attention(ref_cfg, w, shared_e, x, batch, n, lens, want);
    const double e = lf_test_rel_err(y, want, count);
    cr_expect_leq(e, 1e-5, "layer %d, mode %s, projection %d, k %d: relative error %.3g", layer, lf_mode_name(o->mode),
                  (int)o->projection, o->k, e);
    free(y), free(want);
    lf_attention_free(a);
}

Test(model_files, each_layers_attention_matches_the_reference_layer)
{
    enum { B = 2, N = 14, D = 12, K = 6, SEED = 7 };
    for (int layout = 0; layout < 2; layout++) {
        measured_model mm;
        measured_open(&mm, layout == 0);
        lf_model *m = mm.m;
        const lf_ref_layer *L = mm.L;
        static float x[B * N * D], random[2 * K * N];
        lf_test_fill(x, B * N * D, &mm.b.rng, -1, 1);
        const int32_t lens[B] = {N, 10};
        for (int layer = 0; layer < 3; layer++) {
            lf_load_options o;
            lf_load_options_init(&o);
            /* the layer's own E and F (fairseq: the layerwise one) */
            expect_layer_attention(m, layer, &o, &L[layer].attn, &L[layer].w, mm.ref.shared_e, x, B, N, lens);
            /* exact attention on the same weights */
            lf_attention_config exact = L[layer].attn;
            exact.mode = o.mode = LF_MODE_DENSE;
            expect_layer_attention(m, layer, &o, &exact, &L[layer].w, NULL, x, B, N, lens);
            /* seeded random projections of another k: E then F from one stream (fairseq: E = F) */
            lf_attention_config rnd = L[layer].attn;
            rnd.proj_kind = o.projection = LF_PROJ_RANDOM, rnd.k = o.k = K, o.seed = SEED, o.mode = LF_MODE_LINFORMER;
            if (rnd.sharing == LF_SHARE_LAYERWISE) rnd.sharing = LF_SHARE_KV;
            lf_ref_random_projection(random, (size_t)(rnd.sharing == LF_SHARE_KV ? 1 : 2) * K * N, SEED, K);
            lf_ref_weights w = L[layer].w;
            w.e = random, w.f = rnd.sharing == LF_SHARE_KV ? NULL : random + K * N;
            expect_layer_attention(m, layer, &o, &rnd, &w, NULL, x, B, N, lens);
        }
        measured_close(&mm);
    }
}

static void expect_layer_error(lf_status got, const char *part)
{
    cr_expect_eq(got, LF_ERR_ARGUMENT, "got %s: %s", lf_status_string(got), lf_context_last_error(ctx));
    cr_expect(strstr(lf_context_last_error(ctx), part), "message \"%s\" lacks \"%s\"", lf_context_last_error(ctx), part);
}

Test(model_files, bad_layers_and_options_for_a_layer_are_refused)
{
    measured_model mm;
    measured_open(&mm, false);
    lf_model *m = mm.m;
    static float x[14 * 12], out[14 * 12];
    int64_t tokens[14] = {0};
    expect_layer_error(lf_model_layer_input(m, 3, x, NULL, out, 1, 14, NULL), "layer 3 is outside [0, 3)");
    expect_layer_error(lf_model_layer_input(m, -1, x, NULL, out, 1, 14, NULL), "layer -1 is outside [0, 3)");
    expect_layer_error(lf_model_layer_input(m, 0, NULL, tokens, out, 1, 14, NULL), "takes x");
    expect_layer_error(lf_model_layer_input(m, 0, x, NULL, NULL, 1, 14, NULL), "out is NULL");
    expect_layer_error(lf_model_layer_input(m, 0, x, NULL, out, 1, 15, NULL), "max_seq_len");
    const struct {
        lf_load_options o;
        const char *part;
    } bad[] = {{{.heads = 4, .causal = -1}, "heads 4 was given but layer 1 has 2"},
               {{.causal = 1}, "causal 1 was given but layer 1 is not causal"},
               {{.causal = -1, .k = 5}, "k 5 differs from the file's learned projections"},
               {{.causal = -1, .mode = (lf_mode)7}, "mode 7 is not an lf_mode"},
               {{.causal = -1, .projection = LF_PROJ_CONV, .k = 2}, "projection must be"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lf_attention *a = (lf_attention *)1;
        expect_layer_error(lf_model_layer_attention(m, 1, &bad[i].o, &a), bad[i].part);
        cr_expect_null(a, "*out is not NULL after a failure");
    }
    lf_attention *a = (lf_attention *)1;
    expect_layer_error(lf_model_layer_attention(m, 3, NULL, &a), "layer 3 is outside [0, 3)");
    cr_expect_null(a);
    expect_layer_error(lf_model_layer_attention(m, 0, NULL, NULL), "out is NULL");
    cr_expect_eq(lf_model_layer_attention(NULL, 0, NULL, &a), LF_ERR_ARGUMENT);
    cr_expect_eq(lf_model_layer_input(NULL, 0, x, NULL, out, 1, 14, NULL), LF_ERR_ARGUMENT);
    /* the model and its context work on after every refusal */
    cr_expect_eq(lf_model_layer_input(m, 2, x, NULL, out, 1, 14, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    measured_close(&mm);
}
