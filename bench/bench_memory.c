/* bench_memory.c - the host memory a bench point needs, and what the host has. */
#define _POSIX_C_SOURCE 200809L
#include "bench_memory.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

bench_need bench_host_need(const bench_options *o, int n, size_t devices, bool cpu_device)
{
    const double d = o->d_model, weights = (4 * d * d + 4 * d) * sizeof(float);
    return (bench_need){.weights = weights,
                        .io = (3.0 + 2.0 * (double)devices) * o->batch * (double)n * d * sizeof(float),
                        .device_weights = cpu_device ? weights : 0};
}

/* The tighter of a soft limit and `bytes`. */
static double within_limit(int resource, double bytes)
{
    struct rlimit r;
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY && (double)r.rlim_cur < bytes)
        return (double)r.rlim_cur;
    return bytes;
}

double bench_host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f) && sscanf(line, "MemAvailable: %llu kB", &kb) != 1) {}
    if (f) fclose(f);
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double bytes = kb ? (double)kb * 1024 : pages > 0 && page > 0 ? (double)pages * page : 1e300;
    return within_limit(RLIMIT_AS, within_limit(RLIMIT_DATA, bytes));
}

int bench_host_check(const bench_need *need, double available, char *msg, size_t size)
{
    const double weights = need->weights, total = weights + need->io + need->device_weights;
    if (total <= available) return 0;
    snprintf(msg, size,
             "needs %.2f GiB of host memory: the weights %.2f GiB (4 d_model^2 floats), the inputs and outputs "
             "%.2f GiB, the CPU device's copy of the weights %.2f GiB; %.2f GiB is available",
             total / GIB, weights / GIB, need->io / GIB, need->device_weights / GIB, available / GIB);
    return -1;
}

int bench_host_check_run(const bench_options *o, size_t devices, bool cpu_device, double available, char *msg,
                         size_t size)
{
    int smallest = o->ns[0];
    for (int i = 1; i < o->n_count; i++)
        if (o->ns[i] < smallest) smallest = o->ns[i];
    const bench_need need = bench_host_need(o, smallest, devices, cpu_device);
    return bench_host_check(&need, available, msg, size);
}
