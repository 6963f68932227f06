/* rank_files.c - the files of the rank tests (rank_files.h). */
#include "rank_files.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"
#include "st_write.h"

enum { D = RANK_TEST_D };

void rank_write_layer(const char *path, int seq, int k, uint64_t *rng)
{
    float *w = malloc(4 * D * D * sizeof *w), *bo = malloc(D * sizeof *bo), *eye = calloc((size_t)seq * k, sizeof *eye);
    lf_test_fill(w, 4 * D * D, rng, -0.5f, 0.5f);
    lf_test_fill(bo, D, rng, -0.5f, 0.5f);
    for (int i = 0; i < k; i++) eye[i * k + i] = 1;
    const int64_t sw[2] = {D, D}, sp[2] = {seq, k}, sb[1] = {D};
    const st_tensor t[7] = {{"to_q.weight", ST_F32, 2, sw, w},         {"to_k.weight", ST_F32, 2, sw, w + D * D},
                            {"to_v.weight", ST_F32, 2, sw, w + 2 * D * D}, {"proj_k", ST_F32, 2, sp, eye},
                            {"proj_v", ST_F32, 2, sp, eye},             {"to_out.weight", ST_F32, 2, sw, w + 3 * D * D},
                            {"to_out.bias", ST_F32, 1, sb, bo}};
    char heads[16], msg[256];
    snprintf(heads, sizeof heads, "%d", RANK_TEST_HEADS);
    const char *meta[2] = {"heads", heads};
    cr_assert_eq(st_save(path, t, 7, meta, 1, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    free(w), free(bo), free(eye);
}

void rank_write_input(const char *path, const float *x, int batch, int n, const int32_t *lengths)
{
    const int64_t sx[3] = {batch, n, D}, sl[1] = {batch};
    const st_tensor t[2] = {{"x", ST_F32, 3, sx, x}, {"lengths", ST_I32, 1, sl, lengths}};
    char msg[256];
    cr_assert_eq(st_save(path, t, 2, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
}
