/*
 * test_kernel_builds.c - every kernel of cl/, with each set of build options
 * its launcher uses, compiles from source without a warning or an error in
 * its build log (a warning a driver prints reaches the user's terminal), at
 * OpenCL C 1.2.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "kernel_params.h"
#include "runtime.h"

static lf_context *ctx;
static void setup(void)
{
    setenv("LINFORMER_CACHE_DIR", "off", 1); /* a cached binary has no log to read, */
    setenv("POCL_KERNEL_CACHE", "0", 1);     /* nor one that PoCL kept */
    ctx = lf_test_context();
}
static void teardown(void) { lf_context_free(ctx); }
TestSuite(kernel_builds, .init = setup, .fini = teardown, .timeout = 900);

static void build(const char *file, const char *kernel, const char *options)
{
    cl_kernel k = NULL;
    cr_assert_eq(lf__kernel(ctx, file, options, kernel, &k), LF_OK, "%s %s: %s", file, options,
                 lf_context_last_error(ctx));
}

/* The CPU variant's parameters on this device, as an override asks for them. */
static lf_kernel_params cpu_params(void)
{
    setenv("LINFORMER_KERNEL_PARAMS", "variant=cpu", 1);
    lf_kernel_params kp;
    char msg[512] = "";
    cr_assert_eq(lf__kernel_params(&ctx->info, &kp, msg, sizeof msg), LF_OK, "%s", msg);
    unsetenv("LINFORMER_KERNEL_PARAMS");
    return kp;
}

/* Each variant at its widths on this device: the GPU variant's one query
 * and one float, and a query split across work-items (DS); the CPU variant's own QB, QV, KB and vector width (which
 * keep to the device's vectors: a float16 is an ABI PoCL warns about on
 * AVX2), and a narrower QB with one vector and a KB not dividing TK. */
Test(kernel_builds, no_build_log_has_a_warning)
{
    const lf_kernel_params cpu = cpu_params();
    const int attention[][3] = {{1, 1, 1}, {cpu.query_block, cpu.query_vectors, cpu.key_block}, {2, 1, 3}};
    char opts[160];
    for (size_t a = 0; a < sizeof attention / sizeof attention[0]; a++)
        for (int causal = 0; causal <= 1; causal++)
            for (int dh = 5; dh <= 64; dh += 59) { /* vectors of 1 and of 4 */
                const int qb = attention[a][0], qv = attention[a][1], kb = attention[a][2];
                snprintf(opts, sizeof opts, "-DDH=%d -DTK=%d -DVW=%d -DCAUSAL=%d -DQB=%d -DQV=%d -DTQ=%d", dh,
                         qb > 1 ? 32 : 8, dh % 4 ? 1 : 4, causal, qb, qv, qb > 1 ? 8 : 64);
                if (qb > 1) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " -DKB=%d", kb);
                build("attention.cl", "attention_tiled", opts);
            }
    for (int causal = 0; causal <= 1; causal++)
        for (int dh = 6; dh <= 64; dh += 58) { /* d_head split: 3 floats or 4 float4s a work-item */
            snprintf(opts, sizeof opts, "-DDH=%d -DTK=8 -DVW=%d -DCAUSAL=%d -DQB=1 -DQV=1 -DDS=%d -DTQ=16", dh,
                     dh % 4 ? 1 : 4, causal, dh % 4 ? 2 : 4);
            build("attention.cl", "attention_tiled", opts);
        }
    build("softmax.cl", "softmax_rows", " -DWG=256");
    build("softmax.cl", "softmax_rows_cpu", "");
    build("layernorm.cl", "layernorm_rows", " -DWG=128");
    for (int vw = 4; vw <= 16; vw *= 2) { /* the CPU variant's vector widths */
        snprintf(opts, sizeof opts, "-DVW=%d", vw);
        build("layernorm.cl", "layernorm_rows_cpu", opts);
    }
    build("embedding.cl", "embed_tokens", "");
    for (int max = 0; max <= 1; max++) {
        snprintf(opts, sizeof opts, "-DWINDOW_MAX=%d", max);
        build("seq_project.cl", "seq_project_window", opts);
    }
    for (int act = 0; act <= 3; act++)
        for (int glu = 0; glu <= 1; glu++)
            for (int variant = 0; variant <= 1; variant++) { /* the GPU and the CPU variant */
                const int vw = variant ? cpu.vector_width : 1, run = variant ? cpu.vector_run : 1;
                snprintf(opts, sizeof opts, "-DACT=%d -DGLU=%d -DVW=%d -DRUN=%d", act, glu, vw, run);
                build("activation.cl", "bias_act", opts);
                if (act == 0 && !glu) build("activation.cl", "copy_floats", opts); /* lf_copy_rate's program */
            }
    cr_expect_eq(lf__programs_check_logs(ctx), LF_OK, "%s", lf_context_last_error(ctx));
}

/* The kernels are held to OpenCL C 1.2 on a device that compiles it, and the
 * option is part of what the disk cache keys on. */
Test(kernel_builds, built_as_opencl_c_1_2)
{
    char version[128] = "", opts[256];
    clGetDeviceInfo(ctx->device, CL_DEVICE_OPENCL_C_VERSION, sizeof version, version, NULL);
    lf__build_options(ctx, "-DX=1", opts, sizeof opts);
    int major = 0, minor = 0;
    cr_assert_eq(sscanf(version, "OpenCL C %d.%d", &major, &minor), 2, "%s", version);
    cr_expect_str_eq(opts, major * 10 + minor >= 12 ? "-cl-std=CL1.2 -DX=1" : "-DX=1", "%s: %s", version, opts);
}
