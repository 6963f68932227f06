/*
 * test_pytorch.c - layers trained in PyTorch run unchanged: lucidrains'
 * LinformerSelfAttention saved as safetensors, with PyTorch's own output
 * (tests/data/make_pytorch_fixtures.py wrote the files).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "safetensors.h"

static void expect_output_in(const char *name, lf_mode mode)
{
    char path[512], msg[512];
    lf_context *ctx = lf_test_context();
    lf_attention *layer = NULL;
    snprintf(path, sizeof path, "%s/tests/data/pytorch/%s.model.safetensors", LF_SOURCE_DIR, name);
    lf_load_options opts;
    lf_load_options_init(&opts);
    opts.mode = mode;
    lf_status st = lf_attention_load_with(ctx, path, &opts, &layer);
    cr_assert_eq(st, LF_OK, "%s: %s", name, lf_context_last_error(ctx));

    lf_st_file io;
    snprintf(path, sizeof path, "%s/tests/data/pytorch/%s.io.safetensors", LF_SOURCE_DIR, name);
    cr_assert_eq(lf_st_open(path, &io, msg, sizeof msg), LF_OK, "%s", msg);
    const lf_st_tensor *x = lf_st_find(&io, "x"), *y = lf_st_find(&io, "y");
    cr_assert(x && y && x->ndim == 3 && y->count == x->count);
    float *xs = malloc(x->count * sizeof *xs), *want = malloc(y->count * sizeof *want);
    float *got = malloc(y->count * sizeof *got);
    cr_assert_eq(lf_st_to_f32(x, xs, msg, sizeof msg), LF_OK);
    cr_assert_eq(lf_st_to_f32(y, want, msg, sizeof msg), LF_OK);
    lf_test_poison(got, y->count);
    st = lf_attention_forward(layer, xs, got, (int)x->shape[0], (int)x->shape[1], NULL);
    cr_assert_eq(st, LF_OK, "%s: %s", name, lf_context_last_error(ctx));
    double e = lf_test_rel_err_f(got, want, y->count);
    cr_expect_leq(e, 1e-5, "%s: relative error %.3g against PyTorch", name, e);
    free(xs), free(want), free(got);
    lf_st_close(&io);
    lf_attention_free(layer);
    lf_context_free(ctx);
}

static void expect_pytorch_output(const char *name) { expect_output_in(name, LF_MODE_LINFORMER); }

TestSuite(pytorch, .timeout = 300);

Test(pytorch, plain) { expect_pytorch_output("plain"); }
Test(pytorch, shorter_sequence_uses_first_columns_of_projections) { expect_pytorch_output("short_sequence"); }
Test(pytorch, share_kv_and_one_kv_head_with_own_head_width) { expect_pytorch_output("share_kv_one_kv_head"); }
Test(pytorch, one_kv_head) { expect_pytorch_output("one_kv_head"); }
Test(pytorch, weights_stored_as_f64) { expect_pytorch_output("stored_f64"); }
Test(pytorch, weights_stored_as_f16) { expect_pytorch_output("stored_f16"); }
Test(pytorch, weights_stored_as_bf16) { expect_pytorch_output("stored_bf16"); }

/* the file says "causal": "1"; PyTorch masked the scores above the diagonal */
Test(pytorch, causal_dense_and_flash)
{
    expect_output_in("causal_dense", LF_MODE_DENSE);
    expect_output_in("causal_dense", LF_MODE_FLASH);
}
