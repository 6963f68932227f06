/* context.c - open a device (or wrap a host's) and free it, buffers, and
 * forward timings. The public create functions add the GEMM backend
 * (blas/backend.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime.h" /* first: it fixes the OpenCL version the headers target */

#include <clblast_c.h>

/* Freed contexts' OpenCL contexts, kept for the next lf_context_create on
 * their device. CLBlast keeps its GEMM programs per cl_context for the life of
 * the process, each holding its cl_context, and can only drop them all at once
 * (CLBlastClearCache), device binaries included: without this, each context
 * created after another was freed would compile CLBlast's kernels from source
 * again (seconds on Intel's CPU runtime, which has no disk cache), and without
 * the clear every freed context would stay allocated (~5 MiB). A kept
 * cl_context is never in use by two lf_contexts at once; at most
 * LF_IDLE_CONTEXTS are kept, until the process ends. */
#define LF_IDLE_CONTEXTS 4
static struct idle_cl {
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;
} idle[LF_IDLE_CONTEXTS];
static size_t idle_count;
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;

/* Takes a kept cl_context and queue of ctx's device into ctx; false if none. */
static bool idle_take(lf_context *ctx)
{
    bool found = false;
    pthread_mutex_lock(&idle_lock);
    for (size_t i = 0; i < idle_count && !found; i++) {
        if (idle[i].device != ctx->device) continue;
        ctx->cl = idle[i].cl;
        ctx->queue = idle[i].queue;
        idle[i] = idle[--idle_count];
        found = true;
    }
    pthread_mutex_unlock(&idle_lock);
    return found;
}

/* Keeps ctx's cl_context and queue for the next context; false if full. */
static bool idle_put(const lf_context *ctx)
{
    pthread_mutex_lock(&idle_lock);
    bool kept = idle_count < LF_IDLE_CONTEXTS;
    if (kept) idle[idle_count++] = (struct idle_cl){ctx->device, ctx->cl, ctx->queue};
    pthread_mutex_unlock(&idle_lock);
    return kept;
}

static lf_status context_new(lf_context **out)
{
    lf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return LF_ERR_OUT_OF_MEMORY;
    pthread_mutex_init(&ctx->lock, NULL);
    atomic_init(&ctx->refs, 1);
    *out = ctx;
    return LF_OK;
}

lf_status lf__context_open(const char *selector, lf_context **out, char *errbuf, size_t errbuf_size)
{
    if (!out) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!selector) selector = getenv("LINFORMER_DEVICE");

    size_t count = 0;
    lf_status st = lf_devices_list(NULL, 0, &count, errbuf, errbuf_size);
    if (st != LF_OK) return st;
    lf_device_info *devs = calloc(count, sizeof *devs);
    if (!devs) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "out of host memory listing devices");
    size_t index = 0;
    st = lf_devices_list(devs, count, &count, errbuf, errbuf_size);
    if (st == LF_OK) st = lf_devices_select(selector, devs, count, &index, errbuf, errbuf_size);
    if (st != LF_OK) {
        free(devs);
        return st;
    }
    lf_device_info chosen = devs[index];
    free(devs);

    /* Find the handles again from the indices the listing used. */
    cl_platform_id platforms[16];
    cl_uint np = 0;
    cl_device_id ids[64];
    cl_uint nd = 0;
    cl_int err = clGetPlatformIDs(16, platforms, &np);
    if (err == CL_SUCCESS && chosen.platform_index < np)
        err = clGetDeviceIDs(platforms[chosen.platform_index], CL_DEVICE_TYPE_ALL, 64, ids, &nd);
    if (err != CL_SUCCESS || chosen.device_index >= nd)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_NO_DEVICE, "device %u:%u disappeared: %s",
                            chosen.platform_index, chosen.device_index, lf_cl_error_string(err));

    lf_context *ctx;
    if (context_new(&ctx) != LF_OK)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "out of host memory for the context");
    ctx->platform = platforms[chosen.platform_index];
    ctx->device = ids[chosen.device_index];
    ctx->info = chosen;
    ctx->own = true;
    if (!idle_take(ctx)) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
        ctx->cl = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
        if (err == CL_SUCCESS)
            ctx->queue = clCreateCommandQueue(ctx->cl, ctx->device, CL_QUEUE_PROFILING_ENABLE, &err);
    }
    if (err != CL_SUCCESS) {
        lf__fail_buf(errbuf, errbuf_size, LF_ERR_OPENCL, "opening \"%s\" failed: %s",
                     chosen.device_name, lf_cl_error_string(err));
        lf_context_free(ctx);
        return LF_ERR_OPENCL;
    }
    ctx->profiling = true;
    *out = ctx;
    return LF_OK;
}

lf_status lf__context_wrap(cl_context context, cl_command_queue queue, lf_context **out,
                           char *errbuf, size_t errbuf_size)
{
    if (!out) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "context is NULL");
    if (!queue) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "queue is NULL");
    cl_context qctx = NULL;
    cl_device_id dev = NULL;
    cl_command_queue_properties qprops = 0;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
    if (err == CL_SUCCESS) err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
    if (err != CL_SUCCESS)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "queue is not a valid command queue: %s",
                            lf_cl_error_string(err));
    if (qctx != context)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "queue belongs to another cl_context than context");
    if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "queue must be in order");

    lf_context *ctx;
    if (context_new(&ctx) != LF_OK)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "out of host memory for the context");
    clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof ctx->platform, &ctx->platform, NULL);
    ctx->device = dev;
    lf__device_query(ctx->platform, dev, &ctx->info);
    clRetainContext(context);
    clRetainCommandQueue(queue);
    ctx->cl = context;
    ctx->queue = queue;
    ctx->profiling = (qprops & CL_QUEUE_PROFILING_ENABLE) != 0;
    *out = ctx;
    return LF_OK;
}

void lf__context_retain(lf_context *ctx) { atomic_fetch_add(&ctx->refs, 1); }

/* Layers and projections hold their context, so a context freed before them
 * goes when the last of them does. */
void lf_context_free(lf_context *ctx)
{
    if (ctx) lf__context_release(ctx);
}

void lf__context_release(lf_context *ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) != 1) return;
    /* a queue that failed to finish is not handed to the next context */
    bool healthy = ctx->queue && clFinish(ctx->queue) == CL_SUCCESS;
    lf__programs_free(ctx);
    if (!(ctx->own && ctx->cl && healthy && idle_put(ctx))) {
        /* Releasing a cl_context: CLBlast's programs must let go of it (see idle). */
        CLBlastClearCache();
        if (ctx->queue) clReleaseCommandQueue(ctx->queue);
        if (ctx->cl) clReleaseContext(ctx->cl);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

lf_status lf_context_device_info(const lf_context *ctx, lf_device_info *info)
{
    if (!ctx || !info) return LF_ERR_ARGUMENT;
    *info = ctx->info;
    return LF_OK;
}

cl_context lf_context_cl_context(const lf_context *ctx) { return ctx ? ctx->cl : NULL; }
cl_command_queue lf_context_cl_queue(const lf_context *ctx) { return ctx ? ctx->queue : NULL; }

lf_status lf_context_finish(lf_context *ctx)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    pthread_mutex_lock(&ctx->lock);
    cl_int err = clFinish(ctx->queue);
    lf_status st = err == CL_SUCCESS ? LF_OK : lf__cl_fail(ctx, err, "clFinish");
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* ---- Buffers ---- */

lf_status lf__alloc(lf_context *ctx, size_t bytes, const char *what, cl_mem *out)
{
    *out = NULL;
    if (bytes == 0) bytes = 4; /* OpenCL refuses empty buffers */
    if (bytes > ctx->info.max_alloc_bytes)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                        "%s needs %zu bytes, over the device's max allocation of %llu bytes", what,
                        bytes, (unsigned long long)ctx->info.max_alloc_bytes);
    /* On a CPU device a buffer is host memory: checked first, and allocated
     * now (ALLOC_HOST_PTR; PoCL otherwise allocates at first use, where
     * running out crashes inside the driver). */
    bool host = ctx->info.type == LF_DEVICE_CPU;
    if (host) LF_TRY(lf__host_memory_check(ctx, bytes, what));
    cl_int err;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (host ? CL_MEM_ALLOC_HOST_PTR : 0);
    *out = clCreateBuffer(ctx->cl, flags, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "allocating %s (%zu bytes) failed: %s", what,
                        bytes, lf_cl_error_string(err));
    }
    return LF_OK;
}

lf_status lf__upload(lf_context *ctx, cl_mem dst, size_t offset, const void *src, size_t bytes)
{
    if (bytes == 0) return LF_OK;
    LF_CL_CHECK(ctx, clEnqueueWriteBuffer(ctx->queue, dst, CL_TRUE, offset, bytes, src, 0, NULL, NULL),
                "clEnqueueWriteBuffer");
    return LF_OK;
}

lf_status lf__download(lf_context *ctx, cl_mem src, size_t offset, void *dst, size_t bytes)
{
    if (bytes == 0) return LF_OK;
    LF_CL_CHECK(ctx, clEnqueueReadBuffer(ctx->queue, src, CL_TRUE, offset, bytes, dst, 0, NULL, NULL),
                "clEnqueueReadBuffer");
    return LF_OK;
}

void lf__release(cl_mem *mem)
{
    if (*mem) clReleaseMemObject(*mem);
    *mem = NULL;
}

lf_status lf__check_buffer(lf_context *ctx, cl_mem buf, size_t need, const char *what)
{
    if (!buf) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is NULL", what);
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is not a valid cl_mem: %s", what, lf_cl_error_string(err));
    if (owner != ctx->cl) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s belongs to another cl_context", what);
    if (size < need) return lf__fail(ctx, LF_ERR_ARGUMENT, "%s holds %zu bytes, needs %zu", what, size, need);
    return LF_OK;
}

lf_status lf__reserve(lf_context *ctx, cl_mem *mem, size_t *capacity, size_t bytes, const char *what)
{
    if (*mem && *capacity >= bytes) return LF_OK;
    lf__release(mem);
    *capacity = 0;
    LF_TRY(lf__alloc(ctx, bytes, what, mem));
    *capacity = bytes;
    return LF_OK;
}

/* ---- Timings ---- */

cl_event *lf__event(lf_timeline *t) { return t ? &t->pending : NULL; }

void lf__event_done(lf_timeline *t, const char *name)
{
    if (!t || !t->pending) return;
    if (t->count == t->capacity) {
        const int grown = t->capacity ? 2 * t->capacity : 64;
        lf_step *steps = realloc(t->steps, (size_t)grown * sizeof *steps);
        if (steps) {
            t->steps = steps;
            t->capacity = grown;
        } else if (t->count > 0) {
            clReleaseEvent(t->steps[--t->count].event);
            t->overflow = true;
        } else { /* nowhere to keep even one event */
            clReleaseEvent(t->pending);
            t->pending = NULL;
            t->overflow = true;
            return;
        }
    }
    t->steps[t->count++] = (lf_step){t->pending, name};
    t->pending = NULL;
}

void lf__timeline_reset(lf_timeline *t)
{
    for (int i = 0; i < t->count; i++) clReleaseEvent(t->steps[i].event);
    if (t->pending) clReleaseEvent(t->pending);
    free(t->steps);
    *t = (lf_timeline){0};
}

/* Start and end of one command, in ns, once the whole timeline has finished. */
static lf_status step_times(lf_context *ctx, cl_event e, cl_ulong *start, cl_ulong *end)
{
    LF_CL_CHECK(ctx, clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof *start, start, NULL),
                "clGetEventProfilingInfo(CL_PROFILING_COMMAND_START)");
    LF_CL_CHECK(ctx, clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof *end, end, NULL),
                "clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)");
    return LF_OK;
}

static lf_status timeline_ready(lf_context *ctx, lf_timeline *t)
{
    if (t->count == 0) return lf__fail(ctx, LF_ERR_STATE, "no forward has run yet");
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    LF_CL_CHECK(ctx, clWaitForEvents(1, &t->steps[t->count - 1].event), "clWaitForEvents");
    return LF_OK;
}

lf_status lf__timeline_ms(lf_context *ctx, lf_timeline *t, double *ms)
{
    LF_TRY(timeline_ready(ctx, t));
    cl_ulong start = 0, end = 0, s, e;
    LF_TRY(step_times(ctx, t->steps[0].event, &start, &e));
    LF_TRY(step_times(ctx, t->steps[t->count - 1].event, &s, &end));
    *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
    return LF_OK;
}

lf_status lf__timeline_stages(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity,
                              size_t *count)
{
    LF_TRY(timeline_ready(ctx, t));
    if (t->overflow)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                        "host memory ran out while the last forward's commands were listed: only its total time is kept");
    /* The queue is in order, so a command's stage gets the time from the end of
     * the command before it to its own end: that counts the kernels CLBlast runs
     * before the one whose event it returns. Every stage is named in `names`,
     * those past `capacity` too, so *count is the real number of stages. */
    const char **names = malloc((size_t)t->count * sizeof *names);
    if (!names) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    size_t n = 0;
    cl_ulong s, e;
    lf_status st = step_times(ctx, t->steps[0].event, &s, &e);
    for (int i = 0; st == LF_OK && i < t->count; i++) {
        cl_ulong prev_end = e;
        st = step_times(ctx, t->steps[i].event, &s, &e);
        if (st != LF_OK || i == 0 || !t->steps[i].name) continue;
        s = prev_end;
        size_t j = 0;
        while (j < n && strcmp(names[j], t->steps[i].name) != 0) j++;
        if (j == n) {
            names[n++] = t->steps[i].name;
            if (j < capacity) stages[j] = (lf_stage_time){t->steps[i].name, 0.0, 0};
        }
        if (j < capacity) {
            stages[j].ms += e > s ? (double)(e - s) * 1e-6 : 0.0;
            stages[j].commands++;
        }
    }
    free(names);
    if (st == LF_OK) *count = n;
    return st;
}

lf_status lf__last_time_ms(lf_context *ctx, lf_timeline *t, double *ms)
{
    if (!ms) return lf__fail(ctx, LF_ERR_ARGUMENT, "ms is NULL");
    pthread_mutex_lock(&ctx->lock);
    lf_status st = lf__timeline_ms(ctx, t, ms);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

lf_status lf__last_profile(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity, size_t *count)
{
    if (!count) return lf__fail(ctx, LF_ERR_ARGUMENT, "count is NULL");
    if (!stages && capacity) return lf__fail(ctx, LF_ERR_ARGUMENT, "stages is NULL but capacity is %zu", capacity);
    pthread_mutex_lock(&ctx->lock);
    lf_status st = lf__timeline_stages(ctx, t, stages, capacity, count);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}
