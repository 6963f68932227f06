/* rank_plot.c - the figure of `linformer rank --plot`: spectra and the k90 heat map. */
#define _POSIX_C_SOURCE 200809L
#include "rank_plot.h"

#include <stdio.h>

int rank_plot_finish(bench_plot_files *f, const rank_results *r, char *err, size_t err_size)
{
    int layers = 0, heads = 0;
    const int blocks = rank_plot_data(output_file_stream(f->data), r, &layers, &heads);
    int max_n = 1; /* the heat map's colours span 0 .. n, so that close values look close */
    for (size_t i = 0; i < r->count; i++)
        if (r->rows[i].n > max_n) max_n = r->rows[i].n;
    char nlayers[16], nheads[16], n[16];
    snprintf(nlayers, sizeof nlayers, "%d", layers);
    snprintf(nheads, sizeof nheads, "%d", heads);
    snprintf(n, sizeof n, "%d", max_n);
    char *extra[] = {nlayers, nheads, n, NULL};
    return bench_plot_draw(f, "rank.gp", blocks, extra, err, err_size);
}
