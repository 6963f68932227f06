/*
 * tensor_file.c - the public reader of safetensors files (lf_tensor_file_*):
 * a handle around the internal reader of safetensors.c, with a path for
 * messages and a last-error message of its own.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include "runtime.h" /* lf__fail_buf */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The public and internal dtype enums are one list; a cast converts. */
_Static_assert((int)LF_DTYPE_F32 == (int)LF_ST_F32 && (int)LF_DTYPE_F16 == (int)LF_ST_F16 &&
                   (int)LF_DTYPE_BF16 == (int)LF_ST_BF16 && (int)LF_DTYPE_F64 == (int)LF_ST_F64 &&
                   (int)LF_DTYPE_I32 == (int)LF_ST_I32 && (int)LF_DTYPE_I64 == (int)LF_ST_I64,
               "lf_dtype and lf_st_dtype must match");
_Static_assert(LF_TENSOR_MAX_DIMS == LF_ST_MAX_DIMS, "the dimension limits must match");

struct lf_tensor_file {
    lf_st_file st;
    char *path;
    char error[1024];
};

/* Records a failure in the handle's message, after the file's path. */
static lf_status fail(lf_tensor_file *file, lf_status status, const char *fmt, ...)
{
    int used = snprintf(file->error, sizeof file->error, "%s: ", file->path);
    if (used < 0 || (size_t)used >= sizeof file->error) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(file->error + used, sizeof file->error - (size_t)used, fmt, ap);
    va_end(ap);
    return status;
}

lf_status lf_tensor_file_open(const char *path, lf_tensor_file **out, char *errbuf, size_t errbuf_size)
{
    if (out) *out = NULL;
    if (!out || !path)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "lf_tensor_file_open: %s is NULL",
                            out ? "path" : "out");
    lf_tensor_file *file = calloc(1, sizeof *file);
    if (!file || !(file->path = strdup(path))) {
        free(file);
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a file handle",
                            path);
    }
    lf_status st = lf_st_open(path, &file->st, errbuf, errbuf_size);
    if (st != LF_OK) {
        lf_tensor_file_free(file);
        return st;
    }
    *out = file;
    return LF_OK;
}

void lf_tensor_file_free(lf_tensor_file *file)
{
    if (!file) return;
    lf_st_close(&file->st);
    free(file->path);
    free(file);
}

const char *lf_tensor_file_last_error(const lf_tensor_file *file)
{
    return file ? file->error : "no tensor file (NULL)";
}

size_t lf_tensor_file_count(const lf_tensor_file *file) { return file ? file->st.count : 0; }

static void describe(const lf_st_tensor *t, lf_tensor_info *info)
{
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = (lf_dtype)t->dtype;
    info->ndim = t->ndim;
    memcpy(info->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    info->count = t->count;
}

lf_status lf_tensor_file_info(lf_tensor_file *file, size_t index, lf_tensor_info *info)
{
    if (!file || !info) return LF_ERR_ARGUMENT;
    if (index >= file->st.count)
        return fail(file, LF_ERR_ARGUMENT, "tensor index %zu is out of range (the file holds %zu)", index,
                    file->st.count);
    describe(&file->st.tensors[index], info);
    return LF_OK;
}

/* The tensor called `name`, or NULL with the failure recorded. */
static const lf_st_tensor *lookup(lf_tensor_file *file, const char *name)
{
    if (!name) {
        fail(file, LF_ERR_ARGUMENT, "the tensor name is NULL");
        return NULL;
    }
    const lf_st_tensor *t = lf_st_find(&file->st, name);
    if (!t) fail(file, LF_ERR_FORMAT, "no tensor \"%s\"", name);
    return t;
}

lf_status lf_tensor_file_find(lf_tensor_file *file, const char *name, lf_tensor_info *info)
{
    if (!file || !info) return LF_ERR_ARGUMENT;
    memset(info, 0, sizeof *info);
    const lf_st_tensor *t = lookup(file, name);
    if (!t) return name ? LF_ERR_FORMAT : LF_ERR_ARGUMENT;
    describe(t, info);
    return LF_OK;
}

typedef lf_status (*convert_fn)(const lf_st_tensor *t, void *out, char *msg, size_t msg_size);

/* Checks the destination against the tensor, then converts into it. */
static lf_status read_into(lf_tensor_file *file, const char *name, void *out, size_t count,
                           convert_fn convert)
{
    if (!file) return LF_ERR_ARGUMENT;
    const lf_st_tensor *t = lookup(file, name);
    if (!t) return name ? LF_ERR_FORMAT : LF_ERR_ARGUMENT;
    if (count != t->count)
        return fail(file, LF_ERR_ARGUMENT, "tensor \"%s\" holds %zu elements, the destination %zu", name,
                    t->count, count);
    if (!out && count) return fail(file, LF_ERR_ARGUMENT, "tensor \"%s\": out is NULL", name);
    char msg[512];
    lf_status st = convert(t, out, msg, sizeof msg);
    return st == LF_OK ? LF_OK : fail(file, st, "%s", msg);
}

static lf_status to_f32(const lf_st_tensor *t, void *out, char *msg, size_t msg_size)
{
    return lf_st_to_f32(t, out, msg, msg_size);
}

static lf_status to_i64(const lf_st_tensor *t, void *out, char *msg, size_t msg_size)
{
    return lf_st_to_i64(t, out, msg, msg_size);
}

lf_status lf_tensor_file_read_f32(lf_tensor_file *file, const char *name, float *out, size_t count)
{
    return read_into(file, name, out, count, to_f32);
}

lf_status lf_tensor_file_read_i64(lf_tensor_file *file, const char *name, int64_t *out, size_t count)
{
    return read_into(file, name, out, count, to_i64);
}

const char *lf_tensor_file_metadata(const lf_tensor_file *file, const char *key)
{
    return file ? lf_st_meta(&file->st, key) : NULL;
}

const char *lf_dtype_name(lf_dtype dtype) { return lf_st_dtype_name((lf_st_dtype)dtype); }
