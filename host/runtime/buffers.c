/* buffers.c - device buffers of a context: allocated within the device's
 * limits (and the host's, on a CPU device), copied in and out, checked. */
#include "runtime.h"

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

/* The buffer a cl_mem lies in (itself, or a sub-buffer's parent), and its bytes there. */
static void extent(cl_mem buf, cl_mem *root, size_t *begin, size_t *end)
{
    size_t offset = 0, size = 0;
    *root = NULL;
    clGetMemObjectInfo(buf, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof *root, root, NULL);
    if (*root) clGetMemObjectInfo(buf, CL_MEM_OFFSET, sizeof offset, &offset, NULL);
    else *root = buf;
    clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    *begin = offset, *end = offset + size;
}

static bool has_flag(cl_mem buf, cl_mem_flags flag)
{
    cl_mem_flags flags = 0;
    return clGetMemObjectInfo(buf, CL_MEM_FLAGS, sizeof flags, &flags, NULL) == CL_SUCCESS && (flags & flag);
}

lf_status lf__check_io_buffers(lf_context *ctx, cl_mem in, size_t in_bytes, const char *in_name, cl_mem out,
                               size_t out_bytes, const char *out_name)
{
    LF_TRY(lf__check_buffer(ctx, in, in_bytes, in_name));
    LF_TRY(lf__check_buffer(ctx, out, out_bytes, out_name));
    if (has_flag(in, CL_MEM_WRITE_ONLY))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is CL_MEM_WRITE_ONLY: the kernels read it", in_name);
    if (has_flag(out, CL_MEM_READ_ONLY))
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s is CL_MEM_READ_ONLY: the kernels write it", out_name);
    cl_mem in_root, out_root;
    size_t in_begin, in_end, out_begin, out_end;
    extent(in, &in_root, &in_begin, &in_end);
    extent(out, &out_root, &out_begin, &out_end);
    if (in_root == out_root && in_begin < out_end && out_begin < in_end)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "%s and %s overlap (bytes %zu to %zu and %zu to %zu of one buffer)",
                        in_name, out_name, in_begin, in_end, out_begin, out_end);
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
