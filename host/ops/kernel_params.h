/*
 * kernel_params.h - the kernels' tuning parameters as data: one table whose
 * rows are keyed by device type, vendor and native float vector width (the
 * first row that matches a device gives its values, generic rows last), and LINFORMER_KERNEL_PARAMS
 * to override any of them for development. The values are the sizes wanted:
 * the device's limits lower them where they are used (lf__attention_tiles in
 * plan.c for the local memory of a key tile, lf__kernel_sized for work-groups).
 */
#ifndef LF_KERNEL_PARAMS_H
#define LF_KERNEL_PARAMS_H

#include <stddef.h>

#include "linformer.h"

/*
 * The two variants of the attention kernel (cl/attention.cl). CPU: QB
 * queries a work-item as the lanes of one vector (a CPU compiler cannot
 * build such vectors from the work-items of a group: bench/NOTES.md), keys
 * read from global memory, no local memory and no barriers, the work-items
 * of a group laid across heads (launch.c). GPU: one query a work-item (QB
 * 1), key tiles staged in local memory.
 */
typedef enum { LF_VARIANT_CPU, LF_VARIANT_GPU } lf_kernel_variant;

/* One device class's parameters; the override's key of each in quotes. */
typedef struct {
    lf_kernel_variant variant; /* "variant": cpu or gpu */
    int tile_keys;             /* "tk": TK, keys of one tile of the attention kernel */
    int tile_queries;          /* "tq": TQ, work-items of one group of the attention kernel */
    int query_block;           /* "qb": QB, queries of one vector: 1 (gpu) or 2, 4, 8, 16 (cpu) */
    int query_vectors;         /* "qv": QV, vectors of QB queries of one work-item: 1 (gpu) or 1-4 (cpu) */
    int key_block;             /* "kb": KB, keys one pass of the CPU variant takes at once: 1 (gpu) or 1-16 (cpu) */
    int d_split;               /* "ds": DS, work-items of one query in the GPU variant, each holding DH / DS of
                                * its row and sums: 0 (from d_head: DH / 64, at least 1), 1, 2, 4, 8, 16 (gpu),
                                * or 1 (cpu); lowered until it divides DH / VW (lf__attention_tiles) */
    int softmax_group;         /* "softmax_wg": WG of softmax_rows */
    int layernorm_group;       /* "layernorm_wg": WG of layernorm_rows */
    /* The elementwise kernels (activation.cl, and layernorm_rows_cpu for its
     * group): a work-item takes `run` vectors of `vw` contiguous floats, in
     * work-groups of elementwise_wg work-items (0: the runtime's choice). */
    int vector_width;      /* "vw": 1, 2, 4, 8 or 16 */
    int vector_run;        /* "run": vectors of one work-item */
    int elementwise_group; /* "elementwise_wg" */
    /* The sequence projection E X of a sequence: its sum over the sequence in
     * `split` slices, each a GEMM into a workspace, then a GEMM with a ones
     * vector that adds them, for more work-groups than one short, wide GEMM
     * gives a GPU. 0: from the device (stages.c; 1 on CPU devices), 1: one
     * GEMM, 2-16: that many slices. */
    int split_sums; /* "split" */
} lf_kernel_params;

typedef struct {
    int types;             /* lf_device_type bits the row serves */
    const char *vendor;    /* contained in the device's vendor, case-insensitively; NULL: any vendor */
    unsigned float_vector; /* the least native float vector width (floats) it serves; 0: any */
    lf_kernel_params params;
} lf_kernel_params_row;

/* The parameters of the first of `count` rows that serves dev, or NULL. */
const lf_kernel_params *lf__kernel_params_match(const lf_kernel_params_row *rows, size_t count,
                                                const lf_device_info *dev);

/*
 * dev's parameters: its row of the table, then LINFORMER_KERNEL_PARAMS when
 * set and not empty (lf__kernel_params_parse). A bad override is an
 * LF_ERR_ARGUMENT whose message names the variable and the key or value.
 */
lf_status lf__kernel_params(const lf_device_info *dev, lf_kernel_params *out, char *msg, size_t msg_size);

/*
 * Applies an override to p: key=value pairs separated by commas, each key
 * once. variant=cpu|gpu first replaces every value by that variant's row
 * for dev's vendor and vector width; the other keys then set their own. An empty entry, an unknown key, a
 * repeated one, a value that is not an integer in its range, a ds that is
 * not 0 or a power of two, or a qb, qv, kb or ds that does not suit the
 * variant is an LF_ERR_ARGUMENT naming it; p is then unchanged.
 */
lf_status lf__kernel_params_parse(const char *text, const lf_device_info *dev, lf_kernel_params *p, char *msg,
                                  size_t msg_size);

/* p in the override's form ("variant=gpu,tk=32,..."), cut to size. */
void lf__kernel_params_format(const lf_kernel_params *p, char *out, size_t size);

/* A GPU described as data (device_profiles.c): what it reports that the
 * kernels' options depend on, and the vendor whose compiler builds for it. */
typedef struct {
    const char *name;      /* e.g. "nvidia-h200" */
    const char *compiler;  /* "nvidia", "amd" or "intel" */
    const char *c_version; /* its CL_DEVICE_OPENCL_C_VERSION */
    lf_device_info info;
} lf_device_profile;

/* The index-th profile; NULL past the last. */
const lf_device_profile *lf__device_profile(size_t index);
/* The profile of that name, or an LF_ERR_ARGUMENT that lists the names. */
lf_status lf__device_profile_find(const char *name, const lf_device_profile **out, char *msg, size_t msg_size);

#endif
