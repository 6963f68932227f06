/*
 * model_load.h - what model_load.c (names, tensors, upload) and
 * model_config.c (configs from shapes and __metadata__) share: the file, its
 * layout and the tensors found in it for each layer and for the model.
 */
#ifndef LF_MODEL_LOAD_H
#define LF_MODEL_LOAD_H

#include "model.h"
#include "layouts.h"

#define LF_MAX_LAYERS 4096

typedef struct {
    lf_context *ctx;
    const char *path;
    lf_st_file file;
    const lf_st_file *f;
    char stem[LF_NAME_MAX];      /* where the model sits in the file ("" = the whole file) */
    const lf_layout *layout;     /* which of layouts.h's rows */
    bool layerwise;              /* one projection for every layer (the model's "shared_e") */
    int layers;
    const lf_st_tensor *(*t)[LF_R_COUNT]; /* [layers][role], NULL = absent */
    const lf_st_tensor *m[LF_M_COUNT];    /* the model's own, NULL = absent */
} lf_source;

/* The model's config and each layer's attention config from the tensors'
 * shapes, __metadata__ and opts (model_config.c). */
lf_status lf__model_source_config(lf_source *s, const lf_model_options *opts, lf_model_spec *cfg,
                                  lf_attention_config *attn);

#endif
