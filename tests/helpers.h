/* helpers.h - what every test uses: random data, poison, error norms, a context. */
#ifndef LF_TEST_HELPERS_H
#define LF_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_params.h"
#include "linformer.h"

/* A value no kernel writes: tests fill outputs with it first. */
/* 1 when built with AddressSanitizer, which maps terabytes of shadow memory:
 * a memory limit (ulimit -v or -d) keeps it from starting, and RSS says
 * nothing under it (freed memory stays in quarantine). */
#if defined(__SANITIZE_ADDRESS__)
#define LF_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LF_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef LF_TEST_UNDER_ASAN
#define LF_TEST_UNDER_ASAN 0
#endif

#define LF_POISON 1.2345e30f

/* Fresh random data: each call draws from a generator seeded from the clock
 * and a counter; the seed is printed on failure by the assertions below. */
uint64_t lf_test_seed(void);
void lf_test_fill(float *x, size_t count, uint64_t *state, float lo, float hi);
void lf_test_poison(float *x, size_t count);
/* ||out - ref|| / ||ref||; returns +inf when an element of out is poison, NaN or inf. */
double lf_test_rel_err(const float *out, const double *ref, size_t count);
double lf_test_rel_err_f(const float *out, const float *ref, size_t count);

/* Device buffers from host arrays, for the kernel tests: a buffer holding a
 * copy of data, and a download of one; both fail the test on any error. */
cl_mem lf_test_upload(lf_context *ctx, const void *data, size_t bytes);
void lf_test_download(lf_context *ctx, cl_mem m, float *out, size_t count);
/* A malloc'd array of fresh random values in [lo, hi). */
float *lf_test_random(size_t count, uint64_t *state, float lo, float hi);

/* Whether LF_TEST_TINY=1 asks the grids for their smallest shapes: the
 * Oclgrind stage sets it, as the simulator runs kernels about a thousand
 * times slower than a CPU device. */
bool lf_test_tiny(void);

/* Whether LF_TEST_MKL=1 says this build has MKL beside it, so that it must
 * load (tests/CMakeLists.txt sets it where build/mkl exists). */
bool lf_test_with_mkl(void);

/* Opens the default device (LINFORMER_DEVICE applies); fails the test if none. */
lf_context *lf_test_context(void);

/* ctx's device's kernel parameters as the library resolves them now
 * (LINFORMER_KERNEL_PARAMS included), for the typed launchers. */
lf_kernel_params lf_test_kernel_params(lf_context *ctx);

/* Whether a program of `file` was built on ctx with options holding both
 * `a` and `b` (the kernel cache of the context: what its launches built). */
bool lf_test_built_with(lf_context *ctx, const char *file, const char *a, const char *b);

/* Runs a shell command, returns its exit status; output goes to `log` (may be NULL). */
int lf_test_system(const char *cmd, char *log, size_t log_size);

/* Where the tests find their data (the folder holding tests/data and tests/fuzz)
 * and the linformer program: LINFORMER_TEST_DATA and LINFORMER_TOOL when set, so
 * tests moved away from the source tree (scripts/bundle.sh) still run; else the
 * source tree and the program of the build they belong to. */
const char *lf_test_source_dir(void);
const char *lf_test_tool(void);
#define LF_SOURCE_DIR lf_test_source_dir()
#define LF_TOOL_PATH lf_test_tool()

/* A folder of a test's own, /tmp/lf-WHAT-XXXXXX, made in `dir` (64 bytes at
 * least); and its removal with everything in it. Both fail the test on error. */
void lf_test_make_dir(char *dir, const char *what);
void lf_test_remove_dir(const char *dir);

/* The exit status of a command given --plot FIGURE: 0 where gnuplot is
 * installed; 1 where it is not (a machine that runs the bundle), after the
 * command said so and left FIGURE.dat and FIGURE.gp to draw elsewhere, which
 * lf_test_expect_undrawn checks in its log and beside FIGURE. */
int lf_test_plot_status(void);
void lf_test_expect_undrawn(const char *figure, const char *log);

/* Runs the linformer program with `args` (shell words) through lf_test_system. */
int lf_test_run_tool(const char *args, char *log, size_t log_size);

#endif
