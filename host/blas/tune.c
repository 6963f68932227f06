/*
 * tune.c - CLBlast's GEMM parameters searched for this device, kept in the
 * disk cache and loaded when a context opens (applied class by class before
 * each GEMM, tune_use.c).
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
 * driver version, as one line per kernel ("Xgemm GEMMK=0 KREG=1 ...") for
 * every GEMM shape class, or one per class and kernel ("tile Xgemm ...", from
 * `tune --model`, tune_model.c); tune_entry.c reads and writes them. An entry
 * that does not parse or holds a set the search could not have made (checked
 * as the search checks its own) is ignored and counts as a bad cache entry;
 * a set CLBlast refuses leaves the set in force. Without an entry, the
 * built-in table's row of the device is loaded (tune_table.c).
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
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

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
        ok = lf__tune_parse(text, &ctx->info, t);
        ctx->cache_rejected += !ok;
    } else {
        free(data);
    }
    free(text);
    free(key);
    return ok;
}

lf_status lf__tune_apply(lf_context *ctx, char *errbuf, size_t errbuf_size)
{
    lf_tuned t;
    bool found = load_entry(ctx, &t);
    if (!found) LF_TRY(lf__tune_table(&ctx->info, &t, &found, errbuf, errbuf_size));
    if (!found) return LF_OK;
    if (!(ctx->tuned = malloc(sizeof *ctx->tuned)))
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "no memory for the tuned GEMM parameters");
    *ctx->tuned = t; /* applied class by class before each GEMM (tune_use.c) */
    return LF_OK;
}

/* ---- The search ---- */

double lf__tune_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lf__tune_say(lf_tuner *t, const char *fmt, ...)
{
    if (!t->log) return;
    char line[8704]; /* the stored entry's text and a path */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    t->log(line, t->user);
}

/* m, n, k of C = A B^T shaped like the layer's GEMMs: for the tiled kernel a
 * projection of 1024 rows to Q|K|V and a sequence projection (k 256 of 1024
 * positions); for the direct kernel one head's scores and P V. */
#define SHAPE(M, N, K) {.trans_b = true, .m = M, .n = N, .k = K, .batch = 1, .calls = 1}
static const lf_gemm_shape xgemm_shapes[] = {SHAPE(1024, 1536, 512), SHAPE(256, 512, 1024)};
static const lf_gemm_shape direct_shapes[] = {SHAPE(256, 256, 64), SHAPE(256, 64, 256)};
static const lf_gemm_shape probe[] = {SHAPE(128, 128, 128)};
#undef SHAPE

double lf__tune_cost(lf_context *ctx, const lf_tune_shapes *s, double limit, bool clear, bool *wrong)
{
    double total = 0;
    for (int i = 0; i < s->count && total <= limit; i++) {
        double ms = 0;
        const lf_status st = lf__gemm_time(ctx, &s->shapes[i], 3, s->refs ? s->refs[i] : NULL, &ms);
        if (wrong && st == LF_ERR_BLAS && strstr(lf_context_last_error(ctx), "is wrong")) *wrong = true;
        total = st != LF_OK || ms <= 0 ? 1e300 : total + ms * s->shapes[i].calls;
    }
    if (clear) lf__clblast_clear_cache();
    return total;
}

static double flops(const lf_tune_shapes *s)
{
    double total = 0;
    for (int i = 0; i < s->count; i++) {
        const lf_gemm_shape *g = &s->shapes[i];
        total += 2.0 * (double)g->m * g->n * g->k * g->batch * g->calls;
    }
    return total;
}

static void set_threshold(lf_context *ctx, size_t size) { lf__tune_set(ctx, K_ROUTINE, &size); }

void lf__tune_overrun(lf_tuner *t, const char *what, const char *which, double began)
{
    const double end = lf__tune_now();
    if (began <= t->deadline && end > t->deadline)
        lf__tune_say(t, "%s %s took %.1f s (compiling its kernels), past the time limit of %.1f s", what, which,
                     end - began, t->seconds);
    else if (end > t->deadline)
        lf__tune_say(t, "%s %s: measured past the time limit, as each kernel is once whatever the limit", what, which);
}

/* One set: compiled and timed on a small shape first, which bounds what the
 * full shapes would take; a set whose full measure would end past `until` is
 * not measured. Returns its ms, 1e300 when it does not run or is wrong, or -1 (no time). */
static double try_set(lf_tuner *t, const lf_tune_shapes *s, double limit, double until, bool *wrong)
{
    const lf_tune_shapes small_shape = {probe, 1, NULL};
    const double small = lf__tune_cost(t->ctx, &small_shape, 1e300, false, NULL);
    const double full_s = small * 1e-3 * 3 * flops(s) / flops(&small_shape); /* 3 runs a shape */
    double ms = small;
    if (small < 1e300) ms = lf__tune_now() + full_s < until ? lf__tune_cost(t->ctx, s, limit, false, wrong) : -1;
    lf__clblast_clear_cache();
    return ms;
}

/* The next set: a valid seed first, then random ones. */
static bool next_set(lf_tuner *t, int kernel, const lf_tune_seeds *seeds, int *seed, size_t *v)
{
    for (; seeds && *seed < seeds->count; (*seed)++)
        if (lf__tune_stored_valid(kernel, seeds->sets[*seed], &t->ctx->info)) {
            memcpy(v, seeds->sets[(*seed)++], LF_TUNE_MAX_PARAMS * sizeof *v);
            return true;
        }
    return lf__tune_random_set(kernel, &t->ctx->info, &t->rng, v);
}

bool lf__tune_search(lf_tuner *t, int kernel, double until, const lf_tune_shapes *s, const lf_tune_seeds *seeds,
                     size_t *best, double *best_ms)
{
    const char *name = lf__tune_spaces[kernel].kernel;
    size_t v[LF_TUNE_MAX_PARAMS];
    bool found = false;
    int seed = 0;
    for (int tried = 1; lf__tune_now() < until && next_set(t, kernel, seeds, &seed, v); tried++) {
        if (lf__tune_set(t->ctx, kernel, v) != LF_OK) continue;
        bool wrong = false;
        /* a slow set stops early */
        const double ms = try_set(t, s, *best_ms < 1e300 ? 2 * *best_ms : 1e300, until, &wrong);
        if (ms < 0) {
            lf__tune_say(t, "%s set %d: no time left to measure it", name, tried);
            break;
        }
        if (ms < *best_ms) {
            *best_ms = ms;
            memcpy(best, v, sizeof v);
            found = true;
        }
        if (wrong) lf__tune_say(t, "%s set %d: a wrong result, rejected", name, tried);
        else if (ms >= 1e300) lf__tune_say(t, "%s set %d: does not build or run here", name, tried);
        else if (ms > 2 * *best_ms) lf__tune_say(t, "%s set %d: over twice the best, stopped", name, tried);
        else lf__tune_say(t, "%s set %d: %.1f ms (best %.1f ms)", name, tried, ms, *best_ms);
    }
    return found;
}

/* Random sets of `kernel` while there is time before `until`; true with the
 * best in `best` when one beats the parameters in force at the start. */
static bool search_in_force(lf_tuner *t, int kernel, double until, const lf_tune_shapes *s, size_t *best)
{
    const char *name = lf__tune_spaces[kernel].kernel;
    const double began = lf__tune_now();
    double best_ms = lf__tune_cost(t->ctx, s, 1e300, true, NULL);
    lf__tune_say(t, "%s: %.1f ms with the parameters in force", name, best_ms);
    lf__tune_overrun(t, name, "with the parameters in force", began);
    return lf__tune_search(t, kernel, until, s, NULL, best, &best_ms);
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
    for (size_t i = 0; i < count && (i == 0 || lf__tune_now() < t->deadline); i++, measured++) {
        const lf_gemm_shape cube = {.trans_b = true, .m = edges[i], .n = edges[i], .k = edges[i], .batch = 1,
                                    .calls = 1};
        const lf_tune_shapes shape = {&cube, 1, NULL};
        const double began = lf__tune_now();
        set_threshold(t->ctx, LF_ALWAYS_DIRECT);
        const double direct = lf__tune_cost(t->ctx, &shape, 1e300, true, NULL);
        set_threshold(t->ctx, LF_NEVER_DIRECT);
        const double tiled = lf__tune_cost(t->ctx, &shape, 1e300, true, NULL);
        lf__tune_say(t, "GemmRoutine: %zu^3: direct %.2f ms, tiled %.2f ms", edges[i], direct, tiled);
        if (i == 0) lf__tune_overrun(t, "GemmRoutine", "at the smallest edge", began);
        if (tiled >= direct) threshold = 0;
        else if (!threshold) threshold = edges[i];
    }
    if (!threshold && measured == count) return 2 * edges[count - 1];
    if (!threshold)
        lf__tune_say(t, "GemmRoutine: the tiled kernel won at no edge measured; the threshold in force stays");
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
    char probe_path[4300]; /* "ENTRY.probe.bin": its temporary is one the cache's sweep knows */
    const size_t len = strlen(path), stem = len > 4 && strcmp(path + len - 4, ".bin") == 0 ? len - 4 : len;
    snprintf(probe_path, sizeof probe_path, "%.*s.probe.bin", (int)stem, path);
    const bool ok = store_checked(probe_path, key, "probe");
    unlink(probe_path);
    if (ok) return LF_OK;
    return lf__fail(ctx, LF_ERR_IO, "cannot write the tuned parameters to %s (the kernel cache folder, "
                                    "LINFORMER_CACHE_DIR): nothing was tuned", path);
}

/* The set of `kernel` in every class. */
static void every_class(lf_tuned *found, int kernel, const size_t *v)
{
    for (int c = 0; c < C_COUNT; c++) {
        memcpy(found->v[c][kernel], v, (size_t)lf__tune_spaces[kernel].count * sizeof *v);
        found->have[c][kernel] = true;
    }
}

/* One set per kernel for every class, on the fixed shapes. */
static lf_status tune_fixed(lf_tuner *t, lf_tuned *found, void *arg)
{
    (void)arg;
    lf_context *ctx = t->ctx;
    const double start = lf__tune_now(), seconds = t->seconds;
    const lf_tune_shapes tiled = {xgemm_shapes, 2, NULL}, direct = {direct_shapes, 2, NULL};
    size_t v[LF_TUNE_MAX_PARAMS];
    set_threshold(ctx, LF_NEVER_DIRECT);
    if (search_in_force(t, K_XGEMM, start + 0.55 * seconds, &tiled, v)) every_class(found, K_XGEMM, v);
    if (found->have[0][K_XGEMM]) lf__tune_set(ctx, K_XGEMM, found->v[0][K_XGEMM]);
    set_threshold(ctx, LF_ALWAYS_DIRECT);
    if (search_in_force(t, K_DIRECT, start + 0.85 * seconds, &direct, v)) every_class(found, K_DIRECT, v);
    if (found->have[0][K_DIRECT]) lf__tune_set(ctx, K_DIRECT, found->v[0][K_DIRECT]);
    const size_t threshold = find_threshold(t); /* 0: none found, a stored one stays */
    if (threshold) every_class(found, K_ROUTINE, &threshold);
    return LF_OK;
}

lf_status lf__tune_run(lf_context *ctx, double seconds, lf_tune_log log, void *user,
                       lf_status (*body)(lf_tuner *t, lf_tuned *found, void *arg), void *arg)
{
    if (!(seconds > 0) || !isfinite(seconds))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "seconds must be positive and finite, got %g", seconds);
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    char path[4200], *key = NULL;
    if (!entry_path(ctx, path, sizeof path, &key)) {
        char why[4096];
        lf_kernel_cache_dir(why, sizeof why);
        return lf__fail(ctx, LF_ERR_IO, "no cache folder to keep tuned parameters in: %s", why);
    }
    LF_TRY(lf__context_lock(ctx));
    lf__clblast_lock(); /* the sets tried are the device's for the process: no other GEMM runs meanwhile */
    const lf_gemm_backend backend = ctx->gemm;
    lf_tuned *tuned = ctx->tuned;
    ctx->gemm = LF_GEMM_CLBLAST, ctx->tuned = NULL; /* what is tuned, whatever this context's GEMMs run on */
    lf_tuner t = {ctx, log, user, (uint64_t)time(NULL), seconds, lf__tune_now() + seconds};
    lf_status st = check_writable(ctx, path, key);
    lf_tuned found;
    if (st != LF_OK || !load_entry(ctx, &found)) memset(&found, 0, sizeof found);
    const double start = lf__tune_now();
    if (st == LF_OK) {
        lf__tune_say(&t, "tuning CLBlast's GEMM kernels on \"%s\" for about %.1f s", ctx->info.device_name, seconds);
        st = body(&t, &found, arg);
    }
    char text[8192] = "";
    if (st == LF_OK) {
        lf__tune_format(&found, text, sizeof text);
        if (!text[0]) {
            lf__tune_say(&t, "nothing beat the parameters in force in %.1f s: no entry stored", lf__tune_now() - start);
        } else if (store_checked(path, key, text)) {
            lf__tune_say(&t, "stored in %s after %.1f s:\n%s", path, lf__tune_now() - start, text);
            if (tuned || (tuned = malloc(sizeof *tuned))) *tuned = found; /* this context's GEMMs use it from now */
        } else {
            st = lf__fail(ctx, LF_ERR_IO, "cannot write the tuned parameters to %s: nothing was stored", path);
        }
    }
    ctx->gemm = backend, ctx->tuned = tuned;
    lf__clblast_unlock();
    lf__context_unlock(ctx);
    free(key);
    return st;
}

lf_status lf_gemm_tune(lf_context *ctx, double seconds, lf_tune_log log, void *user)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    return lf__tune_run(ctx, seconds, log, user, tune_fixed, NULL);
}
