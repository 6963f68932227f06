/*
 * test_hygiene.c - creating and freeing everything many times leaves the
 * process's memory flat. VmRSS (/proc/self/status) is read after a warm-up
 * (kernels built, CLBlast's and the implementation's caches filled, malloc's
 * arenas grown) and again at the end; the growth must stay under a margin far
 * below what a leak would add: each layer here holds ~100 KiB of device
 * memory, which on a CPU device is host memory, so leaking one per iteration
 * would grow RSS by ~100 MiB over 1000 iterations. Each iteration also loads
 * a layer (lf_attention_load) and a 3-layer model (lf_model_load), runs the
 * model, frees both, and fails to load a missing file both ways. Host-side
 * leaks of any size are LeakSanitizer's job (scripts/check-robustness.sh runs
 * this test under it).
 *
 * Contexts are created 200 times, not 1000: each one takes the OpenCL context
 * the one before left (host/runtime/context.c keeps it, and with it CLBlast's GEMM
 * programs, which otherwise compile again: seconds per context on Intel's CPU
 * runtime), loads its kernels from the disk cache and runs a forward, ~50-100
 * ms, so 1000 would take a minute or more of the shared CI cores without
 * finding more than 200 do (a per-context leak of even 100 KiB shows as 20 MiB).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_case.h"

#define MARGIN_KIB (8 * 1024)          /* for 1000 layers, projections and loads */
#define CONTEXT_MARGIN_KIB (16 * 1024) /* for 200 contexts */

TestSuite(hygiene, .timeout = 1200);

/* Under AddressSanitizer RSS says nothing and the loops only feed LeakSanitizer. */
#define RSS_MEANINGFUL (!LF_TEST_UNDER_ASAN)

static void expect_flat(long grown, long margin, int rounds, const char *what)
{
    cr_log_info("RSS grew by %ld KiB over %d %s (margin %ld KiB)", grown, rounds, what, margin);
    if (!RSS_MEANINGFUL) return;
    cr_expect_leq(grown, margin, "RSS grew by %ld KiB over %d %s created, used and freed", grown, rounds, what);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f, "no /proc/self/status");
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    cr_assert_gt(kib, 0, "no VmRSS line");
    return kib;
}

enum { D = 64, HEADS = 4, NMAX = 48, K = 16 };

/* One round: a projection, a layer on it and one of each mode, a forward each. */
static void round_trip(lf_context *ctx, int i, const float *x, float *y)
{
    lf_projection *p = NULL;
    cr_assert_eq(lf_projection_create(ctx, K, NMAX, LF_PROJ_RANDOM, (uint64_t)i, &p), LF_OK, "%s",
                 lf_context_last_error(ctx));
    const int32_t lens[] = {NMAX, 1 + i % NMAX};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_attention_config c;
        lf_attention_config_init(&c, D, HEADS, NMAX, K);
        c.mode = (lf_mode)m;
        if (m == LF_MODE_LINFORMER && i % 2) c.sharing = LF_SHARE_LAYERWISE;
        lf_attention *layer = NULL;
        cr_assert_eq(lf_attention_create(ctx, &c, c.sharing == LF_SHARE_LAYERWISE ? p : NULL, &layer), LF_OK, "%s",
                     lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_init_random(layer, (uint64_t)i), LF_OK);
        /* the workspace grows with the batch: vary it */
        const int batch = 1 + (i + m) % 2;
        cr_assert_eq(lf_attention_forward(layer, x, y, batch, NMAX, lens), LF_OK, "%s", lf_context_last_error(ctx));
        lf_attention_free(layer);
    }
    lf_projection_free(p);
}

/* One model from a file, a forward at a length that varies, and a load that fails. */
static void model_round(lf_context *ctx, const char *path, int i, uint64_t *rng)
{
    lf_model *m = NULL;
    cr_assert_eq(lf_model_load(ctx, path, NULL, &m), LF_OK, "%s", lf_context_last_error(ctx));
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(m, &info), LF_OK);
    const int n = 1 + i % info.max_seq_len;
    float *x = malloc((size_t)n * info.d_model * sizeof *x), *y = malloc((size_t)n * info.d_model * sizeof *y);
    lf_test_fill(x, (size_t)n * info.d_model, rng, -1, 1);
    cr_assert_eq(lf_model_forward(m, x, NULL, y, 1, n, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    free(x), free(y);
    lf_model_free(m);
    lf_model *bad = NULL;
    cr_assert_eq(lf_model_load(ctx, "/nonexistent.safetensors", NULL, &bad), LF_ERR_IO);
    cr_assert_null(bad);
}

Test(hygiene, layers_projections_and_loads_1000_times)
{
    lf_context *ctx = lf_test_context();
    uint64_t rng = lf_test_seed();
    float *x = malloc(2 * NMAX * D * sizeof *x), *y = malloc(2 * NMAX * D * sizeof *y);
    lf_test_fill(x, 2 * NMAX * D, &rng, -1, 1);
    char path[4200], model[4200];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus_loader/valid_headwise.safetensors", LF_SOURCE_DIR);
    snprintf(model, sizeof model, "%s/tests/data/models/encoder_depth3.model.safetensors", LF_SOURCE_DIR);
    const int warm = 50, total = 1000;
    long base = 0;
    for (int i = 0; i < warm + total; i++) {
        if (i == warm) base = rss_kib();
        round_trip(ctx, i, x, y);
        lf_attention *loaded = NULL;
        cr_assert_eq(lf_attention_load(ctx, path, 0, (lf_mode)(i % 3), &loaded), LF_OK, "%s",
                     lf_context_last_error(ctx));
        lf_attention_free(loaded);
        /* failures must not leak either */
        lf_attention *bad = NULL;
        cr_assert_eq(lf_attention_load(ctx, "/nonexistent.safetensors", 0, LF_MODE_LINFORMER, &bad), LF_ERR_IO);
        model_round(ctx, model, i, &rng);
    }
    expect_flat(rss_kib() - base, MARGIN_KIB, total, "rounds of layers, projections, models and loads");
    free(x), free(y);
    lf_context_free(ctx);
}

Test(hygiene, contexts_200_times, .timeout = 600)
{
    uint64_t rng = lf_test_seed();
    float *x = malloc(2 * NMAX * D * sizeof *x), *y = malloc(2 * NMAX * D * sizeof *y);
    lf_test_fill(x, 2 * NMAX * D, &rng, -1, 1);
    const int warm = 20, total = 200;
    long base = 0;
    for (int i = 0; i < warm + total; i++) {
        if (i == warm) base = rss_kib();
        lf_context *ctx = lf_test_context();
        lf_attention_config c;
        lf_attention_config_init(&c, D, HEADS, NMAX, K);
        lf_attention *layer = NULL;
        cr_assert_eq(lf_attention_create(ctx, &c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_init_random(layer, (uint64_t)i), LF_OK);
        cr_assert_eq(lf_attention_forward(layer, x, y, 2, NMAX, NULL), LF_OK, "%s", lf_context_last_error(ctx));
        lf_attention_free(layer);
        lf_context_free(ctx);
    }
    expect_flat(rss_kib() - base, CONTEXT_MARGIN_KIB, total, "contexts");
    free(x), free(y);
}

/* A freed context's cl_context serves the next context on its device (so
 * CLBlast's programs built for it serve too), never two live contexts at once,
 * and a cl_context the host handed in is never kept. */
Test(hygiene, freed_context_is_reused_on_its_device)
{
    lf_context *first = lf_test_context();
    cl_context kept = lf_context_cl_context(first);
    clRetainContext(kept); /* so that a new context cannot get its address */
    lf_context *live = lf_test_context();
    cr_expect_neq(lf_context_cl_context(live), kept, "two live contexts share a cl_context");
    lf_context_free(first);
    lf_context *next = lf_test_context();
    cr_expect_eq(lf_context_cl_context(next), kept, "the freed context's cl_context was not reused");

    cl_uint refs = 0, after = 0;
    lf_context *wrapped = NULL;
    char msg[1024];
    clGetContextInfo(kept, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    cr_assert_eq(lf_context_create_from_cl(kept, lf_context_cl_queue(next), &wrapped, msg, sizeof msg), LF_OK, "%s", msg);
    lf_context_free(wrapped);
    clGetContextInfo(kept, CL_CONTEXT_REFERENCE_COUNT, sizeof after, &after, NULL);
    cr_expect_eq(after, refs, "a handed-in cl_context kept %u references after its lf_context was freed", after - refs);
    lf_context_free(next);
    lf_context_free(live);
    clReleaseContext(kept);
}

/* At most 4 OpenCL contexts are kept (linformer.h, lf_context_free): of 5
 * freed at once, one is released. Each is retained here to read its count. */
Test(hygiene, at_most_four_contexts_are_kept)
{
    enum { N = 5 };
    lf_context *ctx[N];
    cl_context cl[N];
    for (int i = 0; i < N; i++) {
        ctx[i] = lf_test_context();
        cl[i] = lf_context_cl_context(ctx[i]);
        clRetainContext(cl[i]);
    }
    for (int i = 0; i < N; i++) lf_context_free(ctx[i]);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        cl_uint refs = 0;
        cr_assert_eq(clGetContextInfo(cl[i], CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
        kept += refs > 1;
        clReleaseContext(cl[i]);
    }
    cr_expect_eq(kept, 4, "%d of %d freed contexts' OpenCL contexts are still held", kept, N);
}
