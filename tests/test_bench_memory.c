/*
 * test_bench_memory.c - `linformer bench` checks what a point needs of the
 * host's memory before allocating it: a point past it is an OOM row saying how
 * much of what, and the sweep goes on. The host's memory is bounded for the
 * test by the process's data limit (ulimit -d), which the bench honours; 4 GiB
 * of it, as NVIDIA's driver cannot open a context under 2 GiB.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define BENCH "bench --heads 2 --k 8 --modes flash,linformer --repeat 1 --warmup 0"

Test(bench_memory, a_large_n_is_an_oom_row_and_the_sweep_goes_on, .timeout = 600)
{
    if (LF_TEST_UNDER_ASAN) cr_skip_test("a data limit keeps AddressSanitizer from starting");
    char cmd[2048], log[16384];
    /* n 65536, batch 8, d_model 512: 5 GiB of inputs and outputs, past a 4 GiB limit; n 16 fits */
    snprintf(cmd, sizeof cmd, "(ulimit -d 4194304 && %s " BENCH " --d-model 512 --n 16,65536 --batch 8)",
             LF_TOOL_PATH);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "n=16 ") && strstr(log, " ms (min"), "n 16 was measured:\n%s", log);
    cr_expect(strstr(log, "n=65536  k=-     OOM (needs 5.01 GiB of host memory"), "n 65536 is OOM:\n%s", log);
    cr_expect(strstr(log, "the inputs and outputs 5.00 GiB") && strstr(log, "4.00 GiB is available"), "%s", log);
}

Test(bench_memory, weights_past_the_host_make_every_point_oom, .timeout = 600)
{
    if (LF_TEST_UNDER_ASAN) cr_skip_test("a data limit keeps AddressSanitizer from starting");
    char cmd[2048], log[16384];
    /* d_model 65536: 64 GiB of weights, and as much again for a CPU device's copy */
    snprintf(cmd, sizeof cmd, "(ulimit -d 4194304 && %s " BENCH " --d-model 65536 --n 16)", LF_TOOL_PATH);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "[2/2] ") && strstr(log, "OOM (needs"), "every point is an OOM row:\n%s", log);
    cr_expect(strstr(log, "the weights 64.00 GiB (4 d_model^2 floats)") && strstr(log, "4.00 GiB is available"),
              "%s", log);
}
