/* weight_shape.c - a weight's shape and the check every setter applies (see weight_shape.h). */
#include <stdio.h>

#include "weight_shape.h"

size_t lf__shape_count(const lf_shape *s)
{
    size_t count = 1;
    for (size_t i = 0; i < s->ndim; i++) count *= s->dim[i];
    return count;
}

lf_shape lf__slot_shape(const lf_plan *p, lf_weight_id id)
{
    const lf_weight_slot *s = &p->weights[id];
    const bool matrix = (id == LF_P_E || id == LF_P_F) && p->cfg.proj_kind != LF_PROJ_CONV;
    lf_shape out = {0, {0}};
    if (s->rows) out.dim[out.ndim++] = s->rows;
    if (matrix) {
        out.dim[out.ndim++] = (size_t)p->cfg.k;
        out.dim[out.ndim++] = (size_t)p->cfg.max_seq_len;
    } else {
        out.dim[out.ndim++] = s->cols;
    }
    if (!s->count) out.dim[0] = 0; /* absent in this configuration */
    return out;
}

/* "[a, b, c]" into buf. */
static const char *shape_text(char *buf, size_t size, const size_t *dims, size_t ndims)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; i < ndims && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%zu", i ? ", " : "", dims[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

lf_status lf__weight_check(lf_context *ctx, const char *what, const lf_shape *want, const size_t *dims, size_t ndims,
                           size_t count)
{
    const size_t floats = lf__shape_count(want);
    char expected[96], got[96];
    shape_text(expected, sizeof expected, want->dim, want->ndim);
    if (!dims) {
        if (count == floats) return LF_OK;
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s holds %zu floats, got %zu (its shape is %s)", what, floats, count,
                        expected);
    }
    bool same = ndims == want->ndim;
    for (size_t i = 0; same && i < ndims; i++) same = dims[i] == want->dim[i];
    if (same) return LF_OK;
    if (ndims > 8) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is %s, got %zu dimensions", what, expected, ndims);
    return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is %s, got %s", what, expected, shape_text(got, sizeof got, dims, ndims));
}
