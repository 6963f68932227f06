/* bandwidth.c - the copy bandwidth, yardstick of the elementwise kernels (lf_copy_rate). */
#include "launch.h" /* first: runtime.h fixes the OpenCL version the headers target */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LF_COPY_REPEAT 5

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times `repeat` + 1 copies src -> dst (the first a warm-up) into ms[]. */
static lf_status timed_copies(lf_context *ctx, const lf_copy_args *a, int repeat, double *ms)
{
    lf_status st = LF_OK;
    for (int r = 0; st == LF_OK && r <= repeat; r++) {
        lf_timeline t = {0};
        st = lf__launch_copy(ctx, a, &t);
        if (st == LF_OK) st = lf__timeline_ms(ctx, &t, &ms[r]);
        lf__timeline_reset(&t);
    }
    return st;
}

/* Whether dst holds src's floats again (the copy kernel did its work). */
static lf_status check_copy(lf_context *ctx, cl_mem dst, const float *want, size_t floats)
{
    float *got = malloc(floats * sizeof *got);
    if (!got) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory to check the copy of %zu floats", floats);
    lf_status st = lf__download(ctx, dst, 0, got, floats * sizeof *got);
    if (st == LF_OK && memcmp(got, want, floats * sizeof *got) != 0)
        st = lf__fail(ctx, LF_ERR_OPENCL, "the copy kernel's output differs from its input (%zu floats)", floats);
    free(got);
    return st;
}

lf_status lf_copy_rate(lf_context *ctx, size_t floats, double *gbps)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!gbps) return lf__fail(ctx, LF_ERR_ARGUMENT, "gbps is NULL");
    if (floats == 0 || floats > INT_MAX)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "floats must be 1 to %d, got %zu", INT_MAX, floats);
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    LF_TRY(lf__context_lock(ctx));
    float *host = malloc(floats * sizeof *host);
    if (!host) {
        lf__context_unlock(ctx);
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %zu floats", floats);
    }
    for (size_t i = 0; i < floats; i++) host[i] = (float)(i % 251) - 125.0f;
    cl_mem src = NULL, dst = NULL;
    lf_kernel_params kp;
    lf_status st = lf__kernel_params(&ctx->info, &kp, ctx->error, sizeof ctx->error);
    if (st == LF_OK) st = lf__alloc(ctx, floats * sizeof(float), "copy source", &src);
    if (st == LF_OK) st = lf__alloc(ctx, floats * sizeof(float), "copy destination", &dst);
    if (st == LF_OK) st = lf__upload(ctx, src, 0, host, floats * sizeof *host);
    const lf_copy_args a = {.src = src, .dst = dst, .count = floats, .params = &kp};
    double ms[LF_COPY_REPEAT + 1];
    if (st == LF_OK) st = timed_copies(ctx, &a, LF_COPY_REPEAT, ms);
    if (st == LF_OK) st = check_copy(ctx, dst, host, floats);
    if (st == LF_OK) { /* ms[0] is the warm-up */
        qsort(ms + 1, LF_COPY_REPEAT, sizeof *ms, cmp_double);
        const double median = ms[1 + LF_COPY_REPEAT / 2];
        *gbps = median > 0 ? 8.0 * (double)floats / (median * 1e6) : 0.0;
    }
    lf__release(&src), lf__release(&dst);
    lf__context_unlock(ctx);
    free(host);
    return st;
}
