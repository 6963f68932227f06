/* test_device.c - the selector as a pure function, the real device list, and
 * the `linformer devices` program. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"

/* ---- Selector parsing on hand-made lists ---- */

static lf_device_info dev(unsigned p, unsigned d, lf_device_type type, const char *platform,
                          const char *name)
{
    lf_device_info i;
    memset(&i, 0, sizeof i);
    i.platform_index = p;
    i.device_index = d;
    i.type = type;
    snprintf(i.platform_name, sizeof i.platform_name, "%s", platform);
    snprintf(i.device_name, sizeof i.device_name, "%s", name);
    i.global_mem_bytes = 1 << 30;
    i.max_alloc_bytes = 1 << 28;
    return i;
}

/* Three platforms: a CPU driver, a GPU driver with two GPUs, an FPGA. */
static lf_device_info mixed[5];
static const size_t n_mixed = 5;

static void mixed_init(void)
{
    mixed[0] = dev(0, 0, LF_DEVICE_CPU, "Portable Computing Language", "pthread-AMD EPYC 7B13");
    mixed[1] = dev(1, 0, LF_DEVICE_GPU, "NVIDIA CUDA", "NVIDIA GeForce RTX 4090");
    mixed[2] = dev(1, 1, LF_DEVICE_GPU, "NVIDIA CUDA", "NVIDIA A100-SXM4-80GB");
    mixed[3] = dev(2, 0, LF_DEVICE_ACCELERATOR, "Intel(R) FPGA SDK for OpenCL(TM)", "Arria 10 board");
    mixed[4] = dev(2, 1, LF_DEVICE_OTHER, "Intel(R) FPGA SDK for OpenCL(TM)", "custom thing");
    static const char *vendors[] = {"The pocl project", "NVIDIA Corporation", "NVIDIA Corporation",
                                    "Intel(R) Corporation", "Intel(R) Corporation"};
    for (int i = 0; i < 5; i++)
        snprintf(mixed[i].platform_vendor, sizeof mixed[i].platform_vendor, "%s", vendors[i]);
}

TestSuite(select, .init = mixed_init);

/* Selects and asserts success; returns the index. */
static size_t pick(const char *sel, const lf_device_info *devs, size_t count)
{
    char msg[2048] = "";
    size_t index = 9999;
    lf_status st = lf_devices_select(sel, devs, count, &index, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "selector \"%s\": %s: %s", sel ? sel : "(NULL)", lf_status_string(st), msg);
    cr_assert_lt(index, count, "selector \"%s\" gave index %zu of %zu", sel ? sel : "(NULL)", index, count);
    return index;
}

/* Asserts LF_ERR_NO_DEVICE with a message quoting the selector and listing every device. */
static void expect_no_match(const char *sel, const char *quoted, const lf_device_info *devs, size_t count)
{
    char msg[4096];
    memset(msg, 'x', sizeof msg);
    msg[sizeof msg - 1] = 0;
    size_t index = 4242;
    lf_status st = lf_devices_select(sel, devs, count, &index, msg, sizeof msg);
    cr_assert_eq(st, LF_ERR_NO_DEVICE, "selector \"%s\" gave %s", sel, lf_status_string(st));
    cr_expect_eq(index, 4242, "a failed select wrote index %zu", index);
    char want[300];
    snprintf(want, sizeof want, "\"%s\"", quoted);
    cr_expect_neq(strstr(msg, want), NULL, "message does not quote %s: %s", want, msg);
    for (size_t i = 0; i < count; i++) {
        cr_expect_neq(strstr(msg, devs[i].device_name), NULL, "message does not list \"%s\": %s",
                      devs[i].device_name, msg);
        char pd[32];
        snprintf(pd, sizeof pd, "%u:%u", devs[i].platform_index, devs[i].device_index);
        cr_expect_neq(strstr(msg, pd), NULL, "message does not list %s: %s", pd, msg);
    }
}

Test(select, default_order)
{
    cr_expect_eq(pick(NULL, mixed, n_mixed), 1, "NULL picks the first GPU");
    cr_expect_eq(pick("", mixed, n_mixed), 1, "\"\" picks the first GPU");
    cr_expect_eq(pick("  \t ", mixed, n_mixed), 1, "blanks pick the first GPU");

    /* Without GPUs: the accelerator, before the CPU that comes first. */
    lf_device_info no_gpu[] = {mixed[0], mixed[4], mixed[3]};
    cr_expect_eq(pick(NULL, no_gpu, 3), 2);
    /* Without GPU or accelerator: the CPU, even behind an "other" device. */
    lf_device_info cpu_last[] = {mixed[4], mixed[0]};
    cr_expect_eq(pick(NULL, cpu_last, 2), 1);
    /* Only "other" devices: the first. */
    lf_device_info others[] = {mixed[4], dev(3, 0, LF_DEVICE_OTHER, "X", "second other")};
    cr_expect_eq(pick(NULL, others, 2), 0);
    /* A GPU last still wins over everything before it. */
    lf_device_info gpu_last[] = {mixed[4], mixed[3], mixed[0], mixed[2]};
    cr_expect_eq(pick("", gpu_last, 4), 3);
    /* One device. */
    cr_expect_eq(pick(NULL, &mixed[0], 1), 0);
}

Test(select, type_words)
{
    cr_expect_eq(pick("gpu", mixed, n_mixed), 1);
    cr_expect_eq(pick("cpu", mixed, n_mixed), 0);
    cr_expect_eq(pick("accelerator", mixed, n_mixed), 3);
    cr_expect_eq(pick("GPU", mixed, n_mixed), 1);
    cr_expect_eq(pick("Cpu", mixed, n_mixed), 0);
    cr_expect_eq(pick("ACCELERATOR", mixed, n_mixed), 3);
    cr_expect_eq(pick("  cpu\t", mixed, n_mixed), 0);
    cr_expect_eq(pick("\n gpu  ", mixed, n_mixed), 1);
    /* The first of the type, wherever it is. */
    lf_device_info cpus[] = {mixed[1], mixed[4], dev(5, 0, LF_DEVICE_CPU, "Intel OpenCL", "Xeon"), mixed[0]};
    cr_expect_eq(pick("cpu", cpus, 4), 2);
    /* A type that is absent is an error naming it. */
    lf_device_info only_cpu[] = {mixed[0]};
    expect_no_match("gpu", "gpu", only_cpu, 1);
    expect_no_match(" accelerator ", "accelerator", only_cpu, 1);
}

Test(select, platform_device_indices)
{
    cr_expect_eq(pick("0:0", mixed, n_mixed), 0);
    cr_expect_eq(pick("1:0", mixed, n_mixed), 1);
    cr_expect_eq(pick("1:1", mixed, n_mixed), 2);
    cr_expect_eq(pick("2:1", mixed, n_mixed), 4);
    cr_expect_eq(pick(" 2:0 ", mixed, n_mixed), 3);
    /* Indices are matched, not positions in the array. */
    lf_device_info shuffled[] = {mixed[2], mixed[0], mixed[1]};
    cr_expect_eq(pick("1:0", shuffled, 3), 2);
    cr_expect_eq(pick("1:1", shuffled, 3), 0);
    expect_no_match("3:0", "3:0", mixed, n_mixed);
    expect_no_match("0:1", "0:1", mixed, n_mixed);
    expect_no_match("1:7", "1:7", mixed, n_mixed);
}

Test(select, name_substrings)
{
    cr_expect_eq(pick("nvidia", mixed, n_mixed), 1, "platform and device name");
    cr_expect_eq(pick("A100", mixed, n_mixed), 2, "device name");
    cr_expect_eq(pick("a100-sxm4", mixed, n_mixed), 2, "case-insensitive");
    cr_expect_eq(pick("GEFORCE RTX", mixed, n_mixed), 1);
    cr_expect_eq(pick("portable", mixed, n_mixed), 0, "platform name only");
    cr_expect_eq(pick("computing LANGUAGE", mixed, n_mixed), 0);
    cr_expect_eq(pick("epyc", mixed, n_mixed), 0);
    cr_expect_eq(pick("fpga", mixed, n_mixed), 3);
    cr_expect_eq(pick("Custom", mixed, n_mixed), 4);
    cr_expect_eq(pick("  arria 10 ", mixed, n_mixed), 3, "blanks trimmed");
    cr_expect_eq(pick("cuda", mixed, n_mixed), 1);
    expect_no_match("radeon", "radeon", mixed, n_mixed);
    expect_no_match("  no-such  ", "no-such", mixed, n_mixed);
    expect_no_match("nvidiaa", "nvidiaa", mixed, n_mixed);
}

Test(select, name_with_match_index)
{
    cr_expect_eq(pick("nvidia:0", mixed, n_mixed), 1);
    cr_expect_eq(pick("nvidia:1", mixed, n_mixed), 2);
    cr_expect_eq(pick("NVIDIA:1", mixed, n_mixed), 2);
    cr_expect_eq(pick("intel:0", mixed, n_mixed), 3);
    cr_expect_eq(pick("intel:1", mixed, n_mixed), 4);
    cr_expect_eq(pick("portable:0", mixed, n_mixed), 0);
    /* Matches are counted over the list in order, others skipped. */
    lf_device_info inter[] = {mixed[1], mixed[0], mixed[2]};
    cr_expect_eq(pick("nvidia:1", inter, 3), 2);
    expect_no_match("nvidia:2", "nvidia:2", mixed, n_mixed);
    expect_no_match("portable:1", "portable:1", mixed, n_mixed);
    expect_no_match("radeon:0", "radeon:0", mixed, n_mixed);
}

Test(select, platform_vendor)
{
    cr_expect_eq(pick("pocl", mixed, n_mixed), 0, "PoCL's vendor is \"The pocl project\"");
    cr_expect_eq(pick("PoCL", mixed, n_mixed), 0);
    cr_expect_eq(pick("the pocl project", mixed, n_mixed), 0);
    cr_expect_eq(pick("pocl:0", mixed, n_mixed), 0);
    cr_expect_eq(pick("corporation", mixed, n_mixed), 1, "the first device whose vendor matches");
    cr_expect_eq(pick("intel(r) corporation:1", mixed, n_mixed), 4);
    expect_no_match("pocl:1", "pocl:1", mixed, n_mixed);
    expect_no_match("radeon", "radeon", mixed, n_mixed);
}

Test(select, bare_platform_index)
{
    cr_expect_eq(pick("0", mixed, n_mixed), 0);
    cr_expect_eq(pick("1", mixed, n_mixed), 1, "the first device of platform 1");
    cr_expect_eq(pick(" 2 ", mixed, n_mixed), 3);
    lf_device_info shuffled[] = {mixed[4], mixed[2], mixed[3], mixed[1]};
    cr_expect_eq(pick("2", shuffled, 4), 0, "the first in list order");
    cr_expect_eq(pick("1", shuffled, 4), 1);
    /* A number is an index, not a name: "100" does not find the A100. */
    expect_no_match("3", "3", mixed, n_mixed);
    expect_no_match("100", "100", mixed, n_mixed);
}

Test(select, pyopencl_pairs_of_index_or_text)
{
    cr_expect_eq(pick("1:a100", mixed, n_mixed), 2, "platform index, device name");
    cr_expect_eq(pick("nvidia:RTX", mixed, n_mixed), 1, "platform name, device name");
    cr_expect_eq(pick("cuda:a100", mixed, n_mixed), 2);
    cr_expect_eq(pick("2:custom", mixed, n_mixed), 4);
    cr_expect_eq(pick("pocl:epyc", mixed, n_mixed), 0, "platform vendor, device name");
    cr_expect_eq(pick("fpga:1", mixed, n_mixed), 4);
    expect_no_match("0:a100", "0:a100", mixed, n_mixed);
    expect_no_match("nvidia:arria", "nvidia:arria", mixed, n_mixed);
    expect_no_match("pocl:nvidia", "pocl:nvidia", mixed, n_mixed);
}

Test(select, name_with_a_colon_is_tried_whole)
{
    /* ROCm names devices like "gfx90a:sramecc+:xnack-". */
    lf_device_info list[] = {mixed[0], dev(3, 0, LF_DEVICE_GPU, "AMD Accelerated Parallel Processing", "board:2"),
                             dev(3, 1, LF_DEVICE_GPU, "AMD Accelerated Parallel Processing", "gfx90a:sramecc+:xnack-")};
    cr_expect_eq(pick("board:2", list, 3), 1, "no third \"board\": the whole text is the name");
    cr_expect_eq(pick("gfx90a:sramecc+:xnack-", list, 3), 2);
    cr_expect_eq(pick("sramecc+:xnack", list, 3), 2);
    cr_expect_eq(pick("parallel processing:1", list, 3), 2);
}

Test(select, empty_list)
{
    char msg[512] = "";
    size_t index = 77;
    cr_expect_eq(lf_devices_select(NULL, NULL, 0, &index, msg, sizeof msg), LF_ERR_NO_DEVICE);
    cr_expect_gt(strlen(msg), 0, "no message");
    cr_expect_eq(index, 77);
    msg[0] = 0;
    cr_expect_eq(lf_devices_select("gpu", mixed, 0, &index, msg, sizeof msg), LF_ERR_NO_DEVICE);
    cr_expect_neq(strstr(msg, "\"gpu\""), NULL, "message: %s", msg);
    cr_expect_eq(lf_devices_select("0:0", NULL, 0, &index, NULL, 0), LF_ERR_NO_DEVICE);
}

Test(select, null_arguments)
{
    char msg[512] = "";
    cr_expect_eq(lf_devices_select("gpu", mixed, n_mixed, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_expect_neq(strstr(msg, "index"), NULL, "message: %s", msg);
    size_t index = 5;
    msg[0] = 0;
    cr_expect_eq(lf_devices_select("gpu", NULL, 3, &index, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_expect_neq(strstr(msg, "devices"), NULL, "message: %s", msg);
    /* No error buffer: statuses still come back, nothing is written. */
    cr_expect_eq(lf_devices_select("no-such", mixed, n_mixed, &index, NULL, 0), LF_ERR_NO_DEVICE);
    cr_expect_eq(lf_devices_select("no-such", mixed, n_mixed, &index, NULL, 100), LF_ERR_NO_DEVICE);
    cr_expect_eq(lf_devices_select("gpu", mixed, n_mixed, NULL, NULL, 0), LF_ERR_ARGUMENT);
    cr_expect_eq(index, 5);
    cr_expect_eq(lf_devices_select(NULL, mixed, n_mixed, &index, NULL, 0), LF_OK);
    cr_expect_eq(index, 1);
}

Test(select, small_error_buffer_is_truncated)
{
    char msg[40];
    memset(msg, '#', sizeof msg);
    size_t index = 0;
    cr_expect_eq(lf_devices_select("no-such", mixed, n_mixed, &index, msg, 16), LF_ERR_NO_DEVICE);
    cr_expect_eq(strlen(msg), 15, "message: %s", msg);
    for (size_t i = 16; i < sizeof msg; i++) cr_expect_eq(msg[i], '#', "byte %zu past the buffer written", i);
}

Test(select, over_long_selector)
{
    char sel[1200];
    memset(sel, 'a', sizeof sel - 1);
    sel[sizeof sel - 1] = 0;
    char msg[512] = "";
    size_t index = 3;
    lf_status st = lf_devices_select(sel, mixed, n_mixed, &index, msg, sizeof msg);
    cr_expect(st == LF_ERR_ARGUMENT || st == LF_ERR_NO_DEVICE, "got %s", lf_status_string(st));
    cr_expect_gt(strlen(msg), 0);
    cr_expect_eq(index, 3);
    /* Long, but matching a long device name: still found. */
    lf_device_info longname = dev(0, 0, LF_DEVICE_CPU, "P", "");
    memset(longname.device_name, 'q', sizeof longname.device_name - 1);
    longname.device_name[sizeof longname.device_name - 1] = 0;
    lf_device_info list[] = {mixed[1], longname};
    char name[600];
    snprintf(name, sizeof name, "  %s  ", longname.device_name + 1);
    cr_expect_eq(pick(name, list, 2), 1);
    /* Many blanks around a short selector are trimmed, whatever their number. */
    char padded[1200];
    memset(padded, ' ', sizeof padded - 1);
    padded[sizeof padded - 1] = 0;
    memcpy(padded + 590, "cpu", 3);
    cr_expect_eq(pick(padded, mixed, n_mixed), 0);
}

/* ---- The real device ---- */

static lf_device_info *real_list(size_t *count)
{
    char msg[1024] = "";
    *count = 0;
    lf_status st = lf_devices_list(NULL, 0, count, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), msg);
    cr_assert_gt(*count, 0);
    lf_device_info *devs = calloc(*count + 1, sizeof *devs);
    cr_assert_not_null(devs);
    size_t again = 0;
    st = lf_devices_list(devs, *count, &again, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), msg);
    cr_assert_eq(again, *count, "count-only call said %zu, the full call %zu", *count, again);
    return devs;
}

Test(devices, list_is_sane)
{
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    for (size_t i = 0; i < count; i++) {
        const lf_device_info *d = &devs[i];
        cr_expect_gt(strlen(d->device_name), 0, "device %zu has no name", i);
        cr_expect_gt(strlen(d->platform_name), 0, "device %zu has no platform name", i);
        cr_expect_gt(strlen(d->platform_vendor), 0, "device %zu has no platform vendor", i);
        cr_expect_gt(d->global_mem_bytes, 0, "%s: no global memory", d->device_name);
        cr_expect_gt(d->max_alloc_bytes, 0, "%s: no max allocation", d->device_name);
        cr_expect_leq(d->max_alloc_bytes, d->global_mem_bytes, "%s", d->device_name);
        cr_expect_gt(d->local_mem_bytes, 0, "%s: no local memory", d->device_name);
        cr_expect_gt(d->compute_units, 0, "%s: no compute units", d->device_name);
        cr_expect_gt(d->max_work_group_size, 0, "%s: no work-group size", d->device_name);
        cr_expect(d->type == LF_DEVICE_GPU || d->type == LF_DEVICE_CPU ||
                  d->type == LF_DEVICE_ACCELERATOR || d->type == LF_DEVICE_OTHER);
        for (size_t j = 0; j < i; j++)
            cr_expect(devs[j].platform_index != d->platform_index || devs[j].device_index != d->device_index,
                      "devices %zu and %zu share %u:%u", j, i, d->platform_index, d->device_index);
    }
    /* A short buffer gets the first entries and the full count. */
    lf_device_info first;
    memset(&first, 0, sizeof first);
    size_t c1 = 0;
    cr_expect_eq(lf_devices_list(&first, 1, &c1, NULL, 0), LF_OK);
    cr_expect_eq(c1, count);
    cr_expect_str_eq(first.device_name, devs[0].device_name);
    free(devs);
}

Test(devices, list_arguments)
{
    char msg[256] = "";
    cr_expect_eq(lf_devices_list(NULL, 0, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_expect_neq(strstr(msg, "count"), NULL, "message: %s", msg);
    size_t count = 0;
    cr_expect_eq(lf_devices_list(NULL, 3, &count, msg, sizeof msg), LF_ERR_ARGUMENT);
}

Test(devices, context_default_matches_select)
{
    unsetenv("LINFORMER_DEVICE");
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    size_t want = 99;
    cr_assert_eq(lf_devices_select(NULL, devs, count, &want, NULL, 0), LF_OK);
    lf_context *ctx = NULL;
    char msg[2048] = "";
    lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), msg);
    cr_assert_not_null(ctx);
    lf_device_info got;
    cr_assert_eq(lf_context_device_info(ctx, &got), LF_OK);
    cr_expect_eq(got.platform_index, devs[want].platform_index);
    cr_expect_eq(got.device_index, devs[want].device_index);
    cr_expect_str_eq(got.device_name, devs[want].device_name);
    cr_expect_str_eq(got.platform_name, devs[want].platform_name);
    cr_expect_not_null(lf_context_cl_context(ctx));
    cr_expect_not_null(lf_context_cl_queue(ctx));
    /* The queue really is on that device. */
    cl_device_id qdev = NULL;
    cr_assert_eq(clGetCommandQueueInfo(lf_context_cl_queue(ctx), CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL),
                 CL_SUCCESS);
    char qname[128] = "";
    clGetDeviceInfo(qdev, CL_DEVICE_NAME, sizeof qname, qname, NULL);
    qname[sizeof qname - 1] = 0;
    cr_expect_str_eq(qname, got.device_name);
    cl_command_queue_properties props = 0;
    clGetCommandQueueInfo(lf_context_cl_queue(ctx), CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    cr_expect(props & CL_QUEUE_PROFILING_ENABLE, "the queue has no profiling");
    cr_expect_eq(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0, "the queue is out of order");
    cr_expect_eq(lf_context_finish(ctx), LF_OK);
    lf_context_free(ctx);
    free(devs);
}

Test(devices, environment_selector_unmatched)
{
    setenv("LINFORMER_DEVICE", "no-such", 1);
    lf_context *ctx = (lf_context *)(uintptr_t)1;
    char msg[4096] = "";
    lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_NO_DEVICE, "got %s", lf_status_string(st));
    cr_expect_null(ctx, "*out is not NULL after a failure");
    cr_expect_neq(strstr(msg, "no-such"), NULL, "message: %s", msg);
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    for (size_t i = 0; i < count; i++)
        cr_expect_neq(strstr(msg, devs[i].device_name), NULL, "message does not list %s: %s",
                      devs[i].device_name, msg);
    free(devs);
    /* Without an error buffer it fails the same way. */
    cr_expect_eq(lf_context_create(NULL, &ctx, NULL, 0), LF_ERR_NO_DEVICE);
    cr_expect_eq(lf_context_create(NULL, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
}

Test(devices, explicit_selector_overrides_environment)
{
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    size_t want = 0;
    cr_assert_eq(lf_devices_select(NULL, devs, count, &want, NULL, 0), LF_OK);
    char sel[64];
    snprintf(sel, sizeof sel, "%u:%u", devs[want].platform_index, devs[want].device_index);

    setenv("LINFORMER_DEVICE", "no-such", 1);
    lf_context *ctx = NULL;
    char msg[4096] = "";
    lf_status st = lf_context_create(sel, &ctx, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "selector %s with LINFORMER_DEVICE=no-such: %s: %s", sel, lf_status_string(st), msg);
    lf_device_info got;
    lf_context_device_info(ctx, &got);
    cr_expect_str_eq(got.device_name, devs[want].device_name);
    lf_context_free(ctx);

    /* An explicit empty selector is the default, not the variable. */
    ctx = NULL;
    st = lf_context_create("", &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_OK, "selector \"\" with LINFORMER_DEVICE=no-such: %s: %s", lf_status_string(st), msg);
    lf_context_free(ctx);

    /* And an explicit unmatched selector names itself, not the variable. */
    ctx = NULL;
    st = lf_context_create("other-missing", &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_ERR_NO_DEVICE);
    cr_expect_neq(strstr(msg, "other-missing"), NULL, "message: %s", msg);
    cr_expect_null(ctx);

    /* The variable, when it matches, is used. */
    setenv("LINFORMER_DEVICE", sel, 1);
    st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    cr_expect_eq(st, LF_OK, "LINFORMER_DEVICE=%s: %s", sel, msg);
    lf_context_free(ctx);
    free(devs);
}

/* ---- The `linformer devices` program ---- */

static char tool_log[16384];

Test(tool, devices_lists_the_device)
{
    unsetenv("LINFORMER_DEVICE");
    int rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    cr_assert_eq(rc, 0, "exit %d, output:\n%s", rc, tool_log);
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    for (size_t i = 0; i < count; i++) {
        cr_expect_neq(strstr(tool_log, devs[i].device_name), NULL, "%s not listed:\n%s",
                      devs[i].device_name, tool_log);
        cr_expect_neq(strstr(tool_log, devs[i].platform_name), NULL, "%s not listed:\n%s",
                      devs[i].platform_name, tool_log);
    }
    cr_expect_neq(strstr(tool_log, "(default)"), NULL, "no default marked:\n%s", tool_log);
    /* This machine's PoCL device is among them. */
    bool pocl = false;
    for (size_t i = 0; i < count; i++)
        if (strstr(devs[i].platform_name, "Portable Computing Language") || strstr(devs[i].platform_name, "PoCL"))
            pocl = true;
    if (pocl) cr_expect_neq(strstr(tool_log, "Portable Computing Language"), NULL, "%s", tool_log);
    free(devs);
}

Test(tool, devices_with_a_selector)
{
    unsetenv("LINFORMER_DEVICE");
    int rc = lf_test_run_tool("devices --device cpu", tool_log, sizeof tool_log);
    size_t count = 0;
    lf_device_info *devs = real_list(&count);
    size_t cpu = 0;
    if (lf_devices_select("cpu", devs, count, &cpu, NULL, 0) == LF_OK) {
        cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
        cr_expect_neq(strstr(tool_log, "picks"), NULL, "%s", tool_log);
    }
    free(devs);
}

/* The selector the header documents, on this machine's PoCL. */
Test(tool, devices_pocl_selector)
{
    unsetenv("LINFORMER_DEVICE");
    size_t count = 0, want = 0;
    lf_device_info *devs = real_list(&count);
    bool pocl = false;
    for (size_t i = 0; i < count && !pocl; i++)
        if (strstr(devs[i].platform_vendor, "pocl")) pocl = true, want = i;
    if (!pocl) {
        free(devs);
        cr_skip_test("no PoCL platform here");
    }
    size_t got = 99;
    cr_expect_eq(lf_devices_select("pocl", devs, count, &got, NULL, 0), LF_OK);
    cr_expect_eq(got, want);
    int rc = lf_test_run_tool("devices --device pocl", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_neq(strstr(tool_log, devs[want].device_name), NULL, "%s", tool_log);
    free(devs);
}

Test(tool, devices_unmatched_selector_fails)
{
    unsetenv("LINFORMER_DEVICE");
    int rc = lf_test_run_tool("devices --device no-such", tool_log, sizeof tool_log);
    cr_expect_neq(rc, 0, "exit 0 for --device no-such:\n%s", tool_log);
    cr_expect_neq(strstr(tool_log, "no-such"), NULL, "output does not name no-such:\n%s", tool_log);
    /* The same through the environment variable. */
    setenv("LINFORMER_DEVICE", "no-such-either", 1);
    rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    cr_expect_neq(rc, 0, "exit 0 for LINFORMER_DEVICE=no-such-either:\n%s", tool_log);
    cr_expect_neq(strstr(tool_log, "no-such-either"), NULL, "%s", tool_log);
}

/* The program runs the host BLAS kernels this CPU takes: where OpenBLAS fell
 * back to older ones in this (test) process, the program names the faster set
 * (it restarted itself with OPENBLAS_CORETYPE); a set the user names is kept. */
Test(tool, devices_names_the_blas_kernels_the_cpu_takes)
{
    unsetenv("LINFORMER_DEVICE");
    setenv("LINFORMER_HOST_BLAS", "openblas", 1);
    unsetenv("OPENBLAS_CORETYPE");
    const char *faster = NULL, *core = lf_host_blas_core(&faster);
    char want[128];
    snprintf(want, sizeof want, "host BLAS: OpenBLAS, %s kernels\n", faster ? faster : core);
    int rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_neq(strstr(tool_log, want), NULL, "no \"%s\" in:\n%s", want, tool_log);
    setenv("OPENBLAS_CORETYPE", core, 1);
    snprintf(want, sizeof want, "host BLAS: OpenBLAS, %s kernels\n", core);
    rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    unsetenv("OPENBLAS_CORETYPE");
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_neq(strstr(tool_log, want), NULL, "the user's OPENBLAS_CORETYPE=%s: no \"%s\" in:\n%s", core, want,
                  tool_log);
}

/* The widest of OpenBLAS's x86-64 kernel sets this CPU runs, from the
 * kernel's list of its features (not the compiler's, as the library asks);
 * NULL elsewhere. */
static const char *widest_core(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    bool avx512 = false, avx2 = false;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            avx512 = strstr(line, " avx512f") && strstr(line, " avx512bw") && strstr(line, " avx512vl") &&
                     strstr(line, " avx512dq");
            avx2 = strstr(line, " avx2") && strstr(line, " fma");
            break;
        }
    if (f) fclose(f);
    return avx512 ? "SkylakeX" : avx2 ? "Haswell" : NULL;
}

/* An OPENBLAS_CORETYPE of narrower vectors than the CPU runs is named, with
 * the set the CPU would take; one as wide, one OpenBLAS does not list, or
 * none is not. */
Test(host_blas, forced_core_is_named_only_when_older)
{
    const char *widest = widest_core(), *best = "poison";
    if (!widest) cr_skip_test("not an x86-64 CPU with AVX2");
    setenv("OPENBLAS_CORETYPE", "sandybridge", 1); /* OpenBLAS takes its names in any case */
    cr_expect_str_eq(lf_host_blas_forced_core(&best), "sandybridge");
    cr_expect_str_eq(best, widest);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    const char *forced = lf_host_blas_forced_core(&best);
    if (strcmp(widest, "SkylakeX") == 0)
        cr_expect(forced && strcmp(forced, "Haswell") == 0 && strcmp(best, "SkylakeX") == 0, "AVX2 on AVX-512");
    else
        cr_expect(forced == NULL && best == NULL, "Haswell on an AVX2 CPU is its own set");
    static const char *const not_older[] = {"Zen-ish", "", NULL};
    for (int i = 0; i < 3; i++) {
        if (not_older[i]) setenv("OPENBLAS_CORETYPE", not_older[i], 1);
        else unsetenv("OPENBLAS_CORETYPE");
        best = "poison";
        cr_expect_null(lf_host_blas_forced_core(&best), "OPENBLAS_CORETYPE=%s", not_older[i] ? not_older[i] : "unset");
        cr_expect_null(best);
    }
    cr_expect_null(lf_host_blas_forced_core(NULL));
}

/* `run --profile` with such a variable says so once, with the rate here and
 * the rate of the CPU's own set, which `devices --gemm-rate` measured in a
 * run of the program without it; nothing is said without the variable. */
Test(tool, profile_names_a_forced_blas_core_and_its_cost, .timeout = 600)
{
    if (!widest_core()) cr_skip_test("not an x86-64 CPU with AVX2");
    setenv("LINFORMER_HOST_BLAS", "openblas", 1);
    setenv("LINFORMER_GEMM", "host", 1);
    char args[1024];
    snprintf(args, sizeof args,
             "run --model %1$s/tests/data/pytorch/plain.model.safetensors --input "
             "%1$s/tests/data/pytorch/plain.io.safetensors --check --repeat 1 --profile",
             LF_SOURCE_DIR);
    setenv("OPENBLAS_CORETYPE", "Sandybridge", 1);
    int rc = lf_test_run_tool(args, tool_log, sizeof tool_log);
    unsetenv("OPENBLAS_CORETYPE");
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    const char *note = strstr(tool_log, "note: OPENBLAS_CORETYPE=Sandybridge, set in the environment, holds OpenBLAS "
                                        "to older kernels than this CPU runs (");
    double here = 0, own = 0;
    const char *at = note ? strstr(note, "at ") : NULL;
    cr_expect(at && sscanf(at, "at %lf GFLOP/s here, %lf with the CPU's own set", &here, &own) == 2 && here > 0 &&
                  own > 0,
              "no note with both rates:\n%s", tool_log);
    cr_expect_null(note ? strstr(note + 1, "note: OPENBLAS_CORETYPE") : NULL, "said twice:\n%s", tool_log);
    rc = lf_test_run_tool(args, tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_null(strstr(tool_log, "OPENBLAS_CORETYPE"), "without the variable:\n%s", tool_log);
}

/* `devices --gemm-rate` measures the picked device's yardstick; a device it cannot open is an error. */
Test(tool, devices_gemm_rate)
{
    int rc = lf_test_run_tool("devices --gemm-rate", tool_log, sizeof tool_log);
    double gflops = 0;
    const char *line = strstr(tool_log, "\nGEMM rate: ");
    cr_expect(rc == 0 && line && sscanf(line, "\nGEMM rate: %lf GFLOP/s (", &gflops) == 1 && gflops > 0,
              "exit %d:\n%s", rc, tool_log);
    rc = lf_test_run_tool("devices --device no-such --gemm-rate", tool_log, sizeof tool_log);
    cr_expect_neq(rc, 0, "%s", tool_log);
    cr_expect_null(strstr(tool_log, "GEMM rate: "), "%s", tool_log);
}

/* The program sets OPENBLAS_THREAD_TIMEOUT before OpenBLAS loads (it restarts
 * itself) unless the user did; `devices` says the value OpenBLAS read. */
Test(tool, devices_names_the_blas_thread_timeout)
{
    unsetenv("LINFORMER_DEVICE");
    setenv("LINFORMER_HOST_BLAS", "openblas", 1);
    unsetenv("OPENBLAS_THREAD_TIMEOUT");
    int rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    const char *want = "host BLAS idle threads: OPENBLAS_THREAD_TIMEOUT=4\n";
    cr_expect_neq(strstr(tool_log, want), NULL, "no \"%s\" in:\n%s", want, tool_log);
    setenv("OPENBLAS_THREAD_TIMEOUT", "12", 1);
    rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    unsetenv("OPENBLAS_THREAD_TIMEOUT");
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    want = "host BLAS idle threads: OPENBLAS_THREAD_TIMEOUT=12\n";
    cr_expect_neq(strstr(tool_log, want), NULL, "the user's value: no \"%s\" in:\n%s", want, tool_log);
}

/* The host BLAS the program takes: MKL on an Intel CPU where this build has it
 * beside it (tests/CMakeLists.txt sets LF_TEST_MKL), or when asked for, with
 * the wait policy of its threads (passive unless the user set one); OpenBLAS
 * otherwise; and a file that is not MKL, asked for, named as such. */
Test(tool, devices_names_the_host_blas_and_how_its_threads_wait)
{
    unsetenv("LINFORMER_DEVICE");
    unsetenv("LINFORMER_HOST_BLAS");
    unsetenv("OMP_WAIT_POLICY");
    const bool mkl = lf_test_with_mkl();
    __builtin_cpu_init();
    const char *mkl_line = "host BLAS: Intel(R) oneAPI Math Kernel Library";
    int rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    if (mkl && __builtin_cpu_is("intel")) {
        cr_expect_neq(strstr(tool_log, mkl_line), NULL, "an Intel CPU with MKL: no \"%s\" in:\n%s", mkl_line, tool_log);
        cr_expect_neq(strstr(tool_log, "host BLAS idle threads: OMP_WAIT_POLICY=passive\n"), NULL, "%s", tool_log);
    } else {
        cr_expect_neq(strstr(tool_log, "host BLAS: OpenBLAS, "), NULL, "%s", tool_log);
    }
    if (mkl) { /* asked for, on any CPU; the user's wait policy is kept */
        setenv("LINFORMER_HOST_BLAS", "mkl", 1);
        setenv("OMP_WAIT_POLICY", "active", 1);
        rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
        unsetenv("OMP_WAIT_POLICY");
        cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
        cr_expect_neq(strstr(tool_log, mkl_line), NULL, "LINFORMER_HOST_BLAS=mkl: no \"%s\" in:\n%s", mkl_line,
                      tool_log);
        cr_expect_neq(strstr(tool_log, "host BLAS idle threads: OMP_WAIT_POLICY=active\n"), NULL, "%s", tool_log);
    }
    setenv("LINFORMER_HOST_BLAS", "mkl", 1);
    setenv("LINFORMER_MKL", "libm.so.6", 1);
    rc = lf_test_run_tool("devices", tool_log, sizeof tool_log);
    unsetenv("LINFORMER_MKL");
    unsetenv("LINFORMER_HOST_BLAS");
    cr_expect_neq(strstr(tool_log, "host BLAS: none: LINFORMER_HOST_BLAS is \"mkl\", but MKL did not load: "
                                   "libm.so.6 is not MKL's single dynamic library"),
                  NULL, "%s", tool_log);
}

/* A file named for MKL that is no library, or does not load, is an error that
 * names it, at once: a FIFO is never opened (the dynamic loader would wait
 * for a writer forever), and on an Intel CPU, where MKL is the default, the
 * named file is not passed over for OpenBLAS in silence. */
Test(tool, a_file_named_for_mkl_that_does_not_load_is_refused_at_once)
{
    unsetenv("LINFORMER_DEVICE");
    char dir[64], fifo[128], cmd[1024];
    lf_test_make_dir(dir, "mkl");
    snprintf(fifo, sizeof fifo, "%s/libmkl_rt.so.3", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' devices", lf_test_tool());
    const struct {
        const char *blas, *file, *says;
    } cases[] = {{"mkl", fifo, "is a FIFO, not a library file"},
                 {"mkl", "/dev/null", "\"/dev/null\" is a character device, not a library file"},
                 {"mkl", dir, "is a directory, not a library file"},
                 {NULL, fifo, "is a FIFO, not a library file"},
                 {NULL, "/no/such/libmkl_rt.so.3", "/no/such/libmkl_rt.so.3"}};
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].blas) setenv("LINFORMER_HOST_BLAS", cases[i].blas, 1);
        else unsetenv("LINFORMER_HOST_BLAS");
        setenv("LINFORMER_MKL", cases[i].file, 1);
        const int rc = lf_test_system(cmd, tool_log, sizeof tool_log);
        cr_expect_eq(rc, 0, "%s: exit %d (124: it waited):\n%s", cases[i].file, rc, tool_log);
        if (cases[i].blas || __builtin_cpu_is("intel")) {
            const char *first = cases[i].blas ? "host BLAS: none: LINFORMER_HOST_BLAS is \"mkl\", but MKL did not load: "
                                              : "host BLAS: none: MKL, the default on this Intel CPU, did not load "
                                                "from LINFORMER_MKL: ";
            cr_expect_neq(strstr(tool_log, first), NULL, "%s: no \"%s\" in:\n%s", cases[i].file, first, tool_log);
            cr_expect_neq(strstr(tool_log, cases[i].says), NULL, "%s: no \"%s\" in:\n%s", cases[i].file,
                          cases[i].says, tool_log);
        } else { /* not tried: OpenBLAS, the default here */
            cr_expect_neq(strstr(tool_log, "host BLAS: OpenBLAS, "), NULL, "%s", tool_log);
        }
    }
    unsetenv("LINFORMER_MKL");
    unsetenv("LINFORMER_HOST_BLAS");
    lf_test_remove_dir(dir);
}

Test(tool, devices_help)
{
    int rc = lf_test_run_tool("devices --help", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_neq(strstr(tool_log, "usage"), NULL, "%s", tool_log);
    rc = lf_test_run_tool("--help", tool_log, sizeof tool_log);
    cr_expect_eq(rc, 0, "exit %d:\n%s", rc, tool_log);
    cr_expect_neq(strstr(tool_log, "devices"), NULL, "%s", tool_log);
    rc = lf_test_run_tool("devices --bogus-option", tool_log, sizeof tool_log);
    cr_expect_neq(rc, 0, "exit 0 for an unknown option:\n%s", tool_log);
}
