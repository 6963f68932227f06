/* launch.c - the typed launchers of launch.h. */
#include "launch.h"

#include <limits.h>
#include <stdio.h>

typedef struct {
    size_t size;
    const void *value;
} lf_arg;
#define ARG(v) ((lf_arg){sizeof(v), &(v)})
#define ARGS(...) (const lf_arg[]){__VA_ARGS__}, sizeof((const lf_arg[]){__VA_ARGS__}) / sizeof(lf_arg)

/* Sets every argument of k; the count must be the kernel's own. */
static lf_status set_args(lf_context *ctx, cl_kernel k, const char *what, const lf_arg *args, size_t count)
{
    cl_uint want = 0;
    LF_CL_CHECK(ctx, clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof want, &want, NULL),
                "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
    if (want != count)
        return lf__fail(ctx, LF_ERR_STATE, "%s takes %u arguments, its launcher gives %zu", what, want, count);
    for (size_t i = 0; i < count; i++) {
        cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS)
            return lf__fail(ctx, LF_ERR_OPENCL, "%s: setting argument %zu failed: %s", what, i,
                            lf_cl_error_string(err));
    }
    return LF_OK;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

lf_status lf__launch(lf_context *ctx, cl_kernel k, const char *what, cl_uint dims,
                     const size_t *global, const size_t *local, lf_timeline *t)
{
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, global, local, 0, NULL, lf__event(t));
    if (err != CL_SUCCESS) {
        lf__event_work(t, 0, 0); /* not left for the next command's row of the profile */
        return lf__cl_fail(ctx, err, what);
    }
    lf__event_done(t, what);
    return LF_OK;
}

/* The kernel of a spec: sized where it has a macro (*size its group), else built as it is (*size 1). */
static lf_status spec_kernel(lf_context *ctx, const lf_kernel_spec *s, size_t item_bytes, cl_kernel *k, size_t *size)
{
    *size = 1;
    if (!s->macro) return lf__kernel(ctx, s->file, s->options, s->name, k);
    return lf__kernel_sized(ctx, s->file, s->options, s->name, s->macro, s->want, s->per ? s->per : 1, item_bytes,
                            k, size);
}

void lf__activation_spec(const lf_kernel_params *kp, const char *name, lf_activation act, bool glu,
                         lf_kernel_spec *s)
{
    *s = (lf_kernel_spec){.file = "activation.cl", .name = name};
    snprintf(s->options, sizeof s->options, "-DACT=%d -DGLU=%d -DVW=%d -DRUN=%d", (int)act, glu ? 1 : 0,
             kp->vector_width, kp->vector_run);
}

/* A kernel of activation.cl, built for an activation (0: none, the program
 * that bias_rows and copy_floats share) and the vector shape of kp. */
static lf_status activation_kernel(lf_context *ctx, const char *name, const lf_kernel_params *kp, lf_activation act,
                                   bool glu, cl_kernel *k)
{
    if (!kp) return lf__fail(ctx, LF_ERR_STATE, "%s: launched without the device's kernel parameters", name);
    lf_kernel_spec s;
    lf__activation_spec(kp, name, act, glu, &s);
    size_t one;
    return spec_kernel(ctx, &s, 0, k, &one);
}

/* Launches an elementwise kernel on (items, rows) work-items, in work-groups
 * of kp's elementwise group (at most the device's) along items, or of the
 * runtime's choice when that is 0. */
static lf_status launch_elementwise(lf_context *ctx, cl_kernel k, const char *what, const lf_kernel_params *kp,
                                    size_t items, size_t rows, lf_timeline *tl)
{
    size_t g = kp->elementwise_group ? (size_t)kp->elementwise_group : 1;
    if (g > ctx->info.max_work_group_size) g = ctx->info.max_work_group_size;
    const size_t local[2] = {g, 1}, global[2] = {round_up(items, g), rows};
    return lf__launch(ctx, k, what, 2, global, kp->elementwise_group ? local : NULL, tl);
}

/* Launches a kernel of activation.cl over `cols` columns of `rows` rows: a
 * work-item a run of kp's vectors. */
static lf_status launch_runs(lf_context *ctx, cl_kernel k, const char *what, const lf_kernel_params *kp, size_t cols,
                             size_t rows, lf_timeline *tl)
{
    const size_t per_item = (size_t)kp->vector_width * kp->vector_run;
    return launch_elementwise(ctx, k, what, kp, (cols + per_item - 1) / per_item, rows, tl);
}

/* Work-group of the attention kernel's CPU variant, tq work-items: as many
 * heads of the same queries as divide the head count, so that one group
 * reads the same rows of Q and writes the same rows of O (their cache lines
 * and pages) rather than a row apiece in every head's pass. */
static void cpu_group(size_t tq, int heads, size_t local[3])
{
    size_t hg = 1;
    for (size_t g = 2; g <= tq; g++)
        if (heads % (int)g == 0) hg = g;
    local[0] = tq / hg, local[1] = hg, local[2] = 1;
}

int lf__attention_vector_width(int d_head) { return d_head % 4 == 0 ? 4 : 1; }

/* The GPU variant's DS of tiles (1 in the CPU variant, or unset). */
static int d_split_of(const lf_attention_tiles *tiles)
{
    return tiles->query_block <= 1 && tiles->d_split > 1 ? tiles->d_split : 1;
}

void lf__attention_spec(const lf_attention_tiles *tiles, int d_head, bool causal, lf_kernel_spec *s)
{
    const int blk = tiles->query_block > 1 ? tiles->query_block : 1;
    const int qv = blk > 1 && tiles->query_vectors > 1 ? tiles->query_vectors : 1, ds = d_split_of(tiles);
    *s = (lf_kernel_spec){.file = "attention.cl", .name = "attention_tiled", .macro = "TQ",
                          .want = tiles->tile_queries, .per = (size_t)ds};
    int used = snprintf(s->options, sizeof s->options, "-DDH=%d -DTK=%d -DVW=%d -DCAUSAL=%d -DQB=%d -DQV=%d", d_head,
                        tiles->tile_keys, lf__attention_vector_width(d_head), causal ? 1 : 0, blk, qv);
    if (blk > 1 && tiles->key_block > 0)
        used += snprintf(s->options + used, sizeof s->options - (size_t)used, " -DKB=%d", tiles->key_block);
    if (ds > 1) snprintf(s->options + used, sizeof s->options - (size_t)used, " -DDS=%d", ds);
}

lf_status lf__launch_attention_tiled(lf_context *ctx, const lf_attention_tiled_args *a, lf_timeline *t)
{
    const lf_attention_tiles *tiles = &a->tiles;
    const int blk = tiles->query_block > 1 ? tiles->query_block : 1;
    const int qv = blk > 1 && tiles->query_vectors > 1 ? tiles->query_vectors : 1, ds = d_split_of(tiles);
    if (ds & (ds - 1) || (a->d_head / lf__attention_vector_width(a->d_head)) % ds)
        return lf__fail(ctx, LF_ERR_ARGUMENT,
                        "attention_tiled: tiles.d_split %d is not a power of two that divides d_head %d / %d",
                        ds, a->d_head, lf__attention_vector_width(a->d_head));
    lf_kernel_spec spec;
    lf__attention_spec(tiles, a->d_head, a->causal, &spec);
    /* a work-item's private arrays: for each of its QB QV queries a row of
     * queries and of sums (2 DH / DS floats) and a tile's TK scores */
    const size_t item_bytes =
        (size_t)blk * qv * (2 * (size_t)a->d_head / ds + (size_t)tiles->tile_keys) * sizeof(float);
    cl_kernel k;
    size_t tq = 1;
    LF_TRY(spec_kernel(ctx, &spec, item_bytes, &k, &tq));
    const cl_ulong qo = a->q.off, ko = a->k.off, vo = a->v.off, oo = a->o.off;
    const cl_ulong qb = a->q.bstride, kb = a->k.bstride, vb = a->v.bstride, ob = a->o.bstride;
    const int window = a->window > 0 ? a->window : 1;
    const lf_view sk = a->self_k.buf ? a->self_k : a->k, sv = a->self_v.buf ? a->self_v : a->v; /* unused unless causal */
    const cl_ulong sko = sk.off, svo = sv.off, skb = sk.bstride, svb = sv.bstride;
    LF_TRY(set_args(ctx, k, "attention_tiled",
                    ARGS(ARG(a->q.buf), ARG(qo), ARG(a->q.ld), ARG(qb), ARG(a->k.buf), ARG(ko), ARG(a->k.ld), ARG(kb),
                         ARG(a->v.buf), ARG(vo), ARG(a->v.ld), ARG(vb), ARG(a->o.buf), ARG(oo), ARG(a->o.ld), ARG(ob),
                         ARG(sk.buf), ARG(sko), ARG(sk.ld), ARG(skb), ARG(sv.buf), ARG(svo), ARG(sv.ld), ARG(svb),
                         ARG(a->lengths), ARG(a->n_rows), ARG(a->key_count), ARG(a->heads), ARG(a->kv_heads),
                         ARG(a->scale), ARG(window))));
    size_t local[3] = {tq * ds, 1, 1};
    if (blk > 1) cpu_group(tq, a->heads, local);
    const size_t per_item = (size_t)blk * qv, items = ((size_t)a->n_rows + per_item - 1) / per_item * ds;
    const size_t global[3] = {round_up(items, local[0]), (size_t)a->heads, (size_t)a->batch};
    /* the scores and P V of every query over every key (causal ones do about half), Q, K, V and O once */
    const double keys = a->key_count ? a->key_count : a->n_rows, q = (double)a->batch * a->n_rows * a->d_head;
    const double q_o = 2.0 * q * a->heads, k_v = 2.0 * a->batch * keys * a->d_head * a->kv_heads;
    lf__event_work(t, 4.0 * q * keys * a->heads, 4.0 * (q_o + k_v));
    return lf__launch(ctx, k, "attention_tiled", 3, global, local, t);
}

/* A row a work-item in the CPU variant; else a work-group a row, of the WG wanted. */
void lf__softmax_spec(const lf_kernel_params *kp, lf_kernel_spec *s)
{
    const bool cpu = kp->variant == LF_VARIANT_CPU;
    *s = (lf_kernel_spec){.file = "softmax.cl", .name = cpu ? "softmax_rows_cpu" : "softmax_rows",
                          .macro = cpu ? NULL : "WG", .want = (size_t)kp->softmax_group};
}

void lf__layernorm_spec(const lf_kernel_params *kp, lf_kernel_spec *s)
{
    const bool cpu = kp->variant == LF_VARIANT_CPU;
    *s = (lf_kernel_spec){.file = "layernorm.cl", .name = cpu ? "layernorm_rows_cpu" : "layernorm_rows",
                          .macro = cpu ? NULL : "WG", .want = (size_t)kp->layernorm_group};
    if (cpu) snprintf(s->options, sizeof s->options, "-DVW=%d", kp->vector_width > 4 ? kp->vector_width : 4);
}

void lf__seq_project_spec(bool max, lf_kernel_spec *s)
{
    *s = (lf_kernel_spec){.file = "seq_project.cl", .name = "seq_project_window"};
    snprintf(s->options, sizeof s->options, "-DWINDOW_MAX=%d", max ? 1 : 0);
}

void lf__embed_spec(lf_kernel_spec *s) { *s = (lf_kernel_spec){.file = "embedding.cl", .name = "embed_tokens"}; }

lf_status lf__launch_softmax_rows(lf_context *ctx, const lf_softmax_rows_args *a, lf_timeline *t)
{
    const lf_kernel_params *kp = a->params;
    if (!kp) return lf__fail(ctx, LF_ERR_STATE, "softmax_rows: launched without the device's kernel parameters");
    const bool cpu = kp->variant == LF_VARIANT_CPU; /* a row a work-item; else a work-group a row */
    const size_t rows = a->count * (size_t)a->n_rows;
    if (rows > INT_MAX) return lf__fail(ctx, LF_ERR_UNSUPPORTED, "softmax_rows: %zu rows are over %d", rows, INT_MAX);
    lf_kernel_spec spec;
    lf__softmax_spec(kp, &spec);
    const char *name = spec.name;
    cl_kernel k;
    size_t wg = 1;
    LF_TRY(spec_kernel(ctx, &spec, 0, &k, &wg));
    const int causal = a->causal, count = (int)rows;
    LF_TRY(set_args(ctx, k, name, ARGS(ARG(a->scores), ARG(a->ld), ARG(a->n_rows), ARG(a->rows_valid),
                                       ARG(a->cols_valid), ARG(causal), ARG(count))));
    lf__event_work(t, 0, 8.0 * (double)a->count * a->rows_valid * a->cols_valid);
    if (cpu) return launch_elementwise(ctx, k, "softmax_rows", kp, rows, 1, t);
    const size_t local[2] = {wg, 1}, global[2] = {wg, rows};
    return lf__launch(ctx, k, "softmax_rows", 2, global, local, t);
}

lf_status lf__launch_bias_rows(lf_context *ctx, const lf_bias_rows_args *a, lf_timeline *t)
{
    if (!a->has_bias && !a->mask) return LF_OK;
    cl_kernel k;
    LF_TRY(activation_kernel(ctx, "bias_rows", a->params, (lf_activation)0, false, &k));
    const cl_ulong off = a->y_off, boff = a->bias_off;
    const int has_bias = a->has_bias, mask = a->mask;
    const cl_mem bias = a->bias ? a->bias : a->y; /* never read without has_bias */
    LF_TRY(set_args(ctx, k, "bias_rows",
                    ARGS(ARG(a->y), ARG(off), ARG(a->ld), ARG(a->cols), ARG(bias), ARG(boff), ARG(has_bias),
                         ARG(a->lengths), ARG(a->rows_per_seq), ARG(mask))));
    lf__event_work(t, 0, 8.0 * a->rows * a->cols);
    return launch_runs(ctx, k, "bias_rows", a->params, (size_t)a->cols, (size_t)a->rows, t);
}

lf_status lf__launch_seq_project_window(lf_context *ctx, const lf_seq_project_window_args *a, lf_timeline *t)
{
    lf_kernel_spec spec;
    lf__seq_project_spec(a->max, &spec);
    cl_kernel k;
    size_t one;
    LF_TRY(spec_kernel(ctx, &spec, 0, &k, &one));
    const cl_ulong ioff = a->in_off, ooff = 0;
    const cl_mem weights = a->weights ? a->weights : a->in; /* never read by max pooling */
    LF_TRY(set_args(ctx, k, "seq_project_window",
                    ARGS(ARG(a->in), ARG(ioff), ARG(a->in_ld), ARG(a->in_gstride), ARG(a->n), ARG(a->out), ARG(ooff),
                         ARG(a->out_ld), ARG(weights), ARG(a->window), ARG(a->w_gstride), ARG(a->w_hstride),
                         ARG(a->head_cols), ARG(a->lengths), ARG(a->cols), ARG(a->k), ARG(a->groups))));
    const size_t global[3] = {(size_t)a->cols, (size_t)a->k, (size_t)a->batch * a->groups};
    const double sums = (double)a->batch * a->groups * a->cols; /* each reads its n rows once, writes k */
    lf__event_work(t, 2.0 * sums * a->n, 4.0 * sums * (a->n + a->k));
    return lf__launch(ctx, k, "seq_project_window", 3, global, NULL, t);
}

lf_status lf__launch_layernorm(lf_context *ctx, const lf_layernorm_args *a, lf_timeline *t)
{
    const lf_kernel_params *kp = a->params;
    if (!kp) return lf__fail(ctx, LF_ERR_STATE, "layernorm: launched without the device's kernel parameters");
    const bool cpu = kp->variant == LF_VARIANT_CPU; /* a row a work-item; else a work-group a row */
    lf_kernel_spec spec;
    lf__layernorm_spec(kp, &spec);
    cl_kernel k;
    size_t wg = 1;
    LF_TRY(spec_kernel(ctx, &spec, 0, &k, &wg));
    const int has_r = a->has_r, write_sum = a->write_sum;
    const cl_mem r = a->r ? a->r : a->x; /* never read without has_r */
    LF_TRY(set_args(ctx, k, spec.name,
                    ARGS(ARG(a->x), ARG(r), ARG(a->out), ARG(a->gamma), ARG(a->beta), ARG(a->d), ARG(a->eps),
                         ARG(has_r), ARG(write_sum), ARG(a->rows))));
    lf__event_work(t, 8.0 * a->rows * a->d, 4.0 * a->rows * a->d * (2 + has_r + write_sum));
    if (cpu) return launch_elementwise(ctx, k, "layernorm", kp, (size_t)a->rows, 1, t);
    const size_t local[2] = {wg, 1}, global[2] = {wg, (size_t)a->rows};
    return lf__launch(ctx, k, "layernorm", 2, global, local, t);
}

lf_status lf__launch_bias_act(lf_context *ctx, const lf_bias_act_args *a, lf_timeline *t)
{
    cl_kernel k;
    LF_TRY(activation_kernel(ctx, "bias_act", a->params, a->act, a->glu, &k));
    const int has_bias = a->has_bias;
    const cl_mem bias = a->bias ? a->bias : a->y; /* never read without has_bias */
    LF_TRY(set_args(ctx, k, "bias_act", ARGS(ARG(a->y), ARG(a->ld), ARG(a->cols), ARG(bias), ARG(has_bias))));
    lf__event_work(t, 0, 4.0 * a->rows * a->cols * (a->glu ? 3 : 2));
    return launch_runs(ctx, k, "bias_act", a->params, (size_t)a->cols, (size_t)a->rows, t);
}

lf_status lf__launch_copy(lf_context *ctx, const lf_copy_args *a, lf_timeline *t)
{
    if (a->count > INT_MAX) return lf__fail(ctx, LF_ERR_ARGUMENT, "copy of %zu floats: at most %d", a->count, INT_MAX);
    cl_kernel k;
    LF_TRY(activation_kernel(ctx, "copy_floats", a->params, (lf_activation)0, false, &k));
    const int count = (int)a->count;
    LF_TRY(set_args(ctx, k, "copy_floats", ARGS(ARG(a->src), ARG(a->dst), ARG(count))));
    lf__event_work(t, 0, 8.0 * count);
    return launch_runs(ctx, k, "copy", a->params, a->count, 1, t);
}

lf_status lf__launch_embed(lf_context *ctx, const lf_embed_args *a, lf_timeline *t)
{
    lf_kernel_spec spec;
    lf__embed_spec(&spec);
    cl_kernel k;
    size_t one;
    LF_TRY(spec_kernel(ctx, &spec, 0, &k, &one));
    const int has_pos = a->pos != NULL;
    const cl_mem pos = a->pos ? a->pos : a->tok; /* never read without has_pos */
    LF_TRY(set_args(ctx, k, "embed_tokens",
                    ARGS(ARG(a->tokens), ARG(a->tok), ARG(pos), ARG(has_pos), ARG(a->pos_offset), ARG(a->scale),
                         ARG(a->out), ARG(a->d), ARG(a->n), ARG(a->lengths))));
    const size_t global[2] = {(size_t)a->d, (size_t)a->batch * a->n};
    lf__event_work(t, 0, 4.0 * a->batch * a->n * a->d * (has_pos ? 3 : 2));
    return lf__launch(ctx, k, "embed", 2, global, NULL, t);
}
