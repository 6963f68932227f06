/* bench_plot.c - draws the results with gnuplot: a data file, then the script. */
#define _POSIX_C_SOURCE 200809L
#include "bench_plot.h"

#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels.h"

extern char **environ;

static bool same_series(const bench_row *a, const bench_row *b)
{
    return a->mode == b->mode && a->k == b->k && strcmp(a->device, b->device) == 0;
}

/* One block per series, in the order the series first appear; the block's first
 * line is its title (gnuplot's columnheader); points that did not fit are left out. */
int bench_plot_data(FILE *out, const bench_results *r)
{
    int blocks = 0;
    for (size_t i = 0; i < r->count; i++) {
        const bench_row *s = &r->rows[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = same_series(&r->rows[j], s);
        bool measured = false; /* a series of OOM points only would be an empty block */
        for (size_t j = i; j < r->count && !measured; j++)
            measured = same_series(&r->rows[j], s) && r->rows[j].status == BENCH_OK;
        if (seen || !measured) continue;
        char title[64];
        if (s->k)
            snprintf(title, sizeof title, "%s k=%d", lf_mode_name(s->mode), s->k);
        else
            snprintf(title, sizeof title, "%s", lf_mode_name(s->mode));
        fprintf(out, "%s\"%s [%s]\" ms MiB\n", blocks ? "\n\n" : "", title, s->device);
        for (size_t j = i; j < r->count; j++)
            if (same_series(&r->rows[j], s) && r->rows[j].status == BENCH_OK)
                fprintf(out, "%d %.6g %.6g\n", r->rows[j].n, r->rows[j].ms_median,
                        (double)r->rows[j].device_bytes / (1 << 20));
        blocks++;
    }
    return blocks;
}

/* Whether `prog` is an executable in PATH. */
static bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return false;
    char dir[4096];
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)len, len ? path : ".", prog);
        if (access(dir, X_OK) == 0) return true;
        path += len + (path[len] == ':');
    }
    return false;
}

static int write_data(const char *path, const bench_results *r, int *blocks, char *err, size_t err_size)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    *blocks = bench_plot_data(f, r);
    if (fclose(f) != 0) {
        snprintf(err, err_size, "writing %s failed", path);
        return -1;
    }
    return 0;
}

/* gnuplot -c SCRIPT DATA PNG BLOCKS, without a shell (paths may hold anything). */
static int run_gnuplot(const char *script, const char *data, const char *png, int blocks, char *err, size_t err_size)
{
    char nblocks[16];
    snprintf(nblocks, sizeof nblocks, "%d", blocks);
    char *argv[] = {"gnuplot", "-c", (char *)script, (char *)data, (char *)png, nblocks, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (rc != 0) {
        snprintf(err, err_size, "cannot run gnuplot: %s", strerror(rc));
        return -1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, err_size, "gnuplot %s failed (%s %d); its data is in %s", script,
                 WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 data);
        return -1;
    }
    return 0;
}

extern const lf_embedded_file lf_bench_scripts[]; /* the bench/ gnuplot scripts, built in */

/* Writes the built-in plot.gp to `path`, so the figure can be redrawn by hand. */
static int write_script(const char *path, char *err, size_t err_size)
{
    const lf_embedded_file *s = lf_bench_scripts;
    while (s->name && strcmp(s->name, "plot.gp") != 0) s++;
    FILE *f = s->name ? fopen(path, "w") : NULL;
    if (!f) {
        snprintf(err, err_size, "cannot write %s: %s", path, s->name ? strerror(errno) : "no plot script built in");
        return -1;
    }
    bool ok = fwrite(s->text, 1, s->size, f) == s->size;
    if (fclose(f) != 0 || !ok) {
        snprintf(err, err_size, "writing %s failed", path);
        return -1;
    }
    return 0;
}

int bench_plot(const bench_results *r, const char *png, char *err, size_t err_size)
{
    char data[4096], script[4096];
    snprintf(data, sizeof data, "%s.dat", png);
    snprintf(script, sizeof script, "%s.gp", png);
    int blocks = 0;
    if (write_data(data, r, &blocks, err, err_size) != 0) return -1;
    if (write_script(script, err, err_size) != 0) return -1;
    if (blocks == 0) {
        snprintf(err, err_size, "nothing to plot: no point was measured");
        return -1;
    }
    if (!in_path("gnuplot")) {
        snprintf(err, err_size,
                 "gnuplot is not installed (not found in PATH), so %s was not drawn; install it "
                 "(Debian/Ubuntu: apt-get install gnuplot-nox) and run gnuplot -c %s %s %s %d",
                 png, script, data, png, blocks);
        return -1;
    }
    return run_gnuplot(script, data, png, blocks, err, err_size);
}
