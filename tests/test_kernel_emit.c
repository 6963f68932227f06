/*
 * test_kernel_emit.c - the programs the library lists for a device without
 * opening it (lf_kernel_builds, `linformer kernels --emit`) are those it
 * builds there: on this device in the GPU variant (LINFORMER_KERNEL_PARAMS
 * variant=gpu), every program the layers built is in the list of this
 * device's description, with the same build options; a profile's list takes
 * its local memory into the tiles; the program writes each source and its
 * options, and refuses bad arguments naming them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_cache.h"
#include "layer_case.h"
#include "plan.h"
#include "runtime.h"

#define MAX_BUILDS 64

TestSuite(kernel_emit, .timeout = 600);

typedef struct {
    lf_context *ctx;
    const lf_kernel_build *list;
    size_t count;
    int built, files; /* programs built; bits of attention.cl, softmax.cl, seq_project.cl among them */
} lf_seen;

/* A program built on the context: listed, with the options it was built with. */
static void check_built(void *user, const char *file, const char *options)
{
    lf_seen *s = user;
    static const char *const wanted[] = {"attention.cl", "softmax.cl", "seq_project.cl"};
    char full[512];
    lf__build_options(s->ctx, options, full, sizeof full);
    size_t i = 0;
    while (i < s->count && (strcmp(s->list[i].file, file) != 0 || strcmp(s->list[i].options, options) != 0)) i++;
    cr_expect_lt(i, s->count, "built %s with \"%s\", which the list lacks", file, options);
    if (i < s->count) cr_expect_str_eq(s->list[i].build_options, full, "%s %s", file, options);
    s->built++;
    for (int w = 0; w < 3; w++) s->files |= !strcmp(file, wanted[w]) << w;
}

static void run_layer(lf_context *ctx, lf_mode mode, bool causal, lf_proj_kind proj, int k, int heads)
{
    lf_case c = {.batch = 2, .n = 24, .lengths = NULL};
    lf_attention_config_init(&c.cfg, 128, heads, 24, k); /* d_head 128 / heads */
    c.cfg.mode = mode;
    c.cfg.causal = causal;
    c.cfg.proj_kind = proj;
    cr_assert_lt(lf_case_run(ctx, &c), 1e-4, "mode %d causal %d: %s", (int)mode, causal, lf_context_last_error(ctx));
}

Test(kernel_emit, what_the_layers_build_in_the_gpu_variant_is_listed)
{
    setenv("LINFORMER_KERNEL_PARAMS", "variant=gpu", 1);
    lf_context *ctx = lf_test_context();
    run_layer(ctx, LF_MODE_LINFORMER, false, LF_PROJ_LEARNED, 8, 2);  /* fused: attention_tiled */
    run_layer(ctx, LF_MODE_LINFORMER, true, LF_PROJ_MEAN_POOL, 6, 2); /* causal, seq_project_window */
    run_layer(ctx, LF_MODE_LINFORMER, false, LF_PROJ_MAX_POOL, 6, 2); /* max pooling */
    run_layer(ctx, LF_MODE_FLASH, true, LF_PROJ_LEARNED, 0, 2);       /* causal flash */
    run_layer(ctx, LF_MODE_FLASH, false, LF_PROJ_LEARNED, 0, 1);      /* d_head 128: split in two (DS 2) */
    run_layer(ctx, LF_MODE_DENSE, false, LF_PROJ_LEARNED, 0, 2);      /* softmax_rows */
    char version[128] = "";
    clGetDeviceInfo(ctx->device, CL_DEVICE_OPENCL_C_VERSION, sizeof version, version, NULL);
    lf_kernel_build list[MAX_BUILDS];
    size_t count = 0;
    char msg[512] = "";
    cr_assert_eq(lf__kernel_list(&ctx->info, version, list, MAX_BUILDS, &count, msg, sizeof msg), LF_OK, "%s", msg);
    cr_assert_leq(count, MAX_BUILDS);
    lf_seen seen = {ctx, list, count, 0, 0};
    lf__programs_each(ctx, check_built, &seen);
    cr_expect_eq(seen.files, 7, "the layers built attention.cl, softmax.cl and seq_project.cl (mask %d)", seen.files);
    cr_expect_geq(seen.built, 5, "%d programs built", seen.built);
    lf_context_free(ctx);
    unsetenv("LINFORMER_KERNEL_PARAMS");
}

/* The profile's local memory reaches the tiles: at d_head 128, split across
 * two work-items of a query, the 2 TK dh floats of a tile and the 64 x 2 TK
 * partial scores keep within half of NVIDIA's 48 KiB (TK 16), of Intel's Max
 * 128 KiB (TK 32); at d_head 256 (DS 4) within half of AMD's 64 KiB (TK 8);
 * every program at OpenCL C 1.2, the groups sized. */
static void expect_build(const char *profile, const char *file, const char *options)
{
    lf_kernel_build list[MAX_BUILDS];
    size_t count = 0;
    char err[512] = "";
    cr_assert_eq(lf_kernel_builds(profile, list, MAX_BUILDS, &count, err, sizeof err), LF_OK, "%s", err);
    bool found = false;
    for (size_t i = 0; i < count; i++) {
        cr_expect_eq(strncmp(list[i].build_options, "-cl-std=CL1.2 ", 14), 0, "%s", list[i].build_options);
        found = found || (!strcmp(list[i].file, file) && !strcmp(list[i].options, options));
    }
    cr_expect(found, "%s: no %s with \"%s\"", profile, file, options);
}

Test(kernel_emit, a_profile_takes_its_tiles_from_its_local_memory)
{
    unsetenv("LINFORMER_KERNEL_PARAMS");
    expect_build("nvidia-h200", "attention.cl", "-DDH=128 -DTK=16 -DVW=4 -DCAUSAL=0 -DQB=1 -DQV=1 -DDS=2 -DTQ=64");
    expect_build("intel-max-1100", "attention.cl", "-DDH=128 -DTK=32 -DVW=4 -DCAUSAL=0 -DQB=1 -DQV=1 -DDS=2 -DTQ=64");
    expect_build("amd-mi210", "attention.cl", "-DDH=256 -DTK=8 -DVW=4 -DCAUSAL=1 -DQB=1 -DQV=1 -DDS=4 -DTQ=64");
    expect_build("nvidia-h200", "attention.cl", "-DDH=64 -DTK=32 -DVW=4 -DCAUSAL=0 -DQB=1 -DQV=1 -DTQ=64");
    expect_build("amd-mi210", "softmax.cl", " -DWG=256");
    size_t count = 1;
    char err[512] = "";
    cr_expect_eq(lf_kernel_builds("nope", NULL, 0, &count, err, sizeof err), LF_ERR_ARGUMENT);
    cr_expect(strstr(err, "unknown device profile \"nope\"") && strstr(err, "nvidia-h200"), "%s", err);
}

/* The program writes each program's source (its prelude first) and a
 * manifest line with its options; bad arguments are refused, named. */
Test(kernel_emit, the_program_writes_every_source_and_refuses_bad_arguments)
{
    char dir[64], args[512], log[4096] = "", path[256];
    lf_test_make_dir(dir, "kernel-emit");
    snprintf(args, sizeof args, "kernels --emit %s/out --device-profile nvidia-h200", dir);
    cr_assert_eq(lf_test_run_tool(args, log, sizeof log), 0, "%s", log);
    lf_kernel_build list[MAX_BUILDS];
    size_t count = 0;
    cr_assert_eq(lf_kernel_builds("nvidia-h200", list, MAX_BUILDS, &count, NULL, 0), LF_OK);
    snprintf(path, sizeof path, "%s/out/kernels.tsv", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[1024];
    size_t n = 0;
    for (; fgets(line, sizeof line, f); n++) {
        cr_assert_lt(n, count);
        char want[1024], name[64];
        snprintf(name, sizeof name, "%02zu-%.31s", n, list[n].file);
        snprintf(want, sizeof want, "%s\tnvidia\t49152\t%s\t%s\n", name, list[n].kernels, list[n].build_options);
        cr_expect_str_eq(line, want);
        char *text = NULL, *emitted = NULL;
        size_t size = 0, emitted_size = 0;
        cr_assert_eq(lf_kernel_source(list[n].file, &text, &size, NULL, 0), LF_OK);
        snprintf(path, sizeof path, "%s/out/%s", dir, name);
        cr_assert_eq(lf__read_file(path, true, &emitted, &emitted_size), LF_OK, "%s", path);
        cr_expect(emitted_size == size && !memcmp(emitted, text, size), "%s differs from the library's source", path);
        free(text);
        free(emitted);
    }
    fclose(f);
    cr_expect_eq(n, count);

    static const struct {
        const char *args, *says;
        int status;
    } bad[] = {
        {"kernels --emit %s/x --device-profile nope", "unknown device profile \"nope\"", 2},
        {"kernels --device-profile nvidia-h200", "--emit DIR is missing", 2},
        {"kernels --emit %s/x", "--device-profile NAME is missing", 2},
        {"kernels --emit %s/out/kernels.tsv/sub --device-profile amd-mi210", "cannot create the folder", 1},
        {"kernels --emit '' --device-profile amd-mi210", "--emit is empty", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, bad[i].args, dir);
        const int st = lf_test_run_tool(cmd, log, sizeof log);
        cr_expect_eq(st, bad[i].status, "%s: status %d: %s", cmd, st, log);
        cr_expect(strstr(log, bad[i].says), "%s: %s", cmd, log);
    }
    lf_test_remove_dir(dir);
}
