/* test_run.c - `linformer run` and lf_attention_load on real safetensors files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "reference.h"
#include "safetensors.h"

enum { D = 24, H = 3, DH = 8, SEQ = 40, K = 6, B = 3, N = 37 };

static char dir[64];
static void setup(void)
{
    strcpy(dir, "/tmp/lf-run-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
TestSuite(run, .init = setup, .fini = teardown, .timeout = 300);

/* A LinformerSelfAttention state dict (headwise E, F; no q/k/v biases). */
typedef struct {
    float wq[H * DH * D], wk[H * DH * D], wv[H * DH * D], pk[SEQ * K], pv[SEQ * K], wo[D * H * DH], bo[D];
} lucid;

static void path(char *out, const char *name) { sprintf(out, "%s/%s", dir, name); }

static void write_model(const lucid *m, const char *file, bool heads_meta, const char *extra)
{
    const int64_t sq[2] = {H * DH, D}, sp[2] = {SEQ, K}, so[2] = {D, H * DH}, sb[1] = {D};
    lf_st_out t[8] = {{"to_q.weight", LF_ST_F32, 2, sq, m->wq}, {"to_k.weight", LF_ST_F32, 2, sq, m->wk},
                      {"to_v.weight", LF_ST_F32, 2, sq, m->wv}, {"proj_k", LF_ST_F32, 2, sp, m->pk},
                      {"proj_v", LF_ST_F32, 2, sp, m->pv},      {"to_out.weight", LF_ST_F32, 2, so, m->wo},
                      {"to_out.bias", LF_ST_F32, 1, sb, m->bo}};
    size_t count = 7;
    if (extra) t[count++] = (lf_st_out){extra, LF_ST_F32, 1, sb, m->bo};
    const char *meta[2] = {"heads", "3"};
    char p[128], msg[256];
    path(p, file);
    cr_assert_eq(lf_st_write(p, t, count, meta, heads_meta ? 1 : 0, msg, sizeof msg), LF_OK, "%s", msg);
}

/* E = proj_k^T, as lucidrains' einsum('bnd,nk->bkd') uses it. */
static void reference(const lucid *m, const float *x, const int32_t *lens, double *y)
{
    static float e[K * SEQ], f[K * SEQ];
    for (int i = 0; i < SEQ; i++)
        for (int j = 0; j < K; j++) e[j * SEQ + i] = m->pk[i * K + j], f[j * SEQ + i] = m->pv[i * K + j];
    lf_attention_config c;
    lf_attention_config_init(&c, D, H, SEQ, K);
    c.bias_q = c.bias_k = c.bias_v = 0;
    lf_ref_resolve(&c);
    lf_ref_weights w = {.wq = m->wq, .wk = m->wk, .wv = m->wv, .wo = m->wo, .bo = m->bo, .e = e, .f = f};
    lf_ref_attention(&c, &w, NULL, x, B, N, lens, y);
}

Test(run, program_matches_reference)
{
    static lucid m;
    uint64_t rng = lf_test_seed();
    lf_test_fill((float *)&m, sizeof m / sizeof(float), &rng, -0.5f, 0.5f);
    write_model(&m, "model.safetensors", true, NULL);
    static float x[B * N * D];
    lf_test_fill(x, B * N * D, &rng, -1, 1);
    const int32_t lens[B] = {N, 11, 0};
    const int64_t sx[3] = {B, N, D}, sl[1] = {B};
    const lf_st_out in[2] = {{"x", LF_ST_F32, 3, sx, x}, {"lengths", LF_ST_I32, 1, sl, lens}};
    char p[128], msg[256], cmd[1024], log[4096];
    path(p, "input.safetensors");
    cr_assert_eq(lf_st_write(p, in, 2, NULL, 0, msg, sizeof msg), LF_OK, "%s", msg);
    snprintf(cmd, sizeof cmd, "%s run --model %s/model.safetensors --input %s/input.safetensors --output %s/y.safetensors --repeat 2",
             LF_TOOL_PATH, dir, dir, dir);
    int rc = lf_test_system(cmd, log, sizeof log);
    cr_assert_eq(rc, 0, "linformer run failed (%d): %s", rc, log);

    lf_st_file out;
    path(p, "y.safetensors");
    cr_assert_eq(lf_st_open(p, &out, msg, sizeof msg), LF_OK, "%s", msg);
    const lf_st_tensor *y = lf_st_find(&out, "y");
    cr_assert_not_null(y);
    cr_assert_eq(y->ndim, 3);
    cr_assert(y->shape[0] == B && y->shape[1] == N && y->shape[2] == D);
    static float got[B * N * D];
    cr_assert_eq(lf_st_to_f32(y, got, msg, sizeof msg), LF_OK);
    lf_st_close(&out);
    static double ref[B * N * D];
    reference(&m, x, lens, ref);
    double e = lf_test_rel_err(got, ref, B * N * D);
    cr_expect_leq(e, 1e-5, "relative error %.3g", e);
}

static void expect_load_error(const char *file, int heads, lf_status want, const char *needle)
{
    char msg[256];
    lf_context *ctx = NULL;
    cr_assert_eq(lf_context_create(NULL, &ctx, msg, sizeof msg), LF_OK, "%s", msg);
    char p[128];
    path(p, file);
    lf_attention *layer = (lf_attention *)1;
    lf_status st = lf_attention_load(ctx, p, heads, LF_MODE_LINFORMER, &layer);
    cr_expect_eq(st, want, "%s: got %s: %s", file, lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_null(layer);
    cr_expect(strstr(lf_context_last_error(ctx), needle) != NULL, "message \"%s\" does not name \"%s\"",
              lf_context_last_error(ctx), needle);
    lf_context_free(ctx);
}

Test(run, loader_refuses_bad_models)
{
    static lucid m;
    uint64_t rng = lf_test_seed();
    lf_test_fill((float *)&m, sizeof m / sizeof(float), &rng, -0.5f, 0.5f);
    write_model(&m, "extra.safetensors", true, "decoder.bias");
    expect_load_error("extra.safetensors", 0, LF_ERR_FORMAT, "decoder.bias");
    write_model(&m, "noheads.safetensors", false, NULL);
    expect_load_error("noheads.safetensors", 0, LF_ERR_ARGUMENT, "heads");
    expect_load_error("noheads.safetensors", 5, LF_ERR_FORMAT, "to_q.weight"); /* 24 rows into 5 heads */
    expect_load_error("missing.safetensors", 0, LF_ERR_IO, "missing.safetensors");

    /* a wrong shape and a missing tensor */
    const int64_t sq[2] = {H * DH, D}, bad[2] = {H * DH, D - 1}, sp[2] = {SEQ, K}, so[2] = {D, H * DH};
    lf_st_out t[6] = {{"to_q.weight", LF_ST_F32, 2, sq, m.wq}, {"to_k.weight", LF_ST_F32, 2, bad, m.wk},
                      {"proj_k", LF_ST_F32, 2, sp, m.pk}, {"to_out.weight", LF_ST_F32, 2, so, m.wo},
                      {"to_v.weight", LF_ST_F32, 2, sq, m.wv}, {"proj_v", LF_ST_F32, 2, sp, m.pv}};
    char p[128], msg[256];
    const char *meta[2] = {"heads", "3"};
    path(p, "shape.safetensors");
    cr_assert_eq(lf_st_write(p, t, 6, meta, 1, msg, sizeof msg), LF_OK);
    expect_load_error("shape.safetensors", 0, LF_ERR_FORMAT, "to_k.weight");
    t[1].shape = sq;
    path(p, "nopv.safetensors"); /* the same, proj_v left out */
    cr_assert_eq(lf_st_write(p, t, 5, meta, 1, msg, sizeof msg), LF_OK);
    expect_load_error("nopv.safetensors", 0, LF_ERR_FORMAT, "proj_v");
}

Test(run, program_reports_bad_input)
{
    char cmd[1024], log[4096];
    snprintf(cmd, sizeof cmd, "%s run --model %s/none.safetensors --input x --output y", LF_TOOL_PATH, dir);
    cr_expect_neq(lf_test_system(cmd, log, sizeof log), 0);
    cr_expect(strstr(log, "none.safetensors") != NULL, "%s", log);
    snprintf(cmd, sizeof cmd, "%s run --model a --mode fast --input x --output y", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2);
    cr_expect(strstr(log, "fast") != NULL, "%s", log);
    snprintf(cmd, sizeof cmd, "%s run --help", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0);
}
