/* main.c - the `linformer` program: dispatch to a subcommand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "linformer.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"devices", cmd_devices, "list OpenCL devices and show which one a selector picks"},
    {"run", cmd_run, "run an attention layer or a whole model from safetensors files"},
    {"bench", cmd_bench, "benchmark Linformer against dense and flash attention"},
    {"rank", cmd_rank, "measure how much rank a model's attention needs (spectra of P, error per k)"},
    {"tune", cmd_tune, "search CLBlast's GEMM parameters for a device and keep them"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: linformer <command> [options]   (linformer %s)\n\ncommands:\n", lf_version_string());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`linformer <command> --help` describes a command's options.\n"
                 "The device comes from --device SEL or LINFORMER_DEVICE (see `linformer devices --help`).\n");
}

/* A command that succeeded fails when its standard output could not be written
 * (a full disk, a closed pipe's EPIPE): its results did not arrive. */
static int finish(int status)
{
    if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) {
        fprintf(stderr, "linformer: writing to standard output failed: %s\n", strerror(errno));
        return 1;
    }
    return status;
}

/* OpenBLAS reads OPENBLAS_CORETYPE only as it loads, before main. Where it
 * fell back to kernels older than this CPU takes (lf_host_blas_core: Debian's
 * 0.3.21 runs SSE3 kernels on some AVX-512 Xeons, GEMMs 4x slower), the
 * program starts itself again, once, with the faster set named. A
 * OPENBLAS_CORETYPE the user set is kept, whatever it says; without /proc the
 * program goes on with the kernels it has. */
static void take_the_cpus_blas_kernels(char **argv)
{
    const char *faster = NULL;
    lf_host_blas_core(&faster);
    if (!faster || setenv("OPENBLAS_CORETYPE", faster, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv)
{
    take_the_cpus_blas_kernels(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("linformer %s\n", lf_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return finish(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "linformer: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
