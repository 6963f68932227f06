/* test_gemm.c - each GEMM backend (CLBlast, the host BLAS on each of its
 * libraries) against a double-precision triple loop: odd shapes, offsets,
 * transposes, batches. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "blas.h"

/* The GEMM backends, the host one once on each host BLAS library. */
static const struct {
    const char *name, *gemm, *blas, *blas_name; /* blas: LINFORMER_HOST_BLAS; blas_name: what the context says */
} backends[] = {{"clblast", "clblast", NULL, NULL},
                {"host (OpenBLAS)", "host", "openblas", "OpenBLAS"},
                {"host (MKL)", "host", "mkl", "MKL"}};
#define FOR_EACH_BACKEND(ctx)                                                       \
    for (size_t be_ = 0; be_ < sizeof backends / sizeof backends[0]; be_++)         \
        for (lf_context *ctx = backend_context(be_); ctx; lf_context_free(ctx), ctx = NULL)

/* A context on the default device whose GEMMs run on backends[i]; NULL for
 * MKL where this build has none. */
static lf_context *backend_context(size_t i)
{
    if (backends[i].blas && strcmp(backends[i].blas, "mkl") == 0 && !lf_test_with_mkl()) return NULL;
    cr_assert_eq(setenv("LINFORMER_GEMM", backends[i].gemm, 1), 0);
    if (backends[i].blas) cr_assert_eq(setenv("LINFORMER_HOST_BLAS", backends[i].blas, 1), 0);
    lf_context *ctx = lf_test_context();
    cr_assert_str_eq(lf_context_gemm_backend(ctx), backends[i].gemm);
    if (backends[i].blas) cr_assert_str_eq(lf_context_host_blas(ctx), backends[i].blas_name);
    else cr_assert_null(lf_context_host_blas(ctx));
    return ctx;
}


/* ---- The GEMM wrapper against a triple loop ---- */

typedef struct {
    bool ta, tb;
    size_t m, n, k;
    float alpha, beta;
    size_t a_off, lda, a_stride;
    size_t b_off, ldb, b_stride;
    size_t c_off, ldc, c_stride;
    size_t batch;
} gemm_case;

/* Elements a buffer must hold for `batch` matrices of `rows` x ld from `off`. */
static size_t span(size_t off, size_t rows, size_t ld, size_t stride, size_t batch)
{
    size_t b = batch > 1 ? batch : 1;
    return off + (b - 1) * stride + rows * ld;
}

/* Runs g through lf__gemm, or, with a limit, through lf__gemm_limited (in
 * pieces where its operands reach past `limit` elements), against the loop. */
static void run_gemm_limited(lf_context *ctx, const gemm_case *g, size_t limit)
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    const size_t a_rows = g->ta ? g->k : g->m, b_rows = g->tb ? g->n : g->k;
    const size_t na = span(g->a_off, a_rows, g->lda, g->a_stride, batch);
    const size_t nb = span(g->b_off, b_rows, g->ldb, g->b_stride, batch);
    const size_t nc = span(g->c_off, g->m, g->ldc, g->c_stride, batch);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0),
          *c = malloc(nc * sizeof *c);
    cr_assert(a && b && c0 && c);
    uint64_t state = lf_test_seed();
    lf_test_fill(a, na, &state, -1, 1);
    lf_test_fill(b, nb, &state, -1, 1);
    /* Poison where beta = 0 (any value there must be ignored), else random. */
    if (g->beta == 0.0f) lf_test_poison(c0, nc);
    else lf_test_fill(c0, nc, &state, -1, 1);
    /* Outside the matrices of C stays poison either way. */
    bool *inside = calloc(nc, sizeof *inside);
    cr_assert_not_null(inside);
    for (size_t q = 0; q < batch; q++)
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) inside[g->c_off + q * g->c_stride + i * g->ldc + j] = true;
    for (size_t i = 0; i < nc; i++)
        if (!inside[i]) c0[i] = LF_POISON;

    cl_mem da, db, dc;
    cr_assert_eq(lf__alloc(ctx, na * sizeof(float), "A", &da), LF_OK);
    cr_assert_eq(lf__alloc(ctx, nb * sizeof(float), "B", &db), LF_OK);
    cr_assert_eq(lf__alloc(ctx, nc * sizeof(float), "C", &dc), LF_OK);
    cr_assert_eq(lf__upload(ctx, da, 0, a, na * sizeof(float)), LF_OK);
    cr_assert_eq(lf__upload(ctx, db, 0, b, nb * sizeof(float)), LF_OK);
    cr_assert_eq(lf__upload(ctx, dc, 0, c0, nc * sizeof(float)), LF_OK);
    lf_gemm_args args = {.trans_a = g->ta, .trans_b = g->tb, .m = g->m, .n = g->n, .k = g->k,
                         .alpha = g->alpha, .beta = g->beta,
                         .a = da, .a_off = g->a_off, .lda = g->lda, .a_stride = g->a_stride,
                         .b = db, .b_off = g->b_off, .ldb = g->ldb, .b_stride = g->b_stride,
                         .c = dc, .c_off = g->c_off, .ldc = g->ldc, .c_stride = g->c_stride,
                         .batch = g->batch};
    lf_timeline tl = {0};
    lf_status st = limit ? lf__gemm_limited(ctx, &args, &tl, limit) : lf__gemm(ctx, &args, &tl);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    if (limit) cr_expect_gt(tl.count, 1, "GEMM %zux%zux%zu past %zu elements ran in one piece", g->m, g->n, g->k, limit);
    else cr_expect_eq(tl.count, 1, "the GEMM's event was not recorded");
    cr_assert_eq(lf__download(ctx, dc, 0, c, nc * sizeof(float)), LF_OK);
    lf__timeline_reset(&tl);

    double *ref = malloc(g->m * g->n * sizeof *ref);
    float *got = malloc(g->m * g->n * sizeof *got);
    cr_assert(ref && got);
    for (size_t q = 0; q < batch; q++) {
        const float *A = a + g->a_off + q * g->a_stride, *B = b + g->b_off + q * g->b_stride;
        const size_t co = g->c_off + q * g->c_stride;
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) {
                double s = 0;
                for (size_t p = 0; p < g->k; p++) {
                    double av = g->ta ? A[p * g->lda + i] : A[i * g->lda + p];
                    double bv = g->tb ? B[j * g->ldb + p] : B[p * g->ldb + j];
                    s += av * bv;
                }
                ref[i * g->n + j] = g->alpha * s + (g->beta != 0.0f ? g->beta * (double)c0[co + i * g->ldc + j] : 0.0);
                got[i * g->n + j] = c[co + i * g->ldc + j];
            }
        double e = lf_test_rel_err(got, ref, g->m * g->n);
        cr_expect_lt(e, 1e-5, "GEMM %zux%zux%zu ta %d tb %d batch %zu/%zu: relative error %.3g", g->m, g->n,
                     g->k, g->ta, g->tb, q, batch, e);
    }
    size_t touched = 0;
    for (size_t i = 0; i < nc; i++)
        if (!inside[i] && c[i] != LF_POISON) touched++;
    cr_expect_eq(touched, 0, "the GEMM wrote %zu elements outside C's matrices", touched);

    free(ref);
    free(got);
    free(inside);
    lf__release(&da);
    lf__release(&db);
    lf__release(&dc);
    free(a);
    free(b);
    free(c0);
    free(c);
}

static void run_gemm(lf_context *ctx, const gemm_case *g)
{
    run_gemm_limited(ctx, g, 0);
}

TestSuite(gemm, .timeout = 600);

Test(gemm, plain_non_square)
{
    FOR_EACH_BACKEND(ctx) {
        gemm_case g = {.m = 7, .n = 5, .k = 3, .alpha = 1, .lda = 3, .ldb = 5, .ldc = 5};
        run_gemm(ctx, &g);
        gemm_case h = {.m = 1, .n = 33, .k = 17, .alpha = 1, .lda = 17, .ldb = 33, .ldc = 33};
        run_gemm(ctx, &h);
        /* past CLBlast's direct-kernel threshold, with sizes no tile divides */
        gemm_case i = {.tb = true, .m = 131, .n = 97, .k = 75, .alpha = 1, .a_off = 1, .lda = 77,
                       .ldb = 75, .c_off = 2, .ldc = 99};
        run_gemm(ctx, &i);
    }
}

Test(gemm, transposed_with_leading_dims_and_offsets)
{
    FOR_EACH_BACKEND(ctx) {
        /* op(A) = A^T: A is k x m; op(B) = B^T: B is n x k. */
        gemm_case g = {.ta = true, .tb = true, .m = 13, .n = 6, .k = 9, .alpha = 0.5f,
                       .a_off = 3, .lda = 15, .b_off = 5, .ldb = 11, .c_off = 7, .ldc = 8};
        run_gemm(ctx, &g);
        gemm_case h = {.ta = false, .tb = true, .m = 10, .n = 7, .k = 12, .alpha = 1,
                       .lda = 12, .ldb = 12, .ldc = 9};
        run_gemm(ctx, &h);
        gemm_case i = {.ta = true, .tb = false, .m = 5, .n = 11, .k = 4, .alpha = -2, .beta = 0.75f,
                       .a_off = 1, .lda = 5, .ldb = 11, .c_off = 2, .ldc = 13};
        run_gemm(ctx, &i);
    }
}

Test(gemm, strided_batched)
{
    FOR_EACH_BACKEND(ctx) {
        gemm_case g = {.m = 6, .n = 5, .k = 7, .alpha = 1, .lda = 7, .a_stride = 6 * 7 + 3,
                       .ldb = 5, .b_stride = 7 * 5, .ldc = 6, .c_stride = 6 * 6 + 4, .batch = 3};
        run_gemm(ctx, &g);
        gemm_case h = {.tb = true, .m = 9, .n = 4, .k = 8, .alpha = 0.25f, .beta = 1.0f,
                       .a_off = 2, .lda = 10, .a_stride = 9 * 10, .b_off = 1, .ldb = 8, .b_stride = 4 * 8 + 1,
                       .c_off = 3, .ldc = 4, .c_stride = 9 * 4 + 2, .batch = 4};
        run_gemm(ctx, &h);
        /* Broadcast B over the batch (stride 0), as attention does with shared weights. */
        gemm_case i = {.ta = true, .m = 3, .n = 8, .k = 5, .alpha = 1, .lda = 3, .a_stride = 15,
                       .ldb = 8, .b_stride = 0, .ldc = 8, .c_stride = 24, .batch = 5};
        run_gemm(ctx, &i);
    }
}

/* A B whose rows are packed (ldb = n), sizes that every tile divides, past the
 * direct kernel: CLBlast's batched GEMM may then read B in place, and must
 * still honour its offset and stride. The shape of the sequence projection
 * E x of a 1536-row sequence: at the second sequence of a batch (an offset),
 * and for E and F over the same x (stride 0); and one such GEMM at an offset. */
Test(gemm, strided_batched_packed_b_at_an_offset_or_broadcast)
{
    const size_t m = 256, n = 512, k = 1536;
    FOR_EACH_BACKEND(ctx) {
        gemm_case at_offset = {.m = m, .n = n, .k = k, .alpha = 1, .lda = k, .a_stride = m * k,
                               .b_off = k * n, .ldb = n, .b_stride = k * n, .ldc = n, .c_stride = m * n,
                               .batch = 2};
        run_gemm(ctx, &at_offset);
        gemm_case broadcast = {.m = m, .n = n, .k = k, .alpha = 1, .lda = 2 * k, .a_stride = k,
                               .ldb = n, .b_stride = 0, .ldc = 2 * n, .c_stride = n, .batch = 2};
        run_gemm(ctx, &broadcast);
        gemm_case one_at_offset = at_offset;
        one_at_offset.batch = 0;
        run_gemm(ctx, &one_at_offset);
    }
}

/* A and B in one buffer, as the attention reads queries and keys from Q|K|V. */
Test(gemm, operands_share_a_buffer)
{
    const size_t n = 12, d = 5, ld = 3 * d;
    float x[12 * 15], out[12 * 12];
    uint64_t state = lf_test_seed();
    lf_test_fill(x, n * ld, &state, -1, 1);
    FOR_EACH_BACKEND(ctx) {
        cl_mem qk, s;
        cr_assert_eq(lf__alloc(ctx, sizeof x, "Q|K", &qk), LF_OK);
        cr_assert_eq(lf__alloc(ctx, sizeof out, "S", &s), LF_OK);
        cr_assert_eq(lf__upload(ctx, qk, 0, x, sizeof x), LF_OK);
        lf_gemm_args g = {.trans_b = true, .m = n, .n = n, .k = d, .alpha = 1, .a = qk, .lda = ld,
                          .b = qk, .b_off = d, .ldb = ld, .c = s, .ldc = n};
        lf_status st = lf__gemm(ctx, &g, NULL);
        cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
        cr_assert_eq(lf__download(ctx, s, 0, out, sizeof out), LF_OK);
        double ref[12 * 12];
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double acc = 0;
                for (size_t p = 0; p < d; p++) acc += (double)x[i * ld + p] * x[j * ld + d + p];
                ref[i * n + j] = acc;
            }
        double e = lf_test_rel_err(out, ref, n * n);
        cr_expect_lt(e, 1e-5, "%s: relative error %.3g", backends[be_].name, e);
        lf__release(&qk);
        lf__release(&s);
    }
}

/* CLBlast indexes with 32-bit ints, so a GEMM whose operands reach past its
 * limit runs in pieces on sub-buffers (gemm.c). Here the limit is 2048
 * elements, and each case's longest operand is 2-4 times that, at offsets
 * past it: the batch halved, C's rows, C's columns with a long transposed B,
 * the inner dimension with a long transposed A or a long B (the second half
 * adding into C, beta 0 and not). */
Test(gemm, clblast_past_its_index_limit_runs_in_pieces)
{
    const size_t limit = 2048;
    lf_context *ctx = backend_context(0);
    const gemm_case cases[] = {
        {.m = 40, .n = 33, .k = 17, .alpha = 1, .a_off = 3, .lda = 19, .a_stride = 40 * 19 + 1, .b_off = 2,
         .ldb = 33, .b_stride = 17 * 33, .c_off = 700, .ldc = 35, .c_stride = 40 * 35 + 9, .batch = 5},
        {.tb = true, .m = 97, .n = 61, .k = 13, .alpha = 0.5f, .beta = 0.25f, .a_off = 1, .lda = 13, .ldb = 14,
         .c_off = 2500, .ldc = 64},
        {.ta = true, .m = 20, .n = 9, .k = 150, .alpha = 1, .lda = 23, .b_off = 7, .ldb = 9, .ldc = 9},
        {.ta = true, .m = 20, .n = 9, .k = 150, .alpha = -1, .beta = 0.75f, .a_off = 3000, .lda = 23, .ldb = 9,
         .ldc = 11},
        {.tb = true, .m = 6, .n = 120, .k = 30, .alpha = 1, .lda = 30, .ldb = 31, .b_off = 2100, .ldc = 120},
        {.m = 8, .n = 40, .k = 100, .alpha = 1, .beta = 0.5f, .lda = 100, .ldb = 41, .ldc = 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_gemm_limited(ctx, &cases[i], limit);

    /* no piece fits under a limit below the device's alignment: an error, and the context still works */
    cl_mem a, c;
    cr_assert_eq(lf__alloc(ctx, 64 * sizeof(float), "A", &a), LF_OK);
    cr_assert_eq(lf__alloc(ctx, 64 * sizeof(float), "C", &c), LF_OK);
    const lf_gemm_args g = {.m = 4, .n = 4, .k = 4, .alpha = 1, .a = a, .lda = 4, .b = a, .ldb = 4, .c = c, .ldc = 4};
    cr_assert_eq(lf__gemm_limited(ctx, &g, NULL, 1), LF_ERR_UNSUPPORTED);
    cr_expect(strstr(lf_context_last_error(ctx), "32-bit indices"), "%s", lf_context_last_error(ctx));
    lf__release(&a);
    lf__release(&c);
    run_gemm(ctx, &cases[1]);
    lf_context_free(ctx);
}

Test(gemm, too_small_c_is_a_blas_error)
{
    FOR_EACH_BACKEND(ctx) {
        cl_mem a, b, c;
        cr_assert_eq(lf__alloc(ctx, 16 * 16 * sizeof(float), "A", &a), LF_OK);
        cr_assert_eq(lf__alloc(ctx, 16 * 16 * sizeof(float), "B", &b), LF_OK);
        cr_assert_eq(lf__alloc(ctx, 4 * sizeof(float), "C", &c), LF_OK);
        lf_gemm_args g = {.m = 16, .n = 16, .k = 16, .alpha = 1, .a = a, .lda = 16, .b = b, .ldb = 16,
                          .c = c, .ldc = 16};
        lf_status st = lf__gemm(ctx, &g, NULL);
        const char *msg = lf_context_last_error(ctx);
        cr_expect_eq(st, LF_ERR_BLAS, "%s: got %s: %s", backends[be_].name, lf_status_string(st), msg);
        cr_expect(strstr(msg, "InsufficientMemoryC") || strstr(msg, "buffer of C"),
                  "%s: the message does not name C: %s", backends[be_].name, msg);

        /* A leading dimension below the row length is refused too. */
        g.c = a;
        g.ldc = 8;
        st = lf__gemm(ctx, &g, NULL);
        msg = lf_context_last_error(ctx);
        cr_expect_eq(st, LF_ERR_BLAS, "%s: got %s", backends[be_].name, lf_status_string(st));
        cr_expect(strstr(msg, "LeadDimC") || strstr(msg, "leading dimensions"), "%s: %s", backends[be_].name, msg);

        /* An empty GEMM does nothing and succeeds. */
        g.m = 0;
        cr_expect_eq(lf__gemm(ctx, &g, NULL), LF_OK);
        lf__release(&a);
        lf__release(&b);
        lf__release(&c);
    }
}

Test(gemm, unknown_backend_is_refused)
{
    cr_assert_eq(setenv("LINFORMER_GEMM", "cublas", 1), 0);
    lf_context *ctx = NULL;
    char msg[512] = "";
    lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "got %s", lf_status_string(st));
    cr_expect_null(ctx);
    cr_expect(strstr(msg, "LINFORMER_GEMM") && strstr(msg, "cublas"), "message: %s", msg);
    lf_context_free(ctx);
}

/* LINFORMER_HOST_BLAS chooses the host backend's library: a value that names
 * none, and an MKL that does not load, are refused with a message that says
 * which and why, and the context is not made. */
Test(gemm, host_blas_is_chosen_or_refused_by_name)
{
    cr_assert_eq(setenv("LINFORMER_GEMM", "host", 1), 0);
    const struct {
        const char *blas, *mkl, *says;
        lf_status st;
    } bad[] = {{"atlas", NULL, "LINFORMER_HOST_BLAS is \"atlas\"", LF_ERR_ARGUMENT},
               {"MKL", NULL, "LINFORMER_HOST_BLAS is \"MKL\"", LF_ERR_ARGUMENT},
               {"mkl", "/no/such/libmkl_rt.so.3", "/no/such/libmkl_rt.so.3", LF_ERR_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("LINFORMER_HOST_BLAS", bad[i].blas, 1), 0);
        if (bad[i].mkl) cr_assert_eq(setenv("LINFORMER_MKL", bad[i].mkl, 1), 0);
        lf_context *ctx = NULL;
        char msg[1024] = "";
        lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
        cr_expect_eq(st, bad[i].st, "%s: got %s", bad[i].blas, lf_status_string(st));
        cr_expect_null(ctx);
        cr_expect_neq(strstr(msg, bad[i].says), NULL, "%s: no \"%s\" in: %s", bad[i].blas, bad[i].says, msg);
        const char *name = "unset", *version = "unset";
        msg[0] = '\0';
        cr_expect_eq(lf_host_blas_library(&name, &version, msg, sizeof msg), bad[i].st);
        cr_expect_neq(strstr(msg, bad[i].says), NULL, "lf_host_blas_library: %s", msg);
        lf_context_free(ctx);
    }
    /* OpenBLAS, asked for, whatever MKL did */
    cr_assert_eq(setenv("LINFORMER_HOST_BLAS", "openblas", 1), 0);
    lf_context *ctx = lf_test_context();
    cr_expect_str_eq(lf_context_host_blas(ctx), "OpenBLAS");
    const char *name = NULL, *version = "unset";
    cr_expect_eq(lf_host_blas_library(&name, &version, NULL, 0), LF_OK);
    cr_expect_str_eq(name, "OpenBLAS");
    cr_expect_null(version);
    cr_expect_eq(lf_host_blas_library(NULL, NULL, NULL, 0), LF_ERR_ARGUMENT);
    cr_expect_null(lf_context_host_blas(NULL));
    lf_context_free(ctx);
}

/* MKL where this build has it: the context and lf_host_blas_library name it,
 * with MKL's own version string. */
Test(gemm, mkl_is_named_with_its_version)
{
    if (!lf_test_with_mkl()) cr_skip_test("this build has no MKL beside it");
    cr_assert_eq(setenv("LINFORMER_GEMM", "host", 1), 0);
    cr_assert_eq(setenv("LINFORMER_HOST_BLAS", "mkl", 1), 0);
    lf_context *ctx = lf_test_context();
    cr_expect_str_eq(lf_context_host_blas(ctx), "MKL");
    const char *name = NULL, *version = NULL;
    cr_expect_eq(lf_host_blas_library(&name, &version, NULL, 0), LF_OK);
    cr_expect_str_eq(name, "MKL");
    cr_expect(version && strstr(version, "Math Kernel Library"), "version: %s", version ? version : "NULL");
    lf_context_free(ctx);
}

Test(gemm, rate_of_each_backend)
{
    FOR_EACH_BACKEND(ctx) {
        double gflops = -1;
        lf_status st = lf_gemm_rate(ctx, 67, 45, 33, &gflops);
        cr_expect_eq(st, LF_OK, "%s: %s", backends[be_].name, lf_context_last_error(ctx));
        cr_expect_gt(gflops, 0.0, "%s: %g GFLOP/s", backends[be_].name, gflops);
        cr_expect_eq(lf_gemm_rate(ctx, 0, 4, 4, &gflops), LF_ERR_ARGUMENT);
        cr_expect_neq(strstr(lf_context_last_error(ctx), "positive"), NULL, "%s", lf_context_last_error(ctx));
        /* sizes whose products pass SIZE_MAX: refused before anything is allocated */
        cr_expect_eq(lf_gemm_rate(ctx, (size_t)1 << 61, 1, 2, &gflops), LF_ERR_ARGUMENT);
        cr_expect_eq(lf_gemm_rate(ctx, INT_MAX, INT_MAX, INT_MAX, &gflops), LF_ERR_OUT_OF_MEMORY, "%s",
                     lf_context_last_error(ctx));
        cr_expect_eq(lf_gemm_rate(ctx, 67, 45, 33, &gflops), LF_OK, "usable after: %s", lf_context_last_error(ctx));
        cr_expect_eq(lf_gemm_rate(ctx, 4, 4, 4, NULL), LF_ERR_ARGUMENT);
    }
    cr_expect_eq(lf_gemm_rate(NULL, 4, 4, 4, NULL), LF_ERR_ARGUMENT);
    cr_expect_null(lf_context_gemm_backend(NULL));
}

/* ---- Tuned parameters: stored, applied, and a bad entry ignored ---- */

static int lines_logged;
static bool no_entry_said;
static void count_line(const char *line, void *user)
{
    (void)user;
    lines_logged++;
    no_entry_said |= strstr(line, "no entry stored") != NULL;
}

/* The one entry file in dir (the tuner's), its path in out. */
static void only_entry(const char *dir, char *out, size_t size)
{
    char cmd[1200], log[1200] = "";
    snprintf(cmd, sizeof cmd, "ls %s", dir);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0);
    char name[256];
    cr_assert_eq(sscanf(log, "%255s", name), 1, "no entry in %s", dir);
    int lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    cr_assert_eq(lines, 1, "expected one entry in %s, found: %s", dir, log);
    snprintf(out, size, "%s/%s", dir, name);
}

Test(gemm, tune_stores_and_applies_and_ignores_a_bad_entry, .timeout = 1200)
{
    char dir[64];
    lf_test_make_dir(dir, "tune");
    cr_assert_eq(setenv("LINFORMER_CACHE_DIR", dir, 1), 0);
    lf_context *ctx = backend_context(0) /* clblast */;
    lf_status st = lf_gemm_tune(ctx, 0.5, count_line, NULL);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_gt(lines_logged, 3);
    cr_expect_eq(lf_gemm_tune(ctx, 0, NULL, NULL), LF_ERR_ARGUMENT);
    lf_context_free(ctx);

    char path[1400], log[1200] = "", cmd[1200];
    if (no_entry_said) { /* nothing beat CLBlast's own parameters in time (a slow build): nothing stored */
        snprintf(cmd, sizeof cmd, "ls -A %s", dir);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0);
        cr_expect_str_empty(log, "\"no entry stored\", yet %s holds %s", dir, log);
    } else {
        only_entry(dir, path, sizeof path);
        /* A new context applies the entry; its GEMMs stay right on both kernels. */
        gemm_case small = {.tb = true, .m = 19, .n = 23, .k = 17, .alpha = 1, .lda = 17, .ldb = 17, .ldc = 23};
        gemm_case large = {.tb = true, .m = 300, .n = 129, .k = 70, .alpha = 1, .beta = 0.5f, .a_off = 3,
                           .lda = 70, .ldb = 71, .ldc = 130, .c_off = 1};
        ctx = backend_context(0) /* clblast */;
        run_gemm(ctx, &small);
        run_gemm(ctx, &large);
        lf_context_free(ctx);

        /* A damaged entry is ignored: CLBlast's own parameters, right results. */
        FILE *f = fopen(path, "r+b");
        cr_assert_not_null(f);
        cr_assert_eq(fseek(f, -4, SEEK_END), 0);
        cr_assert_eq(fwrite("zzzz", 1, 4, f), 4);
        fclose(f);
        ctx = backend_context(0) /* clblast */;
        run_gemm(ctx, &large);
        lf_context_free(ctx);
    }

    /* Without a cache there is nowhere to keep the result. */
    cr_assert_eq(setenv("LINFORMER_CACHE_DIR", "off", 1), 0);
    ctx = backend_context(0) /* clblast */;
    cr_expect_eq(lf_gemm_tune(ctx, 0.5, NULL, NULL), LF_ERR_IO);
    cr_expect_neq(strstr(lf_context_last_error(ctx), "LINFORMER_CACHE_DIR"), NULL, "%s", lf_context_last_error(ctx));
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}
