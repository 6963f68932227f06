/*
 * layouts.h - the state-dict layouts the loaders read, one row each: where a
 * layer's and a model's tensors sit (name templates and the weight each
 * sets), and what a layout means where the shapes cannot say. Adding a layout
 * is adding a row to layouts.c; the Python package reads the same rows
 * through lf_layout_tensors. Here too: the one inference of a layer's
 * attention config from its tensors.
 */
#ifndef LF_LAYOUTS_H
#define LF_LAYOUTS_H

#include "runtime.h"
#include "safetensors.h"

#define LF_NAME_MAX 256                        /* a model's stem */
#define LF_ROLE_NAME_MAX 128                   /* what follows a layer's "{i}." (lf_layout_tensor.name) */
#define LF_LAYOUT_NAME_MAX (LF_NAME_MAX + LF_ROLE_NAME_MAX) /* a tensor's name */

/* A layer's tensors, by what they are. */
typedef enum { LF_R_LN1_G, LF_R_LN1_B, LF_R_WQ, LF_R_BQ, LF_R_WK, LF_R_BK, LF_R_WV, LF_R_BV, LF_R_E, LF_R_F, LF_R_WO,
               LF_R_BO, LF_R_LN2_G, LF_R_LN2_B, LF_R_W1, LF_R_B1, LF_R_W2, LF_R_B2, LF_R_COUNT } lf_role_id;

/* A tensor of a layout: its name (after the layer's or model's base; NULL:
 * not in this layout), the weight it sets (model.h's names), its rank,
 * whether it must exist, and whether it is stored as the transpose of that
 * weight (lucidrains' proj_k is E^T). */
typedef struct {
    const char *suffix, *weight;
    int ndim;
    bool required, transposed;
} lf_role;

/* Whether a layout's model has embeddings and logits beside its layers. */
typedef enum { LF_EMBED_NONE, LF_EMBED_OPTIONAL, LF_EMBED_REQUIRED } lf_embed_rule;

typedef struct {
    const char *name;   /* in messages: "lucidrains' LinformerLM" */
    const char *key;    /* lf_layout_tensors' name of it: "lucidrains-lm" */
    const char *family; /* lf_model_info.layout: "lucidrains" or "fairseq" */
    const char *base;   /* between the model's stem and its stack ("linformer.net.") */
    const char *stack;  /* what "{i}." follows ("layers."); NULL: the file is one layer */
    bool reversible;    /* a role's "0." and "1." are a block's "f.net." and "g.net." */
    const char *marker; /* a model tensor whose presence picks this row over the next; NULL: none needed */
    const lf_role *layer; /* [LF_R_COUNT] */
    const lf_role *model; /* the model's own tensors, under the stem */
    size_t model_count;
    const lf_role *head; /* a head beside the model: at the stem with head_beside replaced by head_at */
    size_t head_count;
    const char *head_beside, *head_at;
    lf_embed_rule embed;
    bool f_from_e;        /* a layer with values but no F projects them with E (else an error) */
    lf_position position; /* where the projections meet the biases */
    lf_norm norm;         /* the default placement of the norms */
    int padding_idx;      /* the default: position 0 is row padding_idx + 1 of the positions */
} lf_layout;

/* The rows: a single layer's first, then whole models in the order a name is tried. */
typedef enum { LF_LAYOUT_LUCID_ATTENTION, LF_LAYOUT_LUCID_LM, LF_LAYOUT_LUCID, LF_LAYOUT_LUCID_REV_LM,
               LF_LAYOUT_LUCID_REV, LF_LAYOUT_FAIRSEQ, LF_LAYOUT_COUNT } lf_layout_id;
#define LF_LAYOUT_FIRST_MODEL LF_LAYOUT_LUCID_LM

extern const lf_layout lf__layouts[LF_LAYOUT_COUNT];

/* Layer `layer`'s tensor `role` of a layout whose model sits at `stem`: stem
 * base stack "{layer}." suffix (a one-layer layout: stem suffix). */
void lf__layout_layer_name(const lf_layout *l, const char *stem, int layer, lf_role_id role, char *out, size_t size);

/* What follows a layer's "{i}." in the name of its tensor `role` (a
 * reversible block's "f.net." or "g.net." for the role's "0." or "1."). */
void lf__layout_role_name(const lf_layout *l, lf_role_id role, char *out, size_t size);

/* The role of a layer tensor `name` of a model at `stem` with `layers`
 * layers, -1 for another name; *layer gets its layer. One pass over the
 * roles, never over the layers. */
int lf__layout_layer_role(const lf_layout *l, const char *stem, int layers, const char *name, int *layer);

/* The model role of a layout that sets `weight`, NULL when it has none. */
const lf_role *lf__layout_model_role(const lf_layout *l, const char *weight);

/* Finds `name` in f, checks its rank and float type; a missing required one
 * is an error naming it. *out NULL when absent. */
lf_status lf__layout_get(lf_context *ctx, const char *path, const lf_st_file *f, const char *name,
                         const lf_role *role, const lf_st_tensor **out);

/* Every tensor of layer `layer` into t[LF_R_COUNT] (NULL: absent or not in the layout). */
lf_status lf__layout_get_layer(lf_context *ctx, const char *path, const lf_st_file *f, const lf_layout *l,
                               const char *stem, int layer, const lf_st_tensor **t);

/* The tensor as the library's floats (transposed back where stored so), in
 * *out from malloc. */
lf_status lf__layout_floats(lf_context *ctx, const char *path, const lf_st_tensor *t, bool transposed, float **out);

/* A tensor (NULL: absent, no check) is [rows, cols], or [rows] when 1-D. */
lf_status lf__expect_shape(lf_context *ctx, const char *path, const lf_st_tensor *t, int64_t rows, int64_t cols);

/* Whether a __metadata__ number is written plainly: decimal digits after an
 * optional '-', and when `real` an optional fraction and exponent ("1e-05").
 * strtol and strtod would also take a leading space, '+', hex, "inf", "nan". */
bool lf__plain_number(const char *v, bool real);

/* One layer's tensors as found, for the inference of its config. */
typedef struct {
    lf_context *ctx;
    const char *path;
    const lf_layout *layout;
    const char *stem;
    int layer;                         /* its index; in messages only */
    const lf_st_tensor *const *t;      /* [LF_R_COUNT], NULL = absent */
    const lf_st_tensor *shared_e;      /* the model's layerwise projection; NULL = none */
} lf_layer_tensors;

/* The layer's attention config from its tensors' shapes and `heads`; every
 * shape is checked against it. */
lf_status lf__layer_config(const lf_layer_tensors *l, int heads, lf_attention_config *c);

#endif
