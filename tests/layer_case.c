#include "layer_case.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef struct {
    float *w[10];
    size_t count[10];
    float *shared;
    float *random; /* LF_PROJ_RANDOM's E then F, as the layer drew them; w[8], w[9] point into it */
    lf_projection *proj;
    lf_attention *layer;
    lf_attention_config resolved;
} lf_built;

static const char *names[10] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "e", "f"};

static int name_index(const char *name)
{
    int i = 0;
    while (i < 10 && strcmp(names[i], name) != 0) i++;
    cr_assert_lt(i, 10, "the layer lists an unknown weight \"%s\"", name);
    return i;
}

/* Fills every weight the layer lists (lf_attention_weight_info) with random values. */
static void fill_weights(lf_context *ctx, uint64_t *rng, lf_built *b)
{
    lf_weight_info info;
    for (int i = 0; lf_attention_weight_info(b->layer, i, &info) == LF_OK; i++) {
        const int id = name_index(info.name);
        b->count[id] = info.count;
        b->w[id] = malloc(info.count * sizeof(float));
        lf_test_fill(b->w[id], info.count, rng, -0.5f, 0.5f);
        lf_status st = lf_attention_set_weight(b->layer, info.name, b->w[id], info.count);
        cr_assert_eq(st, LF_OK, "set %s: %s", info.name, lf_context_last_error(ctx));
    }
}

static void build(lf_context *ctx, const lf_case *c, uint64_t *rng, lf_built *b)
{
    memset(b, 0, sizeof *b);
    b->resolved = c->cfg;
    lf_ref_resolve(&b->resolved);
    const lf_attention_config *r = &b->resolved;
    if (r->mode == LF_MODE_LINFORMER && r->sharing == LF_SHARE_LAYERWISE) {
        size_t count = (size_t)r->k * r->max_seq_len;
        b->shared = malloc(count * sizeof(float));
        cr_assert_eq(lf_projection_create(ctx, r->k, r->max_seq_len, r->proj_kind, r->seed, &b->proj), LF_OK,
                     "%s", lf_context_last_error(ctx));
        if (r->proj_kind == LF_PROJ_RANDOM) {
            lf_ref_random_projection(b->shared, count, r->seed, r->k);
        } else {
            lf_test_fill(b->shared, count, rng, -0.5f, 0.5f);
            cr_assert_eq(lf_projection_set(b->proj, b->shared, count), LF_OK, "%s", lf_context_last_error(ctx));
        }
    }
    lf_status st = lf_attention_create(ctx, &c->cfg, b->proj, &b->layer);
    cr_assert_eq(st, LF_OK, "create: %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    fill_weights(ctx, rng, b);
    if (r->mode == LF_MODE_LINFORMER && r->proj_kind == LF_PROJ_RANDOM && r->sharing != LF_SHARE_LAYERWISE) {
        /* the layer drew E then F from one stream; the reference draws the same */
        const bool f_sep = !r->share_kv && (r->sharing == LF_SHARE_NONE || r->sharing == LF_SHARE_HEADWISE);
        const size_t per = (r->sharing == LF_SHARE_NONE ? (size_t)r->kv_heads : 1) * r->k * (size_t)r->max_seq_len;
        b->random = malloc(per * (f_sep ? 2 : 1) * sizeof(float));
        lf_ref_random_projection(b->random, per * (f_sep ? 2 : 1), r->seed, r->k);
        b->w[8] = b->random;
        if (f_sep) b->w[9] = b->random + per;
    }
}

static void unbuild(lf_built *b)
{
    lf_attention_free(b->layer);
    lf_projection_free(b->proj);
    for (int i = 0; i < 10; i++)
        if (b->count[i]) free(b->w[i]);
    free(b->random);
    free(b->shared);
}

static lf_ref_weights ref_weights(const lf_built *b)
{
    return (lf_ref_weights){b->w[0], b->w[1], b->w[2], b->w[3], b->w[4], b->w[5], b->w[6], b->w[7], b->w[8], b->w[9]};
}

double lf_case_run(lf_context *ctx, const lf_case *c)
{
    uint64_t rng = lf_test_seed();
    lf_built b;
    build(ctx, c, &rng, &b);
    const size_t count = (size_t)c->batch * c->n * c->cfg.d_model;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    double *ref = malloc(count * sizeof *ref);
    lf_test_fill(x, count, &rng, -1.0f, 1.0f);
    lf_test_poison(y, count);
    lf_status st = lf_attention_forward(b.layer, x, y, c->batch, c->n, c->lengths);
    cr_assert_eq(st, LF_OK, "forward: %s: %s", lf_status_string(st), lf_context_last_error(ctx));
    lf_ref_weights w = ref_weights(&b);
    lf_ref_attention(&b.resolved, &w, b.shared, x, c->batch, c->n, c->lengths, ref);
    /* rows past a length must be exactly 0 */
    for (int s = 0; s < c->batch; s++)
        for (int i = c->lengths ? c->lengths[s] : c->n; i < c->n; i++)
            for (int d = 0; d < c->cfg.d_model; d++)
                cr_assert_eq(y[((size_t)s * c->n + i) * c->cfg.d_model + d], 0.0f,
                             "row %d of sequence %d (length %d) is not 0", i, s, c->lengths[s]);
    double err = lf_test_rel_err(y, ref, count);
    free(x), free(y), free(ref);
    unbuild(&b);
    return err;
}

double lf_case_batch_vs_alone(lf_context *ctx, const lf_case *c)
{
    uint64_t rng = lf_test_seed();
    lf_built b;
    build(ctx, c, &rng, &b);
    const size_t D = c->cfg.d_model, count = (size_t)c->batch * c->n * D;
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y), *one = malloc((size_t)c->n * D * sizeof *one);
    lf_test_fill(x, count, &rng, -1.0f, 1.0f);
    lf_test_poison(y, count);
    cr_assert_eq(lf_attention_forward(b.layer, x, y, c->batch, c->n, c->lengths), LF_OK, "%s", lf_context_last_error(ctx));
    double worst = 0;
    for (int s = 0; s < c->batch; s++) {
        const int32_t len = c->lengths ? c->lengths[s] : c->n;
        if (len == 0) continue;
        /* alone: only its own `len` rows exist */
        lf_test_poison(one, (size_t)c->n * D);
        cr_assert_eq(lf_attention_forward(b.layer, x + (size_t)s * c->n * D, one, 1, len, NULL), LF_OK, "%s",
                     lf_context_last_error(ctx));
        double e = lf_test_rel_err_f(one, y + (size_t)s * c->n * D, (size_t)len * D);
        if (e > worst) worst = e;
    }
    free(x), free(y), free(one);
    unbuild(&b);
    return worst;
}
