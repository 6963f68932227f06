/*
 * cmd_run_model.c - what `linformer run` does differently for a whole model:
 * an encoder stack (x -> y) or a language model (tokens -> logits), as the
 * file says; cmd_run.c runs it like a layer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_model.h"

bool run_is_layer_file(const char *path, const char *prefix)
{
    lf_tensor_file *f = NULL;
    lf_tensor_info t;
    if (prefix || lf_tensor_file_open(path, &f, NULL, 0) != LF_OK) return false; /* the model loader reports the file */
    const bool layer = lf_tensor_file_find(f, "to_q.weight", &t) == LF_OK;
    lf_tensor_file_free(f);
    return layer;
}

static int options(const run_model_args *a, lf_model_options *o)
{
    *o = (lf_model_options){.heads = a->heads, .prefix = a->prefix};
    if (a->activation && lf_activation_parse(a->activation, &o->activation) != LF_OK) {
        fprintf(stderr, "linformer run: --activation is gelu, gelu_tanh or relu, got \"%s\"\n", a->activation);
        return 2;
    }
    if (a->norm && lf_norm_parse(a->norm, &o->norm) != LF_OK) {
        fprintf(stderr, "linformer run: --norm is pre or post, got \"%s\"\n", a->norm);
        return 2;
    }
    return 0;
}

static void describe(lf_context *ctx, const lf_model_info *i)
{
    fprintf(stderr, "linformer run: %s %s: %d layers, d_model %d, heads %d, d_ff %d", i->layout,
            lf_model_kind_name(i->kind), i->layers, i->d_model, i->heads, i->d_ff);
    if (i->vocab) fprintf(stderr, ", vocabulary %d", i->vocab);
    fprintf(stderr, ", %s-norm, %s%s%s, max_seq_len %d\n", lf_norm_name(i->norm), lf_activation_name(i->activation),
            i->glu ? " (GLU)" : "", i->layerwise ? ", one projection for all layers" : "", i->max_seq_len);
}

int run_model_load(lf_context *ctx, const char *path, const run_model_args *a, lf_model **out, lf_model_info *info)
{
    lf_model_options opts;
    if (options(a, &opts)) return 2;
    const lf_status st = lf_model_load(ctx, path, &opts, out);
    if (st != LF_OK) {
        fprintf(stderr, "linformer run: %s: %s\n", lf_status_string(st), lf_context_last_error(ctx));
        return st == LF_ERR_ARGUMENT ? 2 : 1;
    }
    lf_model_info_get(*out, info);
    describe(ctx, info);
    return 0;
}
