/* bench_options.c - parsing and checking the options of `linformer bench`. */
#include "bench_options.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Defaults; --quick swaps in the second set for every option not given. */
typedef struct {
    int n_first, n_last, k[2], d_model, heads, repeat;
} bench_defaults;

static const bench_defaults full = {512, 16384, {128, 256}, 512, 8, 5};
static const bench_defaults quick = {256, 4096, {64, 128}, 256, 4, 3}; /* ~40 s on 2 CPU cores */

#define DEFAULT_N_LAST_GPU 65536
#define DEFAULT_SEED 20200608u /* the paper's arXiv date: any fixed value will do */
#define DEFAULT_REF_LIMIT 2e8

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
            "  --n LIST          sequence lengths: a comma list (512,1024) or A..B doubling\n"
            "                    (default 512..16384 on a CPU, 512..65536 when every device is a GPU)\n"
            "  --k LIST          compressed lengths of the Linformer rows (default 128,256)\n"
            "  --d-model D       model width (default 512)\n"
            "  --heads H         attention heads, dividing D (default 8)\n"
            "  --batch B         sequences per forward (default 1)\n"
            "  --modes LIST      any of linformer,dense,flash, or all (default all)\n"
            "  --repeat R        timed forwards per point; median, min and max are reported (default 5)\n"
            "  --warmup W        untimed forwards before them (default 1)\n"
            "  --seed S          seed of weights, input and projections (default %u)\n"
            "  --ref-limit X     check against the double-precision reference where\n"
            "                    batch*heads*n*n*d_head <= X (default %.0e; 0 = never)\n"
            "  --quick           a sweep of about a minute: n 256..4096, k 64,128, d-model 256, heads 4,\n"
            "                    repeat 3 (options given explicitly still apply)\n"
            "  --device SEL      the device (see `linformer devices --help`), or `all`: the same\n"
            "                    workload on every device, side by side, with the outputs'\n"
            "                    agreement with the first device (xdev)\n"
            "  --csv FILE        one row per device, mode, n and k\n"
            "  --json FILE       the options, the devices and the same rows\n"
            "  --plot FILE.png   time and device memory against n (log-log), drawn by gnuplot from\n"
            "                    FILE.png.dat with the script FILE.png.gp (both kept, to redraw by hand)\n"
            "  -h, --help        this text\n\n"
            "Columns: rel_err = ||y - ref|| / ||ref|| against the double-precision reference;\n"
            "vs_exact = Linformer's deviation from exact attention (the flash, else dense, output\n"
            "of the same weights and input; empty when neither ran); xdev = deviation from the\n"
            "first device's output. A point that does not fit the device is reported as OOM.\n"
            "Ctrl-C stops after the forward in flight and still reports the points measured\n"
            "(exit status 130); a second Ctrl-C ends at once.\n",
            DEFAULT_SEED, DEFAULT_REF_LIMIT);
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

/* A whole decimal number in [lo, hi]. */
static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* "a,b,c" or "A..B" (doubling from A while <= B) of positive ints. */
static int parse_int_list(const char *opt, const char *s, int *out, int *count, char *err, size_t size)
{
    const char *dots = strstr(s, "..");
    *count = 0;
    if (dots) {
        char first[32];
        long a, b;
        size_t len = (size_t)(dots - s);
        if (len >= sizeof first) return fail(err, size, "%s: \"%s\" is not a range A..B", opt, s);
        memcpy(first, s, len);
        first[len] = 0;
        if (!parse_int(first, 1, INT_MAX, &a) || !parse_int(dots + 2, 1, INT_MAX, &b) || b < a)
            return fail(err, size, "%s: \"%s\" is not a range A..B of positive integers, A <= B", opt, s);
        for (long v = a; v <= b; v *= 2) {
            if (*count == BENCH_MAX_LIST) return fail(err, size, "%s: more than %d values", opt, BENCH_MAX_LIST);
            out[(*count)++] = (int)v;
        }
        return 0;
    }
    char buf[1024];
    if (strlen(s) >= sizeof buf) return fail(err, size, "%s: the list is too long", opt);
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (!parse_int(tok, 1, INT_MAX, &v))
            return fail(err, size, "%s: \"%s\" is not a positive integer", opt, tok);
        if (*count == BENCH_MAX_LIST) return fail(err, size, "%s: more than %d values", opt, BENCH_MAX_LIST);
        out[(*count)++] = (int)v;
    }
    if (*count == 0) return fail(err, size, "%s: the list is empty", opt);
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
            return fail(err, size, "--modes: \"%s\" is not linformer, dense, flash or all", tok);
        modes[m] = true;
    }
    if (!any) return fail(err, size, "--modes: the list is empty");
    return 0;
}

/* Options that take a value; `set` records which were given so that --quick
 * (wherever it stands) only fills the others. */
enum { O_N, O_K, O_D, O_H, O_B, O_MODES, O_REPEAT, O_WARMUP, O_SEED, O_REF, O_DEVICE, O_CSV, O_JSON, O_PLOT, O_COUNT };
static const char *const names[O_COUNT] = {"--n", "--k", "--d-model", "--heads", "--batch", "--modes", "--repeat",
                                           "--warmup", "--seed", "--ref-limit", "--device", "--csv", "--json", "--plot"};

static int set_int(const char *opt, const char *v, long lo, int *out, char *err, size_t size)
{
    long x;
    if (!parse_int(v, lo, INT_MAX, &x))
        return fail(err, size, "%s: \"%s\" is not an integer >= %ld", opt, v, lo);
    *out = (int)x;
    return 0;
}

static int apply(bench_options *o, int id, const char *v, char *err, size_t size)
{
    const char *opt = names[id];
    if (!*v && id != O_DEVICE) return fail(err, size, "%s: the value is empty", opt);
    switch (id) {
    case O_N: return parse_int_list(opt, v, o->ns, &o->n_count, err, size);
    case O_K: return parse_int_list(opt, v, o->ks, &o->k_count, err, size);
    case O_D: return set_int(opt, v, 1, &o->d_model, err, size);
    case O_H: return set_int(opt, v, 1, &o->heads, err, size);
    case O_B: return set_int(opt, v, 1, &o->batch, err, size);
    case O_MODES: return parse_modes(v, o->modes, err, size);
    case O_REPEAT: return set_int(opt, v, 1, &o->repeat, err, size);
    case O_WARMUP: return set_int(opt, v, 0, &o->warmup, err, size);
    case O_SEED: {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end || *v == '-') return fail(err, size, "%s: \"%s\" is not an unsigned integer", opt, v);
        o->seed = s;
        return 0;
    }
    case O_REF: {
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end || !(x >= 0)) return fail(err, size, "%s: \"%s\" is not a number >= 0", opt, v);
        o->ref_limit = x;
        return 0;
    }
    case O_DEVICE: o->device = v; return 0;
    case O_CSV: o->csv = v; return 0;
    case O_JSON: o->json = v; return 0;
    case O_PLOT: o->plot = v; return 0;
    }
    return fail(err, size, "%s: not handled", opt);
}

static void fill_defaults(bench_options *o, const bool set[O_COUNT])
{
    const bench_defaults *d = o->quick ? &quick : &full;
    if (!set[O_N] && o->quick)
        for (int n = d->n_first; n <= d->n_last; n *= 2) o->ns[o->n_count++] = n;
    if (!set[O_K]) {
        o->k_count = 2;
        o->ks[0] = d->k[0];
        o->ks[1] = d->k[1];
    }
    if (!set[O_D]) o->d_model = d->d_model;
    if (!set[O_H]) o->heads = d->heads;
    if (!set[O_B]) o->batch = 1;
    if (!set[O_MODES]) o->modes[0] = o->modes[1] = o->modes[2] = true;
    if (!set[O_REPEAT]) o->repeat = d->repeat;
    if (!set[O_WARMUP]) o->warmup = 1;
    if (!set[O_SEED]) o->seed = DEFAULT_SEED;
    if (!set[O_REF]) o->ref_limit = DEFAULT_REF_LIMIT;
}

int bench_options_parse(int argc, char **argv, bench_options *o, char *err, size_t err_size)
{
    memset(o, 0, sizeof *o);
    bool set[O_COUNT] = {false};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            o->help = true;
            continue;
        }
        if (strcmp(arg, "--quick") == 0) {
            o->quick = true;
            continue;
        }
        /* --opt VALUE or --opt=VALUE */
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        int id = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (strlen(names[j]) == len && strncmp(arg, names[j], len) == 0) id = j;
        if (id < 0) {
            if (eq) return fail(err, err_size, "unknown option \"%.*s\"", (int)len, arg);
            return fail(err, err_size, "unknown option \"%s\"", arg);
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) return fail(err, err_size, "%s needs a value", names[id]);
        if (apply(o, id, value, err, err_size) != 0) return -1;
        set[id] = true;
    }
    fill_defaults(o, set);
    if (o->d_model % o->heads != 0)
        return fail(err, err_size, "--heads: %d does not divide --d-model %d", o->heads, o->d_model);
    return 0;
}

void bench_options_default_ns(bench_options *o, bool all_gpu)
{
    if (o->n_count) return;
    const int last = all_gpu ? DEFAULT_N_LAST_GPU : full.n_last;
    for (int n = full.n_first; n <= last; n *= 2) o->ns[o->n_count++] = n;
}
