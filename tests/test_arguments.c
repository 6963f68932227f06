/*
 * test_arguments.c - every public function of linformer.h with each invalid
 * argument it can get: the documented status comes back, the context's
 * last-error message names the argument, nothing is written through `out`, and
 * the same context then runs a good forward that matches the reference.
 * Also: every file kept in tests/fuzz/regressions/ (and the loader's seeds)
 * loads or fails cleanly.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"
#include "layer_case.h"
#include "safetensors.h"

#define TOL 1e-5
#define BOGUS ((void *)(uintptr_t)1) /* what *out holds before a call that must clear it */

static lf_context *ctx;
static void setup(void) { ctx = lf_test_context(); }
static void teardown(void) { lf_context_free(ctx); }
TestSuite(arguments, .init = setup, .fini = teardown, .timeout = 600);

static void clear_error(lf_context *c) { c->error[0] = 0; }

/* `call` returns `status` and the message of ctx names `word`. */
#define EXPECT_FAIL(status, word, call)                                                                    \
    do {                                                                                                   \
        clear_error(ctx);                                                                                  \
        lf_status st_ = (call);                                                                            \
        cr_expect_eq(st_, (status), "%s: expected %s, got %s (%s)", #call, lf_status_string(status),       \
                     lf_status_string(st_), lf_context_last_error(ctx));                                   \
        cr_expect_neq(strstr(lf_context_last_error(ctx), (word)), NULL,                                    \
                      "%s: the message \"%s\" does not name \"%s\"", #call, lf_context_last_error(ctx), (word)); \
    } while (0)

/* Calls without a context to hold a message: only the status is checked. */
#define EXPECT_STATUS(status, call)                                                                        \
    do {                                                                                                   \
        lf_status st_ = (call);                                                                            \
        cr_expect_eq(st_, (status), "%s: expected %s, got %s", #call, lf_status_string(status),           \
                     lf_status_string(st_));                                                               \
    } while (0)

static lf_attention_config config(lf_mode mode)
{
    lf_attention_config c;
    lf_attention_config_init(&c, 32, 2, 40, 8);
    c.mode = mode;
    return c;
}

/* After the failures, the same context still computes correctly in every mode. */
static void good_forward(void)
{
    static const int32_t lens[] = {17, 5};
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_case c = {config((lf_mode)m), 2, 17, lens};
        double e = lf_case_run(ctx, &c);
        cr_expect_leq(e, TOL, "good forward after bad arguments, mode %s: relative error %.3g",
                      lf_mode_name((lf_mode)m), e);
    }
}

static lf_attention *make_layer(const lf_attention_config *c, bool set_weights)
{
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, c, NULL, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    if (set_weights) cr_assert_eq(lf_attention_init_random(layer, lf_test_seed()), LF_OK);
    return layer;
}

Test(arguments, names_and_versions)
{
    cr_expect_eq(lf_version_number(), LF_VERSION_NUMBER);
    cr_expect_str_eq(lf_version_string(), LF_VERSION_STRING);
    cr_expect_str_eq(lf_status_string((lf_status)-1), "LF_ERR_UNKNOWN_STATUS");
    cr_expect_str_eq(lf_status_string((lf_status)1000), "LF_ERR_UNKNOWN_STATUS");
    cr_expect_str_eq(lf_cl_error_string(12345), "CL_UNKNOWN_ERROR");
    cr_expect_str_eq(lf_cl_error_string(INT_MIN), "CL_UNKNOWN_ERROR");
    cr_expect_str_eq(lf_mode_name((lf_mode)-1), "unknown");
    cr_expect_str_eq(lf_mode_name((lf_mode)3), "unknown");
    lf_mode mode = LF_MODE_FLASH;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_mode_parse(NULL, &mode));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_mode_parse("linformer", NULL));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_mode_parse("Dense", &mode));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_mode_parse("", &mode));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_mode_parse("flash ", &mode));
    cr_expect_eq(mode, LF_MODE_FLASH, "a failed parse wrote the mode");
    lf_attention_config_init(NULL, 1, 1, 1, 1); /* must not crash */
    good_forward();
}

Test(arguments, devices)
{
    char msg[512];
    size_t count = 0, index = 77;
    lf_device_info one;
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_devices_list(&one, 1, NULL, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "count"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_devices_list(NULL, 3, &count, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "out"), NULL, "%s", msg);
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_devices_list(NULL, 3, &count, NULL, 0)); /* errbuf may be NULL */
    EXPECT_STATUS(LF_OK, lf_devices_list(NULL, 0, &count, NULL, 0));
    cr_assert_gt(count, 0);

    lf_device_info *devs = calloc(count, sizeof *devs);
    cr_assert_eq(lf_devices_list(devs, count, &count, NULL, 0), LF_OK);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_devices_select("cpu", devs, count, NULL, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "index"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_devices_select("cpu", NULL, count, &index, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "devices"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_NO_DEVICE, lf_devices_select("no-such-device-xyz", devs, count, &index, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "no-such-device-xyz"), NULL, "%s", msg);
    EXPECT_STATUS(LF_ERR_NO_DEVICE, lf_devices_select("99:0", devs, count, &index, NULL, 0));
    EXPECT_STATUS(LF_ERR_NO_DEVICE, lf_devices_select("", devs, 0, &index, NULL, 0));
    char longsel[5000];
    memset(longsel, 'a', sizeof longsel - 1);
    longsel[sizeof longsel - 1] = 0;
    lf_status st = lf_devices_select(longsel, devs, count, &index, msg, sizeof msg);
    cr_expect(st == LF_ERR_ARGUMENT || st == LF_ERR_NO_DEVICE, "long selector: %s", lf_status_string(st));
    cr_expect_eq(index, 77, "a failed selection wrote the index");
    free(devs);
    good_forward();
}

Test(arguments, context)
{
    char msg[512] = "";
    lf_context *other = BOGUS;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_create(NULL, NULL, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "out"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_NO_DEVICE, lf_context_create("no-such-device-xyz", &other, msg, sizeof msg));
    cr_expect_null(other);
    cr_expect_neq(strstr(msg, "no-such-device-xyz"), NULL, "%s", msg);

    other = BOGUS;
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_create_from_cl(NULL, lf_context_cl_queue(ctx), &other, msg, sizeof msg));
    cr_expect_null(other);
    cr_expect_neq(strstr(msg, "context"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_create_from_cl(lf_context_cl_context(ctx), NULL, &other, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "queue"), NULL, "%s", msg);
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_create_from_cl(lf_context_cl_context(ctx), lf_context_cl_queue(ctx),
                                                             NULL, msg, sizeof msg));
    cr_expect_neq(strstr(msg, "out"), NULL, "%s", msg);
    /* the queue of another context */
    lf_context *second = lf_test_context();
    msg[0] = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_create_from_cl(lf_context_cl_context(ctx), lf_context_cl_queue(second),
                                                             &other, msg, sizeof msg));
    cr_expect_null(other);
    cr_expect_neq(strstr(msg, "queue"), NULL, "%s", msg);
    lf_context_free(second);

    lf_context_free(NULL);
    cr_expect_not_null(lf_context_last_error(NULL));
    cr_expect_str_eq(lf_context_last_error(ctx), "", "a fresh context has an empty message");
    lf_device_info info;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_device_info(NULL, &info));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_device_info(ctx, NULL));
    cr_expect_null(lf_context_cl_context(NULL));
    cr_expect_null(lf_context_cl_queue(NULL));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_context_finish(NULL));
    EXPECT_STATUS(LF_OK, lf_context_finish(ctx));
    good_forward();
}

Test(arguments, projection)
{
    lf_projection *p = BOGUS;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_projection_create(NULL, 4, 8, LF_PROJ_LEARNED, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "out", lf_projection_create(ctx, 4, 8, LF_PROJ_LEARNED, 0, NULL));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "k", lf_projection_create(ctx, 0, 8, LF_PROJ_LEARNED, 0, &p));
    cr_expect_null(p, "*out is not NULL after a failure");
    EXPECT_FAIL(LF_ERR_ARGUMENT, "k", lf_projection_create(ctx, -3, 8, LF_PROJ_LEARNED, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "max_seq_len", lf_projection_create(ctx, 4, 0, LF_PROJ_LEARNED, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "max_seq_len", lf_projection_create(ctx, 4, INT_MIN, LF_PROJ_LEARNED, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "LF_PROJ_LEARNED", lf_projection_create(ctx, 4, 8, LF_PROJ_MEAN_POOL, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "LF_PROJ_LEARNED", lf_projection_create(ctx, 4, 8, LF_PROJ_CONV, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "LF_PROJ_LEARNED", lf_projection_create(ctx, 4, 8, (lf_proj_kind)77, 0, &p));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "too large", lf_projection_create(ctx, INT_MAX, INT_MAX, LF_PROJ_LEARNED, 0, &p));
    /* fits the overflow guard but not the device */
    EXPECT_FAIL(LF_ERR_OUT_OF_MEMORY, "projection", lf_projection_create(ctx, 1 << 20, 1 << 20, LF_PROJ_RANDOM, 0, &p));
    cr_expect_null(p);

    cr_assert_eq(lf_projection_create(ctx, 4, 8, LF_PROJ_LEARNED, 0, &p), LF_OK);
    float e[32] = {0};
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_projection_set(NULL, e, 32));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "data", lf_projection_set(p, NULL, 32));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "32", lf_projection_set(p, e, 31));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "32", lf_projection_set(p, e, 33));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "32", lf_projection_set(p, e, SIZE_MAX));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "32", lf_projection_set(p, e, 0));

    /* An unset shared projection makes forwards of its layers LF_ERR_STATE. */
    lf_attention_config c;
    lf_attention_config_init(&c, 16, 2, 8, 4);
    c.sharing = LF_SHARE_LAYERWISE;
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &c, p, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    cr_assert_eq(lf_attention_init_random(layer, 5), LF_OK);
    float x[16 * 8], y[16 * 8];
    memset(x, 0, sizeof x);
    EXPECT_FAIL(LF_ERR_STATE, "shared projection", lf_attention_forward(layer, x, y, 1, 8, NULL));
    lf_projection_free(p); /* the layer keeps it alive */
    lf_attention_free(layer);
    lf_projection_free(NULL);
    good_forward();
}

/* lf_attention_create refuses cfg and says which field. */
static void expect_create_fails(const lf_attention_config *c, lf_projection *shared, lf_status status, const char *word)
{
    lf_attention *layer = BOGUS;
    clear_error(ctx);
    lf_status st = lf_attention_create(ctx, c, shared, &layer);
    cr_expect_eq(st, status, "create (%s): expected %s, got %s (%s)", word, lf_status_string(status),
                 lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_null(layer, "create (%s): *out is not NULL after a failure", word);
    cr_expect_neq(strstr(lf_context_last_error(ctx), word), NULL, "create: the message \"%s\" does not name \"%s\"",
                  lf_context_last_error(ctx), word);
    if (st == LF_OK) lf_attention_free(layer);
}

Test(arguments, attention_create)
{
    lf_attention *layer = BOGUS;
    lf_attention_config good = config(LF_MODE_LINFORMER), c;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_create(NULL, &good, NULL, &layer));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "out", lf_attention_create(ctx, &good, NULL, NULL));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "cfg", lf_attention_create(ctx, NULL, NULL, &layer));
    cr_expect_null(layer);

#define BAD(field, value, status, word)                                  \
    do {                                                                 \
        c = good;                                                        \
        c.field = value;                                                 \
        expect_create_fails(&c, NULL, status, word);                     \
    } while (0)
    BAD(d_model, 0, LF_ERR_ARGUMENT, "d_model");
    BAD(d_model, -32, LF_ERR_ARGUMENT, "d_model");
    BAD(d_model, 33, LF_ERR_ARGUMENT, "divisible"); /* 33 % 2 heads */
    BAD(d_model, INT_MAX, LF_ERR_ARGUMENT, "d_model");
    BAD(heads, 0, LF_ERR_ARGUMENT, "heads");
    BAD(heads, -1, LF_ERR_ARGUMENT, "heads");
    BAD(heads, 3, LF_ERR_ARGUMENT, "divisible");
    BAD(d_head, -4, LF_ERR_ARGUMENT, "d_head");
    BAD(d_head, INT_MAX, LF_ERR_ARGUMENT, "d_head");
    BAD(kv_heads, 3, LF_ERR_ARGUMENT, "kv_heads");
    BAD(kv_heads, -1, LF_ERR_ARGUMENT, "kv_heads");
    BAD(max_seq_len, 0, LF_ERR_ARGUMENT, "max_seq_len");
    BAD(max_seq_len, -5, LF_ERR_ARGUMENT, "max_seq_len");
    BAD(max_seq_len, INT_MAX, LF_ERR_ARGUMENT, "max_seq_len");
    BAD(k, 0, LF_ERR_ARGUMENT, "k must be positive");
    BAD(k, -8, LF_ERR_ARGUMENT, "k must be positive");
    BAD(mode, (lf_mode)3, LF_ERR_ARGUMENT, "mode");
    BAD(mode, (lf_mode)-1, LF_ERR_ARGUMENT, "mode");
    BAD(path, (lf_path)7, LF_ERR_ARGUMENT, "path");
    BAD(sharing, (lf_sharing)9, LF_ERR_ARGUMENT, "sharing");
    BAD(proj_kind, (lf_proj_kind)-2, LF_ERR_ARGUMENT, "proj_kind");
    BAD(position, (lf_position)2, LF_ERR_ARGUMENT, "position");
    BAD(scale, -1.0f, LF_ERR_ARGUMENT, "scale");
    BAD(scale, NAN, LF_ERR_ARGUMENT, "scale");
    BAD(scale, INFINITY, LF_ERR_ARGUMENT, "scale");
#undef BAD
    c = good;
    c.position = LF_POSITION_INPUT;
    c.sharing = LF_SHARE_NONE;
    expect_create_fails(&c, NULL, LF_ERR_ARGUMENT, "sharing");
    /* k x max_seq_len past the guard, each within its own */
    c = good;
    c.max_seq_len = 1 << 24;
    c.k = 1 << 20;
    expect_create_fails(&c, NULL, LF_ERR_ARGUMENT, "too large");
    /* flash keeps a d_head row in private memory: at most 256 */
    c = config(LF_MODE_FLASH);
    c.heads = 1;
    c.d_model = 512;
    expect_create_fails(&c, NULL, LF_ERR_UNSUPPORTED, "d_head");

    /* the shared projection: missing, unwanted, wrong shape, wrong kind, another context */
    lf_projection *p = NULL, *q = NULL;
    cr_assert_eq(lf_projection_create(ctx, good.k, good.max_seq_len, LF_PROJ_RANDOM, 3, &p), LF_OK);
    c = good;
    c.sharing = LF_SHARE_LAYERWISE;
    expect_create_fails(&c, NULL, LF_ERR_ARGUMENT, "shared");
    c.proj_kind = LF_PROJ_MEAN_POOL;
    expect_create_fails(&c, p, LF_ERR_ARGUMENT, "LF_SHARE_LAYERWISE");
    c = good;
    expect_create_fails(&c, p, LF_ERR_ARGUMENT, "shared");
    for (int m = LF_MODE_DENSE; m <= LF_MODE_FLASH; m++) {
        c = config((lf_mode)m);
        expect_create_fails(&c, p, LF_ERR_ARGUMENT, "shared");
    }
    c = good;
    c.sharing = LF_SHARE_LAYERWISE;
    c.k = good.k + 1;
    expect_create_fails(&c, p, LF_ERR_ARGUMENT, "shared");
    lf_context *second = lf_test_context();
    cr_assert_eq(lf_projection_create(second, good.k, good.max_seq_len, LF_PROJ_RANDOM, 3, &q), LF_OK);
    c = good;
    c.sharing = LF_SHARE_LAYERWISE;
    expect_create_fails(&c, q, LF_ERR_ARGUMENT, "another context");
    lf_projection_free(q);
    lf_context_free(second);
    lf_projection_free(p);

    lf_attention_free(NULL);
    lf_attention_config got;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_config_get(NULL, &got));
    layer = make_layer(&good, false);
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_config_get(layer, NULL));
    size_t w = 0, ws = 0;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_device_bytes(NULL, &w, &ws));
    EXPECT_STATUS(LF_OK, lf_attention_device_bytes(layer, NULL, NULL)); /* both outputs optional */
    lf_attention_free(layer);
    good_forward();
}

Test(arguments, set_weight)
{
    lf_attention_config c = config(LF_MODE_LINFORMER);
    c.share_kv = 1;
    c.sharing = LF_SHARE_KV;
    lf_attention *layer = make_layer(&c, false);
    const size_t wq = 32 * 32;
    float *buf = calloc(wq + 1, sizeof *buf);
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_set_weight(NULL, "wq", buf, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "name", lf_attention_set_weight(layer, NULL, buf, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"wz\"", lf_attention_set_weight(layer, "wz", buf, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"\"", lf_attention_set_weight(layer, "", buf, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"WQ\"", lf_attention_set_weight(layer, "WQ", buf, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"wv\"", lf_attention_set_weight(layer, "wv", buf, wq)); /* share_kv */
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"bv\"", lf_attention_set_weight(layer, "bv", buf, 32));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"f\"", lf_attention_set_weight(layer, "f", buf, 8 * 40)); /* LF_SHARE_KV */
    EXPECT_FAIL(LF_ERR_ARGUMENT, "data", lf_attention_set_weight(layer, "wq", NULL, wq));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"wq\"", lf_attention_set_weight(layer, "wq", buf, wq - 1));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"wq\"", lf_attention_set_weight(layer, "wq", buf, wq + 1));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"wq\"", lf_attention_set_weight(layer, "wq", buf, 0));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"e\"", lf_attention_set_weight(layer, "e", buf, SIZE_MAX));
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_init_random(NULL, 1));
    lf_attention_free(layer);

    /* weights that are not learned cannot be set */
    c = config(LF_MODE_LINFORMER);
    c.proj_kind = LF_PROJ_RANDOM;
    layer = make_layer(&c, false);
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"e\"", lf_attention_set_weight(layer, "e", buf, 8 * 40));
    c.bias_q = 0;
    lf_attention_free(layer);
    layer = make_layer(&c, false);
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"bq\"", lf_attention_set_weight(layer, "bq", buf, 32));
    lf_attention_free(layer);
    c = config(LF_MODE_DENSE);
    layer = make_layer(&c, false);
    EXPECT_FAIL(LF_ERR_ARGUMENT, "\"e\"", lf_attention_set_weight(layer, "e", buf, 8 * 40));
    lf_attention_free(layer);
    free(buf);
    good_forward();
}

Test(arguments, forward)
{
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_attention_config c = config((lf_mode)m);
        lf_attention *layer = make_layer(&c, false);
        const int n = 9, D = c.d_model;
        float *x = calloc((size_t)2 * c.max_seq_len * D, sizeof *x), *y = calloc((size_t)2 * c.max_seq_len * D, sizeof *y);
        uint64_t rng = lf_test_seed();
        lf_test_fill(x, (size_t)2 * c.max_seq_len * D, &rng, -1, 1);

        /* every weight unset, then all but one */
        EXPECT_FAIL(LF_ERR_STATE, "never set", lf_attention_forward(layer, x, y, 1, n, NULL));
        cr_assert_eq(lf_attention_init_random(layer, 9), LF_OK);
        lf_attention_free(layer);
        layer = make_layer(&c, false);
        float *wo = calloc((size_t)D * D, sizeof *wo);
        cr_assert_eq(lf_attention_set_weight(layer, "wo", wo, (size_t)D * D), LF_OK);
        free(wo);
        EXPECT_FAIL(LF_ERR_STATE, "never set", lf_attention_forward(layer, x, y, 1, n, NULL));
        cr_assert_eq(lf_attention_init_random(layer, 9), LF_OK);

        const int32_t neg[] = {n, -1}, over[] = {n + 1, n}, ok[] = {n, 0};
        EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_forward(NULL, x, y, 1, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "x", lf_attention_forward(layer, NULL, y, 1, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "y", lf_attention_forward(layer, x, NULL, 1, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "batch", lf_attention_forward(layer, x, y, 0, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "batch", lf_attention_forward(layer, x, y, -2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "batch", lf_attention_forward(layer, x, y, INT_MAX, c.max_seq_len, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "n must", lf_attention_forward(layer, x, y, 1, 0, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "n must", lf_attention_forward(layer, x, y, 1, INT_MIN, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "max_seq_len", lf_attention_forward(layer, x, y, 1, c.max_seq_len + 1, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "max_seq_len", lf_attention_forward(layer, x, y, 1, INT_MAX, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "lengths[1]", lf_attention_forward(layer, x, y, 2, n, neg));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "lengths[0]", lf_attention_forward(layer, x, y, 2, n, over));

        /* device buffers: NULL, too small, of another context, the same for x and y */
        cl_int err;
        const size_t bytes = (size_t)2 * n * D * sizeof(float);
        cl_mem bx = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
        cl_mem by = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
        cl_mem small = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes - 4, NULL, &err);
        lf_context *second = lf_test_context();
        cl_mem foreign = clCreateBuffer(lf_context_cl_context(second), CL_MEM_READ_WRITE, bytes, NULL, &err);
        cr_assert(bx && by && small && foreign);
        EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_forward_cl(NULL, bx, by, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "x is NULL", lf_attention_forward_cl(layer, NULL, by, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "y is NULL", lf_attention_forward_cl(layer, bx, NULL, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "x holds", lf_attention_forward_cl(layer, small, by, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "y holds", lf_attention_forward_cl(layer, bx, small, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "another", lf_attention_forward_cl(layer, foreign, by, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "another", lf_attention_forward_cl(layer, bx, foreign, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "overlap", lf_attention_forward_cl(layer, bx, bx, 2, n, NULL));
        /* sub-buffers of one buffer: overlapping ones refused, apart ones run */
        cl_device_id dev;
        cl_uint align_bits = 0;
        cr_assert_eq(clGetCommandQueueInfo(lf_context_cl_queue(ctx), CL_QUEUE_DEVICE, sizeof dev, &dev, NULL), 0);
        cr_assert_eq(clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL), 0);
        const size_t align = align_bits / 8, apart = (bytes + align - 1) / align * align;
        cl_mem whole = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_WRITE, 2 * apart, NULL, &err);
        cl_buffer_region regions[3] = {{0, bytes}, {align, bytes}, {apart, bytes}};
        cl_mem sub[3];
        for (int i = 0; i < 3; i++) {
            sub[i] = clCreateSubBuffer(whole, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &regions[i], &err);
            cr_assert_eq(err, CL_SUCCESS, "sub-buffer %d", i);
        }
        EXPECT_FAIL(LF_ERR_ARGUMENT, "overlap", lf_attention_forward_cl(layer, sub[0], sub[1], 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "overlap", lf_attention_forward_cl(layer, sub[1], sub[0], 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "overlap", lf_attention_forward_cl(layer, whole, sub[2], 2, n, NULL));
        EXPECT_STATUS(LF_OK, lf_attention_forward_cl(layer, sub[0], sub[2], 2, n, ok));
        for (int i = 0; i < 3; i++) clReleaseMemObject(sub[i]);
        clReleaseMemObject(whole);
        /* an output the device may not write, an input it may not read */
        cl_mem ro = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_READ_ONLY, bytes, NULL, &err);
        cl_mem wr = clCreateBuffer(lf_context_cl_context(ctx), CL_MEM_WRITE_ONLY, bytes, NULL, &err);
        EXPECT_FAIL(LF_ERR_ARGUMENT, "y is CL_MEM_READ_ONLY", lf_attention_forward_cl(layer, bx, ro, 2, n, NULL));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "x is CL_MEM_WRITE_ONLY", lf_attention_forward_cl(layer, wr, by, 2, n, NULL));
        clReleaseMemObject(ro), clReleaseMemObject(wr);
        EXPECT_FAIL(LF_ERR_ARGUMENT, "lengths[1]", lf_attention_forward_cl(layer, bx, by, 2, n, neg));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "max_seq_len", lf_attention_forward_cl(layer, bx, by, 1, c.max_seq_len + 1, NULL));
        EXPECT_STATUS(LF_OK, lf_attention_forward_cl(layer, bx, by, 2, n, ok));
        EXPECT_STATUS(LF_OK, lf_context_finish(ctx));
        clReleaseMemObject(bx), clReleaseMemObject(by), clReleaseMemObject(small), clReleaseMemObject(foreign);
        lf_context_free(second);

        double ms = -1;
        EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_last_time_ms(NULL, &ms));
        EXPECT_FAIL(LF_ERR_ARGUMENT, "ms", lf_attention_last_time_ms(layer, NULL));
        lf_attention *fresh = make_layer(&c, true);
        EXPECT_FAIL(LF_ERR_STATE, "no forward", lf_attention_last_time_ms(fresh, &ms));
        lf_attention_free(fresh);
        EXPECT_STATUS(LF_OK, lf_attention_last_time_ms(layer, &ms));
        cr_expect_geq(ms, 0.0);
        free(x), free(y);
        lf_attention_free(layer);
    }
    good_forward();
}

Test(arguments, load)
{
    lf_attention *layer = BOGUS;
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus_loader/valid_headwise.safetensors", LF_SOURCE_DIR);
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_load(NULL, path, 0, LF_MODE_LINFORMER, &layer));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "out", lf_attention_load(ctx, path, 0, LF_MODE_LINFORMER, NULL));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "path", lf_attention_load(ctx, NULL, 0, LF_MODE_LINFORMER, &layer));
    cr_expect_null(layer);
    EXPECT_FAIL(LF_ERR_ARGUMENT, "heads", lf_attention_load(ctx, path, -1, LF_MODE_LINFORMER, &layer));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "mode", lf_attention_load(ctx, path, 0, (lf_mode)5, &layer));
    /* a head count that contradicts the file's __metadata__ (2) is refused, naming both */
    EXPECT_FAIL(LF_ERR_ARGUMENT, "heads 3 was given", lf_attention_load(ctx, path, 3, LF_MODE_LINFORMER, &layer));
    EXPECT_FAIL(LF_ERR_ARGUMENT, "says 2", lf_attention_load(ctx, path, 3, LF_MODE_LINFORMER, &layer));
    EXPECT_FAIL(LF_ERR_IO, "/nonexistent/x.safetensors",
                lf_attention_load(ctx, "/nonexistent/x.safetensors", 0, LF_MODE_LINFORMER, &layer));
    lf_status st = lf_attention_load(ctx, LF_SOURCE_DIR, 0, LF_MODE_LINFORMER, &layer); /* a folder */
    cr_expect(st == LF_ERR_IO || st == LF_ERR_FORMAT, "a folder: %s", lf_status_string(st));
    char empty[] = "/tmp/lf_args_empty_XXXXXX";
    int fd = mkstemp(empty);
    cr_assert_geq(fd, 0);
    close(fd);
    EXPECT_FAIL(LF_ERR_FORMAT, empty, lf_attention_load(ctx, empty, 0, LF_MODE_LINFORMER, &layer));
    unlink(empty);
    cr_expect_null(layer);
    EXPECT_STATUS(LF_OK, lf_attention_load(ctx, path, 0, LF_MODE_LINFORMER, &layer));
    lf_attention_free(layer);
    /* __metadata__ "heads" "+2" (strtol would read 2) is refused; the header's padding keeps its length */
    FILE *in = fopen(path, "rb");
    cr_assert_not_null(in);
    static char bytes[1 << 16];
    const size_t size = fread(bytes, 1, sizeof bytes, in);
    fclose(in);
    const size_t header_end = 8 + ((unsigned char)bytes[0] | (unsigned char)bytes[1] << 8); /* under 64 KiB */
    char *heads = strstr(bytes + 8, "\"heads\":\"2\"");
    cr_assert(heads && bytes[header_end - 1] == ' ');
    memmove(heads + 10, heads + 9, (size_t)(bytes + header_end - 1 - (heads + 9))); /* over a space of padding */
    heads[9] = '+';
    char plus[] = "/tmp/lf_args_plus_XXXXXX";
    fd = mkstemp(plus);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, bytes, size), (ssize_t)size);
    close(fd);
    EXPECT_FAIL(LF_ERR_FORMAT, "__metadata__ \"heads\" is \"+2\"", lf_attention_load(ctx, plus, 0, LF_MODE_LINFORMER, &layer));
    unlink(plus);
    good_forward();
}

/* A failed load: one of the statuses a bad file may give, *out cleared, a message. */
static bool load_failed_cleanly(lf_status st, const void *out, const char *path)
{
    if (st == LF_OK) return false;
    cr_expect_null(out, "%s: *out set after failing", path);
    cr_expect(st == LF_ERR_FORMAT || st == LF_ERR_ARGUMENT || st == LF_ERR_OUT_OF_MEMORY || st == LF_ERR_UNSUPPORTED,
              "%s: unexpected %s (%s)", path, lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_neq(lf_context_last_error(ctx)[0], 0, "%s: failed without a message", path);
    return true;
}

/* A forward that ran wrote every element of y. */
static void expect_written(lf_status st, const float *y, size_t count, const char *path)
{
    cr_expect(st == LF_OK || st == LF_ERR_UNSUPPORTED, "%s: forward: %s", path, lf_context_last_error(ctx));
    if (st == LF_OK)
        for (size_t i = 0; i < count; i++) cr_expect_neq(y[i], LF_POISON, "%s: y[%zu] not written", path, i);
}

/* The file as an attention layer, in each mode: loads and runs, or fails cleanly. */
static void load_as_layer(const char *path)
{
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++) {
        lf_attention *layer = BOGUS;
        clear_error(ctx);
        lf_status st = lf_attention_load(ctx, path, 0, (lf_mode)m, &layer);
        if (load_failed_cleanly(st, layer, path)) continue;
        lf_attention_config c;
        cr_assert_eq(lf_attention_config_get(layer, &c), LF_OK);
        const int n = c.max_seq_len < 5 ? c.max_seq_len : 5;
        float *x = calloc((size_t)n * c.d_model, sizeof *x), *y = malloc((size_t)n * c.d_model * sizeof *y);
        uint64_t rng = lf_test_seed();
        lf_test_fill(x, (size_t)n * c.d_model, &rng, -1, 1);
        lf_test_poison(y, (size_t)n * c.d_model);
        expect_written(lf_attention_forward(layer, x, y, 1, n, NULL), y, (size_t)n * c.d_model, path);
        free(x), free(y);
        lf_attention_free(layer);
    }
}

/* The file as a whole model: loads and runs one short sequence (true), or
 * fails cleanly (false). */
static bool load_as_model(const char *path)
{
    lf_model *model = BOGUS;
    clear_error(ctx);
    lf_status st = lf_model_load(ctx, path, NULL, &model);
    if (load_failed_cleanly(st, model, path)) return false;
    lf_model_info info;
    cr_assert_eq(lf_model_info_get(model, &info), LF_OK);
    const int n = info.max_seq_len < 5 ? info.max_seq_len : 5;
    const size_t width = (size_t)(info.kind == LF_MODEL_LM ? info.vocab : info.d_model);
    float *x = malloc((size_t)n * info.d_model * sizeof *x), *y = malloc((size_t)n * width * sizeof *y);
    int64_t tokens[5];
    uint64_t rng = lf_test_seed();
    lf_test_fill(x, (size_t)n * info.d_model, &rng, -1, 1);
    for (int i = 0; i < n; i++) tokens[i] = info.vocab ? (int64_t)(lf__rand_next(&rng) % (uint64_t)info.vocab) : 0;
    lf_test_poison(y, (size_t)n * width);
    const bool token_input = info.kind != LF_MODEL_ENCODER;
    st = lf_model_forward(model, token_input ? NULL : x, token_input ? tokens : NULL, y, 1, n, NULL);
    expect_written(st, y, (size_t)n * width, path);
    free(x), free(y);
    lf_model_free(model);
    return true;
}

/* Every input the fuzzers found a problem with stays in tests/fuzz/regressions/;
 * it and the seeds must load (and run) or fail with a message, never crash,
 * as a layer and as a whole model. */
static void load_folder(const char *sub, int *files, int *models)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", LF_SOURCE_DIR, sub);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".md")) continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        (*files)++;
        lf_st_file f;
        char msg[512];
        if (lf_st_open(path, &f, msg, sizeof msg) == LF_OK) lf_st_close(&f);
        load_as_layer(path);
        *models += load_as_model(path);
    }
    closedir(d);
}

Test(arguments, fuzz_regressions_and_seeds_load_or_fail_cleanly)
{
    int files = 0, models = 0;
    load_folder("regressions", &files, &models);
    load_folder("corpus_loader", &files, &models);
    load_folder("corpus_safetensors", &files, &models);
    load_folder("corpus_model", &files, &models);
    cr_expect_gt(files, 10, "only %d files found", files);
    cr_expect_geq(models, 5, "only %d files loaded as models", models);
    good_forward();
}

/* With a NULL context there is nowhere to write a message, but *out is still cleared. */
Test(arguments, out_is_cleared_without_a_context)
{
    lf_attention_config c;
    lf_attention_config_init(&c, 16, 2, 32, 4);
    lf_attention *layer = BOGUS;
    lf_projection *proj = BOGUS;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_create(NULL, &c, NULL, &layer));
    cr_expect_null(layer, "lf_attention_create left *out as it was");
    layer = BOGUS;
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_attention_load(NULL, "x.safetensors", 0, LF_MODE_LINFORMER, &layer));
    cr_expect_null(layer, "lf_attention_load left *out as it was");
    EXPECT_STATUS(LF_ERR_ARGUMENT, lf_projection_create(NULL, 4, 32, LF_PROJ_LEARNED, 0, &proj));
    cr_expect_null(proj, "lf_projection_create left *out as it was");
}

/* Layers and projections hold their context: freeing the context first is
 * allowed, and they keep working until they are freed themselves. */
Test(arguments, context_freed_before_its_layers)
{
    lf_context *own = lf_test_context();
    lf_projection *proj = NULL;
    cr_assert_eq(lf_projection_create(own, 4, 32, LF_PROJ_RANDOM, 7, &proj), LF_OK, "%s", lf_context_last_error(own));
    lf_attention_config c;
    lf_attention_config_init(&c, 16, 2, 32, 4);
    c.sharing = LF_SHARE_LAYERWISE;
    c.proj_kind = LF_PROJ_RANDOM;
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(own, &c, proj, &layer), LF_OK, "%s", lf_context_last_error(own));
    cr_assert_eq(lf_attention_init_random(layer, 1), LF_OK);
    lf_context_free(own);
    lf_projection_free(proj); /* the layer still holds it */
    float x[3 * 16], y[3 * 16];
    uint64_t rng = lf_test_seed();
    lf_test_fill(x, 3 * 16, &rng, -1, 1);
    lf_test_poison(y, 3 * 16);
    cr_expect_eq(lf_attention_forward(layer, x, y, 1, 3, NULL), LF_OK);
    for (int i = 0; i < 3 * 16; i++) cr_expect(isfinite(y[i]) && y[i] != LF_POISON, "y[%d] = %g", i, y[i]);
    lf_attention_free(layer); /* the last holder: context and projection go now */
}

Test(arguments, load_options)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/data/pytorch/causal_dense.model.safetensors", LF_SOURCE_DIR);
    lf_load_options o;
    lf_load_options_init(&o);
    lf_attention *layer = BOGUS;
    o.causal = 0; /* the file says 1 */
    EXPECT_FAIL(LF_ERR_ARGUMENT, "causal 0 was given", lf_attention_load_with(ctx, path, &o, &layer));
    cr_expect_null(layer);
    o.causal = 2;
    EXPECT_FAIL(LF_ERR_ARGUMENT, "causal", lf_attention_load_with(ctx, path, &o, &layer));
    lf_load_options_init(&o);
    o.projection = LF_PROJ_CONV;
    EXPECT_FAIL(LF_ERR_ARGUMENT, "projection", lf_attention_load_with(ctx, path, &o, &layer));
    o.projection = LF_PROJ_LEARNED; /* causal with the file's learned E: refused, saying why */
    EXPECT_FAIL(LF_ERR_UNSUPPORTED, "local support", lf_attention_load_with(ctx, path, &o, &layer));
    o.projection = LF_PROJ_MEAN_POOL; /* the same k and max_seq_len, pooled: runs causally */
    cr_expect_eq(lf_attention_load_with(ctx, path, &o, &layer), LF_OK, "%s", lf_context_last_error(ctx));
    lf_attention_config c;
    cr_assert_eq(lf_attention_config_get(layer, &c), LF_OK);
    cr_expect(c.causal == 1 && c.proj_kind == LF_PROJ_MEAN_POOL && c.k == 8 && c.max_seq_len == 40,
              "causal %d kind %d k %d max_seq_len %d", c.causal, (int)c.proj_kind, c.k, c.max_seq_len);
    lf_attention_free(layer);
    good_forward();
}
