/* bench_options.h - the command line of `linformer bench`. */
#ifndef LF_BENCH_OPTIONS_H
#define LF_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "linformer.h"

#define BENCH_MAX_LIST 64
/* Limits of the options, stated in their messages: each count fits an int with
 * room (warmup + repeat cannot overflow), each size is far past any device. */
#define BENCH_MAX_N (1 << 24)
#define BENCH_MAX_D_MODEL 65536
#define BENCH_MAX_HEADS 4096
#define BENCH_MAX_BATCH 65536
#define BENCH_MAX_COUNT 100000

typedef struct {
    int ns[BENCH_MAX_LIST]; /* sequence lengths; n_count 0 = --full's range, which depends on the devices */
    int n_count;
    int ks[BENCH_MAX_LIST]; /* compressed lengths of the Linformer rows */
    int k_count;
    int d_model, heads, batch, repeat, warmup;
    bool modes[3];          /* indexed by lf_mode */
    const char *device;     /* NULL = LINFORMER_DEVICE or the default; "all" = every device */
    const char *csv, *json, *plot; /* output files, NULL = none */
    uint64_t seed;
    bool quick, full;
    bool causal; /* causal attention in every mode; Linformer rows use mean pooling */
    bool help;
} bench_options;

/*
 * Parses argv[1..argc-1] (argv[0] is the command name) into *o, defaults filled
 * in (those of --quick where it is given). Returns 0 on success; on a bad
 * option returns -1 with a message in err that names the option (and its limits).
 */
int bench_options_parse(int argc, char **argv, bench_options *o, char *err, size_t err_size);

/* Fills --full's n range when --n was not given: 512..16384 doubling, to
 * 65536 when every device is a GPU or accelerator. */
void bench_options_default_ns(bench_options *o, bool all_gpu);

void bench_usage(FILE *out);

#endif
