/* exit.c - the process's exit while other threads are in calls. exit()
 * tears down the OpenCL runtimes (their static objects, their threads)
 * under any thread still running a forward: Intel's CPU runtime then aborts
 * ("Pure virtual function called!") and PoCL may crash. A handler that
 * atexit() runs before those teardowns (it is registered after a context
 * opened, so after the runtime loaded) waits for the calls in progress, up to
 * LF_EXIT_WAIT_S, and refuses the calls that come after it. */
#include <time.h>

#include "runtime.h"

#define LF_EXIT_WAIT_S 10

static atomic_int calls;    /* calls on contexts in progress, between lf__exit_enter and lf__exit_leave */
static atomic_bool exiting; /* the process is in exit() */
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

static void wait_for_calls(void)
{
    atomic_store(&exiting, true);
    const struct timespec tick = {0, 1000000};
    for (int ms = 0; atomic_load(&calls) > 0 && ms < LF_EXIT_WAIT_S * 1000; ms++) nanosleep(&tick, NULL);
}

static void watch(void) { atexit(wait_for_calls); }

lf_status lf__exit_enter(lf_context *ctx)
{
    pthread_once(&watch_once, watch);
    atomic_fetch_add(&calls, 1); /* counted before the flag is read: the handler sees it, or it sees the flag */
    if (!atomic_load(&exiting)) return LF_OK;
    atomic_fetch_sub(&calls, 1);
    return lf__fail(ctx, LF_ERR_STATE, "the process is exiting: the OpenCL runtime is being torn down, so no call "
                                       "runs now (end the threads that use the library before the process exits)");
}

void lf__exit_leave(void) { atomic_fetch_sub(&calls, 1); }
