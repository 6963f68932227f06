/* run_input.c - the input file of `linformer run` and `linformer rank` (run_input.h). */
#include "run_input.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linformer.h"

static int fail(const run_input_spec *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const run_input_spec *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "linformer %s: ", s->command);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static void note_unused(lf_tensor_file *f, const char *path, const run_input_spec *s, const char *main)
{
    for (size_t i = 0; i < lf_tensor_file_count(f); i++) {
        lf_tensor_info t;
        if (lf_tensor_file_info(f, i, &t) == LF_OK && strcmp(t.name, main) && strcmp(t.name, "lengths") &&
            (strcmp(t.name, "y") || !s->y_width))
            fprintf(stderr, "linformer %s: note: %s: tensor \"%s\" is not used\n", s->command, path, t.name);
    }
}

/* x [batch, n, width] or tokens [batch, n]: sets batch and n. */
static int read_main(lf_tensor_file *f, const char *path, const run_input_spec *s, run_input *in)
{
    const char *name = s->tokens ? "tokens" : "x";
    lf_tensor_info t;
    if (lf_tensor_file_find(f, name, &t) != LF_OK || t.ndim != (s->tokens ? 2 : 3) || t.shape[0] <= 0 ||
        t.shape[1] <= 0 || t.shape[0] > (1 << 20) || t.shape[1] > s->max_n || (!s->tokens && t.shape[2] != s->width))
        return s->tokens ? fail(s, "%s: tensor \"tokens\" must be i64 [batch, n] with 1 <= n <= %d", path, s->max_n)
                         : fail(s, "%s: tensor \"x\" must be f32 [batch, n, %d] with 1 <= n <= %d", path, s->width,
                                s->max_n);
    in->batch = (int)t.shape[0], in->n = (int)t.shape[1];
    lf_status st = LF_ERR_OUT_OF_MEMORY;
    if (s->tokens && (in->tokens = malloc(t.count * sizeof *in->tokens)))
        st = lf_tensor_file_read_i64(f, name, in->tokens, t.count);
    else if (!s->tokens && (in->x = malloc(t.count * sizeof *in->x)))
        st = lf_tensor_file_read_f32(f, name, in->x, t.count);
    if (st == LF_ERR_OUT_OF_MEMORY) return fail(s, "out of host memory for %s", path);
    return st == LF_OK ? 0 : fail(s, "%s", lf_tensor_file_last_error(f));
}

static int read_lengths(lf_tensor_file *f, const char *path, const run_input_spec *s, run_input *in)
{
    lf_tensor_info t;
    if (lf_tensor_file_find(f, "lengths", &t) != LF_OK) return 0;
    int64_t *v = NULL;
    if (t.ndim != 1 || t.shape[0] != in->batch || !(v = malloc(t.count * sizeof *v)) ||
        lf_tensor_file_read_i64(f, "lengths", v, t.count) != LF_OK || !(in->lengths = malloc(t.count * sizeof(int32_t)))) {
        free(v);
        return fail(s, "%s: tensor \"lengths\" must be integers [%d]", path, in->batch);
    }
    int rc = 0;
    for (int b = 0; b < in->batch && rc == 0; b++) {
        if (v[b] < 0 || v[b] > in->n)
            rc = fail(s, "%s: lengths[%d] = %lld is outside [0, n = %d]", path, b, (long long)v[b], in->n);
        in->lengths[b] = (int32_t)v[b];
    }
    free(v);
    return rc;
}

/* y, the expected output: [batch, n, y_width]. */
static int read_y(lf_tensor_file *f, const char *path, const run_input_spec *s, run_input *in)
{
    lf_tensor_info t;
    if (lf_tensor_file_find(f, "y", &t) != LF_OK) return fail(s, "--check: %s holds no tensor \"y\" to compare with", path);
    if (t.ndim != 3 || t.shape[0] != in->batch || t.shape[1] != in->n || t.shape[2] != s->y_width)
        return fail(s, "%s: tensor \"y\" must be [%d, %d, %d]", path, in->batch, in->n, s->y_width);
    if (!(in->y = malloc(t.count * sizeof *in->y))) return fail(s, "out of host memory for %s", path);
    return lf_tensor_file_read_f32(f, "y", in->y, t.count) == LF_OK ? 0 : fail(s, "%s", lf_tensor_file_last_error(f));
}

int run_input_read(const char *path, const run_input_spec *spec, run_input *in)
{
    char msg[1024];
    lf_tensor_file *f = NULL;
    *in = (run_input){0};
    if (lf_tensor_file_open(path, &f, msg, sizeof msg) != LF_OK) return fail(spec, "%s", msg);
    note_unused(f, path, spec, spec->tokens ? "tokens" : "x");
    int rc = read_main(f, path, spec, in);
    if (rc == 0) rc = read_lengths(f, path, spec, in);
    if (rc == 0 && spec->y_width) rc = read_y(f, path, spec, in);
    lf_tensor_file_free(f);
    return rc;
}

void run_input_free(run_input *in)
{
    free(in->x), free(in->tokens), free(in->lengths), free(in->y);
    *in = (run_input){0};
}
