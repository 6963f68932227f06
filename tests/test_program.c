/* test_program.c - building kernels and the disk cache of their binaries. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "launch.h"

#define SOFTMAX_FILE "softmax.cl"
#define SOFTMAX_OPTS "-DWG=8"
#define SOFTMAX_NAME "softmax_rows"

static char tmpdir[64];

/* A fresh folder for the test, removed with what it holds at the end. */
static void make_tmpdir(void)
{
    lf_test_make_dir(tmpdir, "test-program");
    unsetenv("LINFORMER_KERNEL_DIR");
}

static void drop_tmpdir(void) { lf_test_remove_dir(tmpdir); }

TestSuite(cache, .init = make_tmpdir, .fini = drop_tmpdir, .timeout = 300);
TestSuite(build, .init = make_tmpdir, .fini = drop_tmpdir, .timeout = 300);

/* Regular files under dir, recursively; the path of the last one in `last`. */
static int count_files(const char *dir, char *last, size_t last_size)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            n += count_files(path, last, last_size);
        } else {
            n++;
            if (last) snprintf(last, last_size, "%s", path);
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

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* Runs softmax_rows from `k` on a fresh random matrix and checks it numerically:
 * rows below rows_valid hold the softmax of their first cols_valid entries and
 * zeros after; the rows past rows_valid are all zero. */
static void check_softmax(lf_context *ctx, cl_kernel k)
{
    enum { ROWS = 5, LD = 21, COLS = 19, VALID = 4 };
    uint64_t state = lf_test_seed();
    float in[ROWS * LD], out[ROWS * LD];
    lf_test_fill(in, ROWS * LD, &state, -6.0f, 6.0f);
    in[3] = 60.0f; /* a large score: the row max must be subtracted */
    lf_test_poison(out, ROWS * LD);
    cl_mem buf = NULL;
    cr_assert_eq(lf__alloc(ctx, sizeof in, "scores", &buf), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf__upload(ctx, buf, 0, in, sizeof in), LF_OK, "%s", lf_context_last_error(ctx));
    int ld = LD, n_rows = ROWS, rows_valid = VALID, cols_valid = COLS;
    int causal = 0, rows = ROWS;
    const void *args[] = {&buf, &ld, &n_rows, &rows_valid, &cols_valid, &causal, &rows};
    const size_t sizes[] = {sizeof buf,        sizeof ld,     sizeof n_rows, sizeof rows_valid,
                            sizeof cols_valid, sizeof causal, sizeof rows};
    for (cl_uint i = 0; i < 7; i++) cr_assert_eq(clSetKernelArg(k, i, sizes[i], args[i]), CL_SUCCESS);
    size_t global[2] = {8, ROWS}, local[2] = {8, 1};
    cr_assert_eq(lf__launch(ctx, k, "softmax_rows", 2, global, local, NULL), LF_OK, "%s",
                 lf_context_last_error(ctx));
    cr_assert_eq(lf__download(ctx, buf, 0, out, sizeof out), LF_OK, "%s", lf_context_last_error(ctx));
    lf__release(&buf);

    double ref[ROWS * LD];
    for (int r = 0; r < ROWS; r++) {
        double m = -INFINITY, sum = 0;
        for (int c = 0; c < COLS; c++) m = fmax(m, in[r * LD + c]);
        for (int c = 0; c < COLS; c++) sum += exp((double)in[r * LD + c] - m);
        for (int c = 0; c < LD; c++)
            ref[r * LD + c] = (r < VALID && c < COLS) ? exp((double)in[r * LD + c] - m) / sum : 0.0;
    }
    double err = lf_test_rel_err(out, ref, ROWS * LD);
    cr_expect_lt(err, 1e-5, "softmax relative error %.3g", err);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < LD; c++)
            if (r >= VALID || c >= COLS)
                cr_expect_eq(out[r * LD + c], 0.0f, "masked entry [%d,%d] = %g", r, c, out[r * LD + c]);
}

/* Opens a context and builds the softmax kernel; checks the counters it ends with. */
static lf_context *build_softmax(unsigned hits, unsigned misses, cl_kernel *k)
{
    lf_context *ctx = lf_test_context();
    lf_status st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_assert_not_null(*k);
    cr_expect_eq(ctx->cache_hits, hits, "hits %u, expected %u", ctx->cache_hits, hits);
    cr_expect_eq(ctx->cache_misses, misses, "misses %u, expected %u", ctx->cache_misses, misses);
    return ctx;
}

/* First context: a miss that writes one entry; second: a hit. Returns the entry's path. */
static void prime(char *entry, size_t size)
{
    setenv("LINFORMER_CACHE_DIR", tmpdir, 1);
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 1, &k);
    cr_expect_eq(ctx->cache_rejected, 0);
    /* The same kernel again in the same context: from memory, no disk. */
    cl_kernel k2 = NULL;
    cr_assert_eq(lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, &k2), LF_OK);
    cr_expect_eq(k2, k, "the second lookup built a new kernel");
    cr_expect_eq(ctx->cache_hits + ctx->cache_misses, 1);
    check_softmax(ctx, k);
    lf_context_free(ctx);
    cr_assert_eq(count_files(tmpdir, entry, size), 1, "the first build left %d files", count_files(tmpdir, NULL, 0));
    cr_assert_gt(file_size(entry), 0);
    cr_expect_neq(strstr(entry, ".bin"), NULL, "entry %s", entry);

    ctx = build_softmax(1, 0, &k);
    cr_expect_eq(ctx->cache_rejected, 0);
    check_softmax(ctx, k);
    lf_context_free(ctx);
    cr_expect_eq(count_files(tmpdir, NULL, 0), 1);
}

/* After the entry was damaged: the next context does not hit, still works and
 * rewrites the entry; the one after hits again. */
static void after_damage(const char *entry)
{
    cl_kernel k = NULL;
    lf_context *ctx = lf_test_context();
    lf_status st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_eq(ctx->cache_hits, 0, "a damaged entry was used");
    cr_expect_geq(ctx->cache_misses + ctx->cache_rejected, 1);
    check_softmax(ctx, k);
    lf_context_free(ctx);
    char again[1024] = "";
    cr_expect_eq(count_files(tmpdir, again, sizeof again), 1);
    cr_expect_str_eq(again, entry);

    ctx = build_softmax(1, 0, &k);
    cr_expect_eq(ctx->cache_rejected, 0);
    check_softmax(ctx, k);
    lf_context_free(ctx);
}

Test(cache, miss_then_hit)
{
    char entry[1024];
    prime(entry, sizeof entry);
    /* Other options are another entry. */
    cl_kernel k = NULL;
    lf_context *ctx = lf_test_context();
    cr_assert_eq(lf__kernel(ctx, SOFTMAX_FILE, "-DWG=16", SOFTMAX_NAME, &k), LF_OK);
    cr_expect_eq(ctx->cache_misses, 1);
    lf_context_free(ctx);
    cr_expect_eq(count_files(tmpdir, NULL, 0), 2);
}

Test(cache, truncated_entry_is_rebuilt)
{
    char entry[1024];
    prime(entry, sizeof entry);
    long size = file_size(entry);
    cr_assert_eq(truncate(entry, size / 2), 0, "truncate: %s", strerror(errno));
    after_damage(entry);
    cr_expect_eq(file_size(entry), size, "the rewritten entry has %ld bytes, the first %ld", file_size(entry), size);
}

Test(cache, entry_cut_to_its_header_is_rebuilt)
{
    char entry[1024];
    prime(entry, sizeof entry);
    cr_assert_eq(truncate(entry, 12), 0);
    after_damage(entry);
}

Test(cache, flipped_byte_is_rebuilt)
{
    char entry[1024];
    prime(entry, sizeof entry);
    long size = file_size(entry);
    FILE *f = fopen(entry, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, size / 2, SEEK_SET), 0);
    int c = fgetc(f);
    cr_assert_neq(c, EOF);
    cr_assert_eq(fseek(f, size / 2, SEEK_SET), 0);
    fputc(c ^ 0x5a, f);
    cr_assert_eq(fclose(f), 0);
    after_damage(entry);
}

Test(cache, garbage_entry_is_rebuilt)
{
    char entry[1024];
    prime(entry, sizeof entry);
    long size = file_size(entry);
    FILE *f = fopen(entry, "wb");
    cr_assert_not_null(f);
    uint64_t state = lf_test_seed();
    for (long i = 0; i < size; i++) fputc((int)(lf__rand_next(&state) & 0xff), f);
    cr_assert_eq(fclose(f), 0);
    after_damage(entry);
}

/* A FIFO at the entry path: a plain open() would wait for a writer forever. */
Test(cache, fifo_at_entry_is_rebuilt_without_waiting, .timeout = 120)
{
    char entry[1024];
    prime(entry, sizeof entry);
    cr_assert_eq(unlink(entry), 0);
    cr_assert_eq(mkfifo(entry, 0600), 0, "mkfifo: %s", strerror(errno));
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 1, &k);
    cr_expect_eq(ctx->cache_rejected, 1, "the FIFO is a bad entry");
    check_softmax(ctx, k);
    lf_context_free(ctx);
    struct stat st;
    cr_assert_eq(lstat(entry, &st), 0);
    cr_expect(S_ISREG(st.st_mode), "the FIFO was not replaced by an entry");
    ctx = build_softmax(1, 0, &k); /* the entry written in its place is used */
    check_softmax(ctx, k);
    lf_context_free(ctx);
}

/* A symbolic link at the entry path is not followed, even to a valid entry,
 * and is replaced by an entry of its own, leaving its target alone. */
Test(cache, symlink_at_entry_is_not_followed)
{
    char entry[1024], target[1100];
    prime(entry, sizeof entry);
    snprintf(target, sizeof target, "%s/elsewhere", tmpdir);
    cr_assert_eq(mkdir(target, 0700), 0);
    strcat(target, "/copy");
    cr_assert_eq(rename(entry, target), 0);
    long size = file_size(target);
    cr_assert_eq(symlink(target, entry), 0, "symlink: %s", strerror(errno));
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 1, &k);
    cr_expect_eq(ctx->cache_rejected, 1);
    check_softmax(ctx, k);
    lf_context_free(ctx);
    struct stat st;
    cr_assert_eq(lstat(entry, &st), 0);
    cr_expect(S_ISREG(st.st_mode), "the link was not replaced by an entry");
    cr_expect_eq(file_size(target), size, "the link's target was changed");
}

/* A link planted where the writer would put its temporary (the name that
 * process id and thread made predictable) must not be written through. */
Test(cache, planted_link_at_temporary_is_not_written_through)
{
    char entry[1024], victim[600], planted[1300];
    prime(entry, sizeof entry);
    cr_assert_eq(unlink(entry), 0);
    snprintf(victim, sizeof victim, "%s/victim", tmpdir);
    cr_assert_eq(mkdir(victim, 0700), 0);
    strcat(victim, "/file");
    write_text(victim, "precious");
    snprintf(planted, sizeof planted, "%s.tmp.%ld.%lx", entry, (long)getpid(), (unsigned long)pthread_self());
    cr_assert_eq(symlink(victim, planted), 0);
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 1, &k);
    lf_context_free(ctx);
    char text[64] = "";
    FILE *f = fopen(victim, "rb");
    cr_assert_not_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    cr_expect_str_eq(text, "precious", "the cache wrote through a planted link");
    struct stat st;
    cr_expect(lstat(entry, &st) == 0 && S_ISREG(st.st_mode), "no entry was written");
    unlink(planted);
}

/* The pid of a process that has exited and been reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* Opening the folder removes what writers that died (or hang) left behind,
 * and nothing else. */
Test(cache, stale_temporaries_are_removed)
{
    char entry[1024];
    prime(entry, sizeof entry);
    char dead[1200], old[1200], live[1200], other[1200];
    snprintf(dead, sizeof dead, "%s.tmp.%ld.a1b2c3", entry, (long)dead_pid());
    snprintf(old, sizeof old, "%s.tmp.%ld.d4e5f6", entry, (long)getppid()); /* alive, but an hour old */
    snprintf(live, sizeof live, "%s.tmp.%ld.g7h8i9", entry, (long)getppid());
    snprintf(other, sizeof other, "%s/notes.tmp.1.txt", tmpdir);
    const char *all[] = {dead, old, live, other};
    for (int i = 0; i < 4; i++) write_text(all[i], "LFKCACHE1");
    struct timespec hour_ago[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, old, hour_ago, 0), 0);

    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(1, 0, &k);
    lf_context_free(ctx);
    struct stat st;
    cr_expect_neq(lstat(dead, &st), 0, "the temporary of a dead writer is still there");
    cr_expect_neq(lstat(old, &st), 0, "an hour-old temporary is still there");
    cr_expect_eq(lstat(live, &st), 0, "a live writer's temporary was removed");
    cr_expect_eq(lstat(other, &st), 0, "a file that is no temporary was removed");
    cr_expect_eq(lstat(entry, &st), 0, "the entry was removed");
}

Test(cache, off_writes_nothing)
{
    setenv("LINFORMER_CACHE_DIR", "off", 1);
    /* Where the default would go, were the cache on. */
    setenv("XDG_CACHE_HOME", tmpdir, 1);
    setenv("HOME", tmpdir, 1);
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 0, &k);
    cr_expect_eq(ctx->cache_rejected, 0);
    check_softmax(ctx, k);
    lf_context_free(ctx);
    ctx = build_softmax(0, 0, &k);
    lf_context_free(ctx);
    char dflt[600];
    snprintf(dflt, sizeof dflt, "%s/linformer", tmpdir);
    cr_expect_eq(count_files(dflt, NULL, 0), 0, "the cache wrote to %s with LINFORMER_CACHE_DIR=off", dflt);
    snprintf(dflt, sizeof dflt, "%s/.cache/linformer", tmpdir);
    cr_expect_eq(count_files(dflt, NULL, 0), 0, "the cache wrote to %s with LINFORMER_CACHE_DIR=off", dflt);
    /* Nothing at all, unless the OpenCL driver keeps its own cache under
     * HOME: PoCL's unless POCL_CACHE_DIR moves it; NVIDIA's in HOME/.nv. */
    char driver_cache[600];
    snprintf(driver_cache, sizeof driver_cache, "%s/.nv", tmpdir);
    if (access(driver_cache, F_OK) == 0) lf_test_remove_dir(driver_cache);
    char last[1024] = "";
    if (getenv("POCL_CACHE_DIR"))
        cr_expect_eq(count_files(tmpdir, last, sizeof last), 0, "the cache wrote with LINFORMER_CACHE_DIR=off: %s",
                     last);
    struct stat st;
    cr_expect_neq(stat("off", &st), 0, "a folder named \"off\" was made");
}

Test(cache, default_folder_under_xdg_cache_home)
{
    unsetenv("LINFORMER_CACHE_DIR");
    setenv("XDG_CACHE_HOME", tmpdir, 1);
    cl_kernel k = NULL;
    lf_context *ctx = build_softmax(0, 1, &k);
    lf_context_free(ctx);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/linformer", tmpdir);
    cr_expect_eq(count_files(sub, NULL, 0), 1, "no entry under %s", sub);
    ctx = build_softmax(1, 0, &k);
    lf_context_free(ctx);
}

/* ---- Build errors and LINFORMER_KERNEL_DIR ---- */

Test(build, compile_error_gives_the_log)
{
    char cache[512], path[512];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    setenv("LINFORMER_CACHE_DIR", cache, 1);
    snprintf(path, sizeof path, "%s/broken.cl", tmpdir);
    write_text(path, "kernel void broken(global float *x)\n{\n    x[0] = lf_no_such_identifier_q7 * 2.0f;\n}\n");
    setenv("LINFORMER_KERNEL_DIR", tmpdir, 1);

    lf_context *ctx = lf_test_context();
    cl_kernel k = (cl_kernel)(uintptr_t)1;
    lf_status st = lf__kernel(ctx, "broken.cl", "-DWG=8", "broken", &k);
    cr_expect_eq(st, LF_ERR_BUILD, "got %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    const char *msg = lf_context_last_error(ctx);
    cr_expect_neq(strstr(msg, "lf_no_such_identifier_q7"), NULL, "no build log in: %s", msg);
    cr_expect_neq(strstr(msg, "broken.cl"), NULL, "the file is not named: %s", msg);
    /* Asking again fails again: a failed build is not remembered as a program. */
    st = lf__kernel(ctx, "broken.cl", "-DWG=8", "broken", &k);
    cr_expect_eq(st, LF_ERR_BUILD, "second try: %s", lf_status_string(st));
    cr_expect_eq(count_files(cache, NULL, 0), 0, "a failed build was cached");

    /* A missing file names its path. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.cl", tmpdir);
    st = lf__kernel(ctx, "missing.cl", "", "missing", &k);
    cr_expect_eq(st, LF_ERR_IO, "got %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_neq(strstr(lf_context_last_error(ctx), missing), NULL, "path %s not named: %s", missing,
                  lf_context_last_error(ctx));

    /* The folder does not hold softmax.cl either. */
    st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, &k);
    cr_expect_eq(st, LF_ERR_IO, "got %s", lf_status_string(st));

    /* Back to the built-in sources: the same context still builds and runs. */
    unsetenv("LINFORMER_KERNEL_DIR");
    k = NULL;
    st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    check_softmax(ctx, k);
    lf_context_free(ctx);
}

Test(build, kernel_dir_sources_are_used)
{
    /* A source in LINFORMER_KERNEL_DIR replaces the built-in one of that name. */
    setenv("LINFORMER_CACHE_DIR", "off", 1);
    char path[512];
    snprintf(path, sizeof path, "%s/softmax.cl", tmpdir);
    write_text(path, "kernel void softmax_rows(global float *s, int ld, int n_rows, int rows_valid, int cols_valid)\n"
                     "{ s[get_global_id(0)] = 42.0f; }\n");
    setenv("LINFORMER_KERNEL_DIR", tmpdir, 1);
    lf_context *ctx = lf_test_context();
    cl_kernel k = NULL;
    cr_assert_eq(lf__kernel(ctx, SOFTMAX_FILE, "", SOFTMAX_NAME, &k), LF_OK, "%s", lf_context_last_error(ctx));
    float out[4];
    lf_test_poison(out, 4);
    cl_mem buf = NULL;
    cr_assert_eq(lf__alloc(ctx, sizeof out, "buf", &buf), LF_OK);
    int z = 0;
    cr_assert_eq(clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
    for (cl_uint i = 1; i < 5; i++) cr_assert_eq(clSetKernelArg(k, i, sizeof z, &z), CL_SUCCESS);
    size_t global = 4;
    cr_assert_eq(lf__launch(ctx, k, "softmax_rows", 1, &global, NULL, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf__download(ctx, buf, 0, out, sizeof out), LF_OK);
    lf__release(&buf);
    for (int i = 0; i < 4; i++) cr_expect_eq(out[i], 42.0f, "out[%d] = %g", i, out[i]);
    lf_context_free(ctx);
}

/* Runs kernel bias_act(y) of activation.cl once on y = {3}; returns y[0]. */
static float run_bias_act(lf_context *ctx, cl_kernel k)
{
    float y = 3.0f;
    cl_mem buf = lf_test_upload(ctx, &y, sizeof y);
    cr_assert_eq(clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
    size_t global = 1;
    cr_assert_eq(lf__launch(ctx, k, "bias_act", 1, &global, NULL, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_test_download(ctx, buf, &y, 1);
    lf__release(&buf);
    return y;
}

Test(build, prelude_comes_first_and_keeps_line_numbers)
{
    /* activation.cl begins with exp_nonpos.cl: both are read, from the same place. */
    setenv("LINFORMER_CACHE_DIR", "off", 1);
    char path[512], prelude[600];
    snprintf(path, sizeof path, "%s/activation.cl", tmpdir);
    snprintf(prelude, sizeof prelude, "%s/exp_nonpos.cl", tmpdir);
    write_text(path, "kernel void bias_act(global float *y) { y[0] = twice(y[0]); }\n");
    setenv("LINFORMER_KERNEL_DIR", tmpdir, 1);
    lf_context *ctx = lf_test_context();
    cl_kernel k = NULL;
    lf_status st = lf__kernel(ctx, "activation.cl", "", "bias_act", &k);
    cr_expect_eq(st, LF_ERR_IO, "without its prelude: %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_neq(strstr(lf_context_last_error(ctx), prelude), NULL, "%s is not named: %s", prelude,
                  lf_context_last_error(ctx));

    write_text(prelude, "float twice(float x)\n{\n    return 2.0f * x;\n}\n");
    st = lf__kernel(ctx, "activation.cl", "", "bias_act", &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_eq(run_bias_act(ctx, k), 6.0f, "the prelude's function did not run");

    /* An error on the file's line 3 is reported on line 3, whatever the
     * prelude's length; where the driver ignores #line (NVIDIA's), on line 9
     * (the prelude's 4 lines, a blank and the #line before it), which the
     * message says. */
    write_text(path, "kernel void bias_act(global float *y)\n{\n    y[0] = lf_no_such_identifier_q7;\n}\n");
    st = lf__kernel(ctx, "activation.cl", "-DAGAIN", "bias_act", &k);
    const char *msg = lf_context_last_error(ctx);
    cr_expect_eq(st, LF_ERR_BUILD, "got %s: %s", lf_status_string(st), msg);
    cr_expect(strstr(msg, "lf_no_such_identifier_q7"), "no error named in: %s", msg);
    cr_expect(strstr(msg, ":3:") || (strstr(msg, ":9:") && strstr(msg, "line L is line L + 6")),
              "no error on line 3, nor on line 9 with the prelude's length, in: %s", msg);
    unlink(path), unlink(prelude);
    unsetenv("LINFORMER_KERNEL_DIR");
    lf_context_free(ctx);
}

Test(build, fifo_source_is_refused_without_waiting, .timeout = 60)
{
    setenv("LINFORMER_CACHE_DIR", "off", 1);
    char path[512];
    snprintf(path, sizeof path, "%s/softmax.cl", tmpdir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    setenv("LINFORMER_KERNEL_DIR", tmpdir, 1);
    lf_context *ctx = lf_test_context();
    cl_kernel k = NULL;
    lf_status st = lf__kernel(ctx, SOFTMAX_FILE, "", SOFTMAX_NAME, &k);
    const char *msg = lf_context_last_error(ctx);
    cr_expect_eq(st, LF_ERR_IO, "got %s: %s", lf_status_string(st), msg);
    cr_expect(strstr(msg, path) && strstr(msg, "not a regular file"), "%s", msg);
    lf_context_free(ctx);
    unsetenv("LINFORMER_KERNEL_DIR");
}

Test(build, unknown_kernel_name)
{
    setenv("LINFORMER_CACHE_DIR", tmpdir, 1);
    lf_context *ctx = lf_test_context();
    cl_kernel k = NULL;
    lf_status st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, "no_such_kernel", &k);
    cr_expect_neq(st, LF_OK);
    cr_expect_neq(strstr(lf_context_last_error(ctx), "no_such_kernel"), NULL, "%s", lf_context_last_error(ctx));
    st = lf__kernel(ctx, "no_such_file.cl", "", "x", &k);
    cr_expect_neq(st, LF_OK);
    cr_expect_neq(strstr(lf_context_last_error(ctx), "no_such_file.cl"), NULL, "%s", lf_context_last_error(ctx));
    /* The program itself was fine and is still usable. */
    st = lf__kernel(ctx, SOFTMAX_FILE, SOFTMAX_OPTS, SOFTMAX_NAME, &k);
    cr_assert_eq(st, LF_OK, "%s", lf_context_last_error(ctx));
    check_softmax(ctx, k);
    lf_context_free(ctx);
}
