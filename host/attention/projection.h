/* projection.h - a projection E = F that several layers share (LF_SHARE_LAYERWISE). */
#ifndef LF_PROJECTION_H
#define LF_PROJECTION_H

#include "runtime.h"

struct lf_projection {
    lf_context *ctx; /* held: the context lives while the projection does */
    int k, max_seq_len;
    int refs;        /* the owner's and each layer's; under ctx->lock */
    bool set;        /* learned values were set, or the kind is random */
    cl_mem e;        /* [k, max_seq_len] */
};

/* A layer takes a reference (under the context's lock) and gives it back with
 * lf_projection_free. */
void lf__projection_retain(lf_projection *proj);

/* Uploads `count` values of N(0, std^2) drawn from *state at element `offset`. */
lf_status lf__upload_normal(lf_context *ctx, cl_mem buf, size_t offset, size_t count, uint64_t *state, double std);

#endif
