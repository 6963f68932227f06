/* test_context.c - wrapping a host's cl_context and queue. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "runtime.h"

/* ---- Plain OpenCL objects of the host application ---- */

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
} host_cl;

/* The device lf_devices_select(NULL) picks, opened with plain OpenCL calls. */
static host_cl host_open(cl_command_queue_properties props)
{
    host_cl h;
    memset(&h, 0, sizeof h);
    size_t count = 0;
    char msg[1024] = "";
    cr_assert_eq(lf_devices_list(NULL, 0, &count, msg, sizeof msg), LF_OK, "%s", msg);
    lf_device_info *devs = calloc(count, sizeof *devs);
    cr_assert_not_null(devs);
    cr_assert_eq(lf_devices_list(devs, count, &count, msg, sizeof msg), LF_OK, "%s", msg);
    size_t pick = 0;
    cr_assert_eq(lf_devices_select(getenv("LINFORMER_DEVICE"), devs, count, &pick, msg, sizeof msg), LF_OK,
                 "%s", msg);
    unsigned p = devs[pick].platform_index, d = devs[pick].device_index;
    free(devs);

    cl_platform_id platforms[16];
    cl_uint np = 0;
    cr_assert_eq(clGetPlatformIDs(16, platforms, &np), CL_SUCCESS);
    cr_assert_lt(p, np);
    cl_device_id ids[64];
    cl_uint nd = 0;
    cr_assert_eq(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 64, ids, &nd), CL_SUCCESS);
    cr_assert_lt(d, nd);
    h.platform = platforms[p];
    h.device = ids[d];
    cl_int err;
    cl_context_properties cprops[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)h.platform, 0};
    h.context = clCreateContext(cprops, 1, &h.device, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS, "clCreateContext: %s", lf_cl_error_string(err));
    h.queue = clCreateCommandQueue(h.context, h.device, props, &err);
    cr_assert_eq(err, CL_SUCCESS, "clCreateCommandQueue: %s", lf_cl_error_string(err));
    return h;
}

static cl_uint refcount_context(cl_context c)
{
    cl_uint n = 0;
    cr_assert_eq(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL), CL_SUCCESS);
    return n;
}

static cl_uint refcount_queue(cl_command_queue q)
{
    cl_uint n = 0;
    cr_assert_eq(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL), CL_SUCCESS);
    return n;
}

static lf_context *wrap(host_cl *h)
{
    lf_context *ctx = NULL;
    char msg[1024] = "";
    lf_status st = lf_context_create_from_cl(h->context, h->queue, &ctx, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), msg);
    cr_assert_not_null(ctx);
    return ctx;
}

static void host_close(host_cl *h)
{
    cr_expect_eq(clReleaseCommandQueue(h->queue), CL_SUCCESS, "the host's queue was over-released");
    cr_expect_eq(clReleaseContext(h->context), CL_SUCCESS, "the host's context was over-released");
}

/* ---- One small attention layer on two contexts ---- */

enum { D_MODEL = 32, HEADS = 2, MAX_N = 64, K = 8, BATCH = 2, N = 37 };

static lf_attention *layer_on(lf_context *ctx, uint64_t seed)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D_MODEL, HEADS, MAX_N, K);
    lf_attention *L = NULL;
    lf_status st = lf_attention_create(ctx, &c, NULL, &L);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    st = lf_attention_init_random(L, seed);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    return L;
}

static double norm(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

/* Frees what forward_matches and set_weight_and_forward_cl_on_host_buffers
 * open: each layer before its context, and the host's queue and context only
 * after the wrapped context has let go of them, as an application would. */
static void free_both_sides(host_cl *h, lf_context *wrapped, lf_attention *lw, lf_context *own, lf_attention *lo)
{
    lf_attention_free(lw);
    lf_attention_free(lo);
    lf_context_free(wrapped);
    lf_context_free(own);
    host_close(h);
}

/* The layer on the wrapped context gives what it gives on a context of its own. */
static void forward_matches(cl_command_queue_properties props)
{
    host_cl h = host_open(props);
    lf_context *wrapped = wrap(&h);
    lf_context *own = lf_test_context();
    cr_expect_eq(lf_context_cl_context(wrapped), h.context);
    cr_expect_eq(lf_context_cl_queue(wrapped), h.queue);
    lf_device_info wi, oi;
    cr_assert_eq(lf_context_device_info(wrapped, &wi), LF_OK);
    cr_assert_eq(lf_context_device_info(own, &oi), LF_OK);
    cr_expect_str_eq(wi.device_name, oi.device_name);
    cr_expect_gt(wi.max_alloc_bytes, 0, "the wrapped context does not know its device's limits");

    uint64_t state = lf_test_seed();
    uint64_t seed = lf__rand_next(&state);
    lf_attention *lw = layer_on(wrapped, seed), *lo = layer_on(own, seed);
    const size_t count = (size_t)BATCH * N * D_MODEL;
    float *x = malloc(count * sizeof *x), *yw = malloc(count * sizeof *yw), *yo = malloc(count * sizeof *yo);
    cr_assert(x && yw && yo);
    lf_test_fill(x, count, &state, -1.0f, 1.0f);
    lf_test_poison(yw, count);
    lf_test_poison(yo, count);
    const int32_t lengths[BATCH] = {N, N - 11};
    lf_status st = lf_attention_forward(lw, x, yw, BATCH, N, lengths);
    cr_assert_eq(st, LF_OK, "wrapped: %s: %s", lf_status_string(st), lf_context_last_error(wrapped));
    st = lf_attention_forward(lo, x, yo, BATCH, N, lengths);
    cr_assert_eq(st, LF_OK, "own: %s: %s", lf_status_string(st), lf_context_last_error(own));
    double e = lf_test_rel_err_f(yw, yo, count);
    cr_expect_leq(e, 1e-6, "wrapped vs own context: relative error %.3g", e);
    double e_self = lf_test_rel_err_f(yo, yo, count);
    cr_expect_leq(e_self, 0.0, "the output holds poison, NaN or inf");
    cr_expect_gt(norm(yo, count), 1e-3, "the output is (nearly) zero");
    /* Rows past the second sequence's length are zero on both. */
    for (size_t r = N - 11; r < N; r++)
        for (size_t j = 0; j < D_MODEL; j++)
            cr_expect_eq(yw[((size_t)N + r) * D_MODEL + j], 0.0f, "padded row %zu", r);

    /* Timing: only with a profiling queue. */
    double ms = -1;
    st = lf_attention_last_time_ms(lw, &ms);
    if (props & CL_QUEUE_PROFILING_ENABLE) {
        cr_expect_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(wrapped));
        cr_expect_gt(ms, 0.0, "time %g ms", ms);
        cr_expect_lt(ms, 600e3, "time %g ms", ms);
    } else {
        cr_expect_eq(st, LF_ERR_UNSUPPORTED, "got %s", lf_status_string(st));
        cr_expect_neq(strstr(lf_context_last_error(wrapped), "PROFILING"), NULL, "%s",
                      lf_context_last_error(wrapped));
    }
    st = lf_attention_last_time_ms(lo, &ms);
    cr_expect_eq(st, LF_OK);
    cr_expect_gt(ms, 0.0);

    free(x);
    free(yw);
    free(yo);
    free_both_sides(&h, wrapped, lw, own, lo);
}

TestSuite(wrapped, .timeout = 600);

Test(wrapped, forward_matches_own_context_without_profiling) { forward_matches(0); }

Test(wrapped, forward_matches_own_context_with_profiling) { forward_matches(CL_QUEUE_PROFILING_ENABLE); }

Test(wrapped, set_weight_and_forward_cl_on_host_buffers)
{
    host_cl h = host_open(0);
    lf_context *wrapped = wrap(&h);
    lf_context *own = lf_test_context();
    lf_attention_config c;
    lf_attention_config_init(&c, D_MODEL, HEADS, MAX_N, K);
    lf_attention *lw = NULL, *lo = NULL;
    cr_assert_eq(lf_attention_create(wrapped, &c, NULL, &lw), LF_OK, "%s", lf_context_last_error(wrapped));
    cr_assert_eq(lf_attention_create(own, &c, NULL, &lo), LF_OK, "%s", lf_context_last_error(own));

    /* Identical weights through lf_attention_set_weight. */
    uint64_t state = lf_test_seed();
    const size_t qd = HEADS * (D_MODEL / HEADS);
    const struct { const char *name; size_t count; float bound; } w[] = {
        {"wq", qd * D_MODEL, 0.18f}, {"wk", qd * D_MODEL, 0.18f}, {"wv", qd * D_MODEL, 0.18f},
        {"wo", (size_t)D_MODEL * qd, 0.18f}, {"bq", qd, 0.1f}, {"bk", qd, 0.1f}, {"bv", qd, 0.1f},
        {"bo", D_MODEL, 0.1f}, {"e", (size_t)K * MAX_N, 0.35f}, {"f", (size_t)K * MAX_N, 0.35f}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        float *data = malloc(w[i].count * sizeof *data);
        cr_assert_not_null(data);
        lf_test_fill(data, w[i].count, &state, -w[i].bound, w[i].bound);
        cr_assert_eq(lf_attention_set_weight(lw, w[i].name, data, w[i].count), LF_OK, "%s: %s", w[i].name,
                     lf_context_last_error(wrapped));
        cr_assert_eq(lf_attention_set_weight(lo, w[i].name, data, w[i].count), LF_OK, "%s: %s", w[i].name,
                     lf_context_last_error(own));
        free(data);
    }

    const size_t count = (size_t)BATCH * N * D_MODEL;
    const size_t bytes = count * sizeof(float);
    float *x = malloc(bytes), *yw = malloc(bytes), *yo = malloc(bytes);
    cr_assert(x && yw && yo);
    lf_test_fill(x, count, &state, -1.0f, 1.0f);
    lf_test_poison(yw, count);
    lf_test_poison(yo, count);

    /* The host's own buffers, filled and read on the host's queue. */
    cl_int err;
    cl_mem bx = clCreateBuffer(h.context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_mem by = clCreateBuffer(h.context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cr_assert_eq(clEnqueueWriteBuffer(h.queue, bx, CL_TRUE, 0, bytes, x, 0, NULL, NULL), CL_SUCCESS);
    cr_assert_eq(clEnqueueWriteBuffer(h.queue, by, CL_TRUE, 0, bytes, yw, 0, NULL, NULL), CL_SUCCESS);
    lf_status st = lf_attention_forward_cl(lw, bx, by, BATCH, N, NULL);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(wrapped));
    /* In order: a read queued next sees the forward's output. */
    cr_assert_eq(clEnqueueReadBuffer(h.queue, by, CL_TRUE, 0, bytes, yw, 0, NULL, NULL), CL_SUCCESS);
    st = lf_attention_forward(lo, x, yo, BATCH, N, NULL);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(own));
    double e = lf_test_rel_err_f(yw, yo, count);
    cr_expect_leq(e, 1e-6, "forward_cl on host buffers vs forward: relative error %.3g", e);
    cr_expect_leq(lf_test_rel_err_f(yo, yo, count), 0.0, "the output holds poison, NaN or inf");
    cr_expect_gt(norm(yo, count), 1e-3);

    /* Buffers of another context, too small, or the same one twice are refused. */
    cl_mem foreign = NULL;
    cr_assert_eq(lf__alloc(own, bytes, "foreign", &foreign), LF_OK);
    st = lf_attention_forward_cl(lw, foreign, by, BATCH, N, NULL);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "got %s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(wrapped), "x"), NULL, "%s", lf_context_last_error(wrapped));
    cl_mem small = clCreateBuffer(h.context, CL_MEM_READ_WRITE, bytes / 2, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    st = lf_attention_forward_cl(lw, bx, small, BATCH, N, NULL);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "got %s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(wrapped), "y"), NULL, "%s", lf_context_last_error(wrapped));
    cr_expect_eq(lf_attention_forward_cl(lw, bx, bx, BATCH, N, NULL), LF_ERR_ARGUMENT);
    cr_expect_eq(lf_attention_forward_cl(lw, NULL, by, BATCH, N, NULL), LF_ERR_ARGUMENT);
    lf__release(&foreign);
    clReleaseMemObject(small);

    clReleaseMemObject(bx);
    clReleaseMemObject(by);
    free(x);
    free(yw);
    free(yo);
    free_both_sides(&h, wrapped, lw, own, lo);
}

Test(wrapped, refcounts)
{
    host_cl h = host_open(CL_QUEUE_PROFILING_ENABLE);
    cl_uint c0 = refcount_context(h.context), q0 = refcount_queue(h.queue);
    lf_context *ctx = wrap(&h);
    cr_expect_eq(refcount_context(h.context), c0 + 1, "the context was not retained");
    cr_expect_eq(refcount_queue(h.queue), q0 + 1, "the queue was not retained");
    lf_context_free(ctx);
    cr_expect_eq(refcount_context(h.context), c0, "lf_context_free did not release the context once");
    cr_expect_eq(refcount_queue(h.queue), q0, "lf_context_free did not release the queue once");

    /* With a layer that ran: everything the library made is gone after the frees,
     * and the host's objects still work and release cleanly. */
    ctx = wrap(&h);
    lf_attention *L = layer_on(ctx, 7);
    float x[3 * D_MODEL], y[3 * D_MODEL];
    uint64_t state = lf_test_seed();
    lf_test_fill(x, 3 * D_MODEL, &state, -1, 1);
    cr_assert_eq(lf_attention_forward(L, x, y, 1, 3, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_attention_free(L);
    lf_context_free(ctx);
    cl_int err;
    cl_mem m = clCreateBuffer(h.context, CL_MEM_READ_WRITE, 64, NULL, &err);
    cr_expect_eq(err, CL_SUCCESS, "the host's context is unusable after lf_context_free");
    float v[16];
    lf_test_fill(v, 16, &state, -1, 1);
    cr_expect_eq(clEnqueueWriteBuffer(h.queue, m, CL_TRUE, 0, sizeof v, v, 0, NULL, NULL), CL_SUCCESS,
                 "the host's queue is unusable after lf_context_free");
    clReleaseMemObject(m);
    cr_expect_eq(clFinish(h.queue), CL_SUCCESS);
    host_close(&h);
}

Test(wrapped, bad_arguments)
{
    host_cl h = host_open(0);
    lf_context *ctx = (lf_context *)(uintptr_t)1;
    char msg[1024] = "";

    lf_status st = lf_context_create_from_cl(NULL, h.queue, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "NULL context: %s", lf_status_string(st));
    cr_expect_null(ctx);
    cr_expect_neq(strstr(msg, "context"), NULL, "message: %s", msg);

    msg[0] = 0;
    ctx = (lf_context *)(uintptr_t)1;
    st = lf_context_create_from_cl(h.context, NULL, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "NULL queue: %s", lf_status_string(st));
    cr_expect_null(ctx);
    cr_expect_neq(strstr(msg, "queue"), NULL, "message: %s", msg);

    msg[0] = 0;
    st = lf_context_create_from_cl(h.context, h.queue, NULL, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "NULL out: %s", lf_status_string(st));
    cr_expect_neq(strstr(msg, "out"), NULL, "message: %s", msg);

    /* A queue of another cl_context on the same device. */
    host_cl other = host_open(0);
    cl_uint c0 = refcount_context(h.context), q0 = refcount_queue(other.queue);
    msg[0] = 0;
    ctx = (lf_context *)(uintptr_t)1;
    st = lf_context_create_from_cl(h.context, other.queue, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_ARGUMENT, "foreign queue: %s", lf_status_string(st));
    cr_expect_null(ctx);
    cr_expect_neq(strstr(msg, "queue"), NULL, "message: %s", msg);
    cr_expect_neq(strstr(msg, "context"), NULL, "message: %s", msg);
    cr_expect_eq(refcount_context(h.context), c0, "a failed wrap kept a reference");
    cr_expect_eq(refcount_queue(other.queue), q0, "a failed wrap kept a reference");

    /* Without an error buffer. */
    cr_expect_eq(lf_context_create_from_cl(NULL, NULL, &ctx, NULL, 0), LF_ERR_ARGUMENT);

    /* An out-of-order queue, where the device offers one. */
    cl_int err;
    cl_command_queue ooo = clCreateCommandQueue(h.context, h.device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err == CL_SUCCESS) {
        msg[0] = 0;
        st = lf_context_create_from_cl(h.context, ooo, &ctx, msg, sizeof msg);
        cr_expect_eq(st, LF_ERR_ARGUMENT, "out-of-order queue: %s", lf_status_string(st));
        cr_expect_neq(strstr(msg, "order"), NULL, "message: %s", msg);
        clReleaseCommandQueue(ooo);
    }
    host_close(&other);
    host_close(&h);
}
