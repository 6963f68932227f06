/*
 * test_cache_contention.c - the disk kernel cache under several processes.
 *   - Processes forked at once build the same kernels into one fresh
 *     LINFORMER_CACHE_DIR: all succeed with correct results, no temporary file
 *     is left, and a later context loads every kernel from the cache.
 *   - Entries that are half written (cut short), corrupted or garbage are
 *     ignored and rewritten while several processes race on them, and the
 *     temporary file of a writer that died is removed.
 * Entries are written to a temporary file and renamed into place
 * (host/runtime/kernel_cache.c), so a reader sees a whole entry or none.
 * The test's own process opens no OpenCL context before it forks (PoCL's
 * threads do not survive fork); children report through their exit status.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"
#include "layer_case.h"

#define PROCS 4
#define TOL 1e-5

TestSuite(cache_contention, .timeout = 900);

enum { D = 24, HEADS = 2, NMAX = 37, K = 8, BATCH = 2, N = 29 };

static const struct { lf_mode mode; lf_path path; } variants[] = {
    {LF_MODE_LINFORMER, LF_PATH_FUSED}, {LF_MODE_LINFORMER, LF_PATH_GEMM}, {LF_MODE_DENSE, LF_PATH_AUTO},
    {LF_MODE_FLASH, LF_PATH_AUTO}};
#define VARIANTS (int)(sizeof variants / sizeof variants[0])

static char dir[64];

static void make_dir(void)
{
    lf_test_make_dir(dir, "cache-contention");
    setenv("LINFORMER_CACHE_DIR", dir, 1);
}

static void remove_dir(void) { lf_test_remove_dir(dir); }

/* Runs every variant with weights and input drawn from `seed` and checks it
 * against the reference. Returns 0, or a code saying what failed; `ctx_out`
 * (may be NULL) keeps the context open for the caller. */
static int run_all(uint64_t seed, lf_context **ctx_out)
{
    lf_context *ctx = NULL;
    char msg[512];
    if (lf_context_create(NULL, &ctx, msg, sizeof msg) != LF_OK) {
        fprintf(stderr, "context: %s\n", msg);
        return 10;
    }
    uint64_t rng = seed;
    const int32_t lens[BATCH] = {N, 13};
    const size_t count = (size_t)BATCH * N * D;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    double *ref = malloc(count * sizeof *ref);
    lf_test_fill(x, count, &rng, -1, 1);
    static const char *names[10] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "e", "f"};
    int code = 0;
    for (int v = 0; v < VARIANTS && !code; v++) {
        lf_attention_config c;
        lf_attention_config_init(&c, D, HEADS, NMAX, K);
        c.mode = variants[v].mode;
        c.path = variants[v].path;
        float *w[10] = {0};
        const size_t sizes[10] = {D * D, D * D, D * D, D * D, D, D, D, D, c.mode == LF_MODE_LINFORMER ? K * NMAX : 0,
                                  c.mode == LF_MODE_LINFORMER ? K * NMAX : 0};
        lf_attention *layer = NULL;
        if (lf_attention_create(ctx, &c, NULL, &layer) != LF_OK) code = 20 + v;
        for (int i = 0; i < 10 && !code; i++) {
            if (!sizes[i]) continue;
            w[i] = malloc(sizes[i] * sizeof(float));
            lf_test_fill(w[i], sizes[i], &rng, -0.5f, 0.5f);
            if (lf_attention_set_weight(layer, names[i], w[i], sizes[i]) != LF_OK) code = 30 + v;
        }
        lf_test_poison(y, count);
        if (!code && lf_attention_forward(layer, x, y, BATCH, N, lens) != LF_OK) code = 40 + v;
        if (!code) {
            lf_ref_resolve(&c);
            lf_ref_weights rw = {w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9]};
            lf_ref_attention(&c, &rw, NULL, x, BATCH, N, lens, ref);
            double err = lf_test_rel_err(y, ref, count);
            if (!(err <= TOL)) {
                fprintf(stderr, "variant %d: relative error %.3g\n", v, err);
                code = 50 + v;
            }
        }
        if (code && code < 50) fprintf(stderr, "variant %d: %s\n", v, lf_context_last_error(ctx));
        lf_attention_free(layer);
        for (int i = 0; i < 10; i++) free(w[i]);
    }
    free(x), free(y), free(ref);
    if (ctx_out && !code) *ctx_out = ctx;
    else lf_context_free(ctx);
    return code;
}

/* Forks `procs` children that start together (they wait for the pipe to close)
 * and run every variant; asserts each exits 0. */
static void race(int procs, uint64_t seed)
{
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pids[PROCS];
    fflush(NULL);
    for (int i = 0; i < procs; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0, "fork: %s", strerror(errno));
        if (pids[i] == 0) {
            close(go[1]);
            char c;
            while (read(go[0], &c, 1) > 0) {}
            _exit(run_all(seed, NULL));
        }
    }
    close(go[0]);
    close(go[1]); /* go */
    for (int i = 0; i < procs; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d of %d: %s %d", i, procs,
                  WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}

/* Entries (*.bin) and temporaries (anything else) in the cache folder. */
static int list(char names[][300], int cap, int *temporaries)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    int n = 0;
    *temporaries = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0) {
            if (n < cap) snprintf(names[n], 300, "%s/%s", dir, e->d_name);
            n++;
        } else {
            (*temporaries)++;
        }
    }
    closedir(d);
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A context after the race builds nothing: every kernel comes from the cache. */
static void expect_all_cached(uint64_t seed)
{
    lf_context *ctx = NULL;
    int code = run_all(seed, &ctx);
    cr_assert_eq(code, 0, "the forwards after the race failed (code %d)", code);
    cr_expect_eq(ctx->cache_misses, 0, "%u kernels were not in the cache", ctx->cache_misses);
    cr_expect_eq(ctx->cache_rejected, 0, "%u cache entries were rejected", ctx->cache_rejected);
    cr_expect_gt(ctx->cache_hits, 0);
    lf_context_free(ctx);
}

Test(cache_contention, processes_build_the_same_kernels_at_once)
{
    make_dir();
    const uint64_t seed = lf_test_seed();
    race(PROCS, seed);
    char names[64][300];
    int temporaries = 0;
    const int entries = list(names, 64, &temporaries);
    cr_expect_geq(entries, 3, "only %d cache entries", entries);
    cr_expect_eq(temporaries, 0, "%d temporary files were left in %s", temporaries, dir);
    expect_all_cached(seed);
    remove_dir();
}

Test(cache_contention, damaged_entries_are_ignored_and_rewritten)
{
    make_dir();
    const uint64_t seed = lf_test_seed();
    race(1, seed);
    char names[64][300];
    int temporaries = 0;
    const int entries = list(names, 64, &temporaries);
    cr_assert_geq(entries, 3, "only %d cache entries", entries);
    long sizes[3];
    for (int i = 0; i < 3; i++) sizes[i] = file_size(names[i]);

    /* 0: half written (a writer without rename that died) */
    cr_assert_eq(truncate(names[0], sizes[0] / 2), 0);
    /* 1: one byte of the binary flipped */
    FILE *f = fopen(names[1], "r+b");
    cr_assert_not_null(f);
    fseek(f, sizes[1] - 7, SEEK_SET);
    int c = fgetc(f);
    fseek(f, sizes[1] - 7, SEEK_SET);
    fputc(c ^ 0x41, f);
    cr_assert_eq(fclose(f), 0);
    /* 2: garbage of the same size */
    f = fopen(names[2], "wb");
    cr_assert_not_null(f);
    uint64_t rng = seed;
    for (long i = 0; i < sizes[2]; i++) fputc((int)(lf__rand_next(&rng) & 0xff), f);
    cr_assert_eq(fclose(f), 0);
    /* and the temporary file of a writer that died half way (a reaped child's pid) */
    pid_t dead = fork();
    cr_assert_geq(dead, 0);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    char stale[400];
    snprintf(stale, sizeof stale, "%s.tmp.%ld.Q1w2E3", names[0], (long)dead);
    f = fopen(stale, "wb");
    cr_assert_not_null(f);
    fputs("LFKCACHE1", f);
    cr_assert_eq(fclose(f), 0);

    race(PROCS, seed);
    /* rewritten whole (a binary's size may differ from one build to the next) */
    for (int i = 0; i < 3; i++) {
        char head[16] = "";
        f = fopen(names[i], "rb");
        cr_assert_not_null(f, "entry %s is gone", names[i]);
        size_t got = fread(head, 1, 10, f);
        fclose(f);
        cr_expect(got == 10 && memcmp(head, "LFKCACHE1", 10) == 0, "entry %s was not rewritten", names[i]);
        cr_expect_gt(file_size(names[i]), sizes[i] / 2, "entry %s is still cut short", names[i]);
    }
    int temps_after = 0;
    cr_expect_eq(list(names, 64, &temps_after), entries, "the race changed the number of entries");
    cr_expect_eq(temps_after, 0, "%d temporary files remain, the dead writer's was not removed", temps_after);
    expect_all_cached(seed);
    remove_dir();
}
