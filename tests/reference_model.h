/*
 * reference_model.h - plain C, double-precision twins of the model's
 * operations (LayerNorm, activations, embeddings) and of a whole model.
 */
#ifndef LF_REFERENCE_MODEL_H
#define LF_REFERENCE_MODEL_H

#include "reference.h"

/* out = (s - mean) / sqrt(var + eps) * gamma + beta over one row of d. */
void lf_ref_layernorm(const double *s, int d, double eps, const float *gamma, const float *beta, double *out);

/* act(v); 0 = none. */
double lf_ref_activate(double v, lf_activation act);

/* One encoder layer's weights (NULL = absent) and its attention's. */
typedef struct {
    lf_attention_config attn; /* resolved (lf_ref_resolve) */
    lf_ref_weights w;
    const float *ln1_g, *ln1_b; /* before attention (pre) or after it (post) */
    const float *ln2_g, *ln2_b; /* before the feed-forward (pre) or after it (post) */
    const float *w1, *b1;       /* [d_ff (x2 with GLU), d_model] */
    const float *w2, *b2;       /* [d_model, d_ff] */
} lf_ref_layer;

/* A whole model. */
typedef struct {
    lf_model_kind kind;
    int layers, d_model, d_ff, vocab;
    lf_norm norm;
    lf_activation act;
    int glu;
    double eps;
    const lf_ref_layer *layer;
    const float *shared_e;          /* layerwise projection, or NULL */
    const float *tok, *pos;         /* embeddings [vocab, D], [positions, D] (pos may be NULL) */
    int pos_offset;
    double embed_scale;
    const float *emb_g, *emb_b;     /* LayerNorm after the embeddings, or NULL */
    const float *final_g, *final_b; /* LayerNorm after the last layer, or NULL */
    const float *logits_w, *logits_b; /* [vocab, D], [vocab] (LM) */
    const float *head_dense_w, *head_dense_b; /* fairseq's LM head: [D, D], [D], or NULL; with */
    const float *head_ln_g, *head_ln_b;       /* h = LN(act(h Wd^T + bd)) before the logits */
    int reversible;                 /* lucidrains' reversible stack: streams x1 = x2 = the input,
                                       x1 += attn(LN1(x2)), x2 += ffn(LN2(x1)); y = x1 + x2 */
} lf_ref_model;

/* y [batch, n, out] from x [batch, n, D] (encoder) or tokens [batch, n];
 * rows past each length are 0. */
void lf_ref_model_forward(const lf_ref_model *m, const float *x, const int64_t *tokens, int batch, int n,
                          const int32_t *lengths, double *y);

/* out [batch, n, D]: what layer `stop` reads in the forward (its LN1 of the
 * stream for pre-norm, the stream for post-norm); rows past each length are 0. */
void lf_ref_model_layer_input(const lf_ref_model *m, int stop, const float *x, const int64_t *tokens, int batch, int n,
                              const int32_t *lengths, double *out);

#endif
