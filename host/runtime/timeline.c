/* timeline.c - the events of a forward's commands, and the forward's time,
 * whole and by stage, read from them. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

cl_event *lf__event(lf_timeline *t) { return t ? &t->pending : NULL; }

void lf__event_work(lf_timeline *t, double flops, double bytes)
{
    if (t) t->pending_flops = flops, t->pending_bytes = bytes;
}

void lf__event_done(lf_timeline *t, const char *name)
{
    if (!t || !t->pending) return;
    if (t->count == t->capacity) {
        const int grown = t->capacity ? 2 * t->capacity : 64;
        lf_step *steps = realloc(t->steps, (size_t)grown * sizeof *steps);
        if (steps) {
            t->steps = steps;
            t->capacity = grown;
        } else if (t->count > 0) {
            clReleaseEvent(t->steps[--t->count].event);
            t->overflow = true;
        } else { /* nowhere to keep even one event */
            clReleaseEvent(t->pending);
            t->pending = NULL;
            t->overflow = true;
            return;
        }
    }
    t->steps[t->count++] = (lf_step){t->pending, name, t->pending_flops, t->pending_bytes};
    t->pending = NULL;
    t->pending_flops = t->pending_bytes = 0;
}

void lf__timeline_reset(lf_timeline *t)
{
    for (int i = 0; i < t->count; i++) clReleaseEvent(t->steps[i].event);
    if (t->pending) clReleaseEvent(t->pending);
    free(t->steps);
    *t = (lf_timeline){0};
}

/* Start and end of one command, in ns, once the whole timeline has finished. */
static lf_status step_times(lf_context *ctx, cl_event e, cl_ulong *start, cl_ulong *end)
{
    LF_CL_CHECK(ctx, clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof *start, start, NULL),
                "clGetEventProfilingInfo(CL_PROFILING_COMMAND_START)");
    LF_CL_CHECK(ctx, clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof *end, end, NULL),
                "clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)");
    return LF_OK;
}

static lf_status timeline_ready(lf_context *ctx, lf_timeline *t)
{
    if (t->count == 0) return lf__fail(ctx, LF_ERR_STATE, "no forward has run yet");
    if (!ctx->profiling)
        return lf__fail(ctx, LF_ERR_UNSUPPORTED, "the queue was created without CL_QUEUE_PROFILING_ENABLE");
    LF_CL_CHECK(ctx, clWaitForEvents(1, &t->steps[t->count - 1].event), "clWaitForEvents");
    return LF_OK;
}

lf_status lf__timeline_ms(lf_context *ctx, lf_timeline *t, double *ms)
{
    LF_TRY(timeline_ready(ctx, t));
    cl_ulong start = 0, end = 0, s, e;
    LF_TRY(step_times(ctx, t->steps[0].event, &start, &e));
    LF_TRY(step_times(ctx, t->steps[t->count - 1].event, &s, &end));
    *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
    return LF_OK;
}

lf_status lf__timeline_stages(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity,
                              size_t *count)
{
    LF_TRY(timeline_ready(ctx, t));
    if (t->overflow)
        return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY,
                        "host memory ran out while the last forward's commands were listed: only its total time is kept");
    /* The queue is in order, so a command's stage gets the time from the end of
     * the command before it to its own end: that counts the kernels CLBlast runs
     * before the one whose event it returns. Every stage is named in `names`,
     * those past `capacity` too, so *count is the real number of stages. */
    const char **names = malloc((size_t)t->count * sizeof *names);
    if (!names) return lf__fail(ctx, LF_ERR_OUT_OF_MEMORY, "out of host memory");
    size_t n = 0;
    cl_ulong s, e;
    lf_status st = step_times(ctx, t->steps[0].event, &s, &e);
    for (int i = 0; st == LF_OK && i < t->count; i++) {
        cl_ulong prev_end = e;
        st = step_times(ctx, t->steps[i].event, &s, &e);
        if (st != LF_OK || i == 0 || !t->steps[i].name) continue;
        s = prev_end;
        size_t j = 0;
        while (j < n && strcmp(names[j], t->steps[i].name) != 0) j++;
        if (j == n) {
            names[n++] = t->steps[i].name;
            if (j < capacity) stages[j] = (lf_stage_time){t->steps[i].name, 0.0, 0, 0.0, 0.0};
        }
        if (j < capacity) {
            stages[j].ms += e > s ? (double)(e - s) * 1e-6 : 0.0;
            stages[j].commands++;
            stages[j].flops += t->steps[i].flops;
            stages[j].bytes += t->steps[i].bytes;
        }
    }
    free(names);
    if (st == LF_OK) *count = n;
    return st;
}

lf_status lf__last_time_ms(lf_context *ctx, lf_timeline *t, double *ms)
{
    if (!ms) return lf__fail(ctx, LF_ERR_ARGUMENT, "ms is NULL");
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__timeline_ms(ctx, t, ms);
    lf__context_unlock(ctx);
    return st;
}

lf_status lf__last_profile(lf_context *ctx, lf_timeline *t, lf_stage_time *stages, size_t capacity, size_t *count)
{
    if (!count) return lf__fail(ctx, LF_ERR_ARGUMENT, "count is NULL");
    if (!stages && capacity) return lf__fail(ctx, LF_ERR_ARGUMENT, "stages is NULL but capacity is %zu", capacity);
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__timeline_stages(ctx, t, stages, capacity, count);
    lf__context_unlock(ctx);
    return st;
}
