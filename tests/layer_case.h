/* layer_case.h - build a layer with random weights, run it, compare with the reference. */
#ifndef LF_LAYER_CASE_H
#define LF_LAYER_CASE_H

#include "helpers.h"
#include "reference.h"

typedef struct {
    lf_attention_config cfg; /* as given to lf_attention_create */
    int batch, n;
    const int32_t *lengths;  /* NULL = all n */
} lf_case;

/* Runs the case on the device and on the reference; returns the relative error.
 * Poisons the output first; fails the test on any library error. */
double lf_case_run(lf_context *ctx, const lf_case *c);

/* The same layer and input: does a mixed-length batch give each sequence
 * exactly what it gets alone? Returns the largest relative difference. */
double lf_case_batch_vs_alone(lf_context *ctx, const lf_case *c);

#endif
