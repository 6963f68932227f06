/* loader.h - the load options' check (loader.c), which a model's layer taken
 * as an attention layer of its own applies too (model_layer.c). */
#ifndef LF_LOADER_H
#define LF_LOADER_H

#include "runtime.h"

/* LF_ERR_ARGUMENT naming the first field of lf_load_options out of range, or a
 * k given with the learned projections. */
lf_status lf__load_options_check(lf_context *ctx, const lf_load_options *o);

#endif
