/*
 * test_kernels.c - each OpenCL kernel on its own, through its typed launcher,
 * against a plain double-precision twin written here, over a grid of shapes
 * that are not multiples of any tile. One case type per kernel: it draws fresh
 * random inputs, poisons the output, runs, and compares every element written.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "launch.h"
#include "plan.h"
#include "reference.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(kernels, .init = setup, .fini = teardown, .timeout = 600);

/* ---- device buffers from host arrays ---- */

/* Random lengths in [0, n] with n itself always among them. */
static void random_lengths(int32_t *lens, int batch, int n, uint64_t *rng)
{
    for (int b = 0; b < batch; b++) lens[b] = b == 0 ? n : (int32_t)(lf__rand_next(rng) % (uint64_t)(n + 1));
}

/* ---- every kernel file compiles alone, with its own defaults ---- */

Test(kernels, each_file_compiles_with_its_defaults)
{
    /* file, kernel, the one option a variant needs (attention.cl's CPU variant: QB) */
    static const char *const files[][3] = {{"attention.cl", "attention_tiled", ""},
                                           {"attention.cl", "attention_tiled", "-DQB=16"},
                                           {"softmax.cl", "softmax_rows", ""},
                                           {"softmax.cl", "softmax_rows_cpu", ""},
                                           {"seq_project.cl", "seq_project_window", ""},
                                           {"activation.cl", "bias_rows", ""},
                                           {"activation.cl", "bias_rows", "-DVW=16 -DRUN=4"},
                                           {"activation.cl", "copy_floats", ""},
                                           {"activation.cl", "copy_floats", "-DVW=16 -DRUN=4"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        cl_kernel k = NULL;
        cr_expect_eq(lf__kernel(ctx, files[i][0], files[i][2], files[i][1], &k), LF_OK, "%s %s: %s", files[i][0],
                     files[i][2], lf_context_last_error(ctx));
    }
}

/* ---- copy_floats, and the copy bandwidth built on it ---- */

/* Both variants, forced in turn, copy every float of counts around their
 * vector and run sizes, and nothing past them. */
Test(kernels, copy_grid)
{
    static const char *const variants[] = {"variant=cpu", "variant=gpu"};
    static const size_t counts[] = {1, 15, 16, 17, 63, 64, 65, 1000, 4099};
    uint64_t rng = lf_test_seed();
    for (size_t v = 0; v < 2; v++) {
        cr_assert_eq(setenv("LINFORMER_KERNEL_PARAMS", variants[v], 1), 0);
        const lf_kernel_params kp = lf_test_kernel_params(ctx);
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            const size_t n = counts[i];
            float *src = lf_test_random(n, &rng, -1.0f, 1.0f), *got = malloc((n + 1) * sizeof *got);
            lf_test_poison(got, n + 1);
            const float past = got[n];
            cl_mem sb = lf_test_upload(ctx, src, n * sizeof *src), db = lf_test_upload(ctx, got, (n + 1) * sizeof *got);
            const lf_copy_args a = {.src = sb, .dst = db, .count = n, .params = &kp};
            cr_assert_eq(lf__launch_copy(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
            lf_test_download(ctx, db, got, n + 1);
            cr_expect_eq(memcmp(got, src, n * sizeof *src), 0, "copy of %zu floats, variant %s", n, variants[v]);
            cr_expect_eq(memcmp(&got[n], &past, sizeof past), 0, "copy of %zu floats wrote past them", n);
            lf__release(&sb), lf__release(&db);
            free(src), free(got);
        }
    }
}

Test(kernels, copy_rate)
{
    double gbps = 0;
    cr_expect_eq(lf_copy_rate(ctx, 100003, &gbps), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect_gt(gbps, 0.0);
    cr_expect_eq(lf_copy_rate(ctx, 0, &gbps), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "floats") != NULL, "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_copy_rate(ctx, 4, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "gbps") != NULL, "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_copy_rate(NULL, 4, &gbps), LF_ERR_ARGUMENT);
}

/* ---- softmax_rows: both variants (kp's), on every device ---- */

static void softmax_case(int count, int rows, int ld, int rows_valid, int cols_valid, bool causal,
                         const lf_kernel_params *kp, uint64_t *rng)
{
    const size_t total = (size_t)count * rows * ld;
    float *s = lf_test_random(total, rng, -8.0f, 8.0f), *out = malloc(total * sizeof *out);
    double *ref = malloc(total * sizeof *ref);
    cl_mem buf = lf_test_upload(ctx, s, total * sizeof *s);
    const lf_softmax_rows_args a = {buf, ld, rows, rows_valid, cols_valid, causal, (size_t)count, kp};
    cr_assert_eq(lf__launch_softmax_rows(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_poison(out, total);
    lf_test_download(ctx, buf, out, total);
    double row[1024];
    for (size_t r = 0; r < (size_t)count * rows; r++) {
        const bool live = (int)(r % rows) < rows_valid && cols_valid > 0;
        const int valid = causal && (int)(r % rows) + 1 < cols_valid ? (int)(r % rows) + 1 : cols_valid;
        for (int c = 0; c < ld; c++) row[c] = s[r * ld + c];
        if (live) lf_ref_softmax(row, ld, valid, ref + r * ld);
        else for (int c = 0; c < ld; c++) ref[r * ld + c] = 0.0;
    }
    for (size_t i = 0; i < total; i++)
        if (ref[i] == 0.0) cr_assert_eq(out[i], 0.0f, "masked entry %zu is %g, not 0", i, out[i]);
    double e = lf_test_rel_err(out, ref, total);
    cr_expect_leq(e, TOL, "softmax count %d rows %d ld %d valid %d x %d causal %d, %s variant, group %d: %.3g", count,
                  rows, ld, rows_valid, cols_valid, causal, kp->variant == LF_VARIANT_CPU ? "CPU" : "GPU",
                  kp->softmax_group, e);
    lf__release(&buf);
    free(s), free(out), free(ref);
}

Test(kernels, softmax_rows_grid)
{
    uint64_t rng = lf_test_seed();
    static const int lds[] = {1, 7, 33, 173, 600};
    static const int groups[] = {1, 8, 256}; /* the GPU variant's; the CPU variant takes a row a work-item */
    const lf_kernel_params device = lf_test_kernel_params(ctx);
    for (int cpu = 0; cpu <= 1; cpu++)
        for (size_t i = 0; i < (lf_test_tiny() ? 3 : sizeof lds / sizeof lds[0]); i++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
                lf_kernel_params kp = device;
                kp.variant = cpu ? LF_VARIANT_CPU : LF_VARIANT_GPU;
                kp.softmax_group = groups[g];
                const int ld = lds[i], valid = 1 + (int)(lf__rand_next(&rng) % (uint64_t)ld);
                softmax_case(3, 5, ld, 4, valid, false, &kp, &rng);
                softmax_case(2, 9, ld, 7, valid, true, &kp, &rng);
                softmax_case(2, 6, ld, 6, ld, true, &kp, &rng); /* every key: no masked tail */
            }
    lf_kernel_params kp = device;
    for (int cpu = 0; cpu <= 1; cpu++) {
        kp.variant = cpu ? LF_VARIANT_CPU : LF_VARIANT_GPU;
        softmax_case(2, 3, 9, 3, 0, false, &kp, &rng); /* nothing to attend to: zeros, not NaN */
    }
}

Test(kernels, softmax_rows_without_parameters_is_refused)
{
    float x[4] = {1, 2, 3, 4};
    cl_mem buf = lf_test_upload(ctx, x, sizeof x);
    const lf_softmax_rows_args a = {buf, 4, 1, 1, 4, false, 1, NULL};
    cr_expect_eq(lf__launch_softmax_rows(ctx, &a, NULL), LF_ERR_STATE);
    cr_expect(strstr(lf_context_last_error(ctx), "softmax_rows") != NULL, "%s", lf_context_last_error(ctx));
    lf__release(&buf);
}

/* ---- bias_rows ---- */

static void bias_case(int batch, int per_seq, int cols, int ld, bool has_bias, bool mask, uint64_t *rng)
{
    const int rows = batch * per_seq;
    const size_t total = (size_t)rows * ld;
    float *y = lf_test_random(total, rng, -1.0f, 1.0f), *bias = lf_test_random(cols + 3, rng, -1.0f, 1.0f);
    float *out = malloc(total * sizeof *out);
    double *ref = malloc(total * sizeof *ref);
    int32_t lens[8];
    random_lengths(lens, batch, per_seq, rng);
    cl_mem yb = lf_test_upload(ctx, y, total * sizeof *y), bb = lf_test_upload(ctx, bias, (cols + 3) * sizeof *bias);
    cl_mem lb = lf_test_upload(ctx, lens, batch * sizeof *lens);
    const lf_kernel_params kp = lf_test_kernel_params(ctx);
    const lf_bias_rows_args a = {.y = yb, .ld = ld, .cols = cols, .rows = rows, .bias = bb, .bias_off = 3,
                                 .has_bias = has_bias, .lengths = lb, .rows_per_seq = per_seq, .mask = mask,
                                 .params = &kp};
    cr_assert_eq(lf__launch_bias_rows(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_poison(out, total);
    lf_test_download(ctx, yb, out, total);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++) {
            const bool past = mask && r % per_seq >= lens[r / per_seq];
            double v = y[(size_t)r * ld + c];
            if (c < cols) v = past ? 0.0 : v + (has_bias ? bias[3 + c] : 0.0);
            ref[(size_t)r * ld + c] = v;
        }
    cr_expect_leq(lf_test_rel_err(out, ref, total), TOL, "bias_rows batch %d rows %d cols %d ld %d bias %d mask %d",
                  batch, per_seq, cols, ld, has_bias, mask);
    lf__release(&yb), lf__release(&bb), lf__release(&lb);
    free(y), free(bias), free(out), free(ref);
}

/* Both variants: runs of 256 columns that end inside a row in a partial run
 * (300) or a partial vector (262), one float a work-item. */
Test(kernels, bias_rows_grid)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 9}, {13, 31, 31}, {29, 300, 307}, {2, 262, 267}};
    static const char *const variants[] = {"variant=cpu", "variant=gpu"};
    for (int v = 0; v < 2; v++) {
        cr_assert_eq(setenv("LINFORMER_KERNEL_PARAMS", variants[v], 1), 0);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int flags = 1; flags < 4; flags++)
                bias_case(3, shapes[i][0], shapes[i][1], shapes[i][2], flags & 1, flags & 2, &rng);
    }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* ---- seq_project_window: pooling and convolution ---- */

typedef struct {
    int batch, n, k, window, cols, head_cols, groups;
    bool max, per_head;
} window_case;

/* out[b, j, g cols + c] = reduce over i in window j below len[b] of wt[i - j w] in[b, i, g cols + c]. */
static double window_ref(const window_case *t, const float *in, const float *wt, const int32_t *lens, int b, int j,
                         int g, int c)
{
    const int start = j * t->window, stop = start + t->window < lens[b] ? start + t->window : lens[b];
    const int in_ld = t->groups * t->cols;
    const float *w = wt + g * (t->per_head ? t->cols / t->head_cols : 1) * t->window +
                     (t->per_head ? c / t->head_cols : 0) * t->window;
    double acc = t->max && start < stop ? -INFINITY : 0.0;
    for (int i = start; i < stop; i++) {
        const double x = in[((size_t)b * t->n + i) * in_ld + g * t->cols + c];
        acc = t->max ? fmax(acc, x) : acc + w[i - start] * x;
    }
    return acc;
}

static void window_run(const window_case *t, uint64_t *rng)
{
    const int in_ld = t->groups * t->cols, out_ld = t->groups * t->cols;
    const int copies = t->per_head ? t->cols / t->head_cols : 1, w_gstride = copies * t->window;
    const size_t in_count = (size_t)t->batch * t->n * in_ld, out_count = (size_t)t->batch * t->k * out_ld;
    float *in = lf_test_random(in_count, rng, -1.0f, 1.0f), *wt = lf_test_random((size_t)2 * w_gstride, rng, -1.0f, 1.0f);
    float *out = malloc(out_count * sizeof *out);
    double *ref = malloc(out_count * sizeof *ref);
    int32_t lens[8];
    random_lengths(lens, t->batch, t->n, rng);
    cl_mem ib = lf_test_upload(ctx, in, in_count * sizeof *in), wb = lf_test_upload(ctx, wt, 2 * w_gstride * sizeof *wt);
    cl_mem lb = lf_test_upload(ctx, lens, t->batch * sizeof *lens), ob = NULL;
    cr_assert_eq(lf__alloc(ctx, out_count * sizeof *out, "out", &ob), LF_OK);
    lf_test_poison(out, out_count);
    cr_assert_eq(lf__upload(ctx, ob, 0, out, out_count * sizeof *out), LF_OK);
    const lf_seq_project_window_args a = {
        .in = ib, .in_ld = in_ld, .in_gstride = t->cols, .n = t->n, .out = ob, .out_ld = out_ld, .weights = wb,
        .window = t->window, .w_gstride = w_gstride, .w_hstride = t->per_head ? t->window : 0,
        .head_cols = t->head_cols, .lengths = lb, .cols = t->cols, .k = t->k, .groups = t->groups,
        .batch = t->batch, .max = t->max};
    cr_assert_eq(lf__launch_seq_project_window(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, ob, out, out_count);
    for (int b = 0; b < t->batch; b++)
        for (int j = 0; j < t->k; j++)
            for (int g = 0; g < t->groups; g++)
                for (int c = 0; c < t->cols; c++)
                    ref[((size_t)b * t->k + j) * out_ld + g * t->cols + c] = window_ref(t, in, wt, lens, b, j, g, c);
    cr_expect_leq(lf_test_rel_err(out, ref, out_count), TOL,
                  "seq_project_window n %d k %d w %d cols %d head_cols %d groups %d max %d per_head %d", t->n, t->k,
                  t->window, t->cols, t->head_cols, t->groups, t->max, t->per_head);
    lf__release(&ib), lf__release(&wb), lf__release(&lb), lf__release(&ob);
    free(in), free(wt), free(out), free(ref);
}

Test(kernels, seq_project_window_grid)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][4] = {{1, 1, 1, 1}, {7, 3, 3, 6}, {173, 16, 11, 24}, {50, 7, 8, 15}}; /* n k w cols */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 4; v++) {
            const int cols = shapes[i][3], head_cols = cols % 3 == 0 ? cols / 3 : cols;
            const window_case t = {3, shapes[i][0], shapes[i][1], shapes[i][2], cols, head_cols, 1 + v % 2,
                                   v >= 2, v == 1};
            window_run(&t, &rng);
        }
}

/* ---- attention_tiled ---- */

typedef struct {
    int batch, n, keys, heads, kv_heads, dh; /* keys 0 = the sequence's own (flash) */
    lf_attention_tiles tiles; /* query_block 1: the local-memory kernel; more: the CPU variant */
    bool causal;              /* Linformer (keys > 0): windows of ceil(n / keys) positions */
} tiled_case;

typedef struct {
    const float *q, *k, *v, *sk, *sv; /* sk, sv: the sequence's own keys and values, causal Linformer */
    const int32_t *lens;
} tiled_inputs;

/* The rows query i of sequence b, head h attends to, by the rules of
 * attention.cl's header; returns their count. */
static int tiled_rows(const tiled_case *t, const tiled_inputs *in, int b, int h, int i, const float **kr,
                      const float **vr)
{
    const int kd = t->kv_heads * t->dh, key_rows = t->keys ? t->keys : t->n, len = in->lens[b];
    const size_t off = (size_t)(h / (t->heads / t->kv_heads)) * t->dh;
    if (i >= len) return 0;
    const int w = t->keys ? (t->n + t->keys - 1) / t->keys : 1;
    const int slots = !t->keys ? (t->causal ? i + 1 : len) : t->causal ? i / w : t->keys;
    int count = 0;
    for (int j = 0; j < slots; j++, count++) {
        kr[count] = in->k + ((size_t)b * key_rows + j) * kd + off;
        vr[count] = in->v + ((size_t)b * key_rows + j) * kd + off;
    }
    if (t->keys && t->causal)
        for (int j = i / w * w; j <= i; j++, count++) {
            kr[count] = in->sk + ((size_t)b * t->n + j) * kd + off;
            vr[count] = in->sv + ((size_t)b * t->n + j) * kd + off;
        }
    return count;
}

static void tiled_ref(const tiled_case *t, const tiled_inputs *in, double *o)
{
    const int qd = t->heads * t->dh;
    double s[512], p[512];
    const float *kr[512], *vr[512];
    for (int b = 0; b < t->batch; b++)
        for (int h = 0; h < t->heads; h++)
            for (int i = 0; i < t->n; i++) {
                const float *qr = in->q + ((size_t)b * t->n + i) * qd + h * t->dh;
                const int nk = tiled_rows(t, in, b, h, i, kr, vr);
                for (int j = 0; j < nk; j++) {
                    double dot = 0;
                    for (int d = 0; d < t->dh; d++) dot += (double)qr[d] * kr[j][d];
                    s[j] = dot / sqrt((double)t->dh);
                }
                if (nk) lf_ref_softmax(s, nk, nk, p);
                for (int d = 0; d < t->dh; d++) {
                    double acc = 0;
                    for (int j = 0; j < nk; j++) acc += p[j] * vr[j][d];
                    o[((size_t)b * t->n + i) * qd + h * t->dh + d] = acc;
                }
            }
}

static void tiled_run(const tiled_case *t, uint64_t *rng)
{
    const int qd = t->heads * t->dh, kd = t->kv_heads * t->dh, key_rows = t->keys ? t->keys : t->n;
    const size_t qc = (size_t)t->batch * t->n * qd, kc = (size_t)t->batch * key_rows * kd;
    const size_t sc = (size_t)t->batch * t->n * kd;
    float *q = lf_test_random(qc, rng, -1.0f, 1.0f), *k = lf_test_random(kc, rng, -1.0f, 1.0f);
    float *v = lf_test_random(kc, rng, -1.0f, 1.0f), *out = malloc(qc * sizeof *out);
    float *sk = lf_test_random(sc, rng, -1.0f, 1.0f), *sv = lf_test_random(sc, rng, -1.0f, 1.0f);
    double *ref = malloc(qc * sizeof *ref);
    int32_t lens[8];
    random_lengths(lens, t->batch, t->n, rng);
    cl_mem qb = lf_test_upload(ctx, q, qc * sizeof *q), kb = lf_test_upload(ctx, k, kc * sizeof *k), vb = lf_test_upload(ctx, v, kc * sizeof *v);
    cl_mem skb = lf_test_upload(ctx, sk, sc * sizeof *sk), svb = lf_test_upload(ctx, sv, sc * sizeof *sv);
    cl_mem lb = lf_test_upload(ctx, lens, t->batch * sizeof *lens), ob = NULL;
    lf_test_poison(out, qc);
    ob = lf_test_upload(ctx, out, qc * sizeof *out);
    const bool own = t->causal && t->keys;
    const lf_attention_tiled_args a = {
        .q = {qb, 0, qd, (size_t)t->n * qd}, .k = {kb, 0, kd, (size_t)key_rows * kd},
        .v = {vb, 0, kd, (size_t)key_rows * kd}, .o = {ob, 0, qd, (size_t)t->n * qd},
        .self_k = {own ? skb : NULL, 0, kd, (size_t)t->n * kd}, .self_v = {own ? svb : NULL, 0, kd, (size_t)t->n * kd},
        .causal = t->causal, .window = t->keys ? (t->n + t->keys - 1) / t->keys : 0, .lengths = lb,
        .batch = t->batch, .n_rows = t->n, .key_count = t->keys, .heads = t->heads, .kv_heads = t->kv_heads,
        .d_head = t->dh, .scale = (float)(1.0 / sqrt((double)t->dh)), .tiles = t->tiles};
    cr_assert_eq(lf__launch_attention_tiled(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, ob, out, qc);
    tiled_ref(t, &(tiled_inputs){q, k, v, sk, sv, lens}, ref);
    cr_expect_leq(lf_test_rel_err(out, ref, qc), TOL,
                  "attention_tiled n %d keys %d heads %d/%d dh %d causal %d TK %d TQ %zu QB %d QV %d KB %d DS %d",
                  t->n, t->keys, t->heads, t->kv_heads, t->dh, t->causal, t->tiles.tile_keys, t->tiles.tile_queries,
                  t->tiles.query_block, t->tiles.query_vectors, t->tiles.key_block, t->tiles.d_split);
    lf__release(&qb), lf__release(&kb), lf__release(&vb), lf__release(&skb), lf__release(&svb);
    lf__release(&lb), lf__release(&ob);
    free(q), free(k), free(v), free(sk), free(sv), free(out), free(ref);
}

/* The parameters of a variant on this device, as an override asks for it. */
static lf_kernel_params variant_params(lf_kernel_variant v)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    setenv("LINFORMER_KERNEL_PARAMS", v == LF_VARIANT_CPU ? "variant=cpu" : "variant=gpu", 1);
    lf_kernel_params kp;
    char msg[512] = "";
    cr_assert_eq(lf__kernel_params(&info, &kp, msg, sizeof msg), LF_OK, "%s", msg);
    unsetenv("LINFORMER_KERNEL_PARAMS");
    return kp;
}

/* The tiles of the grid for head width dh: each variant's own as the library
 * takes them on this device, then odd ones (TK, TQ, QB, QV, KB) whose TK
 * keeps to the library's for the GPU variant, so that they fit the device's
 * local memory; the CPU variant's KB both divides TK and does not. */
static size_t grid_tiles(int dh, lf_attention_tiles tiles[])
{
    static const lf_attention_tiles odd[] = {
        {5, 7, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1},  {5, 3, 8, 1, 3, 1},
        {1, 2, 4, 3, 5, 1}, {6, 2, 16, 2, 2, 1}, {7, 1, 2, 4, 16, 1}};
    size_t count = 0;
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    const lf_kernel_params gpu_params = variant_params(LF_VARIANT_GPU);
    const lf_attention_tiles gpu = lf__attention_tiles(&gpu_params, dh, &info);
    for (int v = LF_VARIANT_CPU; v <= LF_VARIANT_GPU; v++, count++) {
        const lf_kernel_params kp = variant_params((lf_kernel_variant)v);
        tiles[count] = lf__attention_tiles(&kp, dh, &info);
    }
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i += lf_test_tiny() ? 2 : 1, count++) { /* tiny: one a variant */
        tiles[count] = odd[i];
        if (tiles[count].tile_keys > gpu.tile_keys) tiles[count].tile_keys = gpu.tile_keys;
    }
    return count;
}

/* Every shape with every tile of the grid, plain and causal. The odd tiles
 * (grid_tiles' after the two variants' own, t >= 2) take causal and plain by
 * turns, from shape to shape and from tile to tile: each odd tile meets
 * both, so does each shape, and each pair of them compiles one program
 * rather than two (the compiles are the test's time). */
Test(kernels, attention_tiled_grid)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][3] = {{1, 0, 4}, {7, 0, 24}, {173, 0, 16}, {65, 19, 24}, {33, 1, 5}, {40, 33, 64},
                                    {21, 6, LF_MAX_DH_TILED}};
    static const int tiny[][3] = {{1, 0, 4}, {7, 0, 24}, {13, 5, 5}, {9, 3, LF_MAX_DH_TILED}};
    const size_t count = lf_test_tiny() ? sizeof tiny / sizeof tiny[0] : sizeof shapes / sizeof shapes[0];
    for (size_t i = 0; i < count; i++) {
        const int *shape = lf_test_tiny() ? tiny[i] : shapes[i];
        lf_attention_tiles tiles[8];
        const size_t tile_count = grid_tiles(shape[2], tiles);
        for (size_t t = 0; t < tile_count; t++)
            for (int kvh = 1; kvh <= 3; kvh += 2)
                for (int causal = 0; causal <= 1; causal++) {
                    if (t >= 2 && causal != (int)((i + t) % 2)) continue;
                    const tiled_case c = {2, shape[0], shape[1], 3, kvh, shape[2], tiles[t], causal};
                    tiled_run(&c, &rng);
                }
    }
}

/* The GPU variant with d_head split across DS work-items of a query: every
 * DS up to 8 that divides DH / VW, head widths 16 to 256, sequences that are
 * no multiple of a tile, flash and Linformer keys, one and three key/value
 * heads, mixed lengths, the library's tiles at that DS (TK within local
 * memory); each DS past 1 is seen in the kernel's options. A pair of head
 * width and DS runs causal or plain, by turns with DS and from one shape to
 * the next of the same keys, so that it compiles one program, not two: every
 * DS still meets both with flash keys and with Linformer keys, which the
 * test checks. */
Test(kernels, attention_tiled_d_split)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][3] = {{37, 0, 16}, {70, 0, 32}, {29, 11, 24}, {45, 0, 64}, {23, 7, 128},
                                    {19, 0, 192}, {17, 6, LF_MAX_DH_TILED}};
    static const int tiny[][3] = {{13, 0, 32}, {9, 5, 64}, {7, 3, 128}, {5, 0, LF_MAX_DH_TILED}};
    const size_t count = lf_test_tiny() ? sizeof tiny / sizeof tiny[0] : sizeof shapes / sizeof shapes[0];
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    bool met[4][2][2] = {{{false}}}; /* [log2 DS][Linformer keys][causal] */
    int of_kind[2] = {0, 0};         /* shapes so far with flash keys, with Linformer keys */
    for (size_t i = 0; i < count; i++) {
        const int *shape = lf_test_tiny() ? tiny[i] : shapes[i], dh = shape[2];
        const int dv = dh % 4 == 0 ? dh / 4 : dh, phase = of_kind[shape[1] > 0]++;
        for (int j = 0, ds = 1; ds <= 8; j++, ds *= 2) {
            if (dv % ds) continue;
            lf_kernel_params kp = variant_params(LF_VARIANT_GPU);
            kp.d_split = ds;
            const lf_attention_tiles tiles = lf__attention_tiles(&kp, dh, &info);
            cr_expect_eq(tiles.d_split, ds, "dh %d: DS %d asked, the plan took %d", dh, ds, tiles.d_split);
            const bool causal = (j + phase) % 2;
            for (int kvh = 1; kvh <= 3; kvh += 2) {
                const tiled_case c = {3, shape[0], shape[1], 3, kvh, dh, tiles, causal};
                tiled_run(&c, &rng);
            }
            met[j][shape[1] > 0][causal] = true;
            if (ds == 1) continue;
            char dh_opt[16], ds_opt[16];
            snprintf(dh_opt, sizeof dh_opt, "-DDH=%d ", dh);
            snprintf(ds_opt, sizeof ds_opt, "-DDS=%d", ds);
            cr_expect(lf_test_built_with(ctx, "attention.cl", dh_opt, ds_opt),
                      "dh %d: no program of attention.cl built with %s", dh, ds_opt);
        }
    }
    for (int j = 0; j < 4; j++)
        for (int keys = 0; keys <= 1; keys++)
            for (int causal = 0; causal <= 1; causal++)
                cr_expect(met[j][keys][causal], "DS %d never ran %s with %s keys", 1 << j,
                          causal ? "causal" : "plain", keys ? "Linformer" : "flash");
}

/* The GPU variant's tiles fit in the local memory of every device, as small
 * as 16 KiB, at every head width the kernel takes and every DS asked for
 * (the table's, then 2 to 16): two tiles of keys and values and, with DS
 * past 1, a tile's partial scores of each work-item. DS divides DH / VW. */
Test(kernels, gpu_variant_tiles_fit_local_memory)
{
    static const uint64_t memories[] = {16384, 32768, 49152, 65536};
    unsetenv("LINFORMER_KERNEL_PARAMS"); /* the table's own row */
    for (size_t m = 0; m < sizeof memories / sizeof memories[0]; m++)
        for (int dh = 1; dh <= LF_MAX_DH_TILED; dh++)
            for (int ds = 1; ds <= 16; ds *= 2) {
                const lf_device_info dev = {.type = LF_DEVICE_GPU, .local_mem_bytes = memories[m]};
                lf_kernel_params kp;
                char msg[512] = "";
                cr_assert_eq(lf__kernel_params(&dev, &kp, msg, sizeof msg), LF_OK, "%s", msg);
                if (ds > 1) kp.d_split = ds;
                const lf_attention_tiles t = lf__attention_tiles(&kp, dh, &dev);
                const uint64_t partials = t.d_split > 1 ? t.tile_queries * t.d_split * t.tile_keys : 0;
                cr_assert_leq((2ull * t.tile_keys * dh + partials) * sizeof(float), memories[m] / 2,
                              "dh %d, %llu bytes: TK %d, DS %d", dh, (unsigned long long)memories[m], t.tile_keys,
                              t.d_split);
                const int dv = dh % 4 == 0 ? dh / 4 : dh;
                cr_assert(t.d_split >= 1 && !(t.d_split & (t.d_split - 1)) && dv % t.d_split == 0,
                          "dh %d: DS %d", dh, t.d_split);
                cr_assert_eq(t.query_block, 1);
            }
}

/* A kernel's work-group shrinks to what the device's local memory holds: a
 * group of 256 softmax work-items takes 1 KiB, more than 512 bytes. */
Test(kernels, work_groups_fit_local_memory)
{
    ctx->info.local_mem_bytes = 512;
    static const char *const files[][2] = {{"softmax.cl", "softmax_rows"}, {"layernorm.cl", "layernorm_rows"}};
    for (size_t f = 0; f < 2; f++) {
        cl_kernel k = NULL;
        size_t wg = 0;
        cr_assert_eq(lf__kernel_sized(ctx, files[f][0], "", files[f][1], "WG", 256, 1, 0, &k, &wg), LF_OK, "%s",
                     lf_context_last_error(ctx));
        cl_ulong local = 0;
        cr_assert_eq(clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL),
                     CL_SUCCESS);
        cr_expect(wg >= 1 && wg < 256 && local <= 512, "%s: a group of %zu takes %llu bytes", files[f][1], wg,
                  (unsigned long long)local);
    }
    uint64_t rng = lf_test_seed();
    lf_kernel_params kp = lf_test_kernel_params(ctx);
    kp.variant = LF_VARIANT_GPU, kp.softmax_group = 256;
    softmax_case(2, 3, 173, 3, 100, false, &kp, &rng); /* and still gives the right answer */
}
