/*
 * bench_sweep.c - the measuring loop of `linformer bench`.
 *
 * The points (mode, n, k) run in the order of bench_plan: per n the exact modes
 * first, so that each Linformer row can be compared with exact attention of the
 * same weights and input; each point runs on every device before the next, so
 * only the first device's output of the current point is kept for xdev.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_sweep.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_count.h"
#include "internal.h"  /* lf__rand_uniform: the library's seeded generator */
#include "reference.h" /* the double-precision reference, linked into the program */

/* Set from a signal handler: the program's one piece of global state. */
static volatile sig_atomic_t stop_requested;

void bench_sweep_stop(void) { stop_requested = 1; }

/* ---- Devices ---- */

static int open_device(const char *sel, bench_device *d, char *err, size_t err_size)
{
    char msg[2048] = "";
    lf_status st = lf_context_create(sel, &d->ctx, msg, sizeof msg);
    if (st == LF_OK) st = lf_context_device_info(d->ctx, &d->info);
    if (st != LF_OK) {
        snprintf(err, err_size, "cannot open device %s: %s: %s", sel ? sel : "(default)", lf_status_string(st), msg);
        return -1;
    }
    snprintf(d->sel, sizeof d->sel, "%u:%u", d->info.platform_index, d->info.device_index);
    return 0;
}

int bench_devices_open(const char *sel, bench_device **out, size_t *count, char *err, size_t err_size)
{
    *out = NULL;
    *count = 0;
    size_t found = 1;
    lf_device_info *list = NULL;
    if (sel && strcmp(sel, "all") == 0) {
        char msg[2048] = "";
        lf_status st = lf_devices_list(NULL, 0, &found, msg, sizeof msg);
        list = st == LF_OK && found ? calloc(found, sizeof *list) : NULL;
        if (st == LF_OK && list) st = lf_devices_list(list, found, &found, msg, sizeof msg);
        if (st != LF_OK || !list) {
            snprintf(err, err_size, "cannot list devices: %s: %s", lf_status_string(st),
                     found ? msg : "no OpenCL device found");
            free(list);
            return -1;
        }
    }
    bench_device *devs = calloc(found, sizeof *devs);
    int rc = devs ? 0 : -1;
    if (!devs) snprintf(err, err_size, "out of host memory");
    for (size_t i = 0; rc == 0 && i < found; i++) {
        char pd[32];
        if (list) snprintf(pd, sizeof pd, "%u:%u", list[i].platform_index, list[i].device_index);
        rc = open_device(list ? pd : sel, &devs[i], err, err_size);
        if (rc == 0) *count = i + 1;
    }
    free(list);
    if (rc != 0) {
        bench_devices_close(devs, *count);
        *count = 0;
        return -1;
    }
    *out = devs;
    return 0;
}

void bench_devices_close(bench_device *devices, size_t count)
{
    for (size_t i = 0; devices && i < count; i++) lf_context_free(devices[i].ctx);
    free(devices);
}

/* ---- Host data: weights and input, seeded ---- */

static void fill_uniform(float *p, size_t count, uint64_t *state, double bound)
{
    for (size_t i = 0; i < count; i++) p[i] = (float)((2.0 * lf__rand_uniform(state) - 1.0) * bound);
}

enum { WQ, WK, WV, WO, BQ, BK, BV, BO, W_COUNT };
static const char *const weight_names[W_COUNT] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};

/* The weights live on the host, set with lf_attention_set_weight, so that the
 * reference sees the very numbers the device does. The distribution is that of
 * lf_attention_init_random: uniform +-1/sqrt(fan_in); fan_in = D for all four
 * (H d_head = D here). */
typedef struct {
    float *w[W_COUNT];
    size_t count[W_COUNT];
} host_weights;

static void weights_free(host_weights *hw)
{
    for (int i = 0; i < W_COUNT; i++) free(hw->w[i]);
}

static int weights_make(const bench_options *o, host_weights *hw)
{
    const size_t D = (size_t)o->d_model;
    uint64_t state = o->seed;
    memset(hw, 0, sizeof *hw);
    for (int i = 0; i < W_COUNT; i++) {
        hw->count[i] = i < BQ ? D * D : D;
        hw->w[i] = malloc(hw->count[i] * sizeof(float));
        if (!hw->w[i]) {
            weights_free(hw);
            return -1;
        }
        fill_uniform(hw->w[i], hw->count[i], &state, 1.0 / sqrt((double)D));
    }
    return 0;
}

/* ---- Points ---- */

typedef struct {
    lf_mode mode;
    int n, k; /* k = 0 for the exact modes */
} bench_point;

/* Per n: dense, flash (those selected), then Linformer per k. */
static size_t bench_plan(const bench_options *o, bench_point *out)
{
    size_t count = 0;
    for (int i = 0; i < o->n_count; i++) {
        const int n = o->ns[i];
        if (o->modes[LF_MODE_DENSE]) out[count++] = (bench_point){LF_MODE_DENSE, n, 0};
        if (o->modes[LF_MODE_FLASH]) out[count++] = (bench_point){LF_MODE_FLASH, n, 0};
        for (int j = 0; o->modes[LF_MODE_LINFORMER] && j < o->k_count; j++)
            out[count++] = (bench_point){LF_MODE_LINFORMER, n, o->ks[j]};
    }
    return count;
}

/* The layer of a point; the reference resolves the same config. The exact
 * modes ignore k (any positive value will do for the config). */
static lf_attention_config layer_config(const bench_options *o, const bench_point *p)
{
    lf_attention_config c;
    lf_attention_config_init(&c, o->d_model, o->heads, p->n, p->k ? p->k : 1);
    c.mode = p->mode;
    c.proj_kind = LF_PROJ_RANDOM;
    c.sharing = LF_SHARE_HEADWISE;
    c.seed = o->seed;
    return c;
}

static bench_row row_init(const bench_options *o, const bench_device *dev, const bench_point *p)
{
    bench_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.device, sizeof r.device, "%s", dev->sel);
    snprintf(r.device_name, sizeof r.device_name, "%s", dev->info.device_name);
    r.mode = p->mode;
    r.n = p->n;
    r.k = p->k;
    r.batch = o->batch;
    r.heads = o->heads;
    r.d_model = o->d_model;
    const int dh = o->d_model / o->heads;
    const bench_shape s = {
        .mode = p->mode, .batch = o->batch, .n = p->n, .k = p->k, .d_model = o->d_model, .heads = o->heads,
        .d_head = dh, .kv_heads = o->heads, .share_kv = false, .scores_in_memory = p->mode == LF_MODE_DENSE};
    const bench_flops f = bench_count_flops(&s);
    r.flops = f.matmul;
    r.softmax_flops = f.softmax;
    r.bytes_moved = bench_count_bytes(&s); /* measure() adds Linformer's scores when its path keeps them */
    r.ms_median = r.ms_min = r.ms_max = r.gflops = NAN;
    r.rel_err = r.vs_exact = r.xdev = NAN;
    return r;
}

/* ---- Measuring one point on one device ---- */

static lf_status cl_status(cl_int err, const char *what, char *msg, size_t msg_size)
{
    snprintf(msg, msg_size, "%s failed: %s", what, lf_cl_error_string(err));
    /* the errors the library itself reports as LF_ERR_OUT_OF_MEMORY */
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        return LF_ERR_OUT_OF_MEMORY;
    return LF_ERR_OPENCL;
}

static lf_status device_buffer(lf_context *ctx, size_t bytes, const float *init, cl_mem *out, char *msg,
                               size_t msg_size)
{
    cl_int err;
    *out = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return cl_status(err, "clCreateBuffer", msg, msg_size);
    }
    if (init) err = clEnqueueWriteBuffer(lf_context_cl_queue(ctx), *out, CL_TRUE, 0, bytes, init, 0, NULL, NULL);
    return err == CL_SUCCESS ? LF_OK : cl_status(err, "clEnqueueWriteBuffer", msg, msg_size);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void time_stats(double *ms, int count, bench_row *row)
{
    qsort(ms, (size_t)count, sizeof *ms, cmp_double);
    row->ms_min = ms[0];
    row->ms_max = ms[count - 1];
    row->ms_median = count % 2 ? ms[count / 2] : 0.5 * (ms[count / 2 - 1] + ms[count / 2]);
    row->gflops = (double)row->flops / (row->ms_median * 1e6);
}

/* Warm-up, then `repeat` timed forwards on device buffers; y receives the output. */
static lf_status measure(const bench_options *o, bench_device *dev, const bench_point *p, const host_weights *hw,
                         const float *x, float *y, size_t count, bench_row *row, char *msg, size_t msg_size)
{
    const lf_attention_config cfg = layer_config(o, p);
    const size_t bytes = count * sizeof(float);
    lf_attention *layer = NULL;
    cl_mem xb = NULL, yb = NULL;
    double *ms = calloc((size_t)o->repeat, sizeof *ms);
    lf_status st = ms ? lf_attention_create(dev->ctx, &cfg, NULL, &layer) : LF_ERR_OUT_OF_MEMORY;
    lf_attention_config used;
    if (st == LF_OK && lf_attention_config_get(layer, &used) == LF_OK && used.path == LF_PATH_GEMM) {
        const bench_shape s = {.mode = p->mode, .batch = o->batch, .n = p->n, .k = p->k, .d_model = o->d_model,
                               .heads = o->heads, .d_head = used.d_head, .kv_heads = used.kv_heads,
                               .scores_in_memory = true};
        row->bytes_moved = bench_count_bytes(&s);
    }
    for (int i = 0; st == LF_OK && i < W_COUNT; i++)
        st = lf_attention_set_weight(layer, weight_names[i], hw->w[i], hw->count[i]);
    if (st == LF_OK) st = device_buffer(dev->ctx, bytes, x, &xb, msg, msg_size);
    if (st == LF_OK) st = device_buffer(dev->ctx, bytes, NULL, &yb, msg, msg_size);
    for (int i = 0; st == LF_OK && !stop_requested && i < o->warmup + o->repeat; i++) {
        double t = 0;
        st = lf_attention_forward_cl(layer, xb, yb, o->batch, p->n, NULL);
        if (st == LF_OK) st = lf_attention_last_time_ms(layer, &t);
        if (i >= o->warmup) ms[i - o->warmup] = t;
    }
    if (st == LF_OK && stop_requested) st = LF_ERR_STATE; /* the caller sees stop_requested */
    if (st == LF_OK) {
        cl_int err = clEnqueueReadBuffer(lf_context_cl_queue(dev->ctx), yb, CL_TRUE, 0, bytes, y, 0, NULL, NULL);
        if (err != CL_SUCCESS) st = cl_status(err, "clEnqueueReadBuffer(y)", msg, msg_size);
    }
    if (st == LF_OK) {
        size_t weights = 0, workspace = 0;
        st = lf_attention_device_bytes(layer, &weights, &workspace);
        row->device_bytes = weights + workspace;
        time_stats(ms, o->repeat, row);
    }
    if (st != LF_OK && !*msg) snprintf(msg, msg_size, "%s", ms ? lf_context_last_error(dev->ctx) : "out of host memory");
    if (xb) clReleaseMemObject(xb);
    if (yb) clReleaseMemObject(yb);
    lf_attention_free(layer);
    free(ms);
    return st;
}

/* ---- Accuracy ---- */

/* ||out - ref|| / ||ref|| with ref in float (rf) or double (rd). */
static double rel_diff(const float *out, const float *rf, const double *rd, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        const double r = rf ? (double)rf[i] : rd[i], d = (double)out[i] - r;
        num += d * d;
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static bool reference_affordable(const bench_options *o, int n)
{
    return (double)o->batch * n * n * o->d_model <= o->ref_limit; /* = B H n^2 d_head */
}

/* The double-precision output of the point's layer on x; NULL when out of memory. */
static double *reference(const bench_options *o, const host_weights *hw, const float *x, const bench_point *p)
{
    lf_attention_config c = layer_config(o, p);
    lf_ref_resolve(&c);
    const size_t proj = (size_t)p->k * p->n, count = (size_t)o->batch * p->n * o->d_model;
    float *ef = p->mode == LF_MODE_LINFORMER ? malloc(2 * proj * sizeof *ef) : NULL;
    double *y = malloc(count * sizeof *y);
    if (!y || (p->mode == LF_MODE_LINFORMER && !ef)) {
        free(ef);
        free(y);
        return NULL;
    }
    if (ef) lf_ref_random_projection(ef, 2 * proj, o->seed, p->k); /* E then F, one stream, as the layer */
    const lf_ref_weights w = {hw->w[WQ], hw->w[WK], hw->w[WV], hw->w[WO], hw->w[BQ], hw->w[BK], hw->w[BV],
                              hw->w[BO], ef,         ef ? ef + proj : NULL};
    lf_ref_attention(&c, &w, NULL, x, o->batch, p->n, NULL, y);
    free(ef);
    return y;
}

/* ---- State of the current n ---- */

typedef struct {
    int n;
    size_t count;          /* batch * n * d_model */
    float *x, *y, *first;  /* input, the output just measured, the first device's output */
    bool first_valid;
    float **exact;         /* per device: the exact output of this n (flash preferred), or NULL */
    double *ref_exact;     /* the reference of the exact modes, once computed */
    bool ref_exact_tried;
} n_state;

static void n_state_clear(n_state *s, size_t devices)
{
    free(s->x), free(s->y), free(s->first), free(s->ref_exact);
    for (size_t d = 0; d < devices; d++) free(s->exact[d]), s->exact[d] = NULL;
    s->x = s->y = s->first = NULL;
    s->ref_exact = NULL;
    s->ref_exact_tried = false;
}

static int n_state_enter(n_state *s, const bench_options *o, int n, size_t devices)
{
    n_state_clear(s, devices);
    s->n = n;
    s->count = (size_t)o->batch * n * o->d_model;
    s->x = malloc(s->count * sizeof *s->x);
    s->y = malloc(s->count * sizeof *s->y);
    s->first = malloc(s->count * sizeof *s->first);
    if (!s->x || !s->y || !s->first) return -1;
    uint64_t state = o->seed ^ (0x5851f42d4c957f2dull * (uint64_t)n); /* a fresh input per n */
    fill_uniform(s->x, s->count, &state, 1.0);
    return 0;
}

/* The reference for a point: shared by the exact modes of this n, fresh for Linformer.
 * *owned tells the caller to free it. */
static double *point_reference(n_state *s, const bench_options *o, const host_weights *hw, const bench_point *p,
                               bool *owned)
{
    *owned = false;
    if (!reference_affordable(o, p->n)) return NULL;
    if (p->mode == LF_MODE_LINFORMER) {
        *owned = true;
        return reference(o, hw, s->x, p);
    }
    if (!s->ref_exact_tried) {
        const bench_point dense = {LF_MODE_DENSE, p->n, 0};
        s->ref_exact = reference(o, hw, s->x, &dense);
        s->ref_exact_tried = true;
    }
    return s->ref_exact;
}

/* Fills the accuracy columns of a measured row and keeps what later rows compare with. */
static int compare(n_state *s, size_t d, const bench_point *p, const double *ref, bench_row *row)
{
    if (ref) row->rel_err = rel_diff(s->y, NULL, ref, s->count);
    if (p->mode == LF_MODE_LINFORMER && s->exact[d]) row->vs_exact = rel_diff(s->y, s->exact[d], NULL, s->count);
    if (d == 0) {
        memcpy(s->first, s->y, s->count * sizeof *s->y);
        s->first_valid = true;
    } else if (s->first_valid) {
        row->xdev = rel_diff(s->y, s->first, NULL, s->count);
    }
    if (p->mode != LF_MODE_LINFORMER && (!s->exact[d] || p->mode == LF_MODE_FLASH)) {
        if (!s->exact[d] && !(s->exact[d] = malloc(s->count * sizeof(float)))) return -1;
        memcpy(s->exact[d], s->y, s->count * sizeof(float)); /* flash runs after dense: it wins */
    }
    return 0;
}

/* ---- Progress on stderr: a line per point, and a bar below when it is a terminal ---- */

typedef struct {
    size_t total, done;
    bool tty;
    struct timespec start;
} progress;

static double elapsed_s(const progress *pg)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - pg->start.tv_sec) + 1e-9 * (double)(now.tv_nsec - pg->start.tv_nsec);
}

static void progress_bar(const progress *pg)
{
    enum { WIDTH = 40 };
    const int fill = (int)(WIDTH * pg->done / (pg->total ? pg->total : 1));
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.0f s", fill, "########################################", WIDTH - fill, "",
            pg->done, pg->total, elapsed_s(pg));
    fflush(stderr);
}

static void progress_line(progress *pg, const bench_row *r, const char *oom_msg)
{
    pg->done++;
    if (pg->tty) fputs("\r\033[K", stderr);
    char k[16] = "-";
    if (r->k) snprintf(k, sizeof k, "%d", r->k);
    fprintf(stderr, "[%zu/%zu] %s %-9s n=%-6d k=%-5s ", pg->done, pg->total, r->device, lf_mode_name(r->mode), r->n, k);
    if (r->status == BENCH_OOM) {
        fprintf(stderr, "OOM (%s)\n", oom_msg);
    } else {
        fprintf(stderr, "%10.3f ms (min %.3f, max %.3f) %7.1f GFLOP/s", r->ms_median, r->ms_min, r->ms_max, r->gflops);
        if (!isnan(r->rel_err)) fprintf(stderr, "  rel_err %.1e", r->rel_err);
        if (!isnan(r->vs_exact)) fprintf(stderr, "  vs_exact %.2e", r->vs_exact);
        if (!isnan(r->xdev)) fprintf(stderr, "  xdev %.1e", r->xdev);
        fputc('\n', stderr);
    }
    if (pg->tty) {
        if (pg->done < pg->total)
            progress_bar(pg);
        else
            fputs("\r\033[K", stderr);
    }
}

/* ---- The sweep ---- */

static int run_point(const bench_options *o, bench_device *devs, size_t d, const bench_point *p,
                     const host_weights *hw, n_state *s, const double *ref, bench_results *res, progress *pg,
                     char *err, size_t err_size)
{
    bench_row row = row_init(o, &devs[d], p);
    char msg[2048] = "";
    lf_status st = measure(o, &devs[d], p, hw, s->x, s->y, s->count, &row, msg, sizeof msg);
    if (stop_requested) {
        if (pg->tty) fputs("\r\033[K", stderr);
        return 1;
    }
    if (st != LF_OK && st != LF_ERR_OUT_OF_MEMORY) {
        if (pg->tty) fputs("\r\033[K", stderr);
        snprintf(err, err_size, "%s n=%d k=%d on %s (%s): %s: %s", lf_mode_name(p->mode), p->n, p->k, devs[d].sel,
                 devs[d].info.device_name, lf_status_string(st), msg);
        return -1;
    }
    if (st == LF_ERR_OUT_OF_MEMORY) row.status = BENCH_OOM;
    if (st == LF_OK && compare(s, d, p, ref, &row) != 0) {
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    if (!bench_results_add(res, &row)) {
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    progress_line(pg, &row, msg);
    return 0;
}

int bench_sweep(const bench_options *o, bench_device *devs, size_t ndev, bench_results *res, char *err,
                size_t err_size)
{
    bench_point *points = calloc((size_t)o->n_count * (2 + o->k_count) + 1, sizeof *points);
    n_state s = {.n = 0, .exact = calloc(ndev, sizeof(float *))};
    host_weights hw;
    if (!points || !s.exact || weights_make(o, &hw) != 0) {
        snprintf(err, err_size, "out of host memory");
        free(points), free(s.exact);
        return -1;
    }
    int rc = 0;
    const size_t count = bench_plan(o, points);
    progress pg = {.total = count * ndev, .tty = isatty(STDERR_FILENO) == 1};
    clock_gettime(CLOCK_MONOTONIC, &pg.start);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const bench_point *p = &points[i];
        if (stop_requested) {
            rc = 1;
            break;
        }
        if (p->n != s.n && n_state_enter(&s, o, p->n, ndev) != 0) {
            snprintf(err, err_size, "out of host memory for n = %d", p->n);
            rc = -1;
            break;
        }
        bool owned;
        double *ref = point_reference(&s, o, &hw, p, &owned);
        s.first_valid = false;
        for (size_t d = 0; rc == 0 && d < ndev; d++)
            rc = run_point(o, devs, d, p, &hw, &s, ref, res, &pg, err, err_size);
        if (owned) free(ref);
    }
    n_state_clear(&s, ndev);
    free(s.exact), free(points);
    weights_free(&hw);
    return rc;
}
