/*
 * test_limits.c - device limits and device faults. A layer whose weights or
 * workspace exceed the device's max allocation (or the share of global memory
 * the library allows itself) gives LF_ERR_OUT_OF_MEMORY with the sizes in the
 * message; no device buffer is left behind (the cl_context's reference count,
 * which every live cl_mem holds, comes back), and the context then runs a good
 * forward. OpenCL errors at enqueue and finish map to statuses that name the
 * CL error.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"
#include "layer_case.h"
#include "stages.h"

#define TOL 1e-5

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(limits, .init = setup, .fini = teardown, .timeout = 900);

static cl_uint context_refs(void)
{
    cl_uint n = 0;
    cr_assert_eq(clGetContextInfo(lf_context_cl_context(ctx), CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL),
                 CL_SUCCESS);
    return n;
}

static void good_forward(void)
{
    static const int32_t lens[] = {23, 9};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_case c;
        memset(&c, 0, sizeof c);
        lf_attention_config_init(&c.cfg, 32, 4, 40, 8);
        c.cfg.mode = (lf_mode)m;
        c.batch = 2, c.n = 23, c.lengths = lens;
        double e = lf_case_run(ctx, &c);
        cr_expect_leq(e, TOL, "good forward after a failure, mode %s: relative error %.3g", lf_mode_name((lf_mode)m), e);
    }
}

static bool contains_number(const char *msg, unsigned long long v)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", v);
    return strstr(msg, num) != NULL;
}

/* A cl_mem holds its context: the count tells whether buffers were left behind. */
Test(limits, context_refcount_counts_buffers)
{
    cl_uint before = context_refs();
    cl_int err;
    cl_mem m = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, 64, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_uint with = context_refs();
    clReleaseMemObject(m);
    cr_expect_eq(context_refs(), before);
    /* Information, not a warning: Criterion exits non-zero after any warning
     * (its --ignore-warnings aside), though every test passed. */
    if (with == before) cr_log_info("this OpenCL implementation does not count buffers in the context's references");
}

Test(limits, weights_over_max_alloc)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    /* d_model 2^20, 4096 heads of 256: the fused wq|wk|wv alone is 3 * 2^40 floats */
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_attention_config c;
        lf_attention_config_init(&c, 1 << 20, 4096, 64, 8);
        c.mode = (lf_mode)m;
        const unsigned long long need = 3ull * (1ull << 40) * sizeof(float);
        cr_assert_gt(need, info.max_alloc_bytes, "the device allows %" PRIu64 " bytes in one buffer", info.max_alloc_bytes);
        const cl_uint refs = context_refs();
        lf_attention *layer = (lf_attention *)(uintptr_t)1;
        lf_status st = lf_attention_create(ctx, &c, NULL, &layer);
        const char *msg = lf_context_last_error(ctx);
        cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY, "mode %s: %s (%s)", lf_mode_name(c.mode), lf_status_string(st), msg);
        cr_expect_null(layer);
        cr_expect(contains_number(msg, need), "the message does not give the size needed (%llu): %s", need, msg);
        cr_expect(contains_number(msg, info.max_alloc_bytes), "the message does not give the limit: %s", msg);
        cr_expect_eq(context_refs(), refs, "a failed create left device buffers behind");
    }
    /* a learned E over max alloc while the rest fits: the buffers made before it are released */
    lf_attention_config c;
    const int k = 1 << 12, n = 1 << 19; /* E, F: 2^31 floats each = 8 GiB */
    lf_attention_config_init(&c, 32, 2, n, k);
    c.sharing = LF_SHARE_HEADWISE;
    if ((unsigned long long)k * n * sizeof(float) > info.max_alloc_bytes) {
        const cl_uint refs = context_refs();
        lf_attention *layer = NULL;
        lf_status st = lf_attention_create(ctx, &c, NULL, &layer);
        cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY, "%s (%s)", lf_status_string(st), lf_context_last_error(ctx));
        cr_expect_neq(strstr(lf_context_last_error(ctx), "projections"), NULL, "%s", lf_context_last_error(ctx));
        cr_expect_eq(context_refs(), refs, "a failed create left device buffers behind");
    }
    good_forward();
}

/* A layer of config c with random weights from the test's seed. */
static lf_attention *random_layer(lf_context *on, const lf_attention_config *c)
{
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(on, c, NULL, &layer), LF_OK, "%s", lf_context_last_error(on));
    cr_assert_eq(lf_attention_init_random(layer, lf_test_seed()), LF_OK);
    return layer;
}

/* A dense layer of random weights for n rows, and a random x [n, D] and y for it. */
static lf_attention *dense_layer(lf_context *on, int D, int heads, int n, float **x, float **y)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D, heads, n, 8);
    c.mode = LF_MODE_DENSE;
    lf_attention *layer = random_layer(on, &c);
    *x = malloc((size_t)n * D * sizeof **x), *y = malloc((size_t)n * D * sizeof **y);
    cr_assert(*x && *y);
    uint64_t rng = lf_test_seed();
    lf_test_fill(*x, (size_t)n * D, &rng, -1, 1);
    return layer;
}

/* Dense attention keeps one head's n x n scores, and CLBlast may make a
 * padded copy as large: past the budget that leaves room for both, the
 * forward refuses with both sizes, before allocating them. */
Test(limits, dense_scores_over_max_alloc)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    const uint64_t budget = lf__scores_budget(&info);
    uint64_t n64 = (uint64_t)ceil(sqrt((double)budget / sizeof(float))) + 1;
    if (n64 > (1u << 24)) cr_skip_test("this device allows %" PRIu64 " bytes: n would pass 2^24", budget);
    const int n = (int)n64, D = 8;
    float *x, *y;
    lf_attention *layer = dense_layer(ctx, D, 2, n, &x, &y);
    const int32_t len = 7; /* the score matrix is n x n whatever the lengths */
    lf_status st = lf_attention_forward(layer, x, y, 1, n, &len);
    const char *msg = lf_context_last_error(ctx);
    cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY, "%s (%s)", lf_status_string(st), msg);
    const unsigned long long per_head = (unsigned long long)n * n * sizeof(float);
    cr_expect(contains_number(msg, per_head), "the message does not give the bytes needed (%llu): %s", per_head, msg);
    cr_expect(contains_number(msg, budget), "the message does not give the limit (%" PRIu64 "): %s", budget, msg);
    size_t w = 0, ws = 0;
    cr_assert_eq(lf_attention_device_bytes(layer, &w, &ws), LF_OK);
    cr_expect_lt(ws, per_head, "the score buffer was allocated anyway (%zu bytes of workspace)", ws);
    /* the same layer still runs what fits */
    lf_test_poison(y, (size_t)n * D);
    cr_expect_eq(lf_attention_forward(layer, x, y, 1, 64, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    for (size_t i = 0; i < (size_t)64 * D; i++) cr_assert(isfinite(y[i]) && y[i] != LF_POISON, "y[%zu] = %g", i, y[i]);
    free(x), free(y);
    lf_attention_free(layer);
    good_forward();
}

/* The linformer workspace over max alloc: batch x n rows of Q|K|V (pooled
 * keys and values are projected first, so the rows hold all three). The host
 * arrays are not touched before the device buffers exist, so a one-sequence
 * host array is enough to show the refusal (x is read only after that). */
Test(limits, workspace_over_max_alloc_via_device_buffers)
{
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(ctx, &info), LF_OK);
    const int D = 256, heads = 4, n = 1024;
    const unsigned long long row_bytes = 3ull * D * sizeof(float); /* Q|K|V */
    const unsigned long long batch64 = info.max_alloc_bytes / (row_bytes * n) + 1;
    /* x itself must fit one buffer: batch n D floats < max alloc since D < 3 D */
    if (batch64 * n > (1u << 30)) cr_skip_test("max alloc too large to reach with batch x n <= 2^30");
    const int batch = (int)batch64;
    const size_t xbytes = (size_t)batch * n * D * sizeof(float);
    if (xbytes > info.max_alloc_bytes || 2 * xbytes > info.global_mem_bytes / 2)
        cr_skip_test("x would not fit this device");
    lf_attention_config c;
    lf_attention_config_init(&c, D, heads, n, 16);
    c.proj_kind = LF_PROJ_MEAN_POOL;
    lf_attention *layer = random_layer(ctx, &c);
    cl_int err;
    /* device buffers are created lazily by the implementation: never written here */
    cl_mem bx = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, xbytes, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS, "%s", lf_cl_error_string(err));
    cl_mem by = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, xbytes, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS, "%s", lf_cl_error_string(err));
    lf_status st = lf_attention_forward_cl(layer, bx, by, batch, n, NULL);
    const char *msg = lf_context_last_error(ctx);
    cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY, "%s (%s)", lf_status_string(st), msg);
    const unsigned long long need = row_bytes * batch * n;
    cr_expect(contains_number(msg, need), "the message does not give the bytes needed (%llu): %s", need, msg);
    cr_expect(contains_number(msg, info.max_alloc_bytes), "the message does not give the limit: %s", msg);
    clReleaseMemObject(bx), clReleaseMemObject(by);
    lf_attention_free(layer);
    good_forward();
}

/* Enqueue failures of OpenCL calls become statuses that name the call and the error. */
Test(limits, opencl_errors_map_to_statuses)
{
    cl_mem small = NULL;
    cr_assert_eq(lf__alloc(ctx, 64, "small", &small), LF_OK);
    float data[32] = {0};
    /* a write past the end of the buffer: CL_INVALID_VALUE at enqueue */
    lf_status st = lf__upload(ctx, small, 32, data, sizeof data);
    cr_expect_eq(st, LF_ERR_OPENCL, "%s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(ctx), "clEnqueueWriteBuffer"), NULL, "%s", lf_context_last_error(ctx));
    cr_expect_neq(strstr(lf_context_last_error(ctx), "CL_INVALID_VALUE"), NULL, "%s", lf_context_last_error(ctx));
    st = lf__download(ctx, small, 64, data, 4);
    cr_expect_eq(st, LF_ERR_OPENCL, "%s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(ctx), "clEnqueueReadBuffer"), NULL, "%s", lf_context_last_error(ctx));

    /* a kernel launched with more work-items per group than the device has */
    cl_kernel k;
    cr_assert_eq(lf__kernel(ctx, "activation.cl", "", "bias_rows", &k), LF_OK, "%s", lf_context_last_error(ctx));
    lf_device_info info;
    lf_context_device_info(ctx, &info);
    size_t local[2] = {info.max_work_group_size * 2, 1}, global[2] = {info.max_work_group_size * 2, 1};
    st = lf__launch(ctx, k, "bias_rows", 2, global, local, NULL);
    cr_expect_eq(st, LF_ERR_OPENCL, "%s", lf_status_string(st));
    cr_expect_neq(strstr(lf_context_last_error(ctx), "bias_rows"), NULL, "%s", lf_context_last_error(ctx));
    cr_expect_neq(strstr(lf_context_last_error(ctx), "CL_INVALID_"), NULL, "%s", lf_context_last_error(ctx));
    lf__release(&small);

    /* the mapping every call site (enqueue, finish, wait) goes through */
    static const struct { cl_int err; lf_status st; const char *name; } map[] = {
        {CL_OUT_OF_RESOURCES, LF_ERR_OPENCL, "CL_OUT_OF_RESOURCES"},
        {CL_MEM_OBJECT_ALLOCATION_FAILURE, LF_ERR_OUT_OF_MEMORY, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
        {CL_OUT_OF_HOST_MEMORY, LF_ERR_OUT_OF_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
        {CL_INVALID_BUFFER_SIZE, LF_ERR_OUT_OF_MEMORY, "CL_INVALID_BUFFER_SIZE"},
        {CL_INVALID_COMMAND_QUEUE, LF_ERR_OPENCL, "CL_INVALID_COMMAND_QUEUE"},
        {CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, LF_ERR_OPENCL, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
        {-9999, LF_ERR_OPENCL, "CL_UNKNOWN_ERROR"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        st = lf__cl_fail(ctx, map[i].err, "clFinish");
        cr_expect_eq(st, map[i].st, "%s: %s", map[i].name, lf_status_string(st));
        cr_expect_neq(strstr(lf_context_last_error(ctx), map[i].name), NULL, "%s", lf_context_last_error(ctx));
        cr_expect_neq(strstr(lf_context_last_error(ctx), "clFinish"), NULL, "%s", lf_context_last_error(ctx));
    }
    cr_expect_eq(lf_context_finish(ctx), LF_OK, "%s", lf_context_last_error(ctx));
    good_forward();
}

/* Buffers are checked against the limit before the implementation is asked. */
Test(limits, alloc_over_max_alloc)
{
    lf_device_info info;
    lf_context_device_info(ctx, &info);
    cl_mem m = (cl_mem)(uintptr_t)1;
    const cl_uint refs = context_refs();
    lf_status st = lf__alloc(ctx, (size_t)info.max_alloc_bytes + 1, "test buffer", &m);
    cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY);
    cr_expect_null(m);
    cr_expect_neq(strstr(lf_context_last_error(ctx), "test buffer"), NULL, "%s", lf_context_last_error(ctx));
    cr_expect(contains_number(lf_context_last_error(ctx), info.max_alloc_bytes + 1), "%s", lf_context_last_error(ctx));
    st = lf__alloc(ctx, SIZE_MAX, "test buffer", &m);
    cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY);
    cr_expect_eq(context_refs(), refs);
    good_forward();
}

/* PoCL with POCL_MEMORY_LIMIT=1 allows 256 MiB in one buffer. Dense attention
 * whose scores pass the library's old budget (all of max alloc) made CLBlast
 * ask for a padded temporary over the limit, and the process died inside it;
 * now the budget leaves room for that copy: past it the forward refuses, and
 * the largest n within it runs. */
Test(limits_pocl, dense_at_the_allocation_limit, .timeout = 600)
{
    setenv("POCL_MEMORY_LIMIT", "1", 1);
    lf_context *c = lf_test_context();
    lf_device_info info;
    cr_assert_eq(lf_context_device_info(c, &info), LF_OK);
    if (!strstr(info.platform_name, "Portable Computing Language")) {
        lf_context_free(c);
        cr_skip_test("POCL_MEMORY_LIMIT is PoCL's; this device is %s", info.platform_name);
    }
    const int D = 16, big = 8192;
    const int fits = (int)floor(sqrt((double)lf__scores_budget(&info) / sizeof(float)));
    float *x, *y;
    lf_attention *layer = dense_layer(c, D, 1, big, &x, &y);
    lf_status st = lf_attention_forward(layer, x, y, 1, big, NULL);
    cr_expect_eq(st, LF_ERR_OUT_OF_MEMORY, "n %d: %s (%s)", big, lf_status_string(st), lf_context_last_error(c));
    lf_test_poison(y, (size_t)big * D);
    st = lf_attention_forward(layer, x, y, 1, fits, NULL);
    cr_expect_eq(st, LF_OK, "n %d: %s (%s)", fits, lf_status_string(st), lf_context_last_error(c));
    for (size_t i = 0; st == LF_OK && i < (size_t)fits * D; i++)
        cr_assert(isfinite(y[i]) && y[i] != LF_POISON, "y[%zu] = %g", i, y[i]);
    free(x), free(y);
    lf_attention_free(layer);
    lf_context_free(c);
}

/* ---- Under an address-space limit (ulimit -v) ----
 * On a CPU device buffers are host memory. Each case runs in a child process
 * (no OpenCL in the test's own process before the fork) that limits its own
 * address space to what it uses plus `extra`, then reports its result through
 * a pipe: a clean status with the sizes in the message, never a crash. */

typedef struct {
    int status; /* lf_status of the first failing step, LF_OK when all ran */
    int cpu;    /* the device is a CPU: its buffers are the process's memory */
    char msg[1024];
} limited_result;

static size_t address_space_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void limit_to(size_t extra)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0) _exit(90);
    rl.rlim_cur = address_space_now() + extra;
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(90);
}

/* In the child: a context opened without a limit, then `extra` more bytes
 * allowed, then a layer and one forward at n. */
static limited_result forward_limited(size_t extra, int n)
{
    limited_result r = {LF_OK, 0, ""};
    lf_context *c = NULL;
    if ((r.status = lf_context_create(NULL, &c, r.msg, sizeof r.msg)) != LF_OK) return r;
    lf_device_info info;
    lf_context_device_info(c, &info);
    r.cpu = info.type == LF_DEVICE_CPU;
    limit_to(extra);
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 512, 8, n, 256);
    lf_attention *layer = NULL;
    float *x = calloc((size_t)n * 512, sizeof *x), *y = calloc((size_t)n * 512, sizeof *y);
    r.status = x && y ? lf_attention_create(c, &cfg, NULL, &layer) : LF_ERR_OUT_OF_MEMORY;
    if (r.status == LF_OK) r.status = lf_attention_init_random(layer, 3);
    if (r.status == LF_OK) r.status = lf_attention_forward(layer, x, y, 1, n, NULL);
    snprintf(r.msg, sizeof r.msg, "%s", r.status == LF_OK ? "" : lf_context_last_error(c));
    return r; /* the child exits: nothing to free */
}

/* In the child: the limit first, then the device list. */
static limited_result list_limited(size_t extra)
{
    limited_result r = {LF_OK, 0, ""};
    limit_to(extra);
    size_t count = 0;
    r.status = lf_devices_list(NULL, 0, &count, r.msg, sizeof r.msg);
    return r;
}

/* Runs one case in a child; a crash or a hang fails the test. */
static limited_result run_limited(int which, size_t extra, int n)
{
    if (LF_TEST_UNDER_ASAN) cr_skip_test("an address-space limit does not apply under AddressSanitizer");
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        limited_result r = which ? list_limited(extra) : forward_limited(extra, n);
        _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 91);
    }
    close(fd[1]);
    limited_result r;
    memset(&r, 0, sizeof r);
    ssize_t got = read(fd[0], &r, sizeof r);
    close(fd[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d", WIFEXITED(status) ? "exited" : "died of signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    cr_assert_eq(got, (ssize_t)sizeof r);
    return r;
}

TestSuite(address_space, .timeout = 900);

Test(address_space, too_little_room_is_refused_at_create)
{
    limited_result r = run_limited(0, (size_t)64 << 20, 4096);
    if (!r.cpu) cr_skip_test("not a CPU device: its buffers are not the process's memory");
    cr_expect_eq(r.status, LF_ERR_OUT_OF_MEMORY, "%s: %s", lf_status_string(r.status), r.msg);
    cr_expect(strstr(r.msg, "RLIMIT_AS") && strstr(r.msg, "weights") && strstr(r.msg, "bytes"), "%s", r.msg);
}

Test(address_space, workspace_over_the_room_is_refused_at_forward)
{
    /* Room for the weights and the driver, not for n = 8192 rows of Q|K|V (48 MiB). */
    limited_result r = run_limited(0, (size_t)(288 + 24) << 20, 8192);
    if (!r.cpu) cr_skip_test("not a CPU device: its buffers are not the process's memory");
    cr_expect_eq(r.status, LF_ERR_OUT_OF_MEMORY, "%s: %s", lf_status_string(r.status), r.msg);
    cr_expect(strstr(r.msg, "RLIMIT_AS") && strstr(r.msg, "MiB"), "%s", r.msg);
}

Test(address_space, enough_room_runs)
{
    limited_result r = run_limited(0, (size_t)1 << 30, 512);
    cr_expect_eq(r.status, LF_OK, "%s: %s", lf_status_string(r.status), r.msg);
}

Test(address_space, listing_says_what_failed)
{
    /* Too little room for the driver's libraries, or for its device query. */
    limited_result r = run_limited(1, (size_t)32 << 20, 0);
    cr_expect_neq(r.status, LF_OK, "the devices were listed in 32 MiB more");
    cr_expect(strstr(r.msg, "clGetPlatformIDs: ") || strstr(r.msg, "clGetDeviceIDs: "), "no CL error named: %s", r.msg);
    cr_expect(strstr(r.msg, "RLIMIT_AS"), "the limit is not named: %s", r.msg);
}
