/*
 * tune.c - CLBlast's GEMM parameters searched for this device, kept in the
 * disk cache and applied when a context opens.
 *
 * CLBlast ships tuned parameters for the devices in its database and falls
 * back to generic ones elsewhere (PoCL's CPU device, new GPUs). The search
 * times random valid sets of its kernels' parameters (CLBlast's own tuner
 * constraints) on GEMM shapes the library runs, through
 * CLBlastOverrideParameters, which needs every parameter of a kernel:
 *   Xgemm        the tiled kernel of large GEMMs;
 *   XgemmDirect  the one-launch kernel of small ones;
 *   GemmRoutine  XGEMM_MIN_INDIRECT_SIZE: m n k below its cube goes direct.
 * The winners are stored under a key of the platform version, device name and
 * driver version, as one line per kernel ("Xgemm GEMMK=0 KREG=1 ..."). An
 * entry that does not parse, holds a set the search could not have made
 * (checked as the search checks its own) or that CLBlast refuses is ignored;
 * the first two count as a bad cache entry.
 */
#define _GNU_SOURCE /* asprintf */
#include "blas.h" /* first: it fixes the OpenCL version the headers target */
#include "kernel_cache.h"
#include "tune_space.h"

#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The sets of a stored entry, by kernel. */
typedef struct {
    bool have[K_COUNT];
    size_t v[K_COUNT][LF_TUNE_MAX_PARAMS];
} lf_tuned;

static lf_status apply(lf_context *ctx, int kernel, const size_t *values)
{
    const lf_space *s = &lf__tune_spaces[kernel];
    lf__clblast_lock();
    CLBlastStatusCode st = CLBlastOverrideParameters(ctx->device, s->kernel, CLBlastPrecisionSingle,
                                                     (size_t)s->count, (const char **)s->names, values);
    lf__clblast_unlock();
    if (st != CLBlastSuccess)
        return lf__fail(ctx, LF_ERR_BLAS, "CLBlast refused the parameters of %s (status %d)", s->kernel, (int)st);
    return LF_OK;
}

/* ---- The stored entry ---- */

static char *entry_key(const lf_context *ctx)
{
    char *key;
    return asprintf(&key, "gemm-tune 1|CLBlast %d.%d.%d|%s|%s|%s", CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR,
                    CLBLAST_VERSION_PATCH, ctx->info.platform_version, ctx->info.device_name,
                    ctx->info.driver_version) < 0 ? NULL : key;
}

/* Where the entry of this device lives; false when the cache is off. */
static bool entry_path(const lf_context *ctx, char *path, size_t size, char **key)
{
    char dir[4096];
    if (!lf__cache_dir(ctx->cache_dir, dir, sizeof dir) || !(*key = entry_key(ctx))) return false;
    lf__cache_path(dir, *key, path, size);
    return true;
}

/* One line "KERNEL NAME=VALUE ..." with every parameter of a known kernel, a valid set on device d. */
static bool parse_line(const char *line, const lf_device_info *d, lf_tuned *t)
{
    char kernel[32];
    int used = 0;
    if (sscanf(line, "%31s%n", kernel, &used) != 1) return false;
    int k = 0;
    while (k < K_COUNT && strcmp(kernel, lf__tune_spaces[k].kernel) != 0) k++;
    if (k == K_COUNT) return false;
    line += used;
    for (int i = 0; i < lf__tune_spaces[k].count; i++) {
        char name[32];
        unsigned long long value;
        if (sscanf(line, " %31[A-Z_]=%llu%n", name, &value, &used) != 2 ||
            strcmp(name, lf__tune_spaces[k].names[i]) != 0)
            return false;
        t->v[k][i] = (size_t)value;
        line += used;
    }
    t->have[k] = true;
    return lf__tune_stored_valid(k, t->v[k], d);
}

/* Text -> values; false (and nothing kept) when any line does not parse or is invalid on d. */
static bool parse_entry(char *text, const lf_device_info *d, lf_tuned *t)
{
    memset(t, 0, sizeof *t);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (!parse_line(line, d, t)) {
            memset(t, 0, sizeof *t);
            return false;
        }
    return true;
}

static void format_entry(const lf_tuned *t, char *out, size_t size)
{
    size_t used = 0;
    for (int k = 0; k < K_COUNT && used < size; k++) {
        if (!t->have[k]) continue;
        used += (size_t)snprintf(out + used, size - used, "%s", lf__tune_spaces[k].kernel);
        for (int i = 0; i < lf__tune_spaces[k].count && used < size; i++)
            used += (size_t)snprintf(out + used, size - used, " %s=%zu", lf__tune_spaces[k].names[i], t->v[k][i]);
        if (used < size) used += (size_t)snprintf(out + used, size - used, "\n");
    }
}

/* The stored entry of this device, if any and sound; one that is not is a bad entry. */
static bool load_entry(lf_context *ctx, lf_tuned *t)
{
    char path[4200], *key = NULL;
    size_t len = 0;
    unsigned char *data = NULL;
    if (entry_path(ctx, path, sizeof path, &key) && lf__cache_load(path, key, &data, &len) != LF_CACHE_FOUND)
        data = NULL;
    char *text = data ? realloc(data, len + 1) : NULL;
    bool ok = false;
    if (text) {
        text[len] = 0;
        ok = parse_entry(text, &ctx->info, t);
        ctx->cache_rejected += !ok;
    } else {
        free(data);
    }
    free(text);
    free(key);
    return ok;
}

void lf__tune_apply(lf_context *ctx)
{
    lf_tuned t;
    if (!load_entry(ctx, &t)) return;
    for (int k = 0; k < K_COUNT; k++)
        if (t.have[k]) apply(ctx, k, t.v[k]); /* a refused set leaves CLBlast's own */
}

/* ---- The search ---- */

typedef struct {
    lf_context *ctx;
    lf_tune_log log;
    void *user;
    uint64_t rng;
    double seconds, deadline; /* the limit, and when it is reached (monotonic seconds) */
} lf_tuner;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void say(lf_tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(lf_tuner *t, const char *fmt, ...)
{
    if (!t->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    t->log(line, t->user);
}

/* m, n, k of C = A B^T shaped like the layer's GEMMs: for the tiled kernel a
 * projection of 1024 rows to Q|K|V and a sequence projection (k 256 of 1024
 * positions); for the direct kernel one head's scores and P V. */
static const size_t xgemm_shapes[][3] = {{1024, 1536, 512}, {256, 512, 1024}};
static const size_t direct_shapes[][3] = {{256, 256, 64}, {256, 64, 256}};

/* Milliseconds of the shapes under the parameters in force (the median of 3
 * runs each), given up past `limit`; a set that CLBlast cannot build or run
 * costs 1e300. The compiled programs are kept for the next call (`clear`
 * false) or dropped: each set is a program of its own. */
static double cost(lf_context *ctx, const size_t (*shapes)[3], int count, double limit, bool clear)
{
    double total = 0;
    for (int i = 0; i < count && total <= limit; i++) {
        double gflops = 0;
        if (lf__gemm_rate(ctx, shapes[i][0], shapes[i][1], shapes[i][2], 3, &gflops) != LF_OK || gflops <= 0)
            total = 1e300;
        else
            total += 2.0 * (double)shapes[i][0] * shapes[i][1] * shapes[i][2] / (gflops * 1e6);
    }
    if (clear) lf__clblast_clear_cache();
    return total;
}

static double flops(const size_t (*shapes)[3], int count)
{
    double total = 0;
    for (int i = 0; i < count; i++) total += 2.0 * (double)shapes[i][0] * shapes[i][1] * shapes[i][2];
    return total;
}

static void set_threshold(lf_context *ctx, size_t size) { apply(ctx, K_ROUTINE, &size); }

/* A step that runs once whatever the time (the parameters in force, one
 * crossover edge) and ends past the deadline is said: the limit did not hold. */
static void say_overrun(lf_tuner *t, const char *what, const char *which, double began)
{
    const double end = now_s();
    if (began <= t->deadline && end > t->deadline)
        say(t, "%s %s took %.1f s (compiling its kernels), past the time limit of %.1f s", what, which, end - began,
            t->seconds);
    else if (end > t->deadline)
        say(t, "%s %s: measured past the time limit, as each kernel is once whatever the limit", what, which);
}

/* One random set: compiled and timed on a small shape first, which bounds what
 * the full shapes would take; a set whose full measure would end past `until`
 * is not measured. Returns its ms, 1e300 when it does not run, or -1 (no time). */
static double try_set(lf_tuner *t, const size_t (*shapes)[3], int nshapes, double limit, double until)
{
    static const size_t probe[1][3] = {{128, 128, 128}};
    const double small = cost(t->ctx, probe, 1, 1e300, false);
    const double full_s = small * 1e-3 * 3 * flops(shapes, nshapes) / flops(probe, 1); /* 3 runs a shape */
    double ms = small;
    if (small < 1e300) ms = now_s() + full_s < until ? cost(t->ctx, shapes, nshapes, limit, false) : -1;
    lf__clblast_clear_cache();
    return ms;
}

/* Random sets of `kernel` while there is time before `until`; true with the
 * best in `best` when one beats the parameters in force at the start. */
static bool search(lf_tuner *t, int kernel, double until, const size_t (*shapes)[3], int nshapes, size_t *best)
{
    const char *name = lf__tune_spaces[kernel].kernel;
    const double began = now_s(), before = cost(t->ctx, shapes, nshapes, 1e300, true);
    double best_ms = before;
    say(t, "%s: %.1f ms with the parameters in force", name, before);
    say_overrun(t, name, "with the parameters in force", began);
    size_t v[LF_TUNE_MAX_PARAMS];
    bool found = false;
    for (int tried = 1; now_s() < until && lf__tune_random_set(kernel, &t->ctx->info, &t->rng, v); tried++) {
        if (apply(t->ctx, kernel, v) != LF_OK) continue;
        const double ms = try_set(t, shapes, nshapes, 2 * best_ms, until); /* a slow set stops early */
        if (ms < 0) {
            say(t, "%s set %d: no time left to measure it", name, tried);
            break;
        }
        if (ms < best_ms) {
            best_ms = ms;
            memcpy(best, v, sizeof v);
            found = true;
        }
        if (ms >= 1e300) say(t, "%s set %d: does not build or run here", name, tried);
        else if (ms > 2 * best_ms) say(t, "%s set %d: over twice the best, stopped", name, tried);
        else say(t, "%s set %d: %.1f ms (best %.1f ms)", name, tried, ms, best_ms);
    }
    return found;
}

/* The smallest cube edge from which the tiled kernel beats the direct one at
 * every larger edge measured; twice the largest edge when it never does at
 * any; 0 (no finding: nothing new is stored, and later contexts keep a stored
 * threshold or CLBlast's own) when time ran out before it won at one. A
 * guess there forced the tiled kernel from 128 on an NVIDIA H200, where it
 * made the layer's GEMMs 1.3-3.6 times slower. The edges go up while there
 * is time; the smallest is always measured. */
static size_t find_threshold(lf_tuner *t)
{
    static const size_t edges[] = {64, 128, 256, 512, 1024};
    const size_t count = sizeof edges / sizeof edges[0];
    size_t threshold = 0, measured = 0;
    for (size_t i = 0; i < count && (i == 0 || now_s() < t->deadline); i++, measured++) {
        const size_t shape[1][3] = {{edges[i], edges[i], edges[i]}};
        const double began = now_s();
        set_threshold(t->ctx, LF_ALWAYS_DIRECT);
        const double direct = cost(t->ctx, shape, 1, 1e300, true);
        set_threshold(t->ctx, LF_NEVER_DIRECT);
        const double tiled = cost(t->ctx, shape, 1, 1e300, true);
        say(t, "GemmRoutine: %zu^3: direct %.2f ms, tiled %.2f ms", edges[i], direct, tiled);
        if (i == 0) say_overrun(t, "GemmRoutine", "at the smallest edge", began);
        if (tiled >= direct) threshold = 0;
        else if (!threshold) threshold = edges[i];
    }
    if (!threshold && measured == count) return 2 * edges[count - 1];
    if (!threshold) say(t, "GemmRoutine: the tiled kernel won at no edge measured; the threshold in force stays");
    return threshold;
}

/* Stores the entry and reads it back: a cache folder that takes nothing (full,
 * read-only, not a folder) is found out, since storing never fails aloud. */
static bool store_checked(const char *path, const char *key, const char *text)
{
    lf__cache_store(path, key, (const unsigned char *)text, strlen(text));
    unsigned char *back = NULL;
    size_t len = 0;
    const bool ok = lf__cache_load(path, key, &back, &len) == LF_CACHE_FOUND && len == strlen(text) &&
                    memcmp(back, text, len) == 0;
    free(back);
    return ok;
}

/* Before any search: whether the folder takes an entry (a probe beside the real one, removed again). */
static lf_status check_writable(lf_context *ctx, const char *path, const char *key)
{
    char probe[4300]; /* "ENTRY.probe.bin": its temporary is one the cache's sweep knows */
    const size_t len = strlen(path), stem = len > 4 && strcmp(path + len - 4, ".bin") == 0 ? len - 4 : len;
    snprintf(probe, sizeof probe, "%.*s.probe.bin", (int)stem, path);
    const bool ok = store_checked(probe, key, "probe");
    unlink(probe);
    if (ok) return LF_OK;
    return lf__fail(ctx, LF_ERR_IO, "cannot write the tuned parameters to %s (the kernel cache folder, "
                                    "LINFORMER_CACHE_DIR): nothing was tuned", path);
}

static lf_status tune_locked(lf_tuner *t)
{
    lf_context *ctx = t->ctx;
    char path[4200], *key = NULL;
    if (!entry_path(ctx, path, sizeof path, &key)) {
        char why[4096];
        lf_kernel_cache_dir(why, sizeof why);
        return lf__fail(ctx, LF_ERR_IO, "no cache folder to keep tuned parameters in: %s", why);
    }
    lf_status st = check_writable(ctx, path, key);
    lf_tuned found;
    if (st != LF_OK || !load_entry(ctx, &found)) memset(&found, 0, sizeof found);
    const double start = now_s(), seconds = t->seconds;
    t->deadline = start + seconds;
    if (st == LF_OK) say(t, "tuning CLBlast's GEMM kernels on \"%s\" for about %.1f s", ctx->info.device_name, seconds);
    set_threshold(ctx, LF_NEVER_DIRECT);
    if (st == LF_OK && search(t, K_XGEMM, start + 0.55 * seconds, xgemm_shapes, 2, found.v[K_XGEMM]))
        found.have[K_XGEMM] = true;
    if (st == LF_OK && found.have[K_XGEMM]) apply(ctx, K_XGEMM, found.v[K_XGEMM]);
    set_threshold(ctx, LF_ALWAYS_DIRECT);
    if (st == LF_OK && search(t, K_DIRECT, start + 0.85 * seconds, direct_shapes, 2, found.v[K_DIRECT]))
        found.have[K_DIRECT] = true;
    if (st == LF_OK && found.have[K_DIRECT]) apply(ctx, K_DIRECT, found.v[K_DIRECT]);
    if (st == LF_OK) {
        const size_t threshold = find_threshold(t); /* 0: none found, a stored one stays */
        if (threshold) found.v[K_ROUTINE][0] = threshold, found.have[K_ROUTINE] = true;
        if (found.have[K_ROUTINE]) apply(ctx, K_ROUTINE, found.v[K_ROUTINE]);
        char text[2048] = "";
        format_entry(&found, text, sizeof text);
        if (!text[0]) say(t, "nothing beat CLBlast's own parameters in %.1f s: no entry stored", now_s() - start);
        else if (store_checked(path, key, text)) say(t, "stored in %s after %.1f s:\n%s", path, now_s() - start, text);
        else st = lf__fail(ctx, LF_ERR_IO, "cannot write the tuned parameters to %s: nothing was stored", path);
    }
    free(key);
    return st;
}

lf_status lf_gemm_tune(lf_context *ctx, double seconds, lf_tune_log log, void *user)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!(seconds > 0) || !isfinite(seconds))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "seconds must be positive and finite, got %g", seconds);
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    LF_TRY(lf__context_lock(ctx));
    lf__clblast_lock(); /* the sets tried are the device's for the process: no other GEMM runs meanwhile */
    const lf_gemm_backend backend = ctx->gemm;
    ctx->gemm = LF_GEMM_CLBLAST; /* what is tuned, whatever this context's GEMMs run on */
    lf_tuner t = {ctx, log, user, (uint64_t)time(NULL), seconds, 0};
    lf_status st = tune_locked(&t);
    ctx->gemm = backend;
    lf__clblast_unlock();
    lf__context_unlock(ctx);
    return st;
}
