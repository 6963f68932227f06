/* rank_files.h - the attention layer and input files the rank tests measure. */
#ifndef LF_TEST_RANK_FILES_H
#define LF_TEST_RANK_FILES_H

#include <stdint.h>

enum { RANK_TEST_D = 16, RANK_TEST_HEADS = 2 };

/* A lucidrains layer (d_model RANK_TEST_D, RANK_TEST_HEADS heads in its
 * metadata) of max_seq_len `seq` at `path`: random q/k/v/out weights, and
 * proj_k = proj_v [seq, k] the first k columns of the identity (with k = seq,
 * Linformer at the layer's own k is exact). */
void rank_write_layer(const char *path, int seq, int k, uint64_t *rng);

/* An input file of x [batch, n, RANK_TEST_D] and its lengths. */
void rank_write_input(const char *path, const float *x, int batch, int n, const int32_t *lengths);

#endif
