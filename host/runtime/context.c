/* context.c - open a device (or wrap a host's) and free it. The public
 * create functions add the GEMM backend (blas/backend.c). */
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
 * LF_IDLE_CONTEXTS are kept, until the process ends. linformer.h states this
 * at lf_context_free: it is the library's one process-wide state. A forked
 * child never takes one: it opens no context (fork.c). */
#define LF_IDLE_CONTEXTS 4
static struct idle_cl {
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;
} idle[LF_IDLE_CONTEXTS];
static size_t idle_count;
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t clblast_mutex;
static pthread_once_t clblast_mutex_once = PTHREAD_ONCE_INIT;

static void clblast_mutex_init(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&clblast_mutex, &attr);
    pthread_mutexattr_destroy(&attr);
}

void lf__clblast_lock(void)
{
    pthread_once(&clblast_mutex_once, clblast_mutex_init);
    pthread_mutex_lock(&clblast_mutex);
}

void lf__clblast_unlock(void) { pthread_mutex_unlock(&clblast_mutex); }

void lf__clblast_clear_cache(void)
{
    lf__clblast_lock();
    CLBlastClearCache();
    lf__clblast_unlock();
}

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
    ctx->forks = lf__fork_count();
    *out = ctx;
    return LF_OK;
}

/* lf__context_open, under the opening lock. */
static lf_status open_held(const char *selector, lf_context **out, char *errbuf, size_t errbuf_size)
{
    size_t count = 0;
    lf_status st = lf__devices_list_held(NULL, 0, &count, errbuf, errbuf_size);
    if (st != LF_OK) return st;
    lf_device_info *devs = calloc(count, sizeof *devs);
    if (!devs) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "out of host memory listing devices");
    size_t index = 0;
    st = lf__devices_list_held(devs, count, &count, errbuf, errbuf_size);
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

lf_status lf__context_open(const char *selector, lf_context **out, char *errbuf, size_t errbuf_size)
{
    if (!out) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    LF_TRY(lf__fork_check_new(errbuf, errbuf_size));
    if (!selector) selector = getenv("LINFORMER_DEVICE");
    lf__fork_opencl_starts();
    lf__opening_lock();
    const lf_status st = open_held(selector, out, errbuf, errbuf_size);
    lf__opening_unlock();
    return st;
}

lf_status lf__context_wrap(cl_context context, cl_command_queue queue, lf_context **out,
                           char *errbuf, size_t errbuf_size)
{
    if (!out) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "context is NULL");
    if (!queue) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "queue is NULL");
    LF_TRY(lf__fork_check_new(errbuf, errbuf_size));
    lf__fork_opencl_starts();
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
    if (ctx && !lf__context_inherited(ctx)) lf__context_release(ctx);
}

bool lf__context_inherited(const lf_context *ctx) { return ctx->forks != lf__fork_count(); }

lf_status lf__context_lock(lf_context *ctx)
{
    LF_TRY(lf__fork_check(ctx));
    LF_TRY(lf__exit_enter(ctx));
    pthread_mutex_lock(&ctx->lock);
    return LF_OK;
}

void lf__context_unlock(lf_context *ctx)
{
    pthread_mutex_unlock(&ctx->lock);
    lf__exit_leave();
}

void lf__context_release(lf_context *ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) != 1) return;
    /* a queue that failed to finish is not handed to the next context */
    bool healthy = ctx->queue && clFinish(ctx->queue) == CL_SUCCESS;
    lf__programs_free(ctx);
    if (!(ctx->own && ctx->cl && healthy && idle_put(ctx))) {
        /* Releasing a cl_context: CLBlast's programs must let go of it (see idle). */
        lf__clblast_clear_cache();
        if (ctx->queue) clReleaseCommandQueue(ctx->queue);
        if (ctx->cl) clReleaseContext(ctx->cl);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->cache_dir);
    free(ctx->tuned); /* one block, no pointers in it */
    free(ctx);
}

lf_status lf_context_set_cache_dir(lf_context *ctx, const char *dir)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    char *copy = NULL;
    if (dir && !*dir) return lf__fail(ctx, LF_ERR_ARGUMENT, "cache_dir is empty (NULL: the environment's folder)");
    if (dir && !(copy = strdup(dir))) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "no memory for the cache folder's path");
    pthread_mutex_lock(&ctx->lock);
    free(ctx->cache_dir);
    ctx->cache_dir = copy;
    pthread_mutex_unlock(&ctx->lock);
    return LF_OK;
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
    LF_TRY(lf__context_lock(ctx));
    cl_int err = clFinish(ctx->queue);
    lf_status st = err == CL_SUCCESS ? LF_OK : lf__cl_fail(ctx, err, "clFinish");
    lf__context_unlock(ctx);
    return st;
}
