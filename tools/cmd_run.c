/* cmd_run.c - `linformer run`: an attention layer, or a whole model (cmd_run_model.c), from safetensors files. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "announce.h"
#include "cli.h"
#include "commands.h"
#include "gemm_yardstick.h"
#include "linformer.h"
#include "output_file.h"
#include "run_input.h"
#include "run_model.h"
#include "st_write.h"

#define MAX_COUNT 1000000 /* --repeat, --warmup */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer run --model M.safetensors --input X.safetensors [--output Y.safetensors]\n"
            "                     [--device SEL] [--heads H] [--mode linformer|dense|flash]\n"
            "                     [--repeat N] [--warmup N] [--profile] [--check] [--tolerance T]\n"
            "                     [--causal] [--projection mean|max]\n"
            "                     [--prefix P] [--activation A] [--norm pre|post]\n\n"
            "Runs one attention layer saved from lucidrains' LinformerSelfAttention (to_q.weight,\n"
            "to_k.weight, to_v.weight, proj_k, proj_v, to_out.weight, to_out.bias), or a whole model:\n"
            "lucidrains' Linformer (x -> y), LinformerLM (`tokens` i64 [batch, n] -> `y` = logits\n"
            "[batch, n, vocab]) or fairseq's Linformer encoder; the file says which.\n"
            "The input file holds `x` (f32 [batch, n, d_model]) or `tokens`, optionally `lengths` (i32\n"
            "or i64 [batch]) and the expected output `y`; other tensors are ignored (with a note). The\n"
            "output file gets `y`; it is replaced atomically, and never when it is the model or the\n"
            "input. --output is required unless --check is given.\n\n"
            "  --heads H      head count (1 to %d), needed when the model's __metadata__ has no\n"
            "                 \"heads\" entry; one that contradicts it is an error\n"
            "  --mode M       linformer (default), or the exact baselines dense and flash\n"
            "  --causal       each query sees only the positions up to itself (also set by the\n"
            "                 model's __metadata__ \"causal\": \"1\"); Linformer needs --projection\n"
            "  --projection P mean or max: pooling windows of the file's k and max_seq_len in place of\n"
            "                 its learned proj_k, proj_v (a learned E mixes every position, so a causal\n"
            "                 Linformer needs pooling); unused with --mode dense or flash\n"
            "  --repeat N     timed forwards (1 to %d, default 1); the median device time is printed\n"
            "  --warmup N     untimed forwards before them (0 to %d, default 1): the first forward on a\n"
            "                 device may include compiling kernels (PoCL builds them at first launch)\n"
            "  --profile      print where the last forward's device time went: per stage (kernel or\n"
            "                 GEMM kind, summed over a model's layers) its time, share and commands,\n"
            "                 then the kernel parameters (LINFORMER_KERNEL_PARAMS sets them)\n"
            "  --check        compare the output with the input's `y`: prints the relative error\n"
            "                 ||out - y|| / ||y|| and exits 1 when it is above the tolerance, leaving\n"
            "                 --output as it was; --output may then be left out\n"
            "  --tolerance T  the bound of --check (default 1e-4)\n"
            "  --prefix P     a model's tensors are under this prefix in the file (e.g. \"model.\")\n"
            "  --activation A gelu, gelu_tanh or relu: a model's activation, when its __metadata__ has\n"
            "                 none (one that contradicts it is an error)\n"
            "  --norm N       pre or post: a model's LayerNorm placement, likewise\n"
            "  --device SEL   see `linformer devices --help`\n\n"
            "--mode, --causal and --projection apply to a single layer; --prefix, --activation and\n"
            "--norm to a model.\n\n"
            "Times are device times from OpenCL profiling events after the warm-up. Kernels are\n"
            "compiled once per device and cached on disk\n"
            "(LINFORMER_CACHE_DIR, default $XDG_CACHE_HOME/linformer or ~/.cache/linformer).\n",
            MAX_COUNT, MAX_COUNT, MAX_COUNT);
}

typedef struct {
    const char *model, *input, *output, *device;
    run_model_args model_args; /* --prefix, --activation, --norm, --heads */
    bool layer_options;        /* --mode, --causal or --projection was given */
    int heads, repeat, warmup;
    lf_mode mode;
    bool check, causal, profile;
    lf_proj_kind projection;
    double tolerance;
} run_options;

enum { O_MODEL, O_INPUT, O_OUTPUT, O_DEVICE, O_HEADS, O_MODE, O_REPEAT, O_WARMUP, O_CHECK, O_TOL, O_CAUSAL, O_PROJ,
       O_PREFIX, O_ACT, O_NORM, O_PROFILE, O_HELP, O_COUNT };
static const cli_option options[O_COUNT] = {
    {"model", true}, {"input", true},  {"output", true}, {"device", true}, {"heads", true},     {"mode", true},
    {"repeat", true}, {"warmup", true}, {"check", false}, {"tolerance", true}, {"causal", false},
    {"projection", true}, {"prefix", true}, {"activation", true}, {"norm", true}, {"profile", false}, {"help", false}};

/* Returns 0, 1 for --help (printed), or the usage error's status 2. */
static int parse(int argc, char **argv, run_options *o)
{
    *o = (run_options){.repeat = 1, .warmup = 1, .mode = LF_MODE_LINFORMER, .tolerance = 1e-4};
    const char *v[O_COUNT];
    char err[512] = "";
    if (cli_parse(argc, argv, options, O_COUNT, v, err, sizeof err) != 0) return cli_usage_error("run", err);
    if (v[O_HELP]) return usage(stdout), 1;
    o->model = v[O_MODEL], o->input = v[O_INPUT], o->output = v[O_OUTPUT], o->device = v[O_DEVICE];
    o->check = v[O_CHECK] != NULL;
    o->causal = v[O_CAUSAL] != NULL;
    o->profile = v[O_PROFILE] != NULL;
    o->layer_options = v[O_MODE] || v[O_CAUSAL] || v[O_PROJ];
    o->projection = LF_PROJ_LEARNED;
    if (v[O_PROJ] && strcmp(v[O_PROJ], "mean") != 0 && strcmp(v[O_PROJ], "max") != 0) {
        snprintf(err, sizeof err, "--projection is mean or max, got \"%s\"", v[O_PROJ]);
        return cli_usage_error("run", err);
    }
    if (v[O_PROJ]) o->projection = strcmp(v[O_PROJ], "mean") == 0 ? LF_PROJ_MEAN_POOL : LF_PROJ_MAX_POOL;
    if ((v[O_HEADS] && cli_int("--heads", v[O_HEADS], 1, MAX_COUNT, &o->heads, err, sizeof err)) ||
        (v[O_REPEAT] && cli_int("--repeat", v[O_REPEAT], 1, MAX_COUNT, &o->repeat, err, sizeof err)) ||
        (v[O_WARMUP] && cli_int("--warmup", v[O_WARMUP], 0, MAX_COUNT, &o->warmup, err, sizeof err)) ||
        (v[O_TOL] && cli_double("--tolerance", v[O_TOL], 0, 1e30, &o->tolerance, err, sizeof err)))
        return cli_usage_error("run", err);
    if (v[O_MODE] && lf_mode_parse(v[O_MODE], &o->mode) != LF_OK) {
        snprintf(err, sizeof err, "--mode is linformer, dense or flash, got \"%s\"", v[O_MODE]);
        return cli_usage_error("run", err);
    }
    if (v[O_TOL] && !o->check) return cli_usage_error("run", "--tolerance needs --check");
    o->model_args = (run_model_args){v[O_PREFIX], v[O_ACT], v[O_NORM], o->heads};
    const char *missing = !o->model ? "--model" : !o->input ? "--input" : !o->output && !o->check ? "--output" : NULL;
    if (missing) {
        snprintf(err, sizeof err, "%s is required", missing);
        return cli_usage_error("run", err);
    }
    return 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("linformer run: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --check: ||y - want|| / ||want||, printed; 1 when above the tolerance (or not a number). */
static int check_output(const float *y, const float *want, size_t count, double tolerance)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        const double d = (double)y[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    const double e = den > 0 ? sqrt(num / den) : sqrt(num);
    const bool ok = e <= tolerance;
    printf("check: relative error %.3e against the input's y, tolerance %.1e: %s\n", e, tolerance,
           ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/* What runs: a single layer or a whole model, and the shape of its output. */
typedef struct {
    lf_attention *layer;
    lf_model *model;
    lf_model_info info; /* of the model */
    lf_attention_config cfg; /* of the layer */
    run_input_spec input;
    int out_width;
} runner;

static lf_status forward_once(const runner *r, const run_input *in, float *y, double *ms)
{
    lf_status st = r->layer ? lf_attention_forward(r->layer, in->x, y, in->batch, in->n, in->lengths)
                            : lf_model_forward(r->model, in->x, in->tokens, y, in->batch, in->n, in->lengths);
    if (st == LF_OK) st = r->layer ? lf_attention_last_time_ms(r->layer, ms) : lf_model_last_time_ms(r->model, ms);
    return st;
}

/* Warm-up, then the timed forwards; times[] gets each one's device time. */
static lf_status forwards(const runner *r, const run_options *o, const run_input *in, float *y, double *times)
{
    for (long i = 0; i < (long)o->warmup + o->repeat; i++) {
        double t = 0;
        const lf_status st = forward_once(r, in, y, &t);
        if (st != LF_OK) return st;
        if (i >= o->warmup) times[i - o->warmup] = t;
    }
    return LF_OK;
}

/* The layer of the file, with the options of a single layer. */
static int open_layer(lf_context *ctx, const run_options *o, runner *r)
{
    if (o->model_args.prefix || o->model_args.activation || o->model_args.norm)
        return fail("--prefix, --activation and --norm are for models; %s holds one attention layer", o->model), 2;
    lf_load_options lo;
    lf_load_options_init(&lo);
    lo.heads = o->heads, lo.mode = o->mode, lo.causal = o->causal ? 1 : -1;
    lo.projection = o->mode == LF_MODE_LINFORMER ? o->projection : LF_PROJ_LEARNED;
    lf_status st = lf_attention_load_with(ctx, o->model, &lo, &r->layer);
    if (st == LF_OK) st = lf_attention_config_get(r->layer, &r->cfg);
    if (st != LF_OK) {
        const bool hint = st == LF_ERR_UNSUPPORTED && lo.projection == LF_PROJ_LEARNED && o->mode == LF_MODE_LINFORMER;
        fail("%s: %s%s", lf_status_string(st), lf_context_last_error(ctx), hint ? " (add --projection mean or max)" : "");
        return st == LF_ERR_ARGUMENT ? 2 : 1; /* an option that contradicts the file */
    }
    r->input = (run_input_spec){"run", false, r->cfg.d_model, r->cfg.max_seq_len, 0};
    r->out_width = r->cfg.d_model;
    return 0;
}

static int open_model(lf_context *ctx, const run_options *o, runner *r)
{
    if (o->layer_options)
        return fail("--mode, --causal and --projection are for a single attention layer; %s holds a model", o->model), 2;
    int rc = run_model_load(ctx, o->model, &o->model_args, &r->model, &r->info);
    if (rc) return rc;
    r->input = (run_input_spec){"run", r->info.kind != LF_MODEL_ENCODER, r->info.d_model, r->info.max_seq_len, 0};
    r->out_width = r->info.kind == LF_MODEL_LM ? r->info.vocab : r->info.d_model;
    return 0;
}

static void print_time(const runner *r, const run_input *in, double ms, int repeat)
{
    if (r->layer)
        fprintf(stderr, "%s attention, batch %d, n %d, d_model %d, heads %d, k %d: %.3f ms median device time over "
                        "%d run(s)\n", lf_mode_name(r->cfg.mode), in->batch, in->n, r->cfg.d_model, r->cfg.heads,
                r->cfg.k, ms, repeat);
    else
        fprintf(stderr, "%s, batch %d, n %d: %.3f ms median device time over %d run(s), %.3f ms a layer\n",
                lf_model_kind_name(r->info.kind), in->batch, in->n, ms, repeat, ms / r->info.layers);
}

/* --profile: the last forward's stages, in the order they first ran, and the
 * kernel parameters (as LINFORMER_KERNEL_PARAMS takes them). */
static int print_profile(lf_context *ctx, const runner *r)
{
    enum { MAX_STAGES = 64 };
    lf_stage_time stages[MAX_STAGES];
    size_t count = 0;
    double total = 0;
    lf_status st = r->layer ? lf_attention_last_profile(r->layer, stages, MAX_STAGES, &count)
                            : lf_model_last_profile(r->model, stages, MAX_STAGES, &count);
    if (st == LF_OK) st = r->layer ? lf_attention_last_time_ms(r->layer, &total) : lf_model_last_time_ms(r->model, &total);
    if (st != LF_OK) return fail("--profile: %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    gemm_yardstick_forced_core(ctx, 0); /* the GEMM stages' rate read beside what the CPU could do */
    printf("%-24s %12s %7s %9s %10s %9s\n", "stage", "ms", "share", "commands", "GFLOP/s", "GB/s");
    unsigned commands = 0;
    double flops = 0, bytes = 0;
    for (size_t i = 0; i < count && i < MAX_STAGES; i++) {
        const lf_stage_time *s = &stages[i];
        const double per_s = s->ms > 0 ? 1e3 / s->ms : 0.0; /* rates of the stage's work over its time */
        printf("%-24s %12.3f %6.1f%% %9u %10.1f %9.1f\n", s->stage, s->ms, total > 0 ? 100.0 * s->ms / total : 0.0,
               s->commands, s->flops * per_s * 1e-9, s->bytes * per_s * 1e-9);
        commands += s->commands, flops += s->flops, bytes += s->bytes;
    }
    if (count > MAX_STAGES) printf("(%zu more stages)\n", count - MAX_STAGES);
    printf("%-24s %12.3f %7s %9u %10.1f %9.1f\n", "forward", total, "", commands,
           total > 0 ? flops / total * 1e-6 : 0.0, total > 0 ? bytes / total * 1e-6 : 0.0);
    char params[256];
    if (lf_context_kernel_params(ctx, params, sizeof params) != LF_OK)
        return fail("--profile: %s", lf_context_last_error(ctx));
    printf("kernel parameters: %s\n", params);
    return 0;
}

static int write_output(output_file *out, const run_input *in, int d_model, const float *y)
{
    char err[1024];
    const int64_t shape[3] = {in->batch, in->n, d_model};
    const st_tensor t = {"y", ST_F32, 3, shape, y};
    if (st_write(output_file_stream(out), &t, 1, NULL, 0, err, sizeof err) != 0 &&
        !ferror(output_file_stream(out))) {
        output_file_abort(out);
        return fail("%s: %s", output_file_path(out), err);
    }
    return output_file_commit(out, err, sizeof err) ? fail("%s", err) : 0;
}

/* Reads the input, runs, prints the time and the check, writes y; the exit status. */
static int run(lf_context *ctx, const runner *r, const run_options *o, output_file **out)
{
    run_input in;
    run_input_spec spec = r->input;
    spec.y_width = o->check ? r->out_width : 0;
    float *y = NULL;
    double *times = NULL;
    int rc = 1;
    if (run_input_read(o->input, &spec, &in)) goto done;
    const size_t count = (size_t)in.batch * in.n * r->out_width;
    if (!(y = malloc(count * sizeof *y)) || !(times = malloc(o->repeat * sizeof *times))) {
        fail("out of host memory");
        goto done;
    }
    lf_status st = forwards(r, o, &in, y, times);
    if (st != LF_OK) {
        fail("%s: %s", lf_status_string(st), lf_context_last_error(ctx));
        goto done;
    }
    qsort(times, o->repeat, sizeof *times, compare_doubles);
    print_time(r, &in, times[o->repeat / 2], o->repeat);
    rc = o->profile ? print_profile(ctx, r) : 0;
    if (o->check && rc == 0) rc = check_output(y, in.y, count, o->tolerance);
    if (*out && rc == 0) { /* a failed check leaves the old output (the caller aborts *out) */
        rc = write_output(*out, &in, r->out_width, y);
        *out = NULL; /* committed or aborted */
    }
done:
    run_input_free(&in);
    free(y), free(times);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    char msg[4096];
    const char *inputs[2] = {o.model, o.input};
    const named_file output = {"--output", o.output}, named[2] = {{"--model", o.model}, {"--input", o.input}};
    if (output_files_check(&output, 1, named, 2, msg, sizeof msg) != 0) return fail("%s", msg);
    output_file *out = o.output ? output_file_open(o.output, inputs, 2, msg, sizeof msg) : NULL;
    if (o.output && !out) return fail("%s", msg);
    lf_context *ctx = NULL;
    runner r = {0};
    lf_status st = lf_context_create(o.device, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        rc = fail("%s: %s", lf_status_string(st), msg);
    } else {
        tool_announce("run", ctx);
        rc = run_is_layer_file(o.model, o.model_args.prefix) ? open_layer(ctx, &o, &r) : open_model(ctx, &o, &r);
        if (rc == 0) rc = run(ctx, &r, &o, &out);
    }
    output_file_abort(out);
    lf_attention_free(r.layer);
    lf_model_free(r.model);
    lf_context_free(ctx);
    return rc;
}
