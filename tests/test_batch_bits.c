/*
 * test_batch_bits.c - a sequence's output bits do not depend on its
 * batch-mates: the same sequence alone (batch 1, padded or as n = its own
 * length), beside one other (batch 2) or among 16 of mixed lengths gives the
 * same bits, for a layer in every mode
 * and for whole models, on whichever GEMM backend the context has (ctest runs
 * this once more with LINFORMER_GEMM=clblast).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "runtime.h"

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(batch_bits, .init = setup, .fini = teardown, .timeout = 900);

enum { BATCH = 16 };

/* A layer or a model, with the shape of one sequence's input and output. */
typedef struct {
    lf_attention *layer;
    lf_model *model;
    bool tokens;               /* the model takes token ids */
    int n, width_in, width_out; /* values per row in and out */
    int vocab;                  /* token ids are below it */
    char name[64];
} subject;

/* The forward of `batch` sequences starting at sequence `first` of x or ids. */
static void run(const subject *s, const float *x, const int64_t *ids, int first, int batch, const int32_t *lens,
                float *y)
{
    const size_t in_rows = (size_t)first * s->n;
    lf_test_poison(y, (size_t)batch * s->n * s->width_out);
    lf_status st = s->layer ? lf_attention_forward(s->layer, x + in_rows * s->width_in, y, batch, s->n, lens + first)
                            : lf_model_forward(s->model, s->tokens ? NULL : x + in_rows * s->width_in,
                                               s->tokens ? ids + in_rows : NULL, y, batch, s->n, lens + first);
    cr_assert_eq(st, LF_OK, "%s, batch %d: %s", s->name, batch, lf_context_last_error(ctx));
}

/* Sequence b of x or ids alone, unpadded: batch 1 of n = its length rows, as a
 * server runs a request that came alone. */
static void run_unpadded(const subject *s, const float *x, const int64_t *ids, int b, int len, float *y)
{
    const size_t in_rows = (size_t)b * s->n;
    lf_test_poison(y, (size_t)len * s->width_out);
    lf_status st = s->layer ? lf_attention_forward(s->layer, x + in_rows * s->width_in, y, 1, len, NULL)
                            : lf_model_forward(s->model, s->tokens ? NULL : x + in_rows * s->width_in,
                                               s->tokens ? ids + in_rows : NULL, y, 1, len, NULL);
    cr_assert_eq(st, LF_OK, "%s, n %d: %s", s->name, len, lf_context_last_error(ctx));
}

/* Sequence b of the batch of 16 against the same sequence alone (padded and
 * not) and in pairs. */
static void expect_batch_independent(const subject *s)
{
    const int32_t pattern[BATCH] = {37, 1, 20, 36, 0, 37, 9, 29, 37, 5, 18, 33, 2, 37, 24, 11};
    int32_t lens[BATCH];
    for (int b = 0; b < BATCH; b++) lens[b] = pattern[b] * s->n / 37;
    uint64_t rng = lf_test_seed();
    const size_t seq_in = (size_t)s->n * s->width_in, seq_out = (size_t)s->n * s->width_out;
    float *x = lf_test_random(BATCH * seq_in, &rng, -1, 1);
    int64_t *ids = malloc(BATCH * s->n * sizeof *ids);
    for (size_t i = 0; i < (size_t)BATCH * s->n; i++) ids[i] = (int64_t)(lf__rand_next(&rng) % (uint64_t)(s->vocab ? s->vocab : 1));
    float *all = malloc(BATCH * seq_out * sizeof *all), *few = malloc(2 * seq_out * sizeof *few);
    run(s, x, ids, 0, BATCH, lens, all);
    for (int b = 0; b < BATCH; b++) {
        run(s, x, ids, b, 1, lens, few);
        cr_expect_eq(memcmp(few, all + b * seq_out, seq_out * sizeof *few), 0,
                     "%s: sequence %d (length %d) alone differs from it in a batch of %d", s->name, b, lens[b], BATCH);
        if (lens[b]) {
            run_unpadded(s, x, ids, b, lens[b], few);
            cr_expect_eq(memcmp(few, all + b * seq_out, (size_t)lens[b] * s->width_out * sizeof *few), 0,
                         "%s: sequence %d alone as n = its length %d differs from it in a batch of %d of n = %d",
                         s->name, b, lens[b], BATCH, s->n);
        }
        if (b % 2) continue;
        run(s, x, ids, b, 2, lens, few);
        cr_expect_eq(memcmp(few, all + b * seq_out, 2 * seq_out * sizeof *few), 0,
                     "%s: sequences %d, %d (lengths %d, %d) as a batch of 2 differ from them in a batch of %d", s->name,
                     b, b + 1, lens[b], lens[b + 1], BATCH);
    }
    free(x), free(ids), free(all), free(few);
}

Test(batch_bits, layer_in_every_mode)
{
    const struct { lf_mode mode; lf_path path; lf_position position; const char *name; } variants[] = {
        {LF_MODE_LINFORMER, LF_PATH_FUSED, LF_POSITION_KV, "linformer fused"},
        {LF_MODE_LINFORMER, LF_PATH_GEMM, LF_POSITION_KV, "linformer gemm"},
        {LF_MODE_LINFORMER, LF_PATH_AUTO, LF_POSITION_INPUT, "linformer, E on the input"},
        {LF_MODE_DENSE, LF_PATH_AUTO, LF_POSITION_KV, "dense"},
        {LF_MODE_FLASH, LF_PATH_AUTO, LF_POSITION_KV, "flash"},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        lf_attention_config c;
        lf_attention_config_init(&c, 52, 4, 37, 7);
        c.mode = variants[v].mode;
        c.path = variants[v].path;
        c.position = variants[v].position;
        if (c.position == LF_POSITION_INPUT) c.sharing = LF_SHARE_HEADWISE;
        subject s = {.n = 37, .width_in = 52, .width_out = 52};
        snprintf(s.name, sizeof s.name, "%s", variants[v].name);
        cr_assert_eq(lf_attention_create(ctx, &c, NULL, &s.layer), LF_OK, "%s", lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_init_random(s.layer, lf_test_seed()), LF_OK, "%s", lf_context_last_error(ctx));
        expect_batch_independent(&s);
        lf_attention_free(s.layer);
    }
}

/* A model of tests/data/models, at its max_seq_len or 37 if less. */
static void expect_model_batch_independent(const char *fixture)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/models/%s.model.safetensors", LF_SOURCE_DIR, fixture);
    subject s = {0};
    cr_assert_eq(lf_model_load(ctx, path, NULL, &s.model), LF_OK, "%s: %s", fixture, lf_context_last_error(ctx));
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(s.model, &info), LF_OK);
    s.tokens = info.kind != LF_MODEL_ENCODER;
    s.n = info.max_seq_len < 37 ? info.max_seq_len : 37;
    s.vocab = info.vocab;
    s.width_in = s.tokens ? 1 : info.d_model;
    s.width_out = info.kind == LF_MODEL_LM ? info.vocab : info.d_model;
    snprintf(s.name, sizeof s.name, "%s", fixture);
    expect_batch_independent(&s);
    lf_model_free(s.model);
}

Test(batch_bits, encoder_model) { expect_model_batch_independent("encoder_depth3"); }
Test(batch_bits, language_model) { expect_model_batch_independent("lm"); }
