/*
 * runtime.h - the runtime module (host/runtime/), what every other module
 * builds on and the public header hides: the context, error reporting,
 * devices, buffers, timelines, kernels and random numbers.
 */
#ifndef LF_RUNTIME_H
#define LF_RUNTIME_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120 /* the library uses OpenCL 1.2 only */
#endif
#include "linformer.h"

#define LF_MSG_SIZE 4096

typedef struct lf_program_entry lf_program_entry;

/* Where GEMMs run (blas/gemm.c), a field of the context: CLBlast on the
 * device, or the host's BLAS. */
typedef enum { LF_GEMM_CLBLAST, LF_GEMM_HOST } lf_gemm_backend;
/* The host backend's BLAS library (blas/blas.h). */
typedef struct lf_host_blas lf_host_blas;

struct lf_context {
    cl_platform_id platform;
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;
    bool profiling;          /* the queue records profiling events */
    lf_gemm_backend gemm;    /* chosen at creation (LINFORMER_GEMM) */
    const lf_host_blas *host_blas; /* with the host backend (LINFORMER_HOST_BLAS) */
    bool own;                /* cl and queue were opened here, not handed in by the host */
    lf_device_info info;
    lf_program_entry *programs; /* built programs of this context, by source and options */
    unsigned cache_hits, cache_misses, cache_rejected; /* disk cache counters, for tests */
    struct lf_tuned *tuned;  /* CLBlast's sets per GEMM class (blas/tune_space.h); NULL: CLBlast's own */
    unsigned tune_applied;   /* sets applied before this context's GEMMs (blas/tune_use.c), for tests */
    struct lf_gemm_record *gemm_record; /* where lf__gemm notes each GEMM's shape (blas.h); NULL: nowhere */
    char *cache_dir;         /* lf_context_set_cache_dir's folder; NULL: the environment's */
    pthread_mutex_t lock;    /* serialises calls on this context (see the header) */
    atomic_int refs;         /* the owner's, and one per live layer or projection */
    unsigned forks;          /* lf__fork_count() at creation: another count means a forked child holds it */
    char error[LF_MSG_SIZE]; /* last-error message */
};

/* ---- Errors (error.c) ---- */
/* Records a printf-style message on ctx (may be NULL) and returns status. */
lf_status lf__fail(lf_context *ctx, lf_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same into a caller's buffer (may be NULL). */
lf_status lf__fail_buf(char *buf, size_t size, lf_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps a failed OpenCL call to a status, naming `what` and the CL error. */
lf_status lf__cl_fail(lf_context *ctx, cl_int err, const char *what);
#define LF_CL_CHECK(ctx, call, what)                                       \
    do {                                                                   \
        cl_int lf_err_ = (call);                                           \
        if (lf_err_ != CL_SUCCESS) return lf__cl_fail((ctx), lf_err_, (what)); \
    } while (0)
#define LF_TRY(expr)                         \
    do {                                     \
        lf_status lf_st_ = (expr);           \
        if (lf_st_ != LF_OK) return lf_st_;  \
    } while (0)

/* ---- Lifetime (context.c): layers and projections hold their context ---- */
/* lf_context_create and lf_context_create_from_cl without the GEMM backend,
 * which blas/backend.c adds. */
lf_status lf__context_open(const char *selector, lf_context **out, char *errbuf, size_t errbuf_size);
lf_status lf__context_wrap(cl_context context, cl_command_queue queue, lf_context **out, char *errbuf,
                           size_t errbuf_size);
void lf__context_retain(lf_context *ctx);
void lf__context_release(lf_context *ctx); /* frees it with the last reference */
/* Takes the context's lock for a call on it or its objects: LF_ERR_STATE,
 * unlocked, when ctx is a parent's that this process inherited through fork()
 * (lf__fork_check; its lock may be held by a thread the child does not have)
 * or when the process is exiting (lf__exit_enter). */
lf_status lf__context_lock(lf_context *ctx);
void lf__context_unlock(lf_context *ctx);
/* Whether ctx is a parent's, inherited through fork(): its objects' frees
 * then touch neither OpenCL nor the lock, and free nothing. */
bool lf__context_inherited(const lf_context *ctx);
/* CLBlast 1.5 fills its caches (compiled programs, its device database)
 * without locks of its own, and contexts on different threads share them:
 * every call into CLBlast, from any context, holds this process-wide lock.
 * It is recursive: the tuner holds it across a whole search, so that no other
 * context's GEMM runs with a set being tried (CLBlast keeps parameters per
 * device for the whole process). */
void lf__clblast_lock(void);
void lf__clblast_unlock(void);
/* CLBlastClearCache under that lock: drops every compiled CLBlast program, so
 * that the next GEMM builds the parameters in force and no freed cl_context
 * stays held. */
void lf__clblast_clear_cache(void);

/* ---- fork() (fork.c) ---- */
/* Called before the library's first OpenCL call of a process (listing
 * devices, wrapping a host's queue): from then on a forked child knows that
 * OpenCL had started in its parent. */
void lf__fork_opencl_starts(void);
/* Listing the platforms and devices and opening a device hold this lock,
 * which fork() takes first (fork.c): one thread at a time opens OpenCL, and
 * no child is made in the middle. */
void lf__opening_lock(void);
void lf__opening_unlock(void);
/* The fork()s counted in this process since the library was loaded. */
unsigned lf__fork_count(void);
/* LF_ERR_STATE, the message in errbuf, in a process forked after OpenCL had
 * started in its parent: no context may be created there. */
lf_status lf__fork_check_new(char *errbuf, size_t errbuf_size);
/* LF_ERR_STATE, the message on ctx, when ctx was created before the fork()
 * that made this process. */
lf_status lf__fork_check(lf_context *ctx);

/* ---- exit() (exit.c) ---- */
/* A call on a context begins: counted, so that exit() waits for it (at
 * most 10 s) before the OpenCL runtimes are torn down; LF_ERR_STATE, not
 * counted, once exit() has begun. lf__exit_leave ends it. */
lf_status lf__exit_enter(lf_context *ctx);
void lf__exit_leave(void);

/* ---- Devices (device.c) ---- */
/* lf_devices_list's listing, its arguments valid, under the opening lock. */
lf_status lf__devices_list_held(lf_device_info *out, size_t capacity, size_t *count, char *errbuf, size_t errbuf_size);
/* Fills info from an OpenCL device; indices are set by the caller. */
void lf__device_query(cl_platform_id platform, cl_device_id device, lf_device_info *info);

/* ---- Buffers (buffers.c) ---- */
/* Allocates a device buffer of `bytes`, checked against the device's limits;
 * `what` names it in the message. */
lf_status lf__alloc(lf_context *ctx, size_t bytes, const char *what, cl_mem *out);
lf_status lf__upload(lf_context *ctx, cl_mem dst, size_t offset, const void *src, size_t bytes);
lf_status lf__download(lf_context *ctx, cl_mem src, size_t offset, void *dst, size_t bytes);
void lf__release(cl_mem *mem);
/* A caller's cl_mem: not NULL, valid, of this context and of at least `need`
 * bytes; `what` names it in the message. */
lf_status lf__check_buffer(lf_context *ctx, cl_mem buf, size_t need, const char *what);
/* A forward's input and output: each as lf__check_buffer, the input readable,
 * the output writable, and the two apart (the same buffer, or sub-buffers of
 * one whose bytes overlap, would be read while written). */
lf_status lf__check_io_buffers(lf_context *ctx, cl_mem in, size_t in_bytes, const char *in_name, cl_mem out,
                               size_t out_bytes, const char *out_name);
/* Grows *mem to hold at least `bytes` (contents are not kept). */
lf_status lf__reserve(lf_context *ctx, cl_mem *mem, size_t *capacity, size_t bytes,
                      const char *what);

/* ---- Host memory of CPU devices (host_memory.c) ---- */
/* LF_ERR_OUT_OF_MEMORY naming the sizes when `bytes` more of host memory is
 * over what RLIMIT_AS leaves (less the driver's share) or the machine has. */
lf_status lf__host_memory_check(lf_context *ctx, size_t bytes, const char *what);
/* The soft RLIMIT_AS in bytes, 0 when unlimited. */
size_t lf__address_space_limit(void);

/* ---- Drivers that gave no platform (icd.c) ---- */
/* "; installed drivers that gave no platform: ..." (lf_devices_unloaded) in
 * buf, to end a message of a missing platform or device; "" when none. */
const char *lf__unloaded_note(char *buf, size_t size);

/* ---- Event tracking for timings (timeline.c) ---- */
/* A forward records the event of each command it enqueues, with the name of
 * its stage; lf__event() gives the slot the next enqueue fills and
 * lf__event_done() files it. The list grows with the forward (a deep model
 * queues thousands of commands); only if host memory runs out does the last
 * slot keep the newest, so the total stays right while the per-stage split is
 * lost. lf__timeline_reset() releases the events and the list. */
typedef struct {
    cl_event event;
    const char *name; /* a stage name, or NULL for a marker */
    double flops, bytes;
} lf_step;
typedef struct {
    lf_step *steps;
    int count, capacity;
    bool overflow;
    cl_event pending;
    double pending_flops, pending_bytes;
} lf_timeline;
cl_event *lf__event(lf_timeline *t);
/* The work of the command that the next lf__event_done files, for the
 * profile's rates (lf_stage_time); a command without it counts none. */
void lf__event_work(lf_timeline *t, double flops, double bytes);
void lf__event_done(lf_timeline *t, const char *name);
void lf__timeline_reset(lf_timeline *t);
lf_status lf__timeline_ms(lf_context *ctx, lf_timeline *t, double *ms);
lf_status lf__timeline_stages(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity,
                              size_t *count);
/* The public last-time and last-profile reads of a layer or a model: the
 * caller's arguments checked, the timeline read under the context's lock. */
lf_status lf__last_time_ms(lf_context *ctx, lf_timeline *t, double *ms);
lf_status lf__last_profile(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity, size_t *count);

/* ---- Kernels (program.c) ---- */
/* Returns a kernel of `file` (a cl/ source) built with `options`; built once
 * per context, cached on disk. The kernel belongs to the context. */
lf_status lf__kernel(lf_context *ctx, const char *file, const char *options,
                     const char *name, cl_kernel *out);
/* The same, for a kernel whose work-group is `per` work-items for each unit
 * of the build option `macro` (the attention kernel's TQ queries of DS
 * work-items each; 1 elsewhere): tries want, want/2, ... until the built
 * kernel allows a group of that size times per, its local memory at that
 * size fits the device's and, on a CPU, the group's private arrays
 * (item_bytes a work-item, as the caller counts them) stay within a worker
 * thread's stack; *size gets it. Every launcher of a kernel with local memory
 * or sized groups sizes them here; the others let the runtime choose. */
lf_status lf__kernel_sized(lf_context *ctx, const char *file, const char *options, const char *name,
                           const char *macro, size_t want, size_t per, size_t item_bytes, cl_kernel *out,
                           size_t *size);
/* The first size lf__kernel_sized tries: the largest power of two up to
 * want whose group (times per) a device of that limit allows; and the
 * options of a sized kernel at size s: its own, then -DMACRO=s. */
size_t lf__group_start(size_t want, size_t per, size_t max_work_group_size);
void lf__sized_options(const char *options, const char *macro, size_t s, char *out, size_t size);
/* Calls fn with the file and options of each program built on ctx, newest first. */
void lf__programs_each(lf_context *ctx, void (*fn)(void *user, const char *file, const char *options), void *user);
void lf__programs_free(lf_context *ctx);
/* The options a kernel is built with: its own, after -cl-std=CL1.2 where the
 * device compiles OpenCL C 1.2 or later, so that the kernels keep to 1.2 (the
 * level of NVIDIA's OpenCL and of Oclgrind) on every device. They are part of
 * the disk cache's key. */
void lf__build_options(lf_context *ctx, const char *options, char *out, size_t size);
/* The same for a device whose CL_DEVICE_OPENCL_C_VERSION is c_version. */
void lf__build_options_for(const char *c_version, const char *options, char *out, size_t size);
/* A program's source as it is built: its file of cl/ (or LINFORMER_KERNEL_DIR),
 * after its prelude (*prelude, NULL when none) and a #line; *shift is the
 * number of lines before the file. *text is malloc'd, NUL-terminated. */
lf_status lf__kernel_text(const char *file, char **text, size_t *size, const char **prelude, size_t *shift,
                          char *msg, size_t msg_size);
/* Fails naming the first program built on ctx whose build log holds a
 * warning or an error (PoCL's and Oclgrind's logs of a clean build are empty;
 * Intel's always list the build's steps). */
lf_status lf__programs_check_logs(lf_context *ctx);

/* ---- Random numbers (random.c): splitmix64, reproducible everywhere ---- */
uint64_t lf__rand_next(uint64_t *state);
double lf__rand_uniform(uint64_t *state); /* [0, 1) */
double lf__rand_normal(uint64_t *state);  /* N(0, 1) */

#endif
