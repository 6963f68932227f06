/*
 * program.c - build kernels once per context and keep their binaries on disk.
 *
 * A disk entry is: magic, the key text, a checksum and the device binary. The
 * key holds everything the binary depends on (source hash, options, platform
 * version, device name, driver version). An entry that is short, corrupt or
 * for another key is rebuilt and replaced, never loaded blindly; entries are
 * written to a temporary file and renamed, so readers never see half of one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "kernels.h"

#define LF_CACHE_MAGIC "LFKCACHE1"
#define LF_MAX_KERNELS 16

typedef struct {
    char name[64];
    cl_kernel kernel;
} lf_kernel_slot;

struct lf_program_entry {
    char *file, *options;
    cl_program program;
    lf_kernel_slot kernels[LF_MAX_KERNELS];
    lf_program_entry *next;
};

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

/* ---- Sources: built in, or from LINFORMER_KERNEL_DIR ---- */

static lf_status read_file(const char *path, char **text, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return LF_ERR_IO;
    lf_status st = LF_ERR_IO;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
                buf[n] = 0;
                *text = buf;
                *size = (size_t)n;
                buf = NULL;
                st = LF_OK;
            }
        }
    }
    free(buf);
    fclose(f);
    return st;
}

static lf_status kernel_source(lf_context *ctx, const char *file, char **text, size_t *size)
{
    const char *dir = getenv("LINFORMER_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (read_file(path, text, size) != LF_OK)
            return lf__fail(ctx, LF_ERR_IO, "cannot read kernel source %s (LINFORMER_KERNEL_DIR): %s",
                            path, strerror(errno));
        return LF_OK;
    }
    for (const lf_embedded_file *s = lf_kernel_sources; s->name; s++) {
        if (strcmp(s->name, file) != 0) continue;
        *text = malloc(s->size + 1);
        if (!*text) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for %s", file);
        memcpy(*text, s->text, s->size);
        (*text)[s->size] = 0;
        *size = s->size;
        return LF_OK;
    }
    return lf__fail(ctx, LF_ERR_ARGUMENT, "no kernel source named %s in the library", file);
}

/* ---- The disk cache ---- */

bool lf__cache_dir(char *out, size_t size)
{
    const char *dir = getenv("LINFORMER_CACHE_DIR");
    if (dir && strcmp(dir, "off") == 0) return false;
    if (dir && *dir) snprintf(out, size, "%s", dir);
    else if ((dir = getenv("XDG_CACHE_HOME")) && *dir) snprintf(out, size, "%s/linformer", dir);
    else if ((dir = getenv("HOME")) && *dir) snprintf(out, size, "%s/.cache/linformer", dir);
    else return false;
    /* mkdir -p; failures show up when the entry is written */
    for (char *p = out + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(out, 0755);
        *p = '/';
    }
    mkdir(out, 0755);
    return true;
}

static char *cache_key(lf_context *ctx, const char *file, const char *text, size_t size,
                       const char *options)
{
    const char *fmt = "%s|%016llx|%s|%s|%s|%s";
    unsigned long long h = fnv1a(FNV_INIT, text, size);
    int n = snprintf(NULL, 0, fmt, file, h, options, ctx->info.platform_version,
                     ctx->info.device_name, ctx->info.driver_version);
    char *key = malloc((size_t)n + 1);
    if (key) snprintf(key, (size_t)n + 1, fmt, file, h, options, ctx->info.platform_version,
                      ctx->info.device_name, ctx->info.driver_version);
    return key;
}

void lf__cache_path(const char *dir, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s/%016llx.bin", dir, (unsigned long long)fnv1a(FNV_INIT, key, strlen(key)));
}

/* Reads an entry; returns the binary only when every check passes. */
unsigned char *lf__cache_load(const char *path, const char *key, size_t *bin_size)
{
    char *data = NULL;
    size_t size = 0;
    if (read_file(path, &data, &size) != LF_OK) return NULL;
    size_t magic = sizeof LF_CACHE_MAGIC, klen = strlen(key) + 1;
    size_t head = magic + klen + 2 * sizeof(uint64_t);
    uint64_t len, sum;
    unsigned char *bin = NULL;
    if (size > head && memcmp(data, LF_CACHE_MAGIC, magic) == 0 &&
        memcmp(data + magic, key, klen) == 0) {
        memcpy(&len, data + magic + klen, sizeof len);
        memcpy(&sum, data + magic + klen + sizeof len, sizeof sum);
        if (len == size - head && fnv1a(FNV_INIT, data + head, len) == sum &&
            (bin = malloc(len))) {
            memcpy(bin, data + head, len);
            *bin_size = len;
        }
    }
    free(data);
    return bin;
}

void lf__cache_store(const char *path, const char *key, const unsigned char *bin, size_t len)
{
    /* process and thread make the name unique among writers at the same time */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)pthread_self());
    FILE *f = fopen(tmp, "wb");
    if (!f) return; /* the cache is an optimisation: failing to write it is not an error */
    uint64_t len64 = len, sum = fnv1a(FNV_INIT, bin, len);
    bool ok = fwrite(LF_CACHE_MAGIC, 1, sizeof LF_CACHE_MAGIC, f) == sizeof LF_CACHE_MAGIC &&
              fwrite(key, 1, strlen(key) + 1, f) == strlen(key) + 1 &&
              fwrite(&len64, sizeof len64, 1, f) == 1 && fwrite(&sum, sizeof sum, 1, f) == 1 &&
              fwrite(bin, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* ---- Building ---- */

static lf_status build(lf_context *ctx, cl_program program, const char *file, const char *options)
{
    cl_int err = clBuildProgram(program, 1, &ctx->device, options, NULL, NULL);
    if (err == CL_SUCCESS) return LF_OK;
    size_t log_size = 0;
    clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
        log[0] = 0;
        clGetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        log[log_size] = 0;
    }
    lf__fail(ctx, err == CL_BUILD_PROGRAM_FAILURE ? LF_ERR_BUILD : LF_ERR_OPENCL,
             "building %s with \"%s\" failed: %s; build log:\n%s", file, options,
             lf_cl_error_string(err), log ? log : "(no memory for the log)");
    free(log);
    return err == CL_BUILD_PROGRAM_FAILURE ? LF_ERR_BUILD : LF_ERR_OPENCL;
}

static lf_status program_from_binary(lf_context *ctx, const unsigned char *bin, size_t len,
                                     const char *options, cl_program *out)
{
    cl_int status = CL_SUCCESS, err;
    cl_program p = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &len, &bin, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        if (p) clReleaseProgram(p);
        return LF_ERR_OPENCL;
    }
    if (clBuildProgram(p, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p);
        return LF_ERR_OPENCL;
    }
    *out = p;
    return LF_OK;
}

static void store_binary(lf_context *ctx, cl_program p, const char *path, const char *key)
{
    size_t len = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || !len) return;
    unsigned char *bin = malloc(len);
    if (bin && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        lf__cache_store(path, key, bin, len);
    free(bin);
}

static lf_status program_build(lf_context *ctx, const char *file, const char *options, cl_program *out)
{
    char *text = NULL;
    size_t size = 0;
    LF_TRY(kernel_source(ctx, file, &text, &size));
    char dir[4096], path[4300] = "";
    char *key = NULL;
    bool cached = lf__cache_dir(dir, sizeof dir);
    if (cached) {
        key = cache_key(ctx, file, text, size, options);
        cached = key != NULL;
    }
    if (cached) {
        lf__cache_path(dir, key, path, sizeof path);
        size_t len = 0;
        unsigned char *bin = lf__cache_load(path, key, &len);
        lf_status st = bin ? program_from_binary(ctx, bin, len, options, out) : LF_ERR_IO;
        if (bin && st != LF_OK) ctx->cache_rejected++;
        free(bin);
        if (st == LF_OK) {
            ctx->cache_hits++;
            free(key);
            free(text);
            return LF_OK;
        }
        ctx->cache_misses++;
    }
    cl_int err;
    const char *src = text;
    cl_program p = clCreateProgramWithSource(ctx->cl, 1, &src, &size, &err);
    lf_status st = err == CL_SUCCESS ? build(ctx, p, file, options)
                                     : lf__cl_fail(ctx, err, "clCreateProgramWithSource");
    if (st == LF_OK && cached) store_binary(ctx, p, path, key);
    if (st != LF_OK && p) clReleaseProgram(p);
    if (st == LF_OK) *out = p;
    free(key);
    free(text);
    return st;
}

lf_status lf__kernel(lf_context *ctx, const char *file, const char *options, const char *name,
                     cl_kernel *out)
{
    lf_program_entry *e = ctx->programs;
    while (e && (strcmp(e->file, file) != 0 || strcmp(e->options, options) != 0)) e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->file = strdup(file)) || !(e->options = strdup(options))) {
            if (e) free(e->file);
            free(e);
            return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory building %s", file);
        }
        lf_status st = program_build(ctx, file, options, &e->program);
        if (st != LF_OK) {
            free(e->file);
            free(e->options);
            free(e);
            return st;
        }
        e->next = ctx->programs;
        ctx->programs = e;
    }
    int i = 0;
    for (; i < LF_MAX_KERNELS && e->kernels[i].kernel; i++)
        if (strcmp(e->kernels[i].name, name) == 0) return *out = e->kernels[i].kernel, LF_OK;
    if (i == LF_MAX_KERNELS || strlen(name) >= sizeof e->kernels[i].name)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "kernel name %s: too many or too long", name);
    cl_int err;
    cl_kernel k = clCreateKernel(e->program, name, &err);
    if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, name);
    strcpy(e->kernels[i].name, name);
    e->kernels[i].kernel = k;
    *out = k;
    return LF_OK;
}

lf_status lf__kernel_sized(lf_context *ctx, const char *file, const char *options, const char *name,
                           const char *macro, size_t want, int dims, cl_kernel *out, size_t *size)
{
    /* start from what the device allows at all */
    size_t s = 1;
    while (s * 2 <= want && (dims == 1 ? s * 2 : s * s * 4) <= ctx->info.max_work_group_size) s *= 2;
    for (;; s /= 2) {
        char opts[256];
        snprintf(opts, sizeof opts, "%s -D%s=%zu", options, macro, s);
        LF_TRY(lf__kernel(ctx, file, opts, name, out));
        size_t allowed = 0;
        LF_CL_CHECK(ctx, clGetKernelWorkGroupInfo(*out, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof allowed,
                                                  &allowed, NULL),
                    "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
        if ((dims == 1 ? s : s * s) <= allowed || s == 1) break;
    }
    *size = s;
    return LF_OK;
}

void lf__programs_free(lf_context *ctx)
{
    while (ctx->programs) {
        lf_program_entry *e = ctx->programs;
        ctx->programs = e->next;
        for (int i = 0; i < LF_MAX_KERNELS && e->kernels[i].kernel; i++)
            clReleaseKernel(e->kernels[i].kernel);
        clReleaseProgram(e->program);
        free(e->file);
        free(e->options);
        free(e);
    }
}

lf_status lf__set_args(lf_context *ctx, cl_kernel k, const char *what, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) {
        size_t size = va_arg(ap, size_t);
        const void *value = va_arg(ap, const void *);
        cl_int err = clSetKernelArg(k, (cl_uint)i, size, value);
        if (err != CL_SUCCESS) {
            va_end(ap);
            return lf__fail(ctx, LF_ERR_OPENCL, "%s: setting argument %d failed: %s", what, i,
                            lf_cl_error_string(err));
        }
    }
    va_end(ap);
    return LF_OK;
}

lf_status lf__launch(lf_context *ctx, cl_kernel k, const char *what, cl_uint dims,
                     const size_t *global, const size_t *local, lf_timeline *t)
{
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, global, local, 0, NULL, lf__event(t));
    if (err != CL_SUCCESS) return lf__cl_fail(ctx, err, what);
    lf__event_done(t, what);
    return LF_OK;
}
