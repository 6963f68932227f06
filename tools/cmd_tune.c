/* cmd_tune.c - `linformer tune`: search CLBlast's GEMM parameters for a device and keep them. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "linformer.h"

#define MAX_SECONDS 86400.0

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer tune [--device SEL] [--seconds S] [--model FILE [--seq-len N] [--batch B]]\n\n"
            "Searches CLBlast's GEMM kernel parameters for the device (random valid sets,\n"
            "timed on GEMM shapes like the attention layer's), for about S seconds\n"
            "(default 300), and stores the winners in the kernel cache directory\n"
            "(LINFORMER_CACHE_DIR) under the device's name and driver version. Every\n"
            "later context on that device applies them; GEMMs run on CLBlast unless the\n"
            "host BLAS is chosen (LINFORMER_GEMM, the default on CPU devices).\n"
            "No step begins after S seconds, but the first measure of each kernel (which\n"
            "compiles it) always runs; one that ends past the limit is said.\n\n"
            "With --model, the search runs on the GEMMs that the model's forward runs\n"
            "(B sequences of N positions), per shape class (tile, sum, head), each\n"
            "candidate's result checked against the host BLAS's, and stores a set per\n"
            "class; every later context applies a class's sets before its GEMMs.\n\n"
            "  --device SEL   see `linformer devices --help`\n"
            "  --seconds S    the time to search, 0.1 to %.0f\n"
            "  --model FILE   a model's safetensors file, as `linformer run --model` reads it\n"
            "  --seq-len N    positions per sequence, 1 to the model's max_seq_len (default: that)\n"
            "  --batch B      sequences per forward, 1 to 65536 (default 1)\n",
            MAX_SECONDS);
}

static void print_line(const char *line, void *user)
{
    fprintf(user, "%s\n", line);
    fflush(user);
}

enum { O_DEVICE, O_SECONDS, O_MODEL, O_SEQ_LEN, O_BATCH, O_HELP, O_COUNT };
static const cli_option options[O_COUNT] = {{"device", true},  {"seconds", true}, {"model", true},
                                            {"seq-len", true}, {"batch", true},   {"help", false}};

int cmd_tune(int argc, char **argv)
{
    const char *v[O_COUNT];
    char msg[4096];
    double seconds = 300;
    int seq_len = 0, batch = 1; /* seq_len 0: the model's max_seq_len */
    if (cli_parse(argc, argv, options, O_COUNT, v, msg, sizeof msg) != 0 ||
        (v[O_SECONDS] && cli_double("--seconds", v[O_SECONDS], 0.1, MAX_SECONDS, &seconds, msg, sizeof msg) != 0) ||
        (v[O_SEQ_LEN] && cli_int("--seq-len", v[O_SEQ_LEN], 1, 1 << 30, &seq_len, msg, sizeof msg) != 0) ||
        (v[O_BATCH] && cli_int("--batch", v[O_BATCH], 1, 65536, &batch, msg, sizeof msg) != 0))
        return cli_usage_error("tune", msg);
    if (!v[O_MODEL] && (v[O_SEQ_LEN] || v[O_BATCH]))
        return cli_usage_error("tune", v[O_SEQ_LEN] ? "--seq-len needs --model" : "--batch needs --model");
    if (v[O_HELP]) return usage(stdout), 0;
    lf_context *ctx = NULL;
    lf_status st = lf_context_create(v[O_DEVICE], &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "linformer tune: %s: %s\n", lf_status_string(st), msg);
        return 1;
    }
    if (strcmp(lf_context_gemm_backend(ctx), "clblast") != 0)
        printf("note: this device's GEMMs run on the host BLAS (LINFORMER_GEMM, the default on CPU devices): the\n"
               "CLBlast parameters tuned here apply only where LINFORMER_GEMM=clblast\n");
    st = v[O_MODEL] ? lf_gemm_tune_model(ctx, v[O_MODEL], seq_len, batch, seconds, print_line, stdout)
              : lf_gemm_tune(ctx, seconds, print_line, stdout);
    if (st != LF_OK) fprintf(stderr, "linformer tune: %s: %s\n", lf_status_string(st), lf_context_last_error(ctx));
    lf_context_free(ctx);
    return st == LF_OK ? 0 : 1;
}
