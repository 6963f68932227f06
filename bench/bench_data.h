/*
 * bench_data.h - the seeded layers and inputs that `linformer bench` measures,
 * also what the tests rebuild to check a bench point against the reference.
 */
#ifndef LF_BENCH_DATA_H
#define LF_BENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "bench_options.h"

enum { BENCH_WQ, BENCH_WK, BENCH_WV, BENCH_WO, BENCH_BQ, BENCH_BK, BENCH_BV, BENCH_BO, BENCH_WEIGHTS };

/* The weights live on the host, so that a test can feed its reference the very
 * numbers the device sees; named as lf_attention_set_weight names them. */
typedef struct {
    float *w[BENCH_WEIGHTS];
    size_t count[BENCH_WEIGHTS];
} bench_weights;

extern const char *const bench_weight_names[BENCH_WEIGHTS]; /* "wq", "wk", ... */

/* Uniform +-1/sqrt(d_model) from o->seed (the distribution of
 * lf_attention_init_random; fan_in is d_model for all four matrices here).
 * Returns 0, or -1 when out of memory. */
int bench_weights_make(const bench_options *o, bench_weights *w);
void bench_weights_free(bench_weights *w);

/* The input of sequence length n: batch * n * d_model floats, uniform in [-1, 1),
 * fresh for each n. */
void bench_input(const bench_options *o, int n, float *x);

/* The layer of a point: random (JL) projections shared by the heads for Linformer;
 * the exact modes ignore k. */
lf_attention_config bench_layer_config(const bench_options *o, lf_mode mode, int n, int k);

/* The layer of a point on ctx with the weights set. */
lf_status bench_layer_create(lf_context *ctx, const bench_options *o, lf_mode mode, int n, int k,
                             const bench_weights *w, lf_attention **out);

#endif
