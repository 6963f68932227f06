/* reference_model.c - double-precision LayerNorm, activations and whole models. */
#include "reference_model.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void lf_ref_layernorm(const double *s, int d, double eps, const float *gamma, const float *beta, double *out)
{
    double mean = 0, var = 0;
    for (int c = 0; c < d; c++) mean += s[c];
    mean /= d;
    for (int c = 0; c < d; c++) var += (s[c] - mean) * (s[c] - mean);
    var /= d;
    for (int c = 0; c < d; c++) out[c] = (s[c] - mean) / sqrt(var + eps) * gamma[c] + beta[c];
}

double lf_ref_activate(double v, lf_activation act)
{
    switch (act) {
    /* 1 + erf(z) = erfc(-z) and 1 + tanh(z) = 2 / (1 + exp(-2 z)), which keep
     * their digits where the result is tiny (z well below 0) */
    case LF_ACT_GELU: return 0.5 * v * erfc(-v / sqrt(2.0));
    case LF_ACT_GELU_TANH: return v / (1.0 + exp(-2.0 * sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case LF_ACT_RELU: return v < 0 ? 0.0 : v;
    }
    return v;
}

/* out[r, o] = sum_i in[r, i] w[o, i] + b[o] (PyTorch Linear); in has stride ld. */
static void linear(const double *in, int rows, int in_dim, size_t ld, const float *w, const float *b, int out_dim,
                   double *out)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < in_dim; i++) acc += in[(size_t)r * ld + i] * w[(size_t)o * in_dim + i];
            out[(size_t)r * out_dim + o] = acc;
        }
}

static void layernorm_rows(double *x, int rows, int d, double eps, const float *g, const float *b)
{
    double *row = malloc(d * sizeof *row);
    for (int r = 0; r < rows; r++) {
        lf_ref_layernorm(x + (size_t)r * d, d, eps, g, b, row);
        memcpy(x + (size_t)r * d, row, d * sizeof *row);
    }
    free(row);
}

/* out [len, D] = act(h W1^T + b1) W2^T + b2, gated with GLU. */
static void feed_forward(const lf_ref_model *m, const lf_ref_layer *L, const double *h, int len, double *out)
{
    const int D = m->d_model, F = m->d_ff, R = F * (m->glu ? 2 : 1);
    double *mid = malloc((size_t)len * R * sizeof *mid);
    linear(h, len, D, D, L->w1, L->b1, R, mid);
    for (int r = 0; r < len; r++)
        for (int c = 0; c < F; c++) {
            double *p = mid + (size_t)r * R;
            p[c] = lf_ref_activate(p[c], m->act) * (m->glu ? p[F + c] : 1.0);
        }
    linear(mid, len, F, R, L->w2, L->b2, D, out);
    free(mid);
}

/* One layer on x [len, D] in place. A reversible block (x2 not NULL) reads
 * its attention's input from x2 and adds its feed-forward into x2. */
static void layer(const lf_ref_model *m, const lf_ref_layer *L, double *x, double *x2, int len)
{
    const size_t count = (size_t)len * m->d_model;
    double *h = malloc(count * sizeof *h), *a = malloc(count * sizeof *a), *other = x2 ? x2 : x;
    const bool pre = m->norm == LF_NORM_PRE;
    memcpy(h, other, count * sizeof *h);
    if (pre) layernorm_rows(h, len, m->d_model, m->eps, L->ln1_g, L->ln1_b);
    lf_ref_attention_sequence(&L->attn, &L->w, m->shared_e, h, len, a);
    for (size_t i = 0; i < count; i++) x[i] += a[i];
    if (!pre) layernorm_rows(x, len, m->d_model, m->eps, L->ln1_g, L->ln1_b);
    memcpy(h, x, count * sizeof *h);
    if (pre) layernorm_rows(h, len, m->d_model, m->eps, L->ln2_g, L->ln2_b);
    feed_forward(m, L, h, len, a);
    for (size_t i = 0; i < count; i++) other[i] += a[i];
    if (!pre) layernorm_rows(x, len, m->d_model, m->eps, L->ln2_g, L->ln2_b);
    free(h), free(a);
}

/* The first len rows of sequence b as the model's input. */
static void embed(const lf_ref_model *m, const float *x, const int64_t *tokens, int b, int n, int len, double *out)
{
    const int D = m->d_model;
    for (int i = 0; i < len; i++)
        for (int c = 0; c < D; c++) {
            const size_t row = (size_t)b * n + i;
            double v;
            if (m->kind == LF_MODEL_ENCODER) v = x[row * D + c];
            else {
                v = m->embed_scale * m->tok[tokens[row] * D + c];
                if (m->pos) v += m->pos[(size_t)(i + m->pos_offset) * D + c];
            }
            out[(size_t)i * D + c] = v;
        }
    if (m->emb_g) layernorm_rows(out, len, D, m->eps, m->emb_g, m->emb_b);
}

/* Sequence b's residual stream h [len, D] after its embedding and the first
 * `stop` layers. A reversible stack's two streams start as the embedding;
 * h is then their sum after the last layer, and the second stream (what the
 * next attention reads) before it. */
static void stream(const lf_ref_model *m, int stop, const float *x, const int64_t *tokens, int b, int n, int len,
                   double *h)
{
    const size_t count = (size_t)len * m->d_model;
    embed(m, x, tokens, b, n, len, h);
    double *x2 = m->reversible ? malloc(count * sizeof *x2) : NULL;
    if (x2) memcpy(x2, h, count * sizeof *x2);
    for (int l = 0; l < stop; l++) layer(m, &m->layer[l], h, x2, len);
    for (size_t i = 0; x2 && i < count; i++) h[i] = stop == m->layers ? h[i] + x2[i] : x2[i];
    free(x2);
}

void lf_ref_model_layer_input(const lf_ref_model *m, int stop, const float *x, const int64_t *tokens, int batch, int n,
                              const int32_t *lengths, double *out)
{
    const int D = m->d_model;
    for (int b = 0; b < batch; b++) {
        const int len = lengths ? lengths[b] : n;
        double *h = out + (size_t)b * n * D;
        memset(h, 0, (size_t)n * D * sizeof *h); /* rows past len are 0 */
        if (len == 0) continue;
        stream(m, stop, x, tokens, b, n, len, h);
        if (m->norm == LF_NORM_PRE) layernorm_rows(h, len, D, m->eps, m->layer[stop].ln1_g, m->layer[stop].ln1_b);
    }
}

/* fairseq's LM head before its logits: h = LN(act(h Wd^T + bd)), in place. */
static void head_transform(const lf_ref_model *m, double *h, int len)
{
    const int D = m->d_model;
    double *mid = malloc((size_t)len * D * sizeof *mid);
    linear(h, len, D, D, m->head_dense_w, m->head_dense_b, D, mid);
    for (size_t i = 0; i < (size_t)len * D; i++) h[i] = lf_ref_activate(mid[i], m->act);
    layernorm_rows(h, len, D, m->eps, m->head_ln_g, m->head_ln_b);
    free(mid);
}

void lf_ref_model_forward(const lf_ref_model *m, const float *x, const int64_t *tokens, int batch, int n,
                          const int32_t *lengths, double *y)
{
    const int D = m->d_model, width = m->kind == LF_MODEL_LM ? m->vocab : D;
    double *h = malloc((size_t)n * D * sizeof *h);
    for (int b = 0; b < batch; b++) {
        const int len = lengths ? lengths[b] : n;
        double *yb = y + (size_t)b * n * width;
        memset(yb, 0, (size_t)n * width * sizeof *yb); /* rows past len are 0 */
        if (len == 0) continue;
        stream(m, m->layers, x, tokens, b, n, len, h);
        if (m->final_g) layernorm_rows(h, len, D, m->eps, m->final_g, m->final_b);
        if (m->head_dense_w) head_transform(m, h, len);
        if (m->kind == LF_MODEL_LM) linear(h, len, D, D, m->logits_w, m->logits_b, m->vocab, yb);
        else memcpy(yb, h, (size_t)len * D * sizeof *yb);
    }
    free(h);
}
