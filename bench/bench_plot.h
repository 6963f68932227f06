/* bench_plot.h - the --plot step: a data file and gnuplot. */
#ifndef LF_BENCH_PLOT_H
#define LF_BENCH_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"

/* Writes the series (one per device, mode and k: n, median ms, device MiB) as
 * gnuplot data blocks; returns the number of blocks. */
int bench_plot_data(FILE *out, const bench_results *r);

/* Writes PNG.dat and the plot script PNG.gp beside `png` and runs gnuplot on
 * them. Returns 0, or -1 with a message in err (gnuplot missing, or failed). */
int bench_plot(const bench_results *r, const char *png, char *err, size_t err_size);

#endif
