/*
 * cmd_run_model.c - `linformer run` on a whole model: an encoder stack (x ->
 * y) or a language model (tokens -> logits), as the file says. Prints on
 * stderr the device and the kind of model found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linformer.h"
#include "run_model.h"
#include "safetensors.h"

bool run_is_layer_file(const char *path, const char *prefix)
{
    lf_st_file f;
    if (prefix || lf_st_open(path, &f, NULL, 0) != LF_OK) return false; /* the model loader reports the file */
    const bool layer = lf_st_find(&f, "to_q.weight") != NULL;
    lf_st_close(&f);
    return layer;
}

/* The input: x [B, n, D] or tokens [B, n], and optional lengths [B]. */
typedef struct {
    float *x;
    int64_t *tokens;
    int32_t *lengths;
    int batch, n;
} model_input;

static int fail(const char *path, const char *what)
{
    fprintf(stderr, "linformer run: %s: %s\n", path, what);
    return 1;
}

static int read_lengths(const char *path, const lf_st_tensor *t, model_input *in)
{
    char msg[512];
    int64_t *v = malloc(in->batch * sizeof *v);
    in->lengths = malloc(in->batch * sizeof *in->lengths);
    if (!v || !in->lengths || t->ndim != 1 || t->shape[0] != in->batch || lf_st_to_i64(t, v, msg, sizeof msg) != LF_OK) {
        free(v);
        return fail(path, "tensor \"lengths\" must be integers [batch]");
    }
    for (int b = 0; b < in->batch; b++) in->lengths[b] = v[b] < 0 || v[b] > in->n ? -1 : (int32_t)v[b];
    free(v); /* a length out of range reaches the library as -1, which names it */
    return 0;
}

static int read_model_input(const char *path, const lf_model_info *info, model_input *in)
{
    lf_st_file f;
    char msg[1024];
    if (lf_st_open(path, &f, msg, sizeof msg) != LF_OK) return fail(path, msg);
    const bool tokens = info->kind != LF_MODEL_ENCODER;
    const char *want = tokens ? "tokens" : "x";
    const lf_st_tensor *t = lf_st_find(&f, want), *len = lf_st_find(&f, "lengths");
    int rc = 1;
    for (size_t i = 0; i < f.count; i++)
        if (strcmp(f.tensors[i].name, want) && strcmp(f.tensors[i].name, "lengths"))
            fprintf(stderr, "linformer run: %s: note: tensor \"%s\" is not an input, ignored\n", path, f.tensors[i].name);
    const int ndim = tokens ? 2 : 3;
    if (!t || t->ndim != ndim || t->shape[0] <= 0 || t->shape[1] <= 0 || t->shape[0] > (1 << 20) ||
        t->shape[1] > (1 << 24) || (!tokens && t->shape[2] != info->d_model)) {
        snprintf(msg, sizeof msg, "this %s takes tensor \"%s\" %s", lf_model_kind_name(info->kind), want,
                 tokens ? "i64 [batch, n]" : "f32 [batch, n, d_model]");
        rc = fail(path, msg);
        goto done;
    }
    in->batch = (int)t->shape[0], in->n = (int)t->shape[1];
    lf_status st;
    if (tokens) st = (in->tokens = malloc(t->count * sizeof *in->tokens)) ? lf_st_to_i64(t, in->tokens, msg, sizeof msg) : LF_ERR_OUT_OF_MEMORY;
    else st = (in->x = malloc(t->count * sizeof *in->x)) ? lf_st_to_f32(t, in->x, msg, sizeof msg) : LF_ERR_OUT_OF_MEMORY;
    if (st != LF_OK) {
        rc = fail(path, st == LF_ERR_OUT_OF_MEMORY ? "out of host memory" : msg);
        goto done;
    }
    rc = len ? read_lengths(path, len, in) : 0;
done:
    lf_st_close(&f);
    return rc;
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
    lf_device_info d;
    if (lf_context_device_info(ctx, &d) == LF_OK)
        fprintf(stderr, "linformer run: device %s (%s)\n", d.device_name, d.platform_name);
    fprintf(stderr, "linformer run: %s %s: %d layers, d_model %d, heads %d, d_ff %d", i->layout,
            lf_model_kind_name(i->kind), i->layers, i->d_model, i->heads, i->d_ff);
    if (i->vocab) fprintf(stderr, ", vocabulary %d", i->vocab);
    fprintf(stderr, ", %s-norm, %s%s%s, max_seq_len %d\n", lf_norm_name(i->norm), lf_activation_name(i->activation),
            i->glu ? " (GLU)" : "", i->layerwise ? ", one projection for all layers" : "", i->max_seq_len);
}

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs the forward `repeat` times, writes y, prints the median device time. */
static int forward(const run_model_args *a, lf_model *m, const lf_model_info *info, const model_input *in)
{
    const int width = info->kind == LF_MODEL_LM ? info->vocab : info->d_model;
    const size_t count = (size_t)in->batch * in->n * width;
    float *y = malloc(count * sizeof *y);
    double *times = malloc(a->repeat * sizeof *times);
    int rc = 1;
    lf_status st = y && times ? LF_OK : LF_ERR_OUT_OF_MEMORY;
    for (int r = 0; st == LF_OK && r < a->repeat; r++) {
        st = lf_model_forward(m, in->x, in->tokens, y, in->batch, in->n, in->lengths);
        if (st == LF_OK && lf_model_last_time_ms(m, &times[r]) != LF_OK) times[r] = 0;
    }
    char msg[1024];
    const int64_t shape[3] = {in->batch, in->n, width};
    const lf_st_out t = {"y", LF_ST_F32, 3, shape, y};
    if (st != LF_OK) fprintf(stderr, "linformer run: %s\n", y && times ? "forward failed" : "out of host memory");
    else if (lf_st_write(a->output, &t, 1, NULL, 0, msg, sizeof msg) != LF_OK) fprintf(stderr, "linformer run: %s\n", msg);
    else {
        qsort(times, a->repeat, sizeof *times, compare_doubles);
        const double ms = times[a->repeat / 2];
        fprintf(stderr, "batch %d, n %d: %.3f ms median device time over %d run(s), %.3f ms a layer\n", in->batch,
                in->n, ms, a->repeat, ms / info->layers);
        rc = 0;
    }
    free(y);
    free(times);
    return rc;
}

int run_model(const run_model_args *a)
{
    lf_model_options opts;
    if (options(a, &opts)) return 2;
    char msg[4096];
    lf_context *ctx = NULL;
    lf_status st = lf_context_create(a->device, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer run: %s: %s\n", lf_status_string(st), msg);
        return 1;
    }
    lf_model *m = NULL;
    model_input in = {0};
    lf_model_info info;
    int rc = 1;
    if ((st = lf_model_load(ctx, a->model, &opts, &m)) == LF_OK) {
        lf_model_info_get(m, &info);
        describe(ctx, &info);
        if (read_model_input(a->input, &info, &in) == 0) rc = forward(a, m, &info, &in);
    }
    if (st != LF_OK || rc == 1) /* the library's message, when a call of it failed */
        if (*lf_context_last_error(ctx)) fprintf(stderr, "linformer run: %s\n", lf_context_last_error(ctx));
    free(in.x), free(in.tokens), free(in.lengths);
    lf_model_free(m);
    lf_context_free(ctx);
    return rc;
}
