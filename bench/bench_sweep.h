/* bench_sweep.h - the devices and the measuring loop of `linformer bench`. */
#ifndef LF_BENCH_SWEEP_H
#define LF_BENCH_SWEEP_H

#include <stddef.h>

#include "bench.h"
#include "bench_options.h"

typedef struct {
    lf_context *ctx;
    lf_device_info info;
    char sel[16]; /* "P:D" */
} bench_device;

/* Opens the devices: `sel` (NULL = LINFORMER_DEVICE or the default), or every
 * device for "all". Returns 0, or -1 with a message in err. */
int bench_devices_open(const char *sel, bench_device **out, size_t *count, char *err, size_t err_size);
void bench_devices_close(bench_device *devices, size_t count);

/* Creates the layer of every point on every device before the sweep, so that
 * a point the library refuses (LF_ERR_ARGUMENT: a size past its limits) stops
 * the program before minutes of measuring; one that does not fit the device
 * passes (it becomes an OOM row). Returns 0, or -1 with a message naming the point. */
int bench_sweep_check(const bench_options *o, const bench_device *devices, size_t device_count, char *err,
                      size_t err_size);

/* Measures every point of the options on every device and appends the rows.
 * A point that does not fit is an OOM row; any other failure stops the sweep:
 * returns -1 with a message in err. Returns 1 when bench_sweep_stop was called
 * (the rows hold the points finished before). Progress goes to stderr. */
int bench_sweep(const bench_options *o, bench_device *devices, size_t device_count, bench_results *res, char *err,
                size_t err_size);

/* Asks a running sweep to stop after the forward in flight; async-signal-safe,
 * for a SIGINT handler, so that an interrupted run still reports what it measured. */
void bench_sweep_stop(void);

#endif
