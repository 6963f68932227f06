/* attention.h - what other parts of the library reach of an attention layer
 * (attention.c): its plan, and weights copied in from the device. */
#ifndef LF_ATTENTION_H
#define LF_ATTENTION_H

#include "plan.h"

const lf_plan *lf__attention_plan(const lf_attention *layer);

/* Sets weight `id` (which the plan has) from `offset` floats into `from`, a
 * buffer of the layer's context, as lf_attention_set_weight would from the
 * host. The caller holds the context's lock. */
lf_status lf__attention_copy_weight(lf_attention *layer, lf_weight_id id, cl_mem from, size_t offset);

#endif
