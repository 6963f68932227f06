/* main.c - the `linformer` program: dispatch to a subcommand. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "linformer.h"

typedef int (*command_fn)(int argc, char **argv);

static const struct {
    const char *name;
    command_fn run;
    const char *summary;
} commands[] = {
    {"devices", cmd_devices, "list OpenCL devices and show which one a selector picks"},
    {"run", cmd_run, "run an attention layer or a whole model from safetensors files"},
    {"bench", cmd_bench, "benchmark Linformer against dense and flash attention"},
    {"rank", cmd_rank, "measure how much rank a model's attention needs (spectra of P, error per k)"},
    {"tune", cmd_tune, "search CLBlast's GEMM parameters for a device and keep them"},
    {"kernels", cmd_kernels, "write the kernels the library builds for a GPU profile, without the GPU"},
};

/* The command of that name; NULL when there is none. */
static command_fn command_named(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run;
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: linformer <command> [options]   (linformer %s)\n\ncommands:\n", lf_version_string());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`linformer <command> --help` or `linformer help <command>` describes a command's options.\n"
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

/* OpenBLAS reads its settings only as it loads, before main, so the program
 * sets two of them and starts itself again, once:
 *  - OPENBLAS_CORETYPE where OpenBLAS fell back to kernels older than this
 *    CPU takes (lf_host_blas_core: Debian's 0.3.21 runs SSE3 kernels on some
 *    AVX-512 Xeons, GEMMs 4x slower);
 *  - OPENBLAS_THREAD_TIMEOUT=4: after each GEMM, OpenBLAS's idle threads
 *    otherwise wait by yielding for 2^28 cycles, on the cores where the
 *    OpenCL runtime's threads then run the kernels between GEMMs (a layer's
 *    median forward 7-35% slower on PoCL: bench/NOTES.md); with 4 they sleep
 *    after 2^4 cycles and the next GEMM wakes them.
 * A value the user set is kept, whatever it says; without /proc the program
 * goes on with the settings it has.
 * MKL, where it is the host BLAS, loads GNU OpenMP with it at the first
 * context, after main has begun: OMP_WAIT_POLICY=passive, set here unless the
 * user did, needs no restart. Its idle threads then sleep instead of spinning
 * on the cores where the OpenCL runtime's threads run the kernels between
 * GEMMs (the 12-layer model's LayerNorm and attention 20-48% slower:
 * bench/NOTES.md). */
static void take_the_host_blas_settings(char **argv)
{
    const char *policy = getenv(LF_WAIT_POLICY_VAR);
    if (!policy || !*policy) setenv(LF_WAIT_POLICY_VAR, LF_WAIT_POLICY, 1);
    const char *faster = NULL, *timeout = getenv(LF_THREAD_TIMEOUT_VAR);
    lf_host_blas_core(&faster);
    const bool set_core = faster != NULL, set_timeout = !timeout || !*timeout;
    if (!set_core && !set_timeout) return;
    if ((!set_core || setenv("OPENBLAS_CORETYPE", faster, 1) == 0) &&
        (!set_timeout || setenv(LF_THREAD_TIMEOUT_VAR, LF_THREAD_TIMEOUT, 1) == 0))
        execv("/proc/self/exe", argv);
    if (set_core) unsetenv("OPENBLAS_CORETYPE");
    if (set_timeout) unsetenv(LF_THREAD_TIMEOUT_VAR);
}

int main(int argc, char **argv)
{
    take_the_host_blas_settings(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const bool help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0;
    const command_fn help_of = strcmp(argv[1], "help") == 0 && argc == 3 ? command_named(argv[2]) : NULL;
    if (help_of) { /* `linformer help run` is `linformer run --help` */
        char *command_help[] = {argv[2], "--help", NULL};
        return finish(help_of(2, command_help));
    }
    if ((help || strcmp(argv[1], "--version") == 0) && argc > 2) {
        fprintf(stderr, "linformer: %s takes no argument, got \"%s\"\n\n", argv[1], argv[2]);
        usage(stderr);
        return 2;
    }
    if (help) {
        usage(stdout);
        return finish(0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("linformer %s\n", lf_version_string());
        return finish(0);
    }
    const command_fn command = command_named(argv[1]);
    if (command) return finish(command(argc - 1, argv + 1));
    fprintf(stderr, "linformer: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
