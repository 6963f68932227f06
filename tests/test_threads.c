/*
 * test_threads.c - the thread rules of linformer.h.
 *   - Threads with a context each run forwards at once and get the same bits
 *     as the same forward run alone.
 *   - Threads sharing one context and one layer run forwards (of different
 *     shapes, so the workspace regrows under them) concurrently; the context's
 *     lock serialises them and every result is the one the thread gets alone,
 *     bit for bit, and matches the double-precision reference.
 *   - Threads opening contexts at once in a fresh process, and freeing them
 *     while others run, get the bits of the same forwards run alone.
 * Threads only record what they got; the assertions run on the test's thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_case.h"

#define THREADS 4
#define REPEATS 3
#define TOL 1e-5

TestSuite(threads, .timeout = 900);

enum { D = 32, HEADS = 2, NMAX = 61, K = 8 };

/* Weights as host arrays, so each context can set the same ones and the reference can use them. */
typedef struct {
    lf_attention_config cfg; /* resolved */
    float *w[10];
    size_t count[10];
} weights;
static const char *names[10] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "e", "f"};

static void weights_make(weights *w, lf_mode mode, uint64_t *rng)
{
    memset(w, 0, sizeof *w);
    lf_attention_config_init(&w->cfg, D, HEADS, NMAX, K);
    w->cfg.mode = mode;
    lf_ref_resolve(&w->cfg);
    const size_t sizes[10] = {D * D, D * D, D * D, D * D, D, D, D, D,
                              mode == LF_MODE_LINFORMER ? K * NMAX : 0, mode == LF_MODE_LINFORMER ? K * NMAX : 0};
    for (int i = 0; i < 10; i++) {
        w->count[i] = sizes[i];
        if (!sizes[i]) continue;
        w->w[i] = malloc(sizes[i] * sizeof(float));
        lf_test_fill(w->w[i], sizes[i], rng, -0.5f, 0.5f);
    }
}

static void weights_free(weights *w)
{
    for (int i = 0; i < 10; i++) free(w->w[i]);
}

/* Returns the layer or NULL; on the test's thread the caller asserts. */
static lf_attention *layer_make(lf_context *ctx, const weights *w)
{
    lf_attention_config c;
    lf_attention_config_init(&c, D, HEADS, NMAX, K);
    c.mode = w->cfg.mode;
    lf_attention *layer = NULL;
    if (lf_attention_create(ctx, &c, NULL, &layer) != LF_OK) return NULL;
    for (int i = 0; i < 10; i++)
        if (w->count[i] && lf_attention_set_weight(layer, names[i], w->w[i], w->count[i]) != LF_OK) {
            lf_attention_free(layer);
            return NULL;
        }
    return layer;
}

typedef struct {
    /* in */
    const weights *w;
    lf_context *shared_ctx; /* NULL: open one */
    lf_attention *shared_layer;
    const float *x;
    int batch, n;
    const int32_t *lens;
    pthread_barrier_t *start; /* set by run_together */
    /* out */
    float *y[REPEATS];
    lf_status st;
    char msg[512];
} job;

static void *run(void *arg)
{
    job *j = arg;
    lf_context *ctx = j->shared_ctx;
    lf_attention *layer = j->shared_layer;
    j->st = LF_OK;
    if (!ctx) {
        j->st = lf_context_create(NULL, &ctx, j->msg, sizeof j->msg);
        if (j->st == LF_OK && !(layer = layer_make(ctx, j->w))) {
            j->st = LF_ERR_STATE;
            snprintf(j->msg, sizeof j->msg, "layer: %s", lf_context_last_error(ctx));
        }
    }
    pthread_barrier_wait(j->start);
    const size_t count = (size_t)j->batch * j->n * D;
    for (int r = 0; r < REPEATS && j->st == LF_OK; r++) {
        j->y[r] = malloc(count * sizeof(float));
        lf_test_poison(j->y[r], count);
        j->st = lf_attention_forward(layer, j->x, j->y[r], j->batch, j->n, j->lens);
        if (j->st != LF_OK) snprintf(j->msg, sizeof j->msg, "forward: %s", lf_context_last_error(ctx));
    }
    if (!j->shared_ctx) {
        lf_attention_free(layer);
        lf_context_free(ctx);
    }
    return NULL;
}

/* Runs jobs[THREADS] on a thread each, all starting their forwards at once,
 * and asserts on this thread that each one succeeded. */
static void run_together(job *jobs)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i].start = &start;
        cr_assert_eq(pthread_create(&t[i], NULL, run, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(jobs[i].st, LF_OK, "thread %d: %s: %s", i, lf_status_string(jobs[i].st), jobs[i].msg);
}

static void expect_same_bits(const float *got, const float *want, size_t count, const char *what, int thread, int rep)
{
    size_t i = 0;
    while (i < count && memcmp(&got[i], &want[i], sizeof *got) == 0) i++;
    cr_expect_eq(i, count, "%s: thread %d, run %d differs from alone at [%zu]: %.9g vs %.9g", what, thread, rep, i,
                 i < count ? got[i] : 0.0, i < count ? want[i] : 0.0);
}

Test(threads, a_context_per_thread)
{
    const int batch = 2, n = 53;
    const int32_t lens[] = {53, 31};
    const size_t count = (size_t)batch * n * D;
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        uint64_t rng = lf_test_seed();
        weights w;
        weights_make(&w, (lf_mode)m, &rng);
        float *x = malloc(count * sizeof *x), *alone = malloc(count * sizeof *alone);
        lf_test_fill(x, count, &rng, -1, 1);

        /* alone, on a context of its own */
        lf_context *ctx = lf_test_context();
        lf_attention *layer = layer_make(ctx, &w);
        cr_assert_not_null(layer, "%s", lf_context_last_error(ctx));
        lf_test_poison(alone, count);
        cr_assert_eq(lf_attention_forward(layer, x, alone, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
        double *ref = malloc(count * sizeof *ref);
        lf_ref_weights rw = {w.w[0], w.w[1], w.w[2], w.w[3], w.w[4], w.w[5], w.w[6], w.w[7], w.w[8], w.w[9]};
        lf_ref_attention(&w.cfg, &rw, NULL, x, batch, n, lens, ref);
        double err = lf_test_rel_err(alone, ref, count);
        cr_assert_leq(err, TOL, "%s alone: relative error %.3g", lf_mode_name((lf_mode)m), err);
        lf_attention_free(layer);
        lf_context_free(ctx);

        job jobs[THREADS];
        for (int i = 0; i < THREADS; i++) jobs[i] = (job){.w = &w, .x = x, .batch = batch, .n = n, .lens = lens};
        run_together(jobs);
        for (int i = 0; i < THREADS; i++)
            for (int r = 0; r < REPEATS; r++) {
                expect_same_bits(jobs[i].y[r], alone, count, lf_mode_name((lf_mode)m), i, r);
                free(jobs[i].y[r]);
            }
        free(x), free(alone), free(ref);
        weights_free(&w);
    }
}

/* Threads that open their contexts and run their first GEMMs at once, in a
 * process that has run none before (each test is a process of its own), then
 * free their contexts while others still run: on CLBlast they fill and clear
 * its caches under each other (AddressSanitizer, in the robustness checks,
 * sees any use of a freed entry). Each thread gets the bits of its forward
 * run alone afterwards. */
Test(threads, contexts_opened_at_once_from_a_cold_start)
{
    const int batch = 2, n = 53;
    const int32_t lens[] = {53, 31};
    const size_t count = (size_t)batch * n * D;
    uint64_t rng = lf_test_seed();
    weights w[THREADS];
    for (int i = 0; i < THREADS; i++) weights_make(&w[i], (lf_mode)(LF_MODE_LINFORMER + i % 3), &rng);
    float *x = malloc(count * sizeof *x), *alone = malloc(count * sizeof *alone);
    lf_test_fill(x, count, &rng, -1, 1);

    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) jobs[i] = (job){.w = &w[i], .x = x, .batch = batch, .n = n, .lens = lens};
    run_together(jobs);
    for (int i = 0; i < THREADS; i++) {
        lf_context *ctx = lf_test_context();
        lf_attention *layer = layer_make(ctx, &w[i]);
        cr_assert_not_null(layer, "%s", lf_context_last_error(ctx));
        lf_test_poison(alone, count);
        cr_assert_eq(lf_attention_forward(layer, x, alone, batch, n, lens), LF_OK, "%s", lf_context_last_error(ctx));
        for (int r = 0; r < REPEATS; r++) {
            expect_same_bits(jobs[i].y[r], alone, count, lf_mode_name(w[i].cfg.mode), i, r);
            free(jobs[i].y[r]);
        }
        lf_attention_free(layer);
        lf_context_free(ctx);
        weights_free(&w[i]);
    }
    free(x), free(alone);
}

Test(threads, one_context_and_layer_shared)
{
    /* each thread its own input and shape */
    static const int batches[THREADS] = {1, 3, 2, 4}, ns[THREADS] = {61, 7, 40, 23};
    static const int32_t lens0[] = {61}, lens1[] = {7, 0, 5}, lens2[] = {17, 40}, lens3[] = {23, 1, 22, 9};
    static const int32_t *lens[THREADS] = {lens0, lens1, lens2, lens3};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        uint64_t rng = lf_test_seed();
        weights w;
        weights_make(&w, (lf_mode)m, &rng);
        lf_context *ctx = lf_test_context();
        lf_attention *layer = layer_make(ctx, &w);
        cr_assert_not_null(layer, "%s", lf_context_last_error(ctx));
        lf_ref_weights rw = {w.w[0], w.w[1], w.w[2], w.w[3], w.w[4], w.w[5], w.w[6], w.w[7], w.w[8], w.w[9]};

        float *x[THREADS], *alone[THREADS];
        for (int i = 0; i < THREADS; i++) {
            const size_t count = (size_t)batches[i] * ns[i] * D;
            x[i] = malloc(count * sizeof(float));
            alone[i] = malloc(count * sizeof(float));
            lf_test_fill(x[i], count, &rng, -1, 1);
            lf_test_poison(alone[i], count);
            cr_assert_eq(lf_attention_forward(layer, x[i], alone[i], batches[i], ns[i], lens[i]), LF_OK, "%s",
                         lf_context_last_error(ctx));
            double *ref = malloc(count * sizeof *ref);
            lf_ref_attention(&w.cfg, &rw, NULL, x[i], batches[i], ns[i], lens[i], ref);
            double err = lf_test_rel_err(alone[i], ref, count);
            cr_expect_leq(err, TOL, "%s, input %d alone: relative error %.3g", lf_mode_name((lf_mode)m), i, err);
            free(ref);
        }

        job jobs[THREADS];
        for (int i = 0; i < THREADS; i++)
            jobs[i] = (job){.w = &w, .shared_ctx = ctx, .shared_layer = layer, .x = x[i], .batch = batches[i],
                            .n = ns[i], .lens = lens[i]};
        run_together(jobs);
        for (int i = 0; i < THREADS; i++) {
            for (int r = 0; r < REPEATS; r++) {
                expect_same_bits(jobs[i].y[r], alone[i], (size_t)batches[i] * ns[i] * D, lf_mode_name((lf_mode)m), i, r);
                free(jobs[i].y[r]);
            }
            free(x[i]), free(alone[i]);
        }
        lf_attention_free(layer);
        lf_context_free(ctx);
        weights_free(&w);
    }
}
