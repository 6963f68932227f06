/*
 * host_memory.c - on a CPU device a buffer is the process's own memory.
 *
 * A driver that runs out of it while compiling or running a kernel may crash
 * the process (PoCL under `ulimit -v` does, inside CLBlast), so before each
 * allocation the library checks what it needs against what the address-space
 * limit (RLIMIT_AS) leaves and what the machine has available, and refuses
 * with LF_ERR_OUT_OF_MEMORY instead. Buffers on a CPU device are allocated
 * when created (CL_MEM_ALLOC_HOST_PTR, see lf__alloc), so the process's
 * address space counts every buffer already held.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runtime.h"

/* What the driver maps on top of the buffers while it builds and runs the
 * kernels of a forward: PoCL 3.1 with LLVM 15 peaks 286 MiB above the
 * process's size when it first builds CLBlast's GEMM. */
#define DRIVER_RESERVE ((size_t)288 << 20)

size_t lf__address_space_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    return rl.rlim_cur > SIZE_MAX ? SIZE_MAX : (size_t)rl.rlim_cur;
}

/* The process's address-space size (Linux /proc); false when unknown. */
static bool address_space_used(size_t *bytes)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return false;
    unsigned long pages = 0;
    bool ok = fscanf(f, "%lu", &pages) == 1;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    *bytes = (size_t)pages * (size_t)(page > 0 ? page : 4096);
    return ok;
}

/* MemAvailable of /proc/meminfo: what can be allocated without swapping. */
static bool memory_available(size_t *bytes)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return false;
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    *bytes = (size_t)kib * 1024;
    return found;
}

#define MIB(b) ((double)(b) / (1 << 20))

lf_status lf__host_memory_check(lf_context *ctx, size_t bytes, const char *what)
{
    size_t limit = lf__address_space_limit(), used = 0, avail = 0;
    if (limit && address_space_used(&used)) {
        size_t left = used < limit ? limit - used : 0;
        if (bytes > left || left - bytes < DRIVER_RESERVE)
            return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                            "%s needs %zu bytes (%.1f MiB) of host memory, the CPU device's; the address-space "
                            "limit (RLIMIT_AS, ulimit -v) of %.1f MiB leaves %.1f MiB, and the OpenCL driver needs "
                            "about %.0f MiB of it to build and run kernels",
                            what, bytes, MIB(bytes), MIB(limit), MIB(left), MIB(DRIVER_RESERVE));
    }
    if (memory_available(&avail) && bytes > avail)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                        "%s needs %zu bytes (%.1f MiB) of host memory, the CPU device's; the machine has %.1f MiB "
                        "available (MemAvailable)",
                        what, bytes, MIB(bytes), MIB(avail));
    return LF_OK;
}
