/* run_model.h - what `linformer run` does differently for a whole model (cmd_run_model.c). */
#ifndef LF_RUN_MODEL_H
#define LF_RUN_MODEL_H

#include <stdbool.h>

#include "linformer.h"

typedef struct {
    const char *prefix, *activation, *norm; /* NULL = from the file */
    int heads;                              /* 0 = from the file */
} run_model_args;

/* Whether `path` holds one attention layer (lucidrains' LinformerSelfAttention
 * names at its top level) rather than a model; a prefix always means a model. */
bool run_is_layer_file(const char *path, const char *prefix);

/* Loads the model and says on stderr what it found: 0, 1 (failed, said why)
 * or 2 (a bad or contradicting option). */
int run_model_load(lf_context *ctx, const char *path, const run_model_args *a, lf_model **out, lf_model_info *info);

#endif
