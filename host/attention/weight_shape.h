/*
 * weight_shape.h - the shape each weight has, and the one check that every
 * setter (count-based or shaped, layer or model) applies before an upload.
 */
#ifndef LF_WEIGHT_SHAPE_H
#define LF_WEIGHT_SHAPE_H

#include <stddef.h>

#include "runtime.h"
#include "plan.h"

typedef struct {
    size_t ndim;   /* 1 to 3 */
    size_t dim[3]; /* a weight that does not exist has a 0 dimension */
} lf_shape;

size_t lf__shape_count(const lf_shape *s);

/* The shape of a layer's weight: [rows, cols] or [cols], and for a learned E
 * or F [KV, k, max_seq_len] or [k, max_seq_len]. */
lf_shape lf__slot_shape(const lf_plan *p, lf_weight_id id);

/*
 * Checks what a caller hands in against `want`: with dims (ndims of them) the
 * shape must equal it, else `count` must equal its element count. `what` names
 * the weight in the message (e.g. "weight \"e\""). LF_ERR_ARGUMENT on ctx, naming
 * the expected shape, when they differ.
 */
lf_status lf__weight_check(lf_context *ctx, const char *what, const lf_shape *want, const size_t *dims, size_t ndims,
                           size_t count);

#endif
