/* test_status.c - status names, OpenCL error names, version, NULL-safe frees. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

Test(status, every_status_has_a_distinct_lf_name)
{
    const char *names[LF_ERR_UNSUPPORTED + 1];
    for (int s = LF_OK; s <= LF_ERR_UNSUPPORTED; s++) {
        const char *n = lf_status_string((lf_status)s);
        cr_assert_not_null(n, "status %d has no name", s);
        cr_expect_eq(strncmp(n, "LF_", 3), 0, "status %d is named \"%s\"", s, n);
        cr_expect_gt(strlen(n), 3, "status %d is named \"%s\"", s, n);
        for (int t = LF_OK; t < s; t++)
            cr_expect_str_neq(n, names[t], "statuses %d and %d share the name \"%s\"", t, s, n);
        names[s] = n;
    }
    cr_expect_str_eq(lf_status_string(LF_OK), "LF_OK");
    cr_expect_str_eq(lf_status_string(LF_ERR_ARGUMENT), "LF_ERR_ARGUMENT");
    cr_expect_str_eq(lf_status_string(LF_ERR_UNSUPPORTED), "LF_ERR_UNSUPPORTED");
}

Test(status, unknown_status_has_a_name)
{
    const int odd[] = {-1, LF_ERR_UNSUPPORTED + 1, 1000, 0x7fffffff};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const char *n = lf_status_string((lf_status)odd[i]);
        cr_assert_not_null(n, "status %d gives NULL", odd[i]);
        cr_expect_gt(strlen(n), 0, "status %d gives an empty name", odd[i]);
        for (int s = LF_OK; s <= LF_ERR_UNSUPPORTED; s++)
            cr_expect_str_neq(n, lf_status_string((lf_status)s),
                              "unknown status %d is named like status %d", odd[i], s);
    }
}

Test(status, opencl_error_names)
{
    cr_expect_str_eq(lf_cl_error_string(0), "CL_SUCCESS");
    cr_expect_str_eq(lf_cl_error_string(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
    cr_expect_str_eq(lf_cl_error_string(-5), "CL_OUT_OF_RESOURCES");
    cr_expect_str_eq(lf_cl_error_string(-6), "CL_OUT_OF_HOST_MEMORY");
    cr_expect_str_eq(lf_cl_error_string(-11), "CL_BUILD_PROGRAM_FAILURE");
    cr_expect_str_eq(lf_cl_error_string(-30), "CL_INVALID_VALUE");
    cr_expect_str_eq(lf_cl_error_string(-54), "CL_INVALID_WORK_GROUP_SIZE");
    cr_expect_str_eq(lf_cl_error_string(CL_INVALID_KERNEL_ARGS), "CL_INVALID_KERNEL_ARGS");
    /* Every code the headers define has a CL_ name; unknown ones a non-NULL one. */
    for (cl_int e = -1; e >= -68; e--) {
        const char *n = lf_cl_error_string(e);
        cr_assert_not_null(n, "code %d gives NULL", e);
        cr_expect_eq(strncmp(n, "CL_", 3), 0, "code %d is named \"%s\"", e, n);
    }
    const cl_int unknown[] = {-9999, 1, -20, 12345};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *n = lf_cl_error_string(unknown[i]);
        cr_assert_not_null(n, "unknown code %d gives NULL", unknown[i]);
        cr_expect_gt(strlen(n), 0);
        cr_expect_str_neq(n, "CL_SUCCESS", "unknown code %d is named CL_SUCCESS", unknown[i]);
    }
}

Test(status, version_macros_match_the_library)
{
    cr_expect_eq(lf_version_number(), (unsigned)LF_VERSION_NUMBER);
    cr_expect_eq(LF_VERSION_NUMBER, LF_VERSION_MAJOR * 10000 + LF_VERSION_MINOR * 100 + LF_VERSION_PATCH);
    cr_assert_not_null(lf_version_string());
    cr_expect_str_eq(lf_version_string(), LF_VERSION_STRING);
    char expect[64];
    snprintf(expect, sizeof expect, "%d.%d.%d", LF_VERSION_MAJOR, LF_VERSION_MINOR, LF_VERSION_PATCH);
    cr_expect_str_eq(lf_version_string(), expect);
}

Test(status, last_error_of_null_context)
{
    const char *m = lf_context_last_error(NULL);
    cr_assert_not_null(m);
}

Test(status, frees_accept_null)
{
    lf_context_free(NULL);
    lf_attention_free(NULL);
    lf_projection_free(NULL);
    cr_expect(1, "every free returned");
}

Test(status, fresh_context_has_empty_last_error)
{
    lf_context *ctx = lf_test_context();
    const char *m = lf_context_last_error(ctx);
    cr_assert_not_null(m);
    cr_expect_str_eq(m, "");
    /* A failure fills it with a message naming the argument. */
    cr_expect_eq(lf_attention_create(ctx, NULL, NULL, NULL), LF_ERR_ARGUMENT);
    cr_expect_neq(strstr(lf_context_last_error(ctx), "out"), NULL, "message: %s", lf_context_last_error(ctx));
    lf_context_free(ctx);
}

/* The message is the last failure's: later successful calls leave it as it
 * is (linformer.h), so a status, not the message, says whether a call failed. */
Test(status, last_error_outlives_later_successes)
{
    lf_context *ctx = lf_test_context();
    cr_expect_eq(lf_attention_create(ctx, NULL, NULL, NULL), LF_ERR_ARGUMENT);
    char first[1024];
    snprintf(first, sizeof first, "%s", lf_context_last_error(ctx));
    cr_assert_neq(first[0], 0);
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 8, 2, 16, 4);
    lf_attention *layer = NULL;
    cr_assert_eq(lf_attention_create(ctx, &cfg, NULL, &layer), LF_OK);
    cr_assert_eq(lf_attention_init_random(layer, 3), LF_OK);
    float x[16 * 8] = {0}, y[16 * 8];
    cr_assert_eq(lf_attention_forward(layer, x, y, 1, 16, NULL), LF_OK);
    cr_expect_str_eq(lf_context_last_error(ctx), first, "a successful call changed the last failure's message");
    lf_attention_free(layer);
    lf_context_free(ctx);
}
