/*
 * seq_project.cl - Linformer's sequence projection by windows: pooling and
 * convolution compress n rows to k. (Matrix projections go through CLBlast.)
 *
 *   out[b, j, g*cols + c] = reduce over i in [j w, j w + w), i < len[b], of
 *                           wt_g,h[i - j w] * in[b, i, g*in_gstride + c]
 *
 * for every batch b, compressed row j, group g (0: keys, 1: values) and column
 * c; h = c / head_cols picks per-head weights. The reduction is a weighted sum
 * (mean pooling: weights 1/w; convolution: learned weights, kernel = stride = w)
 * or, with WINDOW_MAX, the max. Rows at or past len[b] never enter, and a window
 * with none of its rows left gives 0. One launch covers the batch, both groups
 * and all heads. Global: (cols, k, batch * groups).
 */

#ifndef WINDOW_MAX
#define WINDOW_MAX 0 /* 1: max pooling; 0: a weighted sum (mean pooling, convolution) */
#endif
kernel void seq_project_window(global const float *in, ulong in_off, int in_ld, int in_gstride,
                               int n, global float *out, ulong out_off, int out_ld,
                               global const float *e, int w, int e_gstride, int e_hstride,
                               int head_cols, global const int *lengths, int cols, int k,
                               int groups)
{
    const int c = get_global_id(0), j = get_global_id(1);
    const int b = get_global_id(2) / groups, g = get_global_id(2) % groups;
    const int len = lengths[b];
    const global float *x = in + in_off + (ulong)b * n * in_ld + g * in_gstride + c;
    const int start = j * w, stop = min(start + w, len);
#if WINDOW_MAX
    float acc = start < stop ? -INFINITY : 0.0f;
    for (int i = start; i < stop; i++) acc = fmax(acc, x[(ulong)i * in_ld]);
#else
    const global float *wt = e + g * e_gstride + (c / head_cols) * e_hstride;
    float acc = 0.0f;
    for (int i = start; i < stop; i++) acc += wt[i - start] * x[(ulong)i * in_ld];
#endif
    out[out_off + ((ulong)b * k + j) * out_ld + g * cols + c] = acc;
}
