/*
 * test_measure.c - what `linformer rank` measures with: each head's output
 * before W_O, and one head's exact attention probabilities.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(measure, .init = setup, .fini = teardown, .timeout = 300);

/* A layer without biases whose weights are host arrays: wq, wk, wv, wo [D, D];
 * a learned projection's e and f [k, n] are random too. */
typedef struct {
    lf_attention *layer;
    float *w[4];
} layer_host;

/* Mean pooling, no biases: change what a test needs before make_layer_from. */
static lf_attention_config layer_config(int D, int heads, int n, lf_mode mode, int causal)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D, heads, n, 5);
    c.bias_q = c.bias_k = c.bias_v = c.bias_out = 0;
    c.mode = mode;
    c.causal = causal;
    c.proj_kind = LF_PROJ_MEAN_POOL;
    return c;
}

static layer_host make_layer_from(const lf_attention_config *c, uint64_t *rng)
{
    static const char *const names[4] = {"wq", "wk", "wv", "wo"};
    const int D = c->d_model;
    layer_host l;
    cr_assert_eq(lf_attention_create(ctx, c, NULL, &l.layer), LF_OK, "%s", lf_context_last_error(ctx));
    for (int i = 0; i < 4; i++) {
        l.w[i] = malloc((size_t)D * D * sizeof(float));
        lf_test_fill(l.w[i], (size_t)D * D, rng, -0.5f, 0.5f);
        cr_assert_eq(lf_attention_set_weight(l.layer, names[i], l.w[i], (size_t)D * D), LF_OK);
    }
    if (c->mode == LF_MODE_LINFORMER && c->proj_kind == LF_PROJ_LEARNED) {
        const size_t count = (size_t)c->k * c->max_seq_len;
        float *e = malloc(count * sizeof *e);
        for (int i = 0; i < 2; i++) {
            lf_test_fill(e, count, rng, -0.5f, 0.5f);
            cr_assert_eq(lf_attention_set_weight(l.layer, i ? "f" : "e", e, count), LF_OK, "%s",
                         lf_context_last_error(ctx));
        }
        free(e);
    }
    return l;
}

static layer_host make_layer(int D, int heads, int n, lf_mode mode, int causal, uint64_t *rng)
{
    const lf_attention_config c = layer_config(D, heads, n, mode, causal);
    return make_layer_from(&c, rng);
}

static void free_layer(layer_host *l)
{
    lf_attention_free(l->layer);
    for (int i = 0; i < 4; i++) free(l->w[i]);
}

/* row r of in [rows, D] times w^T [D, D], columns c0 .. c0 + cols */
static double linear_at(const float *in, const float *w, int D, int r, int c)
{
    double acc = 0;
    for (int i = 0; i < D; i++) acc += (double)in[(size_t)r * D + i] * w[(size_t)c * D + i];
    return acc;
}

/* Whatever the layer computes its keys from: pooled keys (causal or not), or
 * a learned E, which the plan evaluates input first (E x, then Wk on k rows),
 * so that the sequence's own keys are not otherwise computed. */
Test(measure, probabilities_equal_softmax_of_the_scores)
{
    uint64_t rng = lf_test_seed();
    const int D = 24, heads = 3, dh = 8, n = 37;
    for (int run = 0; run < 3; run++) {
        const int causal = run == 1;
        lf_attention_config c = layer_config(D, heads, n, LF_MODE_LINFORMER, causal);
        if (run == 2) c.proj_kind = LF_PROJ_LEARNED;
        const lf_proj_kind proj = c.proj_kind;
        layer_host l = make_layer_from(&c, &rng);
        float *x = malloc((size_t)n * D * sizeof *x), *p = malloc((size_t)n * n * sizeof *p);
        double *ref = malloc((size_t)n * n * sizeof *ref), *s = malloc((size_t)n * sizeof *s);
        lf_test_fill(x, (size_t)n * D, &rng, -1, 1);
        for (int h = 0; h < heads; h++) {
            lf_test_poison(p, (size_t)n * n);
            cr_assert_eq(lf_attention_probabilities(l.layer, x, p, n, h), LF_OK, "%s", lf_context_last_error(ctx));
            for (int i = 0; i < n; i++) {
                const int valid = causal ? i + 1 : n;
                double m = -INFINITY, sum = 0;
                for (int j = 0; j < valid; j++) {
                    double dot = 0;
                    for (int d = 0; d < dh; d++)
                        dot += linear_at(x, l.w[0], D, i, h * dh + d) * linear_at(x, l.w[1], D, j, h * dh + d);
                    s[j] = dot / sqrt((double)dh);
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j < valid; j++) sum += exp(s[j] - m);
                for (int j = 0; j < n; j++) ref[(size_t)i * n + j] = j < valid ? exp(s[j] - m) / sum : 0.0;
            }
            double e = lf_test_rel_err(p, ref, (size_t)n * n);
            cr_expect_leq(e, TOL, "head %d causal %d proj %d: relative error %.3g", h, causal, (int)proj, e);
        }
        cr_expect_eq(lf_attention_probabilities(l.layer, x, p, n, heads), LF_ERR_ARGUMENT);
        free(x), free(p), free(ref), free(s);
        free_layer(&l);
    }
}

/* o Wo^T is the layer's output: the heads' outputs are what W_O is applied to. */
Test(measure, head_outputs_are_what_w_o_projects)
{
    uint64_t rng = lf_test_seed();
    const int D = 24, heads = 3, n = 29, batch = 3;
    const int32_t lens[] = {29, 11, 0};
    for (int mode = LF_MODE_LINFORMER; mode <= LF_MODE_FLASH; mode++) {
        layer_host l = make_layer(D, heads, n, (lf_mode)mode, 0, &rng);
        const size_t count = (size_t)batch * n * D;
        float *x = malloc(count * sizeof *x), *o = malloc(count * sizeof *o), *y = malloc(count * sizeof *y);
        double *ref = malloc(count * sizeof *ref);
        lf_test_fill(x, count, &rng, -1, 1);
        lf_test_poison(o, count);
        cr_assert_eq(lf_attention_head_outputs(l.layer, x, o, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_forward(l.layer, x, y, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
        for (size_t r = 0; r < (size_t)batch * n; r++)
            for (int c = 0; c < D; c++) ref[r * D + c] = linear_at(o, l.w[3], D, (int)r, c);
        for (int b = 0; b < batch; b++)
            for (int i = lens[b]; i < n; i++)
                for (int c = 0; c < D; c++) cr_assert_eq(o[((size_t)b * n + i) * D + c], 0.0f, "padded row %d", i);
        double e = lf_test_rel_err(y, ref, count);
        cr_expect_leq(e, TOL, "mode %s: o Wo^T against y: %.3g", lf_mode_name((lf_mode)mode), e);
        free(x), free(o), free(y), free(ref);
        free_layer(&l);
    }
}

/* Rows past a length are 0 on every path, whatever the valid rows hold: a
 * NaN in a valid row reaches no padded row (0 x NaN in a product over the
 * padded query rows would). */
Test(measure, padded_head_outputs_are_zero_whatever_the_valid_rows_hold)
{
    uint64_t rng = lf_test_seed();
    const int D = 24, heads = 3, n = 29, batch = 2;
    const int32_t lens[] = {29, 11};
    const struct {
        lf_mode mode;
        lf_path path;
    } runs[] = {{LF_MODE_LINFORMER, LF_PATH_FUSED}, {LF_MODE_LINFORMER, LF_PATH_GEMM}, {LF_MODE_DENSE, LF_PATH_AUTO},
                {LF_MODE_FLASH, LF_PATH_AUTO}};
    const size_t count = (size_t)batch * n * D;
    float *x = malloc(count * sizeof *x), *o = malloc(count * sizeof *o);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        lf_attention_config c = layer_config(D, heads, n, runs[r].mode, 0);
        c.path = runs[r].path;
        layer_host l = make_layer_from(&c, &rng);
        lf_test_fill(x, count, &rng, -1, 1);
        x[((size_t)n + 3) * D + 5] = NAN; /* sequence 1, a valid row */
        lf_test_poison(o, count);
        cr_assert_eq(lf_attention_head_outputs(l.layer, x, o, batch, n, lens), LF_OK, "%s",
                     lf_context_last_error(ctx));
        int bad = 0;
        for (int i = lens[1]; i < n; i++)
            for (int col = 0; col < D; col++) bad += o[((size_t)n + i) * D + col] != 0.0f;
        cr_expect_eq(bad, 0, "mode %s path %d: %d values of the padded rows are not 0",
                     lf_mode_name(runs[r].mode), (int)runs[r].path, bad);
        free_layer(&l);
    }
    free(x), free(o);
}
