/* bench_data.c - seeded weights and inputs from a small generator of the bench's own. */
#include "bench_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_weight_names[BENCH_WEIGHTS] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};

/* SplitMix64 (Steele, Lea and Flood 2014): 64 bits per step, any seed. */
static uint64_t next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-bound, bound): the top 24 bits, exact in a float. */
static void fill_uniform(float *p, size_t count, uint64_t *state, double bound)
{
    for (size_t i = 0; i < count; i++) p[i] = (float)(((double)(next(state) >> 40) / (1 << 23) - 1.0) * bound);
}

void bench_weights_free(bench_weights *w)
{
    for (int i = 0; i < BENCH_WEIGHTS; i++) free(w->w[i]);
    memset(w, 0, sizeof *w);
}

int bench_weights_make(const bench_options *o, bench_weights *w)
{
    const size_t D = (size_t)o->d_model;
    uint64_t state = o->seed;
    memset(w, 0, sizeof *w);
    for (int i = 0; i < BENCH_WEIGHTS; i++) {
        w->count[i] = i < BENCH_BQ ? D * D : D;
        if (!(w->w[i] = malloc(w->count[i] * sizeof(float)))) {
            bench_weights_free(w);
            return -1;
        }
        fill_uniform(w->w[i], w->count[i], &state, 1.0 / sqrt((double)D));
    }
    return 0;
}

void bench_input(const bench_options *o, int n, float *x)
{
    uint64_t state = o->seed ^ (0x5851f42d4c957f2dull * (uint64_t)n);
    fill_uniform(x, (size_t)o->batch * n * o->d_model, &state, 1.0);
}

lf_attention_config bench_layer_config(const bench_options *o, lf_mode mode, int n, int k)
{
    lf_attention_config c;
    lf_attention_config_init(&c, o->d_model, o->heads, n, mode == LF_MODE_LINFORMER ? k : 1);
    c.mode = mode;
    c.proj_kind = o->causal ? LF_PROJ_MEAN_POOL : LF_PROJ_RANDOM; /* causal slots need local support */
    c.sharing = LF_SHARE_HEADWISE;
    c.seed = o->seed;
    c.causal = o->causal;
    return c;
}

lf_status bench_layer_create(lf_context *ctx, const bench_options *o, lf_mode mode, int n, int k,
                             const bench_weights *w, lf_attention **out)
{
    const lf_attention_config cfg = bench_layer_config(o, mode, n, k);
    lf_status st = lf_attention_create(ctx, &cfg, NULL, out);
    for (int i = 0; st == LF_OK && i < BENCH_WEIGHTS; i++)
        st = lf_attention_set_weight(*out, bench_weight_names[i], w->w[i], w->count[i]);
    if (st != LF_OK) {
        lf_attention_free(*out);
        *out = NULL;
    }
    return st;
}
