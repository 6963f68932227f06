/*
 * launch.h - one typed launcher per OpenCL kernel of cl/. Each takes a struct
 * whose fields are the kernel's arguments, so a call cannot pass too few or
 * too many; the launcher builds the kernel with its -D parameters, checks the
 * argument count against the built kernel, picks the work sizes and records
 * the command on the timeline (may be NULL) under the kernel's name. The
 * elementwise kernels' vector shape and group come in `params`: the device's
 * kernel parameters (kernel_params.h), which a layer or model resolves once,
 * when it is created.
 */
#ifndef LF_LAUNCH_H
#define LF_LAUNCH_H

#include "kernel_params.h"
#include "runtime.h"

/* Rows of a [batch, rows, cols] tensor in a buffer: element (b, i, c) sits at
 * off + b * bstride + i * ld + c, in floats. */
typedef struct {
    cl_mem buf;
    size_t off;
    int ld;
    size_t bstride;
} lf_view;

/* Enqueues a kernel over `dims` dimensions, recording its event in t (may be NULL). */
lf_status lf__launch(lf_context *ctx, cl_kernel k, const char *what, cl_uint dims,
                     const size_t *global, const size_t *local, lf_timeline *t);

/* How a launcher gets its kernel: the file of cl/ and the options it builds
 * it with, the kernel's name, and for a kernel whose work-group size is a
 * build option, that macro and the size wanted (lf__kernel_sized lowers it
 * to what the device allows). The spec functions below give each
 * launcher's; kernel_list.c lists the same for a device without opening it. */
typedef struct {
    const char *file;
    char options[160];
    const char *name;
    const char *macro; /* NULL: built once with options (lf__kernel) */
    size_t want;
    size_t per; /* work-items of the group for each unit of the macro (0: 1) */
} lf_kernel_spec;

/* The attention kernel's tiles (its -D options but DH and CAUSAL), chosen by
 * the plan from the kernel parameters (lf__attention_tiles): TK keys a tile,
 * lowered until the 2 TK dh floats that the GPU variant stages (and with DS
 * > 1 the TQ DS TK partial scores) keep within half of the device's local
 * memory; TQ queries a group wanted (lf__kernel_sized lowers them to what
 * the device allows); the GPU variant's DS work-items a query; the CPU
 * variant's QV vectors of QB queries a work-item and KB keys a pass. */
typedef struct {
    int tile_keys;       /* TK: keys of one tile (staged in local memory, but for the CPU variant) */
    size_t tile_queries; /* TQ wanted: queries of one work-group, TQ DS work-items (the device may allow
                          * fewer). The CPU variant lays them across heads of the same queries where
                          * heads allow */
    int query_block;     /* QB: queries of one vector, 1 or (the CPU variant) 2, 4, 8, 16 */
    int query_vectors;   /* QV: the CPU variant's vectors of QB queries a work-item (0 or 1: one) */
    int key_block;       /* KB: the CPU variant's keys of one pass over DH (0: the kernel's default) */
    int d_split;         /* DS: the GPU variant's work-items of one query, each holding DH / DS of its row and
                          * sums; a power of two that divides DH / VW (0 or 1: one) */
} lf_attention_tiles;

/* VW of the attention kernel at head width d_head: 4 where it divides it, else 1. */
int lf__attention_vector_width(int d_head);

/* cl/attention.cl: o = softmax(scale q k^T) v per head, tiled over keys.
 * key_count 0 = the sequence's own keys (the first lengths[b] of them). With
 * causal, query i sees keys 0..i (key_count 0), or the slots j < i / window
 * and then its own keys self_k, self_v from i / window * window to i. */
typedef struct {
    lf_view q, k, v, o;
    lf_view self_k, self_v; /* causal Linformer only */
    bool causal;
    int window;
    cl_mem lengths; /* int [batch] */
    int batch, n_rows, key_count, heads, kv_heads, d_head;
    float scale;
    lf_attention_tiles tiles;
} lf_attention_tiled_args;
lf_status lf__launch_attention_tiled(lf_context *ctx, const lf_attention_tiled_args *a, lf_timeline *t);

/* The kernels of the launchers: the attention kernel's at d_head and causal;
 * softmax_rows and layernorm_rows in kp's variant; a kernel `name` of
 * activation.cl for an activation (0 with glu false: the program of
 * bias_rows and copy_floats) in kp's vector shape; seq_project_window with
 * max pooling or a weighted sum; embed_tokens. */
void lf__attention_spec(const lf_attention_tiles *tiles, int d_head, bool causal, lf_kernel_spec *s);
void lf__softmax_spec(const lf_kernel_params *kp, lf_kernel_spec *s);
void lf__layernorm_spec(const lf_kernel_params *kp, lf_kernel_spec *s);
void lf__activation_spec(const lf_kernel_params *kp, const char *name, lf_activation act, bool glu,
                         lf_kernel_spec *s);
void lf__seq_project_spec(bool max, lf_kernel_spec *s);
void lf__embed_spec(lf_kernel_spec *s);

/* cl/softmax.cl: masked softmax of `count` blocks of [n_rows, ld] scores in place. */
typedef struct {
    cl_mem scores;
    int ld, n_rows, rows_valid, cols_valid;
    bool causal; /* row i keeps at most its first i + 1 entries */
    size_t count;
    const lf_kernel_params *params; /* the variant; the GPU variant's WG (the device may allow fewer) */
} lf_softmax_rows_args;
lf_status lf__launch_softmax_rows(lf_context *ctx, const lf_softmax_rows_args *a, lf_timeline *t);

/* cl/activation.cl: y[r, c] += bias[b_off + c]; with mask, rows past their
 * sequence's length (rows_per_seq rows a sequence) become 0. */
typedef struct {
    cl_mem y;
    size_t y_off;
    int ld, cols, rows;
    cl_mem bias; /* may be NULL when has_bias is false */
    size_t bias_off;
    bool has_bias;
    cl_mem lengths;
    int rows_per_seq;
    bool mask;
    const lf_kernel_params *params;
} lf_bias_rows_args;
lf_status lf__launch_bias_rows(lf_context *ctx, const lf_bias_rows_args *a, lf_timeline *t);

/* cl/seq_project.cl: pooling or convolution of windows of w rows to k rows,
 * for `groups` groups of `cols` columns (group g starts at column g in_gstride
 * of the input and g cols of the output). */
typedef struct {
    cl_mem in;
    size_t in_off;
    int in_ld, in_gstride, n;
    cl_mem out;
    int out_ld;
    cl_mem weights; /* window weights (mean, conv); unused with max */
    int window, w_gstride, w_hstride, head_cols;
    cl_mem lengths;
    int cols, k, groups, batch;
    bool max; /* max pooling instead of a weighted sum */
} lf_seq_project_window_args;
lf_status lf__launch_seq_project_window(lf_context *ctx, const lf_seq_project_window_args *a, lf_timeline *t);

/* cl/layernorm.cl: out = LayerNorm(x + r) * gamma + beta over `rows` rows of
 * width d (r only with has_r); write_sum also stores x + r into x. out may be
 * x when write_sum is false. */
typedef struct {
    cl_mem x, r, out, gamma, beta; /* r may be NULL without has_r */
    int d, rows;
    float eps;
    bool has_r, write_sum;
    const lf_kernel_params *params; /* the variant; the GPU one's WG wanted (the device may allow
                                     * fewer); the CPU one takes a row a work-item */
} lf_layernorm_args;
lf_status lf__launch_layernorm(lf_context *ctx, const lf_layernorm_args *a, lf_timeline *t);

/* cl/activation.cl: y[r, c] = act(y[r, c] + bias[c]) for `cols` columns of
 * `rows` rows (stride ld); with glu, act(a + b_a) * (g + b_g) from the two
 * halves [a | g] of `cols` columns each, into the first. */
typedef struct {
    cl_mem y;
    int ld, cols, rows;
    cl_mem bias; /* may be NULL without has_bias */
    bool has_bias, glu;
    lf_activation act; /* its value is the kernel's ACT; 0 = none */
    const lf_kernel_params *params;
} lf_bias_act_args;
lf_status lf__launch_bias_act(lf_context *ctx, const lf_bias_act_args *a, lf_timeline *t);

/* cl/activation.cl's copy_floats: dst = src over `count` floats, at most
 * INT_MAX (the copy bandwidth's kernel). */
typedef struct {
    cl_mem src, dst;
    size_t count;
    const lf_kernel_params *params;
} lf_copy_args;
lf_status lf__launch_copy(lf_context *ctx, const lf_copy_args *a, lf_timeline *t);

/* cl/embedding.cl: out [batch, n, d] = scale tok[tokens] + pos[i + pos_offset]
 * below each length, 0 past it. tokens: i64 [batch, n], ids already checked. */
typedef struct {
    cl_mem tokens, tok, pos; /* pos may be NULL */
    int pos_offset;
    float scale;
    cl_mem out;
    int d, n, batch;
    cl_mem lengths;
} lf_embed_args;
lf_status lf__launch_embed(lf_context *ctx, const lf_embed_args *a, lf_timeline *t);

#endif
