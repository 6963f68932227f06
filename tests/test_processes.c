/*
 * test_processes.c - the library in a process made by fork(), and in one that
 * exits (linformer.h, "Processes").
 *   - A child refuses, at once and with LF_ERR_STATE naming fork(), every use
 *     of the context, layer and model it inherited, even while the parent's
 *     lock was held at the fork (a forward in flight on another thread); the
 *     frees do nothing; the parent goes on, with the same bits as before.
 *   - A child of a process that had started OpenCL opens no context, on a
 *     device (the kept OpenCL context of a freed one included) or around the
 *     parent's queue, and still lists the devices.
 *   - A child of a process that had not started OpenCL runs a forward of its
 *     own, with the bits its parent then gets.
 *   - A process that exits while a thread of its runs forwards ends with
 *     exit()'s status (Intel's runtime aborted, PoCL's crashed, under them).
 *   - A child forked while another thread of its parent opens and frees
 *     contexts (the first listing of the platforms included) lists the
 *     devices, and opens a context or is refused naming fork(), at once (not
 *     under AddressSanitizer, whose allocator hangs such a child).
 * Each child has CHILD_SECONDS before SIGALRM ends it: a hang fails the test.
 * Criterion runs each test in a fresh process, so "had not started" holds.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "runtime.h"

#define CHILD_SECONDS 60

TestSuite(processes, .timeout = 600);

enum { D = 32, HEADS = 2, N = 23, K = 8, BATCH = 2 };

/* Runs fn in a forked child; its exit status (0: every check held, else the
 * number of the first that failed) is returned; a child ended by a signal
 * fails the test. */
static int in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork failed");
    if (pid == 0) {
        alarm(CHILD_SECONDS);
        _exit(fn(arg));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!WIFSIGNALED(status), "the child was ended by signal %d%s", WTERMSIG(status),
              WTERMSIG(status) == SIGALRM ? ", its alarm: it hung" : "");
    return WEXITSTATUS(status);
}

/* 0 when st is LF_ERR_STATE and msg names fork(); else `check`, with a note on stderr. */
static int refused(int check, lf_status st, const char *msg)
{
    if (st == LF_ERR_STATE && strstr(msg, "fork()")) return 0;
    fprintf(stderr, "check %d: %s: %s\n", check, lf_status_string(st), msg);
    return check;
}

typedef struct {
    lf_context *ctx;
    lf_attention *layer;
    lf_model *model;
    const float *x;
    float *y;
} inherited;

static int use_inherited(void *arg)
{
    const inherited *s = arg;
    lf_context *ctx = s->ctx;
    int bad = refused(1, lf_attention_forward(s->layer, s->x, s->y, BATCH, N, NULL), lf_context_last_error(ctx));
    if (!bad) {
        lf_model_info info;
        lf_model_info_get(s->model, &info);
        float *out = malloc((size_t)BATCH * N * info.d_model * sizeof *out);
        float *in = calloc((size_t)BATCH * N * info.d_model, sizeof *in);
        bad = refused(2, lf_model_forward(s->model, in, NULL, out, BATCH, N, NULL), lf_context_last_error(ctx));
        free(in), free(out);
    }
    float w[D * D] = {0};
    if (!bad) bad = refused(3, lf_attention_set_weight(s->layer, "wq", w, D * D), lf_context_last_error(ctx));
    if (!bad) bad = refused(4, lf_context_finish(ctx), lf_context_last_error(ctx));
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, D, HEADS, N, K);
    lf_attention *other = NULL;
    if (!bad) bad = refused(5, lf_attention_create(ctx, &cfg, NULL, &other), lf_context_last_error(ctx));
    size_t weights = 0;
    if (!bad) bad = refused(6, lf_attention_device_bytes(s->layer, &weights, NULL), lf_context_last_error(ctx));
    if (!bad && other) bad = 7;
    /* each free returns without touching OpenCL or the held lock */
    lf_attention_free(s->layer);
    lf_model_free(s->model);
    lf_context_free(ctx);
    return bad;
}

Test(processes, inherited_objects_are_refused_and_the_parent_goes_on)
{
    lf_context *ctx = lf_test_context();
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, D, HEADS, N, K);
    inherited s = {.ctx = ctx};
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &s.layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(s.layer, lf_test_seed()), LF_OK, "%s", lf_context_last_error(ctx));
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/models/encoder_short.model.safetensors", lf_test_source_dir());
    cr_assert_eq(lf_model_load(ctx, path, NULL, &s.model), LF_OK, "%s", lf_context_last_error(ctx));
    uint64_t rng = lf_test_seed();
    const size_t count = (size_t)BATCH * N * D;
    float *x = lf_test_random(count, &rng, -1.0f, 1.0f), *before = malloc(count * sizeof *before),
          *after = malloc(count * sizeof *after);
    s.x = x, s.y = after;
    cr_assert_eq(lf_attention_forward(s.layer, x, before, BATCH, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));

    /* As a forward on another thread would: the context's lock is held across the fork. */
    cr_assert_eq(lf__context_lock(ctx), LF_OK);
    const int bad = in_child(use_inherited, &s);
    lf__context_unlock(ctx);
    cr_expect_eq(bad, 0, "the child's check %d failed (see its stderr)", bad);

    lf_test_poison(after, count);
    cr_assert_eq(lf_attention_forward(s.layer, x, after, BATCH, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    cr_expect_eq(memcmp(before, after, count * sizeof *after), 0, "the parent's forward changed after the fork");
    free(x), free(before), free(after);
    lf_model_free(s.model);
    lf_attention_free(s.layer);
    lf_context_free(ctx);
}

static int open_in_child(void *arg)
{
    lf_context *parent = arg;
    char msg[1024] = "";
    lf_context *ctx = (lf_context *)1;
    int bad = refused(1, lf_context_create(NULL, &ctx, msg, sizeof msg), msg);
    if (!bad && ctx) bad = 2;
    msg[0] = '\0';
    ctx = (lf_context *)1;
    if (!bad)
        bad = refused(3, lf_context_create_from_cl(lf_context_cl_context(parent), lf_context_cl_queue(parent), &ctx, msg,
                                                   sizeof msg),
                      msg);
    if (!bad && ctx) bad = 4;
    size_t count = 0;
    if (!bad && (lf_devices_list(NULL, 0, &count, msg, sizeof msg) != LF_OK || count == 0)) bad = 5;
    return bad;
}

Test(processes, a_child_of_a_process_that_started_opencl_opens_no_context)
{
    lf_context *ctx = lf_test_context();
    lf_context_free(lf_test_context()); /* its OpenCL context is kept for the next: the child must not take it */
    const int bad = in_child(open_in_child, ctx);
    cr_expect_eq(bad, 0, "the child's check %d failed (see its stderr)", bad);
    lf_context_free(ctx);
}

/* Memory that a child's writes reach its parent through. */
static float *mmap_shared_floats(size_t count)
{
    void *p = mmap(NULL, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED, "mmap failed");
    return p;
}

typedef struct {
    uint64_t seed;
    const float *x;
    float *y;
} fresh;

/* A layer of its own on a context of its own: its forward into s->y. */
static lf_status forward_fresh(const fresh *s, char *msg, size_t size)
{
    lf_context *ctx = NULL;
    LF_TRY(lf_context_create(NULL, &ctx, msg, size));
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, D, HEADS, N, K);
    lf_attention *layer = NULL;
    lf_status st = lf_attention_create(ctx, &cfg, NULL, &layer);
    if (st == LF_OK) st = lf_attention_init_random(layer, s->seed);
    if (st == LF_OK) st = lf_attention_forward(layer, s->x, s->y, BATCH, N, NULL);
    if (st != LF_OK) snprintf(msg, size, "%s", lf_context_last_error(ctx));
    lf_attention_free(layer);
    lf_context_free(ctx);
    return st;
}

static int run_fresh(void *arg)
{
    const fresh *s = arg;
    char msg[1024] = "";
    const lf_status st = forward_fresh(s, msg, sizeof msg);
    if (st != LF_OK) fprintf(stderr, "forward in the child: %s: %s\n", lf_status_string(st), msg);
    return st == LF_OK ? 0 : 1;
}

Test(processes, a_child_of_a_process_that_had_not_started_opencl_runs_its_own_model)
{
    uint64_t rng = lf_test_seed();
    const size_t count = (size_t)BATCH * N * D;
    float *x = lf_test_random(count, &rng, -1.0f, 1.0f);
    float *shared = mmap_shared_floats(count);
    lf_test_poison(shared, count);
    fresh s = {lf_test_seed(), x, shared};
    const int bad = in_child(run_fresh, &s);
    cr_assert_eq(bad, 0, "the child's forward failed (see its stderr)");

    float *y = malloc(count * sizeof *y);
    s.y = y;
    char msg[1024] = "";
    cr_assert_eq(forward_fresh(&s, msg, sizeof msg), LF_OK, "%s", msg);
    cr_expect_eq(memcmp(y, shared, count * sizeof *y), 0, "the child's forward differs from the parent's");
    free(x), free(y);
    munmap(shared, count * sizeof *shared);
}

static lf_attention *looping;
static float *loop_x, *loop_y;
static atomic_bool looped;

static void *forward_forever(void *arg)
{
    (void)arg;
    for (;;) {
        lf_attention_forward(looping, loop_x, loop_y, BATCH, N, NULL);
        atomic_store(&looped, true);
    }
    return NULL;
}

/* Starts a thread of forwards and exits while it runs them; 0 unless the setup failed (exit()'s status). */
static int exit_during_forwards(void *arg)
{
    (void)arg;
    lf_context *ctx = NULL;
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, D, HEADS, N, K);
    if (lf_context_create(NULL, &ctx, NULL, 0) != LF_OK || lf_attention_create(ctx, &cfg, NULL, &looping) != LF_OK ||
        lf_attention_init_random(looping, 1) != LF_OK)
        return 1;
    loop_x = calloc((size_t)BATCH * N * D, sizeof(float));
    loop_y = calloc((size_t)BATCH * N * D, sizeof(float));
    pthread_t thread;
    if (pthread_create(&thread, NULL, forward_forever, NULL) != 0) return 2;
    while (!atomic_load(&looped)) sched_yield();
    exit(0); /* the thread is in a forward or about to enter one */
}

Test(processes, exit_while_a_thread_runs_forwards_ends_cleanly)
{
    for (int i = 0; i < 6; i++) { /* PoCL crashed at one exit in four */
        const int st = in_child(exit_during_forwards, NULL);
        cr_assert_eq(st, 0, "attempt %d: the child's setup failed (%d)", i, st);
    }
}

static atomic_bool opening_ends;

static void *open_and_free(void *arg)
{
    (void)arg;
    while (!atomic_load(&opening_ends)) {
        lf_context *ctx = NULL;
        if (lf_context_create(NULL, &ctx, NULL, 0) == LF_OK) lf_context_free(ctx);
    }
    return NULL;
}

/* A child forked before OpenCL started in its parent opens a context; one forked after is refused. */
static int list_and_open(void *arg)
{
    (void)arg;
    char msg[1024] = "";
    size_t count = 0;
    if (lf_devices_list(NULL, 0, &count, msg, sizeof msg) != LF_OK || count == 0) {
        fprintf(stderr, "check 1: listing in the child: %s\n", msg);
        return 1;
    }
    lf_context *ctx = NULL;
    const lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    if (st != LF_OK) return refused(2, st, msg);
    lf_context_free(ctx);
    return 0;
}

Test(processes, a_fork_while_another_thread_opens_contexts_leaves_a_child_that_answers)
{
    /* AddressSanitizer's allocator (GCC 12's, Clang 14's) takes no lock across
     * fork(): a fork while the other thread is inside malloc or free leaves the
     * child's allocator locked, and the child's first thread (PoCL's workers,
     * which the listing starts) waits on it forever. glibc's malloc is safe. */
    if (LF_TEST_UNDER_ASAN) cr_skip_test("AddressSanitizer's allocator does not survive a fork during a malloc");
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, open_and_free, NULL), 0);
    for (int i = 0; i < 40; i++) { /* the first forks land in the first listing of the platforms */
        const int bad = in_child(list_and_open, NULL);
        cr_assert_eq(bad, 0, "fork %d: the child's check %d failed (see its stderr)", i, bad);
    }
    atomic_store(&opening_ends, true);
    pthread_join(thread, NULL);
}
