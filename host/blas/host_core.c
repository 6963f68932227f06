/*
 * host_core.c - the kernel set the host BLAS (OpenBLAS) runs, and a faster
 * one this CPU supports when OpenBLAS fell back to an older set.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels by CPU model when it loads; one
 * that does not know the model falls back to a generic set (Debian's 0.3.21
 * runs its SSE3 "Prescott" kernels on some AVX-512 Xeons, about 4x slower
 * GEMMs: bench/NOTES.md). It takes OPENBLAS_CORETYPE only when it loads, so
 * the library cannot change it afterwards: it says what to set.
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

/* OpenBLAS's x86-64 sets without AVX2: the ones it falls back to. */
static bool older_than_avx2(const char *core)
{
    static const char *const older[] = {"Prescott",  "Core2",    "Penryn",     "Dunnington", "Nehalem",
                                        "Atom",      "Sandybridge", "Barcelona", "Bobcat",    "Bulldozer",
                                        "Piledriver", "Steamroller", "Excavator", "Opteron"};
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++)
        if (strcasecmp(core, older[i]) == 0) return true;
    return false;
}

const char *lf_host_blas_core(const char **faster)
{
    const char *core = openblas_get_corename();
    if (!core) core = "unknown";
    if (faster) {
        const char *best = supported_core();
        const char *set = getenv("OPENBLAS_CORETYPE");
        *faster = (!set || !*set) && best && older_than_avx2(core) ? best : NULL;
    }
    return core;
}
