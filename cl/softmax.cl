/*
 * softmax.cl - masked softmax over rows of a score matrix, in place.
 *
 * Scores are [count, n_rows, ld]. Row i keeps its first cols_valid entries
 * (with causal, at most its first i + 1: the keys up to itself); the rest are
 * masked and become exactly 0. Rows at or past rows_valid, and
 * rows with nothing to attend to, become all 0 rather than NaN. The row max is
 * subtracted before exp so large scores stay finite.
 *
 * A row is read as float4 vectors (vload4: any ld, any row start) and the
 * floats past its last whole vector one by one. Two kernels share the row
 * helpers below:
 *   softmax_rows (GPU variant): a work-group of WG per row, vectors strided
 *     by WG, max and sum through local memory. Global (WG, count * n_rows),
 *     local (WG, 1).
 *   softmax_rows_cpu (CPU variant): a work-item per row, the row's three
 *     passes from cache, no barriers. Global (rows rounded up to the group),
 *     any local size (the launcher's: elementwise_wg); rows = count * n_rows
 *     bounds it.
 */

#ifndef WG
#define WG 256 /* GPU variant: work-items per row, a power of two: WG floats of local memory */
#endif

/* The entries row r keeps: 0 when it is masked whole. */
int kept(int r, int n_rows, int rows_valid, int cols_valid, int causal)
{
    const int i = r % n_rows;
    if (i >= rows_valid || cols_valid <= 0) return 0;
    return causal ? min(cols_valid, i + 1) : cols_valid;
}

/* A work-item's share of a row: vectors first, first + step, ... of the
 * first cv entries, then the floats of the vector that holds entry cv - 1
 * past the last whole one, likewise strided. Every pass below gives each
 * entry the same owner, so a work-item reads back only what it wrote. */

/* This work-item's share of the max of the row's first cv entries. */
float row_max(const global float *r, int cv, int first, int step)
{
    float4 m = -INFINITY;
    for (int c = first; c < cv / 4; c += step) m = fmax(m, vload4(c, r));
    float tail = -INFINITY;
    for (int c = cv / 4 * 4 + first; c < cv; c += step) tail = fmax(tail, r[c]);
    return fmax(fmax(fmax(m.x, m.y), fmax(m.z, m.w)), tail);
}

/* Writes exp(r[c] - m) over this work-item's share of the first cv entries; returns their sum. */
float row_exp(global float *r, int cv, int first, int step, float m)
{
    float4 sum = 0.0f;
    for (int c = first; c < cv / 4; c += step) {
        const float4 p = exp(vload4(c, r) - m);
        vstore4(p, c, r);
        sum += p;
    }
    float tail = 0.0f;
    for (int c = cv / 4 * 4 + first; c < cv; c += step) {
        const float p = exp(r[c] - m);
        r[c] = p;
        tail += p;
    }
    return dot(sum, (float4)1.0f) + tail;
}

/* Scales this work-item's share of the first cv entries by inv and sets the
 * rest of the ld to 0 (whole vectors of zeros past the one that holds cv - 1). */
void row_scale(global float *r, int cv, int ld, int first, int step, float inv)
{
    const int held = min(ld, (cv + 3) / 4 * 4); /* the first entry past the vector of cv - 1 */
    for (int c = first; c < cv / 4; c += step) vstore4(vload4(c, r) * inv, c, r);
    for (int c = cv / 4 * 4 + first; c < held; c += step) r[c] = c < cv ? r[c] * inv : 0.0f;
    for (int c = held / 4 + first; c < ld / 4; c += step) vstore4((float4)0.0f, c, r);
    for (int c = max(ld / 4 * 4, held) + first; c < ld; c += step) r[c] = 0.0f;
}

/* The max (is_max) or the sum of v over the work-group; every work-item gets it. */
float group_reduce(local float *red, float v, int is_max)
{
    const int lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step /= 2) {
        if (lid < step) red[lid] = is_max ? fmax(red[lid], red[lid + step]) : red[lid] + red[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float all = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next call */
    return all;
}

kernel void softmax_rows(global float *s, int ld, int n_rows, int rows_valid, int cols_valid, int causal, int rows)
{
    local float red[WG];
    const int lid = get_local_id(0), row = get_global_id(1);
    global float *r = s + (ulong)row * ld;
    const int cv = kept(row, n_rows, rows_valid, cols_valid, causal);
    const float m = group_reduce(red, row_max(r, cv, lid, WG), 1);
    const float sum = group_reduce(red, row_exp(r, cv, lid, WG, m), 0);
    row_scale(r, cv, ld, lid, WG, cv > 0 ? 1.0f / sum : 0.0f);
}

kernel void softmax_rows_cpu(global float *s, int ld, int n_rows, int rows_valid, int cols_valid, int causal,
                             int rows)
{
    const int row = get_global_id(0);
    if (row >= rows) return;
    global float *r = s + (ulong)row * ld;
    const int cv = kept(row, n_rows, rows_valid, cols_valid, causal);
    const float sum = row_exp(r, cv, 0, 1, row_max(r, cv, 0, 1));
    row_scale(r, cv, ld, 0, 1, cv > 0 ? 1.0f / sum : 0.0f);
}
