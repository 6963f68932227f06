/* bench_memory.h - what a bench point needs of the host's memory, checked
 * before anything is allocated, so that a point too large is an OOM row and
 * never a process the kernel kills. */
#ifndef LF_BENCH_MEMORY_H
#define LF_BENCH_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

#include "bench_options.h"

/* Bytes of host memory a point at sequence length n needs. */
typedef struct {
    double weights;        /* the four d_model x d_model matrices and biases, made once for the run */
    double io;             /* per n: the input, the output, the first device's output and each device's exact ones */
    double device_weights; /* a CPU device's copy of the weights, which lives in host memory too (0 on GPUs) */
} bench_need;

bench_need bench_host_need(const bench_options *o, int n, size_t devices, bool cpu_device);

/* What this process may still take: MemAvailable of /proc/meminfo, within
 * the process's own data limit (RLIMIT_DATA, RLIMIT_AS). */
double bench_host_available(void);

/* 0 when the whole need fits `available` bytes (measured before the run
 * allocated anything); else -1 with a message saying how much of what. */
int bench_host_check(const bench_need *need, double available, char *msg, size_t size);

/* The need of the run's smallest n on these devices: whether the weights can be made at all. */
int bench_host_check_run(const bench_options *o, size_t devices, bool cpu_device, double available, char *msg,
                         size_t size);

#endif
