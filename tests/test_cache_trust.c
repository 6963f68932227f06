/*
 * test_cache_trust.c - the disk kernel cache is used only where nobody else
 * can plant a binary (the folder and each entry are the user's own and not
 * writable by group or others), and lf_kernel_cache_dir says truthfully
 * whether kernels are cached and, if not, why.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "runtime.h"

static char tmpdir[64], folder[128];

/* tmpdir/cache is the cache folder of every test here. */
static void setup(void)
{
    lf_test_make_dir(tmpdir, "cache-trust");
    snprintf(folder, sizeof folder, "%s/cache", tmpdir);
    setenv("LINFORMER_CACHE_DIR", folder, 1);
    unsetenv("LINFORMER_KERNEL_DIR");
}
static void teardown(void) { lf_test_remove_dir(tmpdir); }
TestSuite(cache_trust, .init = setup, .fini = teardown, .timeout = 300);

/* Entries in the folder (names not starting with a dot); the last one's path in `entry`. */
static int entries(char *entry, size_t size)
{
    DIR *d = opendir(folder);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && ++n && entry) snprintf(entry, size, "%s/%s", folder, e->d_name);
    if (d) closedir(d);
    return n;
}

/* A fresh context builds one kernel; its cache counters as found. */
typedef struct { unsigned hits, misses, rejected; } counters;
static counters build(void)
{
    lf_context *ctx = lf_test_context();
    cl_kernel k = NULL;
    lf_status st = lf__kernel(ctx, "softmax.cl", "-DWG=8", "softmax_rows", &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    const counters c = {ctx->cache_hits, ctx->cache_misses, ctx->cache_rejected};
    lf_context_free(ctx);
    return c;
}

/* The folder holds one valid entry of the user's own; its path in entry. */
static void prime(char *entry, size_t size)
{
    cr_assert_eq(mkdir(folder, 0700), 0, "%s: %s", folder, strerror(errno));
    char where[4096];
    cr_assert_eq(lf_kernel_cache_dir(where, sizeof where), LF_OK, "%s", where);
    cr_assert_str_eq(where, folder);
    build();
    cr_assert_eq(build().hits, 1, "the private cache does not serve its entry");
    cr_assert_eq(entries(entry, size), 1);
}

/* The folder as it is now is not used: nothing read, nothing written, and
 * lf_kernel_cache_dir says why. */
static void expect_unused(const char *why)
{
    char msg[4096];
    cr_expect_eq(lf_kernel_cache_dir(msg, sizeof msg), LF_ERR_IO, "the cache is reported usable: %s", msg);
    cr_expect_neq(strstr(msg, why), NULL, "the reason \"%s\" does not say \"%s\"", msg, why);
    cr_expect_neq(strstr(msg, folder), NULL, "the reason \"%s\" does not name the folder", msg);
    const int before = entries(NULL, 0);
    const counters c = build();
    cr_expect_eq(c.hits + c.misses + c.rejected, 0, "the untrusted folder was used: %u hits, %u misses, %u bad",
                 c.hits, c.misses, c.rejected);
    cr_expect_eq(entries(NULL, 0), before, "an entry was written into the untrusted folder");
}

Test(cache_trust, folder_writable_by_others_is_not_used)
{
    const mode_t modes[] = {0777, 0757, 0703};
    char entry[4200];
    prime(entry, sizeof entry);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        cr_assert_eq(chmod(folder, modes[i]), 0);
        expect_unused("writable by others");
    }
}

Test(cache_trust, folder_writable_by_its_group_is_not_used)
{
    char entry[4200];
    prime(entry, sizeof entry);
    cr_assert_eq(chmod(folder, 0770), 0);
    expect_unused("writable by its group");
}

/* A folder made for the cache by someone else: as root, chown makes one;
 * anyone else finds the root-owned "/" with nothing to plant in it. */
Test(cache_trust, folder_of_another_user_is_not_used)
{
    char entry[4200];
    prime(entry, sizeof entry);
    if (geteuid() != 0) {
        snprintf(folder, sizeof folder, "/");
        setenv("LINFORMER_CACHE_DIR", folder, 1);
        expect_unused("belongs to user 0");
        return;
    }
    cr_assert_eq(chown(folder, 4242, 4242), 0, "chown: %s", strerror(errno));
    expect_unused("belongs to user 4242");
}

/* An entry that is not the user's own, or that others could have written,
 * is never loaded: it is bad, rebuilt and replaced by an entry of the user's. */
static void expect_rebuilt(const char *entry)
{
    const counters c = build();
    cr_expect_eq(c.hits, 0, "an untrusted entry was loaded");
    cr_expect_eq(c.rejected, 1, "the untrusted entry was not reported bad");
    struct stat sb;
    cr_assert_eq(lstat(entry, &sb), 0);
    cr_expect(sb.st_uid == geteuid() && !(sb.st_mode & 022), "the entry is still uid %ld, mode %03o", (long)sb.st_uid,
              (unsigned)(sb.st_mode & 0777));
    cr_expect_eq(build().hits, 1, "the rewritten entry is not used");
}

Test(cache_trust, entry_writable_by_others_is_rebuilt)
{
    char entry[4200];
    prime(entry, sizeof entry);
    cr_assert_eq(chmod(entry, 0666), 0);
    expect_rebuilt(entry);
    cr_assert_eq(chmod(entry, 0664), 0);
    expect_rebuilt(entry);
}

Test(cache_trust, entry_of_another_user_is_rebuilt)
{
    if (geteuid() != 0) cr_skip_test("only root can give a file to another user");
    char entry[4200];
    prime(entry, sizeof entry);
    cr_assert_eq(chown(entry, 4242, 4242), 0, "chown: %s", strerror(errno));
    expect_rebuilt(entry);
}

/* What lf_kernel_cache_dir says where no kernel can be cached. */
static void expect_reason(lf_status want, const char *why)
{
    char msg[4096];
    lf_status st = lf_kernel_cache_dir(msg, sizeof msg);
    cr_expect_eq(st, want, "%s: %s", lf_status_string(st), msg);
    cr_expect_neq(strstr(msg, why), NULL, "the reason \"%s\" does not say \"%s\"", msg, why);
    const counters c = build();
    cr_expect_eq(c.hits + c.misses + c.rejected, 0, "a cache was used: %u hits, %u misses", c.hits, c.misses);
}

Test(cache_trust, no_usable_folder_is_said)
{
    FILE *f = fopen(folder, "w");
    cr_assert_not_null(f);
    fclose(f);
    expect_reason(LF_ERR_IO, "is not a folder");
    setenv("LINFORMER_CACHE_DIR", "/dev/null", 1);
    expect_reason(LF_ERR_IO, "/dev/null is not a folder");
    char below[200];
    snprintf(below, sizeof below, "%s/sub", folder);
    setenv("LINFORMER_CACHE_DIR", below, 1);
    expect_reason(LF_ERR_IO, "cannot be created");
    setenv("LINFORMER_CACHE_DIR", "off", 1);
    expect_reason(LF_ERR_UNSUPPORTED, "\"off\"");
    unsetenv("LINFORMER_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    expect_reason(LF_ERR_IO, "HOME");
    char tiny[4];
    cr_expect_eq(lf_kernel_cache_dir(NULL, 10), LF_ERR_ARGUMENT);
    cr_expect_eq(lf_kernel_cache_dir(tiny, 0), LF_ERR_ARGUMENT);
}

/* A path that does not fit is never cut to another folder: a cache path
 * over 4095 bytes is unusable, named by its variable, and nothing is made;
 * an `out` too small for the path is LF_ERR_ARGUMENT with the size needed. */
Test(cache_trust, paths_that_do_not_fit_are_refused)
{
    static char long_dir[5100];
    snprintf(long_dir, sizeof long_dir, "%s/", tmpdir);
    while (strlen(long_dir) < 5000) strcat(long_dir, "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee/");
    setenv("LINFORMER_CACHE_DIR", long_dir, 1);
    expect_reason(LF_ERR_IO, "LINFORMER_CACHE_DIR makes a cache path of");
    struct stat sb;
    long_dir[strlen(tmpdir) + 4] = 0;
    cr_expect_neq(stat(long_dir, &sb), 0, "%s was made", long_dir);

    setenv("LINFORMER_CACHE_DIR", folder, 1);
    char small[24] = "", one[1] = {'x'};
    lf_status st = lf_kernel_cache_dir(small, sizeof small);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "%s: %s", lf_status_string(st), small);
    cr_expect_eq(strtoul(small, NULL, 10), strlen(folder) + 1, "\"%s\" does not say the size needed", small);
    cr_expect_eq(lf_kernel_cache_dir(one, 1), LF_ERR_ARGUMENT);
    char fits[128];
    cr_expect_eq(lf_kernel_cache_dir(fits, strlen(folder) + 1), LF_OK, "%s", fits);
    cr_expect_str_eq(fits, folder);
}

/* lf_context_set_cache_dir: a context's own folder in place of the environment's, "off" for none, NULL back to
 * the environment's; an empty string is refused. */
Test(cache_trust, a_context_takes_its_own_folder)
{
    char own[160];
    snprintf(own, sizeof own, "%s/own", tmpdir);
    lf_context *ctx = lf_test_context();
    cr_assert_eq(lf_context_set_cache_dir(ctx, own), LF_OK);
    cl_kernel k = NULL;
    lf_status st = lf__kernel(ctx, "softmax.cl", "-DWG=8", "softmax_rows", &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_eq(ctx->cache_misses, 1);
    cr_expect_eq(entries(NULL, 0), 0, "the environment's folder was written");
    DIR *d = opendir(own);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    cr_expect_eq(n, 1, "the context's folder holds %d entries", n);
    cr_expect_eq(lf_context_set_cache_dir(ctx, ""), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "cache_dir"), "%s", lf_context_last_error(ctx));
    cr_expect_eq(lf_context_set_cache_dir(ctx, NULL), LF_OK);
    lf_context_free(ctx);

    ctx = lf_test_context();
    cr_assert_eq(lf_context_set_cache_dir(ctx, "off"), LF_OK);
    st = lf__kernel(ctx, "softmax.cl", "-DWG=16", "softmax_rows", &k);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_eq(ctx->cache_misses + ctx->cache_hits, 0, "a kernel was looked up with the cache off");
    lf_context_free(ctx);
    cr_expect_eq(lf_context_set_cache_dir(NULL, own), LF_ERR_ARGUMENT);
}
