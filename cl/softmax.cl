/*
 * softmax.cl - masked softmax over rows of a score matrix, in place.
 *
 * Scores are [count, n_rows, ld]. Row i keeps its first cols_valid entries
 * (with causal, at most its first i + 1: the keys up to itself); the rest are
 * masked and become exactly 0. Rows at or past rows_valid, and
 * rows with nothing to attend to, become all 0 rather than NaN. The row max is
 * subtracted before exp so large scores stay finite.
 * Global: (WG, count * n_rows), local (WG, 1).
 */

#ifndef WG
#define WG 256 /* work-items per row, a power of two: WG floats of local memory */
#endif
kernel void softmax_rows(global float *s, int ld, int n_rows, int rows_valid, int cols_valid, int causal)
{
    local float red[WG];
    const int lid = get_local_id(0);
    const int row = get_global_id(1);
    global float *r = s + (ulong)row * ld;
    const bool live = (row % n_rows) < rows_valid && cols_valid > 0;
    const int cv = !live ? 0 : causal ? min(cols_valid, row % n_rows + 1) : cols_valid;

    float m = -INFINITY;
    for (int c = lid; c < cv; c += WG) m = fmax(m, r[c]);
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step /= 2) {
        if (lid < step) red[lid] = fmax(red[lid], red[lid + step]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    float sum = 0.0f;
    for (int c = lid; c < cv; c += WG) {
        const float p = exp(r[c] - m);
        r[c] = p;
        sum += p;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step /= 2) {
        if (lid < step) red[lid] += red[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = cv > 0 ? 1.0f / red[0] : 0.0f;
    for (int c = lid; c < ld; c += WG) r[c] = c < cv ? r[c] * inv : 0.0f;
}
