/* bench_table.c - the results as a text table. */
#include "bench_table.h"

#include <math.h>
#include <string.h>

#include "bench_paper.h"

typedef char cell[24];

static const char *fmt_ms(cell c, const bench_row *r)
{
    if (!r) return "-";
    if (r->status == BENCH_OOM) return "OOM";
    snprintf(c, sizeof(cell), "%.3f", r->ms_median);
    return c;
}

static const char *fmt_ratio(cell c, double x)
{
    if (!(x > 0) || isinf(x)) return "-";
    snprintf(c, sizeof(cell), x < 10 ? "%.2fx" : "%.1fx", x);
    return c;
}

static const char *fmt_err(cell c, double x)
{
    if (isnan(x)) return "-";
    snprintf(c, sizeof(cell), "%.1e", x);
    return c;
}

static bool ok(const bench_row *r) { return r && r->status == BENCH_OK; }

/* How many times faster (smaller) Linformer is than `other`; NAN when either is missing. */
static double speedup(const bench_row *other, const bench_row *lin)
{
    return ok(other) && ok(lin) ? other->ms_median / lin->ms_median : NAN;
}

static double memory_saving(const bench_row *other, const bench_row *lin)
{
    return ok(other) && ok(lin) && lin->device_bytes ? (double)other->device_bytes / (double)lin->device_bytes : NAN;
}

static double largest(const bench_row *const rows[3], size_t offset)
{
    double m = NAN;
    for (int i = 0; i < 3; i++) {
        if (!ok(rows[i])) continue;
        const double v = *(const double *)((const char *)rows[i] + offset);
        if (!isnan(v) && (isnan(m) || v > m)) m = v;
    }
    return m;
}

static void print_line(FILE *out, const char *device, int n, int k, const bench_results *r)
{
    const bench_row *lin = k ? bench_results_find(r, device, LF_MODE_LINFORMER, n, k) : NULL;
    const bench_row *dense = bench_results_find(r, device, LF_MODE_DENSE, n, 0);
    const bench_row *flash = bench_results_find(r, device, LF_MODE_FLASH, n, 0);
    const bench_row *const rows[3] = {lin, dense, flash};
    if (!lin && !dense && !flash) return; /* not reached before an interrupt */
    double paper_t = NAN, paper_m = NAN;
    bench_paper_lookup(n, k, &paper_t, &paper_m);
    cell c[12];
    char kbuf[16] = "-";
    if (k) snprintf(kbuf, sizeof kbuf, "%d", k);
    fprintf(out, "%-6s %6d %5s %10s %10s %10s %7s %7s %6s %7s %7s %6s %9s %9s %8s\n", device, n, kbuf,
            fmt_ms(c[0], lin), fmt_ms(c[1], dense), fmt_ms(c[2], flash), fmt_ratio(c[3], speedup(dense, lin)),
            fmt_ratio(c[4], speedup(flash, lin)), fmt_ratio(c[5], paper_t), fmt_ratio(c[6], memory_saving(dense, lin)),
            fmt_ratio(c[7], memory_saving(flash, lin)), fmt_ratio(c[8], paper_m),
            fmt_err(c[9], ok(lin) ? lin->vs_exact : NAN), fmt_err(c[10], ok(flash) ? flash->vs_exact : NAN),
            fmt_err(c[11], largest(rows, offsetof(bench_row, xdev))));
}

/* " --- label ---" centred over `width` columns. */
static void group(FILE *out, int width, const char *label)
{
    const int len = (int)strlen(label) + 2, left = (width - len) / 2, right = width - len - left;
    fprintf(out, " %.*s %s %.*s", left, "--------------------------------", label, right,
            "--------------------------------");
}

/* The devices in the order they ran, each once. */
static size_t devices_of(const bench_results *r, const bench_row **first, size_t cap)
{
    size_t count = 0;
    for (size_t i = 0; i < r->count; i++) {
        bool seen = false;
        for (size_t j = 0; j < count && !seen; j++) seen = strcmp(first[j]->device, r->rows[i].device) == 0;
        if (!seen && count < cap) first[count++] = &r->rows[i];
    }
    return count;
}

void bench_table_print(FILE *out, const bench_options *o, const bench_results *r)
{
    enum { MAX_DEVICES = 64 };
    const bench_row *devs[MAX_DEVICES];
    const size_t ndev = devices_of(r, devs, MAX_DEVICES);
    fprintf(out, "Attention layer: d_model %d, heads %d, batch %d; median of %d after %d warm-up\n", o->d_model,
            o->heads, o->batch, o->repeat, o->warmup);
    if (o->causal)
        fprintf(out, "causal: every mode lets query i see positions 0..i only; Linformer rows use mean pooling\n"
                     "(slots of complete windows before i, then i's own window exactly)\n");
    for (size_t d = 0; d < ndev; d++) fprintf(out, "device %s: %s\n", devs[d]->device, devs[d]->device_name);
    fprintf(out, "\n%19s", "");
    group(out, 32, "median time (ms)");
    group(out, 22, "Linformer speed-up");
    group(out, 22, "Linformer memory");
    group(out, 19, "vs_exact");
    fputc('\n', out);
    fprintf(out, "%-6s %6s %5s %10s %10s %10s %7s %7s %6s %7s %7s %6s %9s %9s %8s\n", "device", "n", "k",
            "linformer", "dense", "flash", "/dense", "/flash", "paper", "/dense", "/flash", "paper", "linformer",
            "flash", "xdev");
    const bool lin = o->modes[LF_MODE_LINFORMER];
    for (int i = 0; i < o->n_count; i++)
        for (int j = 0; j < (lin ? o->k_count : 1); j++)
            for (size_t d = 0; d < ndev; d++) print_line(out, devs[d]->device, o->ns[i], lin ? o->ks[j] : 0, r);
    fprintf(out,
            "\nspeed-up: dense (flash) time / Linformer time. memory: device bytes the layer held (weights\n"
            "+ workspace), dense (flash) / Linformer. paper: %s:\n"
            "speed-up and memory saving over a standard Transformer; compare with /dense.\n"
            "vs_exact: relative deviation from exact attention of the same weights and input.\n"
            "  linformer: from flash (else dense). The projections E, F are random (Johnson-Lindenstrauss;\n"
            "  mean pooling with --causal), not trained, so this is large by design (0.8 to 4 in docs/benchmark.md's run, growing with n / k): it\n"
            "  measures what compressing keys and values to k rows loses on a random layer, not the\n"
            "  accuracy of a trained model, whose E and F are learned.\n"
            "  flash: from dense, the two exact modes' agreement (float rounding, about 1e-6).\n"
            "xdev: largest deviation of this row's outputs from the first device's. OOM: the point does\n"
            "not fit the device.\n",
            bench_paper_source);
}
