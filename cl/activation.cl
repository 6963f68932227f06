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

/* GELU's 1 + erf(z) and 1 + tanh(z) lose every digit for z well below 0,
 * where the result is tiny: erfc(-z) and 2 / (1 + exp(-2 z)) keep them. */
float activate(float v)
{
#if ACT == 1
    return 0.5f * v * erfc(-v * 0.70710678118654752f);
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
