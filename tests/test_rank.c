/* test_rank.c - `linformer rank`: spectra of P against a double-precision
 * reference, a P of known rank, the CSV read back, a sequence over the budget,
 * every layer of a whole model from its own input. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "model_case.h"
#include "rank.h"
#include "rank_files.h"
#include "reference.h"
#include "st_write.h"

enum { D = RANK_TEST_D, H = RANK_TEST_HEADS, DH = D / H };

static char dir[64];
static void setup(void) { lf_test_make_dir(dir, "rank"); }
static void teardown(void) { lf_test_remove_dir(dir); }
TestSuite(rank, .init = setup, .fini = teardown, .timeout = 600);

/* ---- The reference: P in double from the weights, and a Jacobi SVD ---- */

/* P [n, n] of head h for x [n, d]: softmax((x Wq^T + bq)(x Wk^T + bk)^T / sqrt(dh)); biases may be NULL. */
static void reference_p(const float *wq, const float *bq, const float *wk, const float *bk, const double *x, int n,
                        int d, int dh, int h, double *p)
{
    double *q = malloc((size_t)n * dh * sizeof *q), *k = malloc((size_t)n * dh * sizeof *k);
    double *s = malloc((size_t)n * sizeof *s);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < dh; c++) {
            const int row = h * dh + c;
            q[i * dh + c] = bq ? bq[row] : 0, k[i * dh + c] = bk ? bk[row] : 0;
            for (int j = 0; j < d; j++) {
                q[i * dh + c] += (double)wq[row * d + j] * x[i * d + j];
                k[i * dh + c] += (double)wk[row * d + j] * x[i * d + j];
            }
        }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            s[j] = 0;
            for (int c = 0; c < dh; c++) s[j] += q[i * dh + c] * k[j * dh + c];
            s[j] /= sqrt((double)dh);
        }
        lf_ref_softmax(s, n, n, p + (size_t)i * n);
    }
    free(q), free(k), free(s);
}

static int descending(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* One-sided Jacobi (Hestenes): rotate column pairs of a [n, n] until they are
 * orthogonal; the column norms are then the singular values. */
static void jacobi_singular_values(double *a, int n, double *sigma)
{
    for (int sweep = 0; sweep < 100; sweep++) {
        double worst = 0;
        for (int p = 0; p < n - 1; p++)
            for (int q = p + 1; q < n; q++) {
                double alpha = 0, beta = 0, gamma = 0;
                for (int i = 0; i < n; i++) {
                    alpha += a[i * n + p] * a[i * n + p];
                    beta += a[i * n + q] * a[i * n + q];
                    gamma += a[i * n + p] * a[i * n + q];
                }
                if (fabs(gamma) <= 1e-15 * sqrt(alpha * beta)) continue;
                worst = fmax(worst, fabs(gamma) / sqrt(alpha * beta));
                const double zeta = (beta - alpha) / (2 * gamma);
                const double t = copysign(1.0, zeta) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                const double c = 1 / sqrt(1 + t * t), s = c * t;
                for (int i = 0; i < n; i++) {
                    const double ap = a[i * n + p], aq = a[i * n + q];
                    a[i * n + p] = c * ap - s * aq;
                    a[i * n + q] = s * ap + c * aq;
                }
            }
        if (worst < 1e-13) break;
    }
    for (int j = 0; j < n; j++) {
        sigma[j] = 0;
        for (int i = 0; i < n; i++) sigma[j] += a[i * n + j] * a[i * n + j];
        sigma[j] = sqrt(sigma[j]);
    }
    qsort(sigma, n, sizeof *sigma, descending);
}

/* ---- A dense layer with known q/k weights ---- */

static lf_attention *dense_layer(lf_context *ctx, int max_n, const float *wq, const float *wk, uint64_t seed)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D, H, max_n, 4);
    c.mode = LF_MODE_DENSE;
    c.bias_q = c.bias_k = 0; /* P depends on wq and wk only */
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, seed), LF_OK);
    cr_assert_eq(lf_attention_set_weight(layer, "wq", wq, (size_t)D * D), LF_OK);
    cr_assert_eq(lf_attention_set_weight(layer, "wk", wk, (size_t)D * D), LF_OK);
    return layer;
}

/* The k-level of the reference, allowing one either way only where the
 * reference's c_r lies within `margin` of the level there (float P). */
static void expect_level(const double *c_ref, int n, double level, int got, double margin)
{
    int want = 1; /* the smallest r with c_r >= level */
    while (want < n && c_ref[want - 1] < level) want++;
    if (got == want) return;
    const bool close = fabs(c_ref[want - 1] - level) < margin || (want >= 2 && fabs(c_ref[want - 2] - level) < margin);
    cr_expect(close && abs(got - want) == 1, "level %.2f: k %d, reference %d (c there %.8f)", level, got, want,
              c_ref[want - 1]);
}

Test(rank, spectrum_and_levels_match_a_double_reference)
{
    enum { N = 24, B = 2 };
    uint64_t rng = lf_test_seed();
    static float wq[D * D], wk[D * D], x[B * N * D];
    lf_test_fill(wq, D * D, &rng, -1, 1);
    lf_test_fill(wk, D * D, &rng, -1, 1);
    lf_test_fill(x, B * N * D, &rng, -1, 1);
    const int32_t lengths[B] = {N, 13};
    lf_context *ctx = lf_test_context();
    rank_layer layer = {.ctx = ctx, .exact = dense_layer(ctx, N, wq, wk, rng)};
    rank_results r = {0};
    char err[512];
    cr_assert_eq(rank_measure_layer(&layer, 0, x, B, N, lengths, &r, stderr, err, sizeof err), LF_OK, "%s", err);
    cr_assert_eq(r.count, (size_t)B * H);
    static double p[N * N], sigma[N], c[N], xd[N * D];
    for (size_t i = 0; i < r.count; i++) {
        const rank_row *row = &r.rows[i];
        const int n = lengths[row->seq];
        cr_assert_eq(row->n, n);
        for (int i = 0; i < n * D; i++) xd[i] = x[(size_t)row->seq * N * D + i];
        reference_p(wq, NULL, wk, NULL, xd, n, D, DH, row->head, p);
        jacobi_singular_values(p, n, sigma);
        rank_cumulative(sigma, n, c);
        for (int k = 0; k < n; k++)
            cr_expect(fabs(row->cumulative[k] - c[k]) < 1e-5, "seq %d head %d c_%d: %.8f, reference %.8f", row->seq,
                      row->head, k + 1, row->cumulative[k], c[k]);
        for (int l = 0; l < RANK_LEVELS; l++) expect_level(c, n, rank_levels[l], row->k_at[l], 1e-5);
    }
    rank_results_free(&r);
    rank_free_layer(&layer);
    lf_context_free(ctx);
}

/* LAPACK on the same float matrix as the Jacobi reference: to rounding. */
Test(rank, singular_values_match_jacobi)
{
    enum { N = 20 };
    uint64_t rng = lf_test_seed();
    static float pf[N * N];
    static double a[N * N], want[N], got[N];
    lf_test_fill(pf, N * N, &rng, -1, 1);
    for (int i = 0; i < N * N; i++) a[i] = pf[i];
    jacobi_singular_values(a, N, want);
    cr_assert_eq(rank_singular_values(pf, N, got), 0);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(got[i] - want[i]) < 1e-12 * want[0], "sigma_%d: %.15g, reference %.15g", i + 1, got[i], want[i]);
}

/* Input rows repeating with period R repeat the keys: P has at most R distinct
 * columns, so rank <= R and c_R is 1 up to float rounding. */
Test(rank, rows_repeating_with_period_r_give_rank_at_most_r)
{
    enum { N = 30, R = 3 };
    uint64_t rng = lf_test_seed();
    static float wq[D * D], wk[D * D], x[N * D];
    lf_test_fill(wq, D * D, &rng, -1, 1);
    lf_test_fill(wk, D * D, &rng, -1, 1);
    lf_test_fill(x, R * D, &rng, -1, 1);
    for (int i = R; i < N; i++) memcpy(x + i * D, x + (i % R) * D, D * sizeof *x);
    lf_context *ctx = lf_test_context();
    rank_layer layer = {.ctx = ctx, .exact = dense_layer(ctx, N, wq, wk, rng)};
    rank_results r = {0};
    char err[512];
    cr_assert_eq(rank_measure_layer(&layer, 0, x, 1, N, NULL, &r, stderr, err, sizeof err), LF_OK, "%s", err);
    for (size_t i = 0; i < r.count; i++) {
        const rank_row *row = &r.rows[i];
        cr_expect_geq(row->cumulative[R - 1], 1 - 1e-5, "head %d: c_%d = %.8f", row->head, R, row->cumulative[R - 1]);
        cr_expect_leq(row->k_at[2], R, "head %d: k99 %d above the rank %d", row->head, row->k_at[2], R);
        cr_expect_lt(row->cumulative[0], 0.999, "head %d: P is not rank 1 (c_1 = %.8f)", row->head, row->cumulative[0]);
    }
    rank_results_free(&r);
    rank_free_layer(&layer);
    lf_context_free(ctx);
}

/* ---- The program on files ---- */

static void path(char *out, const char *name) { sprintf(out, "%s/%s", dir, name); }

/* A LinformerSelfAttention state dict of `seq` positions whose proj_k and
 * proj_v [seq, k] are the first k columns of the identity: with k = seq,
 * Linformer at the model's own k is exact on a sequence of `seq` rows. */
static void write_model(const char *file, int seq, int k, uint64_t *rng)
{
    char p[128];
    path(p, file);
    rank_write_layer(p, seq, k, rng);
}

static void write_input(const char *file, const float *x, int batch, int n, const int32_t *lengths)
{
    char p[128];
    path(p, file);
    rank_write_input(p, x, batch, n, lengths);
}

/* The same measurement in this process, to compare the program's CSV with. */
static void measure_here(const char *model, const float *x, int batch, int n, const int32_t *lengths,
                         rank_results *r)
{
    char p[128], err[512];
    path(p, model);
    lf_context *ctx = lf_test_context();
    rank_layer layer;
    const rank_source src = {p, NULL, 0};
    cr_assert_eq(rank_load_exact(ctx, &src, 0, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(rank_load_sweep(&layer, &src, 3, r, stderr), LF_OK);
    cr_assert_eq(rank_measure_layer(&layer, 0, x, batch, n, lengths, r, stderr, err, sizeof err), LF_OK, "%s", err);
    rank_free_layer(&layer);
    lf_context_free(ctx);
}

/* One CSV row checked against the in-process row: the integers exactly, the
 * errors to the printed precision. */
static void expect_csv_row(const char *line, const rank_row *row, int ks)
{
    int f[8], used = 0;
    cr_assert_eq(sscanf(line, "%d,%d,%d,%d,%d,%d,%d,%d%n", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7],
                        &used), 8, "row \"%s\"", line);
    const int want[8] = {row->seq, row->layer, row->head, row->n, row->k_at[0], row->k_at[1], row->k_at[2], row->own_k};
    for (int i = 0; i < 8; i++) cr_expect_eq(f[i], want[i], "row \"%s\", field %d", line, i);
    const char *s = line + used;
    for (int j = 0; j < ks; j++) {
        char *end;
        cr_assert_eq(*s, ',', "row \"%s\": %d error columns, expected %d", line, j, ks);
        const double e = strtod(s + 1, &end);
        cr_expect(fabs(e - row->err[j]) <= 1e-5 * row->err[j] + 1e-12, "row \"%s\": err %g, here %g", line, e,
                  row->err[j]);
        s = end;
    }
    cr_expect(*s == '\n' || *s == '\0', "row \"%s\" has more columns", line);
}

Test(rank, csv_columns_and_rows_read_back)
{
    enum { N = 16, B = 2 };
    uint64_t rng = lf_test_seed();
    write_model("model.safetensors", N, N, &rng);
    static float x[B * N * D];
    lf_test_fill(x, B * N * D, &rng, -1, 1);
    const int32_t lengths[B] = {N, 9};
    write_input("input.safetensors", x, B, N, lengths);
    char cmd[1024], log[8192], csv[128];
    path(csv, "rank.csv");
    snprintf(cmd, sizeof cmd, "%s rank --model %s/model.safetensors --input %s/input.safetensors --k 16,4 --seed 3 --csv %s",
             LF_TOOL_PATH, dir, dir, csv);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect_not_null(strstr(log, "k99 (of n)"), "no table on stdout: %s", log);

    rank_results r = {.k = {4, 16}, .ks = 2};
    measure_here("model.safetensors", x, B, N, lengths, &r);
    FILE *f = fopen(csv, "r");
    cr_assert_not_null(f);
    char line[1024];
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_expect_str_eq(line, "seq,layer,head,n,k90,k95,k99,own_k,err_k4,err_k16\n");
    size_t rows = 0;
    for (; fgets(line, sizeof line, f); rows++)
        if (rows < r.count) expect_csv_row(line, &r.rows[rows], r.ks);
    fclose(f);
    cr_expect_eq(rows, (size_t)B * H, "%zu rows, expected one per sequence and head", rows);
    cr_assert_eq(r.count, (size_t)B * H);
    cr_expect_eq(r.rows[0].own_k, 16, "the model's own k is marked");
    for (int h = 0; h < H; h++) {
        /* The identity E, F over the whole sequence: Linformer is the exact attention. */
        cr_expect_lt(r.rows[h].err[1], 1e-4, "head %d: error %g at the model's own k", h, r.rows[h].err[1]);
        cr_expect_gt(r.rows[h].err[0], 1e-3, "head %d: error %g at k = 4 < n", h, r.rows[h].err[0]);
    }
    rank_results_free(&r);
}

Test(rank, bad_options_are_usage_errors)
{
    uint64_t rng = lf_test_seed();
    write_model("model.safetensors", 8, 8, &rng);
    static float x[8 * D];
    const int32_t len[1] = {8};
    write_input("input.safetensors", x, 1, 8, len);
    const char *bad[] = {"--input %s/input.safetensors", "--model %s/model.safetensors",
                         "--model %s/model.safetensors --input %s/input.safetensors --k 0",
                         "--model %s/model.safetensors --input %s/input.safetensors --k 4,9",
                         "--model %s/model.safetensors --input %s/input.safetensors --k 4,x",
                         /* against the file's 2 heads, as for a model */
                         "--model %s/model.safetensors --input %s/input.safetensors --heads 4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512], cmd[1024], log[4096];
        snprintf(args, sizeof args, bad[i], dir, dir);
        snprintf(cmd, sizeof cmd, "%s rank %s", LF_TOOL_PATH, args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2, "%s: %s", args, log);
        cr_expect_not_null(strstr(log, "linformer rank: "), "%s: %s", args, log);
    }
}

/* PoCL with 1 GiB of device memory allows 128 MiB for one head's P: a sequence
 * of 6000 rows (137 MiB) is skipped with a message, the short one measured. */
Test(rank, a_sequence_over_the_device_budget_is_skipped)
{
    enum { LONG = 6000, SHORT = 12, B = 2 };
    lf_context *c = lf_test_context();
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(c, &info), LF_OK);
    lf_context_free(c);
    if (!strstr(info.platform_name, "Portable Computing Language"))
        cr_skip_test("POCL_MEMORY_LIMIT is PoCL's; this device is %s", info.platform_name);
    uint64_t rng = lf_test_seed();
    write_model("model.safetensors", LONG, 2, &rng);
    float *x = malloc((size_t)B * LONG * D * sizeof *x);
    lf_test_fill(x, (size_t)B * LONG * D, &rng, -1, 1);
    const int32_t lengths[B] = {LONG, SHORT};
    write_input("input.safetensors", x, B, LONG, lengths);
    free(x);
    char cmd[1024], log[8192], csv[128];
    path(csv, "rank.csv");
    snprintf(cmd, sizeof cmd, "POCL_MEMORY_LIMIT=1 %s rank --model %s/model.safetensors --input %s/input.safetensors "
             "--k 2 --csv %s", LF_TOOL_PATH, dir, dir, csv);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect_not_null(strstr(log, "sequence 0 (n = 6000) skipped: "), "%s", log);
    cr_expect_not_null(strstr(log, "1 sequence(s) skipped"), "%s", log);
    FILE *f = fopen(csv, "r");
    cr_assert_not_null(f);
    char line[256];
    int rows = 0;
    cr_assert_not_null(fgets(line, sizeof line, f)); /* the header */
    for (; fgets(line, sizeof line, f); rows++)
        cr_expect_eq(strncmp(line, "1,0,", 4), 0, "a row of the skipped sequence: %s", line);
    fclose(f);
    cr_expect_eq(rows, H);
}

/* ---- Every layer of a model ---- */

enum { ML = 3, MD = 12, MH = 3, MN = 14, MB = 2, MV = 11, MK = 5 };

/* fairseq's token encoder (post-norm, one layerwise projection, embeddings)
 * in `model`, and tokens with lengths in `input`. */
static void write_token_model(const char *model, const char *input, lf_ref_model *ref, lf_ref_layer *layers,
                              lf_builder *b, int64_t *tokens, const int32_t *lengths)
{
    const lf_model_shape shape = {.layers = ML, .D = MD, .heads = MH, .n = MN, .ff = 10, .vocab = MV, .k = {MK},
                                  .embeddings = true};
    *b = (lf_builder){.rng = lf_test_seed()};
    lf_fairseq_model(b, "", &shape, ref, layers);
    const char *meta[] = {"heads", "3"};
    lf_builder_write(b, model, meta, 1);
    float draw[MB * MN];
    int32_t ids[MB * MN];
    lf_test_fill(draw, MB * MN, &b->rng, 0, MV);
    for (int i = 0; i < MB * MN; i++) tokens[i] = ids[i] = (int32_t)draw[i] % MV;
    const int64_t st[2] = {MB, MN}, sl[1] = {MB};
    const st_tensor t[2] = {{"tokens", ST_I32, 2, st, ids}, {"lengths", ST_I32, 1, sl, lengths}};
    char msg[256];
    cr_assert_eq(st_save(input, t, 2, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
}

/* One CSV row of the model: its k-levels against a double SVD of P from the
 * reference forward up to its layer; its errors finite. */
static void expect_model_row(const char *line, const lf_ref_layer *layers, double (*inputs)[MB * MN * MD],
                             const int32_t *lengths, bool seen[MB][ML][MH])
{
    int seq, layer, head, n, k[RANK_LEVELS], used = 0;
    cr_assert_eq(sscanf(line, "%d,%d,%d,%d,%d,%d,%d%n", &seq, &layer, &head, &n, &k[0], &k[1], &k[2], &used), 7,
                 "row \"%s\"", line);
    cr_assert(seq >= 0 && seq < MB && layer >= 0 && layer < ML && head >= 0 && head < MH, "row \"%s\"", line);
    cr_expect_eq(n, lengths[seq], "row \"%s\"", line);
    seen[seq][layer][head] = true;
    static double p[MN * MN], sigma[MN], c[MN];
    const lf_ref_weights *w = &layers[layer].w;
    reference_p(w->wq, w->bq, w->wk, w->bk, inputs[layer] + (size_t)seq * MN * MD, n, MD, MD / MH, head, p);
    jacobi_singular_values(p, n, sigma);
    rank_cumulative(sigma, n, c);
    for (int l = 0; l < RANK_LEVELS; l++) expect_level(c, n, rank_levels[l], k[l], 1e-4);
    double e[2];
    cr_assert_eq(sscanf(line + used, ",%lf,%lf", &e[0], &e[1]), 2, "row \"%s\"", line);
    cr_expect(isfinite(e[0]) && e[0] > 0 && isfinite(e[1]) && e[1] > 0, "row \"%s\"", line);
}

/* gnuplot drew an SVG figure, and left its data and script beside it. */
static void expect_figure(const char *svg)
{
    char head[64] = "", side[160];
    FILE *f = fopen(svg, "r");
    cr_assert_not_null(f, "no figure %s", svg);
    cr_expect_gt(fread(head, 1, sizeof head - 1, f), 0u);
    fclose(f);
    cr_expect(strncmp(head, "<?xml", 5) == 0 && strstr(head, "<svg"), "%s is not SVG: %.40s", svg, head);
    for (int i = 0; i < 2; i++) {
        snprintf(side, sizeof side, "%s%s", svg, i ? ".gp" : ".dat");
        cr_expect_eq(access(side, R_OK), 0, "no %s beside the figure", side);
    }
}

Test(rank, every_layer_of_a_model_is_measured_from_its_own_input)
{
    char model[128], input[128], csv[128], cmd[1024], log[8192], line[1024];
    path(model, "model.safetensors"), path(input, "input.safetensors"), path(csv, "rank.csv");
    lf_ref_model ref;
    lf_ref_layer layers[ML];
    lf_builder b;
    static int64_t tokens[MB * MN];
    const int32_t lengths[MB] = {MN, 9};
    write_token_model(model, input, &ref, layers, &b, tokens, lengths);
    char svg[128];
    path(svg, "rank.svg");
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --k %d,3 --csv %s --plot %s", LF_TOOL_PATH, model, input, MK,
             csv, svg);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), lf_test_plot_status(), "%s", log);
    if (lf_test_plot_status() == 0) expect_figure(svg);
    else lf_test_expect_undrawn(svg, log);
    static double inputs[ML][MB * MN * MD];
    for (int l = 0; l < ML; l++) lf_ref_model_layer_input(&ref, l, NULL, tokens, MB, MN, lengths, inputs[l]);
    FILE *f = fopen(csv, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_expect_str_eq(line, "seq,layer,head,n,k90,k95,k99,own_k,err_k3,err_k5\n");
    bool seen[MB][ML][MH] = {{{false}}};
    int rows = 0;
    for (; fgets(line, sizeof line, f); rows++) expect_model_row(line, layers, inputs, lengths, seen);
    fclose(f);
    cr_expect_eq(rows, MB * ML * MH, "%d rows, expected one per sequence, layer and head", rows);
    for (int s = 0; s < MB; s++)
        for (int l = 0; l < ML; l++)
            for (int h = 0; h < MH; h++) cr_expect(seen[s][l][h], "no row for sequence %d, layer %d, head %d", s, l, h);

    /* the default sweep is around the layers' own k, clipped to n */
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --csv %s", LF_TOOL_PATH, model, input, csv);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    f = fopen(csv, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_expect_str_eq(line, "seq,layer,head,n,k90,k95,k99,own_k,err_k1,err_k2,err_k5,err_k10,err_k14\n");
    fclose(f);
    /* a head count against the file's is a usage error naming both */
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --heads 2", LF_TOOL_PATH, model, input);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2, "%s", log);
    cr_expect_not_null(strstr(log, "heads 2 was given but"), "%s", log);
    lf_builder_free(&b);
}
