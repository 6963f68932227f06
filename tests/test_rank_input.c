/*
 * test_rank_input.c - `linformer rank` on an input with one bad sequence:
 * a sequence that is not finite is skipped with a note naming it, and the
 * others are measured as without it.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "rank_files.h"
#include "st_write.h"

Test(rank_input, a_sequence_that_is_not_finite_is_skipped_with_a_note, .timeout = 600)
{
    char dir[64], io[4200], model[4200], input[128], cmd[10000], log[16384];
    lf_test_make_dir(dir, "rank-input");
    snprintf(io, sizeof io, "%s/tests/data/pytorch/plain.io.safetensors", LF_SOURCE_DIR);
    snprintf(model, sizeof model, "%s/tests/data/pytorch/plain.model.safetensors", LF_SOURCE_DIR);
    lf_tensor_file *f = NULL;
    lf_tensor_info t;
    cr_assert_eq(lf_tensor_file_open(io, &f, NULL, 0), LF_OK);
    cr_assert_eq(lf_tensor_file_find(f, "x", &t), LF_OK);
    cr_assert_eq(t.ndim, 3);
    const size_t seq = (size_t)(t.shape[1] * t.shape[2]), count = seq * (size_t)t.shape[0];
    float *x = malloc(count * sizeof *x);
    cr_assert_eq(lf_tensor_file_read_f32(f, "x", x, count), LF_OK, "%s", lf_tensor_file_last_error(f));
    lf_tensor_file_free(f);
    cr_assert_geq(t.shape[0], 2, "two sequences at least");
    x[seq + 5] = NAN; /* sequence 1 */
    char err[512];
    snprintf(input, sizeof input, "%s/nan.safetensors", dir);
    const st_tensor tensor = {"x", ST_F32, 3, t.shape, x};
    cr_assert_eq(st_save(input, &tensor, 1, NULL, 0, NULL, 0, err, sizeof err), 0, "%s", err);
    free(x);
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --csv %s/r.csv", LF_TOOL_PATH, model, input, dir);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "sequence 1: its input is not finite (NaN or inf); skipped"), "%s", log);
    cr_expect(strstr(log, "(1 sequence(s) skipped"), "%s", log);
    char line[256];
    snprintf(line, sizeof line, "%s/r.csv", dir);
    FILE *csv = fopen(line, "r");
    cr_assert_not_null(csv);
    int rows = 0, seq1 = 0;
    while (fgets(line, sizeof line, csv)) rows++, seq1 += strncmp(line, "1,", 2) == 0;
    fclose(csv);
    cr_expect_eq(seq1, 0, "no row of sequence 1");
    cr_expect_gt(rows, 1, "sequence 0 is measured");
    lf_test_remove_dir(dir);
}

/* n 20000: P alone is 1.5 GiB of floats and 3 GiB more as doubles for the
 * SVD, past a 4 GiB data limit (NVIDIA's driver cannot open a context under
 * 2 GiB): skipped before anything is allocated. */
Test(rank_input, a_sequence_past_the_hosts_memory_is_skipped, .timeout = 600)
{
    if (LF_TEST_UNDER_ASAN) cr_skip_test("a data limit keeps AddressSanitizer from starting");
    enum { N = 20000 };
    char dir[64], model[128], input[128], cmd[1024], log[16384];
    lf_test_make_dir(dir, "rank-input");
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(input, sizeof input, "%s/input.safetensors", dir);
    uint64_t rng = lf_test_seed();
    rank_write_layer(model, N, 2, &rng);
    float *x = lf_test_random((size_t)N * RANK_TEST_D, &rng, -1, 1);
    const int32_t lengths[1] = {N};
    rank_write_input(input, x, 1, N, lengths);
    free(x);
    snprintf(cmd, sizeof cmd, "(ulimit -d 4194304 && %s rank --model %s --input %s --k 2)", LF_TOOL_PATH, model, input);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "sequence 0 (n = 20000): its 20000 x 20000 matrix") &&
              strstr(log, "GiB of host memory, 4.00 GiB is available; skipped"), "%s", log);
    lf_test_remove_dir(dir);
}
