/*
 * test_model.c - whole models: lucidrains' Linformer and LinformerLM trained
 * in PyTorch run unchanged (tests/data/make_model_fixtures.py wrote the files
 * through python -m linformer_cl.convert, with PyTorch's own outputs).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "safetensors.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(model_pytorch, .init = setup, .fini = teardown, .timeout = 600);

/* The input (x or tokens), lengths and PyTorch's y of a fixture. */
typedef struct {
    lf_st_file io;
    float *x, *y;
    int64_t *tokens;
    int32_t lengths[16];
    bool has_lengths;
    int batch, n;
    size_t y_count;
} fixture_io;

static void read_io(const char *name, fixture_io *f)
{
    char path[512], msg[512];
    snprintf(path, sizeof path, "%s/tests/data/models/%s.io.safetensors", LF_SOURCE_DIR, name);
    cr_assert_eq(lf_st_open(path, &f->io, msg, sizeof msg), LF_OK, "%s", msg);
    const lf_st_tensor *x = lf_st_find(&f->io, "x"), *t = lf_st_find(&f->io, "tokens");
    const lf_st_tensor *y = lf_st_find(&f->io, "y"), *len = lf_st_find(&f->io, "lengths");
    const lf_st_tensor *in = x ? x : t;
    cr_assert(in && y && y->ndim == 3);
    f->batch = (int)in->shape[0], f->n = (int)in->shape[1], f->y_count = y->count;
    f->y = malloc(y->count * sizeof *f->y);
    cr_assert_eq(lf_st_to_f32(y, f->y, msg, sizeof msg), LF_OK);
    if (x) {
        f->x = malloc(x->count * sizeof *f->x);
        cr_assert_eq(lf_st_to_f32(x, f->x, msg, sizeof msg), LF_OK);
    } else {
        f->tokens = malloc(t->count * sizeof *f->tokens);
        cr_assert_eq(lf_st_to_i64(t, f->tokens, msg, sizeof msg), LF_OK);
    }
    f->has_lengths = len != NULL;
    if (len) {
        int64_t v[16];
        cr_assert(len->count <= 16);
        cr_assert_eq(lf_st_to_i64(len, v, msg, sizeof msg), LF_OK);
        for (size_t b = 0; b < len->count; b++) f->lengths[b] = (int32_t)v[b];
    }
}

static void free_io(fixture_io *f)
{
    free(f->x), free(f->y), free(f->tokens);
    lf_st_close(&f->io);
}

static lf_model *load_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/models/%s.model.safetensors", LF_SOURCE_DIR, name);
    lf_model *m = NULL;
    lf_status st = lf_model_load(ctx, path, NULL, &m);
    cr_assert_eq(st, LF_OK, "%s: %s", name, lf_context_last_error(ctx));
    return m;
}

static void expect_pytorch_output(const char *name, lf_model_kind kind, int layers)
{
    lf_model *m = load_fixture(name);
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(m, &info), LF_OK);
    cr_expect_eq(info.kind, kind, "%s: kind %s", name, lf_model_kind_name(info.kind));
    cr_expect_eq(info.layers, layers, "%s: %d layers", name, info.layers);
    cr_expect_str_eq(info.layout, "lucidrains");
    cr_expect_eq(info.norm, LF_NORM_PRE);
    fixture_io f = {0};
    read_io(name, &f);
    float *got = malloc(f.y_count * sizeof *got);
    lf_test_poison(got, f.y_count);
    lf_status st = lf_model_forward(m, f.x, f.tokens, got, f.batch, f.n, f.has_lengths ? f.lengths : NULL);
    cr_assert_eq(st, LF_OK, "%s: %s", name, lf_context_last_error(ctx));
    const double e = lf_test_rel_err_f(got, f.y, f.y_count);
    cr_expect_leq(e, 1e-4, "%s: relative error %.3g against PyTorch", name, e);
    cr_log_info("%s: relative error %.3g against PyTorch", name, e);
    for (size_t i = 0; i < f.y_count; i++)
        if (f.y[i] == 0.0f) cr_assert_eq(got[i], 0.0f, "%s: padded entry %zu is %g", name, i, got[i]);
    free(got);
    free_io(&f);
    lf_model_free(m);
}

Test(model_pytorch, linformer_depth_3) { expect_pytorch_output("encoder_depth3", LF_MODEL_ENCODER, 3); }
Test(model_pytorch, linformer_shorter_sequence) { expect_pytorch_output("encoder_short", LF_MODEL_ENCODER, 3); }
Test(model_pytorch, linformer_one_kv_head_mixed_lengths)
{
    expect_pytorch_output("encoder_one_kv_head_mixed", LF_MODEL_ENCODER, 3);
}
Test(model_pytorch, lm) { expect_pytorch_output("lm", LF_MODEL_LM, 2); }
Test(model_pytorch, lm_share_kv_shorter_mixed_lengths) { expect_pytorch_output("lm_share_kv_short_mixed", LF_MODEL_LM, 2); }
Test(model_pytorch, lm_share_kv_one_kv_head) { expect_pytorch_output("lm_one_kv_head", LF_MODEL_LM, 3); }

/* ---- `linformer run` on a model file ---- */

static void run_tool(const char *name, const char *extra, int want_rc, char *log, size_t log_size, const char *out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --model %s/tests/data/models/%s.model.safetensors --input "
                              "%s/tests/data/models/%s.io.safetensors --output %s %s",
             LF_TOOL_PATH, LF_SOURCE_DIR, name, LF_SOURCE_DIR, name, out, extra);
    const int rc = lf_test_system(cmd, log, log_size);
    cr_assert_eq(rc, want_rc, "%s: exit %d, output:\n%s", cmd, rc, log);
}

Test(model_pytorch, run_command_serves_a_language_model)
{
    char log[8192], out[256], msg[512];
    snprintf(out, sizeof out, "%s/lf_model_run_%d.safetensors", P_tmpdir, (int)getpid());
    run_tool("lm_share_kv_short_mixed", "", 0, log, sizeof log, out);
    cr_expect(strstr(log, "device "), "no device line:\n%s", log);
    cr_expect(strstr(log, "lucidrains language model: 2 layers"), "no model line:\n%s", log);
    fixture_io f = {0};
    read_io("lm_share_kv_short_mixed", &f);
    lf_st_file y;
    cr_assert_eq(lf_st_open(out, &y, msg, sizeof msg), LF_OK, "%s", msg);
    const lf_st_tensor *t = lf_st_find(&y, "y");
    cr_assert(t && t->count == f.y_count);
    float *got = malloc(t->count * sizeof *got);
    cr_assert_eq(lf_st_to_f32(t, got, msg, sizeof msg), LF_OK);
    const double e = lf_test_rel_err_f(got, f.y, f.y_count);
    cr_expect_leq(e, 1e-4, "linformer run: relative error %.3g against PyTorch", e);
    free(got);
    lf_st_close(&y);
    free_io(&f);
    unlink(out);
    run_tool("lm", "--heads 3", 2, log, sizeof log, out); /* an option that contradicts the file */
    cr_expect(strstr(log, "heads 3 was given but") && strstr(log, "says 2"), "%s", log);
    run_tool("encoder_depth3", "--norm sideways", 2, log, sizeof log, out);
    cr_expect(strstr(log, "--norm is pre or post"), "%s", log);
}
