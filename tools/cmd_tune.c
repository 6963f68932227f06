/* cmd_tune.c - `linformer tune`: search CLBlast's GEMM parameters for a device and keep them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "linformer.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer tune [--device SEL] [--seconds S]\n\n"
            "Searches CLBlast's GEMM kernel parameters for the device (random valid sets,\n"
            "timed on GEMM shapes like the attention layer's), for about S seconds\n"
            "(default 300), and stores the winners in the kernel cache directory\n"
            "(LINFORMER_CACHE_DIR) under the device's name and driver version. Every\n"
            "later context on that device applies them; GEMMs run on CLBlast unless the\n"
            "host BLAS is chosen (LINFORMER_GEMM, the default on CPU devices).\n\n"
            "  --device SEL   see `linformer devices --help`\n"
            "  --seconds S    the time to search, > 0\n");
}

static void print_line(const char *line, void *user)
{
    fprintf(user, "%s\n", line);
    fflush(user);
}

int cmd_tune(int argc, char **argv)
{
    static const struct option options[] = {
        {"device", required_argument, NULL, 'd'},
        {"seconds", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *device = NULL;
    double seconds = 300;
    char *end = NULL;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "h", options, NULL)) != -1;) {
        if (c == 'd') {
            device = optarg;
        } else if (c == 's') {
            seconds = strtod(optarg, &end);
            if (*end || !(seconds > 0)) {
                fprintf(stderr, "linformer tune: --seconds takes a number > 0, got \"%s\"\n", optarg);
                return 2;
            }
        } else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "linformer tune: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    char msg[4096];
    lf_context *ctx = NULL;
    lf_status st = lf_context_create(device, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer tune: %s: %s\n", lf_status_string(st), msg);
        return 1;
    }
    st = lf_gemm_tune(ctx, seconds, print_line, stdout);
    if (st != LF_OK) fprintf(stderr, "linformer tune: %s: %s\n", lf_status_string(st), lf_context_last_error(ctx));
    lf_context_free(ctx);
    return st == LF_OK ? 0 : 1;
}
