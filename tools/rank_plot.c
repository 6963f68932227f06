/* rank_plot.c - the figure of `linformer rank --plot`: spectra and the k90 heat map. */
#define _POSIX_C_SOURCE 200809L
#include "rank_plot.h"

#include <stdio.h>

int rank_plot_finish(bench_plot_files *f, const rank_results *r, char *err, size_t err_size)
{
    int layers = 0, heads = 0;
    const int blocks = rank_plot_data(output_file_stream(f->data), r, &layers, &heads);
    char nlayers[16], nheads[16];
    snprintf(nlayers, sizeof nlayers, "%d", layers);
    snprintf(nheads, sizeof nheads, "%d", heads);
    char *extra[] = {nlayers, nheads, NULL};
    return bench_plot_draw(f, "rank.gp", blocks, "no sequence was measured", extra, err, err_size);
}
