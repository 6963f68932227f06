/* gemm_yardstick.h - the GEMM rate `bench` and `run --profile` read the GEMMs beside. */
#ifndef LF_GEMM_YARDSTICK_H
#define LF_GEMM_YARDSTICK_H

#include <stddef.h>

#include "linformer.h"

/* The median GFLOP/s of five SGEMM 1024^3 on the context's backend, and in
 * `what` what ran them ("host SGEMM 1024 x 1024 x 1024, median of 5;
 * OpenBLAS's Zen kernels"). LF_OK, or the status with the context's message. */
lf_status gemm_yardstick(lf_context *ctx, double *gflops, char *what, size_t size);

/* Where OPENBLAS_CORETYPE holds OpenBLAS to older kernels than this CPU runs
 * and the context's GEMMs run on OpenBLAS: prints once a process, to stdout,
 * the rate here (gflops, or measured when 0) beside the rate of the CPU's own
 * set, which `linformer devices --device P:D --gemm-rate` measures again
 * without the variable, OpenBLAS picking its kernels only as it loads. */
void gemm_yardstick_forced_core(lf_context *ctx, double gflops);

#endif
