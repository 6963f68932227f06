/*
 * model.h - a stack of encoder layers built from a config and per-layer
 * attention configs, weights then set by name (model_load.c does this from a
 * file). Each layer keeps its own plan and weights; all layers run through
 * one workspace.
 */
#ifndef LF_MODEL_H
#define LF_MODEL_H

#include "stages.h"

/* Weights of a layer besides its attention's (the plan's slots). */
typedef enum { LF_L_LN1_G, LF_L_LN1_B, LF_L_LN2_G, LF_L_LN2_B, LF_L_W1, LF_L_B1, LF_L_W2, LF_L_B2, LF_L_COUNT } lf_layer_tensor;

/* Weights of the model as a whole. */
typedef enum { LF_M_TOK, LF_M_POS, LF_M_EMB_G, LF_M_EMB_B, LF_M_FINAL_G, LF_M_FINAL_B, LF_M_HEAD_W, LF_M_HEAD_B,
               LF_M_SHARED_E, LF_M_HEAD_DENSE_W, LF_M_HEAD_DENSE_B, LF_M_HEAD_LN_G, LF_M_HEAD_LN_B,
               LF_M_COUNT } lf_model_tensor;

typedef struct {
    lf_model_info info;  /* kind, layout, sizes, norm, activation, glu, layerwise */
    int positions;       /* rows of the positional embedding; 0 = none */
    int pos_offset;      /* row of position 0 in it (fairseq: padding_idx + 1) */
    float embed_scale;   /* token embeddings are multiplied by it */
    float eps;           /* of every LayerNorm */
    int bias_ff1, bias_ff2, head_bias;
    int head_dense;      /* LF_MODEL_LM: fairseq's masked-LM head, LN(act(X Wd^T + bd)) before the logits */
    int emb_norm, final_norm; /* LayerNorm after the embeddings, after the last layer */
    int shared_k, shared_n;   /* the layerwise projection [k, n] when info.layerwise */
    int reversible;           /* lucidrains' reversible stack (pre-norm): streams X1 = X2 = x, per layer
                                 X1 += attn(LN1(X2)), X2 += ffn(LN2(X1)); then X = X1 + X2 */
} lf_model_spec;

/* The model's activations, besides the attention layers' workspace. */
typedef enum { LF_A_X, LF_A_H, LF_A_FF, LF_A_IN, LF_A_OUT, LF_A_X2, LF_A_COUNT } lf_act_buf;

typedef struct {
    lf_plan plan;
    lf_layer_weights w;
    cl_mem t[LF_L_COUNT];
    bool set[LF_W_COUNT + LF_L_COUNT];
} lf_model_layer;

struct lf_model {
    lf_context *ctx; /* held */
    lf_model_spec cfg;
    lf_model_layer *layer;
    cl_mem m[LF_M_COUNT];
    bool m_set[LF_M_COUNT];
    size_t weight_bytes;
    cl_mem act[LF_A_COUNT];
    size_t act_cap[LF_A_COUNT];
    lf_workspace ws;
    lf_timeline tl;
    lf_kernel_params params; /* the device's (kernel_params.h), as resolved at creation */
};

/* Creates a model with every weight buffer allocated (biases that are off
 * stay 0); attn[i] is layer i's attention config. */
lf_status lf__model_create(lf_context *ctx, const lf_model_spec *cfg, const lf_attention_config *attn,
                           lf_model **out);

/* Sets a weight from host floats. layer -1: the model's own ("tok", "pos",
 * "emb_ln_g", "emb_ln_b", "final_ln_g", "final_ln_b", "head_w", "head_b",
 * "shared_e"); else layer's: the attention's names (wq ... e f) and "ln1_g",
 * "ln1_b", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2". dims NULL: count is
 * checked, else the shape (ndims dimensions). */
lf_status lf__model_set(lf_model *m, int layer, const char *name, const size_t *dims, size_t ndims, const float *data,
                        size_t count);

/* LF_ERR_STATE naming the first weight that exists and was never set; LF_OK when none. */
lf_status lf__model_check_set(lf_model *m);

/* The name of a model-wide weight ("tok", ...). */
const char *lf__model_tensor_name(int t);

/* Floats of a weight in this model (0 = it does not exist). */
size_t lf__model_weight_count(const lf_model *m, int layer, const char *name);

#endif
