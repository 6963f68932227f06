/*
 * rank.h - `linformer rank`: how much rank a model's attention needs.
 *
 * For each sequence, layer and head: the exact attention matrix P (n x n) from
 * the device, its singular values (LAPACK), the normalised cumulative spectrum
 * c_r = (sum of the r largest) / (sum of all) of the paper's Figure 1, the
 * smallest r with c_r >= 0.90, 0.95, 0.99, and for each k of a sweep the
 * relative error of the head's output when Linformer attention with that k
 * replaces the exact one.
 *
 * A layer is measured from its own input (rank_measure_layer): for a single
 * attention layer that is the input file's x; for a model, the input the
 * forward gives that layer (lf_model_layer_input).
 */
#ifndef LF_RANK_H
#define LF_RANK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "linformer.h"

#define RANK_MAX_K 32 /* entries of a --k list */

/* The shares of the spectrum reported: k90, k95, k99. */
#define RANK_LEVELS 3
extern const double rank_levels[RANK_LEVELS];

/* One sequence, layer and head. */
typedef struct {
    int seq, layer, head, n;
    int k_at[RANK_LEVELS];   /* k90, k95, k99 */
    int own_k;               /* the k of the layer's own E and F (0 when unknown) */
    double err[RANK_MAX_K];  /* per k of the sweep; NaN where that k could not run */
    double *cumulative;      /* c_1 .. c_n (owned) */
} rank_row;

typedef struct {
    int k[RANK_MAX_K]; /* the sweep, ascending */
    int ks;
    rank_row *rows;
    size_t count, capacity;
    struct bench_progress *progress; /* a bar on a terminal (bench_progress.h), or NULL */
    int skipped; /* sequences too long for an n x n matrix (device budget or host memory), or not finite */
} rank_results;

/* The layers one measurement compares: the exact one gives P and the exact head
 * outputs; at_k[i] runs Linformer with results->k[i] (NULL where it cannot,
 * e.g. a causal layer with a learned or random projection). */
typedef struct {
    lf_context *ctx;
    int model_k; /* the layer's own k (of its E and F) */
    lf_attention *exact;
    lf_attention *at_k[RANK_MAX_K];
} rank_layer;

/* ---- The numbers (pure functions) ---- */

/* The n singular values of p [n, n] (row-major floats), largest first, in double
 * precision. Returns 0, or -1 (out of host memory or LAPACK did not converge). */
int rank_singular_values(const float *p, int n, double *sigma);

/* c[r-1] = (sigma_1 + ... + sigma_r) / (sigma_1 + ... + sigma_n); c[n-1] is 1
 * exactly (all zeros: every c_r is 1). */
void rank_cumulative(const double *sigma, int n, double *c);

/* The smallest r in 1..n with c_r >= level. */
int rank_at_level(const double *c, int n, double level);

/* ||a - b|| / ||b|| over `rows` rows of `cols` columns, rows `ld` apart. */
double rank_rel_err(const float *a, const float *b, int rows, int cols, int ld);

/* ---- The sweep and the layers ---- */

/* Adds the default sweep around model_k to r's (a model's layers may differ in
 * k): model_k/4, /2, 1, 2, 4 times, clipped to [1, limit], without repeats. */
void rank_default_sweep(int model_k, int limit, rank_results *r);

/* Parses "4,8,16" into r->k (ascending, without repeats), each in [1, limit].
 * Returns 0, or -1 with a message in err. */
int rank_parse_sweep(const char *list, int limit, rank_results *r, char *err, size_t err_size);

/* Where a layer comes from: a file of one attention layer, or a model's layer. */
typedef struct {
    const char *path; /* lucidrains' LinformerSelfAttention, or NULL */
    lf_model *model;  /* else layer `index` of this model */
    int index;
} rank_source;

/* The layer's own k: of its E and F, as the file or the model holds them (0 when unknown). */
int rank_own_k(const rank_source *src);

/* The layer, exact (flash): P and the exact head outputs; model_k its own k.
 * Returns its status; the message is the context's. */
lf_status rank_load_exact(lf_context *ctx, const rank_source *src, int heads, rank_layer *layer);

/* The same layer with Linformer at each k of r's sweep: its own E and F at its
 * own k, else seeded random ones. A k that cannot run (a causal layer needs a
 * pooling projection) is noted on `log` and left NULL. */
lf_status rank_load_sweep(rank_layer *layer, const rank_source *src, uint64_t seed, const rank_results *r, FILE *log);
void rank_free_layer(rank_layer *layer);

/* ---- Measuring ---- */

/* Measures every sequence of x [batch, n, d_model] (lengths NULL = all n) at
 * every head of the layer, appending one row per sequence and head. A
 * sequence whose n x n matrix is over the device's budget is noted on `log`
 * and skipped. Returns LF_OK, or the first other failure with a message in err. */
lf_status rank_measure_layer(const rank_layer *layer, int layer_index, const float *x, int batch, int n,
                             const int32_t *lengths, rank_results *r, FILE *log, char *err, size_t err_size);

void rank_results_free(rank_results *r);

/* ---- Reports ---- */

/* Per layer and head, means over the measured sequences. */
void rank_print_table(FILE *out, const rank_results *r);

/* seq,layer,head,n,k90,k95,k99,own_k,err_k<K>...: one row per sequence, layer and head. */
void rank_write_csv(FILE *out, const rank_results *r);

/* The figure's data: one block per layer and head ("r mean_c_r" rows, title
 * first), then one block of "layer head mean_k90" rows for the heat map.
 * Returns the number of spectrum blocks; *layers and *heads size the heat map. */
int rank_plot_data(FILE *out, const rank_results *r, int *layers, int *heads);

#endif
