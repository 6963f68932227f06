/* test_context.c - wrapping a host's cl_context and queue, and the GEMM wrapper. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "internal.h"

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
    lf_attention_free(lw);
    lf_attention_free(lo);
    lf_context_free(wrapped);
    lf_context_free(own);
    host_close(&h);
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
    lf_attention_free(lw);
    lf_attention_free(lo);
    lf_context_free(wrapped);
    lf_context_free(own);
    host_close(&h);
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

/* ---- The GEMM wrapper against a triple loop ---- */

typedef struct {
    bool ta, tb;
    size_t m, n, k;
    float alpha, beta;
    size_t a_off, lda, a_stride;
    size_t b_off, ldb, b_stride;
    size_t c_off, ldc, c_stride;
    size_t batch;
} gemm_case;

/* Elements a buffer must hold for `batch` matrices of `rows` x ld from `off`. */
static size_t span(size_t off, size_t rows, size_t ld, size_t stride, size_t batch)
{
    size_t b = batch > 1 ? batch : 1;
    return off + (b - 1) * stride + rows * ld;
}

static void run_gemm(lf_context *ctx, const gemm_case *g)
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    const size_t a_rows = g->ta ? g->k : g->m, b_rows = g->tb ? g->n : g->k;
    const size_t na = span(g->a_off, a_rows, g->lda, g->a_stride, batch);
    const size_t nb = span(g->b_off, b_rows, g->ldb, g->b_stride, batch);
    const size_t nc = span(g->c_off, g->m, g->ldc, g->c_stride, batch);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0),
          *c = malloc(nc * sizeof *c);
    cr_assert(a && b && c0 && c);
    uint64_t state = lf_test_seed();
    lf_test_fill(a, na, &state, -1, 1);
    lf_test_fill(b, nb, &state, -1, 1);
    /* Poison where beta = 0 (any value there must be ignored), else random. */
    if (g->beta == 0.0f) lf_test_poison(c0, nc);
    else lf_test_fill(c0, nc, &state, -1, 1);
    /* Outside the matrices of C stays poison either way. */
    bool *inside = calloc(nc, sizeof *inside);
    cr_assert_not_null(inside);
    for (size_t q = 0; q < batch; q++)
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) inside[g->c_off + q * g->c_stride + i * g->ldc + j] = true;
    for (size_t i = 0; i < nc; i++)
        if (!inside[i]) c0[i] = LF_POISON;

    cl_mem da, db, dc;
    cr_assert_eq(lf__alloc(ctx, na * sizeof(float), "A", &da), LF_OK);
    cr_assert_eq(lf__alloc(ctx, nb * sizeof(float), "B", &db), LF_OK);
    cr_assert_eq(lf__alloc(ctx, nc * sizeof(float), "C", &dc), LF_OK);
    cr_assert_eq(lf__upload(ctx, da, 0, a, na * sizeof(float)), LF_OK);
    cr_assert_eq(lf__upload(ctx, db, 0, b, nb * sizeof(float)), LF_OK);
    cr_assert_eq(lf__upload(ctx, dc, 0, c0, nc * sizeof(float)), LF_OK);
    lf_gemm_args args = {.trans_a = g->ta, .trans_b = g->tb, .m = g->m, .n = g->n, .k = g->k,
                         .alpha = g->alpha, .beta = g->beta,
                         .a = da, .a_off = g->a_off, .lda = g->lda, .a_stride = g->a_stride,
                         .b = db, .b_off = g->b_off, .ldb = g->ldb, .b_stride = g->b_stride,
                         .c = dc, .c_off = g->c_off, .ldc = g->ldc, .c_stride = g->c_stride,
                         .batch = g->batch};
    lf_timeline tl = {0};
    lf_status st = lf__gemm(ctx, &args, &tl);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_eq(tl.count, 1, "the GEMM's event was not recorded");
    cr_assert_eq(lf__download(ctx, dc, 0, c, nc * sizeof(float)), LF_OK);
    lf__timeline_reset(&tl);

    double *ref = malloc(g->m * g->n * sizeof *ref);
    float *got = malloc(g->m * g->n * sizeof *got);
    cr_assert(ref && got);
    for (size_t q = 0; q < batch; q++) {
        const float *A = a + g->a_off + q * g->a_stride, *B = b + g->b_off + q * g->b_stride;
        const size_t co = g->c_off + q * g->c_stride;
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) {
                double s = 0;
                for (size_t p = 0; p < g->k; p++) {
                    double av = g->ta ? A[p * g->lda + i] : A[i * g->lda + p];
                    double bv = g->tb ? B[j * g->ldb + p] : B[p * g->ldb + j];
                    s += av * bv;
                }
                ref[i * g->n + j] = g->alpha * s + (g->beta != 0.0f ? g->beta * (double)c0[co + i * g->ldc + j] : 0.0);
                got[i * g->n + j] = c[co + i * g->ldc + j];
            }
        double e = lf_test_rel_err(got, ref, g->m * g->n);
        cr_expect_lt(e, 1e-5, "GEMM %zux%zux%zu ta %d tb %d batch %zu/%zu: relative error %.3g", g->m, g->n,
                     g->k, g->ta, g->tb, q, batch, e);
    }
    size_t touched = 0;
    for (size_t i = 0; i < nc; i++)
        if (!inside[i] && c[i] != LF_POISON) touched++;
    cr_expect_eq(touched, 0, "the GEMM wrote %zu elements outside C's matrices", touched);

    free(ref);
    free(got);
    free(inside);
    lf__release(&da);
    lf__release(&db);
    lf__release(&dc);
    free(a);
    free(b);
    free(c0);
    free(c);
}

static lf_context *gctx;
static void gemm_setup(void) { gctx = lf_test_context(); }
static void gemm_teardown(void) { lf_context_free(gctx); }
TestSuite(gemm, .init = gemm_setup, .fini = gemm_teardown, .timeout = 600);

Test(gemm, plain_non_square)
{
    gemm_case g = {.m = 7, .n = 5, .k = 3, .alpha = 1, .lda = 3, .ldb = 5, .ldc = 5};
    run_gemm(gctx, &g);
    gemm_case h = {.m = 1, .n = 33, .k = 17, .alpha = 1, .lda = 17, .ldb = 33, .ldc = 33};
    run_gemm(gctx, &h);
}

Test(gemm, transposed_with_leading_dims_and_offsets)
{
    /* op(A) = A^T: A is k x m; op(B) = B^T: B is n x k. */
    gemm_case g = {.ta = true, .tb = true, .m = 13, .n = 6, .k = 9, .alpha = 0.5f,
                   .a_off = 3, .lda = 15, .b_off = 5, .ldb = 11, .c_off = 7, .ldc = 8};
    run_gemm(gctx, &g);
    gemm_case h = {.ta = false, .tb = true, .m = 10, .n = 7, .k = 12, .alpha = 1,
                   .lda = 12, .ldb = 12, .ldc = 9};
    run_gemm(gctx, &h);
    gemm_case i = {.ta = true, .tb = false, .m = 5, .n = 11, .k = 4, .alpha = -2, .beta = 0.75f,
                   .a_off = 1, .lda = 5, .ldb = 11, .c_off = 2, .ldc = 13};
    run_gemm(gctx, &i);
}

Test(gemm, strided_batched)
{
    gemm_case g = {.m = 6, .n = 5, .k = 7, .alpha = 1, .lda = 7, .a_stride = 6 * 7 + 3,
                   .ldb = 5, .b_stride = 7 * 5, .ldc = 6, .c_stride = 6 * 6 + 4, .batch = 3};
    run_gemm(gctx, &g);
    gemm_case h = {.tb = true, .m = 9, .n = 4, .k = 8, .alpha = 0.25f, .beta = 1.0f,
                   .a_off = 2, .lda = 10, .a_stride = 9 * 10, .b_off = 1, .ldb = 8, .b_stride = 4 * 8 + 1,
                   .c_off = 3, .ldc = 4, .c_stride = 9 * 4 + 2, .batch = 4};
    run_gemm(gctx, &h);
    /* Broadcast B over the batch (stride 0), as attention does with shared weights. */
    gemm_case i = {.ta = true, .m = 3, .n = 8, .k = 5, .alpha = 1, .lda = 3, .a_stride = 15,
                   .ldb = 8, .b_stride = 0, .ldc = 8, .c_stride = 24, .batch = 5};
    run_gemm(gctx, &i);
}

Test(gemm, too_small_c_is_a_blas_error)
{
    cl_mem a, b, c;
    cr_assert_eq(lf__alloc(gctx, 16 * 16 * sizeof(float), "A", &a), LF_OK);
    cr_assert_eq(lf__alloc(gctx, 16 * 16 * sizeof(float), "B", &b), LF_OK);
    cr_assert_eq(lf__alloc(gctx, 4 * sizeof(float), "C", &c), LF_OK);
    lf_gemm_args g = {.m = 16, .n = 16, .k = 16, .alpha = 1, .a = a, .lda = 16, .b = b, .ldb = 16,
                      .c = c, .ldc = 16};
    lf_status st = lf__gemm(gctx, &g, NULL);
    cr_expect_eq(st, LF_ERR_BLAS, "got %s: %s", lf_status_string(st), lf_context_last_error(gctx));
    const char *msg = lf_context_last_error(gctx);
    cr_expect_neq(strstr(msg, "CLBlast"), NULL, "message: %s", msg);
    cr_expect_neq(strstr(msg, "InsufficientMemoryC"), NULL, "message does not name the status: %s", msg);

    /* A leading dimension below the row length is refused too. */
    g.c = a;
    g.ldc = 8;
    st = lf__gemm(gctx, &g, NULL);
    cr_expect_eq(st, LF_ERR_BLAS, "got %s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(gctx), "CLBlast"), NULL, "%s", lf_context_last_error(gctx));

    /* An empty GEMM does nothing and succeeds. */
    g.m = 0;
    cr_expect_eq(lf__gemm(gctx, &g, NULL), LF_OK);
    lf__release(&a);
    lf__release(&b);
    lf__release(&c);
}

/* ---- Per-stage profile of a forward ---- */

Test(profile, size_query_gives_the_real_stage_count, .timeout = 600)
{
    lf_context *ctx = lf_test_context();
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 32, 4, 64, 8);
    cfg.path = LF_PATH_GEMM; /* the most stages: GEMMs, projections, softmax */
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, 7), LF_OK);
    size_t count = 99;
    cr_assert_eq(lf_attention_last_profile(layer, NULL, 0, &count), LF_ERR_STATE, "no forward yet");

    float *x = calloc(2 * 64 * 32, sizeof *x), *y = calloc(2 * 64 * 32, sizeof *y);
    cr_assert(x && y);
    uint64_t seed = lf_test_seed();
    lf_test_fill(x, 2 * 64 * 32, &seed, -1.0f, 1.0f);
    cr_assert_eq(lf_attention_forward(layer, x, y, 2, 64, NULL), LF_OK, "%s", lf_context_last_error(ctx));

    lf_stage_time all[64];
    size_t total = 0;
    cr_assert_eq(lf_attention_last_profile(layer, all, 64, &total), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_geq(total, 3, "a GEMM-path forward has several stages, got %zu", total);
    cr_assert_eq(lf_attention_last_profile(layer, NULL, 0, &count), LF_OK);
    cr_assert_eq(count, total, "the size query says %zu, the full list holds %zu", count, total);

    /* A short array gets the first stages, the same as the full list, and no more. */
    lf_stage_time two[3];
    memset(two, 0, sizeof two);
    cr_assert_eq(lf_attention_last_profile(layer, two, 2, &count), LF_OK);
    cr_assert_eq(count, total);
    for (int i = 0; i < 2; i++) {
        cr_assert_str_eq(two[i].stage, all[i].stage);
        cr_assert_eq(two[i].commands, all[i].commands, "%s", all[i].stage);
    }
    cr_assert(two[2].stage == NULL && two[2].commands == 0, "nothing written past capacity");
    free(x);
    free(y);
    lf_attention_free(layer);
    lf_context_free(ctx);
}
