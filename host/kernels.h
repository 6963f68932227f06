/* kernels.h - the OpenCL sources of cl/, built into the library (generated file). */
#ifndef LF_KERNELS_H
#define LF_KERNELS_H
#include <stddef.h>

typedef struct {
    const char *name; /* file name in cl/, e.g. "attention.cl" */
    const char *text;
    size_t size;
} lf_kernel_source;

extern const lf_kernel_source lf_kernel_sources[]; /* ends with a NULL name */

#endif
