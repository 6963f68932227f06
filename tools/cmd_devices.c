/* cmd_devices.c - `linformer devices`: what OpenCL sees, and what a selector picks. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "gemm_yardstick.h"
#include "linformer.h"

static const char *type_name(lf_device_type t)
{
    switch (t) {
    case LF_DEVICE_GPU: return "GPU";
    case LF_DEVICE_CPU: return "CPU";
    case LF_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static void print_device(const lf_device_info *d, const char *mark)
{
    printf("%u:%u %s %s\n", d->platform_index, d->device_index, type_name(d->type), mark);
    printf("    platform        %s (%s)\n", d->platform_name, d->platform_version);
    printf("    device          %s\n", d->device_name);
    printf("    vendor          %s\n", d->vendor);
    printf("    driver          %s\n", d->driver_version);
    printf("    global memory   %.1f MiB\n", (double)d->global_mem_bytes / (1 << 20));
    printf("    max allocation  %.1f MiB\n", (double)d->max_alloc_bytes / (1 << 20));
    printf("    local memory    %.1f KiB\n", (double)d->local_mem_bytes / 1024);
    printf("    compute units   %u\n", d->compute_units);
    printf("    max work-group  %zu\n", d->max_work_group_size);
    printf("    fp16 / fp64     %s / %s\n", d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no");
    printf("    native vector   %u float%s\n", d->float_vector_width, d->float_vector_width == 1 ? "" : "s");
}

/* --gemm-rate: the yardstick on the device sel picks. */
static int print_gemm_rate(const char *sel)
{
    lf_context *ctx = NULL;
    char msg[1024], what[160];
    double gflops = 0;
    lf_status st = lf_context_create(sel, &ctx, msg, sizeof msg);
    if (st == LF_OK && (st = gemm_yardstick(ctx, &gflops, what, sizeof what)) != LF_OK)
        snprintf(msg, sizeof msg, "%s", lf_context_last_error(ctx));
    if (st == LF_OK) printf("\nGEMM rate: %.1f GFLOP/s (%s)\n", gflops, what);
    else fprintf(stderr, "linformer devices: --gemm-rate: %s: %s\n", lf_status_string(st), msg);
    lf_context_free(ctx);
    return st == LF_OK ? 0 : 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer devices [--device SEL] [--gemm-rate]\n\n"
            "Lists every OpenCL platform and device and marks the default one, then every\n"
            "installed driver that gave no platform, with the reason its library did not load.\n"
            "With --device (or LINFORMER_DEVICE) shows the device SEL picks, or fails naming SEL.\n"
            "--gemm-rate then measures its GEMM rate, the yardstick of bench and run --profile.\n\n"
            "SEL: empty = first GPU, else first accelerator, else first CPU;\n"
            "     gpu | cpu | accelerator = the first of that type;\n"
            "     P:D = platform P, device D;\n"
            "     NAME or NAME:D = the first (or D-th) device whose platform or device name\n"
            "     contains NAME, case-insensitively (e.g. nvidia, pocl).\n");
}

int cmd_devices(int argc, char **argv)
{
    static const cli_option options[] = {{"device", true}, {"gemm-rate", false}, {"help", false}};
    const char *v[3];
    char err[512];
    if (cli_parse(argc, argv, options, 3, v, err, sizeof err) != 0) return cli_usage_error("devices", err);
    if (v[2]) {
        usage(stdout);
        return 0;
    }
    const char *sel = v[0] ? v[0] : getenv("LINFORMER_DEVICE");

    char msg[4096] = "";
    size_t count = 0;
    lf_status st = lf_devices_list(NULL, 0, &count, msg, sizeof msg);
    lf_device_info *devs = st == LF_OK ? calloc(count, sizeof *devs) : NULL;
    if (st == LF_OK && !devs) st = LF_ERR_OUT_OF_MEMORY;
    if (st == LF_OK) st = lf_devices_list(devs, count, &count, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer devices: %s: %s\n", lf_status_string(st), msg);
        free(devs);
        return 1;
    }
    size_t def = 0, pick = 0;
    lf_devices_select(NULL, devs, count, &def, NULL, 0);
    st = lf_devices_select(sel, devs, count, &pick, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer devices: %s: %s\n", lf_status_string(st), msg);
        free(devs);
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        print_device(&devs[i], i == def ? "(default)" : "");
    const char *unloaded = lf_devices_unloaded();
    if (*unloaded) printf("\ninstalled drivers that gave no platform:\n%s\n", unloaded);
    const char *blas = NULL, *mkl = NULL;
    if (lf_host_blas_library(&blas, &mkl, msg, sizeof msg) != LF_OK)
        printf("\nhost BLAS: none: %s\n", msg);
    else if (mkl)
        printf("\nhost BLAS: %s\n", mkl);
    else
        printf("\nhost BLAS: OpenBLAS, %s kernels\n", lf_host_blas_core(NULL));
    const char *timeout = getenv(LF_THREAD_TIMEOUT_VAR), *policy = getenv(LF_WAIT_POLICY_VAR);
    if (mkl)
        printf("host BLAS idle threads: " LF_WAIT_POLICY_VAR "=%s\n",
               policy && *policy ? policy : "unset (GNU OpenMP's default)");
    else
        printf("host BLAS idle threads: " LF_THREAD_TIMEOUT_VAR "=%s\n", /* as OpenBLAS read it when it loaded */
               timeout && *timeout ? timeout : "unset (OpenBLAS's default)");
    if (sel && *sel) {
        printf("\nselector \"%s\" picks %u:%u %s\n", sel, devs[pick].platform_index,
               devs[pick].device_index, devs[pick].device_name);
    }
    free(devs);
    return v[1] ? print_gemm_rate(sel) : 0;
}
