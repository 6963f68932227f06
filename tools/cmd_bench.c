/* cmd_bench.c - `linformer bench`: Linformer against dense and flash attention (see bench/). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_options.h"
#include "bench_output.h"
#include "bench_plot.h"
#include "bench_sweep.h"
#include "bench_table.h"
#include "commands.h"

static void on_interrupt(int sig) { bench_sweep_stop(); }

/* The first Ctrl-C (or TERM) ends the sweep after the forward in flight and still
 * reports; the handler then resets, so a second one ends the program at once. */
static void catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static bool all_gpus(const bench_device *devs, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (devs[i].info.type != LF_DEVICE_GPU && devs[i].info.type != LF_DEVICE_ACCELERATOR) return false;
    return count > 0;
}

/* CSV, JSON and the plot; every one is attempted, the status says whether all worked. */
static int write_outputs(const bench_options *o, const bench_device *devs, size_t ndev, const bench_results *res)
{
    char err[4096];
    int rc = 0;
    if (o->csv && bench_csv_save(o->csv, res, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        rc = 1;
    }
    if (o->json) {
        lf_device_info *infos = calloc(ndev, sizeof *infos);
        for (size_t i = 0; infos && i < ndev; i++) infos[i] = devs[i].info;
        if (!infos || bench_json_save(o->json, o, infos, ndev, res, err, sizeof err) != 0) {
            fprintf(stderr, "linformer bench: %s\n", infos ? err : "out of host memory");
            rc = 1;
        }
        free(infos);
    }
    if (o->plot && bench_plot(res, o->plot, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: --plot: %s\n", err);
        rc = 1;
    }
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    bench_options o;
    char err[4096] = "";
    if (bench_options_parse(argc, argv, &o, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n(see `linformer bench --help`)\n", err);
        return 2;
    }
    if (o.help) {
        bench_usage(stdout);
        return 0;
    }
    bench_device *devs = NULL;
    size_t ndev = 0;
    if (bench_devices_open(o.device, &devs, &ndev, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        return 1;
    }
    bench_options_default_ns(&o, all_gpus(devs, ndev));
    /* The yardstick: what the device's GEMM reaches, beside which the modes' GFLOP/s read. */
    for (size_t d = 0; d < ndev; d++) {
        double gflops = 0;
        if (lf_gemm_rate(devs[d].ctx, 1024, 1024, 1024, &gflops) == LF_OK)
            printf("device %s GEMM rate: %.1f GFLOP/s (%s SGEMM 1024 x 1024 x 1024, median of 5)\n", devs[d].sel,
                   gflops, lf_context_gemm_backend(devs[d].ctx));
        else
            fprintf(stderr, "linformer bench: device %s: GEMM rate: %s\n", devs[d].sel, lf_context_last_error(devs[d].ctx));
    }
    bench_results res = {0};
    catch_interrupts();
    int rc = bench_sweep(&o, devs, ndev, &res, err, sizeof err), status = 0;
    if (rc < 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        status = 1;
    } else {
        if (rc > 0) fprintf(stderr, "linformer bench: interrupted; reporting the %zu points measured\n", res.count);
        bench_table_print(stdout, &o, &res);
        fflush(stdout);
        status = write_outputs(&o, devs, ndev, &res) ? 1 : rc > 0 ? 130 : 0;
    }
    bench_results_free(&res);
    bench_devices_close(devs, ndev);
    return status;
}
