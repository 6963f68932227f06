/*
 * gemm_time.c - the GEMMs' yardstick: a GEMM shape timed on the device (and
 * its result checked against the host BLAS's), and lf_gemm_rate.
 */
#include "blas.h" /* first: it fixes the OpenCL version the headers target */

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- The operands ---- */

/* Elements of A, B, C over the batch. */
static void sizes(const lf_gemm_shape *s, size_t n[3])
{
    n[0] = s->batch * s->m * s->k;
    n[1] = (s->b_batched ? s->batch : 1) * s->k * s->n;
    n[2] = s->batch * s->m * s->n;
}

/* A's and B's values, in a pattern of their own each. */
static float operand(int which, size_t i)
{
    return which == 0 ? (float)(i % 17) / 17.0f - 0.5f : (float)(i % 13) / 13.0f - 0.25f;
}

static float *filled(int which, size_t count)
{
    float *x = malloc((count ? count : 1) * sizeof *x);
    for (size_t i = 0; x && i < count; i++) x[i] = operand(which, i);
    return x;
}

/* The GEMM's arguments on packed A, B, C. */
static lf_gemm_args packed_args(const lf_gemm_shape *s, cl_mem a, cl_mem b, cl_mem c)
{
    lf_gemm_args g = {.trans_a = s->trans_a, .trans_b = s->trans_b, .m = s->m, .n = s->n, .k = s->k,
                      .alpha = 1.0f, .a = a, .lda = s->trans_a ? s->m : s->k, .a_stride = s->m * s->k,
                      .b = b, .ldb = s->trans_b ? s->k : s->n, .b_stride = s->b_batched ? s->k * s->n : 0,
                      .c = c, .ldc = s->n, .c_stride = s->m * s->n};
    if (s->batched && s->batch == 1 && !s->trans_a) g.seq_rows = s->m; /* the batched call, of one */
    else if (s->batched) g.batch = s->batch;
    return g;
}

float *lf__gemm_reference(const lf_gemm_shape *s)
{
    size_t n[3];
    sizes(s, n);
    float *a = filled(0, n[0]), *b = filled(1, n[1]), *c = malloc((n[2] ? n[2] : 1) * sizeof *c);
    if (a && b && c)
        for (size_t i = 0; i < s->batch; i++)
            cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans, s->trans_b ? CblasTrans : CblasNoTrans,
                        (int)s->m, (int)s->n, (int)s->k, 1.0f, a + i * s->m * s->k, s->trans_a ? (int)s->m : (int)s->k,
                        b + (s->b_batched ? i * s->k * s->n : 0), s->trans_b ? (int)s->k : (int)s->n, 0.0f,
                        c + i * s->m * s->n, (int)s->n);
    free(a), free(b);
    if (!(a && b)) free(c);
    return a && b ? c : NULL;
}

/* ||c - ref|| / ||ref||. */
static double relative_error(const float *c, const float *ref, size_t count)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < count; i++) {
        const double d = (double)c[i] - ref[i];
        diff += d * d, norm += (double)ref[i] * ref[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ---- Timing ---- */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One GEMM timed from a marker before it (CLBlast's own event covers only the
 * last of its kernels) to its end. */
static lf_status timed_gemm(lf_context *ctx, const lf_gemm_args *g, double *ms)
{
    lf_timeline t = {0};
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, lf__event(&t));
    if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
    lf__event_done(&t, NULL);
    lf_status st = lf__gemm(ctx, g, &t);
    if (st == LF_OK) st = lf__timeline_ms(ctx, &t, ms);
    lf__timeline_reset(&t);
    return st;
}

#define LF_RATE_REPEAT 5

/* Uploads A and B (filled on the host) to new buffers, with C beside them. */
static lf_status operands(lf_context *ctx, const size_t n[3], cl_mem mem[3])
{
    LF_TRY(lf__host_memory_check(ctx, (n[0] > n[1] ? n[0] : n[1]) * sizeof(float),
                                 "the GEMM's operands, filled on the host,"));
    static const char *const what[3] = {"GEMM A", "GEMM B", "GEMM C"};
    lf_status st = LF_OK;
    for (int i = 0; i < 3 && st == LF_OK; i++) st = lf__alloc(ctx, n[i] * sizeof(float), what[i], &mem[i]);
    for (int i = 0; i < 2 && st == LF_OK; i++) {
        float *host = filled(i, n[i]);
        st = host ? lf__upload(ctx, mem[i], 0, host, n[i] * sizeof(float))
                  : lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %zu floats", n[i]);
        free(host);
    }
    return st;
}

/* C's last value against the reference. */
static lf_status check(lf_context *ctx, const lf_gemm_shape *s, cl_mem c, size_t count, const float *reference)
{
    float *out = malloc(count * sizeof *out);
    if (!out) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %zu floats", count);
    lf_status st = lf__download(ctx, c, 0, out, count * sizeof *out);
    const double err = st == LF_OK ? relative_error(out, reference, count) : 0;
    free(out);
    if (st == LF_OK && !(err <= 1e-4))
        st = lf__fail(ctx, LF_ERR_BLAS, "GEMM %zux%zux%zu (batch %zu) is wrong: relative error %.3g against the host "
                      "BLAS's", s->m, s->n, s->k, s->batch, err);
    return st;
}

lf_status lf__gemm_time(lf_context *ctx, const lf_gemm_shape *s, int repeat, const float *reference, double *ms)
{
    if (repeat < 1 || repeat > LF_RATE_REPEAT) repeat = LF_RATE_REPEAT;
    size_t n[3];
    sizes(s, n);
    cl_mem mem[3] = {NULL, NULL, NULL};
    lf_status st = operands(ctx, n, mem);
    const lf_gemm_args g = packed_args(s, mem[0], mem[1], mem[2]);
    double runs[LF_RATE_REPEAT + 1];
    for (int r = 0; st == LF_OK && r <= repeat; r++) st = timed_gemm(ctx, &g, &runs[r]);
    if (st == LF_OK && reference) st = check(ctx, s, mem[2], n[2], reference);
    if (st == LF_OK) { /* runs[0] is the warm-up */
        qsort(runs + 1, (size_t)repeat, sizeof *runs, cmp_double);
        *ms = runs[1 + repeat / 2];
    }
    for (int i = 0; i < 3; i++) lf__release(&mem[i]);
    return st;
}

lf_status lf__gemm_rate(lf_context *ctx, size_t m, size_t n, size_t k, int repeat, double *gflops)
{
    /* C = A B^T, as the layer's projections x W^T */
    const lf_gemm_shape s = {.trans_b = true, .m = m, .n = n, .k = k, .batch = 1, .calls = 1};
    double ms = 0;
    LF_TRY(lf__gemm_time(ctx, &s, repeat, NULL, &ms));
    *gflops = ms > 0 ? 2.0 * (double)m * n * k / (ms * 1e6) : 0.0;
    return LF_OK;
}

lf_status lf_gemm_rate(lf_context *ctx, size_t m, size_t n, size_t k, double *gflops)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!gflops) return lf__fail(ctx, LF_ERR_ARGUMENT, "gflops is NULL");
    if (m == 0 || n == 0 || k == 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "GEMM sizes must be positive, at most %d, got m %zu, n %zu, k %zu",
                        INT_MAX, m, n, k);
    /* Each of A, B, C and the host copy of the larger of A and B in bytes a size_t
     * (always so with 64 bits). */
    const size_t most = SIZE_MAX / sizeof(float);
    if (k > most / (m > n ? m : n) || n > most / m)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "a GEMM of m %zu, n %zu, k %zu has matrices past the address space",
                        m, n, k);
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__gemm_rate(ctx, m, n, k, LF_RATE_REPEAT, gflops);
    lf__context_unlock(ctx);
    return st;
}
