/*
 * test_kernel_params.c - the kernel parameters' table and its override
 * (host/kernel_params.h): the defaults by device type, the first matching
 * row, strict parsing with messages that name the key, and overrides that
 * change what a layer and a model run while their results stay exact.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_params.h"
#include "layer_case.h"
#include "model.h"

#define TOL 1e-5

/* The elementwise keys' defaults, the end of every default's printed form:
 * CPUs with 16-float vectors, with narrower ones, other devices. */
#define CPU_EW ",vw=16,run=16,elementwise_wg=1,split=0"
#define CPU8_EW ",vw=8,run=32,elementwise_wg=1,split=0"
#define GPU_EW ",vw=1,run=1,elementwise_wg=0,split=0"

static lf_context *ctx;
static void setup(void)
{
    unsetenv("LINFORMER_KERNEL_PARAMS");
    ctx = lf_test_context();
}
static void teardown(void) { lf_context_free(ctx); }
TestSuite(kernel_params, .init = setup, .fini = teardown, .timeout = 600);

/* The parameters of a device of this type and native float vector width. */
static lf_kernel_params params_of(lf_device_type type, unsigned width, const char *override)
{
    lf_device_info dev = {.type = type, .float_vector_width = width};
    snprintf(dev.vendor, sizeof dev.vendor, "Some Vendor");
    if (override) setenv("LINFORMER_KERNEL_PARAMS", override, 1);
    lf_kernel_params p;
    char msg[512] = "";
    cr_assert_eq(lf__kernel_params(&dev, &p, msg, sizeof msg), LF_OK, "%s: %s", override ? override : "", msg);
    unsetenv("LINFORMER_KERNEL_PARAMS");
    return p;
}

static char *formatted(const lf_kernel_params *p)
{
    static char text[256];
    lf__kernel_params_format(p, text, sizeof text);
    return text;
}

/* CPUs by their vector width (AVX-512's 16 floats, AVX2's 8, SSE's 4); every other type alike. */
Test(kernel_params, defaults_by_device_type_and_vector_width)
{
    static const struct { unsigned width; const char *want; } cpus[] = {
        {16, "variant=cpu,tk=32,tq=8,qb=16,qv=2,kb=8,ds=1,softmax_wg=256,layernorm_wg=128" CPU_EW},
        {32, "variant=cpu,tk=32,tq=8,qb=16,qv=2,kb=8,ds=1,softmax_wg=256,layernorm_wg=128" CPU_EW},
        {8, "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,softmax_wg=256,layernorm_wg=128" CPU8_EW},
        {4, "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,softmax_wg=256,layernorm_wg=128" CPU8_EW},
        {0, "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,softmax_wg=256,layernorm_wg=128" CPU8_EW}};
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        const lf_kernel_params cpu = params_of(LF_DEVICE_CPU, cpus[i].width, NULL);
        cr_expect_str_eq(formatted(&cpu), cpus[i].want, "width %u", cpus[i].width);
    }
    /* Intel's runtime below 16 floats keeps float16 elementwise runs; PoCL on an Intel CPU does not */
    static const struct { const char *vendor; unsigned width; const char *want; } vendors[] = {
        {"Intel(R) Corporation", 8, "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,"
                                    "softmax_wg=256,layernorm_wg=128" CPU_EW},
        {"Intel(R) Corporation", 16, "variant=cpu,tk=32,tq=8,qb=16,qv=2,kb=8,ds=1,"
                                     "softmax_wg=256,layernorm_wg=128" CPU_EW},
        {"GenuineIntel", 8, "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,softmax_wg=256,layernorm_wg=128" CPU8_EW}};
    for (size_t i = 0; i < sizeof vendors / sizeof vendors[0]; i++) {
        lf_device_info dev = {.type = LF_DEVICE_CPU, .float_vector_width = vendors[i].width};
        snprintf(dev.vendor, sizeof dev.vendor, "%s", vendors[i].vendor);
        lf_kernel_params p;
        char msg[512] = "";
        cr_assert_eq(lf__kernel_params(&dev, &p, msg, sizeof msg), LF_OK, "%s", msg);
        cr_expect_str_eq(formatted(&p), vendors[i].want, "%s, width %u", vendors[i].vendor, vendors[i].width);
        setenv("LINFORMER_KERNEL_PARAMS", "variant=cpu", 1); /* the variant's row for this device: its own */
        cr_assert_eq(lf__kernel_params(&dev, &p, msg, sizeof msg), LF_OK, "%s", msg);
        unsetenv("LINFORMER_KERNEL_PARAMS");
        cr_expect_str_eq(formatted(&p), vendors[i].want, "variant=cpu: %s, width %u", vendors[i].vendor,
                         vendors[i].width);
    }
    static const lf_device_type others[] = {LF_DEVICE_GPU, LF_DEVICE_ACCELERATOR, LF_DEVICE_OTHER};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        for (unsigned width = 1; width <= 16; width *= 4) {
            const lf_kernel_params p = params_of(others[i], width, ""); /* empty: no override */
            cr_expect_str_eq(formatted(&p),
                             "variant=gpu,tk=32,tq=64,qb=1,qv=1,kb=1,ds=0,softmax_wg=256,layernorm_wg=128" GPU_EW,
                             "type %d width %u", others[i], width);
        }
}

/* A vendor's row above its type's generic row serves that vendor only; a
 * row for wide vectors, devices at least that wide. */
Test(kernel_params, first_matching_row_serves_the_device)
{
    static const lf_kernel_params_row rows[] = {
        {LF_DEVICE_CPU, "intel", 0, {.variant = LF_VARIANT_CPU, .tile_keys = 1}},
        {LF_DEVICE_CPU, NULL, 16, {.variant = LF_VARIANT_CPU, .tile_keys = 4}},
        {LF_DEVICE_CPU, NULL, 0, {.variant = LF_VARIANT_CPU, .tile_keys = 2}},
        {LF_DEVICE_GPU | LF_DEVICE_ACCELERATOR, NULL, 0, {.variant = LF_VARIANT_GPU, .tile_keys = 3}}};
    static const struct { lf_device_type type; const char *vendor; unsigned width; int want; } cases[] = {
        {LF_DEVICE_CPU, "Intel(R) Corporation", 16, 1}, {LF_DEVICE_CPU, "The pocl project", 16, 4},
        {LF_DEVICE_CPU, "The pocl project", 32, 4},     {LF_DEVICE_CPU, "The pocl project", 8, 2},
        {LF_DEVICE_CPU, "AuthenticAMD", 15, 2},         {LF_DEVICE_GPU, "Intel(R) Corporation", 16, 3},
        {LF_DEVICE_ACCELERATOR, "", 1, 3},              {LF_DEVICE_OTHER, "x", 16, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lf_device_info dev = {.type = cases[i].type, .float_vector_width = cases[i].width};
        snprintf(dev.vendor, sizeof dev.vendor, "%s", cases[i].vendor);
        const lf_kernel_params *p = lf__kernel_params_match(rows, 4, &dev);
        cr_expect_eq(p ? p->tile_keys : 0, cases[i].want, "type %d vendor \"%s\" width %u", cases[i].type,
                     cases[i].vendor, cases[i].width);
    }
}

Test(kernel_params, override_sets_the_keys_it_names)
{
    static const struct { lf_device_type type; unsigned width; const char *text, *want; } cases[] = {
        {LF_DEVICE_CPU, 16, "tk=16", "variant=cpu,tk=16,tq=8,qb=16,qv=2,kb=8,ds=1,"
                                     "softmax_wg=256,layernorm_wg=128" CPU_EW},
        {LF_DEVICE_CPU, 8, "kb=5,qv=1", "variant=cpu,tk=32,tq=8,qb=8,qv=1,kb=5,ds=1,"
                                        "softmax_wg=256,layernorm_wg=128" CPU8_EW},
        {LF_DEVICE_CPU, 16, "variant=gpu",
         "variant=gpu,tk=32,tq=64,qb=1,qv=1,kb=1,ds=0,softmax_wg=256,layernorm_wg=128" GPU_EW},
        {LF_DEVICE_CPU, 8, "tq=32,variant=gpu",
         "variant=gpu,tk=32,tq=32,qb=1,qv=1,kb=1,ds=0,softmax_wg=256,layernorm_wg=128" GPU_EW},
        {LF_DEVICE_GPU, 16, "variant=cpu,qb=4,softmax_wg=5,layernorm_wg=3",
         "variant=cpu,tk=32,tq=8,qb=4,qv=2,kb=8,ds=1,softmax_wg=5,layernorm_wg=3" CPU_EW},
        {LF_DEVICE_GPU, 4, "variant=cpu", "variant=cpu,tk=32,tq=8,qb=8,qv=3,kb=4,ds=1,"
                           "softmax_wg=256,layernorm_wg=128" CPU8_EW},
        {LF_DEVICE_GPU, 16,
         "variant=gpu,tk=1024,tq=4096,qb=1,qv=1,kb=1,ds=16,"
         "softmax_wg=1,layernorm_wg=4096,vw=16,run=64,elementwise_wg=4096,"
         "split=16",
         "variant=gpu,tk=1024,tq=4096,qb=1,qv=1,kb=1,ds=16,"
         "softmax_wg=1,layernorm_wg=4096,vw=16,run=64,elementwise_wg=4096,"
         "split=16"},
        {LF_DEVICE_CPU, 16, "elementwise_wg=0,vw=2",
         "variant=cpu,tk=32,tq=8,qb=16,qv=2,kb=8,ds=1,"
         "softmax_wg=256,layernorm_wg=128,vw=2,run=16,elementwise_wg=0,split=0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const lf_kernel_params p = params_of(cases[i].type, cases[i].width, cases[i].text);
        cr_expect_str_eq(formatted(&p), cases[i].want, "%s", cases[i].text);
        /* the printed form is an override that gives the same, on any device */
        char again[256];
        snprintf(again, sizeof again, "%s", formatted(&p));
        const lf_kernel_params q =
            params_of(cases[i].type == LF_DEVICE_CPU ? LF_DEVICE_GPU : LF_DEVICE_CPU, 24 - cases[i].width, again);
        cr_expect_str_eq(formatted(&q), again);
    }
}

Test(kernel_params, bad_overrides_are_refused_by_name)
{
    static const char *const cases[][2] = {
        {"tk=0", "tk must be an integer from 1 to 1024, got \"0\""},
        {"tk=1025", "tk must be an integer from 1 to 1024, got \"1025\""},
        {"tq=abc", "tq must be an integer from 1 to 4096, got \"abc\""},
        {"tq=", "tq must be an integer from 1 to 4096, got \"\""},
        {"tk=16x", "got \"16x\""}, {"tk=+4", "got \"+4\""}, {"tk= 4", "got \" 4\""}, {"tk=-4", "got \"-4\""},
        {"softmax_wg=99999999999999999999999999999999999999", "got \"99999999999999999999999999999999999999\""},
        {"foo=1",
         "unknown key \"foo\"; the keys are variant, tk, tq, qb, qv, kb, ds, softmax_wg, layernorm_wg, vw, run, "
         "elementwise_wg and split"},
        {"TK=8", "unknown key \"TK\""}, {"variant=GPU", "variant must be cpu or gpu, got \"GPU\""},
        {"variant=", "variant must be cpu or gpu, got \"\""}, {"tk=8,tk=8", "tk is given twice"},
        {"tk=8,", "an empty entry"}, {",tk=8", "an empty entry"}, {"tk", "\"tk\" is not key=value"},
        {"variant=gpu,qb=16", "variant=gpu takes qb=1, got qb=16"},
        {"variant=cpu,qb=1", "variant=cpu takes qb=2, 4, 8 or 16, got qb=1"},
        {"qb=3", "variant=cpu takes qb=2, 4, 8 or 16, got qb=3"},
        {"variant=gpu,qv=2", "variant=gpu takes qv=1, got qv=2"}, {"qv=5", "qv must be an integer from 1 to 4"},
        {"qv=0", "qv must be an integer from 1 to 4"}, {"kb=0", "kb must be an integer from 1 to 16, got \"0\""},
        {"kb=17", "kb must be an integer from 1 to 16"}, {"variant=gpu,kb=4", "variant=gpu takes kb=1, got kb=4"},
        {"vw=3", "vw must be 1, 2, 4, 8 or 16, got vw=3"}, {"vw=32", "vw must be an integer from 1 to 16"},
        {"run=0", "run must be an integer from 1 to 64"}, {"elementwise_wg=-1", "got \"-1\""},
        {"split=17", "split must be an integer from 0 to 16, got \"17\""},
        {"ds=17", "ds must be an integer from 0 to 16, got \"17\""},
        {"variant=gpu,ds=3", "ds must be 0, 1, 2, 4, 8 or 16, got ds=3"},
        {"variant=gpu,ds=12", "ds must be 0, 1, 2, 4, 8 or 16, got ds=12"},
        {"ds=2", "variant=cpu takes ds=1, got ds=2"}, {"variant=cpu,ds=0", "variant=cpu takes ds=1, got ds=0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const lf_device_info dev = {.type = LF_DEVICE_CPU};
        setenv("LINFORMER_KERNEL_PARAMS", cases[i][0], 1);
        lf_kernel_params p = {.tile_keys = -7};
        char msg[512] = "";
        cr_expect_eq(lf__kernel_params(&dev, &p, msg, sizeof msg), LF_ERR_ARGUMENT, "%s", cases[i][0]);
        cr_expect(strncmp(msg, "LINFORMER_KERNEL_PARAMS: ", 25) == 0 && strstr(msg, cases[i][1]),
                  "%s: message \"%s\"", cases[i][0], msg);
        lf_kernel_params q = {.tile_keys = -7};
        cr_expect_eq(lf__kernel_params_parse(cases[i][0], &dev, &q, msg, sizeof msg), LF_ERR_ARGUMENT);
        cr_expect_eq(q.tile_keys, -7, "%s: a refused override changed the parameters", cases[i][0]);
    }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* The variable the table replaced is refused with the new spelling, not silently ignored. */
Test(kernel_params, the_retired_variant_variable_is_refused)
{
    const lf_device_info dev = {.type = LF_DEVICE_CPU};
    setenv("LINFORMER_KERNEL_VARIANT", "gpu", 1);
    lf_kernel_params p;
    char msg[512] = "";
    const lf_status st = lf__kernel_params(&dev, &p, msg, sizeof msg);
    unsetenv("LINFORMER_KERNEL_VARIANT");
    cr_expect_eq(st, LF_ERR_ARGUMENT);
    cr_expect(strstr(msg, "LINFORMER_KERNEL_VARIANT is no longer read: set LINFORMER_KERNEL_PARAMS=variant=gpu"),
              "message \"%s\"", msg);
}

/* A bad override stops a layer, a model and the query of the parameters, each with its message. */
Test(kernel_params, bad_override_stops_layers_and_models)
{
    setenv("LINFORMER_KERNEL_PARAMS", "variant=gpu,bogus=1", 1);
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 16, 2, 20, 5);
    lf_attention *layer = NULL;
    cr_expect_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_ERR_ARGUMENT);
    cr_expect_null(layer);
    cr_expect(strstr(lf_context_last_error(ctx), "LINFORMER_KERNEL_PARAMS: unknown key \"bogus\""), "%s",
              lf_context_last_error(ctx));
    lf_model_config mc;
    lf_model_config_init(&mc, LF_MODEL_ENCODER, 1, 16, 32, 0);
    lf_model *model = NULL;
    cr_expect_eq(lf_model_create(ctx, &mc, &cfg, &model), LF_ERR_ARGUMENT);
    cr_expect_null(model);
    cr_expect(strstr(lf_context_last_error(ctx), "unknown key \"bogus\""), "%s", lf_context_last_error(ctx));
    char text[128];
    cr_expect_eq(lf_context_kernel_params(ctx, text, sizeof text), LF_ERR_ARGUMENT);
    cr_expect(strstr(lf_context_last_error(ctx), "bogus"), "%s", lf_context_last_error(ctx));
    unsetenv("LINFORMER_KERNEL_PARAMS");
    cr_expect_eq(lf_context_kernel_params(ctx, text, 0), LF_ERR_ARGUMENT);
    cr_expect_eq(lf_context_kernel_params(ctx, text, sizeof text), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect(strncmp(text, "variant=", 8) == 0, "%s", text);
}

/* The device's local memory lowers TK; the variant and QB are as asked. */
Test(kernel_params, device_limits_lower_the_tiles)
{
    const lf_device_info dev = {.type = LF_DEVICE_GPU, .local_mem_bytes = 32768};
    const lf_kernel_params kp = {.variant = LF_VARIANT_GPU, .tile_keys = 1024, .tile_queries = 100, .query_block = 1};
    const lf_attention_tiles t = lf__attention_tiles(&kp, 64, &dev);
    cr_expect_eq(t.tile_keys, 32, "TK %d: 2 TK 64 floats must keep within 16 KiB", t.tile_keys);
    cr_expect_eq(t.tile_queries, 100);
    cr_expect_eq(t.query_block, 1);
}

/* DS: the table's 0 takes DH / 64 on the GPU variant, at least 1 and a power
 * of two; DS, the table's or one asked for, is lowered until it divides the
 * row's DH / VW vectors (VW 4 where it divides DH, else 1); the CPU variant
 * takes 1. */
Test(kernel_params, d_split_follows_the_head_width)
{
    const lf_device_info dev = {.type = LF_DEVICE_GPU, .local_mem_bytes = 49152};
    static const struct { int asked, dh, want; } cases[] = {
        {0, 16, 1}, {0, 64, 1},  {0, 127, 1}, {0, 128, 2},  {0, 192, 2}, {0, 255, 1}, {0, 252, 1}, {0, 248, 2},
        {0, 256, 4}, {0, 132, 1}, {8, 24, 2},  {16, 256, 16}, {2, 5, 1},   {8, 96, 8},  {4, 40, 2}, {1, 256, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lf_kernel_params kp = params_of(LF_DEVICE_GPU, 1, NULL);
        cr_expect_eq(kp.d_split, 0, "the GPU row's ds");
        kp.d_split = cases[i].asked;
        const lf_attention_tiles t = lf__attention_tiles(&kp, cases[i].dh, &dev);
        cr_expect_eq(t.d_split, cases[i].want, "ds=%d at d_head %d: DS %d", cases[i].asked, cases[i].dh, t.d_split);
    }
    const lf_kernel_params cpu = params_of(LF_DEVICE_CPU, 16, NULL);
    cr_expect_eq(lf__attention_tiles(&cpu, 256, &dev).d_split, 1, "the CPU variant splits no row");
}

/* Either variant, with odd tiles and groups, on this device: the plan takes
 * them and the layer's output stays exact. */
Test(kernel_params, override_changes_what_a_layer_runs)
{
    static const struct { const char *text; int tk, qb, kb; size_t tq, softmax; } cases[] = {
        {"variant=cpu,tk=5,tq=3,qb=4,qv=2,kb=3,softmax_wg=7", 5, 4, 3, 3, 7},
        {"variant=gpu,tk=7,tq=5,softmax_wg=3", 7, 1, 1, 5, 3}};
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int path = LF_PATH_FUSED; path <= LF_PATH_GEMM; path++) {
            setenv("LINFORMER_KERNEL_PARAMS", cases[i].text, 1);
            lf_case c = {.batch = 2, .n = 13, .lengths = (const int32_t[]){13, 6}};
            lf_attention_config_init(&c.cfg, 24, 3, 20, 5);
            c.cfg.path = (lf_path)path;
            lf_plan plan;
            char msg[512] = "";
            cr_assert_eq(lf__plan_resolve(&c.cfg, &info, false, &plan, msg, sizeof msg), LF_OK, "%s", msg);
            cr_expect(plan.tiles.tile_keys == cases[i].tk && plan.tiles.query_block == cases[i].qb &&
                          plan.tiles.key_block == cases[i].kb && plan.tiles.tile_queries == cases[i].tq &&
                          plan.params.softmax_group == (int)cases[i].softmax,
                      "%s: the plan took TK %d, QB %d, KB %d, TQ %zu, WG %d", cases[i].text, plan.tiles.tile_keys,
                      plan.tiles.query_block, plan.tiles.key_block, plan.tiles.tile_queries, plan.params.softmax_group);
            const double e = lf_case_run(ctx, &c);
            cr_expect_leq(e, TOL, "%s, path %d: relative error %.3g", cases[i].text, path, e);
        }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* The largest groups the override takes, with wide heads: a CPU runtime
 * keeps a group's private arrays on one thread's stack (both crashed at 8 MiB
 * of them), so the launch lowers TQ there; the output stays exact. */
Test(kernel_params, the_largest_groups_run_with_wide_heads)
{
    static const char *texts[] = {"variant=cpu,tq=4096", "variant=gpu,tq=4096", "variant=cpu,tq=256"};
    static const int d_models[] = {64, 64, 256};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        setenv("LINFORMER_KERNEL_PARAMS", texts[i], 1);
        lf_case c = {.batch = 2, .n = 130, .lengths = (const int32_t[]){130, 77}};
        lf_attention_config_init(&c.cfg, d_models[i], 1, 130, 16);
        c.cfg.path = LF_PATH_FUSED;
        const double e = lf_case_run(ctx, &c);
        cr_expect_leq(e, TOL, "%s, d_head %d: relative error %.3g", texts[i], d_models[i], e);
    }
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* A model takes the override too: its LayerNorm's group and its layers' tiles. */
Test(kernel_params, override_reaches_a_model)
{
    setenv("LINFORMER_KERNEL_PARAMS", "variant=gpu,tk=6,layernorm_wg=3", 1);
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 16, 2, 20, 5);
    lf_model_config mc;
    lf_model_config_init(&mc, LF_MODEL_ENCODER, 2, 16, 32, 0);
    const lf_attention_config layers[2] = {cfg, cfg};
    lf_model *model = NULL;
    cr_assert_eq(lf_model_create(ctx, &mc, layers, &model), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect_eq(model->params.layernorm_group, 3);
    for (int i = 0; i < 2; i++) {
        const lf_attention_tiles *t = &model->layer[i].plan.tiles;
        cr_expect(t->tile_keys == 6 && t->query_block == 1, "layer %d: TK %d, QB %d", i, t->tile_keys, t->query_block);
    }
    lf_model_free(model);
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* A layer reads the parameters once, as it is created: its forwards (the
 * elementwise kernels' launches included) keep them after the variable
 * changes, here to a value that no longer parses. */
Test(kernel_params, a_layer_keeps_the_parameters_it_was_created_with)
{
    setenv("LINFORMER_KERNEL_PARAMS", "variant=cpu,vw=4,run=3", 1);
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 16, 2, 20, 5);
    cfg.bias_q = cfg.bias_out = 1;
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, 7), LF_OK, "%s", lf_context_last_error(ctx));
    setenv("LINFORMER_KERNEL_PARAMS", "vw=3", 1);
    float x[2 * 9 * 16], y[2 * 9 * 16];
    uint64_t rng = lf_test_seed();
    lf_test_fill(x, sizeof x / sizeof x[0], &rng, -1.0f, 1.0f);
    cr_expect_eq(lf_attention_forward(layer, x, y, 2, 9, (const int32_t[]){9, 4}), LF_OK, "%s",
                 lf_context_last_error(ctx));
    unsetenv("LINFORMER_KERNEL_PARAMS");
    lf_attention_free(layer);
}

/* `run --profile` prints the parameters a model ran with; under an override
 * of every key the output still matches PyTorch's (--check). */
Test(kernel_params, run_profile_prints_the_parameters)
{
    static const char *const overrides[] = {
        "variant=cpu,tk=5,tq=3,qb=8,qv=3,kb=3,ds=1,softmax_wg=7,layernorm_wg=3,vw=4,run=3,elementwise_wg=2,split=1",
        "variant=gpu,tk=7,tq=5,qb=1,qv=1,kb=1,ds=2,softmax_wg=3,layernorm_wg=5,vw=2,run=5,elementwise_wg=3,split=3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[1024], log[8192];
        snprintf(cmd, sizeof cmd, "LINFORMER_KERNEL_PARAMS=%s %s run --model %s/tests/data/models/encoder_short.model"
                                  ".safetensors --input %s/tests/data/models/encoder_short.io.safetensors --check "
                                  "--profile", overrides[i], LF_TOOL_PATH, LF_SOURCE_DIR, LF_SOURCE_DIR);
        const int rc = lf_test_system(cmd, log, sizeof log);
        cr_expect_eq(rc, 0, "%s: exit %d:\n%s", overrides[i], rc, log);
        char line[256];
        snprintf(line, sizeof line, "\nkernel parameters: %s\n", overrides[i]);
        cr_expect(strstr(log, line), "%s: no line \"%s\" in:\n%s", overrides[i], line + 1, log);
    }
    char cmd[1024], log[8192];
    snprintf(cmd, sizeof cmd, "LINFORMER_KERNEL_PARAMS=tk=0 %s run --model %s/tests/data/models/encoder_short.model"
                              ".safetensors --input %s/tests/data/models/encoder_short.io.safetensors --check",
             LF_TOOL_PATH, LF_SOURCE_DIR, LF_SOURCE_DIR);
    const int rc = lf_test_system(cmd, log, sizeof log);
    cr_expect(rc != 0 && strstr(log, "LINFORMER_KERNEL_PARAMS: tk must be an integer from 1 to 1024, got \"0\""),
              "a bad override: exit %d:\n%s", rc, log);
}
