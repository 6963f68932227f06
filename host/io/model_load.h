/*
 * model_load.h - what model_load.c (names, tensors, upload) and
 * model_config.c (configs from shapes and __metadata__) share: the file and
 * the tensors found in it for each layer and for the model.
 */
#ifndef LF_MODEL_LOAD_H
#define LF_MODEL_LOAD_H

#include "model.h"
#include "safetensors.h"

#define LF_NAME_MAX 256
#define LF_MAX_LAYERS 4096

/* A layer's tensors, by what they are. */
typedef enum { LF_R_LN1_G, LF_R_LN1_B, LF_R_WQ, LF_R_BQ, LF_R_WK, LF_R_BK, LF_R_WV, LF_R_BV, LF_R_E, LF_R_F, LF_R_WO,
               LF_R_BO, LF_R_LN2_G, LF_R_LN2_B, LF_R_W1, LF_R_B1, LF_R_W2, LF_R_B2, LF_R_COUNT } lf_role_id;

/* A tensor of a layout: its name (after the layer's or model's base), the
 * model weight it sets (model.h's names), its rank, whether it must exist. */
typedef struct {
    const char *suffix, *weight;
    int ndim;
    bool required;
} lf_role;

typedef struct {
    lf_context *ctx;
    const char *path;
    lf_st_file file;
    const lf_st_file *f;
    char stem[LF_NAME_MAX];      /* where the model sits in the file ("" = the whole file) */
    char base[LF_NAME_MAX + 8];  /* what "layers.{i}." follows */
    bool fairseq, lm;            /* the layout: fairseq, else lucidrains (lm: LinformerLM) */
    bool layerwise;              /* one compress_layer for every layer (fairseq) */
    bool reversible;             /* lucidrains' reversible stack ("blocks.{i}.f", ".g") */
    int layers;
    const lf_st_tensor *(*t)[LF_R_COUNT]; /* [layers][role], NULL = absent */
    const lf_st_tensor *m[LF_M_COUNT];    /* the model's own, NULL = absent */
} lf_source;

/* The model's config and each layer's attention config from the tensors'
 * shapes, __metadata__ and opts (model_config.c). */
lf_status lf__model_source_config(lf_source *s, const lf_model_options *opts, lf_model_spec *cfg,
                                  lf_attention_config *attn);

#endif
