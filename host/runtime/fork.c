/* fork.c - what a process made by fork() may still do. OpenCL state does
 * not survive fork(): the child has the parent's memory but none of its
 * threads, and a runtime's queue waits for threads that are gone (PoCL's
 * workers: the child's first clFinish never returns, on a new context as on
 * an inherited one, once the parent has listed PoCL's platform). The library
 * counts forks in each child (pthread_atfork, from the moment it is loaded)
 * and stamps every context with the count it was created under: a context
 * with another count is the parent's and is refused, and a process forked
 * after OpenCL had started in it (or in an ancestor) opens no context at all,
 * on any runtime, since none promises to work across fork().
 *
 * Opening OpenCL (listing the platforms and devices, creating a context and
 * its queue) holds the opening lock, and fork() takes it first: a fork on one
 * thread waits for another thread's opening to end, so that no child starts
 * inside the ICD loader's or a runtime's initialisation with their locks or
 * ours held by a thread it does not have (such a child hung on its first
 * listing). The handlers are registered when the library is loaded: one
 * registered by the first opening, on a thread racing a fork, missed it. */
#include "runtime.h"

static atomic_uint forks;          /* fork()s between the process that loaded the library and this one */
static atomic_bool opencl_started; /* the library has called into OpenCL here or in an ancestor */
static atomic_bool opencl_inherited; /* ... before the fork() that made this process */
static pthread_mutex_t opening = PTHREAD_MUTEX_INITIALIZER;

void lf__opening_lock(void) { pthread_mutex_lock(&opening); }
void lf__opening_unlock(void) { pthread_mutex_unlock(&opening); }

static void in_child(void)
{
    atomic_fetch_add(&forks, 1);
    if (atomic_load(&opencl_started)) atomic_store(&opencl_inherited, true);
    lf__opening_unlock(); /* taken by this thread before the fork */
}

__attribute__((constructor)) static void watch(void) { pthread_atfork(lf__opening_lock, lf__opening_unlock, in_child); }

void lf__fork_opencl_starts(void) { atomic_store(&opencl_started, true); }

unsigned lf__fork_count(void) { return atomic_load(&forks); }

lf_status lf__fork_check_new(char *errbuf, size_t errbuf_size)
{
    if (!atomic_load(&opencl_inherited)) return LF_OK;
    return lf__fail_buf(errbuf, errbuf_size, LF_ERR_STATE,
                        "this process was made by fork() after its parent had started OpenCL, whose state does "
                        "not survive fork() (PoCL's queues would wait forever): no context can be created here; "
                        "create contexts in a process started afresh (spawned: fork() then exec()), or fork "
                        "before the parent lists devices or creates a context");
}

lf_status lf__fork_check(lf_context *ctx)
{
    if (ctx->forks == lf__fork_count()) return LF_OK;
    return lf__fail(ctx, LF_ERR_STATE,
                    "this context, and every layer, projection and model on it, was created before the fork() "
                    "that made this process: OpenCL state does not survive fork(), so the parent's objects "
                    "cannot be used here (freeing them does nothing); load the model in a process started "
                    "afresh (spawned: fork() then exec())");
}
