/*
 * bench_sweep.c - the measuring loop of `linformer bench`.
 *
 * The points (mode, n, k) run in the order of bench_plan: per n the exact modes
 * first (dense, then flash, which is compared with it), so that each Linformer
 * row can be compared with exact attention of the same weights and input; each
 * point runs on every device before the next, so only the first device's
 * output of the current point is kept for xdev.
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
#include "bench_data.h"
#include "bench_memory.h"
#include "bench_progress.h"

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
    r.causal = o->causal;
    r.ms_median = r.ms_min = r.ms_max = r.gflops = NAN;
    r.vs_exact = r.xdev = NAN;
    return r;
}

/* Flops and bytes of the layer as the library resolved it (d_head, kv_heads, path). */
static void row_counts(const bench_options *o, const bench_point *p, const lf_attention_config *used, bench_row *r)
{
    const bench_shape s = {.mode = p->mode, .batch = o->batch, .n = p->n, .k = p->k, .d_model = o->d_model,
                           .heads = o->heads, .d_head = used->d_head, .kv_heads = used->kv_heads,
                           .share_kv = used->share_kv != 0,
                           .scores_in_memory = p->mode == LF_MODE_DENSE ||
                                               (p->mode == LF_MODE_LINFORMER && used->path == LF_PATH_GEMM)};
    const bench_flops f = bench_count_flops(&s);
    r->flops = f.matmul;
    r->softmax_flops = f.softmax;
    r->bytes_moved = bench_count_bytes(&s);
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

/* Warm-up, then `repeat` timed forwards; ms gets the timed ones. Stops early on
 * an error or an interrupt; *timed says how many ran. */
static lf_status forwards(const bench_options *o, lf_attention *layer, cl_mem xb, cl_mem yb, int n, double *ms,
                          int *timed)
{
    lf_status st = LF_OK;
    *timed = 0;
    for (long i = 0; st == LF_OK && !stop_requested && i < (long)o->warmup + o->repeat; i++) {
        double t = 0;
        st = lf_attention_forward_cl(layer, xb, yb, o->batch, n, NULL);
        if (st == LF_OK) st = lf_attention_last_time_ms(layer, &t);
        if (st == LF_OK && i >= o->warmup) ms[(*timed)++] = t;
    }
    return st;
}

/* Warm-up, then `repeat` timed forwards on device buffers; y receives the output.
 * A row gets times only when every timed forward ran. */
static lf_status measure(const bench_options *o, bench_device *dev, const bench_point *p, const bench_weights *w,
                         const float *x, float *y, size_t count, bench_row *row, char *msg, size_t msg_size)
{
    const size_t bytes = count * sizeof(float);
    lf_attention *layer = NULL;
    cl_mem xb = NULL, yb = NULL;
    double *ms = calloc((size_t)o->repeat, sizeof *ms);
    int timed = 0;
    lf_attention_config used;
    lf_status st = ms ? bench_layer_create(dev->ctx, o, p->mode, p->n, p->k, w, &layer) : LF_ERR_OUT_OF_MEMORY;
    if (st == LF_OK && (st = lf_attention_config_get(layer, &used)) == LF_OK) row_counts(o, p, &used, row);
    if (st == LF_OK) st = device_buffer(dev->ctx, bytes, x, &xb, msg, msg_size);
    if (st == LF_OK) st = device_buffer(dev->ctx, bytes, NULL, &yb, msg, msg_size);
    if (st == LF_OK) st = forwards(o, layer, xb, yb, p->n, ms, &timed);
    if (st == LF_OK && timed < o->repeat) st = LF_ERR_STATE; /* interrupted: the caller sees stop_requested */
    if (st == LF_OK) {
        cl_int err = clEnqueueReadBuffer(lf_context_cl_queue(dev->ctx), yb, CL_TRUE, 0, bytes, y, 0, NULL, NULL);
        if (err != CL_SUCCESS) st = cl_status(err, "clEnqueueReadBuffer(y)", msg, msg_size);
    }
    if (st == LF_OK) {
        size_t weights = 0, workspace = 0;
        st = lf_attention_device_bytes(layer, &weights, &workspace);
        row->device_bytes = weights + workspace;
        time_stats(ms, timed, row);
    }
    if (st != LF_OK && !*msg) snprintf(msg, msg_size, "%s", ms ? lf_context_last_error(dev->ctx) : "out of host memory");
    if (xb) clReleaseMemObject(xb);
    if (yb) clReleaseMemObject(yb);
    lf_attention_free(layer);
    free(ms);
    return st;
}

/* ---- Accuracy: the modes against each other ---- */

/* ||out - ref|| / ||ref||. */
static double rel_diff(const float *out, const float *ref, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        const double r = (double)ref[i], d = (double)out[i] - r;
        num += d * d;
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- State of the current n ---- */

typedef struct {
    int n;
    size_t count;          /* batch * n * d_model */
    float *x, *y, *first;  /* input, the output just measured, the first device's output */
    bool first_valid;
    float **exact[2];      /* per device: the dense and the flash output of this n, or NULL */
} n_state;

static void n_state_clear(n_state *s, size_t devices)
{
    free(s->x), free(s->y), free(s->first);
    s->x = s->y = s->first = NULL;
    for (int e = 0; e < 2; e++)
        for (size_t d = 0; d < devices; d++) free(s->exact[e][d]), s->exact[e][d] = NULL;
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
    bench_input(o, n, s->x);
    return 0;
}

/* Fills the accuracy columns of a measured row and keeps what later rows compare
 * with: flash against dense; Linformer against flash, else dense. */
static int compare(n_state *s, size_t d, const bench_point *p, bench_row *row)
{
    float *dense = s->exact[0][d], *flash = s->exact[1][d];
    if (p->mode == LF_MODE_FLASH && dense) row->vs_exact = rel_diff(s->y, dense, s->count);
    if (p->mode == LF_MODE_LINFORMER && (flash || dense)) row->vs_exact = rel_diff(s->y, flash ? flash : dense, s->count);
    if (d == 0) {
        memcpy(s->first, s->y, s->count * sizeof *s->y);
        s->first_valid = true;
    } else if (s->first_valid) {
        row->xdev = rel_diff(s->y, s->first, s->count);
    }
    if (p->mode != LF_MODE_LINFORMER) {
        float **keep = &s->exact[p->mode == LF_MODE_FLASH][d];
        if (!*keep && !(*keep = malloc(s->count * sizeof(float)))) return -1;
        memcpy(*keep, s->y, s->count * sizeof(float));
    }
    return 0;
}

/* ---- The sweep ---- */

static int run_point(const bench_options *o, bench_device *devs, size_t d, const bench_point *p,
                     const bench_weights *w, n_state *s, bench_results *res, bench_progress *pg, char *err, size_t err_size)
{
    bench_row row = row_init(o, &devs[d], p);
    char msg[2048] = "";
    lf_status st = measure(o, &devs[d], p, w, s->x, s->y, s->count, &row, msg, sizeof msg);
    if (stop_requested) {
        bench_progress_clear(pg);
        return 1;
    }
    if (st != LF_OK && st != LF_ERR_OUT_OF_MEMORY) {
        bench_progress_clear(pg);
        snprintf(err, err_size, "%s n=%d k=%d on %s (%s): %s: %s", lf_mode_name(p->mode), p->n, p->k, devs[d].sel,
                 devs[d].info.device_name, lf_status_string(st), msg);
        return -1;
    }
    if (st == LF_ERR_OUT_OF_MEMORY) row.status = BENCH_OOM;
    if (st == LF_OK && compare(s, d, p, &row) != 0) {
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    if (!bench_results_add(res, &row)) {
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    bench_progress_row(pg, &row, msg);
    return 0;
}

/* A point that does not fit the host's memory: an OOM row, measured or not. */
static int oom_point(const bench_options *o, const bench_device *dev, const bench_point *p, bench_results *res,
                     bench_progress *pg, const char *why, char *err, size_t err_size)
{
    bench_row row = row_init(o, dev, p);
    row.status = BENCH_OOM;
    if (!bench_results_add(res, &row)) return snprintf(err, err_size, "out of host memory"), -1;
    bench_progress_row(pg, &row, why);
    return 0;
}

/* Whether a device's memory is the host's. */
static bool any_cpu(const bench_device *devs, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (devs[i].info.type == LF_DEVICE_CPU) return true;
    return false;
}

/* The points in order; NULL when out of memory. */
static bench_point *plan_points(const bench_options *o, size_t *count)
{
    bench_point *points = calloc((size_t)o->n_count * (2 + o->k_count) + 1, sizeof *points);
    *count = points ? bench_plan(o, points) : 0;
    return points;
}

int bench_sweep_check(const bench_options *o, const bench_device *devs, size_t ndev, char *err, size_t err_size)
{
    char oom[1024];
    if (bench_host_check_run(o, ndev, any_cpu(devs, ndev), bench_host_available(), oom, sizeof oom) != 0)
        return 0; /* no weights can be made: every point is an OOM row */
    size_t count;
    bench_point *points = plan_points(o, &count);
    bench_weights w;
    if (!points || bench_weights_make(o, &w) != 0) {
        free(points);
        snprintf(err, err_size, "out of host memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const bench_point *p = &points[i];
        for (size_t d = 0; rc == 0 && d < ndev; d++) {
            lf_attention *layer = NULL;
            const lf_status st = bench_layer_create(devs[d].ctx, o, p->mode, p->n, p->k, &w, &layer);
            lf_attention_free(layer);
            if (st != LF_OK && st != LF_ERR_OUT_OF_MEMORY) { /* too large to fit is a result, not an error */
                char k[24] = "";
                if (p->k) snprintf(k, sizeof k, " k=%d", p->k);
                snprintf(err, err_size, "%s n=%d%s cannot run on %s: %s: %s", lf_mode_name(p->mode), p->n, k,
                         devs[d].sel, lf_status_string(st), lf_context_last_error(devs[d].ctx));
                rc = -1;
            }
        }
    }
    bench_weights_free(&w);
    free(points);
    return rc;
}

int bench_sweep(const bench_options *o, bench_device *devs, size_t ndev, bench_results *res, char *err,
                size_t err_size)
{
    size_t count;
    bench_point *points = plan_points(o, &count);
    n_state s = {.n = 0, .exact = {calloc(ndev, sizeof(float *)), calloc(ndev, sizeof(float *))}};
    bench_weights w = {0};
    const double available = bench_host_available(); /* before this run holds anything */
    const bool cpu = any_cpu(devs, ndev);
    char oom[1024] = "";
    const bool have_weights = bench_host_check_run(o, ndev, cpu, available, oom, sizeof oom) == 0;
    if (!points || !s.exact[0] || !s.exact[1] || (have_weights && bench_weights_make(o, &w) != 0)) {
        snprintf(err, err_size, "out of host memory");
        free(points), free(s.exact[0]), free(s.exact[1]);
        return -1;
    }
    int rc = 0;
    bench_progress pg;
    bench_progress_start(&pg, count * ndev);
    bool fits = have_weights;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const bench_point *p = &points[i];
        if (stop_requested) {
            rc = 1;
            break;
        }
        if (p->n != s.n) { /* what this n needs, checked before it is allocated */
            const bench_need need = bench_host_need(o, p->n, ndev, cpu);
            fits = have_weights && bench_host_check(&need, available, oom, sizeof oom) == 0;
            n_state_clear(&s, ndev);
            s.n = p->n;
        }
        if (fits && !s.x && n_state_enter(&s, o, p->n, ndev) != 0) {
            snprintf(err, err_size, "out of host memory for n = %d", p->n);
            rc = -1;
            break;
        }
        s.first_valid = false;
        for (size_t d = 0; rc == 0 && d < ndev; d++)
            rc = fits ? run_point(o, devs, d, p, &w, &s, res, &pg, err, err_size)
                      : oom_point(o, &devs[d], p, res, &pg, oom, err, err_size);
    }
    n_state_clear(&s, ndev);
    free(s.exact[0]), free(s.exact[1]), free(points);
    bench_weights_free(&w);
    return rc;
}
