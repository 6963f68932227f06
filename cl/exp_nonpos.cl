/*
 * exp_nonpos.cl - e^x for x <= 0, for the kernels whose every exp has such an
 * argument: GELU's erfc (activation.cl) and the online softmax of attention's
 * CPU variant (attention.cl). program.c puts this file before theirs; each
 * defines exp_nonpos for its own vector type with EXP_NONPOS(T, AS_T, AS_I),
 * T a float type and AS_T, AS_I the reinterpretations to it and to its int type.
 * Always inlined, as attention.cl's own helpers are (INLINE there).
 *
 * e^x = 2^n e^r: n = x / ln 2 rounded by adding 1.5 * 2^23 (the sum's low
 * bits are then n), r = x - n ln 2 with ln 2 in two parts (Cody and Waite),
 * e^r by a degree-5 polynomial (the Chebyshev interpolant on |r| <= ln 2 / 2,
 * relative error 1.6e-7), times 2^n made from n's bits, so that a NaN stays
 * NaN. Below -86.6 (e^x under 2.5e-38, where 2^n leaves float's normal range)
 * and at -inf: 0. 21 cycles a float8 on PoCL (its exp 33), 19 on Intel's
 * runtime (its exp 25, on a 2.0 GHz Zen core): the runtimes' exp, which must
 * serve every x (bench/NOTES.md).
 */
#define EXP_NONPOS(T, AS_T, AS_I)                                                                  \
    static inline __attribute__((always_inline)) T exp_nonpos(T x)                                 \
    {                                                                                              \
        const T shift = 12582912.0f, sum = fma(x, 1.44269504f, shift), n = sum - shift;            \
        const T r = fma(n, 2.12194440e-4f, fma(n, -0.693359375f, x));                              \
        T p = 8.369148709e-3f;                                                                     \
        p = fma(p, r, 4.191750661e-2f);                                                            \
        p = fma(p, r, 1.666650474e-1f);                                                            \
        p = fma(p, r, 4.999887049e-1f);                                                            \
        p = fma(p, r, 1.0f);                                                                       \
        p = fma(p, r, 1.000000119f);                                                               \
        return select(p * AS_T((AS_I(sum) << 23) + 0x3f800000), (T)0.0f, x < -86.6f);              \
    }
