/* run_model.h - `linformer run` on a whole model (cmd_run_model.c). */
#ifndef LF_RUN_MODEL_H
#define LF_RUN_MODEL_H

#include <stdbool.h>

typedef struct {
    const char *model, *input, *output, *device;
    const char *prefix, *activation, *norm; /* NULL = from the file */
    int heads, repeat;                      /* heads 0 = from the file */
} run_model_args;

/* Whether `path` holds one attention layer (lucidrains' LinformerSelfAttention
 * names at its top level) rather than a model; a prefix always means a model. */
bool run_is_layer_file(const char *path, const char *prefix);

/* Loads the model, runs it on the input file, writes `y`; returns the exit status. */
int run_model(const run_model_args *a);

#endif
