/*
 * linformer.h - Linformer self-attention on any OpenCL device.
 *
 * Linformer (Wang et al., 2020, arXiv 2006.04768) compresses the key/value
 * sequence axis with projections E, F (k x n): K~ = E K, V~ = F V, so attention
 * costs O(n k) instead of O(n^2). The output keeps n rows. Beside it the library
 * runs two exact baselines, `dense` (materialises the n x n scores) and `flash`
 * (tiled over key blocks with an online softmax), so the trade can be measured.
 *
 * Conventions
 *   - Every fallible function returns lf_status. LF_OK is 0. lf_status_string()
 *     names a status; lf_context_last_error() says what happened, naming the
 *     argument, tensor or OpenCL error (CL_OUT_OF_RESOURCES, never -5).
 *   - Opaque handles come in create/free pairs; every free accepts NULL.
 *   - Shapes are row-major and written next to each function.
 *   - The library never aborts or exits. Its one process-wide state is the
 *     OpenCL contexts of freed contexts, kept for the next context on their
 *     device (see lf_context_free), beside what it knows of fork() and
 *     exit() (below).
 *
 * Threads
 *   - Different contexts are independent: use one per thread freely.
 *   - A context may be shared by threads. Every call that enqueues work on its
 *     queue, changes one of its objects or reads what a forward changes takes
 *     the context's lock, so calls on one context are serialised, never
 *     interleaved. The last-error message is per context and a failed argument
 *     check writes it without the lock: with several threads on one context,
 *     read it right after the failing call (another thread's failure may
 *     replace it), or give each thread its own context.
 *   - Contexts may be created and freed on any thread: the kept OpenCL
 *     contexts are taken and given back under a lock of their own, and
 *     devices are listed (lf_devices_list, each context's creation) one
 *     thread at a time, as PoCL needs.
 *   - CLBlast keeps process-wide caches without locks of its own: every call
 *     into it, from any context, holds one process-wide lock, so GEMMs on
 *     CLBlast are enqueued one at a time across contexts (their first call
 *     on a device, which compiles, holds it for as long).
 *   - An object (layer, projection, model) must not be freed while another thread uses it.
 *
 * Processes (fork)
 *   - OpenCL state does not survive fork(): a child has the parent's memory
 *     but not its threads (PoCL's queues then never finish). The library
 *     counts forks (pthread_atfork, from the moment it is loaded).
 *   - Listing the devices and creating a context run one thread at a time,
 *     and fork() on another thread waits for the one in progress to end: a
 *     child never starts inside the ICD loader's or a runtime's setup.
 *   - In a child, every call on a context created before the fork, or on a
 *     layer, projection or model made on it, fails at once with LF_ERR_STATE
 *     and a message naming fork(), touching neither OpenCL nor the context's
 *     lock (which a parent's thread may have held at the fork); their frees
 *     do nothing (the child's copy of their memory ends with the child).
 *   - A process forked after the library had called into OpenCL (listed
 *     devices, created a context), in it or in an ancestor, creates no
 *     context: lf_context_create and lf_context_create_from_cl fail at once
 *     with LF_ERR_STATE. No runtime promises to work there. lf_devices_list
 *     still does.
 *   - A process forked before the library's first OpenCL call is like any
 *     other; the parent goes on unaffected by its children.
 *   - The way out: create the contexts in a process started afresh (fork()
 *     then exec(), posix_spawn), or fork the workers before the library is
 *     first used.
 *   - exit() while other threads are in calls (a forward on a thread never
 *     joined) tears the OpenCL runtimes down under them, which crashed PoCL
 *     and aborted Intel's runtime: the library's atexit handler, registered at
 *     the first call on a context, waits up to 10 s for the calls in
 *     progress, and calls that begin after it fail with LF_ERR_STATE.
 */
#ifndef LINFORMER_H
#define LINFORMER_H

#include <stddef.h>
#include <stdint.h>

/* An application that chose no OpenCL target gets the OpenCL headers' own
 * default, 300 (every declaration they hold), set here so that they need not
 * say so at every include; one chosen before this header is kept. The API
 * needs only OpenCL 1.2 types, so it never narrows what the includer sees. */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#if defined(__APPLE__) || defined(__MACOSX)
#include <OpenCL/opencl.h>
#else
#include <CL/opencl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* LF_BUILDING is defined while the library itself is compiled. */
#if defined(_WIN32) && defined(LF_BUILDING)
#define LF_API __declspec(dllexport)
#elif defined(_WIN32)
#define LF_API __declspec(dllimport)
#elif defined(__GNUC__)
#define LF_API __attribute__((visibility("default")))
#else
#define LF_API
#endif

/* ---- Version ------------------------------------------------------------ */
#define LF_VERSION_MAJOR 0
#define LF_VERSION_MINOR 1
#define LF_VERSION_PATCH 0
#define LF_VERSION_NUMBER (LF_VERSION_MAJOR * 10000 + LF_VERSION_MINOR * 100 + LF_VERSION_PATCH)
#define LF_VERSION_STRING "0.1.0"

LF_API unsigned lf_version_number(void);   /* LF_VERSION_NUMBER of the library */
LF_API const char *lf_version_string(void); /* LF_VERSION_STRING of the library */

/* ---- Status ------------------------------------------------------------- */
typedef enum {
    LF_OK = 0,
    LF_ERR_ARGUMENT,      /* an argument is NULL, out of range or of the wrong shape */
    LF_ERR_NO_DEVICE,     /* no OpenCL device, or none matches the selector */
    LF_ERR_OUT_OF_MEMORY, /* host or device memory, or over the device's max allocation */
    LF_ERR_OPENCL,        /* an OpenCL call failed; the message names the CL error */
    LF_ERR_BUILD,         /* a kernel failed to compile; the message holds the build log */
    LF_ERR_BLAS,          /* CLBlast failed; the message names its status */
    LF_ERR_IO,            /* a file could not be opened, read or written */
    LF_ERR_FORMAT,        /* a file is malformed: header, offsets, dtype, shapes, tensors */
    LF_ERR_STATE,         /* the object is not ready, e.g. a weight was never set */
    LF_ERR_UNSUPPORTED    /* valid, but not supported by this build or device */
} lf_status;

/* A constant name for a status, e.g. "LF_ERR_ARGUMENT"; never NULL. */
LF_API const char *lf_status_string(lf_status status);

/* The OpenCL name of an OpenCL error code, e.g. "CL_OUT_OF_RESOURCES". */
LF_API const char *lf_cl_error_string(cl_int err);

/* ---- Devices ------------------------------------------------------------ */
typedef enum {
    LF_DEVICE_GPU = 1,
    LF_DEVICE_CPU = 2,
    LF_DEVICE_ACCELERATOR = 4,
    LF_DEVICE_OTHER = 8
} lf_device_type;

typedef struct {
    unsigned platform_index; /* P in a "P:D" selector */
    unsigned device_index;   /* D in a "P:D" selector */
    lf_device_type type;     /* a device reporting several: the first of GPU, accelerator, CPU */
    char platform_name[128];
    char platform_version[128];
    char platform_vendor[128]; /* e.g. "The pocl project" */
    char device_name[128];
    char vendor[128];
    char driver_version[128];
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint64_t local_mem_bytes;
    unsigned compute_units;
    size_t max_work_group_size;
    int fp16; /* cl_khr_fp16 */
    int fp64; /* cl_khr_fp64 */
    unsigned float_vector_width; /* floats of the device's native vector (8: AVX2, 16: AVX-512) */
} lf_device_info;

/*
 * Lists every device of every platform, in platform order. Fills at most
 * `capacity` entries of `out` (out may be NULL when capacity is 0) and sets
 * *count to the number found. errbuf (may be NULL) receives a message on failure.
 */
LF_API lf_status lf_devices_list(lf_device_info *out, size_t capacity, size_t *count,
                                 char *errbuf, size_t errbuf_size);

/*
 * The OpenCL drivers installed for the ICD loader that gave no platform, and
 * why, one a line: "FILE.icd names LIBRARY, which does not load: REASON"
 * (dlerror()'s), or an OCL_ICD_VENDORS that names no folder; "" when every
 * driver loaded. The ICD loader drops such a driver without a word; it reads
 * OCL_ICD_VENDORS (a folder of .icd files, an .icd file or a library; unset,
 * /etc/OpenCL/vendors) once, and this, computed once a process, reads it as
 * the loader does. lf_devices_list's and lf_devices_select's messages of a
 * missing platform or device end with it. The string is static; never NULL.
 */
LF_API const char *lf_devices_unloaded(void);

/*
 * Chooses a device from a list; a pure function that touches no device (a
 * message of no match ends with lf_devices_unloaded()'s note).
 * Leading and trailing blanks of the selector are ignored; texts match
 * case-insensitively, as substrings.
 *   NULL or ""     the default: the first GPU, else the first accelerator, else
 *                  the first CPU, else the first device
 *   "gpu", "cpu", "accelerator"   the first device of that type
 *   "P"            P all digits: the first device of platform P ("0")
 *   "NAME"         the first device whose platform name, platform vendor or
 *                  device name contains NAME ("nvidia"; "pocl" matches PoCL's
 *                  vendor "The pocl project")
 *   "P:D"          PyOpenCL's form, each part an index or a text: P picks the
 *                  platform (index) or the devices NAME would; D is then the
 *                  device index on platform P ("0:1"), the D-th device that P
 *                  matches, from 0 ("pocl:0", "nvidia:1"), or the first of
 *                  them whose device name contains D ("nvidia:a100")
 * A selector holding a colon that matches nothing as "P:D" is tried whole as a
 * NAME. An unmatched selector gives LF_ERR_NO_DEVICE and a message in errbuf
 * that quotes the selector and lists the devices.
 */
LF_API lf_status lf_devices_select(const char *selector, const lf_device_info *devices,
                                   size_t count, size_t *index, char *errbuf,
                                   size_t errbuf_size);

/* ---- Context ------------------------------------------------------------ */
typedef struct lf_context lf_context;

/*
 * Opens the device that `selector` picks (see lf_devices_select); when selector
 * is NULL the environment variable LINFORMER_DEVICE is used, else the default.
 * The queue is in order with profiling enabled. On failure *out is NULL and the
 * message goes to errbuf (may be NULL).
 * Kernels are cached on disk under LINFORMER_CACHE_DIR (default
 * $XDG_CACHE_HOME/linformer or ~/.cache/linformer; "off" disables the cache).
 * A folder that is not the user's own (its owner is not the effective user,
 * root included) or that its group or others may write is not used: every
 * kernel is then compiled and nothing is read or written there (a binary
 * planted in it would run on the device). An entry in the folder that is
 * another user's or writable by group or others is ignored and rewritten.
 * lf_kernel_cache_dir says which holds. LINFORMER_KERNEL_DIR, when set, loads
 * the kernel sources from that folder instead of the copies built into the
 * library.
 * The kernels' parameters (lf_context_kernel_params) come from a table by
 * device type and vendor; LINFORMER_KERNEL_PARAMS overrides them, for
 * development, and a bad value of it makes creating a layer or a model fail
 * with LF_ERR_ARGUMENT.
 */
LF_API lf_status lf_context_create(const char *selector, lf_context **out, char *errbuf,
                                   size_t errbuf_size);

/*
 * The kernel cache as contexts created now use it, from the environment: LF_OK
 * and the folder's path in `out` (created if missing), or, when kernels will
 * not be cached, why in `out`: LF_ERR_UNSUPPORTED for LINFORMER_CACHE_DIR=off,
 * LF_ERR_IO when there is no usable folder (no variable to find it from, a
 * path over 4095 bytes, not a folder, not writable, another user's or
 * writable by group or others). A message that does not fit is cut to size.
 * LF_ERR_ARGUMENT when out is NULL or size 0, or when the path does not fit
 * in size bytes: `out` then starts with the number of bytes needed.
 */
LF_API lf_status lf_kernel_cache_dir(char *out, size_t size);

/*
 * The kernel cache folder of the kernels this context builds from now on, in
 * place of the environment's (LINFORMER_CACHE_DIR, ...): a path, created if
 * missing and trusted only as the environment's is, or "off" for none; NULL
 * goes back to the environment's. LF_ERR_ARGUMENT for an empty string. A
 * folder that cannot be used is not an error here: kernels are then compiled
 * and not cached, as with the environment's.
 */
LF_API lf_status lf_context_set_cache_dir(lf_context *ctx, const char *dir);

/*
 * Wraps a host application's own context and in-order queue (retained, released
 * by lf_context_free). The queue's device is used. Profiling timings are only
 * available when the queue was created with CL_QUEUE_PROFILING_ENABLE.
 */
LF_API lf_status lf_context_create_from_cl(cl_context context, cl_command_queue queue,
                                           lf_context **out, char *errbuf,
                                           size_t errbuf_size);

/*
 * Frees the context once every layer, projection and model made on it is
 * freed too (each holds it). The OpenCL context and queue that
 * lf_context_create opened are not released but kept for the next
 * lf_context_create on the same device (so its lf_context_cl_context may be
 * one a freed context had): at most 4 in the process, each serving one live
 * context at a time, never released before the process ends. With them stay
 * CLBlast's GEMM programs built for that OpenCL context, which a new one would
 * compile again (0.1 to 0.3 s on PoCL, about 4 s on Intel's CPU runtime,
 * when the GEMMs run on CLBlast). Nothing else is kept: the context's kernels
 * are freed, and the objects made on it freed their buffers. A context whose
 * queue failed to finish, one freed while 4 are kept, and one from
 * lf_context_create_from_cl (its OpenCL context is the caller's) release
 * theirs at once; that clears CLBlast's process-wide program cache (which
 * otherwise holds every OpenCL context it served), so other live contexts on
 * CLBlast build their GEMM programs once more.
 */
LF_API void lf_context_free(lf_context *ctx);

/* The message of the last failure on this context; "" when none. Never NULL.
 * A later successful call leaves it as it is: a call's status says whether it
 * failed, the message then says why. */
LF_API const char *lf_context_last_error(const lf_context *ctx);

LF_API lf_status lf_context_device_info(const lf_context *ctx, lf_device_info *info);
LF_API cl_context lf_context_cl_context(const lf_context *ctx);
LF_API cl_command_queue lf_context_cl_queue(const lf_context *ctx);

/*
 * The kernel parameters that layers and models created now on ctx take, as
 * text in LINFORMER_KERNEL_PARAMS's form:
 * "variant=cpu,tk=32,tq=8,qb=16,softmax_wg=256,layernorm_wg=128" (cut to
 * size). variant is the attention kernel's: "cpu" (qb queries a work-item as
 * the lanes of a vector, no local memory) or "gpu" (one query a work-item, tk
 * keys a tile in local memory); tq, softmax_wg and layernorm_wg are the
 * work-items wanted in a group. They are the row of a table that serves the
 * device (by type, then vendor: CPU devices take "cpu", all others "gpu"),
 * then LINFORMER_KERNEL_PARAMS (key=value pairs separated by commas, each key
 * once; variant= first takes that variant's defaults, the other keys then
 * set their own) when it is set and not empty. The device's limits may lower
 * tk, tq and the groups where the kernels run. LF_ERR_ARGUMENT with a
 * message naming the key or value when that variable is bad, or when out is
 * NULL or size 0.
 */
LF_API lf_status lf_context_kernel_params(lf_context *ctx, char *out, size_t size);

/*
 * Device profiles: GPUs described as data (what each reports that the
 * kernels' parameters and options depend on), so that the programs the
 * library would build there can be listed without the device:
 * lf_device_profile_name(i) is the i-th profile's name (NULL past the last);
 * lf_device_profile_info fills *info as lf_devices_list would there (its
 * platform and memory sizes left 0), or fails with LF_ERR_ARGUMENT listing
 * the names.
 */
LF_API const char *lf_device_profile_name(size_t index);
LF_API lf_status lf_device_profile_info(const char *name, lf_device_info *info, char *errbuf, size_t errbuf_size);

/* One program the library builds: a file of the kernel sources and its
 * options, and the kernels of it that the library creates. */
typedef struct {
    char file[32];           /* e.g. "attention.cl" */
    char options[256];       /* the library's own -D options */
    char build_options[320]; /* what clBuildProgram gets: -cl-std=CL1.2 where the device compiles it, then options */
    char kernels[128];       /* the kernels' names, separated by spaces */
    char compiler[16];       /* the profile's GPU vendor: "nvidia", "amd" or "intel" */
} lf_kernel_build;

/*
 * Every program the library builds on a device of that profile, with the
 * options it gives it there: each kernel in the variant, tiles and vector
 * shape of the kernel parameters (including LINFORMER_KERNEL_PARAMS), the
 * attention kernel at d_head 32, 64, 128 and 256 with and without the causal
 * mask, and each work-group size at the first size tried (the device may
 * lower it). Fills at most `capacity` entries and sets *count to the number
 * there are (call with capacity 0 to count). lf_kernel_source gives the text
 * each is built from: its file after its prelude (malloc'd, free() it).
 */
LF_API lf_status lf_kernel_builds(const char *profile, lf_kernel_build *out, size_t capacity, size_t *count,
                                  char *errbuf, size_t errbuf_size);
LF_API lf_status lf_kernel_source(const char *file, char **text, size_t *size, char *errbuf, size_t errbuf_size);

/* Waits for all work queued on the context. */
LF_API lf_status lf_context_finish(lf_context *ctx);

/* ---- GEMM backend ------------------------------------------------------- */
/*
 * Every GEMM of a context (projections, Linformer's sequence projections, the
 * GEMM attention path) runs on one backend, chosen at creation:
 *   "clblast": CLBlast's OpenCL kernels on the device;
 *   "host":    the host's BLAS (OpenBLAS or MKL: lf_context_host_blas) on
 *              the buffers mapped into host memory; a CPU device's buffers
 *              already live there.
 * The default is "host" on CPU devices and "clblast" on the others; the
 * environment variable LINFORMER_GEMM=clblast|host overrides it (any other
 * value makes lf_context_create fail with LF_ERR_ARGUMENT). Both backends
 * are timed in the forward's profile. On either backend a sequence's output
 * bits do not depend on its batch-mates: a GEMM over the rows of a batch runs
 * once per sequence, each of the same shape. The host BLAS runs its own threads (by
 * default one per core; OPENBLAS_NUM_THREADS sets them), and GEMMs of
 * contexts on different threads may run at once.
 * CLBlast's kernel parameters tuned by `linformer tune` for the device and
 * driver are applied when a context is created (see lf_context_create's cache
 * directory).
 */
LF_API const char *lf_context_gemm_backend(const lf_context *ctx); /* "clblast", "host"; NULL for NULL */

/*
 * The BLAS library a host-backend context's GEMMs call: "OpenBLAS", which the
 * library links, or "MKL", Intel's, loaded at run time. The environment
 * variable LINFORMER_HOST_BLAS=openblas|mkl chooses when the context is
 * created; unset or empty, MKL where it loads on an Intel CPU, OpenBLAS
 * otherwise. Another value makes lf_context_create fail with LF_ERR_ARGUMENT,
 * and "mkl" where MKL does not load with LF_ERR_UNSUPPORTED, the message
 * saying why. MKL is the file LINFORMER_MKL names (one that does not load fails
 * the context where MKL is tried, asked for or not), else libmkl_rt.so.3 as the
 * dynamic loader finds it; it is loaded once a process and runs its threads
 * through GNU OpenMP: MKL_NUM_THREADS sets them, and OMP_WAIT_POLICY=passive,
 * set before the first context, keeps its idle threads from spinning on the
 * cores the OpenCL kernels run on next (the `linformer` program sets it).
 * NULL for a CLBlast context, or for NULL.
 */
LF_API const char *lf_context_host_blas(const lf_context *ctx);

/*
 * *name = what lf_context_host_blas would give a host-backend context created
 * now, loading MKL if that is the choice; with MKL, *version = MKL's own
 * version string, else NULL (version may be NULL). Fails as lf_context_create
 * would, with the message in errbuf (may be NULL), on a bad
 * LINFORMER_HOST_BLAS or an MKL asked for that does not load. Needs no
 * context; the strings are static.
 */
LF_API lf_status lf_host_blas_library(const char **name, const char **version, char *errbuf, size_t errbuf_size);

/*
 * The kernel set the host BLAS (OpenBLAS) runs, as OpenBLAS names it (e.g.
 * "Haswell", "SkylakeX", "Zen"; "unknown" if it does not say). When faster
 * is not NULL, *faster is set to a faster set this CPU supports where
 * OpenBLAS fell back to one without AVX2 on a CPU it does not recognise
 * (OPENBLAS_CORETYPE=*faster, set before the library loads, selects it), and
 * to NULL otherwise or when OPENBLAS_CORETYPE is already set. Needs no
 * context; the strings are static.
 */
LF_API const char *lf_host_blas_core(const char **faster);

/*
 * OPENBLAS_CORETYPE's value where one set in the environment holds OpenBLAS
 * to a kernel set of narrower vectors than this CPU runs (for example
 * "Haswell", AVX2, on an AVX-512 CPU), NULL otherwise; *best, when not NULL,
 * is set to the widest set the CPU runs ("SkylakeX" or "Haswell"), or NULL.
 * The GEMMs then run at the older set's rate: `linformer bench` and `run
 * --profile` say so with the rate both sets reach. Needs no context.
 */
LF_API const char *lf_host_blas_forced_core(const char **best);

/*
 * The context's GEMM rate, the yardstick for the layer's GFLOP/s: the median
 * GFLOP/s (2 m n k flops) of five C = A B^T with A [m, k], B [n, k] on the
 * context's backend after one warm-up, timed with profiling events (a queue
 * without profiling gives LF_ERR_UNSUPPORTED). m, n and k are 1 to INT_MAX.
 * Allocates and frees its own buffers.
 */
LF_API lf_status lf_gemm_rate(lf_context *ctx, size_t m, size_t n, size_t k, double *gflops);

/*
 * The context's copy bandwidth, the yardstick for the elementwise kernels
 * (LayerNorm, bias + activation): the median GB/s (8 bytes a float: one read,
 * one write) of five copies of `floats` floats between two device buffers
 * through the library's copy kernel, shaped as those kernels are, after one
 * warm-up, timed with profiling events (a queue without profiling gives
 * LF_ERR_UNSUPPORTED). The last copy is checked against its source: a wrong
 * copy is an LF_ERR_OPENCL; floats is 1 to INT_MAX. Allocates and frees its
 * own buffers.
 */
LF_API lf_status lf_copy_rate(lf_context *ctx, size_t floats, double *gbps);

/*
 * Searches CLBlast's GEMM kernel parameters (Xgemm, XgemmDirect and the size
 * from which the tiled kernel replaces the direct one) for the context's
 * device for about `seconds`, timing random valid sets on GEMM shapes like the
 * layer's, and stores the winners in the cache directory under the device's
 * name and driver version; every context created later on that device applies
 * them. A set is stored only where it beats the parameters in force (with
 * none, and none stored before, no entry is stored and the log says so).
 * CLBlast keeps parameters per device for the whole process and cannot go
 * back to its own: while the search runs, the CLBlast GEMMs of every other
 * context wait; after it, until the process ends, the device's GEMMs run with
 * what it left in force: the winners or the stored entry's sets, and for a
 * kernel with neither the last set tried (a context with sets of its own, from
 * a stored entry or the built-in table, applies its GEMM's class's sets again
 * before each GEMM where others are in force). The sets are stored for every
 * GEMM shape class (see lf_gemm_tune_model). Without a stored entry, a context
 * loads its device's row of the built-in table of sets measured to win there
 * (LINFORMER_GEMM_TABLE names a file read in its place; one that cannot be
 * read, or whose row of the device holds no valid set, fails the context's
 * creation). Tune in a process of its own, as
 * `linformer tune` does. `log` (may be NULL) receives one line per step. No
 * step begins after `seconds` (positive and finite) but the three that run once whatever
 * the time: the parameters in force of each kernel and the smallest crossover
 * edge, each compiling kernels; one of them that ends past the limit is
 * logged. Fails with LF_ERR_IO when the cache is off or its folder takes no
 * entry (tried before the search; the stored entry is read back).
 */
typedef void (*lf_tune_log)(const char *line, void *user);
LF_API lf_status lf_gemm_tune(lf_context *ctx, double seconds, lf_tune_log log, void *user);

/*
 * The same search on the GEMMs that the model in the safetensors file at
 * `path` (as lf_model_load reads it) runs in a forward of `batch` (1 to
 * 65536) sequences of `seq_len` positions (1 to the model's max_seq_len; 0:
 * that):
 * every GEMM the forward calls, noted once without running it, deduplicated
 * and grouped by shape class (the GEMM's m, n, k: "sum", the inner dimension
 * at least 4 times C's longer side; else "head", a side of 128 or less;
 * else "tile"). For each class with GEMMs it times, weighted by how often the
 * forward calls each shape, the parameters in force, then sets of the tiled
 * kernel and of the direct kernel (CLBlast's database rows for NVIDIA's A100
 * and GeForce RTX 30 and 40 series first, then random valid sets), each
 * result checked against the host BLAS's (a relative error past 1e-4
 * disqualifies the set). Each class takes the faster kernel with its best
 * set; the sets of every class are stored (one entry per device, as above;
 * contexts apply a class's sets before each of its GEMMs) when at least one
 * class beats the parameters in force. The time limit holds as for
 * lf_gemm_tune: no step begins after `seconds` but each class's parameters
 * in force. A file that is not a model fails as lf_model_load does.
 */
LF_API lf_status lf_gemm_tune_model(lf_context *ctx, const char *path, int seq_len, int batch, double seconds,
                                    lf_tune_log log, void *user);

/* ---- Attention layer ---------------------------------------------------- */
typedef enum {
    LF_MODE_LINFORMER = 0, /* compressed keys/values: O(n k) */
    LF_MODE_DENSE,         /* exact, n x n scores in memory, heads in chunks */
    LF_MODE_FLASH          /* exact, key blocks with an online softmax, O(n) memory */
} lf_mode;

typedef enum {
    LF_SHARE_NONE = 0,  /* one E and one F per key/value head: [kv_heads, k, max_seq_len] */
    LF_SHARE_HEADWISE,  /* one E and one F for all heads: [k, max_seq_len] each */
    LF_SHARE_KV,        /* one matrix E = F for all heads: [k, max_seq_len] */
    LF_SHARE_LAYERWISE  /* E = F from an lf_projection that several layers share */
} lf_sharing;

typedef enum {
    LF_PROJ_LEARNED = 0, /* a learned matrix, set with lf_attention_set_weight */
    LF_PROJ_RANDOM,      /* fixed Johnson-Lindenstrauss matrix, N(0, 1/k), from `seed` */
    LF_PROJ_MEAN_POOL,   /* mean over windows of w positions (E[j,i] = 1/w) */
    LF_PROJ_MAX_POOL,    /* max over windows of w positions */
    LF_PROJ_CONV         /* learned convolution, kernel = stride = w, no bias */
} lf_proj_kind;

/* What the layer means. The order it is evaluated in is the library's: with
 * one E for every head it may compute LF_POSITION_KV as (E X) Wk^T + (E 1) bk^T,
 * the same up to rounding, when that costs fewer flops (docs/library.md: order of evaluation). */
typedef enum {
    LF_POSITION_KV = 0, /* K~ = E (X Wk^T + bk): after the k/v projections (paper, lucidrains) */
    LF_POSITION_INPUT   /* K~ = (E X) Wk^T + bk: on the layer input (fairseq) */
} lf_position;

typedef enum {
    LF_PATH_AUTO = 0, /* fused (d_head <= 256) on CPUs, elsewhere while k keys fit local memory; else GEMM */
    LF_PATH_FUSED,    /* scores, softmax and P V~ in one kernel, no n x k buffer */
    LF_PATH_GEMM      /* n x k scores through CLBlast and the softmax kernel */
} lf_path;

/*
 * Window of the pooling and convolution projections: w = ceil(max_seq_len / k).
 * Compressed row j covers positions [j w, (j+1) w) that are below the sequence's
 * length; a window with no such position gives a zero row.
 */
typedef struct {
    int d_model;     /* model width */
    int heads;       /* query heads; d_model % heads == 0 unless d_head is set */
    int d_head;      /* 0 = d_model / heads */
    int kv_heads;    /* heads (default when 0), or 1: one key/value head for all queries */
    int max_seq_len; /* n may be at most this; E, F have this many columns */
    int k;           /* compressed length */
    int bias_q, bias_k, bias_v, bias_out; /* 1 = that projection has a bias */
    float scale;     /* 0 = 1/sqrt(d_head) */
    lf_mode mode;
    lf_sharing sharing;
    lf_proj_kind proj_kind;
    lf_position position; /* LF_POSITION_INPUT needs sharing other than NONE */
    int share_kv;    /* values = keys (no Wv, bv), and F = E (lucidrains share_kv) */
    uint64_t seed;   /* for LF_PROJ_RANDOM */
    lf_path path;    /* Linformer attention path */
    int causal;      /* 1 = each query sees only positions up to itself (see below) */
} lf_attention_config;

/*
 * Causal attention (causal = 1). dense and flash: standard causal softmax,
 * query i attends to keys 0..i (flash skips key tiles wholly after its
 * work-group's queries). Linformer: the compressed slots need local support,
 * so E must be a window (LF_PROJ_MEAN_POOL, LF_PROJ_MAX_POOL or LF_PROJ_CONV;
 * a learned or random matrix mixes every position and gives
 * LF_ERR_UNSUPPORTED). With w = ceil(max_seq_len / k), query i attends in one
 * softmax to the slots of the complete windows before its own, j < i / w, and
 * to the exact keys and values of its own window up to itself, positions
 * i / w * w .. i. It never reads a position after i; row 0 sees itself only.
 * Cost O(n (k + w)) per head. Causal Linformer runs on the fused path with
 * LF_POSITION_KV.
 */

/* Fills *cfg with the defaults above for the given sizes. */
LF_API void lf_attention_config_init(lf_attention_config *cfg, int d_model, int heads,
                                     int max_seq_len, int k);

/* A projection matrix E = F [k, max_seq_len] owned apart, shared by layers
 * (LF_SHARE_LAYERWISE). Its kind is LF_PROJ_LEARNED or LF_PROJ_RANDOM. */
typedef struct lf_projection lf_projection;

LF_API lf_status lf_projection_create(lf_context *ctx, int k, int max_seq_len,
                                      lf_proj_kind kind, uint64_t seed,
                                      lf_projection **out);
/* data: [k, max_seq_len] */
LF_API lf_status lf_projection_set(lf_projection *proj, const float *data, size_t count);
/* The projection is reference counted: layers using it keep it alive. */
LF_API void lf_projection_free(lf_projection *proj);

typedef struct lf_attention lf_attention;

/* `shared` is the lf_projection for LF_SHARE_LAYERWISE, else NULL. */
LF_API lf_status lf_attention_create(lf_context *ctx, const lf_attention_config *cfg,
                                     lf_projection *shared, lf_attention **out);
LF_API void lf_attention_free(lf_attention *layer);
/* The layer's config with its defaults resolved: d_head, kv_heads, scale, and
 * for Linformer the path LF_PATH_AUTO chose (LF_PATH_FUSED or LF_PATH_GEMM). */
LF_API lf_status lf_attention_config_get(const lf_attention *layer, lf_attention_config *cfg);

/*
 * Sets one weight from a host array of `count` floats; the count is checked
 * against the expected shape (D = d_model, H = heads, KV = kv_heads, dh = d_head):
 *   "wq" [H*dh, D]  "wk" [KV*dh, D]  "wv" [KV*dh, D]  "wo" [D, H*dh]   (PyTorch Linear layout)
 *   "bq" [H*dh]     "bk" [KV*dh]     "bv" [KV*dh]     "bo" [D]
 *   "e", "f": learned: [KV, k, max_seq_len] for LF_SHARE_NONE, else [k, max_seq_len];
 *             conv: [KV, w] for LF_SHARE_NONE, else [w]
 * "wv", "bv" and "f" do not exist with share_kv; "f" does not exist with
 * LF_SHARE_KV or LF_SHARE_LAYERWISE. LF_PROJ_RANDOM fills "e" and "f" at create.
 */
LF_API lf_status lf_attention_set_weight(lf_attention *layer, const char *name,
                                         const float *data, size_t count);

/*
 * The same with the array's shape: dims (ndims of them) must equal the shape
 * above exactly ("e" learned: [KV, k, max_seq_len] or [k, max_seq_len]), so a
 * transposed E [max_seq_len, k], which has the same count, is refused with
 * LF_ERR_ARGUMENT naming the expected shape instead of giving wrong answers.
 */
LF_API lf_status lf_attention_set_weight_shaped(lf_attention *layer, const char *name,
                                                const size_t *dims, size_t ndims, const float *data);

/* The weights this layer's configuration has, in the order above, for hosts
 * that fill them generically: index 0, 1, ... until LF_ERR_ARGUMENT. The
 * shape is [rows, cols], or [cols] when rows is 0; count = the floats. */
typedef struct {
    const char *name; /* "wq", ...: a constant string */
    size_t count;
    size_t rows, cols;
} lf_weight_info;
LF_API lf_status lf_attention_weight_info(const lf_attention *layer, int index, lf_weight_info *info);

/* Fills every weight with seeded random values (uniform, +-1/sqrt(fan_in)). */
LF_API lf_status lf_attention_init_random(lf_attention *layer, uint64_t seed);

/*
 * Runs the layer. x, y: [batch, n, d_model] host arrays; 1 <= n <= max_seq_len.
 * lengths: NULL (every sequence has n rows) or [batch] with 0 <= lengths[b] <= n.
 * Sequence b uses its first lengths[b] rows only; its rows past that are 0, and
 * a sequence of length 0 gives zeros. Blocks until y is written.
 * Non-finite inputs are not refused: inf and NaN propagate as IEEE arithmetic
 * does, within their own sequence. Rows past a length are never read; the
 * other sequences of the batch give the same bits as without them; a NaN in a
 * valid row makes every valid row of its sequence NaN (every query attends to
 * every key; LF_PROJ_MAX_POOL takes its max with fmax, which skips a NaN).
 * Scores in the range +-1e4 give finite outputs (the softmax subtracts the row
 * max). The same input on the same device and layer gives the same bits on
 * every run.
 */
LF_API lf_status lf_attention_forward(lf_attention *layer, const float *x, float *y,
                                      int batch, int n, const int32_t *lengths);

/* The same on device buffers of this context (at least batch*n*d_model floats);
 * queued in order on the context's queue, returns without waiting. x and y
 * must not overlap (one buffer, or sub-buffers of one whose bytes meet, are
 * refused); x must not be CL_MEM_WRITE_ONLY, nor y CL_MEM_READ_ONLY. */
LF_API lf_status lf_attention_forward_cl(lf_attention *layer, cl_mem x, cl_mem y,
                                         int batch, int n, const int32_t *lengths);

/*
 * For measuring a layer (`linformer rank`):
 * lf_attention_head_outputs: the heads' outputs before W_O, o [batch, n,
 *   heads * d_head], head h in columns h d_head .. (h+1) d_head - 1; rows past
 *   a length are 0. Same arguments as lf_attention_forward otherwise.
 * lf_attention_probabilities: the exact attention probabilities of one head
 *   over one sequence x [n, d_model], p [n, n] = softmax(scale q k^T) (causal
 *   when the layer is), whatever the layer's mode: the n x n matrix Linformer
 *   approximates. LF_ERR_OUT_OF_MEMORY when n x n is over the device's budget.
 */
LF_API lf_status lf_attention_head_outputs(lf_attention *layer, const float *x, float *o, int batch, int n,
                                           const int32_t *lengths);
LF_API lf_status lf_attention_probabilities(lf_attention *layer, const float *x, float *p, int n, int head);

/* Device time of the last forward, from its first to its last command, in ms
 * (OpenCL profiling events; waits for that forward to finish). */
LF_API lf_status lf_attention_last_time_ms(lf_attention *layer, double *ms);

/* Where the last forward's device time went: one entry per stage ("gemm qkv",
 * "seq_project", "attention_tiled", "softmax_rows", "gemm out", ...), in
 * the order the stages first ran, with the summed time of its commands (each
 * from the end of the command before it to its own end). Fills
 * at most `capacity` entries and sets *count to the number of stages. */
typedef struct {
    const char *stage; /* a constant string */
    double ms;
    unsigned commands;
    double flops; /* the arithmetic its commands do: 2 m n k a GEMM, the scores and P V of attention */
    double bytes; /* the least their commands read and write: each operand once */
} lf_stage_time;
LF_API lf_status lf_attention_last_profile(lf_attention *layer, lf_stage_time *stages, size_t capacity,
                                           size_t *count);

/* Device bytes held now: weights (projections included), and the workspace
 * that forwards have grown to (it grows to the largest batch x n seen). */
LF_API lf_status lf_attention_device_bytes(const lf_attention *layer, size_t *weights,
                                           size_t *workspace);

/*
 * Loads one attention layer from a safetensors file in the state-dict names of
 * lucidrains' LinformerSelfAttention (to_q.weight, to_k.weight, to_v.weight,
 * proj_k, proj_v, to_out.weight, to_out.bias). heads: 0 = from the file's
 * __metadata__ ("heads"), else given; a given count that contradicts the file
 * is LF_ERR_ARGUMENT naming both. mode: the attention mode to run.
 * share_kv is inferred from a missing to_v, one_kv_head from to_k's rows, k and
 * max_seq_len from proj_k [max_seq_len, k]. f16, bf16 and f64 tensors are
 * converted. Unknown tensors are an error that names them.
 */
LF_API lf_status lf_attention_load(lf_context *ctx, const char *path, int heads,
                                   lf_mode mode, lf_attention **out);

/* What lf_attention_load_with may change of a file's layer. */
typedef struct {
    int heads;        /* 0 = from __metadata__ "heads" */
    lf_mode mode;     /* LF_MODE_LINFORMER by default */
    int causal;       /* -1 = from __metadata__ "causal" ("0" or "1"; absent = 0), else 0 or 1 */
    lf_proj_kind projection; /* LF_PROJ_LEARNED = the file's proj_k, proj_v; LF_PROJ_MEAN_POOL,
                                LF_PROJ_MAX_POOL or LF_PROJ_RANDOM replace them (pooling lets a
                                layer run causally; random ones measure other k) */
    int k;            /* 0 = the file's k; another k needs a projection other than LF_PROJ_LEARNED */
    uint64_t seed;    /* of LF_PROJ_RANDOM */
} lf_load_options;

LF_API void lf_load_options_init(lf_load_options *opts); /* heads 0, Linformer, causal -1, learned, k 0 */
/* lf_attention_load with options; opts NULL = the defaults. A given option that
 * contradicts the file's __metadata__ is LF_ERR_ARGUMENT naming both. */
LF_API lf_status lf_attention_load_with(lf_context *ctx, const char *path, const lf_load_options *opts,
                                        lf_attention **out);

/* ---- Tensor files ------------------------------------------------------- */
/*
 * Reads a safetensors file (8-byte little-endian header length, a JSON header,
 * then the data) into host arrays: the files lf_attention_load reads, and the
 * inputs and outputs of `linformer run`. lf_tensor_file_open reads the whole
 * file and checks every header field (dtypes, shapes, offsets inside the data,
 * no overlaps, no repeated names) before returning, so a handle always holds a
 * valid file. Shapes are row-major as stored; a scalar has ndim 0 and count 1.
 *
 * A handle is not changed by reads except for its last-error message: several
 * threads may read one handle, and a message is then read right after the
 * failing call (as with a context).
 */
typedef struct lf_tensor_file lf_tensor_file;

typedef enum {
    LF_DTYPE_F32 = 0,
    LF_DTYPE_F16,
    LF_DTYPE_BF16,
    LF_DTYPE_F64,
    LF_DTYPE_I32,
    LF_DTYPE_I64
} lf_dtype;

#define LF_TENSOR_MAX_DIMS 8

typedef struct {
    const char *name; /* owned by the file, valid until lf_tensor_file_free */
    lf_dtype dtype;   /* as stored */
    int ndim;         /* 0 to LF_TENSOR_MAX_DIMS */
    int64_t shape[LF_TENSOR_MAX_DIMS]; /* the first ndim entries are used */
    size_t count;     /* elements: the product of shape (0 when a dimension is 0) */
} lf_tensor_info;

/*
 * Opens `path`. On failure *out is NULL and errbuf (may be NULL) holds a
 * message that starts with the path: LF_ERR_IO when it cannot be read or is not
 * a regular file (a FIFO or device is refused, never waited on), LF_ERR_FORMAT
 * when it is not a valid safetensors file (a PyTorch checkpoint is recognised
 * and the message says how to convert it), LF_ERR_OUT_OF_MEMORY.
 */
LF_API lf_status lf_tensor_file_open(const char *path, lf_tensor_file **out, char *errbuf,
                                     size_t errbuf_size);
LF_API void lf_tensor_file_free(lf_tensor_file *file);

/* The message of the last failure on this file; "" when none. Never NULL. */
LF_API const char *lf_tensor_file_last_error(const lf_tensor_file *file);

/* The number of tensors (0 for NULL). Tensors are indexed 0..count-1 in name order. */
LF_API size_t lf_tensor_file_count(const lf_tensor_file *file);

/* Describes tensor `index`; LF_ERR_ARGUMENT when index >= count. */
LF_API lf_status lf_tensor_file_info(lf_tensor_file *file, size_t index,
                                     lf_tensor_info *info);

/* Describes the tensor called `name`; LF_ERR_FORMAT when the file has none
 * (info is then zeroed), so an optional tensor is tested with == LF_OK. */
LF_API lf_status lf_tensor_file_find(lf_tensor_file *file, const char *name,
                                     lf_tensor_info *info);

/*
 * Copies tensor `name` into out, converted to float; `count` must equal the
 * tensor's element count (LF_ERR_ARGUMENT naming both otherwise). F32, F16, BF16
 * and F64 are converted (F64 rounds to nearest); an integer tensor gives
 * LF_ERR_FORMAT. out may be NULL when count is 0.
 */
LF_API lf_status lf_tensor_file_read_f32(lf_tensor_file *file, const char *name, float *out,
                                         size_t count);

/* The same for integers: I32 and I64 tensors into int64_t; a float tensor gives
 * LF_ERR_FORMAT. */
LF_API lf_status lf_tensor_file_read_i64(lf_tensor_file *file, const char *name, int64_t *out,
                                         size_t count);

/* The value of `key` in the file's __metadata__ (string to string), NULL when
 * absent. Owned by the file. */
LF_API const char *lf_tensor_file_metadata(const lf_tensor_file *file, const char *key);

/* "F32", "F16", "BF16", "F64", "I32", "I64"; "unknown" for another value. */
LF_API const char *lf_dtype_name(lf_dtype dtype);

LF_API const char *lf_mode_name(lf_mode mode); /* "linformer", "dense", "flash" */
/* Parses "linformer", "dense" or "flash"; LF_ERR_ARGUMENT otherwise. */
LF_API lf_status lf_mode_parse(const char *name, lf_mode *mode);

/* ---- Models: stacks of encoder layers ----------------------------------- */
/*
 * A model is a stack of encoder layers, each attention then a feed-forward
 * network (Linear, activation, Linear), with residuals and LayerNorm before
 * (pre-norm) or after (post-norm) each; optionally token and positional
 * embeddings in front and a Linear to vocabulary logits behind. Every layer
 * has its own attention config (k, sharing and biases may differ by layer);
 * all layers share one workspace, so device memory does not grow with depth
 * beyond the weights, and the activations stay on the device from the input
 * to the output.
 */
typedef enum {
    LF_MODEL_ENCODER = 1,   /* x f32 [batch, n, d_model] -> y f32 [batch, n, d_model] */
    LF_MODEL_TOKEN_ENCODER, /* tokens i64 [batch, n] -> y f32 [batch, n, d_model] (fairseq's sentence encoder) */
    LF_MODEL_LM             /* tokens i64 [batch, n] -> logits f32 [batch, n, vocab] (lucidrains' LinformerLM) */
} lf_model_kind;

typedef enum {
    LF_NORM_PRE = 1, /* x += attn(LN(x)); x += ffn(LN(x)) (lucidrains) */
    LF_NORM_POST     /* x = LN(x + attn(x)); x = LN(x + ffn(x)) (fairseq) */
} lf_norm;

typedef enum {
    LF_ACT_GELU = 1,  /* x Phi(x), the erf form (PyTorch's nn.GELU) */
    LF_ACT_GELU_TANH, /* the tanh approximation (fairseq's gelu_accurate) */
    LF_ACT_RELU
} lf_activation;

/* What lf_model_load takes from the caller; 0 and NULL fields come from the
 * file (its __metadata__ and shapes). A field that contradicts the file's
 * __metadata__ is an error naming both values. */
typedef struct {
    int heads;               /* 0 = __metadata__ "heads" */
    lf_activation activation; /* 0 = __metadata__ "activation", else GELU (erf) */
    lf_norm norm;            /* 0 = __metadata__ "norm", else the layout's own */
    const char *prefix;      /* tensors under this prefix only, e.g. "model."; NULL = found from the names */
} lf_model_options;

typedef struct {
    lf_model_kind kind;
    const char *layout; /* "lucidrains" or "fairseq": a constant string */
    int layers, d_model, heads, d_ff; /* d_ff: the feed-forward's hidden width (after GLU) */
    int vocab;          /* 0 unless tokens come in */
    int max_seq_len;    /* n may be at most this */
    lf_norm norm;
    lf_activation activation;
    int glu;            /* the gated feed-forward: act(a) * g */
    int layerwise;      /* one projection E = F for every layer */
} lf_model_info;

typedef struct lf_model lf_model;

/*
 * Loads a model from a safetensors file in the state-dict names of
 * lucidrains' Linformer (net.layers.{i}.{0,1}.{norm,fn}.*, or with
 * reversible=True net.blocks.{i}.{f,g}.net.{norm,fn}.*: two streams x1 = x2 =
 * x, x1 += attention(x2), x2 += feed-forward(x1), y = x1 + x2) or LinformerLM
 * (token_emb, pos_emb, linformer.net.layers..., to_logits), or of fairseq's
 * Linformer encoder (layers.{i}.self_attn.{q,k,v,out}_proj, compress_k,
 * compress_v, or one compress_layer for all layers, self_attn_layer_norm,
 * fc1, fc2, final_layer_norm; embed_tokens, embed_positions,
 * layernorm_embedding and layer_norm where present). A fairseq token encoder
 * at "X.sentence_encoder." whose file also holds the masked-LM head
 * "X.lm_head." (dense, layer_norm, bias, and weight or, tied, embed_tokens)
 * is an LF_MODEL_LM: logits = LN(act(y Wd^T + bd)) W^T + b, with the model's
 * activation; without "X.lm_head.dense.weight" the head is not read and the
 * model gives y. opts may be NULL.
 * An unrecognised layout is LF_ERR_FORMAT, naming what was found and what
 * was expected. Per-layer k comes from each layer's projection shapes.
 * __metadata__ "causal" is read as lf_attention_load reads it: "0" or absent
 * loads; "1" is LF_ERR_UNSUPPORTED (the layers' learned E, F mix every
 * position, see causal attention above); another value is LF_ERR_FORMAT.
 */
LF_API lf_status lf_model_load(lf_context *ctx, const char *path, const lf_model_options *opts,
                               lf_model **out);
/*
 * Where lf_model_load and lf_attention_load find each weight in a state
 * dict, for hosts that hold one in memory and hand its tensors to the
 * shaped setters (the Python package's from_torch): the loaders' own table.
 * layout: "lucidrains-attention" (LinformerSelfAttention), "lucidrains"
 * (Linformer), "lucidrains-lm" (LinformerLM), "lucidrains-reversible",
 * "lucidrains-reversible-lm", "fairseq" (the Linformer encoder). part
 * LF_LAYOUT_LAYER: a layer's tensors, named after the layer's prefix
 * ("net.layers.{i}." for lucidrains, "layers.{i}." for fairseq, "" for one
 * attention layer); LF_LAYOUT_MODEL: the model's own, after its stem. Fills
 * at most `capacity` entries of `out` (out may be NULL when capacity is 0)
 * and sets *count to the number the part has. An unknown layout or part is
 * LF_ERR_ARGUMENT, with a message in errbuf (may be NULL) naming it.
 */
typedef enum { LF_LAYOUT_LAYER, LF_LAYOUT_MODEL } lf_layout_part;

typedef struct {
    const char *weight; /* the name the shaped setters take ("wq", "tok"): a constant string */
    char name[128];     /* its state-dict name after the prefix ("0.fn.to_q.weight") */
    int ndim;           /* 1 or 2 */
    int required;       /* the loaders refuse a file without it */
    int transposed;     /* stored as the weight's transpose (lucidrains' proj_k is E^T) */
} lf_layout_tensor;

LF_API lf_status lf_layout_tensors(const char *layout, lf_layout_part part, lf_layout_tensor *out,
                                   size_t capacity, size_t *count, char *errbuf, size_t errbuf_size);

/* A model built from host arrays: its shape and options. */
typedef struct {
    lf_model_kind kind;
    int layers, d_model, d_ff; /* d_ff: the feed-forward's hidden width (after GLU) */
    int vocab;                 /* token kinds: embedding rows; LF_MODEL_LM: logits too */
    lf_norm norm;
    lf_activation activation;
    int glu;                   /* "w1" has 2 d_ff rows [a | g]: act(a) * g */
    int bias_ff1, bias_ff2;    /* "b1", "b2" exist */
    int positions;             /* rows of "pos" (0 = no positional embedding) */
    int pos_offset;            /* the row of position 0 in "pos" (fairseq: padding_idx + 1) */
    float embed_scale;         /* token embeddings are multiplied by it */
    float eps;                 /* of every LayerNorm */
    int emb_norm, final_norm;  /* a LayerNorm after the embeddings, after the last layer */
    int head_bias;             /* LF_MODEL_LM: "head_b" exists */
} lf_model_config;

/* Defaults: pre-norm, GELU, no GLU, both feed-forward biases, no positional
 * embedding, scale 1, eps 1e-5, no extra norms, a head bias. */
LF_API void lf_model_config_init(lf_model_config *cfg, lf_model_kind kind, int layers, int d_model, int d_ff,
                                 int vocab);

/*
 * Creates a model from a config and one attention config per layer
 * (layers[i].d_model must be cfg->d_model; their projections learned; with
 * LF_SHARE_LAYERWISE every layer shares the model's "shared_e" and all have
 * the same k and max_seq_len). Weights are then set with lf_model_set_weight;
 * a forward refuses a model with a weight never set.
 */
LF_API lf_status lf_model_create(lf_context *ctx, const lf_model_config *cfg, const lf_attention_config *layers,
                                 lf_model **out);

/*
 * Sets one weight from `count` host floats (D = d_model, F = d_ff, R = F or
 * 2F with GLU, V = vocab, P = positions):
 *   layer i in [0, layers): the attention's names of lf_attention_set_weight
 *     ("wq" ... "e", "f"), and "ln1_g", "ln1_b" [D] (the LayerNorm before
 *     attention, pre-norm, or after it, post-norm), "ln2_g", "ln2_b" [D] (the
 *     same around the feed-forward), "w1" [R, D], "b1" [R], "w2" [D, F], "b2" [D];
 *   layer -1, the model's: "tok" [V, D], "pos" [P, D], "emb_ln_g", "emb_ln_b",
 *     "final_ln_g", "final_ln_b" [D], "head_w" [V, D], "head_b" [V],
 *     "shared_e" [k, max_seq_len] (the layerwise projection E = F); a fairseq
 *     LM head loaded from a file also has "head_dense_w" [D, D] and
 *     "head_dense_b", "head_ln_g", "head_ln_b" [D].
 */
LF_API lf_status lf_model_set_weight(lf_model *model, int layer, const char *name, const float *data,
                                     size_t count);
/* The same with the array's shape, which must equal the weight's exactly (the
 * shapes above; an attention weight's as for lf_attention_set_weight_shaped). */
LF_API lf_status lf_model_set_weight_shaped(lf_model *model, int layer, const char *name, const size_t *dims,
                                            size_t ndims, const float *data);
LF_API void lf_model_free(lf_model *model);
LF_API lf_status lf_model_info_get(const lf_model *model, lf_model_info *info);

/*
 * Runs the model. LF_MODEL_ENCODER takes x [batch, n, d_model] (tokens NULL);
 * the others take tokens [batch, n] (x NULL), each id in [0, vocab).
 * y: [batch, n, d_model], or [batch, n, vocab] for LF_MODEL_LM.
 * lengths: NULL or [batch], 0 <= lengths[b] <= n, as for lf_attention_forward:
 * every layer sees sequence b's first lengths[b] rows only, its rows past
 * that are 0 in y, and tokens there are not read. One upload (x or tokens, and
 * lengths) and one download per forward. Blocks until y is written.
 */
LF_API lf_status lf_model_forward(lf_model *model, const float *x, const int64_t *tokens, float *y,
                                  int batch, int n, const int32_t *lengths);

/* The same on device buffers of this context: `in` holds x (f32) or tokens
 * (i64) as the kind says, y the output, apart from each other as for
 * lf_attention_forward_cl; queued, returns without waiting (tokens are read
 * back first to check their ids). */
LF_API lf_status lf_model_forward_cl(lf_model *model, cl_mem in, cl_mem y, int batch, int n,
                                     const int32_t *lengths);

/*
 * For measuring one layer of a model (`linformer rank`):
 * lf_model_layer_input: out [batch, n, d_model] = what layer `layer` (0 to
 *   layers - 1) reads in the forward: the input of its q/k/v projections,
 *   LN1(x) for a pre-norm model, the residual stream x for a post-norm one.
 *   The layers before it run as in lf_model_forward, which then stops. x,
 *   tokens, batch, n and lengths as for lf_model_forward; rows past a length
 *   are 0. One upload and one download.
 * lf_model_layer_attention: that layer as an attention layer of its own, its
 *   weights copied on the device (free it with lf_attention_free; it holds
 *   the context, not the model). opts (NULL = the defaults) as for
 *   lf_attention_load_with, the layer taking the file's place: heads 0 or the
 *   layer's, causal -1 or the layer's; mode dense or flash for the exact
 *   attention of the same q, k, v and output weights; Linformer with
 *   LF_PROJ_LEARNED and k 0 keeps the layer's own E and F (a model's one
 *   layerwise E = F becomes the layer's own, LF_SHARE_KV); LF_PROJ_RANDOM
 *   (from seed), LF_PROJ_MEAN_POOL or LF_PROJ_MAX_POOL replace them, at k
 *   (0 = the layer's). A layer outside [0, layers) or an option out of range
 *   is LF_ERR_ARGUMENT; a model with a weight never set, LF_ERR_STATE.
 */
LF_API lf_status lf_model_layer_input(lf_model *model, int layer, const float *x, const int64_t *tokens, float *out,
                                      int batch, int n, const int32_t *lengths);
LF_API lf_status lf_model_layer_attention(lf_model *model, int layer, const lf_load_options *opts,
                                          lf_attention **out);

/* Device bytes held now: weights of every layer, embeddings and head included,
 * and the workspace (activations and the layers' shared scratch). */
LF_API lf_status lf_model_device_bytes(const lf_model *model, size_t *weights, size_t *workspace);

/* Where the last forward's device time went, as lf_attention_last_profile
 * ("gemm qkv", "attention_tiled", "layernorm", "gemm ffn1", "bias_act", ...,
 * summed over layers). */
LF_API lf_status lf_model_last_profile(lf_model *model, lf_stage_time *stages, size_t capacity,
                                       size_t *count);
LF_API lf_status lf_model_last_time_ms(lf_model *model, double *ms);

LF_API const char *lf_model_kind_name(lf_model_kind kind);  /* "encoder", "token encoder", "language model" */
LF_API const char *lf_activation_name(lf_activation act);   /* "gelu", "gelu_tanh", "relu" */
LF_API const char *lf_norm_name(lf_norm norm);              /* "pre", "post" */
/* Parse those names (and "gelu_accurate", "gelu_fast" for the tanh form);
 * LF_ERR_ARGUMENT otherwise. */
LF_API lf_status lf_activation_parse(const char *name, lf_activation *act);
LF_API lf_status lf_norm_parse(const char *name, lf_norm *norm);

#ifdef __cplusplus
}
#endif
#endif /* LINFORMER_H */
