/*
 * tune_use.c - CLBlast's parameters in force, per device, and the sets of a
 * GEMM's shape class applied before it runs.
 *
 * CLBlast keeps one set per kernel and device for the whole process, and
 * compiles a program per set once: switching between the classes' sets costs
 * an OverrideParameters call, no compile after the first. The sets last
 * applied to each device are noted here, so a GEMM of the class in force
 * applies nothing. Every call here runs under the CLBlast lock.
 */
#include "blas.h" /* first: it fixes the OpenCL version the headers target */
#include "tune_space.h"

#include <clblast_c.h>
#include <string.h>

#define LF_DEVICES_NOTED 16

/* The sets last applied to a device, by kernel. */
typedef struct {
    cl_device_id device;
    bool known[K_COUNT];
    size_t v[K_COUNT][LF_TUNE_MAX_PARAMS];
} lf_in_force;

static lf_in_force noted[LF_DEVICES_NOTED]; /* under the CLBlast lock */

/* The device's note; a new one (nothing known) when it had none, the oldest
 * slot's reused when all are taken (its next GEMM applies its sets again). */
static lf_in_force *note_of(cl_device_id device)
{
    static unsigned next;
    for (int i = 0; i < LF_DEVICES_NOTED; i++)
        if (noted[i].device == device) return &noted[i];
    lf_in_force *n = &noted[next++ % LF_DEVICES_NOTED];
    memset(n, 0, sizeof *n);
    n->device = device;
    return n;
}

lf_status lf__tune_set(lf_context *ctx, int kernel, const size_t *values)
{
    const lf_space *s = &lf__tune_spaces[kernel];
    lf__clblast_lock();
    lf_in_force *n = note_of(ctx->device);
    CLBlastStatusCode st = CLBlastOverrideParameters(ctx->device, s->kernel, CLBlastPrecisionSingle,
                                                     (size_t)s->count, (const char **)s->names, values);
    n->known[kernel] = st == CLBlastSuccess; /* a refused set leaves the one before, or part of it */
    if (n->known[kernel]) memcpy(n->v[kernel], values, (size_t)s->count * sizeof *values);
    lf__clblast_unlock();
    if (st != CLBlastSuccess)
        return lf__fail(ctx, LF_ERR_BLAS, "CLBlast refused the parameters of %s (status %d)", s->kernel, (int)st);
    return LF_OK;
}

void lf__tune_use(lf_context *ctx, size_t m, size_t n, size_t k)
{
    if (!ctx->tuned) return;
    const int c = lf__gemm_class(m, n, k);
    lf_in_force *in = note_of(ctx->device);
    for (int kernel = 0; kernel < K_COUNT; kernel++) {
        const size_t *want = ctx->tuned->v[c][kernel];
        const size_t bytes = (size_t)lf__tune_spaces[kernel].count * sizeof *want;
        if (!ctx->tuned->have[c][kernel] || (in->known[kernel] && memcmp(in->v[kernel], want, bytes) == 0))
            continue;
        if (lf__tune_set(ctx, kernel, want) == LF_OK) ctx->tune_applied++; /* refused: CLBlast's call says so */
    }
}

bool lf__tune_in_force(cl_device_id device, int kernel, size_t *values)
{
    lf__clblast_lock();
    const lf_in_force *n = note_of(device);
    const bool known = n->known[kernel];
    if (known) memcpy(values, n->v[kernel], (size_t)lf__tune_spaces[kernel].count * sizeof *values);
    lf__clblast_unlock();
    return known;
}
