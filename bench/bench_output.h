/* bench_output.h - the result files of `linformer bench`: CSV and JSON. */
#ifndef LF_BENCH_OUTPUT_H
#define LF_BENCH_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"
#include "bench_options.h"

/* The CSV header and one line per row; measurements not taken are empty fields.
 * Returns 0, or -1 when writing failed. */
int bench_csv_write(FILE *out, const bench_results *r);

/* {"tool", "paper", "options", "devices", "rows"}; NaN becomes null, the seed a
 * string and counts exact integers. Returns 0, or -1 when out of memory or a
 * write failed. */
int bench_json_write(FILE *out, const bench_options *o, const lf_device_info *devices, size_t device_count,
                     const bench_results *r);

#endif
