/*
 * program.c - build kernels once per context, from the sources built into the
 * library (or LINFORMER_KERNEL_DIR), through the disk cache of kernel_cache.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "kernel_cache.h"
#include "kernels.h"

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

/* ---- Sources: built in, or from LINFORMER_KERNEL_DIR ---- */

static lf_status read_source(const char *file, char **text, size_t *size, char *msg, size_t msg_size)
{
    const char *dir = getenv("LINFORMER_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (lf__read_file(path, true, text, size) != LF_OK)
            return lf__fail_buf(msg, msg_size, LF_ERR_IO, "cannot read kernel source %s (LINFORMER_KERNEL_DIR): %s",
                                path, errno == EINVAL ? "not a regular file" : strerror(errno));
        return LF_OK;
    }
    for (const lf_embedded_file *s = lf_kernel_sources; s->name; s++) {
        if (strcmp(s->name, file) != 0) continue;
        *text = malloc(s->size + 1);
        if (!*text) return lf__fail_buf(msg, msg_size, LF_ERR_OUT_OF_MEMORY, "out of host memory for %s", file);
        memcpy(*text, s->text, s->size);
        (*text)[s->size] = 0;
        *size = s->size;
        return LF_OK;
    }
    return lf__fail_buf(msg, msg_size, LF_ERR_ARGUMENT, "no kernel source named %s in the library", file);
}

/* Sources that begin with another file: the functions that several programs share. */
static const struct {
    const char *file, *prelude;
} preludes[] = {{"activation.cl", "exp_nonpos.cl"}, {"attention.cl", "exp_nonpos.cl"}};

/* A program's text: its file, after its prelude if it has one. A #line
 * between them keeps the build log's line numbers those of the file, where
 * the driver honours it (NVIDIA's 580 does not): *shift is the number of
 * lines before the file, which a build log that ignores #line adds. */
lf_status lf__kernel_text(const char *file, char **text, size_t *size, const char **prelude, size_t *shift,
                          char *msg, size_t msg_size)
{
    *prelude = NULL, *shift = 0, *text = NULL;
    for (size_t i = 0; i < sizeof preludes / sizeof preludes[0]; i++)
        if (strcmp(preludes[i].file, file) == 0) *prelude = preludes[i].prelude;
    LF_TRY(read_source(file, text, size, msg, msg_size));
    if (!*prelude) return LF_OK;
    char *first = NULL;
    size_t first_size = 0;
    lf_status st = read_source(*prelude, &first, &first_size, msg, msg_size);
    static const char line[] = "\n#line 1\n";
    char *both = st == LF_OK ? malloc(first_size + sizeof line - 1 + *size + 1) : NULL;
    if (st == LF_OK && !both)
        st = lf__fail_buf(msg, msg_size, LF_ERR_OUT_OF_MEMORY, "out of host memory for %s", file);
    if (both) {
        memcpy(both, first, first_size);
        memcpy(both + first_size, line, sizeof line - 1);
        memcpy(both + first_size + sizeof line - 1, *text, *size + 1);
        for (size_t i = 0; i < first_size + sizeof line - 1; i++) *shift += both[i] == '\n';
        *size += first_size + sizeof line - 1;
    }
    free(first);
    free(*text);
    *text = both;
    return st;
}

lf_status lf_kernel_source(const char *file, char **text, size_t *size, char *errbuf, size_t errbuf_size)
{
    if (!file || !text || !size)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "file, text or size is NULL");
    const char *prelude = NULL;
    size_t shift = 0;
    return lf__kernel_text(file, text, size, &prelude, &shift, errbuf, errbuf_size);
}

/* ---- Building ---- */

/* A program's build log without its trailing blanks, malloc'd; NULL without memory. */
static char *build_log(lf_context *ctx, cl_program p)
{
    size_t size = 0;
    clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size);
    char *log = malloc(size + 1);
    if (!log) return NULL;
    log[0] = 0;
    clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, size, log, NULL);
    log[size] = 0;
    size_t used = strlen(log);
    while (used && (log[used - 1] == '\n' || log[used - 1] == ' ')) log[--used] = 0;
    return log;
}

static lf_status build(lf_context *ctx, cl_program program, const char *file, const char *options,
                       const char *prelude, size_t shift)
{
    cl_int err = clBuildProgram(program, 1, &ctx->device, options, NULL, NULL);
    if (err == CL_SUCCESS) return LF_OK;
    char *log = build_log(ctx, program), note[256] = "";
    if (prelude)
        snprintf(note, sizeof note, "\n(%s comes first; where a log's line numbers ignore #line, %s's line L is "
                 "line L + %zu)", prelude, file, shift);
    lf__fail(ctx, err == CL_BUILD_PROGRAM_FAILURE ? LF_ERR_BUILD : LF_ERR_OPENCL,
             "building %s with \"%s\" failed: %s; build log:\n%s%s", file, options,
             lf_cl_error_string(err), log ? log : "(no memory for the log)", note);
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

void lf__build_options_for(const char *c_version, const char *options, char *out, size_t size)
{
    int major = 0, minor = 0;
    const bool c12 = sscanf(c_version, "OpenCL C %d.%d", &major, &minor) == 2 && major * 10 + minor >= 12;
    snprintf(out, size, "%s%s", c12 ? "-cl-std=CL1.2 " : "", options);
}

void lf__build_options(lf_context *ctx, const char *options, char *out, size_t size)
{
    char version[128] = "";
    clGetDeviceInfo(ctx->device, CL_DEVICE_OPENCL_C_VERSION, sizeof version, version, NULL);
    version[sizeof version - 1] = 0;
    lf__build_options_for(version, options, out, size);
}

static lf_status program_build(lf_context *ctx, const char *file, const char *kernel_options, cl_program *out)
{
    char options[512];
    lf__build_options(ctx, kernel_options, options, sizeof options);
    char *text = NULL;
    const char *prelude = NULL;
    size_t size = 0, shift = 0;
    char msg[LF_MSG_SIZE];
    const lf_status read = lf__kernel_text(file, &text, &size, &prelude, &shift, msg, sizeof msg);
    if (read != LF_OK) return lf__fail(ctx, read, "%s", msg);
    char dir[4096], path[4300] = "";
    char *key = NULL;
    bool cached = lf__cache_dir(ctx->cache_dir, dir, sizeof dir);
    if (cached) {
        key = lf__cache_key(&ctx->info, file, text, size, options);
        cached = key != NULL;
    }
    if (cached) {
        lf__cache_path(dir, key, path, sizeof path);
        unsigned char *bin = NULL;
        size_t len = 0;
        lf_cache_result found = lf__cache_load(path, key, &bin, &len);
        lf_status st = found == LF_CACHE_FOUND ? program_from_binary(ctx, bin, len, options, out) : LF_ERR_IO;
        if (found == LF_CACHE_BAD || (found == LF_CACHE_FOUND && st != LF_OK)) ctx->cache_rejected++;
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
    lf_status st = err == CL_SUCCESS ? build(ctx, p, file, options, prelude, shift)
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

/* A CPU runtime runs a work-group on one worker thread and keeps its
 * work-items' private arrays on that thread's stack: PoCL and Intel's runtime
 * both crashed on the attention kernel's groups of 8 MiB and more (1024
 * work-items of 16 KiB), while reporting 1 KiB of private memory a work-item.
 * Groups are kept well within the smallest usual stack. */
#define LF_CPU_GROUP_PRIVATE_BYTES ((size_t)1 << 20)

/* Whether built kernel k can run in work-groups of `items` work-items: the
 * kernel's own limit, the local memory it takes (its local arrays are sized
 * by its build options) within the device's, and on a CPU the private bytes
 * of the group within LF_CPU_GROUP_PRIVATE_BYTES. */
static lf_status group_fits(lf_context *ctx, cl_kernel k, size_t items, size_t item_bytes, bool *fits,
                            cl_ulong *local)
{
    size_t allowed = 0;
    LF_CL_CHECK(ctx, clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof allowed, &allowed,
                                              NULL),
                "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
    LF_CL_CHECK(ctx, clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof *local, local, NULL),
                "clGetKernelWorkGroupInfo(CL_KERNEL_LOCAL_MEM_SIZE)");
    *fits = items <= allowed && *local <= ctx->info.local_mem_bytes &&
            (ctx->info.type != LF_DEVICE_CPU || items * item_bytes <= LF_CPU_GROUP_PRIVATE_BYTES);
    return LF_OK;
}

size_t lf__group_start(size_t want, size_t per, size_t max_work_group_size)
{
    size_t s = 1;
    while (s * 2 <= want && s * 2 * per <= max_work_group_size) s *= 2;
    return s;
}

void lf__sized_options(const char *options, const char *macro, size_t s, char *out, size_t size)
{
    snprintf(out, size, "%s -D%s=%zu", options, macro, s);
}

lf_status lf__kernel_sized(lf_context *ctx, const char *file, const char *options, const char *name,
                           const char *macro, size_t want, size_t per, size_t item_bytes, cl_kernel *out,
                           size_t *size)
{
    for (size_t s = lf__group_start(want, per, ctx->info.max_work_group_size);; s /= 2) {
        char opts[256];
        lf__sized_options(options, macro, s, opts, sizeof opts);
        LF_TRY(lf__kernel(ctx, file, opts, name, out));
        bool fits = false;
        cl_ulong local = 0;
        LF_TRY(group_fits(ctx, *out, s * per, item_bytes, &fits, &local));
        if (fits) return *size = s, LF_OK;
        if (s == 1)
            return lf__fail(ctx, LF_ERR_UNSUPPORTED,
                            "%s (%s) does not run even in work-groups of one: it needs %llu bytes of local memory "
                            "(the device has %llu) and %zu private bytes a work-item",
                            name, opts, (unsigned long long)local, (unsigned long long)ctx->info.local_mem_bytes,
                            item_bytes);
    }
}

void lf__programs_each(lf_context *ctx, void (*fn)(void *user, const char *file, const char *options), void *user)
{
    for (const lf_program_entry *e = ctx->programs; e; e = e->next) fn(user, e->file, e->options);
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

/* NVIDIA's drivers since 550 write this warning of every kernel into every
 * build's log (seen on 580.159; pyFAI, John the Ripper and PyOpenCL users
 * report it too): it says nothing of the source, so it is not counted. */
#define NVIDIA_NOINLINE_NOTE "is a kernel, so overriding noinline attribute"

lf_status lf__programs_check_logs(lf_context *ctx)
{
    for (const lf_program_entry *e = ctx->programs; e; e = e->next) {
        char *log = build_log(ctx, e->program);
        if (!log) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory for the build log of %s", e->file);
        char *lower = strdup(log);
        for (char *c = lower; c && *c; c++) *c = (char)tolower((unsigned char)*c);
        bool said = !lower;
        for (char *line = lower, *end; line && !said; line = *end ? end + 1 : NULL) {
            end = line + strcspn(line, "\n");
            const char was = *end;
            *end = 0;
            said = (strstr(line, "warning") || strstr(line, "error")) && !strstr(line, NVIDIA_NOINLINE_NOTE);
            *end = was;
        }
        lf_status st = said ? lf__fail(ctx, LF_ERR_BUILD, "%s built with \"%s\" has a diagnostic in its build log:\n%s",
                                       e->file, e->options, log)
                            : LF_OK;
        free(lower);
        free(log);
        if (st != LF_OK) return st;
    }
    return LF_OK;
}
