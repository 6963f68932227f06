#define _XOPEN_SOURCE 700 /* nftw */
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

uint64_t lf_test_seed(void)
{
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (++counter * 0x9e3779b97f4a7c15ull);
    cr_log_info("random seed %llu", (unsigned long long)seed);
    return seed;
}

void lf_test_fill(float *x, size_t count, uint64_t *state, float lo, float hi)
{
    for (size_t i = 0; i < count; i++)
        x[i] = lo + (hi - lo) * (float)lf__rand_uniform(state);
}

void lf_test_poison(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++) x[i] = LF_POISON;
}

double lf_test_rel_err(const float *out, const double *ref, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(out[i]) || out[i] == LF_POISON) return INFINITY;
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

double lf_test_rel_err_f(const float *out, const float *ref, size_t count)
{
    double *r = malloc(count * sizeof *r);
    cr_assert(r != NULL);
    for (size_t i = 0; i < count; i++) r[i] = ref[i];
    double e = lf_test_rel_err(out, r, count);
    free(r);
    return e;
}

static bool env_is_one(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

bool lf_test_tiny(void) { return env_is_one("LF_TEST_TINY"); }

bool lf_test_with_mkl(void) { return env_is_one("LF_TEST_MKL"); }

int lf_test_plot_status(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0 ? 0 : 1; }

void lf_test_expect_undrawn(const char *figure, const char *log)
{
    char side[1024];
    cr_expect(strstr(log, "gnuplot is not installed") && strstr(log, figure), "no word that %s is not drawn:\n%s",
              figure, log);
    cr_expect_neq(access(figure, F_OK), 0, "%s exists without gnuplot", figure);
    for (int i = 0; i < 2; i++) {
        snprintf(side, sizeof side, "%s%s", figure, i ? ".gp" : ".dat");
        cr_expect_eq(access(side, R_OK), 0, "no %s to draw the figure with", side);
    }
}

lf_context *lf_test_context(void)
{
    char msg[1024] = "";
    lf_context *ctx = NULL;
    lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "no OpenCL context: %s (%s)", lf_status_string(st), msg);
    return ctx;
}

lf_kernel_params lf_test_kernel_params(lf_context *ctx)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK, "%s", lf_context_last_error(ctx));
    lf_kernel_params kp;
    char msg[256];
    cr_assert_eq(lf__kernel_params(&info, &kp, msg, sizeof msg), LF_OK, "%s", msg);
    return kp;
}

typedef struct {
    const char *file, *a, *b;
    bool found;
} built_search;
static void find_built(void *user, const char *file, const char *options)
{
    built_search *s = user;
    if (strcmp(file, s->file) == 0 && strstr(options, s->a) && strstr(options, s->b)) s->found = true;
}

bool lf_test_built_with(lf_context *ctx, const char *file, const char *a, const char *b)
{
    built_search s = {file, a, b, false};
    lf__programs_each(ctx, find_built, &s);
    return s.found;
}

int lf_test_system(const char *cmd, char *log, size_t log_size)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t used = 0;
    char buf[512];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (log && used + 1 < log_size) {
            size_t take = got < log_size - used - 1 ? got : log_size - used - 1;
            memcpy(log + used, buf, take);
            used += take;
        }
    }
    if (log && log_size) log[used] = 0;
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* An environment variable when set and not empty, else the build's value. */
static const char *env_or(const char *name, const char *built)
{
    const char *v = getenv(name);
    return v && *v ? v : built;
}

const char *lf_test_source_dir(void) { return env_or("LINFORMER_TEST_DATA", LF_BUILD_SOURCE_DIR); }

const char *lf_test_tool(void) { return env_or("LINFORMER_TOOL", LF_BUILD_TOOL_PATH); }

int lf_test_run_tool(const char *args, char *log, size_t log_size)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", lf_test_tool(), args);
    return lf_test_system(cmd, log, log_size);
}

cl_mem lf_test_upload(lf_context *ctx, const void *data, size_t bytes)
{
    cl_mem m = NULL;
    cr_assert_eq(lf__alloc(ctx, bytes, "test buffer", &m), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf__upload(ctx, m, 0, data, bytes), LF_OK, "%s", lf_context_last_error(ctx));
    return m;
}

void lf_test_download(lf_context *ctx, cl_mem m, float *out, size_t count)
{
    cr_assert_eq(lf__download(ctx, m, 0, out, count * sizeof *out), LF_OK, "%s", lf_context_last_error(ctx));
}

float *lf_test_random(size_t count, uint64_t *state, float lo, float hi)
{
    float *x = malloc(count * sizeof *x);
    cr_assert_not_null(x);
    lf_test_fill(x, count, state, lo, hi);
    return x;
}

void lf_test_make_dir(char *dir, const char *what)
{
    snprintf(dir, 64, "/tmp/lf-%.30s-XXXXXX", what);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir);
}

static int remove_entry(const char *path, const struct stat *st, int kind, struct FTW *at)
{
    (void)st, (void)kind, (void)at;
    return remove(path);
}

void lf_test_remove_dir(const char *dir)
{
    /* depth first, links not followed: the folder's own files go, nothing else */
    cr_expect_eq(nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0, "removing %s: %s", dir, strerror(errno));
}
