/* projection.c - projections E = F shared by several layers (LF_SHARE_LAYERWISE). */
#include "projection.h"

#include <math.h>
#include <stdlib.h>

lf_status lf__upload_normal(lf_context *ctx, cl_mem buf, size_t offset, size_t count, uint64_t *state, double std)
{
    float *tmp = malloc(count * sizeof *tmp);
    if (!tmp) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %zu random values", count);
    for (size_t i = 0; i < count; i++) tmp[i] = (float)(lf__rand_normal(state) * std);
    lf_status st = lf__upload(ctx, buf, offset * sizeof(float), tmp, count * sizeof *tmp);
    free(tmp);
    return st;
}

static lf_status check_create(lf_context *ctx, int k, int max_seq_len, lf_proj_kind kind)
{
    if (k <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "k must be positive, got %d", k);
    if (max_seq_len <= 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "max_seq_len must be positive, got %d", max_seq_len);
    if (kind != LF_PROJ_LEARNED && kind != LF_PROJ_RANDOM)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "a shared projection is LF_PROJ_LEARNED or LF_PROJ_RANDOM");
    if ((uint64_t)k * (uint64_t)max_seq_len > (1ull << 40)) /* beyond any device: refused before allocating */
        return lf__fail(ctx, LF_ERR_ARGUMENT, "k x max_seq_len (%d x %d) is too large", k, max_seq_len);
    return LF_OK;
}

lf_status lf_projection_create(lf_context *ctx, int k, int max_seq_len, lf_proj_kind kind, uint64_t seed,
                               lf_projection **out)
{
    if (out) *out = NULL;
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    LF_TRY(check_create(ctx, k, max_seq_len, kind));
    lf_projection *p = calloc(1, sizeof *p);
    if (!p) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for a projection");
    *p = (lf_projection){.ctx = ctx, .k = k, .max_seq_len = max_seq_len, .refs = 1};
    lf_status st = lf__context_lock(ctx);
    if (st == LF_OK) {
        const size_t count = (size_t)k * max_seq_len;
        st = lf__alloc(ctx, count * sizeof(float), "projection E", &p->e);
        if (st == LF_OK && kind == LF_PROJ_RANDOM) {
            uint64_t state = seed;
            st = lf__upload_normal(ctx, p->e, 0, count, &state, 1.0 / sqrt((double)k));
            p->set = st == LF_OK;
        }
        lf__context_unlock(ctx);
    }
    if (st != LF_OK) {
        lf__release(&p->e);
        free(p);
        return st;
    }
    lf__context_retain(ctx);
    *out = p;
    return LF_OK;
}

lf_status lf_projection_set(lf_projection *proj, const float *data, size_t count)
{
    if (!proj) return LF_ERR_ARGUMENT;
    lf_context *ctx = proj->ctx;
    if (!data) return lf__fail(ctx, LF_ERR_ARGUMENT, "data is NULL");
    const size_t want = (size_t)proj->k * proj->max_seq_len;
    if (count != want)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "projection: expected [%d, %d] = %zu floats, got %zu", proj->k,
                        proj->max_seq_len, want, count);
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__upload(ctx, proj->e, 0, data, count * sizeof(float));
    if (st == LF_OK) proj->set = true;
    lf__context_unlock(ctx);
    return st;
}

void lf__projection_retain(lf_projection *proj) { proj->refs++; }

void lf_projection_free(lf_projection *proj)
{
    if (!proj || lf__context_inherited(proj->ctx)) return;
    lf_context *ctx = proj->ctx;
    pthread_mutex_lock(&ctx->lock);
    const bool last = --proj->refs == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (!last) return;
    lf__release(&proj->e);
    free(proj);
    lf__context_release(ctx);
}
