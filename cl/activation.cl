/*
 * activation.cl - bias and activation after a GEMM, in place.
 *
 * y[r, c] = act(y[r, c] + bias[c]) for the `cols` columns of each row (row
 * stride ld). With GLU the row holds two halves [a | g] of `cols` columns each
 * and the first half becomes act(a + bias[c]) * (g + bias[cols + c]): the
 * gated feed-forward, whose second GEMM then reads the first half (ld stays).
 * Global: (cols, rows).
 */

#ifndef ACT
#define ACT 1 /* 0 none, 1 GELU (erf), 2 GELU (tanh), 3 ReLU */
#endif
#ifndef GLU
#define GLU 0
#endif

/* erfc(x) for x >= 0 as t exp(P(t) - x^2), t = 1 / (1 + x / 2), with P the
 * Chebyshev fit of Press et al., Numerical Recipes in C, 2nd ed. (1992),
 * section 6.2, whose fractional error is below 1.2e-7 for every x. Made of
 * one exp, it vectorises where a runtime's own erfc may not (PoCL's took 15
 * times as long as exp: bench/NOTES.md). In float, rounding x^2 costs up to
 * 4e-6 relative in the far tail, less than rounding x itself does there
 * (tests/test_model_kernels.c). From x = 10 on, erfc is 0 in float. */
constant float erfc_fit[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};

float erfc_nonneg(float x)
{
    const float c = fmin(x, 10.0f), t = 1.0f / (1.0f + 0.5f * c);
    float p = erfc_fit[9];
#pragma unroll
    for (int i = 8; i >= 0; i--) p = erfc_fit[i] + t * p; /* Horner */
    return x < 10.0f ? t * exp(p - c * c) : 0.0f;
}

/* GELU's 1 + erf(z) and 1 + tanh(z) lose every digit for z well below 0,
 * where the result is tiny: erfc(-z) and 2 / (1 + exp(-2 z)) keep them. */
float activate(float v)
{
#if ACT == 1
    const float z = v * 0.70710678118654752f, e = erfc_nonneg(fabs(z));
    return 0.5f * v * (z <= 0.0f ? e : 2.0f - e); /* erfc(-z) */
#elif ACT == 2
    return v / (1.0f + exp(-2.0f * 0.79788456080286536f * (v + 0.044715f * v * v * v)));
#elif ACT == 3
    return v < 0.0f ? 0.0f : v; /* NaN stays NaN, as in PyTorch */
#else
    return v;
#endif
}

kernel void bias_act(global float *y, int ld, int cols, global const float *bias, int has_bias)
{
    const int c = get_global_id(0);
    if (c >= cols) return;
    global float *p = y + (ulong)get_global_id(1) * ld;
    const float a = p[c] + (has_bias ? bias[c] : 0.0f);
#if GLU
    p[c] = activate(a) * (p[cols + c] + (has_bias ? bias[cols + c] : 0.0f));
#else
    p[c] = activate(a);
#endif
}
