/*
 * test_gpu_path.c - the layers a GPU runs, at sizes a device simulator
 * affords (the Oclgrind stage runs these with its race and bounds checks on):
 * Linformer on the fused path and on the GEMM path (a k whose keys do not fit
 * local memory), dense and flash, causal dense, flash and pooled Linformer,
 * one key/value head, share_kv, mixed lengths, the projection's sums in
 * slices. Against the double-precision reference, on every device, in both
 * variants of the attention kernel (LINFORMER_KERNEL_PARAMS makes any device
 * run either).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_case.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(gpu_path, .init = setup, .fini = teardown, .timeout = 600);

static const int32_t mixed[] = {13, 5, 0, 1};

static lf_case tiny(lf_mode mode, int k, bool causal)
{
    lf_case c = {.batch = 2, .n = 13, .lengths = NULL};
    lf_attention_config_init(&c.cfg, 16, 2, 20, k);
    c.cfg.mode = mode;
    c.cfg.causal = causal;
    if (causal && mode == LF_MODE_LINFORMER) c.cfg.proj_kind = LF_PROJ_MEAN_POOL;
    return c;
}

static const char *const variants[] = {"variant=gpu", "variant=cpu"};
#define VARIANTS (sizeof variants / sizeof variants[0])

/* The case in each variant; with alone, each sequence of its batch also
 * gives exactly what it gives alone. */
static void check_variants(const lf_case *c, const char *what, bool alone)
{
    for (size_t v = 0; v < VARIANTS; v++) {
        setenv("LINFORMER_KERNEL_PARAMS", variants[v], 1);
        const double e = lf_case_run(ctx, c);
        cr_expect_leq(e, TOL, "%s, %s: relative error %.3g", what, variants[v], e);
        const double d = alone ? lf_case_batch_vs_alone(ctx, c) : 0;
        cr_expect_leq(d, 1e-6, "%s, %s: a sequence in a batch differs from itself alone by %.3g", what,
                      variants[v], d);
    }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

static void expect_exact(const lf_case *c, const char *what) { check_variants(c, what, false); }

Test(gpu_path, linformer_fused_and_gemm)
{
    for (int path = LF_PATH_FUSED; path <= LF_PATH_GEMM; path++) {
        lf_case c = tiny(LF_MODE_LINFORMER, 5, false);
        c.cfg.path = (lf_path)path;
        expect_exact(&c, path == LF_PATH_FUSED ? "fused path" : "gemm path");
    }
}

/* k = 600 keys and values of d_head 8 take 38400 bytes: more than 32 KiB of
 * local memory, so the GPU variant takes the GEMM path there; the CPU
 * variant keeps none in local memory and takes the fused path anywhere. */
Test(gpu_path, keys_past_local_memory_take_the_gemm_path)
{
    lf_case c = tiny(LF_MODE_LINFORMER, 600, false);
    c.n = 9;
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    for (size_t v = 0; v < VARIANTS; v++) {
        setenv("LINFORMER_KERNEL_PARAMS", variants[v], 1);
        lf_attention *layer = NULL;
        cr_assert_eq(lf_attention_create(ctx, &c.cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
        lf_attention_config got;
        cr_assert_eq(lf_attention_config_get(layer, &got), LF_OK);
        lf_attention_free(layer);
        const bool gpu = strcmp(variants[v], "variant=gpu") == 0;
        if (!gpu || info.local_mem_bytes < 38400)
            cr_expect_eq(got.path, gpu ? LF_PATH_GEMM : LF_PATH_FUSED, "k 600, %s, %llu bytes of local memory",
                         variants[v], (unsigned long long)info.local_mem_bytes);
    }
    expect_exact(&c, "k 600");
}

Test(gpu_path, dense_and_flash_plain_and_causal)
{
    for (int m = LF_MODE_DENSE; m <= LF_MODE_FLASH; m++)
        for (int causal = 0; causal <= 1; causal++) {
            const lf_case c = tiny((lf_mode)m, 0, causal);
            char what[64];
            snprintf(what, sizeof what, "mode %s, causal %d", lf_mode_name(c.cfg.mode), causal);
            expect_exact(&c, what);
        }
}

Test(gpu_path, causal_pooled_linformer)
{
    static const lf_proj_kind kinds[] = {LF_PROJ_MEAN_POOL, LF_PROJ_MAX_POOL, LF_PROJ_CONV};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        lf_case c = tiny(LF_MODE_LINFORMER, 4, true); /* windows of 5 */
        c.cfg.proj_kind = kinds[i];
        expect_exact(&c, "causal Linformer");
    }
}

Test(gpu_path, one_kv_head_and_share_kv)
{
    for (int share_kv = 0; share_kv <= 1; share_kv++)
        for (int path = LF_PATH_FUSED; path <= LF_PATH_GEMM; path++) {
            lf_case c = tiny(LF_MODE_LINFORMER, 5, false);
            c.cfg.kv_heads = 1, c.cfg.share_kv = share_kv, c.cfg.path = (lf_path)path;
            expect_exact(&c, share_kv ? "share_kv, one kv head" : "one kv head");
        }
}

Test(gpu_path, mixed_lengths_match_alone)
{
    static const struct { lf_mode mode; bool causal; } modes[] = {
        {LF_MODE_LINFORMER, false}, {LF_MODE_LINFORMER, true}, {LF_MODE_DENSE, false}, {LF_MODE_FLASH, true}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        lf_case c = tiny(modes[i].mode, 5, modes[i].causal);
        c.batch = 4, c.lengths = mixed;
        char what[64];
        snprintf(what, sizeof what, "mixed lengths, mode %s, causal %d", lf_mode_name(c.cfg.mode), modes[i].causal);
        check_variants(&c, what, true);
    }
}

/* The sequence projection's sums in slices (test_split_sums.c has every S):
 * the slice GEMMs at offsets into one workspace, and the sum's, on the GPU path. */
Test(gpu_path, split_sums)
{
    lf_case c = tiny(LF_MODE_LINFORMER, 5, false);
    c.batch = 4, c.lengths = mixed;
    c.cfg.bias_k = c.cfg.bias_v = 1;
    setenv("LINFORMER_KERNEL_PARAMS", "variant=gpu,split=3", 1);
    const double e = lf_case_run(ctx, &c), d = lf_case_batch_vs_alone(ctx, &c);
    unsetenv("LINFORMER_KERNEL_PARAMS");
    cr_expect_leq(e, TOL, "split=3: relative error %.3g", e);
    cr_expect_leq(d, 1e-6, "split=3: a sequence in a batch differs from itself alone by %.3g", d);
}

/* d_head split across DS work-items of a query (ds of LINFORMER_KERNEL_PARAMS)
 * in whole layers: flash, fused Linformer and causal pooled Linformer, causal
 * or not, at head widths 16 to 256, mixed lengths, the table's DS (DH / 64)
 * and each DS asked for (lowered until it divides the row's vectors), once
 * more in groups of 4 queries and tiles of 3 keys, so that many groups and
 * tiles end inside a sequence. Against the reference and each sequence
 * alone; a DS past 1 is seen in the kernel's options. */
Test(gpu_path, d_split)
{
    static const int d_heads[] = {16, 40, 128, 256}; /* 256: the widest the kernel takes */
    static const char *const params[] = {"variant=gpu", "variant=gpu,ds=2", "variant=gpu,ds=4",
                                         "variant=gpu,ds=8", "variant=gpu,tk=3,tq=4,ds=2"};
    static const struct { lf_mode mode; bool causal; } modes[] = {
        {LF_MODE_LINFORMER, false}, {LF_MODE_LINFORMER, true}, {LF_MODE_FLASH, false}, {LF_MODE_FLASH, true}};
    for (size_t h = 0; h < sizeof d_heads / sizeof d_heads[0]; h++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
            for (size_t p = 0; p < sizeof params / sizeof params[0]; p++) {
                if (lf_test_tiny() && (h + m + p) % 5) continue; /* the simulator: each width with each mode once */
                lf_case c = tiny(modes[m].mode, 5, modes[m].causal);
                c.batch = 4, c.lengths = mixed, c.cfg.d_head = d_heads[h];
                setenv("LINFORMER_KERNEL_PARAMS", params[p], 1);
                const double e = lf_case_run(ctx, &c), d = lf_case_batch_vs_alone(ctx, &c);
                unsetenv("LINFORMER_KERNEL_PARAMS");
                const int dv = d_heads[h] % 4 == 0 ? d_heads[h] / 4 : d_heads[h];
                const char *asked = strstr(params[p], "ds=");
                int ds = asked ? atoi(asked + 3) : d_heads[h] >= 256 ? 4 : d_heads[h] >= 128 ? 2 : 1;
                while (dv % ds) ds /= 2;
                char what[96], dh_opt[16], ds_opt[16];
                snprintf(what, sizeof what, "d_head %d, mode %s, causal %d, %s", d_heads[h],
                         lf_mode_name(c.cfg.mode), modes[m].causal, params[p]);
                cr_expect_leq(e, TOL, "%s: relative error %.3g", what, e);
                cr_expect_leq(d, 1e-6, "%s: a sequence in a batch differs from itself alone by %.3g", what, d);
                snprintf(dh_opt, sizeof dh_opt, "-DDH=%d ", d_heads[h]);
                snprintf(ds_opt, sizeof ds_opt, "-DDS=%d", ds);
                if (ds > 1)
                    cr_expect(lf_test_built_with(ctx, "attention.cl", dh_opt, ds_opt), "%s: no kernel built with %s",
                              what, ds_opt);
            }
}
