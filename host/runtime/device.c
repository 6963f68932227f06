/* device.c - enumerate OpenCL devices and choose one from a selector string. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime.h"

#define LF_MAX_PLATFORMS 16
#define LF_MAX_DEVICES 64

static void query_string(cl_device_id d, cl_device_info what, char *out, size_t size)
{
    out[0] = 0;
    if (clGetDeviceInfo(d, what, size, out, NULL) != CL_SUCCESS) out[0] = 0;
    out[size - 1] = 0;
}

/* A number the device reports, 0 when it does not answer. Each type has its
 * own: the size passed must be the size of the type the query returns. */
static cl_ulong query_ulong(cl_device_id d, cl_device_info what)
{
    cl_ulong v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static cl_uint query_uint(cl_device_id d, cl_device_info what)
{
    cl_uint v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static size_t query_size(cl_device_id d, cl_device_info what)
{
    size_t v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

void lf__device_query(cl_platform_id platform, cl_device_id device, lf_device_info *info)
{
    memset(info, 0, sizeof *info);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof info->platform_name,
                      info->platform_name, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof info->platform_version,
                      info->platform_version, NULL);
    info->platform_name[sizeof info->platform_name - 1] = 0;
    info->platform_version[sizeof info->platform_version - 1] = 0;
    clGetPlatformInfo(platform, CL_PLATFORM_VENDOR, sizeof info->platform_vendor,
                      info->platform_vendor, NULL);
    info->platform_vendor[sizeof info->platform_vendor - 1] = 0;
    query_string(device, CL_DEVICE_NAME, info->device_name, sizeof info->device_name);
    query_string(device, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    query_string(device, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);

    /* One type a device: the first of GPU, accelerator, CPU that it reports
     * (Oclgrind reports ACCELERATOR|GPU|CPU: a GPU). The default selector and
     * the kernel variant (plan.h) go by it. */
    cl_device_type type = 0;
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU)           ? LF_DEVICE_GPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? LF_DEVICE_ACCELERATOR
                 : (type & CL_DEVICE_TYPE_CPU)         ? LF_DEVICE_CPU
                                                       : LF_DEVICE_OTHER;
    info->global_mem_bytes = query_ulong(device, CL_DEVICE_GLOBAL_MEM_SIZE);
    info->max_alloc_bytes = query_ulong(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    info->local_mem_bytes = query_ulong(device, CL_DEVICE_LOCAL_MEM_SIZE);
    info->compute_units = query_uint(device, CL_DEVICE_MAX_COMPUTE_UNITS);
    info->max_work_group_size = query_size(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    info->float_vector_width = query_uint(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);

    size_t ext_size = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size) == CL_SUCCESS &&
        ext_size > 0) {
        char *ext = malloc(ext_size + 1);
        if (ext && clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL) == CL_SUCCESS) {
            ext[ext_size] = 0;
            info->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
            info->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
        }
        free(ext);
    }
}

/* Why no platform or device was found, when a memory limit may be the cause:
 * an OpenCL driver that cannot map its libraries is skipped without a word. */
static const char *limit_note(char *buf, size_t size)
{
    size_t limit = lf__address_space_limit();
    if (!limit) return "";
    snprintf(buf, size, "; the address-space limit (RLIMIT_AS, ulimit -v) is %.1f MiB: the driver may lack "
             "the memory it needs", (double)limit / (1 << 20));
    return buf;
}

/* Fills out (up to capacity) with the devices of platform p; returns how many
 * it has, 0 with *err set when clGetDeviceIDs fails. */
static size_t platform_devices(cl_platform_id platform, cl_uint p, lf_device_info *out, size_t capacity,
                               cl_int *err)
{
    cl_device_id devs[LF_MAX_DEVICES];
    cl_uint nd = 0;
    *err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, LF_MAX_DEVICES, devs, &nd);
    if (*err != CL_SUCCESS) return 0; /* a platform without devices is not an error */
    if (nd > LF_MAX_DEVICES) nd = LF_MAX_DEVICES;
    for (cl_uint d = 0; d < nd && d < capacity; d++) {
        lf__device_query(platform, devs[d], &out[d]);
        out[d].platform_index = p;
        out[d].device_index = d;
    }
    return nd;
}

lf_status lf__devices_list_held(lf_device_info *out, size_t capacity, size_t *count, char *errbuf, size_t errbuf_size)
{
    cl_platform_id platforms[LF_MAX_PLATFORMS];
    cl_uint np = 0;
    char note[160], unloaded[2048];
    cl_int err = clGetPlatformIDs(LF_MAX_PLATFORMS, platforms, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: an ICD loader with no driver */ || (err == CL_SUCCESS && np == 0))
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_NO_DEVICE,
                            "no OpenCL platform found (clGetPlatformIDs: %s; is an OpenCL driver installed, "
                            "e.g. pocl-opencl-icd?)%s%s",
                            err == CL_SUCCESS ? "no platform" : lf_cl_error_string(err),
                            limit_note(note, sizeof note), lf__unloaded_note(unloaded, sizeof unloaded));
    if (err != CL_SUCCESS)
        return lf__fail_buf(errbuf, errbuf_size, err == CL_OUT_OF_HOST_MEMORY ? LF_ERR_OUT_OF_MEMORY : LF_ERR_OPENCL,
                            "clGetPlatformIDs failed: %s%s", lf_cl_error_string(err), limit_note(note, sizeof note));
    if (np > LF_MAX_PLATFORMS) np = LF_MAX_PLATFORMS;
    size_t found = 0;
    cl_int last_err = CL_SUCCESS;
    for (cl_uint p = 0; p < np; p++) {
        cl_int e;
        bool room = found < capacity;
        found += platform_devices(platforms[p], p, room ? out + found : NULL, room ? capacity - found : 0, &e);
        if (e != CL_SUCCESS) last_err = e;
    }
    *count = found;
    if (found == 0)
        return lf__fail_buf(errbuf, errbuf_size, last_err == CL_OUT_OF_HOST_MEMORY ? LF_ERR_OUT_OF_MEMORY : LF_ERR_NO_DEVICE,
                            "no OpenCL device found on %u platform(s) (clGetDeviceIDs: %s)%s%s", np,
                            lf_cl_error_string(last_err), limit_note(note, sizeof note),
                            lf__unloaded_note(unloaded, sizeof unloaded));
    return LF_OK;
}

/* Threads that list devices at once, as the first ones of a process opening
 * contexts do, crashed inside PoCL 3.1: its clGetDeviceInfo(CL_DEVICE_NAME)
 * read a NULL name while another thread was in its first calls. The listing,
 * which every context's creation goes through, holds the opening lock. */
lf_status lf_devices_list(lf_device_info *out, size_t capacity, size_t *count, char *errbuf,
                          size_t errbuf_size)
{
    if (!count) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "count is NULL");
    if (!out && capacity)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "out is NULL but capacity is %zu", capacity);
    *count = 0;
    lf__fork_opencl_starts();
    lf__opening_lock();
    const lf_status st = lf__devices_list_held(out, capacity, count, errbuf, errbuf_size);
    lf__opening_unlock();
    return st;
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

/* One side of a "P:D" selector: an index when it is all digits, else a text
 * matched case-insensitively; an empty part (no ":D") matches anything. */
typedef struct {
    const char *text;
    bool is_index;
    unsigned long index;
} selector_part;

static selector_part part_of(const char *s)
{
    selector_part p = {s, false, 0};
    char *end;
    if (isdigit((unsigned char)*s)) {
        unsigned long v = strtoul(s, &end, 10);
        if (*end == 0 && v <= 0xffff) p = (selector_part){s, true, v};
    }
    return p;
}

/* Platform side: its index, or a text in the platform's name or vendor (PoCL's
 * platform is "Portable Computing Language" from "The pocl project") or the
 * device's name. */
static bool platform_side(const lf_device_info *d, const selector_part *p)
{
    if (p->is_index) return d->platform_index == p->index;
    return contains_nocase(d->platform_name, p->text) || contains_nocase(d->platform_vendor, p->text) ||
           contains_nocase(d->device_name, p->text);
}

/* The device P:D picks, in list order. D as an index is the device index on
 * platform P, or, when P is a text, the D-th device matching P (from 0); D as
 * a text is the first device matching P whose name contains it. */
static bool find_pair(const lf_device_info *devs, size_t count, selector_part p, selector_part d,
                      size_t *index)
{
    unsigned long nth = d.is_index && !p.is_index ? d.index : 0;
    for (size_t i = 0; i < count; i++) {
        if (!platform_side(&devs[i], &p)) continue;
        bool ok = !d.text                 ? true
                  : !d.is_index           ? contains_nocase(devs[i].device_name, d.text)
                  : p.is_index            ? devs[i].device_index == d.index
                                          : nth-- == 0;
        if (ok) return *index = i, true;
    }
    return false;
}

static const char *type_name(lf_device_type t)
{
    switch (t) {
    case LF_DEVICE_GPU: return "gpu";
    case LF_DEVICE_CPU: return "cpu";
    case LF_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static lf_status no_match(const char *sel, const lf_device_info *devs, size_t count, char *buf,
                          size_t size)
{
    if (!buf || !size) return LF_ERR_NO_DEVICE;
    int used = snprintf(buf, size, "no OpenCL device matches selector \"%s\"; devices:", sel);
    for (size_t i = 0; i < count && used > 0 && (size_t)used < size; i++)
        used += snprintf(buf + used, size - used, " [%u:%u %s \"%s\" on \"%s\"]",
                         devs[i].platform_index, devs[i].device_index, type_name(devs[i].type),
                         devs[i].device_name, devs[i].platform_name);
    if (count == 0 && used > 0 && (size_t)used < size) used += snprintf(buf + used, size - used, " none");
    char unloaded[2048];
    if (used > 0 && (size_t)used < size) snprintf(buf + used, size - used, "%s", lf__unloaded_note(unloaded, sizeof unloaded));
    return LF_ERR_NO_DEVICE;
}

lf_status lf_devices_select(const char *selector, const lf_device_info *devices, size_t count,
                            size_t *index, char *errbuf, size_t errbuf_size)
{
    if (!index) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "index is NULL");
    if (!devices && count) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "devices is NULL");
    char sel[256] = "";
    if (selector) {
        while (isspace((unsigned char)*selector)) selector++;
        size_t n = strlen(selector);
        while (n && isspace((unsigned char)selector[n - 1])) n--;
        if (n >= sizeof sel)
            return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "selector is longer than %zu characters", sizeof sel - 1);
        memcpy(sel, selector, n);
        sel[n] = 0;
    }
    if (count == 0) return no_match(sel, devices, count, errbuf, errbuf_size);

    if (sel[0] == 0) { /* default: first GPU, else accelerator, else CPU, else anything */
        static const lf_device_type order[] = {LF_DEVICE_GPU, LF_DEVICE_ACCELERATOR, LF_DEVICE_CPU};
        for (size_t o = 0; o < 3; o++)
            for (size_t i = 0; i < count; i++)
                if (devices[i].type == order[o]) return *index = i, LF_OK;
        return *index = 0, LF_OK;
    }
    static const struct { const char *word; lf_device_type type; } types[] = {
        {"gpu", LF_DEVICE_GPU}, {"cpu", LF_DEVICE_CPU}, {"accelerator", LF_DEVICE_ACCELERATOR}};
    for (size_t t = 0; t < 3; t++) {
        if (strcasecmp(sel, types[t].word) != 0) continue;
        for (size_t i = 0; i < count; i++)
            if (devices[i].type == types[t].type) return *index = i, LF_OK;
        return no_match(sel, devices, count, errbuf, errbuf_size);
    }
    /* "P:D" first, split at the last colon; a name holding a colon is then
     * tried whole. */
    char *colon = strrchr(sel, ':');
    if (colon && colon > sel && colon[1]) {
        *colon = 0;
        bool found = find_pair(devices, count, part_of(sel), part_of(colon + 1), index);
        *colon = ':';
        if (found) return LF_OK;
    }
    if (find_pair(devices, count, part_of(sel), (selector_part){0}, index)) return LF_OK;
    return no_match(sel, devices, count, errbuf, errbuf_size);
}
