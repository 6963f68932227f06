/* random.c - splitmix64: small, seedable, the same numbers on every platform. */
#include <math.h>

#include "runtime.h"

uint64_t lf__rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double lf__rand_uniform(uint64_t *state)
{
    return (double)(lf__rand_next(state) >> 11) * 0x1.0p-53;
}

/* Box-Muller; one draw per call keeps the stream simple to reproduce. */
double lf__rand_normal(uint64_t *state)
{
    double u1 = lf__rand_uniform(state), u2 = lf__rand_uniform(state);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
