/*
 * test_split_sums.c - the sequence projection's sums in slices
 * (LINFORMER_KERNEL_PARAMS split=S, stages.c): for every S from 1 to 16, every
 * way of sharing the projections, the projection on the input, biases through
 * E's row sums, and mixed lengths with an empty sequence, the layer against
 * the double-precision reference, and each sequence of a batch exactly what
 * it gives alone.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer_case.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void)
{
    unsetenv("LINFORMER_KERNEL_PARAMS");
    lf_context_free(ctx);
}
TestSuite(split_sums, .init = setup, .fini = teardown, .timeout = 600);

static const int32_t mixed[] = {173, 1, 0, 100};

Test(split_sums, every_slice_count_and_sharing)
{
    const struct {
        lf_sharing sharing;
        lf_position position;
        bool biases;
        const char *name;
    } cases[] = {{LF_SHARE_NONE, LF_POSITION_KV, false, "E, F per head"},
                 {LF_SHARE_HEADWISE, LF_POSITION_KV, true, "headwise, biases through E's row sums"},
                 {LF_SHARE_KV, LF_POSITION_KV, false, "E = F"},
                 {LF_SHARE_HEADWISE, LF_POSITION_INPUT, true, "E on the input"}};
    for (int s = 1; s <= 16; s++) {
        char params[32];
        snprintf(params, sizeof params, "split=%d", s);
        setenv("LINFORMER_KERNEL_PARAMS", params, 1); /* read as each layer is made */
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            lf_case c = {.batch = 4, .n = 173, .lengths = mixed};
            lf_attention_config_init(&c.cfg, 48, 2, 200, 24);
            c.cfg.sharing = cases[i].sharing, c.cfg.position = cases[i].position;
            c.cfg.bias_k = c.cfg.bias_v = cases[i].biases;
            const double e = lf_case_run(ctx, &c);
            cr_expect_leq(e, TOL, "%s, %s: relative error %.3g", params, cases[i].name, e);
            const double d = lf_case_batch_vs_alone(ctx, &c);
            cr_expect_leq(d, 1e-6, "%s, %s: a sequence in a batch differs from itself alone by %.3g", params,
                          cases[i].name, d);
        }
    }
}
