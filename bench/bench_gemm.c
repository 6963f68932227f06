/* bench_gemm.c - the device's SGEMM rate through the library's CLBlast wrapper. */
#include "bench_gemm.h"

#include <stdio.h>
#include <stdlib.h>

#include "internal.h" /* lf__gemm and the timeline of events */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed GEMM: a marker opens the timeline, as CLBlast's own event covers
 * only the last of its kernels. */
static lf_status timed_gemm(lf_context *ctx, const lf_gemm_args *g, double *ms)
{
    lf_timeline t = {0};
    cl_int err = clEnqueueMarkerWithWaitList(lf_context_cl_queue(ctx), 0, NULL, lf__event(&t));
    if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
    lf__event_done(&t, NULL);
    lf_status st = lf__gemm(ctx, g, &t);
    if (st == LF_OK) st = lf__timeline_ms(ctx, &t, ms);
    lf__timeline_reset(&t);
    return st;
}

int bench_gemm_rate(lf_context *ctx, size_t size, int repeat, double *gflops, char *err, size_t err_size)
{
    const size_t count = size * size;
    float *host = malloc(count * sizeof *host);
    double *ms = calloc((size_t)repeat, sizeof *ms);
    cl_mem a = NULL, b = NULL, c = NULL;
    lf_status st = host && ms ? LF_OK : LF_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; host && i < count; i++) host[i] = (float)(i % 17) / 17.0f - 0.5f;
    if (st == LF_OK) st = lf__alloc(ctx, count * sizeof(float), "GEMM A", &a);
    if (st == LF_OK) st = lf__alloc(ctx, count * sizeof(float), "GEMM B", &b);
    if (st == LF_OK) st = lf__alloc(ctx, count * sizeof(float), "GEMM C", &c);
    if (st == LF_OK) st = lf__upload(ctx, a, 0, host, count * sizeof(float));
    if (st == LF_OK) st = lf__upload(ctx, b, 0, host, count * sizeof(float));
    const lf_gemm_args g = {.trans_b = true, .m = size, .n = size, .k = size, .alpha = 1.0f,
                            .a = a, .lda = size, .b = b, .ldb = size, .c = c, .ldc = size};
    double warm = 0;
    if (st == LF_OK) st = timed_gemm(ctx, &g, &warm);
    for (int r = 0; st == LF_OK && r < repeat; r++) st = timed_gemm(ctx, &g, &ms[r]);
    if (st == LF_OK) {
        qsort(ms, (size_t)repeat, sizeof *ms, cmp_double);
        *gflops = 2.0 * (double)size * size * size / (ms[repeat / 2] * 1e6);
    } else {
        snprintf(err, err_size, "GEMM rate: %s: %s", lf_status_string(st),
                 host && ms ? lf_context_last_error(ctx) : "out of host memory");
    }
    lf__release(&a), lf__release(&b), lf__release(&c);
    free(host), free(ms);
    return st == LF_OK ? 0 : -1;
}
