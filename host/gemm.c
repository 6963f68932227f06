/* gemm.c - row-major GEMM and strided-batched GEMM through CLBlast. */
#include "internal.h" /* first: it fixes the OpenCL version the headers target */

#include <clblast_c.h>

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

lf_status lf__gemm(lf_context *ctx, const lf_gemm_args *g, lf_timeline *t)
{
    if (g->m == 0 || g->n == 0 || g->k == 0) return LF_OK;
    const CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    cl_command_queue q = ctx->queue;
    CLBlastStatusCode s;
    if (g->batch <= 1)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha, g->a, g->a_off,
                         g->lda, g->b, g->b_off, g->ldb, g->beta, g->c, g->c_off, g->ldc, &q,
                         lf__event(t));
    else
        s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, g->m, g->n, g->k, g->alpha,
                                       g->a, g->a_off, g->lda, g->a_stride, g->b, g->b_off, g->ldb,
                                       g->b_stride, g->beta, g->c, g->c_off, g->ldc, g->c_stride,
                                       g->batch, &q, lf__event(t));
    if (s != CLBlastSuccess) {
        lf_status st = (s == CLBlastTempBufferAllocFailure || s == CLBlastOpenCLOutOfHostMemory)
                           ? LF_ERR_OUT_OF_MEMORY : LF_ERR_BLAS;
        return lf__fail(ctx, st, "CLBlast GEMM %zux%zux%zu (batch %zu) failed: %s (%d)", g->m, g->n,
                        g->k, g->batch, clblast_status_name(s), (int)s);
    }
    lf__event_done(t, g->what ? g->what : "gemm");
    return LF_OK;
}
