/*
 * test_tune.c - `linformer tune` and lf_gemm_tune: the time limit holds (no
 * step begins past it but the three that must run once; with --model, but
 * each class's parameters in force), other contexts'
 * CLBlast GEMMs wait for the search, a cache folder that
 * takes nothing fails before the search, a stored entry is checked as the
 * search checks its own sets, and the options are parsed as every other
 * command's.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "kernel_cache.h"
#include "runtime.h"

#include <clblast_c.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { MAX_LINES = 4096 };
typedef struct {
    double at[MAX_LINES];
    char line[MAX_LINES][160];
    int count;
} tune_log;

static void record(const char *line, void *user)
{
    tune_log *log = user;
    if (log->count == MAX_LINES) return;
    log->at[log->count] = now_s();
    snprintf(log->line[log->count], sizeof log->line[0], "%s", line);
    __atomic_store_n(&log->count, log->count + 1, __ATOMIC_RELEASE); /* read while the search runs */
}

/* The steps that run once whatever the time: each kernel's parameters in force, the smallest crossover edge. */
static bool must_run(const char *line)
{
    return strstr(line, "with the parameters in force") || strncmp(line, "GemmRoutine: 64^3", 17) == 0;
}

static bool is_step(const char *line)
{
    return (strstr(line, " ms") || strstr(line, "does not build")) && !strstr(line, "past the time limit") &&
           !strstr(line, "stored in");
}

/* A context whose cache is a new folder `dir`. */
static lf_context *in_new_cache(char *dir, const char *what)
{
    lf_test_make_dir(dir, what);
    cr_assert_eq(setenv("LINFORMER_CACHE_DIR", dir, 1), 0);
    return lf_test_context();
}

Test(tune, no_step_begins_past_the_time_limit, .timeout = 900)
{
    char dir[64];
    lf_context *ctx = in_new_cache(dir, "tune");
    static tune_log log;
    /* 10 ms: past the limit before the first random set could begin. Such a
     * set is compiled when it begins, and no compile can be stopped: PoCL
     * took 13 minutes for one on a 2.0 GHz first-generation Zen core. */
    const double seconds = 0.01, start = now_s();
    const lf_status st = lf_gemm_tune(ctx, seconds, record, &log);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    bool overran = false, said = false;
    for (int i = 0; i < log.count; i++) {
        const double began = i ? log.at[i - 1] : start, ended = log.at[i];
        said |= strstr(log.line[i], "past the time limit") != NULL;
        if (!is_step(log.line[i])) continue;
        if (must_run(log.line[i])) overran |= ended > start + seconds;
        else cr_expect_lt(began, start + seconds, "\"%s\" began %.1f s after the start", log.line[i], began - start);
    }
    cr_expect(!overran || said, "a step that ran past the limit is said");
    const char *stored = log.line[log.count - 1];
    cr_expect(strstr(stored, "stored in") || strstr(stored, "no entry stored"), "the last line: %s", stored);
    /* Only the smallest edge had time: a threshold is stored only where the
     * tiled kernel won there, never a guess past what was measured. */
    double direct = 0, tiled = 0;
    for (int i = 0; i < log.count; i++) sscanf(log.line[i], "GemmRoutine: 64^3: direct %lf ms, tiled %lf ms", &direct, &tiled);
    cr_assert_gt(direct, 0, "no GemmRoutine line at 64");
    if (tiled < direct) cr_expect(strstr(stored, "XGEMM_MIN_INDIRECT_SIZE=64\n"), "%s", stored);
    else if (tiled > direct) /* equal as printed (to 0.01 ms): either */
        cr_expect(!strstr(stored, "XGEMM_MIN_INDIRECT_SIZE"), "direct %.2f ms, tiled %.2f ms at 64, yet: %s", direct,
                  tiled, stored);
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}

/* No step begins past the limit but each class's parameters in force. */
Test(tune, tune_model_holds_its_time_limit, .timeout = 900)
{
    char dir[64], model[1024];
    snprintf(model, sizeof model, "%s/tests/data/models/encoder_depth3.model.safetensors", LF_SOURCE_DIR);
    lf_context *ctx = in_new_cache(dir, "tune-model");
    static tune_log log;
    const double seconds = 0.01, start = now_s();
    const lf_status st = lf_gemm_tune_model(ctx, model, 0, 2, seconds, record, &log);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    int classes = 0;
    for (int i = 0; i < log.count; i++) {
        const double began = i ? log.at[i - 1] : start;
        if (strstr(log.line[i], "with the parameters in force") && !strstr(log.line[i], "past")) classes++;
        else if (strstr(log.line[i], " set "))
            cr_expect_lt(began, start + seconds, "\"%s\" began %.1f s after the start", log.line[i], began - start);
    }
    cr_expect_gt(classes, 0);
    cr_expect(strstr(log.line[0], "GEMM calls of"), "%s", log.line[0]);
    cr_expect(strstr(log.line[log.count - 1], "no entry stored"), "%s", log.line[log.count - 1]);
    /* a file that is no model fails as the loader does, naming it */
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/tests/data/models/encoder_short.io.safetensors", LF_SOURCE_DIR);
    cr_expect_neq(lf_gemm_tune_model(ctx, bad, 0, 1, 1, NULL, NULL), LF_OK);
    cr_expect_eq(lf_gemm_tune_model(ctx, "/nonexistent.safetensors", 0, 1, 1, NULL, NULL), LF_ERR_IO, "%s",
                 lf_context_last_error(ctx));
    cr_expect(strstr(lf_context_last_error(ctx), "/nonexistent.safetensors"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(ctx, model, 1 << 20, 1, 1, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "seq_len"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(ctx, model, 0, 0, 1, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "batch"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(ctx, model, -1, 1, 1, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "seq_len"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(ctx, NULL, 0, 1, 1, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "path"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(ctx, model, 0, 1, 0.0 / 0.0, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "seconds"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_gemm_tune_model(NULL, model, 0, 1, 1, NULL, NULL), LF_ERR_ARGUMENT);
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}

/* The sets the search tries are the device's for the whole process
 * (CLBlast keeps them per device): another context's CLBlast GEMM begun
 * during the search ends only after its last step, never with a set tried. */
static void *tune_briefly(void *arg)
{
    lf_context *ctx = lf_test_context();
    const lf_status st = lf_gemm_tune(ctx, 0.01, record, arg);
    cr_expect_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    lf_context_free(ctx);
    return NULL;
}

Test(tune, other_contexts_wait_for_the_search, .timeout = 900)
{
    char dir[64];
    lf_test_make_dir(dir, "tune-wait");
    cr_assert_eq(setenv("LINFORMER_CACHE_DIR", dir, 1), 0);
    cr_assert_eq(setenv("LINFORMER_GEMM", "clblast", 1), 0);
    lf_context *other = lf_test_context();
    unsetenv("LINFORMER_GEMM");
    double gflops = 0;
    cr_assert_eq(lf_gemm_rate(other, 64, 64, 64, &gflops), LF_OK, "%s", lf_context_last_error(other));
    static tune_log log; /* its first line comes after the search's first GEMMs */
    pthread_t tuner;
    cr_assert_eq(pthread_create(&tuner, NULL, tune_briefly, &log), 0);
    while (__atomic_load_n(&log.count, __ATOMIC_ACQUIRE) == 0) nanosleep(&(struct timespec){0, 1000000}, NULL);
    cr_expect_eq(lf_gemm_rate(other, 64, 64, 64, &gflops), LF_OK, "%s", lf_context_last_error(other));
    const double ended = now_s();
    pthread_join(tuner, NULL);
    cr_assert_gt(log.count, 1);
    cr_expect_gt(ended, log.at[log.count - 1], "the GEMM ended before the search's last step: %s",
                 log.line[log.count - 1]);
    lf_context_free(other);
    lf_test_remove_dir(dir);
}

/* A folder that takes nothing fails at once, never "stored in". */
Test(tune, an_unwritable_cache_fails_before_the_search, .timeout = 600)
{
    char cmd[1024], log[8192];
    /* under a device, not a folder: nothing can be made there, even as root */
    snprintf(cmd, sizeof cmd, "LINFORMER_CACHE_DIR=/dev/null/cache %s tune --seconds 600", LF_TOOL_PATH);
    const double start = now_s();
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "cannot") && strstr(log, "/dev/null/cache") && !strstr(log, "stored in"), "%s", log);
    cr_expect_lt(now_s() - start, 300, "it failed before the 600 s search");
    /* on a device whose GEMMs are the host BLAS's, the tuner says what it tunes is not what runs */
    lf_context *ctx = lf_test_context();
    const bool host = strcmp(lf_context_gemm_backend(ctx), "host") == 0;
    lf_context_free(ctx);
    cr_expect_eq(strstr(log, "host BLAS") != NULL, host, "%s", log);
}

/* A stored entry is checked as the search checks the sets it makes: one
 * with a set it could not have made is a bad entry, never applied. */
Test(tune, a_stored_entry_is_checked_as_the_search_checks_its_sets, .timeout = 300)
{
    char dir[64], key[1024], path[4200];
    lf_test_make_dir(dir, "tune-entry");
    setenv("LINFORMER_CACHE_DIR", dir, 1);
    lf_context *ctx = lf_test_context();
    snprintf(key, sizeof key, "gemm-tune 1|CLBlast %d.%d.%d|%s|%s|%s", CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR,
             CLBLAST_VERSION_PATCH, ctx->info.platform_version, ctx->info.device_name, ctx->info.driver_version);
    lf_context_free(ctx);
    lf__cache_path(dir, key, path, sizeof path);
#define XGEMM(KWG, MDIMC, MWG) \
    "Xgemm GEMMK=0 KREG=1 KWG=" KWG " KWI=2 MDIMA=8 MDIMC=" MDIMC " MWG=" MWG " NDIMB=8 NDIMC=8 NWG=32 SA=0 SB=0 " \
    "STRM=0 STRN=0 VWM=1 VWN=1\n"
    static const struct { const char *text; unsigned rejected; } entries[] = {
        {XGEMM("16", "8", "32") "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=64\n", 0},
        {XGEMM("16", "32", "16"), 1},                           /* MWG 16 is no multiple of MDIMC 32 */
        {XGEMM("24", "8", "32"), 1},                            /* KWG 24 is none of the search's */
        {"GemmRoutine XGEMM_MIN_INDIRECT_SIZE=18446744073709551615\n", 1},
    };
#undef XGEMM
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        lf__cache_store(path, key, (const unsigned char *)entries[i].text, strlen(entries[i].text));
        ctx = lf_test_context();
        cr_expect_eq(ctx->cache_rejected, entries[i].rejected, "%u bad entries for: %s", ctx->cache_rejected,
                     entries[i].text);
        lf_context_free(ctx);
    }
    lf_test_remove_dir(dir);
}

/* Each bad command line is refused with status 2 and a message that names what is wrong. */
Test(tune, bad_options_are_usage_errors)
{
    static const char *const bad[][2] = {
        {"--seconds inf", "--seconds takes a number from 0.1"},
        {"--seconds 1e308", "--seconds takes a number from 0.1"},
        {"--seconds 0", "--seconds takes a number from 0.1"},
        {"--seconds nan", "--seconds takes a number from 0.1"},
        {"--second 5x", "--seconds takes a number from 0.1"},
        {"--seconds 1 --seconds 2", "--seconds is given twice"},
        {"--device 0 --device 1", "--device is given twice"},
        {"--seconds", "--seconds needs a value"},
        {"--device", "--device needs a value"},
        {"--budget 5", "unknown option \"--budget\""},
        {"--help=yes", "--help takes no value"},
        {"stray", "unexpected argument \"stray\""},
        {"--seq-len 5", "--seq-len needs --model"},
        {"--batch 2", "--batch needs --model"},
        {"--model m --batch 0", "--batch takes an integer from 1 to 65536"},
        {"--model m --seq-len 0", "--seq-len takes an integer from 1"},
        {"--model m --seq-len x", "--seq-len takes an integer from 1"},
        {"--model", "--model needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024], log[4096];
        snprintf(cmd, sizeof cmd, "%s tune %s", LF_TOOL_PATH, bad[i][0]);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2, "%s: %s", bad[i][0], log);
        char want[256];
        snprintf(want, sizeof want, "linformer tune: %s", bad[i][1]);
        cr_expect(strstr(log, want) != NULL, "%s: wanted \"%s\" in: %s", bad[i][0], want, log);
    }
}
