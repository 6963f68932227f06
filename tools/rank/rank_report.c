/* rank_report.c - what `linformer rank` writes: the table, the CSV, the figure's data. */
#include <math.h>
#include <stdbool.h>

#include "rank.h"

/* Rows are grouped by layer and head; the sizes of that grid. */
static void grid(const rank_results *r, int *layers, int *heads)
{
    *layers = *heads = 0;
    for (size_t i = 0; i < r->count; i++) {
        if (r->rows[i].layer >= *layers) *layers = r->rows[i].layer + 1;
        if (r->rows[i].head >= *heads) *heads = r->rows[i].head + 1;
    }
}

/* Means over the sequences of one layer and head; errors over the finite ones. */
typedef struct {
    int seqs, max_n, own_k;
    double n, k_at[RANK_LEVELS], share[RANK_LEVELS], err[RANK_MAX_K];
} group_mean;

static group_mean mean_of(const rank_results *r, int layer, int head)
{
    group_mean g = {0};
    int finite[RANK_MAX_K] = {0};
    for (size_t i = 0; i < r->count; i++) {
        const rank_row *row = &r->rows[i];
        if (row->layer != layer || row->head != head) continue;
        g.seqs++;
        g.own_k = row->own_k;
        g.n += row->n;
        if (row->n > g.max_n) g.max_n = row->n;
        for (int l = 0; l < RANK_LEVELS; l++) g.k_at[l] += row->k_at[l], g.share[l] += (double)row->k_at[l] / row->n;
        for (int j = 0; j < r->ks; j++)
            if (isfinite(row->err[j])) g.err[j] += row->err[j], finite[j]++;
    }
    const double seqs = g.seqs ? g.seqs : 1;
    g.n /= seqs;
    for (int l = 0; l < RANK_LEVELS; l++) g.k_at[l] /= seqs, g.share[l] /= seqs;
    for (int j = 0; j < r->ks; j++) g.err[j] = finite[j] ? g.err[j] / finite[j] : NAN;
    return g;
}

void rank_print_table(FILE *out, const rank_results *r)
{
    int layers, heads;
    grid(r, &layers, &heads);
    fprintf(out, "layer head seqs  mean n |      k90 (of n)       k95 (of n)       k99 (of n) | error at k:");
    for (int j = 0; j < r->ks; j++) fprintf(out, " %9d", r->k[j]);
    fputc('\n', out);
    for (int l = 0; l < layers; l++)
        for (int h = 0; h < heads; h++) {
            const group_mean g = mean_of(r, l, h);
            if (!g.seqs) continue;
            fprintf(out, "%5d %4d %4d %7.1f |", l, h, g.seqs, g.n);
            for (int v = 0; v < RANK_LEVELS; v++) fprintf(out, " %7.1f (%5.1f%%)", g.k_at[v], 100 * g.share[v]);
            fprintf(out, " |%12s", ""); /* under " error at k:" */
            for (int j = 0; j < r->ks; j++)
                if (isfinite(g.err[j])) fprintf(out, r->k[j] == g.own_k ? " %8.3g*" : " %9.3g", g.err[j]);
                else fprintf(out, " %9s", "-"); /* that k could not run */
            fputc('\n', out);
        }
    fprintf(out, "(*: the layer's own E and F at its own k; every other k uses seeded random ones)\n");
    if (r->skipped) fprintf(out, "(%d sequence(s) skipped: too long for an n x n matrix, or not finite; see above)\n",
                            r->skipped);
}

void rank_write_csv(FILE *out, const rank_results *r)
{
    fprintf(out, "seq,layer,head,n,k90,k95,k99,own_k");
    for (int j = 0; j < r->ks; j++) fprintf(out, ",err_k%d", r->k[j]);
    fputc('\n', out);
    for (size_t i = 0; i < r->count; i++) {
        const rank_row *row = &r->rows[i];
        fprintf(out, "%d,%d,%d,%d,%d,%d,%d,%d", row->seq, row->layer, row->head, row->n, row->k_at[0], row->k_at[1],
                row->k_at[2], row->own_k);
        for (int j = 0; j < r->ks; j++) {
            fputc(',', out);
            if (isfinite(row->err[j])) fprintf(out, "%.6g", row->err[j]); /* empty: that k could not run */
        }
        fputc('\n', out);
    }
}

/* One head's curve: mean c_r over its sequences, r = 1 .. the longest;
 * a sequence shorter than r counts with c_r = 1 (its whole spectrum). */
static void spectrum_block(FILE *out, const rank_results *r, int layer, int head, int max_n)
{
    fprintf(out, "\"layer %d head %d\" r c_r\n", layer, head);
    for (int k = 1; k <= max_n; k++) {
        double sum = 0;
        int seqs = 0;
        for (size_t i = 0; i < r->count; i++) {
            const rank_row *row = &r->rows[i];
            if (row->layer != layer || row->head != head) continue;
            sum += k <= row->n ? row->cumulative[k - 1] : 1.0;
            seqs++;
        }
        fprintf(out, "%d %.6g\n", k, sum / seqs);
    }
}

int rank_plot_data(FILE *out, const rank_results *r, int *layers, int *heads)
{
    int blocks = 0;
    grid(r, layers, heads);
    for (int l = 0; l < *layers; l++)
        for (int h = 0; h < *heads; h++) {
            const group_mean g = mean_of(r, l, h);
            if (!g.seqs) continue;
            if (blocks++) fprintf(out, "\n\n");
            spectrum_block(out, r, l, h, g.max_n);
        }
    fprintf(out, "\n\n# layer head mean_k90\n");
    for (int l = 0; l < *layers; l++)
        for (int h = 0; h < *heads; h++) {
            const group_mean g = mean_of(r, l, h);
            if (g.seqs) fprintf(out, "%d %d %.6g\n", l, h, g.k_at[0]);
        }
    return blocks;
}
