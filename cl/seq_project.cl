/*
 * seq_project.cl - Linformer's sequence projection: compress n rows to k.
 *
 *   out[b, j, g*cols + c] = sum over i < len[b] of E_g,h[j, i] * in[b, i, g*in_gstride + c]
 *
 * for every batch b, compressed row j, group g (0: keys with E, 1: values
 * with F) and column c; h = c / head_cols picks a per-head E. Rows at or past
 * len[b] never enter. One launch covers the batch, both groups and all heads.
 *
 * Build options: TILE (work-group edge of the matrix kernel); for the window
 * kernel WINDOW_MAX (1: max pooling, 0: weighted sum, which serves mean
 * pooling and convolution).
 */

/* Where the projection of group g and column c starts. */
#define PROJ_BASE(g, c) ((g) * e_gstride + ((c) / head_cols) * e_hstride)

/* Learned or random matrix E[k, e_ld]: a local-memory tiled product.
 * Global: (cols rounded up to TILE, k rounded up to TILE, batch * groups). */
kernel void seq_project_matrix(global const float *in, ulong in_off, int in_ld, int in_gstride,
                               int n, global float *out, ulong out_off, int out_ld,
                               global const float *e, int e_ld, int e_gstride, int e_hstride,
                               int head_cols, global const int *lengths, int cols, int k,
                               int groups)
{
    const int c = get_global_id(0), j = get_global_id(1);
    const int b = get_global_id(2) / groups, g = get_global_id(2) % groups;
    const int lc = get_local_id(0), lj = get_local_id(1);
    const int len = lengths[b];
    /* A tile of E shares one head when TILE divides head_cols; otherwise
     * each work-item reads its own head's E row directly. */
    local float xt[TILE][TILE + 1]; /* xt[i][c] */
    const global float *x = in + in_off + (ulong)b * n * in_ld + g * in_gstride;
    const global float *erow = e + PROJ_BASE(g, min(c, cols - 1)) + (ulong)min(j, k - 1) * e_ld;
    float acc = 0.0f;
    for (int i0 = 0; i0 < len; i0 += TILE) {
        /* work-item (lc, lj) loads x[i0 + lj][c] */
        const int i = i0 + lj;
        xt[lj][lc] = (i < len && c < cols) ? x[(ulong)i * in_ld + c] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int m = min(TILE, len - i0);
        for (int t = 0; t < m; t++) acc += erow[i0 + t] * xt[t][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (c < cols && j < k) out[out_off + ((ulong)b * k + j) * out_ld + g * cols + c] = acc;
}

/* Pooling and convolution over windows of w rows: row j covers [j w, j w + w).
 * Global: (cols, k, batch * groups). */
kernel void seq_project_window(global const float *in, ulong in_off, int in_ld, int in_gstride,
                               int n, global float *out, ulong out_off, int out_ld,
                               global const float *e, int w, int e_gstride, int e_hstride,
                               int head_cols, global const int *lengths, int cols, int k,
                               int groups)
{
    const int c = get_global_id(0), j = get_global_id(1);
    const int b = get_global_id(2) / groups, g = get_global_id(2) % groups;
    if (c >= cols || j >= k) return;
    const int len = lengths[b];
    const global float *x = in + in_off + (ulong)b * n * in_ld + g * in_gstride + c;
    const int start = j * w, stop = min(start + w, len);
#if WINDOW_MAX
    float acc = start < stop ? -INFINITY : 0.0f; /* an empty window gives 0 */
    for (int i = start; i < stop; i++) acc = fmax(acc, x[(ulong)i * in_ld]);
#else
    const global float *wt = e + PROJ_BASE(g, c);
    float acc = 0.0f;
    for (int i = start; i < stop; i++) acc += wt[i - start] * x[(ulong)i * in_ld];
#endif
    out[out_off + ((ulong)b * k + j) * out_ld + g * cols + c] = acc;
}
