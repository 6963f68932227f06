/* test_attention.c - every mode and variant against the double-precision reference. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_case.h"
#include "plan.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(attention, .init = setup, .fini = teardown, .timeout = 600);

static lf_attention_config config(int d_model, int heads, int n_max, int k, lf_mode mode)
{
    lf_attention_config c;
    lf_attention_config_init(&c, d_model, heads, n_max, k);
    c.mode = mode;
    return c;
}

static void expect_exact(lf_case *c, const char *what)
{
    double e = lf_case_run(ctx, c);
    cr_expect_leq(e, TOL, "%s: relative error %.3g (mode %s, d_model %d, heads %d, d_head %d, n %d, k %d, batch %d)",
                  what, e, lf_mode_name(c->cfg.mode), c->cfg.d_model, c->cfg.heads, c->cfg.d_head, c->n, c->cfg.k,
                  c->batch);
}

Test(attention, modes_over_lengths)
{
    static const int ns[] = {1, 7, 64, 173};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            lf_case c = {config(48, 2, 200, 16, (lf_mode)m), 2, ns[i], NULL};
            expect_exact(&c, "modes over lengths");
        }
}

Test(attention, head_widths_and_counts)
{
    /* d_head not dividing any tile; heads 1..16; d_head set apart from d_model */
    static const struct { int d_model, heads, d_head; } shapes[] = {
        {8, 1, 0}, {48, 2, 24}, {64, 1, 64}, {160, 2, 80}, {40, 16, 8}, {30, 4, 24}};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            lf_case c = {config(shapes[i].d_model, shapes[i].heads, 80, 16, (lf_mode)m), 1, 61, NULL};
            c.cfg.d_head = shapes[i].d_head;
            expect_exact(&c, "head widths");
        }
}

Test(attention, compressed_lengths)
{
    /* k = 1, k < n, k > n (more compressed rows than the sequence has) */
    static const int ks[] = {1, 16, 64, 300};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int path = LF_PATH_FUSED; path <= LF_PATH_GEMM; path++) {
            lf_case c = {config(48, 3, 200, ks[i], LF_MODE_LINFORMER), 2, 173, NULL};
            c.cfg.path = (lf_path)path;
            expect_exact(&c, path == LF_PATH_FUSED ? "k, fused path" : "k, gemm path");
        }
}

Test(attention, sharing_and_projection_kinds)
{
    static const lf_proj_kind kinds[] = {LF_PROJ_LEARNED, LF_PROJ_RANDOM, LF_PROJ_MEAN_POOL, LF_PROJ_MAX_POOL,
                                         LF_PROJ_CONV};
    static const int32_t lens[] = {57, 0, 13};
    for (int s = LF_SHARE_NONE; s <= LF_SHARE_LAYERWISE; s++)
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            if (s == LF_SHARE_LAYERWISE && kinds[i] != LF_PROJ_LEARNED && kinds[i] != LF_PROJ_RANDOM) continue;
            lf_case c = {config(48, 2, 64, 8, LF_MODE_LINFORMER), 3, 57, lens};
            c.cfg.sharing = (lf_sharing)s;
            c.cfg.proj_kind = kinds[i];
            c.cfg.seed = 1234 + s;
            char what[64];
            snprintf(what, sizeof what, "sharing %d, projection kind %d", s, (int)kinds[i]);
            expect_exact(&c, what);
        }
}

Test(attention, input_side_projection_share_kv_and_one_kv_head)
{
    static const int32_t lens[] = {40, 7};
    for (int pos = LF_POSITION_KV; pos <= LF_POSITION_INPUT; pos++)
        for (int share_kv = 0; share_kv <= 1; share_kv++)
            for (int kvh = 0; kvh <= 1; kvh++) {
                lf_case c = {config(64, 4, 50, 12, LF_MODE_LINFORMER), 2, 40, lens};
                c.cfg.position = (lf_position)pos;
                c.cfg.share_kv = share_kv;
                c.cfg.kv_heads = kvh; /* 0 = all heads, 1 = one key/value head */
                expect_exact(&c, "position / share_kv / one kv head");
            }
    /* the exact modes with one key/value head */
    for (int m = LF_MODE_DENSE; m <= LF_MODE_FLASH; m++) {
        lf_case c = {config(64, 4, 50, 0, (lf_mode)m), 2, 40, lens};
        c.cfg.kv_heads = 1;
        expect_exact(&c, "exact modes, one kv head");
    }
}

Test(attention, biases_and_scale)
{
    for (int mask = 0; mask < 16; mask += 5) {
        lf_case c = {config(32, 2, 40, 8, LF_MODE_LINFORMER), 1, 33, NULL};
        c.cfg.bias_q = mask & 1, c.cfg.bias_k = (mask >> 1) & 1, c.cfg.bias_v = (mask >> 2) & 1;
        c.cfg.bias_out = (mask >> 3) & 1;
        c.cfg.scale = mask ? 0.3f : 0.0f;
        expect_exact(&c, "biases and scale");
    }
}

Test(attention, mixed_lengths_match_alone)
{
    static const int32_t lens[] = {173, 1, 0, 100};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_case c = {config(48, 2, 256, 32, (lf_mode)m), 4, 173, lens};
        expect_exact(&c, "mixed lengths");
        double d = lf_case_batch_vs_alone(ctx, &c);
        cr_expect_leq(d, 1e-6, "mode %s: a sequence in a batch differs from itself alone by %.3g",
                      lf_mode_name(c.cfg.mode), d);
    }
}

Test(attention, long_sequence)
{
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_case c = {config(64, 2, 512, 64, (lf_mode)m), 1, 512, NULL};
        expect_exact(&c, "n = 512");
    }
}

Test(attention, automatic_path_is_resolved_at_create)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    static const struct { int d_model, heads, k; } shapes[] = {{64, 1, 16}, {64, 1, 4096}, {300, 1, 8}};
    for (int cpu = 0; cpu <= 1; cpu++) /* either variant of the attention kernel, on any device */
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            setenv("LINFORMER_KERNEL_PARAMS", cpu ? "variant=cpu" : "variant=gpu", 1);
            lf_attention_config c = config(shapes[i].d_model, shapes[i].heads, 4096, shapes[i].k, LF_MODE_LINFORMER);
            lf_attention *layer = NULL;
            cr_assert_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
            lf_attention_config got;
            cr_assert_eq(lf_attention_config_get(layer, &got), LF_OK);
            /* fused when d_head <= 256 and the variant is the CPU one (it keeps
             * nothing in local memory) or a head's k keys and values fit the
             * local memory */
            const int dh = shapes[i].d_model / shapes[i].heads;
            const bool fits = dh <= 256 && (cpu || 2ull * shapes[i].k * dh * sizeof(float) <= info.local_mem_bytes);
            cr_expect_eq(got.path, fits ? LF_PATH_FUSED : LF_PATH_GEMM,
                         "variant %s, d_head %d, k %d, local memory %llu", cpu ? "cpu" : "gpu", dh, shapes[i].k,
                         (unsigned long long)info.local_mem_bytes);
            lf_attention_free(layer);
        }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* The plan's order of the key/value side for c on this device: true when the
 * input is compressed first with the biases through E's row sums. */
static bool plan_input_first(const lf_attention_config *c)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    lf_plan plan;
    char msg[256];
    cr_assert_eq(lf__plan_resolve(c, &info, c->sharing == LF_SHARE_LAYERWISE, &plan, msg, sizeof msg), LF_OK, "%s",
                 msg);
    cr_assert(!plan.bias_row_sums || plan.input_side);
    return plan.bias_row_sums;
}

/* Both orders of evaluation, forced, on every sharing mode where one E serves
 * every head: mixed lengths with 0 and 1, biases on and off, share_kv, one
 * key/value head, k below and above n. */
Test(attention, both_orders_of_evaluation)
{
    static const char *orders[] = {"project-first", "input-first"};
    static const int32_t lens[] = {37, 0, 1, 20};
    static const int ks[] = {12, 45};
    for (int o = 0; o < 2; o++) {
        cr_assert_eq(setenv("LINFORMER_ORDER", orders[o], 1), 0);
        for (int s = LF_SHARE_HEADWISE; s <= LF_SHARE_LAYERWISE; s++)
            for (int variant = 0; variant < 16; variant++) {
                lf_case c = {config(48, 4, 50, ks[variant & 1], LF_MODE_LINFORMER), 4, 37, lens};
                c.cfg.sharing = (lf_sharing)s;
                c.cfg.share_kv = (variant >> 1) & 1;
                c.cfg.kv_heads = (variant >> 2) & 1;
                c.cfg.bias_q = c.cfg.bias_k = c.cfg.bias_out = (variant >> 3) & 1;
                c.cfg.bias_v = ((variant >> 3) ^ variant) & 1; /* also bk without bv and bv without bk */
                c.cfg.seed = 99 + variant;
                cr_expect_eq(plan_input_first(&c.cfg), o == 1, "%s was not the plan's order", orders[o]);
                char what[96];
                snprintf(what, sizeof what, "%s, sharing %d, share_kv %d, kv_heads %d, bk %d bv %d, k %d", orders[o], s,
                         c.cfg.share_kv, c.cfg.kv_heads, c.cfg.bias_k, c.cfg.bias_v, c.cfg.k);
                expect_exact(&c, what);
                if (variant & 1) continue;
                /* padded rows never read: alone, a sequence differs by the rounding of the
                 * host BLAS's batch-sized Wk GEMM at most (one read padded row: far more) */
                double d = lf_case_batch_vs_alone(ctx, &c);
                cr_expect_leq(d, 1e-5, "%s: a sequence in a batch differs from itself alone by %.3g", what, d);
            }
    }
    unsetenv("LINFORMER_ORDER");
}

/* Where the input-first order is not exact, forcing it changes nothing. */
static void expect_project_first_forced(lf_attention_config c, const char *what)
{
    cr_assert_eq(setenv("LINFORMER_ORDER", "input-first", 1), 0);
    cr_expect(!plan_input_first(&c), "%s: evaluated input first", what);
    unsetenv("LINFORMER_ORDER");
}

Test(attention, order_is_chosen_from_the_sizes)
{
    unsetenv("LINFORMER_ORDER");
    /* lucidrains' default layer: K and V from E x cost 2.4 GFLOP at n 4096, against 6.4 projected first */
    lf_attention_config c = config(512, 8, 4096, 256, LF_MODE_LINFORMER);
    cr_expect(plan_input_first(&c), "d_model 512, 8 heads, k 256, n 4096: input first is cheaper");
    c.share_kv = 1;
    cr_expect(plan_input_first(&c), "share_kv: input first is cheaper");
    c.share_kv = 0, c.kv_heads = 1; /* 64 key/value columns: projecting n rows costs less than E x */
    cr_expect(!plan_input_first(&c), "one key/value head: projecting first is cheaper");
    c = config(512, 8, 64, 256, LF_MODE_LINFORMER); /* k > max_seq_len */
    cr_expect(!plan_input_first(&c), "k above max_seq_len: projecting first is cheaper");

    c = config(512, 8, 4096, 256, LF_MODE_LINFORMER);
    c.sharing = LF_SHARE_NONE;
    expect_project_first_forced(c, "one E per head");
    c.sharing = LF_SHARE_HEADWISE, c.proj_kind = LF_PROJ_MEAN_POOL;
    expect_project_first_forced(c, "mean pooling");
    c.proj_kind = LF_PROJ_CONV, c.causal = 1;
    expect_project_first_forced(c, "causal");
    c.proj_kind = LF_PROJ_LEARNED, c.causal = 0, c.position = LF_POSITION_INPUT;
    expect_project_first_forced(c, "LF_POSITION_INPUT (biases unprojected, never through the row sums)");
}

Test(attention, order_override_is_checked)
{
    lf_attention_config c = config(48, 2, 50, 8, LF_MODE_LINFORMER);
    lf_attention *layer = NULL;
    cr_assert_eq(setenv("LINFORMER_ORDER", "sideways", 1), 0);
    cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "LINFORMER_ORDER") != NULL, "%s", lf_context_last_error(ctx));
    cr_expect_null(layer);
    /* a causal learned projection stays refused, whatever the order asked for */
    cr_assert_eq(setenv("LINFORMER_ORDER", "input-first", 1), 0);
    c.causal = 1;
    cr_expect_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_ERR_UNSUPPORTED);
    cr_expect(strstr(lf_context_last_error(ctx), "causal") != NULL, "%s", lf_context_last_error(ctx));
    unsetenv("LINFORMER_ORDER");
}
