/*
 * layernorm.cl - LayerNorm over rows of width d, with the residual add fused in.
 *
 * s = x + r (r only when has_r), then out = (s - mean(s)) / sqrt(var(s) + eps)
 * * gamma + beta. write_sum also stores s into x: the pre-norm residual stream
 * keeps the sum and the next stage reads its norm. out may be x itself
 * (post-norm, in place) when write_sum is 0: each element is read and written
 * by the same work-item after both reductions.
 *
 * A row is read as vectors of VW floats (vloadn: any d, any row start) and
 * its last d % VW floats one by one. Two kernels share the row helpers below:
 *   layernorm_rows (GPU variant): a work-group of WG per row, vectors strided
 *     by WG, sums through local memory. Global (WG, rows), local (WG, 1).
 *   layernorm_rows_cpu (CPU variant): a work-item per row, the row's three
 *     passes from cache, no barriers, in the device's vectors (VW: the
 *     kernel parameters' vw, at least 4; in float4s a pass's chain of adds
 *     was four times as long and the kernel took nearly twice the time,
 *     bench/NOTES.md item 52). Global (rows rounded up to the group), any
 *     local size (the launcher's: elementwise_wg).
 * Both take the same arguments; rows bounds the CPU variant's work-items (the
 * GPU variant's global size is exact: a return before its barriers would
 * leave the group's others waiting on some runtimes).
 */

#ifndef WG
#define WG 128 /* GPU variant: work-items per row, a power of two: WG floats of local memory */
#endif
#ifndef VW
#define VW 4 /* floats of one vector: 4, 8 or 16 */
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
typedef CAT(float, VW) vec;
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)

/* The row's element sums s = x + r, VW of them from vector c. */
vec sumv(const global float *x, const global float *r, int has_r, int c)
{
    return VLOAD(c, x) + (has_r ? VLOAD(c, r) : (vec)0.0f);
}

/* The sum of v's floats. */
float lanes_sum(vec v)
{
#if VW == 16
    const float8 h = v.lo + v.hi;
    const float4 q = h.lo + h.hi;
#elif VW == 8
    const float4 q = v.lo + v.hi;
#else
    const float4 q = v;
#endif
    return dot(q, (float4)1.0f);
}

float sum1(const global float *x, const global float *r, int has_r, int c) { return x[c] + (has_r ? r[c] : 0.0f); }

/* This work-item's share of the sum of (s - shift)^power (power 1 or 2) over
 * the row: vectors first, first+step, ...; the scalar tail when first is 0. */
float row_part(const global float *x, const global float *r, int has_r, int d, int first, int step, float shift,
               int power)
{
    vec acc = 0.0f;
    for (int c = first; c < d / VW; c += step) {
        const vec v = sumv(x, r, has_r, c) - shift;
        acc += power == 2 ? v * v : v;
    }
    float tail = 0.0f;
    for (int c = d / VW * VW; first == 0 && c < d; c++) {
        const float v = sum1(x, r, has_r, c) - shift;
        tail += power == 2 ? v * v : v;
    }
    return lanes_sum(acc) + tail;
}

/* Writes this work-item's share of the normalised row (and of the sum). */
void row_write(global float *x, const global float *r, global float *out, global const float *gamma,
               global const float *beta, int has_r, int write_sum, int d, int first, int step, float mean, float rstd)
{
    for (int c = first; c < d / VW; c += step) {
        const vec s = sumv(x, r, has_r, c);
        if (write_sum) VSTORE(s, c, x);
        VSTORE((s - mean) * rstd * VLOAD(c, gamma) + VLOAD(c, beta), c, out);
    }
    for (int c = d / VW * VW; first == 0 && c < d; c++) {
        const float s = sum1(x, r, has_r, c);
        if (write_sum) x[c] = s;
        out[c] = (s - mean) * rstd * gamma[c] + beta[c];
    }
}

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
                           global const float *beta, int d, float eps, int has_r, int write_sum, int rows)
{
    local float red[WG];
    const int lid = get_local_id(0);
    const ulong row = get_global_id(1) * (ulong)d;
    global float *xr = x + row, *orow = out + row;
    global const float *rr = r + row;
    const float mean = group_sum(red, row_part(xr, rr, has_r, d, lid, WG, 0.0f, 1)) / d;
    const float rstd = rsqrt(group_sum(red, row_part(xr, rr, has_r, d, lid, WG, mean, 2)) / d + eps);
    row_write(xr, rr, orow, gamma, beta, has_r, write_sum, d, lid, WG, mean, rstd);
}

kernel void layernorm_rows_cpu(global float *x, global const float *r, global float *out, global const float *gamma,
                               global const float *beta, int d, float eps, int has_r, int write_sum, int rows)
{
    if (get_global_id(0) >= rows) return;
    const ulong row = get_global_id(0) * (ulong)d;
    x += row, r += row, out += row;
    const float mean = row_part(x, r, has_r, d, 0, 1, 0.0f, 1) / d;
    const float rstd = rsqrt(row_part(x, r, has_r, d, 0, 1, mean, 2) / d + eps);
    row_write(x, r, out, gamma, beta, has_r, write_sum, d, 0, 1, mean, rstd);
}
