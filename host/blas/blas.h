/*
 * blas.h - the blas module (host/blas/): GEMMs on the context's queue through
 * CLBlast or the host's BLAS, and CLBlast's tuned parameters. The backend is
 * chosen when the context is created (backend.c).
 */
#ifndef LF_BLAS_H
#define LF_BLAS_H

#include "runtime.h"

#include <cblas.h>

/* ---- GEMM through CLBlast or the host's BLAS (gemm.c) ---- */
/* Row-major C = alpha op(A) op(B) + beta C, `batch` times with the given
 * strides (in elements) between the matrices of the batch. */
typedef struct {
    bool trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    cl_mem a; size_t a_off, lda, a_stride;
    cl_mem b; size_t b_off, ldb, b_stride;
    cl_mem c; size_t c_off, ldc, c_stride;
    size_t batch; /* 0 or 1 = one GEMM */
    /* A row GEMM over a batch of sequences (batch 0, A not transposed): A's
     * and C's m rows are sequences of seq_rows rows each. Every sequence is
     * then its own GEMM of the same shape, so a row's bits never depend on how
     * many sequences share the call (a BLAS blocks and threads by m). 0 = one
     * GEMM over all m rows. */
    size_t seq_rows;
    /* With seq_rows: each sequence's own rows, [m / seq_rows] on the host (the
     * forward's lengths); NULL = all seq_rows. The host BLAS then runs each
     * sequence's GEMM over its own rows only, the very call the sequence makes
     * alone, so that a padded batch gives each one its bits alone (the rows
     * past a length are left as they were). CLBlast's kernels give a row the
     * same bits whatever m is, and run every row. */
    const int32_t *seq_lengths;
    const char *what; /* stage name in profiles; NULL = "gemm" */
} lf_gemm_args;
lf_status lf__gemm(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t);
/* lf__gemm with CLBlast's index limit (gemm.c) lowered to `limit` elements,
 * so that tests reach its pieces at small sizes. */
lf_status lf__gemm_limited(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t, size_t limit);

/* ---- GEMMs' shapes, noted (gemm.c) and timed (gemm_time.c) ---- */
/* One GEMM as a forward calls it: op(A) m x k, op(B) k x n, `batch`
 * matrices (CLBlast's strided-batched call where `batched`, B one for all
 * unless b_batched), run `calls` times by the forward. */
typedef struct {
    bool trans_a, trans_b, batched, b_batched;
    size_t m, n, k, batch;
    unsigned calls;
} lf_gemm_shape;
#define LF_GEMM_SHAPES_MAX 64
/* With ctx->gemm_record set, lf__gemm notes each GEMM's shape here and runs nothing. */
struct lf_gemm_record {
    lf_gemm_shape shapes[LF_GEMM_SHAPES_MAX]; /* distinct, in the order first called */
    size_t count;
    unsigned calls;    /* GEMM calls noted, repeats included */
    bool overflow;     /* more distinct shapes than fit */
};
typedef struct lf_gemm_record lf_gemm_record;
void lf__gemm_note(lf_gemm_record *r, const lf_gemm_args *g, bool batched);
/* The host BLAS's result of the shape on the operands lf__gemm_time fills
 * ([batch, m, n], malloc'd), or NULL without memory. */
float *lf__gemm_reference(const lf_gemm_shape *s);
/* The median ms of `repeat` (1 to 5) timed runs of the shape after a
 * warm-up; with `reference` (lf__gemm_reference's), the last run's C is
 * compared with it: a relative error past 1e-4 is an LF_ERR_BLAS, "wrong". */
lf_status lf__gemm_time(lf_context *ctx, const lf_gemm_shape *s, int repeat, const float *reference, double *ms);
/* lf_gemm_rate without the lock and the argument checks, with the median of
 * `repeat` (1 to 5) timed runs (for the tuner). */
lf_status lf__gemm_rate(lf_context *ctx, size_t m, size_t n, size_t k, int repeat, double *gflops);

/* ---- The host BLAS library (host_blas.c) ---- */
/* A BLAS library's name and its cblas_sgemm (OpenBLAS's and MKL's take the
 * same arguments). */
typedef __typeof__(cblas_sgemm) lf_sgemm_fn;
struct lf_host_blas {
    const char *name; /* "OpenBLAS", "MKL" */
    lf_sgemm_fn *sgemm;
};
/* The host backend's BLAS: OpenBLAS, or MKL (LINFORMER_HOST_BLAS; on an Intel
 * CPU MKL where it loads), for the life of the process. Fails, with the
 * message in errbuf (may be NULL), on a bad LINFORMER_HOST_BLAS or a "mkl"
 * that cannot be loaded. */
lf_status lf__host_blas_pick(const lf_host_blas **out, char *errbuf, size_t errbuf_size);

/* ---- Tuned CLBlast parameters (tune.c) ---- */
/* Loads this device's sets per GEMM class into ctx: the stored entry's, else
 * the built-in table's row for the device, if any; a bad entry is ignored, a
 * bad LINFORMER_GEMM_TABLE fails (the message in errbuf). */
lf_status lf__tune_apply(lf_context *ctx, char *errbuf, size_t errbuf_size);
/* CLBlast's sets searched per shape class on the noted GEMMs, for about
 * `seconds`, and stored as lf_gemm_tune stores its own (tune_model.c). */
lf_status lf__gemm_tune_shapes(lf_context *ctx, const lf_gemm_record *record, double seconds, lf_tune_log log,
                               void *user);
/* Before a CLBlast GEMM of one m x n x k matrix, under the CLBlast lock: the
 * sets of its class applied where others are in force (tune_use.c). */
void lf__tune_use(lf_context *ctx, size_t m, size_t n, size_t k);

#endif
