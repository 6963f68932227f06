/*
 * model_tune.c - lf_gemm_tune_model: CLBlast's sets searched on the GEMMs a
 * model file's forward runs. The forward runs once with its GEMMs noted
 * instead of run (ctx->gemm_record), which gives every GEMM it calls at that
 * length and batch, deduplicated; blas/tune_model.c searches them by class.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "blas.h"

/* The model's GEMMs at batch x *seq_len (0: its max_seq_len, set there), noted into r. */
static lf_status note_forward(lf_context *ctx, lf_model *model, int batch, int *seq_len, lf_gemm_record *r)
{
    lf_model_info info;
    LF_TRY(lf_model_info_get(model, &info));
    const int n = *seq_len = *seq_len ? *seq_len : info.max_seq_len;
    if (n > info.max_seq_len)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "seq_len %d is past the model's max_seq_len %d", n, info.max_seq_len);
    const size_t rows = (size_t)batch * (size_t)n, width = (size_t)(info.vocab && info.kind == LF_MODEL_LM ? info.vocab
                                                                                                       : info.d_model);
    const bool tokens = info.kind != LF_MODEL_ENCODER;
    void *in = calloc(rows, tokens ? sizeof(int64_t) : (size_t)info.d_model * sizeof(float)); /* token 0, or x 0 */
    float *y = malloc(rows * width * sizeof *y);
    lf_status st =
        in && y ? LF_OK : lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "no host memory for a forward of %zu rows", rows);
    if (st == LF_OK) {
        ctx->gemm_record = r;
        st = lf_model_forward(model, tokens ? NULL : in, tokens ? in : NULL, y, batch, n, NULL);
        ctx->gemm_record = NULL;
    }
    if (st == LF_OK && r->overflow)
        st = lf__fail(ctx, LF_ERR_UNSUPPORTED, "the forward runs GEMMs of more than %d shapes", LF_GEMM_SHAPES_MAX);
    free(in);
    free(y);
    return st;
}

lf_status lf_gemm_tune_model(lf_context *ctx, const char *path, int seq_len, int batch, double seconds,
                             lf_tune_log log, void *user)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!path) return lf__fail(ctx, LF_ERR_ARGUMENT, "path is NULL");
    if (seq_len < 0)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "seq_len must be 0 (the model's max_seq_len) or positive, got %d",
                        seq_len);
    if (batch < 1 || batch > 65536) return lf__fail(ctx, LF_ERR_ARGUMENT, "batch must be 1 to 65536, got %d", batch);
    if (!(seconds > 0) || !isfinite(seconds))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "seconds must be positive and finite, got %g", seconds);
    lf_model *model = NULL;
    LF_TRY(lf_model_load(ctx, path, NULL, &model));
    lf_gemm_record *r = calloc(1, sizeof *r);
    lf_status st = r ? note_forward(ctx, model, batch, &seq_len, r) : lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "no memory");
    lf_model_free(model);
    if (st == LF_OK && log) {
        char line[256];
        snprintf(line, sizeof line, "%s at n %d, batch %d: %u GEMM calls of %zu shapes", path, seq_len, batch,
                 r->calls, r->count);
        log(line, user);
    }
    if (st == LF_OK) st = lf__gemm_tune_shapes(ctx, r, seconds, log, user);
    free(r);
    return st;
}
