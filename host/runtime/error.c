/* error.c - status names, OpenCL error names, and the last-error message. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

unsigned lf_version_number(void) { return LF_VERSION_NUMBER; }
const char *lf_version_string(void) { return LF_VERSION_STRING; }

const char *lf_status_string(lf_status status)
{
    switch (status) {
    case LF_OK: return "LF_OK";
    case LF_ERR_ARGUMENT: return "LF_ERR_ARGUMENT";
    case LF_ERR_NO_DEVICE: return "LF_ERR_NO_DEVICE";
    case LF_ERR_OUT_OF_MEMORY: return "LF_ERR_OUT_OF_MEMORY";
    case LF_ERR_OPENCL: return "LF_ERR_OPENCL";
    case LF_ERR_BUILD: return "LF_ERR_BUILD";
    case LF_ERR_BLAS: return "LF_ERR_BLAS";
    case LF_ERR_IO: return "LF_ERR_IO";
    case LF_ERR_FORMAT: return "LF_ERR_FORMAT";
    case LF_ERR_STATE: return "LF_ERR_STATE";
    case LF_ERR_UNSUPPORTED: return "LF_ERR_UNSUPPORTED";
    }
    return "LF_ERR_UNKNOWN_STATUS";
}

const char *lf_cl_error_string(cl_int err)
{
    switch (err) {
#define E(name) case name: return #name;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE)
    E(CL_INVALID_HOST_PTR) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    E(CL_INVALID_IMAGE_SIZE) E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL)
    E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE)
    E(CL_INVALID_PROPERTY) E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
    E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

static lf_status vformat(char *buf, size_t size, lf_status status, const char *fmt, va_list ap)
{
    if (buf && size) vsnprintf(buf, size, fmt, ap);
    return status;
}

lf_status lf__fail_buf(char *buf, size_t size, lf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(buf, size, status, fmt, ap);
    va_end(ap);
    return status;
}

lf_status lf__fail(lf_context *ctx, lf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(ctx ? ctx->error : NULL, ctx ? sizeof ctx->error : 0, status, fmt, ap);
    va_end(ap);
    return status;
}

lf_status lf__cl_fail(lf_context *ctx, cl_int err, const char *what)
{
    lf_status st = LF_ERR_OPENCL;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
        err == CL_INVALID_BUFFER_SIZE)
        st = LF_ERR_OUT_OF_MEMORY;
    return lf__fail(ctx, st, "%s failed: %s (%d)", what, lf_cl_error_string(err), (int)err);
}

const char *lf_context_last_error(const lf_context *ctx)
{
    return ctx ? ctx->error : "no context (NULL)";
}
