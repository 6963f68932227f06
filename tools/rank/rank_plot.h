/* rank_plot.h - `linformer rank --plot FILE`: FILE (png, svg or pdf), its data
 * FILE.dat and its script FILE.gp (for r.png: r.png.dat, r.png.gp), drawn by
 * gnuplot as one figure: left the normalised cumulative spectra (one curve
 * per layer and head, as the paper's Figure 1), right a heat map of the mean
 * k90 over layers and heads, its colours from 0 to n. */
#ifndef LF_RANK_PLOT_H
#define LF_RANK_PLOT_H

#include "bench_plot.h"
#include "rank.h"

/* The files are opened with bench_plot_open (before the measurement, so a bad
 * path fails at once) and dropped with bench_plot_abort.
 * Writes the data and the script, runs gnuplot into the figure, closes all;
 * r has a measured sequence (the command checks that first);
 * returns 0, or -1 with a message in err (the data and script then stay). */
int rank_plot_finish(bench_plot_files *f, const rank_results *r, char *err, size_t err_size);

#endif
