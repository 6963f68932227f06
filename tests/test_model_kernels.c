/*
 * test_model_kernels.c - the model's kernels (layernorm.cl, activation.cl,
 * embedding.cl) each on its own, through its typed launcher, against the
 * double-precision twins of reference_model.c, over shapes that are not
 * multiples of any work-group. Fresh random inputs, poisoned outputs, every
 * element checked.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "launch.h"
#include "reference_model.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(model_kernels, .init = setup, .fini = teardown, .timeout = 600);

/* The elementwise kernels' two variants, forced in turn on every device
 * (LINFORMER_KERNEL_PARAMS). */
static const char *const variants[] = {"variant=cpu", "variant=gpu"};
#define VARIANTS (sizeof variants / sizeof variants[0])
static lf_kernel_params params; /* the variant's, resolved as a layer or model would */
static void use_variant(size_t v)
{
    cr_assert_eq(setenv("LINFORMER_KERNEL_PARAMS", variants[v], 1), 0);
    params = lf_test_kernel_params(ctx);
}

static float *poisoned(size_t count)
{
    float *x = malloc(count * sizeof *x);
    lf_test_poison(x, count);
    return x;
}

Test(model_kernels, each_file_compiles_with_its_defaults)
{
    static const char *const files[][2] = {
        {"layernorm.cl", "layernorm_rows"}, {"layernorm.cl", "layernorm_rows_cpu"},
        {"activation.cl", "bias_act"},      {"embedding.cl", "embed_tokens"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        cl_kernel k = NULL;
        cr_expect_eq(lf__kernel(ctx, files[i][0], "", files[i][1], &k), LF_OK, "%s: %s", files[i][0],
                     lf_context_last_error(ctx));
    }
}

/* ---- layernorm_rows: out = LN(x + r); variants: residual, kept sum, in place ---- */

typedef struct {
    int rows, d;
    bool has_r, write_sum, in_place;
    size_t group;
} ln_case;

static void layernorm_run(const ln_case *t, uint64_t *rng)
{
    const size_t count = (size_t)t->rows * t->d;
    float *x = lf_test_random(count, rng, 1.0f, 5.0f), *r = lf_test_random(count, rng, -2.0f, 2.0f);
    float *g = lf_test_random(t->d, rng, 0.5f, 1.5f), *b = lf_test_random(t->d, rng, -1.0f, 1.0f);
    float *out = poisoned(count), *sum = poisoned(count);
    double *s = malloc(count * sizeof *s), *ref = malloc(count * sizeof *ref);
    cl_mem xb = lf_test_upload(ctx, x, count * sizeof *x), rb = lf_test_upload(ctx, r, count * sizeof *r), gb = lf_test_upload(ctx, g, t->d * sizeof *g);
    cl_mem bb = lf_test_upload(ctx, b, t->d * sizeof *b), ob = t->in_place ? xb : lf_test_upload(ctx, out, count * sizeof *out);
    lf_kernel_params kp = params;
    kp.layernorm_group = (int)t->group;
    const lf_layernorm_args a = {.x = xb, .r = t->has_r ? rb : NULL, .out = ob, .gamma = gb, .beta = bb, .d = t->d,
                                 .rows = t->rows, .eps = 1e-5f, .has_r = t->has_r, .write_sum = t->write_sum,
                                 .params = &kp};
    cr_assert_eq(lf__launch_layernorm(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, ob, out, count);
    lf_test_download(ctx, xb, sum, count);
    for (size_t i = 0; i < count; i++) s[i] = (double)x[i] + (t->has_r ? r[i] : 0.0);
    for (int row = 0; row < t->rows; row++)
        lf_ref_layernorm(s + (size_t)row * t->d, t->d, 1e-5, g, b, ref + (size_t)row * t->d);
    cr_expect_leq(lf_test_rel_err(out, ref, count), TOL,
                  "layernorm rows %d d %d r %d sum %d in place %d group %zu, variant %s", t->rows, t->d, t->has_r,
                  t->write_sum, t->in_place, t->group, getenv("LINFORMER_KERNEL_PARAMS"));
    if (!t->in_place) /* x holds the sum, or is untouched */
        for (size_t i = 0; i < count; i++) s[i] = t->write_sum ? s[i] : x[i];
    if (!t->in_place) cr_expect_leq(lf_test_rel_err(sum, s, count), 1e-7, "layernorm: x after the call");
    lf__release(&xb), lf__release(&rb), lf__release(&gb), lf__release(&bb);
    if (!t->in_place) lf__release(&ob);
    free(x), free(r), free(g), free(b), free(out), free(sum), free(s), free(ref);
}

Test(model_kernels, layernorm_grid)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][2] = {{1, 1}, {3, 7}, {5, 33}, {4, 173}, {2, 600}, {70, 9}};
    static const size_t groups[] = {1, 8, 128}; /* the GPU variant's; the CPU variant takes a row a work-item */
    for (size_t var = 0; var < VARIANTS; var++) {
        use_variant(var);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (int v = 0; v < 4; v++) {
                    const ln_case t = {shapes[i][0], shapes[i][1], v >= 1, v == 2, v == 3, groups[gi]};
                    layernorm_run(&t, &rng);
                }
    }
}

/* ---- bias_act: bias + activation, and the gated form ---- */

typedef struct {
    int rows, cols, ld;
    bool has_bias, glu;
    lf_activation act;
} act_case;

static void bias_act_run(const act_case *t, uint64_t *rng)
{
    const size_t count = (size_t)t->rows * t->ld;
    float *y = lf_test_random(count, rng, -4.0f, 4.0f), *bias = lf_test_random(2 * t->cols, rng, -1.0f, 1.0f);
    float *out = poisoned(count);
    double *ref = malloc(count * sizeof *ref);
    cl_mem yb = lf_test_upload(ctx, y, count * sizeof *y), bb = lf_test_upload(ctx, bias, 2 * t->cols * sizeof *bias);
    const lf_bias_act_args a = {.y = yb, .ld = t->ld, .cols = t->cols, .rows = t->rows, .bias = t->has_bias ? bb : NULL,
                                .has_bias = t->has_bias, .glu = t->glu, .act = t->act, .params = &params};
    cr_assert_eq(lf__launch_bias_act(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, yb, out, count);
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < t->ld; c++) {
            const float *row = y + (size_t)r * t->ld;
            double v = row[c];
            if (c < t->cols) {
                v = lf_ref_activate(v + (t->has_bias ? bias[c] : 0.0), t->act);
                if (t->glu) v *= row[t->cols + c] + (t->has_bias ? bias[t->cols + c] : 0.0);
            }
            ref[(size_t)r * t->ld + c] = v;
        }
    cr_expect_leq(lf_test_rel_err(out, ref, count), TOL,
                  "bias_act rows %d cols %d ld %d bias %d glu %d act %d, variant %s", t->rows, t->cols, t->ld,
                  t->has_bias, t->glu, t->act, getenv("LINFORMER_KERNEL_PARAMS"));
    lf__release(&yb), lf__release(&bb);
    free(y), free(bias), free(out), free(ref);
}

Test(model_kernels, bias_act_grid)
{
    uint64_t rng = lf_test_seed();
    /* rows, cols: the CPU variant's runs of 256 columns end in a partial vector (262) or a partial run (300) */
    static const int shapes[][2] = {{1, 1}, {7, 5}, {13, 31}, {3, 262}, {2, 300}};
    for (size_t var = 0; var < VARIANTS; var++) {
        use_variant(var);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int act = 0; act <= LF_ACT_RELU; act++)
                for (int v = 0; v < 4; v++) {
                    const int cols = shapes[i][1], glu = v & 1;
                    const act_case t = {shapes[i][0], cols, cols * (glu ? 2 : 1) + (v & 2 ? 3 : 0), v != 2, glu,
                                        (lf_activation)act};
                    bias_act_run(&t, &rng);
                }
    }
}

/* How far a float GELU may be from the double one at v, relatively: a few
 * rounding errors, plus what rounding the argument of the tail's exponential
 * moves (erfc(z) ~ exp(-z^2) with z = v / sqrt(2) rounded to float: 2 z^2
 * times z's relative error; likewise the tanh form's exponent). */
static double gelu_tolerance(double v, lf_activation act)
{
    const double eps = 0x1p-24;
    const double g = act == LF_ACT_GELU ? v * v : fabs(2.0 * 0.7978845608 * (v + 0.044715 * v * v * v));
    return 2e-6 + 4.0 * g * eps;
}

/* Element by element over the whole range a float GELU resolves: tails far
 * below 0 (results down to 1e-30, where PyTorch's own float GELU gives 0),
 * around 0 and large positive inputs, each within gelu_tolerance of the
 * double reference. Infinities and NaN come out as in PyTorch. */
static void gelu_digits(void)
{
    enum { COUNT = 4001 };
    static float y[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++) y[i] = -14.0f + 24.0f * (float)i / (COUNT - 1); /* -14 .. 10 */
    for (int act = LF_ACT_GELU; act <= LF_ACT_GELU_TANH; act++) {
        cl_mem yb = lf_test_upload(ctx, y, sizeof y);
        const lf_bias_act_args a = {.y = yb, .ld = COUNT, .cols = COUNT, .rows = 1, .act = (lf_activation)act,
                                    .params = &params};
        cr_assert_eq(lf__launch_bias_act(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
        lf_test_download(ctx, yb, out, COUNT);
        lf__release(&yb);
        double worst = 0.0; /* error / tolerance */
        float at = 0.0f;
        for (int i = 0; i < COUNT; i++) {
            const double want = lf_ref_activate(y[i], (lf_activation)act);
            if (fabs(want) < 1e-30) continue; /* below float's normal range */
            const double e = fabs(out[i] - want) / fabs(want) / gelu_tolerance(y[i], (lf_activation)act);
            if (e > worst) worst = e, at = y[i];
        }
        cr_expect_leq(worst, 1.0, "act %d, variant %s: error %.3g times the tolerance at %g (tolerance %.3g)", act,
                      getenv("LINFORMER_KERNEL_PARAMS"), worst, at, gelu_tolerance(at, (lf_activation)act));
    }
    static const float special[4] = {INFINITY, -INFINITY, NAN, 0.0f};
    float got[4];
    cl_mem sb = lf_test_upload(ctx, special, sizeof special);
    const lf_bias_act_args a = {.y = sb, .ld = 4, .cols = 4, .rows = 1, .act = LF_ACT_GELU, .params = &params};
    cr_assert_eq(lf__launch_bias_act(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, sb, got, 4);
    lf__release(&sb);
    cr_expect(isinf(got[0]) && got[0] > 0, "gelu(inf) = %g", got[0]);
    cr_expect(isnan(got[1]), "gelu(-inf) = %g: -inf times erfc(inf) = 0", got[1]);
    cr_expect(isnan(got[2]), "gelu(nan) = %g", got[2]);
    cr_expect_eq(got[3], 0.0f, "gelu(0) = %g", got[3]);
}

Test(model_kernels, gelu_keeps_its_digits_everywhere)
{
    for (size_t var = 0; var < VARIANTS; var++) {
        use_variant(var);
        gelu_digits();
    }
}

/* ---- embed_tokens ---- */

static void embed_run(int batch, int n, int d, int vocab, bool pos, int pos_offset, float scale, uint64_t *rng)
{
    const size_t count = (size_t)batch * n * d, positions = (size_t)n + pos_offset;
    float *tok = lf_test_random((size_t)vocab * d, rng, -1.0f, 1.0f), *pe = lf_test_random(positions * d, rng, -1.0f, 1.0f);
    int64_t *tokens = malloc((size_t)batch * n * sizeof *tokens);
    int32_t lens[4];
    for (int b = 0; b < batch; b++) lens[b] = b == 0 ? n : (int32_t)(lf__rand_next(rng) % (uint64_t)(n + 1));
    for (size_t i = 0; i < (size_t)batch * n; i++) tokens[i] = (int64_t)(lf__rand_next(rng) % (uint64_t)vocab);
    float *out = poisoned(count);
    double *ref = malloc(count * sizeof *ref);
    cl_mem tb = lf_test_upload(ctx, tokens, (size_t)batch * n * sizeof *tokens), eb = lf_test_upload(ctx, tok, (size_t)vocab * d * sizeof *tok);
    cl_mem pb = lf_test_upload(ctx, pe, positions * d * sizeof *pe), lb = lf_test_upload(ctx, lens, batch * sizeof *lens);
    cl_mem ob = lf_test_upload(ctx, out, count * sizeof *out);
    const lf_embed_args a = {.tokens = tb, .tok = eb, .pos = pos ? pb : NULL, .pos_offset = pos_offset, .scale = scale,
                             .out = ob, .d = d, .n = n, .batch = batch, .lengths = lb};
    cr_assert_eq(lf__launch_embed(ctx, &a, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, ob, out, count);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < n; i++)
            for (int c = 0; c < d; c++) {
                const size_t row = (size_t)b * n + i;
                double v = 0.0;
                if (i < lens[b])
                    v = (double)scale * tok[tokens[row] * d + c] + (pos ? pe[(size_t)(i + pos_offset) * d + c] : 0.0);
                ref[row * d + c] = v;
            }
    cr_expect_leq(lf_test_rel_err(out, ref, count), TOL, "embed batch %d n %d d %d vocab %d pos %d offset %d", batch,
                  n, d, vocab, pos, pos_offset);
    for (size_t i = 0; i < count; i++)
        if (ref[i] == 0.0) cr_assert_eq(out[i], 0.0f, "padded entry %zu is %g, not 0", i, out[i]);
    lf__release(&tb), lf__release(&eb), lf__release(&pb), lf__release(&lb), lf__release(&ob);
    free(tok), free(pe), free(tokens), free(out), free(ref);
}

Test(model_kernels, embed_grid)
{
    uint64_t rng = lf_test_seed();
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 24, 50}, {5, 130, 7}}; /* n d vocab */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 3; v++)
            embed_run(3, shapes[i][0], shapes[i][1], shapes[i][2], v != 0, v == 2 ? 2 : 0, v == 2 ? 1.5f : 1.0f,
                      &rng);
}
