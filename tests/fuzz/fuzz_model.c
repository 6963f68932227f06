/*
 * fuzz_model.c - libFuzzer target for lf_model_load: whole models in
 * lucidrains' and fairseq's names on top of the safetensors reader. Each input
 * is written to a temporary file and loaded on a context opened once in
 * LLVMFuzzerInitialize. A model that loads must describe itself consistently,
 * hold device memory bounded by the file, and run one short forward; any other
 * input must fail with a status and a message, cheaply. Run with a small
 * -max_len, e.g.
 *   fuzz_model -max_len=8192 -max_total_time=60 corpus_model_copy/
 */
#include <stdlib.h>

#include "fuzz_file.h"

static lf_context *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    ctx = fuzz_file_init("fuzz_model");
    return 0;
}

/* One forward of a single sequence of up to 3 rows, on inputs of the model's
 * kind: it must run (the weights may hold anything, so y is not checked). */
static void forward_once(lf_model *model, const lf_model_info *info)
{
    enum { ROWS = 3 };
    const int n = info->max_seq_len < ROWS ? info->max_seq_len : ROWS;
    const int width = info->kind == LF_MODEL_LM ? info->vocab : info->d_model;
    float *x = calloc((size_t)n * (size_t)info->d_model, sizeof *x);
    float *y = malloc((size_t)n * (size_t)width * sizeof *y);
    int64_t tokens[ROWS];
    if (!x || !y) abort();
    for (int i = 0; i < n * info->d_model; i++) x[i] = (float)((i * 7) % 5) - 2.0f;
    for (int i = 0; i < n; i++) tokens[i] = info->vocab ? i % info->vocab : 0;
    const int token_input = info->kind != LF_MODEL_ENCODER;
    lf_status st = lf_model_forward(model, token_input ? NULL : x, token_input ? tokens : NULL, y, 1, n, NULL);
    if (st != LF_OK && st != LF_ERR_OUT_OF_MEMORY) __builtin_trap();
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size);

    lf_model *model = (lf_model *)0x1;
    lf_status st = lf_model_load(ctx, path, NULL, &model);
    if (st != LF_OK) {
        fuzz_expect_clean_failure(ctx, st, model);
        return 0;
    }
    lf_model_info info;
    size_t weights = 0, workspace = 0;
    if (lf_model_info_get(model, &info) != LF_OK) __builtin_trap();
    if (info.layers <= 0 || info.d_model <= 0 || info.heads <= 0 || info.d_ff <= 0 || info.max_seq_len <= 0)
        __builtin_trap();
    if ((info.kind == LF_MODEL_ENCODER) != (info.vocab == 0)) __builtin_trap();
    if (lf_model_device_bytes(model, &weights, &workspace) != LF_OK || weights == 0) __builtin_trap();
    /* Every weight came from the file's bytes (f16 doubles, plus fused copies). */
    if (weights > 16 * (size_t)size + 4096) __builtin_trap();
    forward_once(model, &info);
    lf_model_free(model);
    return 0;
}
