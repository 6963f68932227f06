/* bench_progress.c - progress lines and the bar on stderr. */
#define _POSIX_C_SOURCE 200809L
#include "bench_progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void bench_progress_start(bench_progress *pg, size_t total)
{
    *pg = (bench_progress){.total = total, .tty = isatty(STDERR_FILENO) == 1};
    clock_gettime(CLOCK_MONOTONIC, &pg->start);
}

static double elapsed_s(const bench_progress *pg)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - pg->start.tv_sec) + 1e-9 * (double)(now.tv_nsec - pg->start.tv_nsec);
}

void bench_progress_clear(const bench_progress *pg)
{
    if (pg->tty) fputs("\r\033[K", stderr);
}

/* The bar after `used` bytes of out (a terminal, and steps left), then all of out in one write. */
static void put_with_bar(const bench_progress *pg, char *out, size_t size, int used, const char *what)
{
    enum { WIDTH = 40 };
    if (pg->tty && pg->done < pg->total && used >= 0 && (size_t)used < size) {
        const int fill = (int)(WIDTH * pg->done / (pg->total ? pg->total : 1));
        snprintf(out + used, size - (size_t)used, "[%.*s%*s] %zu/%zu  %.0f s%s%s", fill,
                 "########################################", WIDTH - fill, "", pg->done, pg->total, elapsed_s(pg),
                 *what ? "  " : "", what);
    }
    fputs(out, stderr);
    fflush(stderr);
}

void bench_progress_line(bench_progress *pg, bool step, const char *line)
{
    char out[4096];
    pg->done += step;
    put_with_bar(pg, out, sizeof out, snprintf(out, sizeof out, "%s%s\n", pg->tty ? "\r\033[K" : "", line), "");
}

void bench_progress_tick(bench_progress *pg, const char *what)
{
    char out[1024];
    pg->done++;
    if (pg->tty) put_with_bar(pg, out, sizeof out, snprintf(out, sizeof out, "\r\033[K"), what);
}

void bench_progress_row(bench_progress *pg, const bench_row *r, const char *oom_msg)
{
    char line[3072], k[16] = "-";
    if (r->k) snprintf(k, sizeof k, "%d", r->k);
    int used = snprintf(line, sizeof line, "[%zu/%zu] %s %-9s n=%-6d k=%-5s ", pg->done + 1, pg->total, r->device,
                        lf_mode_name(r->mode), r->n, k);
    if (r->status == BENCH_OOM) {
        snprintf(line + used, sizeof line - (size_t)used, "OOM (%s)", oom_msg);
    } else {
        used += snprintf(line + used, sizeof line - (size_t)used, "%10.3f ms (min %.3f, max %.3f) %7.1f GFLOP/s",
                         r->ms_median, r->ms_min, r->ms_max, r->gflops);
        if (!isnan(r->vs_exact)) used += snprintf(line + used, sizeof line - (size_t)used, "  vs_exact %.2e", r->vs_exact);
        if (!isnan(r->xdev)) snprintf(line + used, sizeof line - (size_t)used, "  xdev %.1e", r->xdev);
    }
    bench_progress_line(pg, true, line);
}
