/* cmd_run.c - `linformer run`: an attention layer, or a whole model (cmd_run_model.c), from safetensors files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "linformer.h"
#include "run_model.h"
#include "safetensors.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer run --model M.safetensors --input X.safetensors --output Y.safetensors\n"
            "                     [--device SEL] [--heads H] [--mode linformer|dense|flash] [--repeat N]\n\n"
            "Runs one attention layer saved from lucidrains' LinformerSelfAttention (to_q.weight,\n"
            "to_k.weight, to_v.weight, proj_k, proj_v, to_out.weight, to_out.bias), or a whole model:\n"
            "lucidrains' Linformer (x -> y), LinformerLM (`tokens` i64 [batch, n] -> `y` = logits\n"
            "[batch, n, vocab]) or fairseq's Linformer encoder; the file says which.\n"
            "The input file holds `x` (f32 [batch, n, d_model]) and optionally `lengths` (i32 or i64\n"
            "[batch]); the output file gets `y` (f32 [batch, n, d_model]).\n\n"
            "  --heads H     head count, if the model's __metadata__ has no \"heads\" entry\n"
            "  --mode M      linformer (default), or the exact baselines dense and flash\n"
            "  --repeat N    run the forward N times and print the median device time\n"
            "  --activation A, --norm pre|post, --prefix P   a model's activation (gelu, gelu_tanh,\n"
            "                relu) and norm if its __metadata__ has none; its tensors' prefix in the file\n"
            "  --device SEL  see `linformer devices --help`\n");
}

typedef struct {
    const char *model, *input, *output, *device;
    const char *prefix, *activation, *norm; /* models only */
    int heads, repeat;
    lf_mode mode;
} run_options;

static int parse_int(const char *opt, const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < lo || v > 1000000) {
        fprintf(stderr, "linformer run: %s takes an integer >= %d, got \"%s\"\n", opt, lo, s);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int parse(int argc, char **argv, run_options *o)
{
    *o = (run_options){.repeat = 1, .mode = LF_MODE_LINFORMER};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "linformer run: unknown option or missing value: \"%s\"\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--input")) o->input = v;
        else if (!strcmp(a, "--output")) o->output = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--prefix")) o->prefix = v;
        else if (!strcmp(a, "--activation")) o->activation = v;
        else if (!strcmp(a, "--norm")) o->norm = v;
        else if (!strcmp(a, "--heads")) { if (parse_int(a, v, 1, &o->heads)) return 2; }
        else if (!strcmp(a, "--repeat")) { if (parse_int(a, v, 1, &o->repeat)) return 2; }
        else if (!strcmp(a, "--mode")) {
            if (lf_mode_parse(v, &o->mode) != LF_OK) {
                fprintf(stderr, "linformer run: --mode is linformer, dense or flash, got \"%s\"\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "linformer run: unknown option \"%s\"\n", a);
            return 2;
        }
    }
    const char *missing = !o->model ? "--model" : !o->input ? "--input" : !o->output ? "--output" : NULL;
    if (missing) {
        fprintf(stderr, "linformer run: %s is required (see --help)\n", missing);
        return 2;
    }
    return 0;
}

/* The input: x [B, n, D] and optional lengths [B], checked against the layer. */
typedef struct {
    float *x;
    int32_t *lengths;
    int batch, n;
} run_input;

static int read_input(const char *path, int d_model, run_input *in)
{
    lf_st_file f;
    char msg[1024];
    if (lf_st_open(path, &f, msg, sizeof msg) != LF_OK) {
        fprintf(stderr, "linformer run: %s\n", msg);
        return 1;
    }
    int rc = 1;
    const lf_st_tensor *x = lf_st_find(&f, "x"), *len = lf_st_find(&f, "lengths");
    for (size_t i = 0; i < f.count; i++)
        if (strcmp(f.tensors[i].name, "x") && strcmp(f.tensors[i].name, "lengths")) {
            fprintf(stderr, "linformer run: %s: unknown tensor \"%s\" (expected x and lengths)\n", path, f.tensors[i].name);
            goto done;
        }
    if (!x || x->ndim != 3 || x->shape[2] != d_model || x->shape[0] <= 0 || x->shape[1] <= 0 ||
        x->shape[0] > (1 << 20) || x->shape[1] > (1 << 24)) {
        fprintf(stderr, "linformer run: %s: tensor \"x\" must be [batch, n, %d]\n", path, d_model);
        goto done;
    }
    in->batch = (int)x->shape[0];
    in->n = (int)x->shape[1];
    if (!(in->x = malloc(x->count * sizeof *in->x)) || lf_st_to_f32(x, in->x, msg, sizeof msg) != LF_OK) {
        fprintf(stderr, "linformer run: %s: tensor \"x\": %s\n", path, in->x ? msg : "out of memory");
        goto done;
    }
    if (len) {
        int64_t *v = NULL;
        if (len->ndim != 1 || len->shape[0] != in->batch || !(v = malloc(len->count * sizeof *v)) ||
            lf_st_to_i64(len, v, msg, sizeof msg) != LF_OK) {
            fprintf(stderr, "linformer run: %s: tensor \"lengths\" must be integers [%d]\n", path, in->batch);
            free(v);
            goto done;
        }
        if (!(in->lengths = malloc(in->batch * sizeof *in->lengths))) {
            fprintf(stderr, "linformer run: out of host memory\n");
            free(v);
            goto done;
        }
        for (int b = 0; b < in->batch; b++) {
            if (v[b] < 0 || v[b] > in->n) {
                fprintf(stderr, "linformer run: %s: lengths[%d] = %lld is outside [0, n = %d]\n", path, b,
                        (long long)v[b], in->n);
                free(v);
                goto done;
            }
            in->lengths[b] = (int32_t)v[b];
        }
        free(v);
    }
    rc = 0;
done:
    lf_st_close(&f);
    return rc;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cmd_run(int argc, char **argv)
{
    run_options o;
    if (parse(argc, argv, &o)) return 2;
    if (!run_is_layer_file(o.model, o.prefix))
        return run_model(&(run_model_args){o.model, o.input, o.output, o.device, o.prefix, o.activation, o.norm,
                                           o.heads, o.repeat});
    char msg[4096];
    lf_context *ctx = NULL;
    lf_attention *layer = NULL;
    run_input in = {0};
    float *y = NULL;
    double *times = NULL;
    int rc = 1;
    lf_status st = lf_context_create(o.device, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer run: %s: %s\n", lf_status_string(st), msg);
        return 1;
    }
    if ((st = lf_attention_load(ctx, o.model, o.heads, o.mode, &layer)) != LF_OK) goto fail;
    lf_attention_config cfg;
    lf_attention_config_get(layer, &cfg);
    if (read_input(o.input, cfg.d_model, &in)) goto done;
    const size_t count = (size_t)in.batch * in.n * cfg.d_model;
    y = malloc(count * sizeof *y);
    times = malloc(o.repeat * sizeof *times);
    if (!y || !times) {
        fprintf(stderr, "linformer run: out of host memory\n");
        goto done;
    }
    for (int r = 0; r < o.repeat; r++) {
        if ((st = lf_attention_forward(layer, in.x, y, in.batch, in.n, in.lengths)) != LF_OK) goto fail;
        if (lf_attention_last_time_ms(layer, &times[r]) != LF_OK) times[r] = 0;
    }
    const int64_t shape[3] = {in.batch, in.n, cfg.d_model};
    const lf_st_out t = {"y", LF_ST_F32, 3, shape, y};
    if ((st = lf_st_write(o.output, &t, 1, NULL, 0, msg, sizeof msg)) != LF_OK) {
        fprintf(stderr, "linformer run: %s: %s\n", lf_status_string(st), msg);
        goto done;
    }
    qsort(times, o.repeat, sizeof *times, compare_doubles);
    fprintf(stderr, "%s attention, batch %d, n %d, d_model %d, heads %d, k %d: %.3f ms median device time over %d run(s)\n",
            lf_mode_name(cfg.mode), in.batch, in.n, cfg.d_model, cfg.heads, cfg.k, times[o.repeat / 2], o.repeat);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "linformer run: %s: %s\n", lf_status_string(st), lf_context_last_error(ctx));
done:
    free(in.x);
    free(in.lengths);
    free(y);
    free(times);
    lf_attention_free(layer);
    lf_context_free(ctx);
    return rc;
}
