/* cmd_bench.c - `linformer bench`: Linformer against dense and flash attention (see bench/). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "announce.h"
#include "bench.h"
#include "bench_options.h"
#include "bench_output.h"
#include "bench_plot.h"
#include "bench_sweep.h"
#include "bench_table.h"
#include "cli.h"
#include "commands.h"
#include "gemm_yardstick.h"
#include "output_file.h"

/* The first Ctrl-C (or TERM) ends the sweep after the forward in flight and still
 * reports; the signals then go back to output_file's handler, so a second one
 * ends the program at once, without the temporaries of the outputs. */
static void on_interrupt(int sig)
{
    bench_sweep_stop();
    output_file_catch_signals();
}

static void catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
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

/* The output files, opened before the first point and committed after the last. */
typedef struct {
    output_file *csv, *json;
    bench_plot_files plot;
} bench_files;

static void files_abort(bench_files *f)
{
    output_file_abort(f->csv);
    output_file_abort(f->json);
    bench_plot_abort(&f->plot);
    memset(f, 0, sizeof *f);
}

static int files_open(const bench_options *o, bench_files *f, char *err, size_t err_size)
{
    memset(f, 0, sizeof *f);
    bench_plot_side side;
    named_file outputs[5] = {{"--csv", o->csv}, {"--json", o->json}};
    const size_t count = 2 + bench_plot_outputs(o->plot, &side, outputs + 2);
    if (output_files_check(outputs, count, NULL, 0, err, err_size) != 0) return -1;
    if ((!o->csv || (f->csv = output_file_open(o->csv, NULL, 0, err, err_size))) &&
        (!o->json || (f->json = output_file_open(o->json, NULL, 0, err, err_size))) &&
        (!o->plot || bench_plot_open(o->plot, &f->plot, err, err_size) == 0))
        return 0;
    files_abort(f);
    return -1;
}

/* Writes a table into its file and commits it; a write error is reported. */
static int commit(output_file *f, int written, char *err, size_t err_size)
{
    if (written != 0 && !ferror(output_file_stream(f))) { /* out of memory, not a write error */
        output_file_abort(f);
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    return output_file_commit(f, err, err_size);
}

/* Prints a failed output's message; returns 1 for the exit status. */
static int report(const char *option, const char *err)
{
    fprintf(stderr, "linformer bench: %s: %s\n", option, err);
    return 1;
}

static bool any_measured(const bench_results *res)
{
    for (size_t i = 0; i < res->count; i++)
        if (res->rows[i].status == BENCH_OK) return true;
    return false;
}

/* CSV, JSON and the plot; every one is attempted, the status says whether all
 * worked. A figure of nothing fails the run before any file is replaced. */
static int write_outputs(const bench_options *o, bench_files *f, const bench_device *devs, size_t ndev,
                         const bench_results *res)
{
    char err[4096];
    int rc = 0;
    if (f->plot.figure && !any_measured(res)) {
        files_abort(f);
        return report("--plot", "nothing to plot: no point was measured");
    }
    if (f->csv && commit(f->csv, bench_csv_write(output_file_stream(f->csv), res), err, sizeof err) != 0)
        rc = report("--csv", err);
    if (f->json) {
        lf_device_info *infos = calloc(ndev, sizeof *infos);
        for (size_t i = 0; infos && i < ndev; i++) infos[i] = devs[i].info;
        const int written = infos ? bench_json_write(output_file_stream(f->json), o, infos, ndev, res) : -1;
        if (commit(f->json, written, err, sizeof err) != 0) rc = report("--json", err);
        free(infos);
    }
    if (f->plot.figure && bench_plot_finish(&f->plot, res, err, sizeof err) != 0) rc = report("--plot", err);
    memset(f, 0, sizeof *f);
    return rc;
}

/* The yardsticks: what the device's GEMM reaches, beside which the modes'
 * GFLOP/s read, and its copy bandwidth, beside which the elementwise kernels'
 * time reads (`run --profile`). */
static void print_yardsticks(const bench_device *devs, size_t ndev)
{
    enum { COPY_FLOATS = 16 << 20 }; /* 64 MiB a buffer: past the caches */
    for (size_t d = 0; d < ndev; d++) {
        double gflops = 0, gbps = 0;
        char what[160];
        if (gemm_yardstick(devs[d].ctx, &gflops, what, sizeof what) == LF_OK)
            printf("device %s GEMM rate: %.1f GFLOP/s (%s)\n", devs[d].sel, gflops, what);
        else
            fprintf(stderr, "linformer bench: device %s: GEMM rate: %s\n", devs[d].sel,
                    lf_context_last_error(devs[d].ctx));
        gemm_yardstick_forced_core(devs[d].ctx, gflops);
        if (lf_copy_rate(devs[d].ctx, COPY_FLOATS, &gbps) == LF_OK)
            printf("device %s copy bandwidth: %.1f GB/s (copy kernel, 64 MiB, read + write, median of 5)\n",
                   devs[d].sel, gbps);
        else
            fprintf(stderr, "linformer bench: device %s: copy bandwidth: %s\n", devs[d].sel,
                    lf_context_last_error(devs[d].ctx));
    }
}

/* The sweep and its report; returns the exit status. */
static int sweep_and_report(const bench_options *o, bench_device *devs, size_t ndev, bench_files *files)
{
    char err[4096] = "";
    bench_results res = {0};
    catch_interrupts();
    const int rc = bench_sweep(o, devs, ndev, &res, err, sizeof err);
    int status = 0;
    if (rc < 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        files_abort(files);
        status = 1;
    } else {
        if (rc > 0) fprintf(stderr, "linformer bench: interrupted; reporting the %zu points measured\n", res.count);
        bench_table_print(stdout, o, &res);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "linformer bench: writing the table to standard output failed: %s\n", strerror(errno));
            status = 1;
        }
        if (write_outputs(o, files, devs, ndev, &res)) status = 1;
        if (status == 0 && rc > 0) status = 130;
    }
    bench_results_free(&res);
    return status;
}

int cmd_bench(int argc, char **argv)
{
    bench_options o;
    char err[4096] = "";
    if (bench_options_parse(argc, argv, &o, err, sizeof err) != 0) return cli_usage_error("bench", err);
    if (o.help) {
        bench_usage(stdout);
        return 0;
    }
    bench_files files;
    if (files_open(&o, &files, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        return 1;
    }
    bench_device *devs = NULL;
    size_t ndev = 0;
    if (bench_devices_open(o.device, &devs, &ndev, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        files_abort(&files);
        return 1;
    }
    for (size_t i = 0; i < ndev; i++) tool_announce("bench", devs[i].ctx);
    bench_options_default_ns(&o, all_gpus(devs, ndev));
    int status = 1;
    if (bench_sweep_check(&o, devs, ndev, err, sizeof err) != 0) {
        fprintf(stderr, "linformer bench: %s\n", err);
        files_abort(&files);
    } else {
        print_yardsticks(devs, ndev);
        status = sweep_and_report(&o, devs, ndev, &files);
    }
    bench_devices_close(devs, ndev);
    return status;
}
