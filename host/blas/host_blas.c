/*
 * host_blas.c - the BLAS library behind the host GEMM backend: OpenBLAS,
 * which the library links, or Intel's MKL, loaded when first asked for.
 *
 * LINFORMER_HOST_BLAS=openblas|mkl chooses; unset or empty, MKL where it
 * loads on an Intel CPU (its SGEMM ran the model's shapes 7-22% faster than
 * OpenBLAS's on an AVX-512 Xeon: bench/NOTES.md, item 33), OpenBLAS
 * otherwise. MKL is the file LINFORMER_MKL names, else libmkl_rt.so.3 on the
 * dynamic loader's path (the build tree's run path holds build/mkl, where
 * scripts/install-mkl.sh puts it). A file named for MKL that does not load is
 * an error wherever MKL is tried, never a quiet fall back to OpenBLAS.
 *
 * MKL runs its threads through GNU OpenMP (libgomp, which it loads with it):
 * of its threading layers, the one whose runtime comes with the compiler
 * rather than as another package (Intel's OpenMP, TBB). libgomp reads
 * OMP_WAIT_POLICY as it loads, and its idle threads spin by default on the
 * cores where the OpenCL runtime's kernels run next: the program sets
 * `passive` before its first context (tools/main.c), as it does OpenBLAS's
 * OPENBLAS_THREAD_TIMEOUT.
 */
#include "blas.h"

#include "kernel_cache.h" /* lf__file_kind */

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* MKL's service calls, by the values of its mkl_service.h. */
enum { MKL_INTERFACE_LP64 = 0, MKL_THREADING_GNU = 3 };

static const lf_host_blas openblas = {"OpenBLAS", cblas_sgemm};
static lf_host_blas mkl = {"MKL", NULL}; /* sgemm NULL: MKL could not be loaded */
static char mkl_version[160], mkl_error[512];
static pthread_once_t mkl_once = PTHREAD_ONCE_INIT;

/* Loads MKL once a process, for good: its threads live on, as OpenBLAS's do. */
static void load_mkl(void)
{
    const char *path = getenv("LINFORMER_MKL");
    if (!path || !*path) path = "libmkl_rt.so.3";
    /* The dynamic loader opens a path as it is: on a FIFO with no writer it
     * would wait forever, so a path that names anything but a regular file is
     * refused first. (A bare name is searched for by the loader.) */
    struct stat sb;
    if (strchr(path, '/') && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        snprintf(mkl_error, sizeof mkl_error, "\"%s\" is %s, not a library file", path,
                 lf__file_kind(sb.st_mode));
        return;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(mkl_error, sizeof mkl_error, "%s", dlerror());
        return;
    }
    int (*interface_layer)(int) = (int (*)(int))dlsym(lib, "MKL_Set_Interface_Layer");
    int (*threading_layer)(int) = (int (*)(int))dlsym(lib, "MKL_Set_Threading_Layer");
    void (*version)(char *, int) = (void (*)(char *, int))dlsym(lib, "MKL_Get_Version_String");
    lf_sgemm_fn *sgemm = (lf_sgemm_fn *)dlsym(lib, "cblas_sgemm");
    if (!interface_layer || !threading_layer || !version || !sgemm) {
        snprintf(mkl_error, sizeof mkl_error, "%s is not MKL's single dynamic library (no cblas_sgemm, "
                 "MKL_Set_Interface_Layer, MKL_Set_Threading_Layer or MKL_Get_Version_String in it)", path);
        dlclose(lib);
        return;
    }
    /* 32-bit integers, as cblas.h declares them, whatever MKL_INTERFACE_LAYER says */
    if (interface_layer(MKL_INTERFACE_LP64) != MKL_INTERFACE_LP64 ||
        threading_layer(MKL_THREADING_GNU) != MKL_THREADING_GNU) {
        snprintf(mkl_error, sizeof mkl_error, "%s refused its LP64 interface or its GNU OpenMP threads", path);
        dlclose(lib);
        return;
    }
    version(mkl_version, sizeof mkl_version);
    mkl.sgemm = sgemm;
}

static bool intel_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return false;
#endif
}

lf_status lf__host_blas_pick(const lf_host_blas **out, char *errbuf, size_t errbuf_size)
{
    const char *env = getenv("LINFORMER_HOST_BLAS"), *file = getenv("LINFORMER_MKL");
    const bool chosen = env && *env;
    if (chosen && strcmp(env, "openblas") != 0 && strcmp(env, "mkl") != 0)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT,
                            "LINFORMER_HOST_BLAS is \"%s\": use \"openblas\" or \"mkl\"", env);
    *out = &openblas;
    if (chosen ? strcmp(env, "mkl") == 0 : intel_cpu()) {
        pthread_once(&mkl_once, load_mkl);
        if (mkl.sgemm) *out = &mkl;
        else if (chosen)
            return lf__fail_buf(errbuf, errbuf_size, LF_ERR_UNSUPPORTED,
                                "LINFORMER_HOST_BLAS is \"mkl\", but MKL did not load: %s", mkl_error);
        else if (file && *file) /* a file named for MKL is never passed over in silence */
            return lf__fail_buf(errbuf, errbuf_size, LF_ERR_UNSUPPORTED,
                                "MKL, the default on this Intel CPU, did not load from LINFORMER_MKL: %s "
                                "(LINFORMER_HOST_BLAS=openblas takes OpenBLAS)", mkl_error);
    }
    return LF_OK;
}

lf_status lf_host_blas_library(const char **name, const char **version, char *errbuf, size_t errbuf_size)
{
    if (!name) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "name is NULL");
    const lf_host_blas *blas;
    LF_TRY(lf__host_blas_pick(&blas, errbuf, errbuf_size));
    *name = blas->name;
    if (version) *version = blas == &mkl ? mkl_version : NULL;
    return LF_OK;
}
