/* kernels.h - files built into the program as byte arrays (generated tables). */
#ifndef LF_KERNELS_H
#define LF_KERNELS_H
#include <stddef.h>

typedef struct {
    const char *name; /* file name, e.g. "attention.cl" */
    const char *text;
    size_t size;
} lf_embedded_file;

extern const lf_embedded_file lf_kernel_sources[]; /* the OpenCL sources of cl/; ends with a NULL name */

#endif
