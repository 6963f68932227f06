/*
 * test_numerics.c - large scores, inf/NaN inputs, empty sequences, and
 * run-to-run reproducibility, in every mode.
 *
 * What linformer.h promises (see lf_attention_forward) and is tested here:
 *   - scores q.k up to +-1e4 give finite outputs that match the reference
 *     (the softmax subtracts the row max);
 *   - inf/NaN inputs are not refused: they propagate as IEEE arithmetic does,
 *     within their own sequence only. Other sequences of the batch give the
 *     same bits as without them, rows past a length stay exactly 0, values in
 *     rows past a length are never read, and a NaN in a valid row makes every
 *     valid row of its sequence NaN (every query attends to every key);
 *   - a sequence of length 0 gives exactly zeros;
 *   - the same input on the same device gives the same bits on every run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "layer_case.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(numerics, .init = setup, .fini = teardown, .timeout = 900);

enum { D = 16, NMAX = 48, K = 8 };

/* A one-head layer without biases whose weights the test chooses:
 * wq = wk = c I (so scores are c^2 scale x_i . (E x)_j), the rest random. */
typedef struct {
    lf_attention_config cfg; /* resolved */
    lf_attention *layer;
    float wq[D * D], wk[D * D], wv[D * D], wo[D * D];
    float e[K * NMAX], f[K * NMAX];
} crafted;

static void crafted_make(crafted *t, lf_mode mode, lf_path path, float c, uint64_t *rng)
{
    memset(t, 0, sizeof *t);
    lf_attention_config_init(&t->cfg, D, 1, NMAX, K);
    t->cfg.mode = mode;
    t->cfg.path = path;
    t->cfg.bias_q = t->cfg.bias_k = t->cfg.bias_v = t->cfg.bias_out = 0;
    cr_assert_eq(lf_attention_create(ctx, &t->cfg, NULL, &t->layer), LF_OK, "%s", lf_context_last_error(ctx));
    lf_ref_resolve(&t->cfg);
    for (int i = 0; i < D; i++) t->wq[i * D + i] = t->wk[i * D + i] = c;
    lf_test_fill(t->wv, D * D, rng, -1, 1);
    lf_test_fill(t->wo, D * D, rng, -0.5f, 0.5f);
    lf_test_fill(t->e, K * NMAX, rng, -1, 1);
    lf_test_fill(t->f, K * NMAX, rng, -1, 1);
    const struct { const char *name; const float *w; size_t n; } w[] = {
        {"wq", t->wq, D * D}, {"wk", t->wk, D * D}, {"wv", t->wv, D * D}, {"wo", t->wo, D * D},
        {"e", t->e, K * NMAX}, {"f", t->f, K * NMAX}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        if (mode != LF_MODE_LINFORMER && i >= 4) break;
        cr_assert_eq(lf_attention_set_weight(t->layer, w[i].name, w[i].w, w[i].n), LF_OK, "%s",
                     lf_context_last_error(ctx));
    }
}

/* The largest |score| of the crafted layer with c = 1, over valid rows and keys. */
static double max_score_unit(lf_mode mode, const float *x, int batch, int n, const int32_t *lens, const float *e)
{
    const double scale = 1.0 / sqrt((double)D);
    double best = 0;
    for (int b = 0; b < batch; b++) {
        const float *xs = x + (size_t)b * n * D;
        const int len = lens ? lens[b] : n;
        const int keys = mode == LF_MODE_LINFORMER ? K : len;
        for (int j = 0; j < keys; j++) {
            double key[D];
            for (int d = 0; d < D; d++) {
                if (mode != LF_MODE_LINFORMER) {
                    key[d] = xs[(size_t)j * D + d];
                    continue;
                }
                key[d] = 0;
                for (int t = 0; t < len; t++) key[d] += (double)e[j * NMAX + t] * xs[(size_t)t * D + d];
            }
            for (int i = 0; i < len; i++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += xs[(size_t)i * D + d] * key[d];
                if (fabs(s * scale) > best) best = fabs(s * scale);
            }
        }
    }
    return best;
}

static const struct { lf_mode mode; lf_path path; const char *name; } variants[] = {
    {LF_MODE_LINFORMER, LF_PATH_FUSED, "linformer fused"},
    {LF_MODE_LINFORMER, LF_PATH_GEMM, "linformer gemm"},
    {LF_MODE_DENSE, LF_PATH_AUTO, "dense"},
    {LF_MODE_FLASH, LF_PATH_AUTO, "flash"},
};
#define VARIANTS (sizeof variants / sizeof variants[0])

Test(numerics, scores_of_1e4_stay_finite_and_exact)
{
    const int batch = 2, n = 40;
    const int32_t lens[] = {40, 23};
    const size_t count = (size_t)batch * n * D;
    for (size_t v = 0; v < VARIANTS; v++) {
        uint64_t rng = lf_test_seed();
        float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
        double *ref = malloc(count * sizeof *ref);
        lf_test_fill(x, count, &rng, -1, 1);
        /* calibrate c so that the largest score is 1e4 (scores scale with c^2) */
        crafted probe;
        memset(&probe, 0, sizeof probe);
        uint64_t rng_copy = rng;
        crafted_make(&probe, variants[v].mode, variants[v].path, 1.0f, &rng_copy);
        double s1 = max_score_unit(variants[v].mode, x, batch, n, lens, probe.e);
        lf_attention_free(probe.layer);
        cr_assert_gt(s1, 0);
        const float c = (float)sqrt(1e4 / s1);
        crafted t;
        rng_copy = rng;
        crafted_make(&t, variants[v].mode, variants[v].path, c, &rng_copy);
        cr_assert_eq(memcmp(t.e, probe.e, sizeof t.e), 0);
        lf_test_poison(y, count);
        cr_assert_eq(lf_attention_forward(t.layer, x, y, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
        for (size_t i = 0; i < count; i++)
            cr_assert(isfinite(y[i]) && y[i] != LF_POISON, "%s: y[%zu] = %g with scores up to %.3g",
                      variants[v].name, i, y[i], s1 * c * c);
        lf_ref_weights w = {t.wq, t.wk, t.wv, t.wo, NULL, NULL, NULL, NULL,
                            variants[v].mode == LF_MODE_LINFORMER ? t.e : NULL,
                            variants[v].mode == LF_MODE_LINFORMER ? t.f : NULL};
        lf_ref_attention(&t.cfg, &w, NULL, x, batch, n, lens, ref);
        /* scores of 1e4 carry fp32 rounding of ~1e-3 into the exponent */
        double err = lf_test_rel_err(y, ref, count);
        cr_expect_leq(err, 2e-2, "%s: relative error %.3g with scores up to %.3g", variants[v].name, err, s1 * c * c);
        lf_attention_free(t.layer);
        free(x), free(y), free(ref);
    }
}

/* A layer with random weights for the tests below. */
static lf_attention *random_layer(lf_mode mode, lf_path path)
{
    lf_attention_config c;
    lf_attention_config_init(&c, 32, 2, NMAX, K);
    c.mode = mode;
    c.path = path;
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, lf_test_seed()), LF_OK, "%s", lf_context_last_error(ctx));
    return layer;
}

static void forward(lf_attention *layer, const float *x, float *y, int batch, int n, const int32_t *lens)
{
    lf_test_poison(y, (size_t)batch * n * 32);
    lf_status st = lf_attention_forward(layer, x, y, batch, n, lens);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
}

Test(numerics, inf_and_nan_stay_in_their_sequence)
{
    const int batch = 3, n = 37, Dm = 32;
    const int32_t lens[] = {37, 30, 19};
    const size_t seq = (size_t)n * Dm, count = batch * seq;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t v = 0; v < VARIANTS; v++) {
        lf_attention *layer = random_layer(variants[v].mode, variants[v].path);
        uint64_t rng = lf_test_seed();
        float *x = malloc(count * sizeof *x), *clean = malloc(count * sizeof *clean), *y = malloc(count * sizeof *y);
        lf_test_fill(x, count, &rng, -1, 1);
        forward(layer, x, clean, batch, n, lens);
        for (size_t bi = 0; bi < sizeof bad / sizeof bad[0]; bi++) {
            /* in a valid row of sequence 1 */
            const int row = (int)(lf__rand_next(&rng) % lens[1]), col = (int)(lf__rand_next(&rng) % Dm);
            float *p = &x[seq + (size_t)row * Dm + col];
            const float keep = *p;
            *p = bad[bi];
            forward(layer, x, y, batch, n, lens);
            *p = keep;
            cr_expect_eq(memcmp(y, clean, seq * sizeof *y), 0, "%s, %g in sequence 1: sequence 0 changed",
                         variants[v].name, bad[bi]);
            cr_expect_eq(memcmp(y + 2 * seq, clean + 2 * seq, seq * sizeof *y), 0,
                         "%s, %g in sequence 1: sequence 2 changed", variants[v].name, bad[bi]);
            for (size_t i = (size_t)lens[1] * Dm; i < seq; i++)
                cr_assert_eq(y[seq + i], 0.0f, "%s, %g: padded y[1][%zu] = %g", variants[v].name, bad[bi], i / Dm,
                             y[seq + i]);
            if (isnan(bad[bi]))
                for (int r = 0; r < lens[1]; r++) {
                    bool has_nan = false;
                    for (int d = 0; d < Dm; d++) has_nan |= isnan(y[seq + (size_t)r * Dm + d]);
                    cr_expect(has_nan, "%s: NaN in row %d of sequence 1, but row %d of its output has none",
                              variants[v].name, row, r);
                }

            /* in a row past the length: never read, so nothing changes */
            const int pad = lens[2] + (int)(lf__rand_next(&rng) % (n - lens[2]));
            p = &x[2 * seq + (size_t)pad * Dm + col];
            const float keep_pad = *p;
            *p = bad[bi];
            forward(layer, x, y, batch, n, lens);
            *p = keep_pad;
            cr_expect_eq(memcmp(y, clean, count * sizeof *y), 0, "%s: %g in padded row %d of sequence 2 changed the output",
                         variants[v].name, bad[bi], pad);
        }
        free(x), free(clean), free(y);
        lf_attention_free(layer);
    }
}

Test(numerics, empty_sequences_give_zeros)
{
    const int batch = 4, n = 29, Dm = 32;
    const int32_t mixed[] = {0, 29, 0, 11}, none[] = {0, 0, 0, 0};
    const size_t seq = (size_t)n * Dm, count = batch * seq;
    for (size_t v = 0; v < VARIANTS; v++) {
        lf_attention *layer = random_layer(variants[v].mode, variants[v].path);
        uint64_t rng = lf_test_seed();
        float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
        lf_test_fill(x, count, &rng, -1, 1);
        forward(layer, x, y, batch, n, mixed);
        for (int b = 0; b < batch; b++)
            for (size_t i = 0; i < seq; i++) {
                if (mixed[b] == 0 || i >= (size_t)mixed[b] * Dm)
                    cr_assert_eq(y[b * seq + i], 0.0f, "%s: y[%d][%zu] = %g, length %d", variants[v].name, b, i / Dm,
                                 y[b * seq + i], mixed[b]);
                else
                    cr_assert(isfinite(y[b * seq + i]) && y[b * seq + i] != LF_POISON, "%s: y[%d] not written",
                              variants[v].name, b);
            }
        forward(layer, x, y, batch, n, none);
        for (size_t i = 0; i < count; i++)
            cr_assert_eq(y[i], 0.0f, "%s, every length 0: y[%zu] = %g", variants[v].name, i, y[i]);
        free(x), free(y);
        lf_attention_free(layer);
    }
}

Test(numerics, same_input_same_bits)
{
    const int batch = 3, n = 41, Dm = 32, runs = 5;
    const int32_t lens[] = {41, 17, 33};
    const size_t count = (size_t)batch * n * Dm;
    for (size_t v = 0; v < VARIANTS; v++) {
        lf_attention *layer = random_layer(variants[v].mode, variants[v].path);
        uint64_t rng = lf_test_seed();
        float *x = malloc(count * sizeof *x), *first = malloc(count * sizeof *first), *y = malloc(count * sizeof *y);
        float *big = malloc(4 * count * sizeof *big), *big_y = malloc(4 * count * sizeof *big_y);
        lf_test_fill(x, count, &rng, -1, 1);
        lf_test_fill(big, 4 * count, &rng, -1, 1);
        forward(layer, x, first, batch, n, lens);
        for (int r = 1; r < runs; r++) {
            /* a larger forward in between regrows the workspace */
            if (r == 2) forward(layer, big, big_y, 4 * batch, n, NULL);
            forward(layer, x, y, batch, n, lens);
            size_t i = 0;
            while (i < count && memcmp(&y[i], &first[i], sizeof *y) == 0) i++;
            cr_expect_eq(i, count, "%s: run %d differs from run 0 at y[%zu]: %.9g vs %.9g", variants[v].name, r, i,
                         i < count ? y[i] : 0.0, i < count ? first[i] : 0.0);
        }
        free(x), free(first), free(y), free(big), free(big_y);
        lf_attention_free(layer);
    }
}
