/*
 * device_profiles.c - GPUs the library has no device of here, as data: what
 * each reports through OpenCL that the kernel parameters and the plan read
 * (type, vendor, local memory, work-group limit, native float vector, OpenCL
 * C version), so that the kernels it would build there can be listed and
 * compiled offline (kernel_list.c, `linformer kernels`, and
 * scripts/check-gpu-compilers.sh). Values from each vendor's device queries
 * as their drivers report them.
 */
#include <stdio.h>
#include <string.h>

#include "kernel_params.h"
#include "runtime.h"

#define GPU(vendor_, name_, local_kib, units, group)                                                         \
    {.type = LF_DEVICE_GPU, .vendor = vendor_, .device_name = name_, .local_mem_bytes = (local_kib) * 1024ull, \
     .compute_units = units, .max_work_group_size = group, .float_vector_width = 1}

static const lf_device_profile profiles[] = {
    /* the H200 this project ran on once (bench/NOTES.md, "GPU"); NVIDIA's
     * OpenCL 3.0 driver compiles OpenCL C 1.2 */
    {"nvidia-h200", "nvidia", "OpenCL C 1.2", GPU("NVIDIA Corporation", "NVIDIA H200", 48, 132, 1024)},
    /* AMD Instinct MI210 (gfx90a) under ROCm: 64 KiB of LDS, groups of 256 */
    {"amd-mi210", "amd", "OpenCL C 2.0", GPU("Advanced Micro Devices, Inc.", "gfx90a", 64, 104, 256)},
    /* Intel Arc A770 (DG2) under Intel's compute runtime: 64 KiB of SLM */
    {"intel-arc-a770", "intel", "OpenCL C 1.2",
     GPU("Intel(R) Corporation", "Intel(R) Arc(TM) A770 Graphics", 64, 512, 1024)},
    /* Intel Data Center GPU Max 1100 (PVC): 128 KiB of SLM */
    {"intel-max-1100", "intel", "OpenCL C 1.2",
     GPU("Intel(R) Corporation", "Intel(R) Data Center GPU Max 1100", 128, 448, 1024)},
};
#define PROFILES (sizeof profiles / sizeof profiles[0])

const lf_device_profile *lf__device_profile(size_t index) { return index < PROFILES ? &profiles[index] : NULL; }

const char *lf_device_profile_name(size_t index) { return index < PROFILES ? profiles[index].name : NULL; }

lf_status lf__device_profile_find(const char *name, const lf_device_profile **out, char *msg, size_t msg_size)
{
    *out = NULL;
    for (size_t i = 0; name && i < PROFILES; i++)
        if (strcmp(profiles[i].name, name) == 0) return *out = &profiles[i], LF_OK;
    char names[256] = "";
    for (size_t i = 0; i < PROFILES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", profiles[i].name);
    return lf__fail_buf(msg, msg_size, LF_ERR_ARGUMENT, "unknown device profile \"%.64s\"; the profiles are %s",
                        name ? name : "(null)", names);
}

lf_status lf_device_profile_info(const char *name, lf_device_info *info, char *errbuf, size_t errbuf_size)
{
    if (!info) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "info is NULL");
    const lf_device_profile *p;
    LF_TRY(lf__device_profile_find(name, &p, errbuf, errbuf_size));
    *info = p->info;
    return LF_OK;
}
