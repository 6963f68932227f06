/* gemm_yardstick.c - the GEMM rate, and what an OPENBLAS_CORETYPE that holds OpenBLAS back costs. */
#define _GNU_SOURCE /* environ, pipe2 */
#include "gemm_yardstick.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EDGE = 1024, CHILD_SECONDS = 120 };

lf_status gemm_yardstick(lf_context *ctx, double *gflops, char *what, size_t size)
{
    const char *blas = lf_context_host_blas(ctx);
    char kernels[64] = ""; /* the host BLAS, where it runs the GEMMs */
    if (blas && strcmp(blas, "OpenBLAS") == 0)
        snprintf(kernels, sizeof kernels, "; OpenBLAS's %s kernels", lf_host_blas_core(NULL));
    else if (blas)
        snprintf(kernels, sizeof kernels, "; %s", blas);
    snprintf(what, size, "%s SGEMM %d x %d x %d, median of 5%s", lf_context_gemm_backend(ctx), EDGE, EDGE, EDGE,
             kernels);
    return lf_gemm_rate(ctx, EDGE, EDGE, EDGE, gflops);
}

/* The child's stdout, up to size - 1 bytes, until it closes it or the time is up. */
static void read_until(int fd, char *out, size_t size, double seconds)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    size_t used = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        const double left =
            seconds - (double)(now.tv_sec - start.tv_sec) - 1e-9 * (double)(now.tv_nsec - start.tv_nsec);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0 || used + 1 >= size) break;
        const ssize_t got = read(fd, out + used, size - 1 - used);
        if (got <= 0) break;
        used += (size_t)got;
    }
    out[used] = 0;
}

/* `linformer devices --device P:D --gemm-rate` without OPENBLAS_CORETYPE: its GFLOP/s, or 0. */
static double rate_without_the_variable(lf_context *ctx)
{
    lf_device_info d;
    char selector[32];
    if (lf_context_device_info(ctx, &d) != LF_OK) return 0;
    snprintf(selector, sizeof selector, "%u:%u", d.platform_index, d.device_index);
    extern char **environ;
    size_t count = 0;
    while (environ[count]) count++;
    char **env = calloc(count + 1, sizeof *env);
    int fds[2] = {-1, -1};
    if (!env || pipe2(fds, O_CLOEXEC) != 0) {
        free(env);
        return 0;
    }
    for (size_t i = 0, j = 0; i < count; i++)
        if (strncmp(environ[i], "OPENBLAS_CORETYPE=", 18) != 0) env[j++] = environ[i];
    char *argv[] = {"linformer", "devices", "--device", selector, "--gemm-rate", NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    const bool started = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, argv, env) == 0;
    posix_spawn_file_actions_destroy(&actions);
    free(env);
    close(fds[1]);
    char out[4096];
    double gflops = 0;
    if (started) {
        read_until(fds[0], out, sizeof out, CHILD_SECONDS);
        kill(pid, SIGKILL); /* ends one that ran past the time; a finished one is a zombie, unharmed */
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
        const char *line = strstr(out, "GEMM rate: ");
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0 && line && sscanf(line, "GEMM rate: %lf", &gflops) == 1))
            gflops = 0;
    }
    close(fds[0]);
    return gflops;
}

void gemm_yardstick_forced_core(lf_context *ctx, double gflops)
{
    static bool said;
    const char *best = NULL, *forced = lf_host_blas_forced_core(&best), *blas = lf_context_host_blas(ctx);
    if (said || !forced || !blas || strcmp(blas, "OpenBLAS") != 0) return;
    said = true;
    char what[160];
    if (!(gflops > 0) && gemm_yardstick(ctx, &gflops, what, sizeof what) != LF_OK) gflops = 0;
    const double own = rate_without_the_variable(ctx);
    printf("note: OPENBLAS_CORETYPE=%s, set in the environment, holds OpenBLAS to older kernels than this CPU "
           "runs (%s): SGEMM %d^3 at %.1f GFLOP/s here, ",
           forced, best, EDGE, gflops);
    if (own > 0 && gflops > 0)
        printf("%.1f with the CPU's own set (%.2fx); unset it for the faster GEMMs\n", own, own / gflops);
    else if (own > 0) /* the rate here could not be measured: no ratio to give */
        printf("%.1f with the CPU's own set; unset it for the faster GEMMs\n", own);
    else
        printf("the CPU's own set could not be measured (linformer devices --gemm-rate without the variable "
               "failed); unset it for the faster GEMMs\n");
}
