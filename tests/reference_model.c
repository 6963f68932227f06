/* reference_model.c - double-precision LayerNorm, activations and whole models. */
#include "reference_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lf_ref_layernorm(const double *s, int d, double eps, const float *gamma, const float *beta, double *out)
{
    double mean = 0, var = 0;
    for (int c = 0; c < d; c++) mean += s[c];
    mean /= d;
    for (int c = 0; c < d; c++) var += (s[c] - mean) * (s[c] - mean);
    var /= d;
    for (int c = 0; c < d; c++) out[c] = (s[c] - mean) / sqrt(var + eps) * gamma[c] + beta[c];
}

double lf_ref_activate(double v, lf_activation act)
{
    switch (act) {
    case LF_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case LF_ACT_GELU_TANH: return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case LF_ACT_RELU: return v < 0 ? 0.0 : v;
    }
    return v;
}
