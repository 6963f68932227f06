/* bench_plot.h - the --plot step: a data file, the script, and gnuplot drawing the figure. */
#ifndef LF_BENCH_PLOT_H
#define LF_BENCH_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"
#include "output_file.h"

/* Per block of the figure's data: the colour of its mode and k and the dash
 * of its device (words "1 2 ..."), and the layer's shape for the title. */
typedef struct {
    char colours[1024], dashes[1024], shape[128];
} bench_plot_styles;

/* Writes the series (one per device, mode and k: n, median ms, device MiB) as
 * gnuplot data blocks titled by mode, k and device name; returns the number of
 * blocks. styles (may be NULL) gets their styles. */
int bench_plot_data(FILE *out, const bench_results *r, bench_plot_styles *styles);

/* The gnuplot terminal kind of a file name's extension: "png", "svg" or "pdf"
 * (any case); NULL for another extension. */
const char *bench_plot_kind(const char *path);

/* 0 when the figure's name has one of those extensions; else -1 with the
 * message (a usage error: the commands check it with their options). */
int bench_plot_check_name(const char *path, char *err, size_t err_size);

/* The figure PATH and its side files, its data PATH.dat and its script PATH.gp. */
typedef struct {
    char data[4096], script[4096];
} bench_plot_side;

/* The three as outputs for output_files_check (out has room for 3); returns
 * their count, 0 for no figure (path NULL). */
size_t bench_plot_outputs(const char *path, bench_plot_side *side, named_file *out);

/* The figure and its side files, opened before the sweep so that a path that
 * cannot be written fails at once. */
typedef struct {
    output_file *figure, *data, *script;
    const char *kind;
} bench_plot_files;

/* Returns 0, or -1 with a message in err (an unknown extension, a path that
 * cannot be written); nothing stays open then. */
int bench_plot_open(const char *path, bench_plot_files *f, char *err, size_t err_size);

/* Writes the data and the script, then runs gnuplot into the figure; res has
 * a measured point (the command checks that first). Returns 0,
 * or -1 with a message in err (gnuplot missing or failed: the data and script
 * stay, to draw by hand; the old figure is left as it was). Closes everything. */
int bench_plot_finish(bench_plot_files *f, const bench_results *r, char *err, size_t err_size);

/* Drops all three (an interrupted or failed sweep); a closed set is fine. */
void bench_plot_abort(bench_plot_files *f);

/* The drawing step of any figure: the caller has written `blocks` data blocks
 * to f->data, at least one (a command with nothing to plot fails before it
 * replaces any file); the data and the built-in script `script_name` are put
 * in place, then gnuplot -c SCRIPT DATA BLOCKS KIND [extra...] (extra
 * NULL-terminated, at most 9) draws the figure. Returns 0, or -1 with a
 * message in err (the data and script stay, to draw by hand; the old figure is
 * left as it was). Closes everything. */
int bench_plot_draw(bench_plot_files *f, const char *script_name, int blocks, char *const extra[], char *err,
                    size_t err_size);

#endif
