/*
 * gemm.c - row-major GEMM and strided-batched GEMM on the context's queue,
 * through one of two backends chosen at context creation (backend.c):
 *   clblast: CLBlast's kernels on the device (GPUs, and any device on request);
 *   host:    the host's BLAS (OpenBLAS) on the buffers mapped into host memory.
 *            On a CPU device the buffers already live there, so mapping copies
 *            nothing and the GEMM runs at the host BLAS's rate.
 */
#include "blas.h" /* first: it fixes the OpenCL version the headers target */

#include <cblas.h>
#include <clblast_c.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *clblast_status_name(CLBlastStatusCode s)
{
    switch (s) {
#define E(name) case CLBlast##name: return "CLBlast" #name;
    E(Success) E(OpenCLCompilerNotAvailable) E(TempBufferAllocFailure) E(OpenCLOutOfResources)
    E(OpenCLOutOfHostMemory) E(OpenCLBuildProgramFailure) E(InvalidValue) E(InvalidCommandQueue)
    E(InvalidMemObject) E(InvalidBinary) E(InvalidBuildOptions) E(InvalidProgram)
    E(InvalidProgramExecutable) E(InvalidKernelName) E(InvalidKernelDefinition) E(InvalidKernel)
    E(InvalidArgIndex) E(InvalidArgValue) E(InvalidArgSize) E(InvalidKernelArgs)
    E(InvalidLocalNumDimensions) E(InvalidLocalThreadsTotal) E(InvalidLocalThreadsDim)
    E(InvalidGlobalOffset) E(InvalidEventWaitList) E(InvalidEvent) E(InvalidOperation)
    E(InvalidBufferSize) E(InvalidGlobalWorkSize) E(NotImplemented) E(InvalidMatrixA)
    E(InvalidMatrixB) E(InvalidMatrixC) E(InvalidVectorX) E(InvalidVectorY) E(InvalidDimension)
    E(InvalidLeadDimA) E(InvalidLeadDimB) E(InvalidLeadDimC) E(InvalidIncrementX)
    E(InvalidIncrementY) E(InsufficientMemoryA) E(InsufficientMemoryB) E(InsufficientMemoryC)
    E(InsufficientMemoryX) E(InsufficientMemoryY) E(InsufficientMemoryTemp) E(InvalidBatchCount)
    E(InvalidOverrideKernel) E(MissingOverrideParameter) E(InvalidLocalMemUsage)
    E(NoHalfPrecision) E(NoDoublePrecision) E(InvalidVectorScalar) E(InsufficientMemoryScalar)
    E(DatabaseError) E(UnknownError) E(UnexpectedError)
#undef E
    default: return "CLBlastUnknownStatus";
    }
}

/* Elements from the first to one past the last of a batch of rows x cols
 * matrices with leading dimension ld, `stride` apart. */
static size_t span(size_t rows, size_t cols, size_t ld, size_t stride, size_t batch)
{
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/* The spans of A, B and C from their offsets, as stored (transposed or not). */
static void extents(const lf_gemm_args *g, size_t ext[3])
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    ext[0] = span(g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k, g->lda, g->a_stride, batch);
    ext[1] = span(g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n, g->ldb, g->b_stride, batch);
    ext[2] = span(g->m, g->n, g->ldc, g->c_stride, batch);
}

/* ---- CLBlast backend ---- */

/* CLBlast 1.5's strided-batched GEMM uses a row-major B that is not
 * transposed in place, without its padding copy, where B's rows are packed
 * (ldb = n) and its tiles divide the sizes; it then reads B from the buffer's
 * start, one packed k x n matrix after another, whatever offset and stride it
 * was given (a 1536-row sequence's E x read the wrong rows). Such a B at an
 * offset or another stride is first copied, packed, to a buffer of its own:
 * the same values, so the same bits as a right in-place read. *packed is that
 * buffer, NULL where none is needed. */
static lf_status pack_b(lf_context *ctx, lf_gemm_args *g, cl_mem *packed)
{
    *packed = NULL;
    const size_t size = g->k * g->n;
    if (g->trans_b || g->ldb != g->n || (g->b_off == 0 && (g->batch == 1 || g->b_stride == size)))
        return LF_OK;
    LF_TRY(lf__alloc(ctx, g->batch * size * sizeof(float), "a packed copy of GEMM operand B", packed));
    for (size_t i = 0; i < g->batch; i++) {
        cl_int err = clEnqueueCopyBuffer(ctx->queue, g->b, *packed, (g->b_off + i * g->b_stride) * sizeof(float),
                                         i * size * sizeof(float), size * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            lf__release(packed);
            return lf__cl_fail(ctx, err, "clEnqueueCopyBuffer (packing GEMM operand B)");
        }
    }
    g->b = *packed, g->b_off = 0, g->b_stride = size;
    return LF_OK;
}

/* What a GEMM does, for the profile: 2 m n k a product over the rows it
 * runs (the host BLAS: each sequence's own), each operand read once and C
 * written (and read, with beta). */
static void gemm_work(const lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    const bool own_rows = g->seq_lengths && ctx->gemm == LF_GEMM_HOST;
    double rows = own_rows ? 0.0 : (double)g->m * (double)batch;
    for (size_t i = 0; own_rows && i < batch; i++) rows += g->seq_lengths[i];
    const double n = (double)g->n, k = (double)g->k, b_count = g->b_stride ? (double)batch : 1.0;
    lf__event_work(t, 2.0 * rows * n * k, 4.0 * (rows * k + b_count * k * n + rows * n * (g->beta != 0.0f ? 2 : 1)));
}

static CLBlastStatusCode strided_batched(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    cl_command_queue q = ctx->queue;
    return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
                                      g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, g->m, g->n, g->k,
                                      g->alpha, g->a, g->a_off, g->lda, g->a_stride, g->b, g->b_off, g->ldb,
                                      g->b_stride, g->beta, g->c, g->c_off, g->ldc, g->c_stride, g->batch, &q,
                                      lf__event(t));
}

/* One CLBlast call, its event recorded under the GEMM's name. */
static lf_status gemm_clblast(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    const CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    cl_command_queue q = ctx->queue;
    CLBlastStatusCode s;
    /* per-sequence row GEMMs stay batched even for one sequence: CLBlast's
     * batched kernels differ from its single one */
    if (g->batch <= 1 && !g->seq_rows) {
        lf__clblast_lock();
        lf__tune_use(ctx, g->m, g->n, g->k);
        s = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha, g->a, g->a_off,
                         g->lda, g->b, g->b_off, g->ldb, g->beta, g->c, g->c_off, g->ldc, &q,
                         lf__event(t));
        lf__clblast_unlock();
    } else {
        lf_gemm_args p = *g;
        cl_mem packed = NULL;
        LF_TRY(pack_b(ctx, &p, &packed));
        lf__clblast_lock();
        lf__tune_use(ctx, p.m, p.n, p.k);
        s = strided_batched(ctx, &p, t);
        lf__clblast_unlock();
        lf__release(&packed); /* the queued GEMM holds it until it has run */
    }
    if (s != CLBlastSuccess) {
        lf_status st = (s == CLBlastTempBufferAllocFailure || s == CLBlastOpenCLOutOfHostMemory)
                           ? LF_ERR_OUT_OF_MEMORY : LF_ERR_BLAS;
        return lf__fail(ctx, st, "CLBlast GEMM %zux%zux%zu (batch %zu) failed: %s (%d)", g->m, g->n,
                        g->k, g->batch, clblast_status_name(s), (int)s);
    }
    gemm_work(ctx, g, t);
    lf__event_done(t, g->what ? g->what : "gemm");
    return LF_OK;
}

/* CLBlast's kernels take offsets and compute indices (offset + batch x stride
 * + row x ld + column, and the same in its padded temporaries) in 32-bit
 * ints: a GEMM reaching past 2^31 elements of a buffer reads and writes
 * elsewhere. On a GPU a dense layer at n 32768, whose 8 heads' scores are
 * 2^33 floats, lost the context. A GEMM whose operands reach past `limit`
 * elements (2^30 by default, leaving room for the padding) runs in pieces,
 * each on sub-buffers that begin at the device's alignment just before its
 * operands. A piece halves the batch, else what makes the longest operand
 * long: C's rows, then its columns; A's rows or its inner dimension; B's
 * columns or its inner dimension (the second half of an inner dimension adds
 * into C with beta 1). */
#define LF_CLBLAST_LIMIT ((size_t)1 << 30)

/* Sub-buffers over A, B and C from the device's alignment at or before each
 * offset, so that the offsets CLBlast is given are small. */
static lf_status gemm_rebased(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t, size_t align)
{
    lf_gemm_args r = *g;
    cl_mem *mem[3] = {&r.a, &r.b, &r.c}, sub[3] = {NULL, NULL, NULL};
    size_t *off[3] = {&r.a_off, &r.b_off, &r.c_off};
    lf_status st = LF_OK;
    for (int i = 0; i < 3 && st == LF_OK; i++) {
        /* to the buffer's end, as CLBlast checks sizes as if each last row were whole */
        size_t bytes = 0;
        clGetMemObjectInfo(*mem[i], CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        const size_t origin = *off[i] / align * align * sizeof(float);
        const cl_buffer_region region = {origin, bytes > origin ? bytes - origin : 0};
        cl_int err = CL_SUCCESS;
        sub[i] = clCreateSubBuffer(*mem[i], 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
        if (err != CL_SUCCESS) {
            sub[i] = NULL;
            st = lf__cl_fail(ctx, err, "clCreateSubBuffer (a piece of a GEMM past CLBlast's 32-bit indices)");
        } else {
            *mem[i] = sub[i], *off[i] -= origin / sizeof(float);
        }
    }
    if (st == LF_OK) st = gemm_clblast(ctx, &r, t);
    for (int i = 0; i < 3; i++) lf__release(&sub[i]); /* the queued GEMM holds them until it has run */
    return st;
}

static lf_status gemm_pieces(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t, size_t limit)
{
    size_t ext[3];
    extents(g, ext);
    if (g->a_off + ext[0] <= limit && g->b_off + ext[1] <= limit && g->c_off + ext[2] <= limit)
        return gemm_clblast(ctx, g, t);
    cl_uint bits = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
    const size_t align = bits >= 8 * sizeof(float) ? bits / (8 * sizeof(float)) : 1;
    const bool long_a = ext[0] + align > limit, long_b = ext[1] + align > limit, long_c = ext[2] + align > limit;
    if (!long_a && !long_b && !long_c) return gemm_rebased(ctx, g, t, align);
    lf_gemm_args x = *g, y = *g; /* the two halves */
    if (g->batch > 1) {
        x.batch = g->batch / 2, y.batch = g->batch - x.batch;
        y.a_off += x.batch * g->a_stride, y.b_off += x.batch * g->b_stride, y.c_off += x.batch * g->c_stride;
    } else if (g->m > 1 && (long_c || (long_a && !g->trans_a))) { /* rows of C and op(A) */
        x.m = g->m / 2, y.m = g->m - x.m;
        y.a_off += x.m * (g->trans_a ? 1 : g->lda), y.c_off += x.m * g->ldc;
    } else if (g->n > 1 && (long_c || (long_b && g->trans_b))) { /* columns of C and op(B) */
        x.n = g->n / 2, y.n = g->n - x.n;
        y.b_off += x.n * (g->trans_b ? g->ldb : 1), y.c_off += x.n;
    } else if (g->k > 1 && (long_a || long_b)) { /* the inner dimension: y adds into x's C */
        x.k = g->k / 2, y.k = g->k - x.k, y.beta = 1.0f;
        y.a_off += x.k * (g->trans_a ? g->lda : 1), y.b_off += x.k * (g->trans_b ? 1 : g->ldb);
    } else {
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "CLBlast GEMM %zux%zux%zu: no piece of it fits CLBlast's 32-bit "
                        "indices (%zu elements, aligned to %zu)", g->m, g->n, g->k, limit, align);
    }
    LF_TRY(gemm_pieces(ctx, &x, t, limit));
    return gemm_pieces(ctx, &y, t, limit);
}

/* ---- Host backend ---- */

/* One buffer mapped for the host: the element range [lo, hi) of `mem`. A
 * buffer that holds several operands (A and B in one allocation) is mapped
 * once over all of them, as overlapping maps for writing are undefined. */
typedef struct {
    cl_mem mem;
    size_t lo, hi;
    bool write;
    float *ptr;
} lf_mapping;

static void add_range(lf_mapping *maps, int *count, cl_mem mem, size_t lo, size_t hi, bool write)
{
    for (int i = 0; i < *count; i++)
        if (maps[i].mem == mem) {
            if (lo < maps[i].lo) maps[i].lo = lo;
            if (hi > maps[i].hi) maps[i].hi = hi;
            maps[i].write |= write;
            return;
        }
    maps[(*count)++] = (lf_mapping){mem, lo, hi, write, NULL};
}

static float *host_ptr(const lf_mapping *maps, int count, cl_mem mem, size_t off)
{
    for (int i = 0; i < count; i++)
        if (maps[i].mem == mem) return maps[i].ptr + (off - maps[i].lo);
    return NULL;
}

/* Unmaps what was mapped; the last unmap's event goes to the timeline, so the
 * stage is charged from the command before it to the end of the host GEMM. */
static lf_status unmap_all(lf_context *ctx, lf_mapping *maps, int count, lf_timeline *t, const char *what)
{
    cl_int first = CL_SUCCESS;
    int last = count - 1;
    while (last >= 0 && !maps[last].ptr) last--;
    for (int i = 0; i <= last; i++) {
        if (!maps[i].ptr) continue;
        cl_int err = clEnqueueUnmapMemObject(ctx->queue, maps[i].mem, maps[i].ptr, 0, NULL,
                                             i == last ? lf__event(t) : NULL);
        if (err != CL_SUCCESS && first == CL_SUCCESS) first = err;
        if (err == CL_SUCCESS && i == last) lf__event_done(t, what);
    }
    return first == CL_SUCCESS ? LF_OK : lf__cl_fail(ctx, first, "clEnqueueUnmapMemObject");
}

static void host_sgemm(const lf_context *ctx, const lf_gemm_args *g, const float *a, const float *b, float *c)
{
    const enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    const size_t batch = g->batch > 1 ? g->batch : 1;
    for (size_t i = 0; i < batch; i++) {
        const int m = g->seq_lengths ? g->seq_lengths[i] : (int)g->m;
        if (m > 0)
            ctx->host_blas->sgemm(CblasRowMajor, ta, tb, m, (int)g->n, (int)g->k, g->alpha, a + i * g->a_stride,
                                  (int)g->lda, b + i * g->b_stride, (int)g->ldb, g->beta, c + i * g->c_stride,
                                  (int)g->ldc);
    }
}

/* What CLBlast checks before it runs, so both backends refuse the same calls. */
static lf_status check_host(lf_context *ctx, const lf_gemm_args *g, const lf_mapping *maps, int count)
{
    const size_t a_cols = g->trans_a ? g->m : g->k, b_cols = g->trans_b ? g->k : g->n;
    if (g->lda < a_cols || g->ldb < b_cols || g->ldc < g->n)
        return lf__fail(ctx, LF_ERR_BLAS, "host GEMM %zux%zux%zu: leading dimensions %zu, %zu, %zu are below the "
                        "%zu, %zu, %zu elements of a row of A, B, C", g->m, g->n, g->k, g->lda, g->ldb, g->ldc,
                        a_cols, b_cols, g->n);
    for (int i = 0; i < count; i++) {
        size_t bytes = 0;
        cl_int err = clGetMemObjectInfo(maps[i].mem, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, "clGetMemObjectInfo(GEMM operand)");
        const char *which = maps[i].mem == g->c ? "C" : maps[i].mem == g->b ? "B" : "A";
        if (maps[i].hi * sizeof(float) > bytes)
            return lf__fail(ctx, LF_ERR_BLAS, "host GEMM %zux%zux%zu (batch %zu): the buffer of %s holds %zu bytes, "
                            "needs %zu", g->m, g->n, g->k, g->batch, which, bytes, maps[i].hi * sizeof(float));
    }
    return LF_OK;
}

static lf_status gemm_host(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    const size_t big = INT_MAX;
    if (g->m > big || g->n > big || g->k > big || g->lda > big || g->ldb > big || g->ldc > big)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "host GEMM %zux%zux%zu: a size or leading dimension is over %d",
                        g->m, g->n, g->k, INT_MAX);
    size_t ext[3];
    extents(g, ext);
    lf_mapping maps[3];
    int count = 0;
    add_range(maps, &count, g->a, g->a_off, g->a_off + ext[0], false);
    add_range(maps, &count, g->b, g->b_off, g->b_off + ext[1], false);
    add_range(maps, &count, g->c, g->c_off, g->c_off + ext[2], true);
    LF_TRY(check_host(ctx, g, maps, count));
    /* Blocking maps: the in-order queue first finishes what writes the inputs. */
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < count && err == CL_SUCCESS; i++) {
        const cl_map_flags flags = maps[i].write ? CL_MAP_READ | CL_MAP_WRITE : CL_MAP_READ;
        maps[i].ptr = clEnqueueMapBuffer(ctx->queue, maps[i].mem, CL_TRUE, flags, maps[i].lo * sizeof(float),
                                         (maps[i].hi - maps[i].lo) * sizeof(float), 0, NULL, NULL, &err);
        if (err != CL_SUCCESS) maps[i].ptr = NULL;
    }
    if (err == CL_SUCCESS)
        host_sgemm(ctx, g, host_ptr(maps, count, g->a, g->a_off), host_ptr(maps, count, g->b, g->b_off),
                   host_ptr(maps, count, g->c, g->c_off));
    gemm_work(ctx, g, t);
    lf_status st = unmap_all(ctx, maps, count, t, g->what ? g->what : "gemm");
    if (err != CL_SUCCESS)
        return lf__fail(ctx, err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY
                                 ? LF_ERR_OUT_OF_MEMORY : LF_ERR_OPENCL,
                        "host GEMM %zux%zux%zu (batch %zu): mapping an operand failed: %s", g->m, g->n, g->k,
                        g->batch, lf_cl_error_string(err));
    return st;
}

/* A row GEMM over sequences as a strided batch of one GEMM per sequence. */
static lf_gemm_args per_sequence(const lf_gemm_args *g)
{
    lf_gemm_args s = *g;
    s.m = g->seq_rows;
    s.batch = g->m / g->seq_rows;
    s.a_stride = g->seq_rows * g->lda;
    s.b_stride = 0;
    s.c_stride = g->seq_rows * g->ldc;
    return s;
}

/* A GEMM's shape noted, as lf__gemm_limited gets it (`linformer tune --model`). */
void lf__gemm_note(lf_gemm_record *r, const lf_gemm_args *g, bool batched)
{
    const lf_gemm_shape s = {g->trans_a, g->trans_b, batched, g->b_stride != 0, g->m, g->n, g->k,
                             g->batch > 1 ? g->batch : 1, 1};
    r->calls++;
    for (size_t i = 0; i < r->count; i++) {
        lf_gemm_shape *o = &r->shapes[i];
        if (o->trans_a == s.trans_a && o->trans_b == s.trans_b && o->batched == s.batched &&
            o->b_batched == s.b_batched && o->m == s.m && o->n == s.n && o->k == s.k && o->batch == s.batch) {
            o->calls++;
            return;
        }
    }
    if (r->count < LF_GEMM_SHAPES_MAX) r->shapes[r->count++] = s;
    else r->overflow = true;
}

lf_status lf__gemm_limited(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t, size_t limit)
{
    if (g->m == 0 || g->n == 0 || g->k == 0) return LF_OK;
    if ((g->seq_rows && (g->trans_a || g->batch > 1 || g->m % g->seq_rows)) || (g->seq_lengths && !g->seq_rows))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "GEMM %zux%zux%zu: %zu rows are not whole sequences of %zu rows",
                        g->m, g->n, g->k, g->m, g->seq_rows);
    const lf_gemm_args s = g->seq_rows ? per_sequence(g) : *g;
    if (ctx->gemm_record) return lf__gemm_note(ctx->gemm_record, &s, g->batch > 1 || g->seq_rows), LF_OK;
    return ctx->gemm == LF_GEMM_HOST ? gemm_host(ctx, &s, t) : gemm_pieces(ctx, &s, t, limit);
}

lf_status lf__gemm(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    return lf__gemm_limited(ctx, g, t, LF_CLBLAST_LIMIT);
}
