/*
 * tune_space.h - the parameters tune.c searches: CLBlast's GEMM kernels, the
 * values each parameter takes, and which sets are valid on a device.
 */
#ifndef LF_TUNE_SPACE_H
#define LF_TUNE_SPACE_H

#include "blas.h"

#define LF_TUNE_MAX_PARAMS 16

typedef struct {
    const char *kernel;
    int count;
    const char *names[LF_TUNE_MAX_PARAMS];      /* CLBlast's database order */
    size_t choices[LF_TUNE_MAX_PARAMS][6];      /* values searched, 0-terminated */
} lf_space;

enum { K_XGEMM, K_DIRECT, K_ROUTINE, K_COUNT };

/* The parameters searched, by kernel. */
extern const lf_space lf__tune_spaces[K_COUNT];

/* XGEMM_MIN_INDIRECT_SIZE's extremes: m n k below its cube goes direct. */
#define LF_NEVER_DIRECT 0
#define LF_ALWAYS_DIRECT 65536 /* its cube is past any m n k here */

/* A stored set as the search would make one: every value among its choices
 * (which keeps the validity products from overflowing), the set valid on d. */
bool lf__tune_stored_valid(int kernel, const size_t *v, const lf_device_info *d);
/* A random valid set of `kernel` on d into v; false when none was found. */
bool lf__tune_random_set(int kernel, const lf_device_info *d, uint64_t *rng, size_t *v);

#endif
