/*
 * test_causal.c - causal attention: equal to the double-precision reference
 * of the definition in linformer.h, and unable to see the future: changing
 * every input row after position i leaves output rows 0..i bit-identical.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "layer_case.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(causal, .init = setup, .fini = teardown, .timeout = 900);

/* The causal configurations: the exact modes, and Linformer with each window kind. */
static const struct {
    lf_mode mode;
    lf_proj_kind kind;
    lf_sharing sharing;
} variants[] = {
    {LF_MODE_DENSE, LF_PROJ_LEARNED, LF_SHARE_HEADWISE},     {LF_MODE_FLASH, LF_PROJ_LEARNED, LF_SHARE_HEADWISE},
    {LF_MODE_LINFORMER, LF_PROJ_MEAN_POOL, LF_SHARE_HEADWISE}, {LF_MODE_LINFORMER, LF_PROJ_MAX_POOL, LF_SHARE_KV},
    {LF_MODE_LINFORMER, LF_PROJ_CONV, LF_SHARE_NONE},          {LF_MODE_LINFORMER, LF_PROJ_CONV, LF_SHARE_HEADWISE},
};
#define VARIANTS (sizeof variants / sizeof variants[0])

static lf_attention_config causal_config(size_t v, int d_model, int heads, int max_seq_len, int k)
{
    lf_attention_config c;
    lf_attention_config_init(&c, d_model, heads, max_seq_len, k);
    c.mode = variants[v].mode;
    c.proj_kind = variants[v].kind;
    c.sharing = variants[v].sharing;
    c.causal = 1;
    return c;
}

Test(causal, equals_the_reference)
{
    static const int ns[] = {1, 7, 50, 173};
    static const int32_t lens[] = {173, 96, 0, 13};
    for (size_t v = 0; v < VARIANTS; v++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            lf_case c = {causal_config(v, 48, 2, 200, 16), 1, ns[i], NULL}; /* window 13 */
            double e = lf_case_run(ctx, &c);
            cr_expect_leq(e, TOL, "variant %zu, n %d: relative error %.3g", v, ns[i], e);
        }
    for (size_t v = 0; v < VARIANTS; v++) { /* mixed lengths, one key/value head, d_head 24 */
        lf_case c = {causal_config(v, 72, 3, 180, 7), 4, 173, lens};
        c.cfg.kv_heads = 1;
        double e = lf_case_run(ctx, &c);
        cr_expect_leq(e, TOL, "variant %zu, mixed lengths: relative error %.3g", v, e);
        cr_expect_leq(lf_case_batch_vs_alone(ctx, &c), 1e-6, "variant %zu: a mixed batch differs from alone", v);
    }
}

/* Rows 0..i of every sequence keep their bits when the rows after i change;
 * with `nan`, row i + 1 also holds a NaN (the fused kernels add only the keys
 * a query sees; dense mode's P V GEMM would add 0 x NaN). */
static void expect_no_leak(lf_attention *layer, const float *x, int batch, int n, const int32_t *lens, int i,
                           bool nan, uint64_t *rng, const char *what)
{
    const int D = 32;
    const size_t count = (size_t)batch * n * D;
    float *x2 = malloc(count * sizeof *x2), *y = malloc(count * sizeof *y), *y2 = malloc(count * sizeof *y2);
    memcpy(x2, x, count * sizeof *x2);
    for (int b = 0; b < batch; b++) lf_test_fill(x2 + ((size_t)b * n + i + 1) * D, (size_t)(n - i - 1) * D, rng, -3, 3);
    for (int b = 0; nan && b < batch && i + 1 < n; b++) x2[((size_t)b * n + i + 1) * D + 7] = NAN;
    cr_assert_eq(lf_attention_forward(layer, x, y, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_forward(layer, x2, y2, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
    for (int b = 0; b < batch; b++)
        cr_expect_eq(memcmp(y + (size_t)b * n * D, y2 + (size_t)b * n * D, (size_t)(i + 1) * D * sizeof *y), 0,
                     "%s: sequence %d, rows 0..%d changed when rows after %d did", what, b, i, i);
    free(x2), free(y), free(y2);
}

Test(causal, never_sees_the_future)
{
    const int D = 32, n = 61, batch = 2, k = 6, max_seq_len = 64; /* window 11 */
    static const int32_t lens[] = {61, 40};
    static const int positions[] = {0, 1, 9, 10, 11, 12, 21, 22, 32, 39, 40, 59};
    uint64_t rng = lf_test_seed();
    float *x = malloc((size_t)batch * n * D * sizeof *x);
    for (size_t v = 0; v < VARIANTS; v++) {
        lf_attention_config c = causal_config(v, D, 4, max_seq_len, k);
        lf_attention *layer = NULL;
        cr_assert_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_init_random(layer, lf__rand_next(&rng)), LF_OK);
        lf_test_fill(x, (size_t)batch * n * D, &rng, -1, 1);
        char what[64];
        for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
            snprintf(what, sizeof what, "variant %zu, position %d", v, positions[p]);
            expect_no_leak(layer, x, batch, n, lens, positions[p], false, &rng, what);
            if (variants[v].mode == LF_MODE_DENSE) continue; /* docs/guarantees.md, "Numbers" */
            snprintf(what, sizeof what, "variant %zu, position %d, a NaN after it", v, positions[p]);
            expect_no_leak(layer, x, batch, n, lens, positions[p], true, &rng, what);
        }
        lf_attention_free(layer);
    }
    free(x);
}

Test(causal, matrix_projections_are_refused)
{
    static const lf_proj_kind matrices[] = {LF_PROJ_LEARNED, LF_PROJ_RANDOM};
    for (size_t i = 0; i < 2; i++) {
        lf_attention_config c;
        lf_attention_config_init(&c, 32, 2, 64, 8);
        c.proj_kind = matrices[i];
        c.causal = 1;
        lf_attention *layer = (lf_attention *)1;
        cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_UNSUPPORTED);
        cr_expect_null(layer);
        cr_expect_neq(strstr(lf_context_last_error(ctx), "local support"), NULL, "%s", lf_context_last_error(ctx));
        cr_expect_neq(strstr(lf_context_last_error(ctx), "LF_PROJ_MEAN_POOL"), NULL, "%s", lf_context_last_error(ctx));
    }
    lf_attention_config c;
    lf_attention_config_init(&c, 32, 2, 64, 8);
    c.proj_kind = LF_PROJ_MEAN_POOL;
    c.causal = 1;
    c.path = LF_PATH_GEMM;
    lf_attention *layer = NULL;
    cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_UNSUPPORTED, "%s", lf_context_last_error(ctx));
    c.path = LF_PATH_AUTO;
    c.position = LF_POSITION_INPUT;
    cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_UNSUPPORTED, "%s", lf_context_last_error(ctx));
    c.position = LF_POSITION_KV;
    c.causal = 2;
    cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_ARGUMENT, "%s", lf_context_last_error(ctx));
}
