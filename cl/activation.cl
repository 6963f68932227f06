/*
 * activation.cl - bias and activation after a GEMM, in place; bias rows and row masks.
 *
 * y[r, c] = act(y[r, c] + bias[c]) for the `cols` columns of each row (row
 * stride ld). With GLU the row holds two halves [a | g] of `cols` columns each
 * and the first half becomes act(a + bias[c]) * (g + bias[cols + c]): the
 * gated feed-forward, whose second GEMM then reads the first half (ld stays).
 *
 * A work-item takes RUN vectors of VW contiguous columns of one row (vw and
 * run of the kernel parameters, host/kernel_params.c). GPU devices: VW 1,
 * RUN 1, a column a work-item. CPU devices: a run of float16s, so that the
 * work is in vectors whatever the runtime's vectoriser does, in work-groups
 * of one. Global: (ceil(cols / (VW RUN)) rounded up to the group, rows).
 *
 * bias_rows, y[r, c] += bias[b_off + c] for the `cols` columns at y + y_off
 * (row stride ld), in the same runs of vectors; with mask_len, row r
 * (sequence r / rows_per_seq, position r % rows_per_seq) at or past its
 * sequence's length is set to exactly 0 instead, without being read.
 *
 * copy_floats, dst = src over `count` floats in the same runs of vectors with
 * no arithmetic, is the device's copy bandwidth that these kernels are held
 * to (lf_copy_rate).
 */

#ifndef ACT
#define ACT 1 /* 0 none, 1 GELU (erf), 2 GELU (tanh), 3 ReLU */
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef VW
#define VW 1 /* floats of one vector: 1, 2, 4, 8 or 16 */
#endif
#ifndef RUN
#define RUN 1 /* vectors of one work-item */
#endif

#if VW > 1
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
typedef CAT(float, VW) vec;
#define AS_VEC CAT(as_float, VW)
#define AS_INT CAT(as_int, VW)
/* Columns c .. c + VW - 1 of a row of `cols`; those past cols read as 0 and are not written. */
vec load_cols(const global float *p, int c, int cols)
{
    if (c + VW <= cols) return CAT(vload, VW)(0, p + c);
    float part[VW];
    for (int i = 0; i < VW; i++) part[i] = c + i < cols ? p[c + i] : 0.0f;
    return CAT(vload, VW)(0, part);
}
void store_cols(vec v, global float *p, int c, int cols)
{
    if (c + VW <= cols) {
        CAT(vstore, VW)(v, 0, p + c);
        return;
    }
    float part[VW];
    CAT(vstore, VW)(v, 0, part);
    for (int i = 0; c + i < cols; i++) p[c + i] = part[i];
}
#else
typedef float vec;
#define AS_VEC as_float
#define AS_INT as_int
vec load_cols(const global float *p, int c, int cols) { return p[c]; }
void store_cols(vec v, global float *p, int c, int cols) { p[c] = v; }
#endif

EXP_NONPOS(vec, AS_VEC, AS_INT) /* exp_nonpos.cl */

/* erfc(x) for x >= 0 as t exp(P(t) - x^2), t = 1 / (1 + x / 2), with P the
 * Chebyshev fit of Press et al., Numerical Recipes in C, 2nd ed. (1992),
 * section 6.2, whose fractional error is below 1.2e-7 for every x. Made of
 * one exp, it vectorises where a runtime's own erfc may not (PoCL's took 15
 * times as long as exp: bench/NOTES.md). In float, rounding x^2 costs up to
 * 4e-6 relative in the far tail, less than rounding x itself does there
 * (tests/test_model_kernels.c). From x = 9.3 on (and at inf), erfc is below
 * float's normal range and exp_nonpos gives 0. */
constant float erfc_fit[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};

vec erfc_nonneg(vec x)
{
    const vec t = 1.0f / (1.0f + 0.5f * x);
    vec p = erfc_fit[9];
#pragma unroll
    for (int i = 8; i >= 0; i--) p = erfc_fit[i] + t * p; /* Horner */
    return t * exp_nonpos(p - x * x);
}

/* GELU's 1 + erf(z) and 1 + tanh(z) lose every digit for z well below 0,
 * where the result is tiny: erfc(-z) and 2 / (1 + exp(-2 z)) keep them. */
vec activate(vec v)
{
#if ACT == 1
    const vec z = v * 0.70710678118654752f, e = erfc_nonneg(fabs(z));
    return 0.5f * v * select(2.0f - e, e, z <= 0.0f); /* erfc(-z) */
#elif ACT == 2
    return v / (1.0f + exp(-2.0f * 0.79788456080286536f * (v + 0.044715f * v * v * v)));
#elif ACT == 3
    return select(v, (vec)0.0f, v < 0.0f); /* NaN stays NaN, as in PyTorch */
#else
    return v;
#endif
}

kernel void bias_act(global float *y, int ld, int cols, global const float *bias, int has_bias)
{
    global float *p = y + (ulong)get_global_id(1) * ld;
    const int first = get_global_id(0) * (VW * RUN);
    for (int c = first; c < min(first + VW * RUN, cols); c += VW) {
        const vec a = load_cols(p, c, cols) + (has_bias ? load_cols(bias, c, cols) : (vec)0.0f);
#if GLU
        const vec g = load_cols(p + cols, c, cols) + (has_bias ? load_cols(bias + cols, c, cols) : (vec)0.0f);
        store_cols(activate(a) * g, p, c, cols);
#else
        store_cols(activate(a), p, c, cols);
#endif
    }
}

kernel void bias_rows(global float *y, ulong y_off, int ld, int cols, global const float *bias, ulong b_off,
                      int has_bias, global const int *lengths, int rows_per_seq, int mask_len)
{
    const int r = get_global_id(1);
    global float *p = y + y_off + (ulong)r * ld;
    const global float *b = bias + b_off;
    const bool cleared = mask_len && r % rows_per_seq >= lengths[r / rows_per_seq];
    const int first = get_global_id(0) * (VW * RUN);
    for (int c = first; c < min(first + VW * RUN, cols); c += VW) {
        const vec v = cleared ? (vec)0.0f : load_cols(p, c, cols) + (has_bias ? load_cols(b, c, cols) : (vec)0.0f);
        store_cols(v, p, c, cols);
    }
}

kernel void copy_floats(global const float *src, global float *dst, int count)
{
    const int first = get_global_id(0) * (VW * RUN);
    for (int c = first; c < min(first + VW * RUN, count); c += VW) store_cols(load_cols(src, c, count), dst, c, count);
}
