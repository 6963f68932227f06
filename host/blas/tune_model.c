/*
 * tune_model.c - CLBlast's sets searched per GEMM shape class on the GEMMs a
 * model's forward runs (`linformer tune --model`).
 *
 * Each class's GEMMs, weighted by how often the forward calls them, are
 * timed with CLBlast's parameters in force first (its own, in a process of
 * its own), then under sets of the tiled kernel (every GEMM of the class
 * tiled) and of the direct kernel (every one direct): CLBlast's database
 * rows of the nearest GPUs first, then random valid sets. Every result is
 * checked against the host BLAS's: a wrong one disqualifies its set. Each
 * class takes the faster kernel with its best set; the entry is stored when
 * at least one class beats the parameters in force.
 */
#include "tune_space.h"

#include <stdlib.h>
#include <string.h>

/* Seeds: rows of CLBlast's database for single precision (CLBlast 1.7.0,
 * src/database/kernels/xgemm/xgemm_32.hpp and
 * xgemm_direct/xgemm_direct_32.hpp; the A100 rows are 1.5.3's too), in
 * lf__tune_spaces' order. GEMMK 1 rows are left out (1.5.3 gets them wrong
 * where MWG != NWG). */
static const size_t xgemm_seeds[][LF_TUNE_MAX_PARAMS] = {
    {0, 1, 32, 2, 8, 8, 32, 16, 16, 64, 1, 1, 0, 0, 4, 4},     /* SM8.0 A100-PCIE-40GB */
    {0, 1, 32, 2, 16, 16, 64, 8, 8, 64, 1, 1, 0, 0, 4, 4},     /* SM8.6 GeForce RTX 3090 */
    {0, 1, 32, 2, 8, 8, 64, 32, 16, 128, 1, 1, 1, 1, 2, 2},    /* SM8.6 GeForce RTX 3080 */
    {0, 1, 32, 2, 32, 32, 128, 8, 8, 64, 0, 1, 1, 1, 4, 4},    /* SM8.9 GeForce RTX 4090 */
    {0, 1, 16, 2, 8, 8, 32, 8, 16, 128, 1, 0, 1, 1, 4, 8},     /* SM8.9 GeForce RTX 4080 */
};
static const size_t direct_seeds[][LF_TUNE_MAX_PARAMS] = {
    {8, 8, 16, 32, 16, 1, 1, 2, 1, 32},  /* SM8.0 A100-PCIE-40GB */
    {2, 8, 8, 8, 8, 1, 1, 1, 1, 32},     /* SM8.6 GeForce RTX 3090 */
    {2, 8, 8, 8, 8, 1, 1, 1, 1, 16},     /* SM8.6 GeForce RTX 3080; SM8.9 GeForce RTX 4090 */
    {8, 32, 32, 8, 8, 1, 0, 2, 4, 64},   /* SM8.9 GeForce RTX 4060 */
};

/* What the search found for one class, by kernel (K_XGEMM, K_DIRECT). */
typedef struct {
    lf_gemm_shape shapes[LF_GEMM_SHAPES_MAX];
    const float *refs[LF_GEMM_SHAPES_MAX];
    int count;
    double in_force, ms[2];
    bool have[2];
    size_t v[2][LF_TUNE_MAX_PARAMS];
} lf_class_search;

typedef struct {
    const lf_gemm_record *record;
    float *refs[LF_GEMM_SHAPES_MAX];
    lf_class_search classes[C_COUNT];
} lf_model_search;

/* The record's shapes by class, each with its reference result. */
static lf_status group(lf_context *ctx, lf_model_search *s)
{
    for (size_t i = 0; i < s->record->count; i++) {
        const lf_gemm_shape *g = &s->record->shapes[i];
        if (!(s->refs[i] = lf__gemm_reference(g)))
            return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "no host memory for the reference of GEMM %zux%zux%zu", g->m,
                            g->n, g->k);
        lf_class_search *c = &s->classes[lf__gemm_class(g->m, g->n, g->k)];
        c->refs[c->count] = s->refs[i];
        c->shapes[c->count++] = *g;
    }
    return LF_OK;
}

/* Each kernel of each class with shapes, in equal shares of the time left. */
static void search_classes(lf_tuner *t, lf_model_search *s)
{
    static const lf_tune_seeds seeds[2] = {{xgemm_seeds, sizeof xgemm_seeds / sizeof xgemm_seeds[0]},
                                           {direct_seeds, sizeof direct_seeds / sizeof direct_seeds[0]}};
    int slots = 0;
    for (int c = 0; c < C_COUNT; c++) slots += s->classes[c].count ? 2 : 0;
    for (int c = 0; c < C_COUNT; c++) {
        lf_class_search *cs = &s->classes[c];
        const lf_tune_shapes shapes = {cs->shapes, cs->count, cs->refs};
        for (int k = 0; k < 2 && cs->count; k++, slots--) {
            const size_t threshold = k == K_XGEMM ? LF_NEVER_DIRECT : LF_ALWAYS_DIRECT;
            lf__tune_set(t->ctx, K_ROUTINE, &threshold);
            const double now = lf__tune_now(), until = now + (t->deadline - now) / slots;
            cs->ms[k] = 1e300;
            cs->have[k] = lf__tune_search(t, k, until, &shapes, &seeds[k], cs->v[k], &cs->ms[k]);
        }
    }
}

/* The sets of every class and kernel: each class's own, else another class's (a kernel has sets in all or none). */
static void fill(const lf_model_search *s, lf_tuned *found)
{
    memset(found, 0, sizeof *found);
    for (int c = 0; c < C_COUNT; c++) {
        const lf_class_search *cs = &s->classes[c];
        for (int k = 0; k < 2; k++)
            if (cs->have[k]) found->have[c][k] = true, memcpy(found->v[c][k], cs->v[k], sizeof cs->v[k]);
        if (cs->have[0] || cs->have[1]) {
            const bool tiled = cs->have[K_XGEMM] && (!cs->have[K_DIRECT] || cs->ms[K_XGEMM] < cs->ms[K_DIRECT]);
            found->v[c][K_ROUTINE][0] = tiled ? LF_NEVER_DIRECT : LF_ALWAYS_DIRECT;
            found->have[c][K_ROUTINE] = true;
        }
    }
    for (int k = 0; k < K_COUNT; k++)
        for (int c = 0; c < C_COUNT; c++)
            for (int from = 0; from < C_COUNT && !found->have[c][k]; from++)
                if (found->have[from][k]) {
                    found->have[c][k] = true;
                    memcpy(found->v[c][k], found->v[from][k], sizeof found->v[c][k]);
                }
}

static lf_status model_body(lf_tuner *t, lf_tuned *found, void *arg)
{
    lf_model_search *s = arg;
    LF_TRY(group(t->ctx, s));
    for (int c = 0; c < C_COUNT; c++) {
        lf_class_search *cs = &s->classes[c];
        if (!cs->count) continue;
        const lf_tune_shapes shapes = {cs->shapes, cs->count, cs->refs};
        const double began = lf__tune_now();
        bool wrong = false;
        cs->in_force = lf__tune_cost(t->ctx, &shapes, 1e300, true, &wrong);
        lf__tune_say(t, "%s: %d GEMM shapes, %.1f ms with the parameters in force%s", lf__gemm_class_names[c],
                     cs->count, cs->in_force, wrong ? " (a wrong result)" : "");
        lf__tune_overrun(t, lf__gemm_class_names[c], "with the parameters in force", began);
    }
    search_classes(t, s);
    bool wins = false;
    for (int c = 0; c < C_COUNT; c++) {
        const lf_class_search *cs = &s->classes[c];
        if (!cs->count) continue;
        const double best = cs->ms[K_XGEMM] < cs->ms[K_DIRECT] ? cs->ms[K_XGEMM] : cs->ms[K_DIRECT];
        const bool have = cs->have[K_XGEMM] || cs->have[K_DIRECT];
        wins |= have && best < cs->in_force;
        if (have)
            lf__tune_say(t, "%s: tiled %.1f ms, direct %.1f ms, %.1f ms with the parameters in force%s",
                         lf__gemm_class_names[c], cs->ms[K_XGEMM], cs->ms[K_DIRECT], cs->in_force,
                         best < cs->in_force ? "" : " (kept slower: a kernel's sets are in every class or none)");
    }
    if (wins) fill(s, found);
    else memset(found, 0, sizeof *found); /* nothing beat them: nothing stored */
    return LF_OK;
}

lf_status lf__gemm_tune_shapes(lf_context *ctx, const lf_gemm_record *record, double seconds, lf_tune_log log,
                               void *user)
{
    lf_model_search *s = calloc(1, sizeof *s);
    if (!s) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "no memory for the GEMM search");
    s->record = record;
    const lf_status st = lf__tune_run(ctx, seconds, log, user, model_body, s);
    for (size_t i = 0; i < record->count; i++) free(s->refs[i]);
    free(s);
    return st;
}
