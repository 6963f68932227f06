/* reference.c - double-precision attention: dense, flash (the same maths) and Linformer. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "plan.h"

void lf_ref_resolve(lf_attention_config *c)
{
    /* the library's own rule; the device only moves the path, which the reference does not have */
    const lf_device_info device = {.local_mem_bytes = 32768, .max_alloc_bytes = 1u << 30, .global_mem_bytes = 1u << 31};
    lf_plan plan;
    const bool shared = c->mode == LF_MODE_LINFORMER && c->sharing == LF_SHARE_LAYERWISE;
    if (lf__plan_resolve(c, &device, shared, &plan, NULL, 0) == LF_OK) *c = plan.cfg;
}

void lf_ref_random_projection(float *out, size_t count, uint64_t seed, int k)
{
    uint64_t state = seed;
    for (size_t i = 0; i < count; i++) out[i] = (float)(lf__rand_normal(&state) / sqrt((double)k));
}

void lf_ref_softmax(const double *s, int cols, int cols_valid, double *p)
{
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < cols_valid; j++) m = fmax(m, s[j]);
    for (int j = 0; j < cols_valid; j++) sum += p[j] = exp(s[j] - m);
    for (int j = 0; j < cols; j++) p[j] = j < cols_valid ? p[j] / sum : 0.0;
}

/* out[r, o] = sum_i in[r, i] w[o, i] + b[o] for `rows` rows (PyTorch Linear). */
static void linear(const double *in, int rows, int in_dim, const float *w, const float *b, int out_dim,
                   double *out)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < in_dim; i++) acc += in[(size_t)r * in_dim + i] * w[(size_t)o * in_dim + i];
            out[(size_t)r * out_dim + o] = acc;
        }
}

/* Compresses in [len, cols] to out [k, cols]. proj is the projection of this
 * group (E or F); columns of head h use copy h when per_head. */
static void project(const lf_attention_config *c, const float *proj, bool per_head, const double *in,
                    int len, int cols, double *out)
{
    const int k = c->k, N = c->max_seq_len, w = (N + k - 1) / k;
    for (int j = 0; j < k; j++)
        for (int col = 0; col < cols; col++) {
            const int copy = per_head ? col / c->d_head : 0;
            double acc = 0.0;
            switch (c->proj_kind) {
            case LF_PROJ_LEARNED:
            case LF_PROJ_RANDOM:
                for (int i = 0; i < len; i++)
                    acc += proj[((size_t)copy * k + j) * N + i] * in[(size_t)i * cols + col];
                break;
            case LF_PROJ_MEAN_POOL:
            case LF_PROJ_CONV:
                for (int i = j * w; i < len && i < (j + 1) * w; i++) {
                    double wt = c->proj_kind == LF_PROJ_CONV ? proj[(size_t)copy * w + (i - j * w)] : 1.0 / w;
                    acc += wt * in[(size_t)i * cols + col];
                }
                break;
            case LF_PROJ_MAX_POOL:
                acc = j * w < len ? -INFINITY : 0.0;
                for (int i = j * w; i < len && i < (j + 1) * w; i++) acc = fmax(acc, in[(size_t)i * cols + col]);
                break;
            }
            out[(size_t)j * cols + col] = acc;
        }
}

/* One sequence of `len` rows; x and y are [len, D]. */
void lf_ref_attention_sequence(const lf_attention_config *c, const lf_ref_weights *w, const float *shared_e, const double *x,
                     int len, double *y)
{
    const int D = c->d_model, H = c->heads, dh = c->d_head, KV = c->kv_heads, k = c->k;
    const int qd = H * dh, kvd = KV * dh;
    const bool lin = c->mode == LF_MODE_LINFORMER;
    const bool f_separate = !c->share_kv && (c->sharing == LF_SHARE_NONE || c->sharing == LF_SHARE_HEADWISE);
    const bool per_head = c->sharing == LF_SHARE_NONE;
    const float *E = c->sharing == LF_SHARE_LAYERWISE ? shared_e : w->e;
    const float *F = f_separate ? w->f : E;
    const float *wv = c->share_kv ? w->wk : w->wv;
    const float *bv = c->share_kv ? (c->bias_k ? w->bk : NULL) : (c->bias_v ? w->bv : NULL);

    double *q = calloc((size_t)len * qd + 1, sizeof *q);
    double *kfull = calloc((size_t)len * kvd + 1, sizeof *kfull), *vfull = calloc((size_t)len * kvd + 1, sizeof *vfull);
    int nk = lin ? k : len;
    double *keys = calloc((size_t)nk * kvd + 1, sizeof *keys), *vals = calloc((size_t)nk * kvd + 1, sizeof *vals);
    double *att = calloc((size_t)len * qd + 1, sizeof *att);
    double *s = calloc((size_t)nk + len + 1, sizeof *s), *p = calloc((size_t)nk + len + 1, sizeof *p);

    linear(x, len, D, w->wq, c->bias_q ? w->bq : NULL, qd, q);
    if (lin && c->position == LF_POSITION_INPUT) {
        double *xe = calloc((size_t)k * D, sizeof *xe);
        project(c, E, false, x, len, D, xe);
        linear(xe, k, D, w->wk, c->bias_k ? w->bk : NULL, kvd, keys);
        project(c, F, false, x, len, D, xe);
        linear(xe, k, D, wv, bv, kvd, vals);
        free(xe);
    } else {
        linear(x, len, D, w->wk, c->bias_k ? w->bk : NULL, kvd, kfull);
        linear(x, len, D, wv, bv, kvd, vfull);
        if (lin) {
            project(c, E, per_head, kfull, len, kvd, keys);
            project(c, F, per_head, vfull, len, kvd, vals);
        } else {
            memcpy(keys, kfull, (size_t)len * kvd * sizeof *keys);
            memcpy(vals, vfull, (size_t)len * kvd * sizeof *vals);
        }
    }
    const int win = lin ? (c->max_seq_len + k - 1) / k : 1;
    double *sv = calloc((size_t)(nk + len) * dh + 1, sizeof *sv); /* the values of the keys a query sees */
    for (int h = 0; h < H; h++) {
        const int hk = KV == 1 ? 0 : h;
        for (int i = 0; i < len; i++) {
            /* the keys query i sees: all of them, or with causal the ones before it
             * (Linformer: the slots of complete windows before its own, then its own
             * window's exact keys up to itself) */
            const int slots = !c->causal ? nk : lin ? i / win : 0;
            const int own_from = !c->causal ? len : lin ? i / win * win : 0, own_to = c->causal ? i : len - 1;
            int count = 0;
            for (int j = 0; j < slots + (own_to - own_from + 1); j++, count++) {
                const bool slot = j < slots;
                const double *key = slot ? keys + (size_t)j * kvd : kfull + (size_t)(own_from + j - slots) * kvd;
                const double *val = slot ? vals + (size_t)j * kvd : vfull + (size_t)(own_from + j - slots) * kvd;
                double dot = 0;
                for (int d = 0; d < dh; d++) dot += q[(size_t)i * qd + h * dh + d] * key[hk * dh + d];
                s[j] = dot * c->scale;
                for (int d = 0; d < dh; d++) sv[(size_t)j * dh + d] = val[hk * dh + d];
            }
            lf_ref_softmax(s, count, count, p);
            for (int d = 0; d < dh; d++) {
                double acc = 0;
                for (int j = 0; j < count; j++) acc += p[j] * sv[(size_t)j * dh + d];
                att[(size_t)i * qd + h * dh + d] = acc;
            }
        }
    }
    free(sv);
    linear(att, len, qd, w->wo, c->bias_out ? w->bo : NULL, D, y);
    free(q), free(kfull), free(vfull), free(keys), free(vals), free(att), free(s), free(p);
}

void lf_ref_attention(const lf_attention_config *cfg, const lf_ref_weights *w, const float *shared_e,
                      const float *x, int batch, int n, const int32_t *lengths, double *y)
{
    const int D = cfg->d_model;
    double *xs = malloc((size_t)n * D * sizeof *xs);
    for (int b = 0; b < batch; b++) {
        const int len = lengths ? lengths[b] : n;
        for (size_t i = 0; i < (size_t)n * D; i++) xs[i] = x[(size_t)b * n * D + i];
        double *yb = y + (size_t)b * n * D;
        memset(yb, 0, (size_t)n * D * sizeof *yb); /* rows past len are 0 */
        if (len > 0) lf_ref_attention_sequence(cfg, w, shared_e, xs, len, yb);
    }
    free(xs);
}
