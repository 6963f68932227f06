/*
 * reference.h - plain C, double-precision twins of the library's operations.
 * Written for clarity, not speed: loops that follow the definitions.
 */
#ifndef LF_REFERENCE_H
#define LF_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "linformer.h"

/* The weights of one layer as set through lf_attention_set_weight (NULL = absent). */
typedef struct {
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    const float *e, *f; /* learned matrices or conv weights, as the header lays them out */
} lf_ref_weights;

/* Resolves the defaults of a config the way lf_attention_create does. */
void lf_ref_resolve(lf_attention_config *cfg);

/* The random projection of LF_PROJ_RANDOM: `count` floats of N(0, 1/k) from seed. */
void lf_ref_random_projection(float *out, size_t count, uint64_t seed, int k);

/* y [batch, n, d_model] from x [batch, n, d_model]; lengths NULL = all n.
 * cfg must be resolved; shared_e is the layerwise projection (or NULL). */
void lf_ref_attention(const lf_attention_config *cfg, const lf_ref_weights *w, const float *shared_e,
                      const float *x, int batch, int n, const int32_t *lengths, double *y);

/* The same for one sequence of len >= 1 rows: x, y [len, d_model]. */
void lf_ref_attention_sequence(const lf_attention_config *cfg, const lf_ref_weights *w, const float *shared_e,
                               const double *x, int len, double *y);

/* Masked softmax of one row: the first cols_valid entries, the rest 0. */
void lf_ref_softmax(const double *s, int cols, int cols_valid, double *p);

#endif
