/*
 * test_weights.c - the shaped weight setters: a layer filled through
 * lf_attention_set_weight_shaped matches the double-precision reference; a
 * transposed E, which has the right count, or any other shape is refused
 * naming the expected one and leaves the weight unset; a model's shaped
 * setter gives the same model as its count-based twin and refuses the same way.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "reference.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(weights, .init = setup, .fini = teardown, .timeout = 600);

enum { D = 20, H = 4, N = 23, K = 7, BATCH = 2 };

#define EXPECT_REFUSED(call, words)                                                                          \
    do {                                                                                                     \
        cr_expect_eq((call), LF_ERR_ARGUMENT, "%s", #call);                                                 \
        cr_expect(strstr(lf_context_last_error(ctx), (words)), "%s: \"%s\" lacks \"%s\"", #call,            \
                  lf_context_last_error(ctx), (words));                                                      \
    } while (0)

static lf_attention_config config(lf_sharing sharing)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D, H, N, K);
    c.sharing = sharing, c.bias_q = c.bias_k = c.bias_v = 1;
    return c;
}

static void set_shaped(lf_attention *layer, const char *name, const float *data, size_t ndims, size_t a, size_t b,
                       size_t c)
{
    const size_t dims[3] = {a, b, c};
    cr_assert_eq(lf_attention_set_weight_shaped(layer, name, dims, ndims, data), LF_OK, "%s: %s", name,
                 lf_context_last_error(ctx));
}

Test(weights, shaped_setter_fills_a_layer_the_reference_agrees_with)
{
    uint64_t rng = lf_test_seed();
    lf_attention_config cfg = config(LF_SHARE_NONE); /* one E and one F per head: [H, K, N] */
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    float *w[4], *bias[4], *e = lf_test_random(H * K * N, &rng, -0.3f, 0.3f), *f = lf_test_random(H * K * N, &rng, -0.3f, 0.3f);
    for (int i = 0; i < 4; i++) w[i] = lf_test_random(D * D, &rng, -0.2f, 0.2f), bias[i] = lf_test_random(D, &rng, -1, 1);
    static const char *const wn[4] = {"wq", "wk", "wv", "wo"}, *const bn[4] = {"bq", "bk", "bv", "bo"};
    for (int i = 0; i < 4; i++) set_shaped(layer, wn[i], w[i], 2, D, D, 0), set_shaped(layer, bn[i], bias[i], 1, D, 0, 0);
    set_shaped(layer, "e", e, 3, H, K, N), set_shaped(layer, "f", f, 3, H, K, N);

    const size_t count = (size_t)BATCH * N * D;
    float *x = lf_test_random(count, &rng, -1, 1), *y = malloc(count * sizeof *y);
    double *want = malloc(count * sizeof *want);
    lf_test_poison(y, count);
    const int32_t lengths[BATCH] = {N, 9};
    cr_assert_eq(lf_attention_forward(layer, x, y, BATCH, N, lengths), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_weights rw = {w[0], w[1], w[2], w[3], bias[0], bias[1], bias[2], bias[3], e, f};
    lf_attention_config resolved = cfg;
    lf_ref_resolve(&resolved);
    lf_ref_attention(&resolved, &rw, NULL, x, BATCH, N, lengths, want);
    const double err = lf_test_rel_err(y, want, count);
    cr_expect_leq(err, 1e-5, "relative error %.3g", err);
    for (int i = 0; i < 4; i++) free(w[i]), free(bias[i]);
    free(e), free(f), free(x), free(y), free(want);
    lf_attention_free(layer);
}

Test(weights, a_transposed_or_reshaped_e_is_refused_naming_its_shape)
{
    lf_attention_config cfg = config(LF_SHARE_HEADWISE); /* E, F [K, N] */
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, lf_test_seed()), LF_OK);
    float *e = calloc((size_t)H * K * N, sizeof *e);
    const size_t transposed[2] = {N, K}, flat[1] = {K * N}, per_head[3] = {1, K, N}, wide[9] = {1};
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", transposed, 2, e), "weight \"e\" is [7, 23], got [23, 7]");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", flat, 1, e), "is [7, 23], got [161]");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", per_head, 3, e), "got [1, 7, 23]");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", per_head, 0, e), "got []");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", wide, 9, e), "got 9 dimensions");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "e", NULL, 2, e), "dims");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "wq", transposed, 2, NULL), "data");
    EXPECT_REFUSED(lf_attention_set_weight_shaped(layer, "wz", transposed, 2, e), "\"wz\"");
    EXPECT_REFUSED(lf_attention_set_weight(layer, "e", e, K * N - 1), "holds 161 floats, got 160 (its shape is [7, 23])");

    lf_attention_config per = config(LF_SHARE_NONE);
    lf_attention *heads = NULL;
    cr_assert_eq(lf_attention_create(ctx, &per, NULL, &heads), LF_OK, "%s", lf_context_last_error(ctx));
    const size_t one[2] = {K, N};
    EXPECT_REFUSED(lf_attention_set_weight_shaped(heads, "e", one, 2, e), "weight \"e\" is [4, 7, 23], got [7, 23]");
    lf_attention_free(heads);

    lf_attention_free(layer);
    free(e);
}

/* A refused weight keeps what it held: the same forward gives the same bits. */
Test(weights, a_refused_weight_is_not_uploaded)
{
    uint64_t rng = lf_test_seed();
    lf_attention_config cfg = config(LF_SHARE_HEADWISE);
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, rng), LF_OK);
    const size_t count = (size_t)N * D;
    float *x = lf_test_random(count, &rng, -1, 1), *before = malloc(count * sizeof *before);
    float *after = malloc(count * sizeof *after), *zeros = calloc((size_t)K * N, sizeof *zeros);
    cr_assert_eq(lf_attention_forward(layer, x, before, 1, N, NULL), LF_OK);
    const size_t transposed[2] = {N, K};
    cr_expect_eq(lf_attention_set_weight_shaped(layer, "e", transposed, 2, zeros), LF_ERR_ARGUMENT);
    lf_test_poison(after, count);
    cr_assert_eq(lf_attention_forward(layer, x, after, 1, N, NULL), LF_OK);
    cr_expect(memcmp(before, after, count * sizeof *after) == 0, "a refused E changed the layer");
    free(x), free(before), free(after), free(zeros);
    lf_attention_free(layer);
}

enum { LAYERS = 2, FF = 9 };

/* Sets every weight of a 2-layer encoder from `data` (large enough), shaped or by count. */
static void fill_model(lf_model *m, const float *data, bool shaped)
{
    static const struct { const char *name; size_t ndim, dim[3]; } w[] = {
        {"wq", 2, {D, D}}, {"wk", 2, {D, D}}, {"wv", 2, {D, D}}, {"wo", 2, {D, D}}, {"bo", 1, {D}},
        {"e", 2, {K, N}}, {"f", 2, {K, N}}, {"ln1_g", 1, {D}}, {"ln1_b", 1, {D}}, {"ln2_g", 1, {D}},
        {"ln2_b", 1, {D}}, {"w1", 2, {FF, D}}, {"b1", 1, {FF}}, {"w2", 2, {D, FF}}, {"b2", 1, {D}}};
    for (int layer = 0; layer < LAYERS; layer++)
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            const size_t count = w[i].dim[0] * (w[i].ndim > 1 ? w[i].dim[1] : 1);
            const lf_status st = shaped ? lf_model_set_weight_shaped(m, layer, w[i].name, w[i].dim, w[i].ndim, data)
                                        : lf_model_set_weight(m, layer, w[i].name, data, count);
            cr_assert_eq(st, LF_OK, "%s: %s", w[i].name, lf_context_last_error(ctx));
        }
}

static lf_model *encoder(void)
{
    lf_model_config cfg;
    lf_model_config_init(&cfg, LF_MODEL_ENCODER, LAYERS, D, FF, 0);
    lf_attention_config attn[LAYERS] = {config(LF_SHARE_HEADWISE), config(LF_SHARE_HEADWISE)};
    attn[0].bias_q = attn[0].bias_k = attn[0].bias_v = attn[1].bias_q = attn[1].bias_k = attn[1].bias_v = 0;
    lf_model *m = NULL;
    cr_assert_eq(lf_model_create(ctx, &cfg, attn, &m), LF_OK, "%s", lf_context_last_error(ctx));
    return m;
}

Test(weights, a_model_set_by_shape_is_the_model_set_by_count_and_refuses_the_same_way)
{
    uint64_t rng = lf_test_seed();
    float *data = lf_test_random((size_t)D * D, &rng, -0.3f, 0.3f), *x = lf_test_random((size_t)N * D, &rng, -1, 1);
    lf_model *by_shape = encoder(), *by_count = encoder();
    fill_model(by_shape, data, true);
    fill_model(by_count, data, false);
    float *y1 = malloc((size_t)N * D * sizeof *y1), *y2 = malloc((size_t)N * D * sizeof *y2);
    lf_test_poison(y1, (size_t)N * D), lf_test_poison(y2, (size_t)N * D);
    cr_assert_eq(lf_model_forward(by_shape, x, NULL, y1, 1, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_model_forward(by_count, x, NULL, y2, 1, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect(memcmp(y1, y2, (size_t)N * D * sizeof *y1) == 0, "shaped and counted weights differ");
    cr_expect(lf_test_rel_err_f(y1, y2, (size_t)N * D) == 0.0, "an output was never written");

    const size_t w1_t[2] = {D, FF}, e_t[2] = {N, K}, tok[2] = {30, D};
    EXPECT_REFUSED(lf_model_set_weight_shaped(by_shape, 1, "w1", w1_t, 2, data), "\"w1\" of layer 1 is [9, 20], got [20, 9]");
    EXPECT_REFUSED(lf_model_set_weight_shaped(by_shape, 0, "e", e_t, 2, data), "\"e\" of layer 0 is [7, 23], got [23, 7]");
    EXPECT_REFUSED(lf_model_set_weight_shaped(by_shape, -1, "tok", tok, 2, data), "no weight \"tok\"");
    EXPECT_REFUSED(lf_model_set_weight_shaped(by_shape, 2, "w1", w1_t, 2, data), "layer 2");
    EXPECT_REFUSED(lf_model_set_weight_shaped(by_shape, 0, "w1", NULL, 2, data), "dims");
    EXPECT_REFUSED(lf_model_set_weight(by_shape, 0, "w1", data, 5), "holds 180 floats, got 5 (its shape is [9, 20])");
    free(data), free(x), free(y1), free(y2);
    lf_model_free(by_shape);
    lf_model_free(by_count);
}
