/*
 * plan.h - an attention layer resolved once: every size, default, weight slot,
 * path and kernel parameter that its forwards use. A plan is computed from a
 * config and a device by lf__plan_resolve and never changes afterwards; the
 * layer, its stages, the loader and the tests' reference all read it, so no
 * rule is written twice.
 */
#ifndef LF_PLAN_H
#define LF_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel_params.h"
#include "launch.h"
#include "linformer.h"

/* The weights of a layer, in the order lf_attention_set_weight documents them. */
typedef enum { LF_W_Q, LF_W_K, LF_W_V, LF_W_O, LF_B_Q, LF_B_K, LF_B_V, LF_B_O, LF_P_E, LF_P_F, LF_W_COUNT } lf_weight_id;

/* The device buffers a layer keeps its weights in. */
typedef enum { LF_BUF_QKV, LF_BUF_B_QKV, LF_BUF_O, LF_BUF_B_O, LF_BUF_PROJ, LF_BUF_COUNT } lf_weight_buf;

typedef struct {
    const char *name;    /* "wq", "wk", ... */
    lf_weight_buf buf;   /* where it lives */
    size_t offset;       /* in floats, within buf */
    size_t count;        /* floats; 0 when the weight does not exist in this config */
    size_t rows, cols;   /* its shape: [rows, cols], or [cols] when rows is 0 */
    float init_bound;    /* lf_attention_init_random: uniform(+-bound); 0 = normal(0, 1/k) */
} lf_weight_slot;

/* Largest d_head of the tiled attention kernel: its private arrays are this wide. */
#define LF_MAX_DH_TILED 256

typedef struct {
    lf_attention_config cfg; /* defaults resolved: d_head, kv_heads, scale, path, k (0 unless Linformer) */
    int dh, kvh;             /* head width, key/value heads */
    int window;              /* w = ceil(max_seq_len / k) of pooling and convolution; 0 unless Linformer */
    size_t qdim, kvdim;      /* H dh, KV dh */
    size_t cols;             /* columns of the fused projection output [Q | K | V] */
    int groups;              /* compressed groups: 2 (K~ and V~), 1 with share_kv */
    bool linformer;          /* mode is Linformer */
    bool input_side;         /* evaluated input first: E x (and F x), then Wk, Wv (see kv_order in plan.c) */
    bool bias_row_sums;      /* input first for LF_POSITION_KV: bk, bv go through E's row sums */
    bool f_separate;         /* F is its own matrix (else F = E) */
    bool matrix_proj;        /* E is a matrix (learned or random), not a window */
    bool per_head_proj;      /* one E per key/value head */
    bool tiled;              /* the attention step is attention.cl (flash, fused Linformer) */
    size_t buf_floats[LF_BUF_COUNT];
    lf_weight_slot weights[LF_W_COUNT];
    lf_attention_tiles tiles; /* the attention kernel's -D options at this dh (lf__attention_tiles) */
    lf_kernel_params params;  /* the device's, as resolved at creation: every kernel's variant and sizes */
} lf_plan;

/* The attention kernel's tiles at head width dh on dev, from the parameters wanted (launch.h). */
lf_attention_tiles lf__attention_tiles(const lf_kernel_params *kp, int dh, const lf_device_info *dev);


/*
 * Checks cfg and resolves it for a device, with the kernel parameters of
 * lf__kernel_params. has_shared says whether a layerwise projection is handed
 * in (its sizes are checked by the caller). On failure the message names the
 * field (or LINFORMER_KERNEL_PARAMS's key) and the status is LF_ERR_ARGUMENT
 * or LF_ERR_UNSUPPORTED.
 */
lf_status lf__plan_resolve(const lf_attention_config *cfg, const lf_device_info *device, bool has_shared,
                           lf_plan *plan, char *msg, size_t msg_size);

/* Every program built on dev (whose CL_DEVICE_OPENCL_C_VERSION is
 * c_version), as lf_kernel_builds lists them (kernel_list.c); compiler is
 * left empty. */
lf_status lf__kernel_list(const lf_device_info *dev, const char *c_version, lf_kernel_build *out, size_t capacity,
                          size_t *count, char *msg, size_t msg_size);

#endif
