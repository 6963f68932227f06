/* bench_results.c - the growing list of measured rows. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

bench_row *bench_results_add(bench_results *r, const bench_row *row)
{
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 32;
        bench_row *grown = realloc(r->rows, cap * sizeof *grown);
        if (!grown) return NULL;
        r->rows = grown;
        r->capacity = cap;
    }
    r->rows[r->count] = *row;
    return &r->rows[r->count++];
}

void bench_results_free(bench_results *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

const bench_row *bench_results_find(const bench_results *r, const char *device, lf_mode mode, int n, int k)
{
    for (size_t i = 0; i < r->count; i++) {
        const bench_row *w = &r->rows[i];
        if (w->mode == mode && w->n == n && w->k == k && strcmp(w->device, device) == 0) return w;
    }
    return NULL;
}

const char *bench_status_name(bench_status s) { return s == BENCH_OOM ? "OOM" : "ok"; }
