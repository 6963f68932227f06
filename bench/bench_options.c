/* bench_options.c - parsing and checking the options of `linformer bench`. */
#include "bench_options.h"

#include "bench_plot.h"
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The three sweeps: the default one (docs/benchmark.md's figures) lasts under a minute on a 2-core CPU;
 * --quick keeps that layer (d_model 512, 8 heads) on shorter sequences;
 * --full runs the whole sweep (to 65536 when every device is a GPU). */
typedef struct {
    int n_first, n_last, k[2], d_model, heads, repeat;
} bench_defaults;

static const bench_defaults sweep_default = {512, 4096, {128, 256}, 512, 8, 5};
static const bench_defaults sweep_quick = {512, 2048, {128, 256}, 512, 8, 3};
static const bench_defaults sweep_full = {512, 16384, {128, 256}, 512, 8, 5};

#define FULL_N_LAST_GPU 65536
#define DEFAULT_SEED 20200608u /* the paper's arXiv date: any fixed value will do */

void bench_usage(FILE *out)
{
    fprintf(out,
            "usage: linformer bench [options]\n\n"
            "Times one attention layer in the modes linformer, dense and flash over a sweep\n"
            "of sequence lengths n (and compressed lengths k for Linformer), with OpenCL\n"
            "profiling events after warm-up, and prints per n and k the time of each mode,\n"
            "Linformer's speed-up and memory saving over dense and flash, and the paper's\n"
            "Table 3 figures (Wang et al. 2020) for the same n and k.\n"
            "Linformer rows use random (Johnson-Lindenstrauss) projections shared by the heads.\n\n"
            "options:\n"
            "  --n LIST          sequence lengths, each 1 to %d: a comma list of distinct values\n"
            "                    (512,1024) or A..B doubling (default 512..4096; --full: 512..16384\n"
            "                    on a CPU, 512..65536 when every device is a GPU)\n"
            "  --k LIST          compressed lengths of the Linformer rows, each 1 to %d, distinct\n"
            "                    (default 128,256)\n"
            "  --d-model D       model width, 1 to %d (default 512)\n"
            "  --heads H         attention heads, 1 to %d, dividing D (default 8)\n"
            "  --batch B         sequences per forward, 1 to %d (default 1)\n"
            "  --modes LIST      any of linformer,dense,flash, or all (default all)\n"
            "  --repeat R        timed forwards per point, 1 to %d; median, min and max are reported\n"
            "                    (default 5; --quick: 3)\n"
            "  --warmup W        untimed forwards before them, 0 to %d (default 1)\n"
            "  --seed S          seed of weights, input and projections, 0 to 2^64-1 (default %u)\n"
            "  --quick           n 512..2048, repeat 3: about 20 s on 2 CPU cores\n"
            "  --full            the whole sweep: n to 16384 (65536 on GPUs), repeat 5;\n"
            "                    tens of minutes on a CPU\n"
            "  --causal          causal attention in every mode (each query sees the positions up to\n"
            "                    itself); Linformer rows then use mean pooling, as a random E mixes\n"
            "                    every position\n"
            "  --device SEL      the device (see `linformer devices --help`), or `all`: the same\n"
            "                    workload on every device, side by side, with the outputs'\n"
            "                    agreement with the first device (xdev)\n"
            "  --csv FILE        one row per device, mode, n and k\n"
            "  --json FILE       the options, the devices and the same rows\n"
            "  --plot FILE       time and device memory against n (log-log), drawn by gnuplot into\n"
            "                    FILE.png, .svg or .pdf (by its extension), from FILE.png.dat with\n"
            "                    the script FILE.png.gp (both kept, to redraw by hand)\n"
            "  -h, --help        this text\n\n"
            "Options given explicitly override those of --quick and --full; an option given twice\n"
            "is an error. Output files are created before the first point and replaced atomically\n"
            "when the sweep ends.\n"
            "Columns: vs_exact = deviation ||y - y_exact|| / ||y_exact|| from exact attention of the\n"
            "same weights and input: for Linformer, from flash (else dense): its approximation error\n"
            "with random, untrained projections, large by design (a trained model's would be small);\n"
            "for flash, from dense: the exact modes' agreement, which should be ~1e-6. xdev =\n"
            "deviation from the first device's output. A point that does not fit the device is\n"
            "reported as OOM.\n"
            "Ctrl-C stops after the forward in flight and still reports the points measured\n"
            "(exit status 130); a second Ctrl-C ends at once.\n",
            BENCH_MAX_N, BENCH_MAX_N, BENCH_MAX_D_MODEL, BENCH_MAX_HEADS, BENCH_MAX_BATCH, BENCH_MAX_COUNT,
            BENCH_MAX_COUNT, DEFAULT_SEED);
}

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && size) vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}


/* "a,b,c" (distinct) or "A..B" (doubling from A while <= B) of integers in [1, BENCH_MAX_N]. */
static int parse_int_list(const char *opt, const char *s, int *out, int *count, char *err, size_t size)
{
    const char *dots = strstr(s, "..");
    *count = 0;
    if (dots) {
        char first[32];
        int a, b;
        const size_t len = (size_t)(dots - s);
        if (len >= sizeof first) return fail(err, size, "%s: \"%s\" is not a range A..B", opt, s);
        memcpy(first, s, len);
        first[len] = 0;
        if (cli_int(opt, first, 1, BENCH_MAX_N, &a, err, size) || cli_int(opt, dots + 2, 1, BENCH_MAX_N, &b, err, size))
            return -1;
        if (b < a) return fail(err, size, "%s: \"%s\" is not a range A..B with A <= B", opt, s);
        for (long v = a; v <= b; v *= 2) out[(*count)++] = (int)v; /* at most 25 doublings */
        return 0;
    }
    char buf[1024];
    if (!*s) return fail(err, size, "%s: the list is empty", opt);
    if (strlen(s) >= sizeof buf) return fail(err, size, "%s: the list is too long", opt);
    strcpy(buf, s);
    /* each item once: a repeated point would be measured again and shown as the first */
    for (char *item = buf, *next; item; item = next) {
        if ((next = strchr(item, ','))) *next++ = 0;
        if (!*item) return fail(err, size, "%s: \"%s\" has an empty item", opt, s);
        if (*count == BENCH_MAX_LIST) return fail(err, size, "%s: more than %d values", opt, BENCH_MAX_LIST);
        int v;
        if (cli_int(opt, item, 1, BENCH_MAX_N, &v, err, size)) return -1;
        for (int i = 0; i < *count; i++)
            if (out[i] == v) return fail(err, size, "%s: %d is given twice in \"%s\"", opt, v, s);
        out[(*count)++] = v;
    }
    return 0;
}

static int parse_modes(const char *s, bool modes[3], char *err, size_t size)
{
    memset(modes, 0, 3 * sizeof *modes);
    if (strcmp(s, "all") == 0) {
        modes[0] = modes[1] = modes[2] = true;
        return 0;
    }
    char buf[256];
    if (strlen(s) >= sizeof buf) return fail(err, size, "--modes: the list is too long");
    strcpy(buf, s);
    char *save = NULL;
    int any = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), any++) {
        lf_mode m;
        if (lf_mode_parse(tok, &m) != LF_OK)
            return fail(err, size, "--modes: \"%s\" is not linformer, dense or flash%s", tok,
                        strcmp(tok, "all") == 0 ? " (\"all\" stands alone)" : "");
        modes[m] = true;
    }
    if (!any) return fail(err, size, "--modes: the list is empty");
    return 0;
}

enum { O_N, O_K, O_D, O_H, O_B, O_MODES, O_REPEAT, O_WARMUP, O_SEED, O_DEVICE, O_CSV, O_JSON, O_PLOT, O_QUICK,
       O_FULL, O_CAUSAL, O_HELP, O_COUNT };
static const cli_option options[O_COUNT] = {
    {"n", true},      {"k", true},      {"d-model", true}, {"heads", true}, {"batch", true}, {"modes", true},
    {"repeat", true}, {"warmup", true}, {"seed", true},    {"device", true}, {"csv", true},  {"json", true},
    {"plot", true},   {"quick", false}, {"full", false},   {"causal", false}, {"help", false}};

/* The numbers and lists; each absent one keeps the sweep's default. */
static int apply_values(bench_options *o, const char *const v[O_COUNT], char *err, size_t size)
{
    if ((v[O_N] && parse_int_list("--n", v[O_N], o->ns, &o->n_count, err, size)) ||
        (v[O_K] && parse_int_list("--k", v[O_K], o->ks, &o->k_count, err, size)) ||
        (v[O_D] && cli_int("--d-model", v[O_D], 1, BENCH_MAX_D_MODEL, &o->d_model, err, size)) ||
        (v[O_H] && cli_int("--heads", v[O_H], 1, BENCH_MAX_HEADS, &o->heads, err, size)) ||
        (v[O_B] && cli_int("--batch", v[O_B], 1, BENCH_MAX_BATCH, &o->batch, err, size)) ||
        (v[O_MODES] && parse_modes(v[O_MODES], o->modes, err, size)) ||
        (v[O_REPEAT] && cli_int("--repeat", v[O_REPEAT], 1, BENCH_MAX_COUNT, &o->repeat, err, size)) ||
        (v[O_WARMUP] && cli_int("--warmup", v[O_WARMUP], 0, BENCH_MAX_COUNT, &o->warmup, err, size)) ||
        (v[O_SEED] && cli_u64("--seed", v[O_SEED], &o->seed, err, size)))
        return -1;
    if (v[O_PLOT] && bench_plot_check_name(v[O_PLOT], err, size) != 0) return -1;
    o->device = v[O_DEVICE], o->csv = v[O_CSV], o->json = v[O_JSON], o->plot = v[O_PLOT];
    return 0;
}

int bench_options_parse(int argc, char **argv, bench_options *o, char *err, size_t err_size)
{
    memset(o, 0, sizeof *o);
    const char *v[O_COUNT];
    if (cli_parse(argc, argv, options, O_COUNT, v, err, err_size) != 0) return -1;
    o->help = v[O_HELP] != NULL;
    o->quick = v[O_QUICK] != NULL;
    o->full = v[O_FULL] != NULL;
    const bool causal = v[O_CAUSAL] != NULL;
    if (o->quick && o->full) return fail(err, err_size, "--quick and --full exclude each other");
    const bench_defaults *d = o->quick ? &sweep_quick : o->full ? &sweep_full : &sweep_default;
    *o = (bench_options){.k_count = 2, .ks = {d->k[0], d->k[1]}, .d_model = d->d_model, .heads = d->heads,
                         .batch = 1, .repeat = d->repeat, .warmup = 1, .modes = {true, true, true},
                         .seed = DEFAULT_SEED, .quick = o->quick, .full = o->full, .help = o->help,
                         .causal = causal};
    if (!o->full)
        for (int n = d->n_first; n <= d->n_last; n *= 2) o->ns[o->n_count++] = n;
    if (apply_values(o, v, err, err_size) != 0) return -1;
    if (o->d_model % o->heads != 0)
        return fail(err, err_size, "--heads: %d does not divide --d-model %d", o->heads, o->d_model);
    return 0;
}

void bench_options_default_ns(bench_options *o, bool all_gpu)
{
    if (o->n_count) return;
    const int last = all_gpu ? FULL_N_LAST_GPU : sweep_full.n_last;
    for (int n = sweep_full.n_first; n <= last; n *= 2) o->ns[o->n_count++] = n;
}
