/* bench.h - what the parts of `linformer bench` share: the result of one measured point. */
#ifndef LF_BENCH_H
#define LF_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "linformer.h"

typedef enum { BENCH_OK = 0, BENCH_OOM } bench_status;

/* One row of the results: a device, a mode and a shape. Measurements that were
 * not taken are NAN (times of an OOM point, vs_exact when there is nothing to
 * compare with, xdev on the first device); counts not known are 0 (a layer that
 * could not even be created). */
typedef struct {
    char device[16];       /* "P:D" selector of the device */
    char device_name[128];
    lf_mode mode;
    int n, k;              /* k is 0 for the exact modes */
    int batch, heads, d_model;
    bool causal;
    double ms_median, ms_min, ms_max;
    double gflops;         /* matmul flops / median time */
    uint64_t flops;        /* matmul flops of one forward (bench_count.h), of the layer as resolved */
    uint64_t softmax_flops;
    uint64_t bytes_moved;  /* estimate, see bench_count.h */
    uint64_t device_bytes; /* layer weights + workspace (lf_attention_device_bytes) */
    double vs_exact;       /* ||y - y_exact|| / ||y_exact||: flash against dense, Linformer against
                              flash (else dense); NAN for dense */
    double xdev;           /* ||y - y_first|| / ||y_first||, y_first from the first device */
    bench_status status;
} bench_row;

typedef struct {
    bench_row *rows;
    size_t count, capacity;
} bench_results;

/* Appends a copy of *row; returns a pointer to the stored row or NULL when out of memory. */
bench_row *bench_results_add(bench_results *r, const bench_row *row);
void bench_results_free(bench_results *r);
/* The row of (device, mode, n, k) or NULL. */
const bench_row *bench_results_find(const bench_results *r, const char *device, lf_mode mode, int n, int k);

const char *bench_status_name(bench_status s); /* "ok", "OOM" */

#endif
