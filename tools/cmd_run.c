/* cmd_run.c - `linformer run`: one attention layer from safetensors files. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "linformer.h"
#include "output_file.h"
#include "st_write.h"

#define MAX_COUNT 1000000 /* --repeat, --warmup */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer run --model M.safetensors --input X.safetensors --output Y.safetensors\n"
            "                     [--device SEL] [--heads H] [--mode linformer|dense|flash]\n"
            "                     [--repeat N] [--warmup N] [--check] [--tolerance T]\n"
            "                     [--causal] [--projection mean|max]\n\n"
            "Runs one attention layer saved from lucidrains' LinformerSelfAttention (to_q.weight,\n"
            "to_k.weight, to_v.weight, proj_k, proj_v, to_out.weight, to_out.bias).\n"
            "The input file holds `x` (f32 [batch, n, d_model]) and optionally `lengths` (i32 or i64\n"
            "[batch]) and the expected output `y`; other tensors are ignored (with a note). The\n"
            "output file gets `y` (f32 [batch, n, d_model]); it is replaced atomically, and never\n"
            "when it is the model or the input.\n\n"
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
            "  --check        compare the output with the input's `y`: prints the relative error\n"
            "                 ||out - y|| / ||y|| and exits 1 when it is above the tolerance;\n"
            "                 --output may then be left out\n"
            "  --tolerance T  the bound of --check (default 1e-4)\n"
            "  --device SEL   see `linformer devices --help`\n\n"
            "Times are device times from OpenCL profiling events after the warm-up. Kernels are\n"
            "compiled once per device and cached on disk\n"
            "(LINFORMER_CACHE_DIR, default $XDG_CACHE_HOME/linformer or ~/.cache/linformer).\n",
            MAX_COUNT, MAX_COUNT, MAX_COUNT);
}

typedef struct {
    const char *model, *input, *output, *device;
    int heads, repeat, warmup;
    lf_mode mode;
    bool check, causal;
    lf_proj_kind projection;
    double tolerance;
} run_options;

enum { O_MODEL, O_INPUT, O_OUTPUT, O_DEVICE, O_HEADS, O_MODE, O_REPEAT, O_WARMUP, O_CHECK, O_TOL, O_CAUSAL, O_PROJ,
       O_HELP, O_COUNT };
static const cli_option options[O_COUNT] = {
    {"model", true}, {"input", true},  {"output", true}, {"device", true}, {"heads", true},     {"mode", true},
    {"repeat", true}, {"warmup", true}, {"check", false}, {"tolerance", true}, {"causal", false},
    {"projection", true}, {"help", false}};

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

/* A --heads that contradicts the model's __metadata__ is an error naming both (exit 2). */
static int check_heads(const char *model, int heads)
{
    char msg[1024];
    lf_tensor_file *f = NULL;
    if (!heads) return 0;
    if (lf_tensor_file_open(model, &f, msg, sizeof msg) != LF_OK) return fail("%s", msg);
    const char *meta = lf_tensor_file_metadata(f, "heads");
    char *end = NULL;
    const long said = meta ? strtol(meta, &end, 10) : heads;
    int rc = 0;
    if (said != heads || (end && *end)) {
        fail("--heads %d contradicts %s, whose __metadata__ has \"heads\": \"%s\"", heads, model, meta);
        rc = 2;
    }
    lf_tensor_file_free(f);
    return rc;
}

/* The input: x [B, n, D], optional lengths [B], and y [B, n, D] for --check. */
typedef struct {
    float *x, *y;
    int32_t *lengths;
    int batch, n;
} run_input;

static void note_unused(lf_tensor_file *f, const char *path)
{
    for (size_t i = 0; i < lf_tensor_file_count(f); i++) {
        lf_tensor_info t;
        if (lf_tensor_file_info(f, i, &t) == LF_OK && strcmp(t.name, "x") && strcmp(t.name, "lengths") &&
            strcmp(t.name, "y"))
            fprintf(stderr, "linformer run: note: %s: tensor \"%s\" is not used\n", path, t.name);
    }
}

static int read_x(lf_tensor_file *f, const char *path, int d_model, run_input *in)
{
    lf_tensor_info t;
    if (lf_tensor_file_find(f, "x", &t) != LF_OK || t.ndim != 3 || t.shape[2] != d_model || t.shape[0] <= 0 ||
        t.shape[1] <= 0 || t.shape[0] > (1 << 20) || t.shape[1] > (1 << 24))
        return fail("%s: tensor \"x\" must be [batch, n, %d]", path, d_model);
    in->batch = (int)t.shape[0];
    in->n = (int)t.shape[1];
    if (!(in->x = malloc(t.count * sizeof *in->x))) return fail("out of host memory");
    if (lf_tensor_file_read_f32(f, "x", in->x, t.count) != LF_OK) return fail("%s", lf_tensor_file_last_error(f));
    return 0;
}

static int read_lengths(lf_tensor_file *f, const char *path, run_input *in)
{
    lf_tensor_info t;
    if (lf_tensor_file_find(f, "lengths", &t) != LF_OK) return 0;
    int64_t *v = NULL;
    if (t.ndim != 1 || t.shape[0] != in->batch || !(v = malloc(t.count * sizeof *v)) ||
        lf_tensor_file_read_i64(f, "lengths", v, t.count) != LF_OK || !(in->lengths = malloc(t.count * sizeof(int32_t)))) {
        free(v);
        return fail("%s: tensor \"lengths\" must be integers [%d]", path, in->batch);
    }
    int rc = 0;
    for (int b = 0; b < in->batch && rc == 0; b++) {
        if (v[b] < 0 || v[b] > in->n)
            rc = fail("%s: lengths[%d] = %lld is outside [0, n = %d]", path, b, (long long)v[b], in->n);
        in->lengths[b] = (int32_t)v[b];
    }
    free(v);
    return rc;
}

/* y, the expected output: the same shape as x. */
static int read_y(lf_tensor_file *f, const char *path, int d_model, run_input *in)
{
    lf_tensor_info t;
    if (lf_tensor_file_find(f, "y", &t) != LF_OK) return fail("--check: %s holds no tensor \"y\" to compare with", path);
    if (t.ndim != 3 || t.shape[0] != in->batch || t.shape[1] != in->n || t.shape[2] != d_model)
        return fail("%s: tensor \"y\" must be [%d, %d, %d] like x", path, in->batch, in->n, d_model);
    if (!(in->y = malloc(t.count * sizeof *in->y))) return fail("out of host memory");
    if (lf_tensor_file_read_f32(f, "y", in->y, t.count) != LF_OK) return fail("%s", lf_tensor_file_last_error(f));
    return 0;
}

static int read_input(const char *path, int d_model, bool check, run_input *in)
{
    char msg[1024];
    lf_tensor_file *f = NULL;
    if (lf_tensor_file_open(path, &f, msg, sizeof msg) != LF_OK) return fail("%s", msg);
    note_unused(f, path);
    int rc = read_x(f, path, d_model, in);
    if (rc == 0) rc = read_lengths(f, path, in);
    if (rc == 0 && check) rc = read_y(f, path, d_model, in);
    lf_tensor_file_free(f);
    return rc;
}

/* The kernel cache as the library finds it (linformer.h): NULL when it is off. */
static const char *cache_dir(char *buf, size_t size)
{
    const char *dir = getenv("LINFORMER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && strcmp(dir, "off") == 0) return NULL;
    if (dir && *dir) snprintf(buf, size, "%s", dir);
    else if (xdg && *xdg) snprintf(buf, size, "%s/linformer", xdg);
    else snprintf(buf, size, "%s/.cache/linformer", home ? home : ".");
    return buf;
}

/* Which device runs, and, before a silent wait, that kernels are being compiled. */
static void announce(lf_context *ctx)
{
    lf_device_info d;
    if (lf_context_device_info(ctx, &d) == LF_OK)
        fprintf(stderr, "linformer run: device %u:%u %s (%s)\n", d.platform_index, d.device_index, d.device_name,
                d.platform_name);
    char buf[4096];
    const char *dir = cache_dir(buf, sizeof buf);
    DIR *listing = dir ? opendir(dir) : NULL;
    bool cached = false;
    for (struct dirent *e; listing && !cached && (e = readdir(listing));) cached = e->d_name[0] != '.';
    if (listing) closedir(listing);
    if (!dir)
        fprintf(stderr, "linformer run: compiling the kernels (LINFORMER_CACHE_DIR=off: at every run)\n");
    else if (!cached)
        fprintf(stderr, "linformer run: compiling the kernels for the first run (up to a minute on a CPU); "
                        "they are cached in %s for the next runs\n", dir);
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

/* Warm-up, then the timed forwards; times[] gets each one's device time. */
static lf_status forwards(lf_attention *layer, const run_options *o, const run_input *in, float *y, double *times)
{
    for (long r = 0; r < (long)o->warmup + o->repeat; r++) {
        double t = 0;
        lf_status st = lf_attention_forward(layer, in->x, y, in->batch, in->n, in->lengths);
        if (st == LF_OK) st = lf_attention_last_time_ms(layer, &t);
        if (st != LF_OK) return st;
        if (r >= o->warmup) times[r - o->warmup] = t;
    }
    return LF_OK;
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

int cmd_run(int argc, char **argv)
{
    run_options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = check_heads(o.model, o.heads))) return rc;
    char msg[4096];
    const char *inputs[2] = {o.model, o.input};
    output_file *out = o.output ? output_file_open(o.output, inputs, 2, msg, sizeof msg) : NULL;
    if (o.output && !out) return fail("%s", msg);
    lf_context *ctx = NULL;
    lf_attention *layer = NULL;
    run_input in = {0};
    float *y = NULL;
    double *times = NULL;
    lf_attention_config cfg;
    rc = 1;
    lf_status st = lf_context_create(o.device, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fail("%s: %s", lf_status_string(st), msg);
        goto done;
    }
    announce(ctx);
    lf_load_options lo;
    lf_load_options_init(&lo);
    lo.heads = o.heads, lo.mode = o.mode, lo.causal = o.causal ? 1 : -1;
    lo.projection = o.mode == LF_MODE_LINFORMER ? o.projection : LF_PROJ_LEARNED;
    if ((st = lf_attention_load_with(ctx, o.model, &lo, &layer)) != LF_OK ||
        (st = lf_attention_config_get(layer, &cfg)) != LF_OK) {
        const bool hint = st == LF_ERR_UNSUPPORTED && lo.projection == LF_PROJ_LEARNED && o.mode == LF_MODE_LINFORMER;
        fail("%s: %s%s", lf_status_string(st), lf_context_last_error(ctx),
             hint ? " (add --projection mean or max)" : "");
        goto done;
    }
    if (read_input(o.input, cfg.d_model, o.check, &in)) goto done;
    const size_t count = (size_t)in.batch * in.n * cfg.d_model;
    if (!(y = malloc(count * sizeof *y)) || !(times = malloc(o.repeat * sizeof *times))) {
        fail("out of host memory");
        goto done;
    }
    if ((st = forwards(layer, &o, &in, y, times)) != LF_OK) {
        fail("%s: %s", lf_status_string(st), lf_context_last_error(ctx));
        goto done;
    }
    rc = out ? write_output(out, &in, cfg.d_model, y) : 0;
    out = NULL; /* committed or aborted */
    if (rc) goto done;
    qsort(times, o.repeat, sizeof *times, compare_doubles);
    fprintf(stderr, "%s attention, batch %d, n %d, d_model %d, heads %d, k %d: %.3f ms median device time over %d run(s)\n",
            lf_mode_name(cfg.mode), in.batch, in.n, cfg.d_model, cfg.heads, cfg.k, times[o.repeat / 2], o.repeat);
    if (o.check) rc = check_output(y, in.y, count, o.tolerance);
done:
    output_file_abort(out);
    free(in.x), free(in.y), free(in.lengths), free(y), free(times);
    lf_attention_free(layer);
    lf_context_free(ctx);
    return rc;
}
