/*
 * layernorm.cl - LayerNorm over rows of width d, with the residual add fused in.
 *
 * s = x + r (r only when has_r), then out = (s - mean(s)) / sqrt(var(s) + eps)
 * * gamma + beta, one work-group per row. write_sum also stores s into x: the
 * pre-norm residual stream keeps the sum and the next stage reads its norm.
 * out may be x itself (post-norm, in place) when write_sum is 0: each element
 * is read and written by the same work-item after both reductions.
 * Global: (WG, rows), local (WG, 1).
 */

#ifndef WG
#define WG 128 /* work-items per row, a power of two: WG floats of local memory */
#endif

/* Sum of v over the work-group; every work-item gets it. */
float group_sum(local float *red, float v)
{
    const int lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step /= 2) {
        if (lid < step) red[lid] += red[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float sum = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next call */
    return sum;
}

kernel void layernorm_rows(global float *x, global const float *r, global float *out, global const float *gamma,
                           global const float *beta, int d, float eps, int has_r, int write_sum)
{
    local float red[WG];
    const int lid = get_local_id(0);
    const ulong row = get_global_id(1) * (ulong)d;
    float acc = 0.0f;
    for (int c = lid; c < d; c += WG) acc += x[row + c] + (has_r ? r[row + c] : 0.0f);
    const float mean = group_sum(red, acc) / d;
    acc = 0.0f;
    for (int c = lid; c < d; c += WG) {
        const float v = x[row + c] + (has_r ? r[row + c] : 0.0f) - mean;
        acc += v * v;
    }
    const float rstd = rsqrt(group_sum(red, acc) / d + eps);
    for (int c = lid; c < d; c += WG) {
        const float s = x[row + c] + (has_r ? r[row + c] : 0.0f);
        if (write_sum) x[row + c] = s;
        out[row + c] = (s - mean) * rstd * gamma[c] + beta[c];
    }
}
