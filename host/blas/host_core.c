/*
 * host_core.c - the kernel set the host BLAS (OpenBLAS) runs, and a faster
 * one this CPU supports when OpenBLAS fell back to an older set.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels by CPU model when it loads; one
 * that does not know the model falls back to a generic set (Debian's 0.3.21
 * runs its SSE3 "Prescott" kernels on some AVX-512 Xeons, about 4x slower
 * GEMMs: bench/NOTES.md). It takes OPENBLAS_CORETYPE only when it loads, so
 * the library cannot change it afterwards: it says what to set, and when an
 * OPENBLAS_CORETYPE set before it loaded holds OpenBLAS to an older set than
 * the CPU runs (an administrator's Haswell on an AVX-512 machine), says that.
 */
#include <cblas.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "linformer.h"

/* The best of OpenBLAS's x86-64 kernel sets that this CPU's features run, or NULL. */
static const char *supported_core(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

/* OpenBLAS's x86-64 sets by the widest vectors their GEMM kernels use: 0
 * without AVX2 (the ones it falls back to), 1 AVX2, 2 AVX-512; -1 a name not
 * listed, of which nothing is said. */
static int vector_tier(const char *core)
{
    static const char *const tiers[][14] = {
        {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Barcelona", "Bobcat",
         "Bulldozer", "Piledriver", "Steamroller", "Excavator", "Opteron"},
        {"Haswell", "Zen"},
        {"SkylakeX", "Cooperlake", "SapphireRapids"}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 14 && tiers[t][i]; i++)
            if (strcasecmp(core, tiers[t][i]) == 0) return t;
    return -1;
}

const char *lf_host_blas_core(const char **faster)
{
    const char *core = openblas_get_corename();
    if (!core) core = "unknown";
    if (faster) {
        const char *best = supported_core();
        const char *set = getenv("OPENBLAS_CORETYPE");
        *faster = (!set || !*set) && best && vector_tier(core) == 0 ? best : NULL;
    }
    return core;
}

const char *lf_host_blas_forced_core(const char **best)
{
    const char *set = getenv("OPENBLAS_CORETYPE"), *cpu = supported_core();
    const bool forced = set && *set && cpu && vector_tier(set) >= 0 && vector_tier(set) < vector_tier(cpu);
    if (best) *best = forced ? cpu : NULL;
    return forced ? set : NULL;
}
