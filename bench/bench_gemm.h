/* bench_gemm.h - the device's GEMM rate, the yardstick for the modes' GFLOP/s. */
#ifndef LF_BENCH_GEMM_H
#define LF_BENCH_GEMM_H

#include <stddef.h>

#include "linformer.h"

/* Median GFLOP/s of `repeat` CLBlast SGEMMs of size x size x size on the
 * context's queue (after one warm-up), timed with profiling events. Returns 0,
 * or -1 with a message in err. */
int bench_gemm_rate(lf_context *ctx, size_t size, int repeat, double *gflops, char *err, size_t err_size);

#endif
