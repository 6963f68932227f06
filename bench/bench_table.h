/* bench_table.h - the table that `linformer bench` prints on stdout. */
#ifndef LF_BENCH_TABLE_H
#define LF_BENCH_TABLE_H

#include <stdio.h>

#include "bench.h"
#include "bench_options.h"

/* One line per n, k and device (devices of one point side by side, one under
 * the other): the median time of each mode, Linformer's speed-up and memory
 * saving over dense and flash beside the paper's Table 3, and the accuracy. */
void bench_table_print(FILE *out, const bench_options *o, const bench_results *r);

#endif
