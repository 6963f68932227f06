/* cmd_rank.c - `linformer rank`: how much rank the attention of a model needs. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "announce.h"
#include "bench_progress.h"
#include "cli.h"
#include "commands.h"
#include "linformer.h"
#include "output_file.h"
#include "run_input.h"
#include "rank.h"
#include "rank_plot.h"
#include "run_model.h"

#define MAX_HEADS 1000000

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer rank --model M.safetensors --input X.safetensors [--csv FILE] [--plot FILE.png]\n"
            "                      [--k LIST] [--seed S] [--heads H] [--device SEL]\n\n"
            "Measures how much rank the attention needs (Wang et al. 2020, Figure 1). For every sequence\n"
            "of the input's `x` (f32 [batch, n, d_model], within `lengths` when given) and every head,\n"
            "the exact softmax attention matrix P (n x n) is computed on the device and its singular\n"
            "values with LAPACK. c_r = (sum of the r largest) / (sum of all); k90, k95, k99 are the\n"
            "smallest r with c_r >= 0.90, 0.95, 0.99. For each k of the sweep, the relative error\n"
            "||o_linformer - o_exact|| / ||o_exact|| of each head's output (before the output\n"
            "projection): the model's own E and F at its own k, seeded random (Johnson-Lindenstrauss)\n"
            "ones at any other k. The model is one attention layer as `linformer run` reads it, or a\n"
            "whole model (lucidrains' Linformer or LinformerLM, fairseq's encoder): then every layer is\n"
            "measured from the input the forward gives it, and a model with embeddings reads `tokens`.\n\n"
            "  --k LIST      comma-separated k values (default: each layer's k/4, k/2, k, 2k, 4k,\n"
            "                clipped to [1, n])\n"
            "  --seed S      seed of the random projections (default 0)\n"
            "  --csv FILE    one row per sequence, layer and head: seq,layer,head,n,k90,k95,k99,own_k and\n"
            "                err_k<K> per k (empty where that k cannot run, e.g. a causal layer)\n"
            "  --plot FILE   .png, .svg or .pdf: the spectra (one curve per layer and head) beside a\n"
            "                heat map of k90 over layers and heads; FILE.png.dat and FILE.png.gp stay\n"
            "                beside it\n"
            "  --heads H     head count, when the model's __metadata__ has none\n"
            "  --device SEL  see `linformer devices --help`\n\n"
            "stdout gets a table per layer and head, means over the sequences. A sequence whose n x n\n"
            "matrix is over the device's budget is skipped with a message.\n");
}

typedef struct {
    const char *model, *input, *csv, *plot, *device, *k_list;
    int heads;
    uint64_t seed;
} rank_options;

enum { O_MODEL, O_INPUT, O_CSV, O_PLOT, O_K, O_SEED, O_HEADS, O_DEVICE, O_HELP, O_COUNT };
static const cli_option options[O_COUNT] = {{"model", true}, {"input", true}, {"csv", true},
                                            {"plot", true},  {"k", true},     {"seed", true},
                                            {"heads", true}, {"device", true}, {"help", false}};

/* Returns 0, 1 for --help (printed), or the usage error's status 2. */
static int parse(int argc, char **argv, rank_options *o)
{
    *o = (rank_options){0};
    const char *v[O_COUNT];
    char err[512] = "";
    if (cli_parse(argc, argv, options, O_COUNT, v, err, sizeof err) != 0) return cli_usage_error("rank", err);
    if (v[O_HELP]) return usage(stdout), 1;
    o->model = v[O_MODEL], o->input = v[O_INPUT], o->csv = v[O_CSV], o->plot = v[O_PLOT];
    o->device = v[O_DEVICE], o->k_list = v[O_K];
    if ((v[O_HEADS] && cli_int("--heads", v[O_HEADS], 1, MAX_HEADS, &o->heads, err, sizeof err)) ||
        (v[O_SEED] && cli_u64("--seed", v[O_SEED], &o->seed, err, sizeof err)))
        return cli_usage_error("rank", err);
    if (!o->model || !o->input) return cli_usage_error("rank", !o->model ? "--model is required" : "--input is required");
    if (o->plot && bench_plot_check_name(o->plot, err, sizeof err) != 0) return cli_usage_error("rank", err);
    return 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("linformer rank: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* The sweep: --k (each in [1, max_n]), or the default around each layer's own k, clipped to the input's n. */
static int choose_sweep(const rank_options *o, const int *own_k, int layers, int max_n, int n, rank_results *r)
{
    char err[512];
    if (o->k_list)
        return rank_parse_sweep(o->k_list, max_n, r, err, sizeof err) == 0 ? 0 : cli_usage_error("rank", err);
    for (int i = 0; i < layers; i++) rank_default_sweep(own_k[i], n, r);
    return 0;
}

/* The CSV, opened before the measurement (a path that cannot be written fails at once), committed here. */
static int write_csv(output_file *f, const rank_results *r)
{
    char err[1024];
    rank_write_csv(output_file_stream(f), r);
    return output_file_commit(f, err, sizeof err) ? fail("%s", err) : 0;
}

/* Measures a layer whose exact form is loaded (the sweep's are loaded here)
 * on its input x; frees the layer. */
static int measure_loaded(lf_context *ctx, const rank_options *o, const rank_source *src, rank_layer *layer,
                          const float *x, const run_input *in, rank_results *r)
{
    char err[1024];
    lf_status st = rank_load_sweep(layer, src, o->seed, r, stderr);
    if (st == LF_OK)
        st = rank_measure_layer(layer, src->index, x, in->batch, in->n, in->lengths, r, stderr, err, sizeof err);
    else
        snprintf(err, sizeof err, "%s", lf_context_last_error(ctx));
    rank_free_layer(layer);
    return st == LF_OK ? 0 : fail("%s: %s", lf_status_string(st), err);
}

/* Loads one layer exact, then measures it (exact, and at each k of the sweep) on its input x. */
static int measure_layer(lf_context *ctx, const rank_options *o, const rank_source *src, const float *x,
                         const run_input *in, rank_results *r)
{
    rank_layer layer;
    const lf_status st = rank_load_exact(ctx, src, o->heads, &layer);
    if (st == LF_OK) return measure_loaded(ctx, o, src, &layer, x, in, r);
    rank_free_layer(&layer);
    return fail("%s: %s", lf_status_string(st), lf_context_last_error(ctx));
}

/* A file of one attention layer, loaded once: measured on the input's x as layer 0. */
static int measure_layer_file(lf_context *ctx, const rank_options *o, run_input *in, rank_results *r)
{
    const rank_source src = {o->model, NULL, 0};
    rank_layer layer;
    lf_attention_config cfg = {0};
    lf_status st = rank_load_exact(ctx, &src, o->heads, &layer);
    if (st == LF_OK) st = lf_attention_config_get(layer.exact, &cfg);
    /* a bad --heads is a usage error, as for a model */
    int rc = st == LF_OK ? 0 : (fail("%s: %s", lf_status_string(st), lf_context_last_error(ctx)),
                                st == LF_ERR_ARGUMENT ? 2 : 1);
    const run_input_spec spec = {"rank", false, cfg.d_model, cfg.max_seq_len, 0};
    if (rc == 0) rc = run_input_read(o->input, &spec, in);
    if (rc == 0) bench_progress_start(r->progress, (size_t)in->batch * cfg.heads);
    if (rc == 0) rc = choose_sweep(o, &layer.model_k, 1, cfg.max_seq_len, in->n, r);
    if (rc == 0) return measure_loaded(ctx, o, &src, &layer, in->x, in, r);
    rank_free_layer(&layer);
    return rc;
}

/* The sweep of a model: the default takes every layer's own k. */
static int model_sweep(const rank_options *o, lf_model *model, const lf_model_info *info, int n, rank_results *r)
{
    int *own_k = calloc(info->layers, sizeof *own_k);
    if (!own_k) return fail("out of host memory");
    for (int i = 0; i < info->layers; i++) own_k[i] = rank_own_k(&(rank_source){NULL, model, i});
    const int rc = choose_sweep(o, own_k, info->layers, info->max_seq_len, n, r);
    free(own_k);
    return rc;
}

/* A whole model: every layer, each on the input the forward gives it. */
static int measure_model(lf_context *ctx, const rank_options *o, run_input *in, rank_results *r)
{
    lf_model *model = NULL;
    lf_model_info info;
    const lf_model_options mo = {.heads = o->heads};
    lf_status st = lf_model_load(ctx, o->model, &mo, &model);
    if (st != LF_OK) /* a bad --heads is a usage error, as for `run` */
        return fail("%s: %s", lf_status_string(st), lf_context_last_error(ctx)), st == LF_ERR_ARGUMENT ? 2 : 1;
    lf_model_info_get(model, &info);
    fprintf(stderr, "linformer rank: %s %s: %d layers, d_model %d, heads %d\n", info.layout,
            lf_model_kind_name(info.kind), info.layers, info.d_model, info.heads);
    const run_input_spec spec = {"rank", info.kind != LF_MODEL_ENCODER, info.d_model, info.max_seq_len, 0};
    int rc = run_input_read(o->input, &spec, in);
    if (rc == 0) bench_progress_start(r->progress, (size_t)info.layers * in->batch * info.heads);
    if (rc == 0) rc = model_sweep(o, model, &info, in->n, r);
    float *x = rc ? NULL : malloc((size_t)in->batch * in->n * info.d_model * sizeof *x);
    if (rc == 0 && !x) rc = fail("out of host memory for a layer's input");
    for (int i = 0; rc == 0 && i < info.layers; i++) {
        st = lf_model_layer_input(model, i, in->x, in->tokens, x, in->batch, in->n, in->lengths);
        if (st != LF_OK) rc = fail("layer %d's input: %s: %s", i, lf_status_string(st), lf_context_last_error(ctx));
        else rc = measure_layer(ctx, o, &(rank_source){NULL, model, i}, x, in, r);
    }
    free(x);
    lf_model_free(model);
    return rc;
}

int cmd_rank(int argc, char **argv)
{
    rank_options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    char msg[4096];
    bench_plot_side side;
    named_file outputs[4] = {{"--csv", o.csv}};
    const named_file inputs[2] = {{"--model", o.model}, {"--input", o.input}};
    const size_t count = 1 + bench_plot_outputs(o.plot, &side, outputs + 1);
    if (output_files_check(outputs, count, inputs, 2, msg, sizeof msg) != 0) return fail("%s", msg);
    const char *paths[2] = {o.model, o.input};
    output_file *csv = o.csv ? output_file_open(o.csv, paths, 2, msg, sizeof msg) : NULL;
    if (o.csv && !csv) return fail("%s", msg);
    bench_plot_files plot = {0};
    if (o.plot && bench_plot_open(o.plot, &plot, msg, sizeof msg) != 0) return output_file_abort(csv), fail("%s", msg);
    lf_context *ctx = NULL;
    run_input in = {0};
    bench_progress progress;
    rank_results r = {.progress = &progress};
    bench_progress_start(&progress, 0);
    lf_status st = lf_context_create(o.device, &ctx, msg, sizeof msg);
    if (st != LF_OK) rc = fail("%s: %s", lf_status_string(st), msg);
    else tool_announce("rank", ctx);
    if (st == LF_OK) rc = run_is_layer_file(o.model, NULL) ? measure_layer_file(ctx, &o, &in, &r) : measure_model(ctx, &o, &in, &r);
    bench_progress_clear(&progress);
    if (rc == 0) rank_print_table(stdout, &r);
    /* a figure of nothing fails the run before any file is replaced */
    if (rc == 0 && o.plot && r.count == 0) rc = fail("--plot: nothing to plot: no sequence was measured");
    if (rc == 0 && csv) rc = write_csv(csv, &r);
    else output_file_abort(csv);
    if (rc == 0 && o.plot && rank_plot_finish(&plot, &r, msg, sizeof msg) != 0) rc = fail("%s", msg);
    bench_plot_abort(&plot);
    rank_results_free(&r);
    run_input_free(&in);
    lf_context_free(ctx);
    return rc;
}
