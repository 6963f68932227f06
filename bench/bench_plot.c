/* bench_plot.c - draws the results with gnuplot: a data file, then the script. */
#define _POSIX_C_SOURCE 200809L
#include "bench_plot.h"

#include <ctype.h>
#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_scripts.h"

extern char **environ;

static bool same_series(const bench_row *a, const bench_row *b)
{
    return a->mode == b->mode && a->k == b->k && strcmp(a->device, b->device) == 0;
}

/* 1 + the number of distinct values (by `same`) that first appear before row i's does. */
static int appearance(const bench_results *r, size_t i, bool (*same)(const bench_row *, const bench_row *))
{
    int rank = 0;
    for (size_t j = 0; j <= i; j++) {
        bool first = true; /* row j is the first of its value */
        for (size_t m = 0; m < j && first; m++) first = !same(&r->rows[m], &r->rows[j]);
        if (first && (rank++, same(&r->rows[j], &r->rows[i]))) return rank;
    }
    return rank;
}

static bool same_device(const bench_row *a, const bench_row *b) { return strcmp(a->device, b->device) == 0; }
static bool same_mode(const bench_row *a, const bench_row *b) { return a->mode == b->mode && a->k == b->k; }

/* Appends " WORD" to a style list. */
static void add_word(char *list, size_t size, int word)
{
    const size_t used = strlen(list);
    snprintf(list + used, size - used, "%s%d", used ? " " : "", word);
}

/* One block per series, in the order the series first appear; the block's first
 * line is its title (gnuplot's columnheader); points that did not fit are left out. */
int bench_plot_data(FILE *out, const bench_results *r, bench_plot_styles *styles)
{
    int blocks = 0;
    if (styles) *styles = (bench_plot_styles){"", "", ""};
    for (size_t i = 0; i < r->count; i++) {
        const bench_row *s = &r->rows[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = same_series(&r->rows[j], s);
        bool measured = false; /* a series of OOM points only would be an empty block */
        for (size_t j = i; j < r->count && !measured; j++)
            measured = same_series(&r->rows[j], s) && r->rows[j].status == BENCH_OK;
        if (seen || !measured) continue;
        char k[32] = "";
        if (s->k) snprintf(k, sizeof k, " k=%d", s->k);
        fprintf(out, "%s\"%s%s, %s\" ms MiB\n", blocks ? "\n\n" : "", lf_mode_name(s->mode), k, s->device_name);
        for (size_t j = i; j < r->count; j++)
            if (same_series(&r->rows[j], s) && r->rows[j].status == BENCH_OK)
                fprintf(out, "%d %.6g %.6g\n", r->rows[j].n, r->rows[j].ms_median,
                        (double)r->rows[j].device_bytes / (1 << 20));
        if (styles) {
            add_word(styles->colours, sizeof styles->colours, appearance(r, i, same_mode));
            add_word(styles->dashes, sizeof styles->dashes, appearance(r, i, same_device));
            snprintf(styles->shape, sizeof styles->shape, "d_model %d, %d heads, batch %d%s", s->d_model, s->heads,
                     s->batch, s->causal ? ", causal" : "");
        }
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

const char *bench_plot_kind(const char *path)
{
    static const char *const kinds[] = {"png", "svg", "pdf"};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && !strchr(dot, '/') && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcasecmp(dot + 1, kinds[i]) == 0) return kinds[i];
    return NULL;
}

int bench_plot_check_name(const char *path, char *err, size_t err_size)
{
    if (bench_plot_kind(path)) return 0;
    snprintf(err, err_size, "--plot \"%s\": the figure is drawn as .png, .svg or .pdf, by the file's extension", path);
    return -1;
}

size_t bench_plot_outputs(const char *path, bench_plot_side *side, named_file *out)
{
    if (!path) return 0;
    snprintf(side->data, sizeof side->data, "%s.dat", path);
    snprintf(side->script, sizeof side->script, "%s.gp", path);
    out[0] = (named_file){"--plot", path};
    out[1] = (named_file){"the data of --plot", side->data};
    out[2] = (named_file){"the script of --plot", side->script};
    return 3;
}

void bench_plot_abort(bench_plot_files *f)
{
    output_file_abort(f->figure);
    output_file_abort(f->data);
    output_file_abort(f->script);
    f->figure = f->data = f->script = NULL;
}

int bench_plot_open(const char *path, bench_plot_files *f, char *err, size_t err_size)
{
    memset(f, 0, sizeof *f);
    if (bench_plot_check_name(path, err, err_size) != 0) return -1;
    f->kind = bench_plot_kind(path);
    bench_plot_side side;
    named_file named[3];
    bench_plot_outputs(path, &side, named);
    if ((f->figure = output_file_open(path, NULL, 0, err, err_size)) &&
        (f->data = output_file_open(side.data, NULL, 0, err, err_size)) &&
        (f->script = output_file_open(side.script, NULL, 0, err, err_size)))
        return 0;
    bench_plot_abort(f);
    return -1;
}

/* Runs gnuplot with argv (argv[2] the script, argv[3] its data) writing the
 * figure to the descriptor `figure`, without a shell. */
static int run_gnuplot(char *const argv[], int figure, char *err, size_t err_size)
{
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    posix_spawn_file_actions_adddup2(&io, figure, STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &io, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&io);
    if (rc != 0) {
        snprintf(err, err_size, "cannot run gnuplot (apt-get install gnuplot-nox): %s; the data is in %s", strerror(rc),
                 argv[3]);
        return -1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, err_size, "gnuplot %s failed (%s %d); its data is in %s", argv[2],
                 WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 argv[3]);
        return -1;
    }
    return 0;
}

/* Whether the figure gnuplot wrote into fd is whole: gnuplot exits 0 after a
 * failed write (a full disk), so the file's end is read back: a PNG's IEND
 * chunk, an SVG's closing tag, a PDF's %%EOF. What is not a regular file (a
 * pipe) cannot be read back and is trusted. */
static bool figure_whole(int fd, const char *kind)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    struct stat st;
    if (fstat(fd, &st) != 0) return false;
    if (!S_ISREG(st.st_mode)) return true;
    char tail[16];
    const size_t got = st.st_size < (off_t)sizeof tail ? (size_t)st.st_size : sizeof tail;
    if (got == 0 || pread(fd, tail, got, st.st_size - (off_t)got) != (ssize_t)got) return false;
    if (strcmp(kind, "png") == 0) return got >= sizeof iend && memcmp(tail + got - sizeof iend, iend, sizeof iend) == 0;
    size_t end = got;
    while (end > 0 && isspace((unsigned char)tail[end - 1])) end--;
    const char *mark = strcmp(kind, "svg") == 0 ? "</svg>" : "%%EOF";
    return end >= strlen(mark) && memcmp(tail + end - strlen(mark), mark, strlen(mark)) == 0;
}

/* The data (already written) and the built-in script `name`, put in place. */
static int commit_side_files(bench_plot_files *f, const char *name, char *err, size_t err_size)
{
    const lf_embedded_file *s = lf_bench_scripts;
    while (s->name && strcmp(s->name, name) != 0) s++;
    if (s->name) fwrite(s->text, 1, s->size, output_file_stream(f->script));
    output_file *data = f->data, *script = f->script;
    f->data = f->script = NULL;
    int rc = output_file_commit(data, err, err_size);
    if (rc == 0) return output_file_commit(script, err, err_size);
    output_file_abort(script);
    return rc;
}

int bench_plot_draw(bench_plot_files *f, const char *script_name, int blocks, char *const extra[], char *err,
                    size_t err_size)
{
    char data[4096], script[4096], figure[4096], nblocks[16]; /* the paths outlive their files' handles */
    snprintf(data, sizeof data, "%s", output_file_path(f->data));
    snprintf(script, sizeof script, "%s", output_file_path(f->script));
    snprintf(figure, sizeof figure, "%s", output_file_path(f->figure));
    snprintf(nblocks, sizeof nblocks, "%d", blocks);
    char *argv[16] = {"gnuplot", "-c", script, data, nblocks, (char *)f->kind};
    char args[512] = "";
    for (int i = 0, used = 0; extra && extra[i] && i < 9; i++) {
        argv[6 + i] = extra[i];
        used += snprintf(args + used, sizeof args - (size_t)used, " '%s'", extra[i]); /* words with spaces */
    }
    int rc = commit_side_files(f, script_name, err, err_size);
    if (rc == 0 && !in_path("gnuplot")) {
        snprintf(err, err_size,
                 "gnuplot is not installed (not found in PATH), so %s was not drawn; install it "
                 "(Debian/Ubuntu: apt-get install gnuplot-nox) and run gnuplot -c '%s' '%s' %d %s%s > '%s'",
                 figure, script, data, blocks, f->kind, args, figure);
        rc = -1;
    }
    if (rc == 0) rc = run_gnuplot(argv, output_file_fd(f->figure), err, err_size);
    if (rc == 0 && !figure_whole(output_file_fd(f->figure), f->kind)) {
        snprintf(err, err_size, "gnuplot could not write the whole of %s (a full disk?); the old file is kept, the "
                 "data is in %s", figure, data);
        rc = -1;
    }
    if (rc == 0) rc = output_file_commit(f->figure, err, err_size);
    else output_file_abort(f->figure);
    f->figure = NULL;
    return rc;
}

int bench_plot_finish(bench_plot_files *f, const bench_results *r, char *err, size_t err_size)
{
    bench_plot_styles styles;
    const int blocks = bench_plot_data(output_file_stream(f->data), r, &styles);
    char *extra[] = {styles.colours, styles.dashes, styles.shape, NULL};
    return bench_plot_draw(f, "plot.gp", blocks, extra, err, err_size);
}
