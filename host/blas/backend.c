/*
 * backend.c - the public create functions: a context opened on a device (or
 * wrapped around a host's queue) with its GEMM backend chosen and this
 * device's stored CLBlast parameters applied (tune.c).
 */
#include <stdlib.h>
#include <string.h>

#include "blas.h"

static lf_status gemm_init(lf_context *ctx, char *errbuf, size_t errbuf_size)
{
    const char *env = getenv("LINFORMER_GEMM");
    if (!env || !*env) {
        /* Measured in bench/NOTES.md: on a CPU device the host BLAS beats
         * CLBlast's kernels, even when OpenBLAS falls back to generic ones. */
        ctx->gemm = ctx->info.type == LF_DEVICE_CPU ? LF_GEMM_HOST : LF_GEMM_CLBLAST;
    } else if (strcmp(env, "clblast") == 0) {
        ctx->gemm = LF_GEMM_CLBLAST;
    } else if (strcmp(env, "host") == 0) {
        ctx->gemm = LF_GEMM_HOST;
    } else {
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT,
                            "LINFORMER_GEMM is \"%s\": use \"clblast\" or \"host\"", env);
    }
    if (ctx->gemm == LF_GEMM_HOST) LF_TRY(lf__host_blas_pick(&ctx->host_blas, errbuf, errbuf_size));
    return lf__tune_apply(ctx, errbuf, errbuf_size);
}

const char *lf_context_gemm_backend(const lf_context *ctx)
{
    if (!ctx) return NULL;
    return ctx->gemm == LF_GEMM_HOST ? "host" : "clblast";
}

const char *lf_context_host_blas(const lf_context *ctx)
{
    return ctx && ctx->gemm == LF_GEMM_HOST ? ctx->host_blas->name : NULL;
}

/* Adds the GEMM backend to a context just opened; frees it on failure. */
static lf_status with_gemm(lf_context **out, char *errbuf, size_t errbuf_size)
{
    lf_status st = gemm_init(*out, errbuf, errbuf_size);
    if (st != LF_OK) {
        lf_context_free(*out);
        *out = NULL;
    }
    return st;
}

lf_status lf_context_create(const char *selector, lf_context **out, char *errbuf, size_t errbuf_size)
{
    LF_TRY(lf__context_open(selector, out, errbuf, errbuf_size));
    return with_gemm(out, errbuf, errbuf_size);
}

lf_status lf_context_create_from_cl(cl_context context, cl_command_queue queue, lf_context **out,
                                    char *errbuf, size_t errbuf_size)
{
    LF_TRY(lf__context_wrap(context, queue, out, errbuf, errbuf_size));
    return with_gemm(out, errbuf, errbuf_size);
}
