/*
 * model_case.h - model files written tensor by tensor with fresh random
 * weights, in fairseq's or lucidrains' layout, each with its double-precision
 * reference model (reference_model.h).
 */
#ifndef LF_MODEL_CASE_H
#define LF_MODEL_CASE_H

#include <stdbool.h>

#include "reference_model.h"
#include "st_write.h"

#define MAX_TENSORS 128

/* A safetensors file built tensor by tensor. */
typedef struct {
    st_tensor t[MAX_TENSORS];
    char name[MAX_TENSORS][192];
    int64_t shape[MAX_TENSORS][2];
    float *data[MAX_TENSORS];
    size_t count;
    uint64_t rng;
} lf_builder;

/* Adds a random tensor [rows, cols] ([cols] when rows is 0) and returns its data. */
float *lf_builder_add(lf_builder *b, const char *name, int rows, int cols, float lo, float hi);
void lf_builder_write(lf_builder *b, const char *path, const char *const *meta, size_t pairs);
void lf_builder_free(lf_builder *b);

typedef struct {
    int layers, D, heads, n, ff, vocab;
    int k[4];
    bool glu, embeddings;
} lf_model_shape;

/* fairseq's encoder under `stem`: layerwise compress_layer, biases, post-norm;
 * m and L[s->layers] become its reference (L holds the layers). */
void lf_fairseq_model(lf_builder *b, const char *stem, const lf_model_shape *s, lf_ref_model *m, lf_ref_layer *L);

/* lucidrains' Linformer: per-layer k, optional GLU, ReLU, pre-norm; e_t[2 s->layers]
 * receives the E and F the reference takes (proj_k, proj_v transposed; the caller frees them). */
void lf_lucid_model(lf_builder *b, const lf_model_shape *s, lf_ref_model *m, lf_ref_layer *L, float **e_t);

/* lf_model_load of path with opts fails with `want`, leaves its out NULL, and
 * its message holds every string of the NULL-terminated parts. */
void lf_expect_load_refused(lf_context *ctx, const char *path, const lf_model_options *opts, lf_status want,
                            const char *const *parts);

#endif
