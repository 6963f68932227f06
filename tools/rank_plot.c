/* rank_plot.c - the figure of `linformer rank --plot`: spectra and the k90 heat map. */
#define _POSIX_C_SOURCE 200809L
#include "rank_plot.h"

#include <string.h>

#include "bench_scripts.h"

/* The data and the built-in rank.gp, put in place; returns the spectrum blocks or -1. */
static int write_side_files(bench_plot_files *f, const rank_results *r, int *layers, int *heads, char *err,
                            size_t err_size)
{
    const lf_embedded_file *s = lf_bench_scripts;
    while (s->name && strcmp(s->name, "rank.gp") != 0) s++;
    const int blocks = rank_plot_data(output_file_stream(f->data), r, layers, heads);
    if (s->name) fwrite(s->text, 1, s->size, output_file_stream(f->script));
    output_file *data = f->data, *script = f->script;
    f->data = f->script = NULL;
    if (output_file_commit(data, err, err_size) != 0) {
        output_file_abort(script);
        return -1;
    }
    return output_file_commit(script, err, err_size) == 0 ? blocks : -1;
}

int rank_plot_finish(bench_plot_files *f, const rank_results *r, char *err, size_t err_size)
{
    char data[4096], script[4096], nblocks[16], nlayers[16], nheads[16];
    snprintf(data, sizeof data, "%s", output_file_path(f->data));
    snprintf(script, sizeof script, "%s", output_file_path(f->script));
    int layers = 0, heads = 0, rc = 0;
    const int blocks = write_side_files(f, r, &layers, &heads, err, err_size);
    if (blocks == 0) snprintf(err, err_size, "nothing to plot: no sequence was measured");
    if (blocks <= 0) rc = -1;
    snprintf(nblocks, sizeof nblocks, "%d", blocks);
    snprintf(nlayers, sizeof nlayers, "%d", layers);
    snprintf(nheads, sizeof nheads, "%d", heads);
    char *argv[] = {"gnuplot", "-c", script, data, nblocks, (char *)f->kind, nlayers, nheads, NULL};
    if (rc == 0) rc = bench_gnuplot(argv, output_file_fd(f->figure), err, err_size);
    if (rc == 0) rc = output_file_commit(f->figure, err, err_size);
    else output_file_abort(f->figure);
    f->figure = NULL;
    return rc;
}
