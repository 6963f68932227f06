/*
 * test_profile.c - where a forward's device time went: lf_attention_last_profile
 * and lf_model_last_profile split the last forward into named stages whose
 * command counts and work (flops, bytes) follow from the shapes, whose times
 * add up to at most the whole forward's, and a deep model (hundreds of
 * commands) keeps every stage.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(profile, .init = setup, .fini = teardown, .timeout = 600);

/* The stage called `name` in stages[0, count), or NULL. */
static const lf_stage_time *stage(const lf_stage_time *stages, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(stages[i].stage, name) == 0) return &stages[i];
    return NULL;
}

/* Every stage has a name, a command and a time; their sum is at most the
 * forward's time (each stage runs from the end of the command before it). */
static void expect_consistent(const lf_stage_time *stages, size_t count, double total_ms)
{
    double sum = 0.0;
    for (size_t i = 0; i < count; i++) {
        cr_expect_not_null(stages[i].stage);
        cr_expect_geq(stages[i].commands, 1u, "%s", stages[i].stage);
        cr_expect_geq(stages[i].ms, 0.0, "%s", stages[i].stage);
        for (size_t j = 0; j < i; j++) cr_expect_str_neq(stages[i].stage, stages[j].stage, "a stage listed twice");
        sum += stages[i].ms;
    }
    cr_expect_leq(sum, total_ms * (1.0 + 1e-9) + 1e-6, "stages add up to %g ms, the forward took %g ms", sum, total_ms);
}

/* A layer of c with random weights after one forward of 2 x 37 rows. */
static lf_attention *layer_after_forward(const lf_attention_config *c)
{
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, lf_test_seed()), LF_OK);
    const size_t count = (size_t)2 * 37 * c->d_model;
    uint64_t rng = lf_test_seed();
    float *x = lf_test_random(count, &rng, -1, 1), *y = malloc(count * sizeof *y);
    cr_assert_eq(lf_attention_forward(layer, x, y, 2, 37, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    free(x), free(y);
    return layer;
}

/* The stages of the layer's last forward, `count` of them (freed by the caller). */
static lf_stage_time *last_stages(lf_attention *layer, size_t *count)
{
    cr_assert_eq(lf_attention_last_profile(layer, NULL, 0, count), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_geq(*count, 3u);
    lf_stage_time *stages = calloc(*count, sizeof *stages);
    size_t again = 0;
    cr_assert_eq(lf_attention_last_profile(layer, stages, *count, &again), LF_OK);
    cr_expect_eq(again, *count);
    return stages;
}

Test(profile, layer_stages_follow_the_forward)
{
    lf_attention_config c;
    lf_attention_config_init(&c, 24, 3, 40, 7);
    lf_attention *layer = layer_after_forward(&c);
    size_t count = 0, again = 0;
    lf_stage_time *stages = last_stages(layer, &count);
    /* a short array gets the first stages and the real count */
    cr_assert_eq(lf_attention_last_profile(layer, stages, 1, &again), LF_OK);
    cr_expect_eq(again, count);
    cr_assert_eq(lf_attention_last_profile(layer, stages, count, &again), LF_OK);
    double total = 0.0;
    cr_assert_eq(lf_attention_last_time_ms(layer, &total), LF_OK);
    expect_consistent(stages, count, total);
    const lf_stage_time *out = stage(stages, count, "gemm out");
    cr_assert_not_null(out, "no \"gemm out\" stage");
    cr_expect_eq(out->commands, 1u, "one output projection a forward, got %u", out->commands);
    /* its work: 2 x 37 rows of 24 outputs from 24 inputs; A, B and C once, C read too (beta 1 adds to y) or not */
    cr_expect_eq(out->flops, 2.0 * 74 * 24 * 24, "gemm out: %g flops", out->flops);
    const double operands = 4.0 * (74 * 24 + 24 * 24 + 74 * 24);
    cr_expect(out->bytes == operands || out->bytes == operands + 4.0 * 74 * 24, "gemm out: %g bytes", out->bytes);
    const lf_stage_time *att = stage(stages, count, "attention_tiled");
    cr_assert_not_null(att, "no \"attention_tiled\" stage");
    cr_expect_eq(att->flops, 4.0 * 74 * 8 * 7 * 3, "attention: scores and P V of 74 queries, 7 keys, d_head 8, 3 "
                 "heads: %g flops", att->flops);
    for (size_t i = 0; i < count; i++) cr_expect_gt(stages[i].bytes, 0.0, "%s moves no bytes", stages[i].stage);
    free(stages);
    lf_attention_free(layer);
}

/* The profile says which order of evaluation ran: input first, E x of each
 * sequence, Wk and Wv on k rows and the biases through E's row sums. */
Test(profile, stages_name_the_order_of_evaluation)
{
    static const struct { const char *order, *present[4], *absent[2]; unsigned commands[4]; } cases[] = {
        {"project-first", {"gemm qkv", "seq_project", NULL}, {"gemm q", "seq_project, input first"}, {1, 2}},
        {"input-first", {"gemm q", "seq_project, input first", "row sums of E", "bias kv (row sums)"},
         {"gemm qkv", "seq_project"}, {1, 2, 2, 2}},
    };
    lf_attention_config c;
    lf_attention_config_init(&c, 24, 3, 40, 7);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(setenv("LINFORMER_ORDER", cases[i].order, 1), 0);
        lf_attention *layer = layer_after_forward(&c);
        size_t count = 0;
        lf_stage_time *stages = last_stages(layer, &count);
        for (int j = 0; j < 4 && cases[i].present[j]; j++) {
            const lf_stage_time *s = stage(stages, count, cases[i].present[j]);
            cr_assert_not_null(s, "%s: no \"%s\" stage", cases[i].order, cases[i].present[j]);
            cr_expect_eq(s->commands, cases[i].commands[j], "%s: %s", cases[i].order, cases[i].present[j]);
        }
        for (int j = 0; j < 2; j++)
            cr_expect_null(stage(stages, count, cases[i].absent[j]), "%s ran \"%s\"", cases[i].order,
                           cases[i].absent[j]);
        free(stages);
        lf_attention_free(layer);
    }
    unsetenv("LINFORMER_ORDER");
}

/* Sets every weight of layer i of `m` from a temporary layer of the same
 * attention config (its names and sizes), and the feed-forward's. */
static void fill_layer(lf_model *m, int i, const lf_attention_config *c, int ff, uint64_t *rng)
{
    lf_attention *shape = NULL;
    cr_assert_eq(lf_attention_create(ctx, c, NULL, &shape), LF_OK, "%s", lf_context_last_error(ctx));
    lf_weight_info w;
    for (int j = 0; lf_attention_weight_info(shape, j, &w) == LF_OK; j++) {
        float *data = lf_test_random(w.count, rng, -0.3f, 0.3f);
        cr_assert_eq(lf_model_set_weight(m, i, w.name, data, w.count), LF_OK, "%s", lf_context_last_error(ctx));
        free(data);
    }
    lf_attention_free(shape);
    const size_t D = (size_t)c->d_model;
    const struct { const char *name; size_t count; } ffn[] = {
        {"ln1_g", D}, {"ln1_b", D}, {"ln2_g", D}, {"ln2_b", D}, {"w1", ff * D}, {"b1", ff}, {"w2", D * ff}, {"b2", D}};
    for (size_t j = 0; j < sizeof ffn / sizeof ffn[0]; j++) {
        float *data = lf_test_random(ffn[j].count, rng, -0.3f, 0.3f);
        cr_assert_eq(lf_model_set_weight(m, i, ffn[j].name, data, ffn[j].count), LF_OK, "%s", lf_context_last_error(ctx));
        free(data);
    }
}

/* 48 layers queue over five hundred commands; the split keeps them all. */
Test(profile, deep_model_keeps_every_stage)
{
    enum { LAYERS = 48, D = 8, FF = 12, N = 9 };
    lf_model_config cfg;
    lf_model_config_init(&cfg, LF_MODEL_ENCODER, LAYERS, D, FF, 0);
    lf_attention_config attn[LAYERS];
    for (int i = 0; i < LAYERS; i++) lf_attention_config_init(&attn[i], D, 2, N, 3);
    lf_model *m = NULL;
    cr_assert_eq(lf_model_create(ctx, &cfg, attn, &m), LF_OK, "%s", lf_context_last_error(ctx));
    uint64_t rng = lf_test_seed();
    for (int i = 0; i < LAYERS; i++) fill_layer(m, i, &attn[i], FF, &rng);
    float *x = lf_test_random((size_t)N * D, &rng, -1, 1), y[N * D];
    cr_assert_eq(lf_model_forward(m, x, NULL, y, 1, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));

    lf_stage_time stages[64];
    size_t count = 0;
    cr_assert_eq(lf_model_last_profile(m, stages, 64, &count), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_leq(count, 64u);
    double total = 0.0;
    cr_assert_eq(lf_model_last_time_ms(m, &total), LF_OK);
    expect_consistent(stages, count, total);
    unsigned commands = 0;
    for (size_t i = 0; i < count; i++) commands += stages[i].commands;
    cr_expect_gt(commands, 500u, "only %u commands listed", commands);
    const lf_stage_time *out = stage(stages, count, "gemm out");
    cr_assert_not_null(out, "no \"gemm out\" stage");
    cr_expect_eq(out->commands, (unsigned)LAYERS, "one output projection a layer, got %u", out->commands);
    free(x);
    lf_model_free(m);
}
