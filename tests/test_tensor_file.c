/*
 * test_tensor_file.c - the public tensor-file reader (lf_tensor_file_*) on
 * files built byte by byte: every dtype converted against hand-computed values,
 * shapes and metadata, and each failure with its status and message. Only the
 * public header is used, as a program using the library would.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static char dir[64], path[128], fifo[128];

static void make_dir(void)
{
    lf_test_make_dir(dir, "tensor-file");
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
}

static void remove_dir(void) { lf_test_remove_dir(dir); }

TestSuite(tensor_file, .init = make_dir, .fini = remove_dir);

/* Writes `path` holding exactly these bytes. */
static void write_raw(const void *bytes, size_t size)
{
    FILE *fp = fopen(path, "wb");
    cr_assert(fp != NULL);
    cr_assert_eq(fwrite(bytes, 1, size, fp), size);
    cr_assert_eq(fclose(fp), 0);
}

/* Writes `path`: the 8-byte little-endian length of `header`, it, then data. */
static void write_file(const char *header, const uint8_t *data, size_t data_size)
{
    FILE *fp = fopen(path, "wb");
    cr_assert(fp != NULL);
    uint64_t len = strlen(header);
    for (int i = 0; i < 8; i++) fputc((int)(len >> 8 * i) & 0xff, fp);
    fputs(header, fp);
    cr_assert_eq(fwrite(data, 1, data_size, fp), data_size);
    cr_assert_eq(fclose(fp), 0);
}

/* One tensor of each dtype, little-endian, at the offsets of HEADER. */
static const uint8_t DATA[] = {
    0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0, 0, 0, 0, 0, 0, 0, 0x40, 0x40, /* a: F32 1, -2.5, 0, 3 */
    0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c,                               /* b: F16 1, -2, inf */
    0x49, 0xc0,                                                       /* c: BF16 -3.140625 */
    0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0, 0, 0, 0, 0, 0, 0xe0, 0xbf,       /* d: F64 1.5, -0.5 */
    0xf9, 0xff, 0xff, 0xff, 0x39, 0x30, 0, 0,                         /* e: I32 -7, 12345 */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x2a, 0, 0, 0, 1, 0, 0, 0, /* f: I64 */
};
#define HEADER                                                                        \
    "{\"f\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[48,64]},"              \
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"              \
    "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"               \
    "\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[22,24]},"               \
    "\"d\":{\"dtype\":\"F64\",\"shape\":[1,1,2],\"data_offsets\":[24,40]},"           \
    "\"e\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[40,48]},"               \
    "\"g\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[64,64]},"             \
    "\"__metadata__\":{\"heads\":\"4\",\"format\":\"pt\"}}"

static lf_tensor_file *open_ok(void)
{
    write_file(HEADER, DATA, sizeof DATA);
    lf_tensor_file *file = (lf_tensor_file *)&file; /* garbage, so the reset is checked */
    char msg[512] = "";
    cr_assert_eq(lf_tensor_file_open(path, &file, msg, sizeof msg), LF_OK, "%s", msg);
    cr_assert(file != NULL);
    cr_assert_str_eq(lf_tensor_file_last_error(file), "");
    return file;
}

Test(tensor_file, lists_tensors_in_name_order_with_shapes)
{
    lf_tensor_file *file = open_ok();
    cr_assert_eq(lf_tensor_file_count(file), 7);
    static const struct { const char *name; lf_dtype dtype; int ndim; int64_t shape[3]; size_t count; } want[] = {
        {"a", LF_DTYPE_F32, 2, {2, 2}, 4},     {"b", LF_DTYPE_F16, 1, {3}, 3},
        {"c", LF_DTYPE_BF16, 0, {0}, 1},       {"d", LF_DTYPE_F64, 3, {1, 1, 2}, 2},
        {"e", LF_DTYPE_I32, 1, {2}, 2},        {"f", LF_DTYPE_I64, 1, {2}, 2},
        {"g", LF_DTYPE_F32, 2, {0, 4}, 0},
    };
    for (size_t i = 0; i < 7; i++) {
        lf_tensor_info info;
        cr_assert_eq(lf_tensor_file_info(file, i, &info), LF_OK);
        cr_assert_str_eq(info.name, want[i].name);
        cr_assert_eq(info.dtype, want[i].dtype, "%s", info.name);
        cr_assert_eq(info.ndim, want[i].ndim, "%s", info.name);
        cr_assert_eq(info.count, want[i].count, "%s", info.name);
        for (int d = 0; d < info.ndim; d++) cr_assert_eq(info.shape[d], want[i].shape[d], "%s[%d]", info.name, d);
        lf_tensor_info found;
        cr_assert_eq(lf_tensor_file_find(file, want[i].name, &found), LF_OK);
        cr_assert(memcmp(&found, &info, sizeof info) == 0, "find and info agree on %s", info.name);
    }
    cr_assert_str_eq(lf_tensor_file_metadata(file, "heads"), "4");
    cr_assert_str_eq(lf_tensor_file_metadata(file, "format"), "pt");
    cr_assert_null(lf_tensor_file_metadata(file, "norm"));
    lf_tensor_file_free(file);
}

Test(tensor_file, converts_every_dtype)
{
    lf_tensor_file *file = open_ok();
    const struct { const char *name; size_t count; float want[4]; } floats[] = {
        {"a", 4, {1.0f, -2.5f, 0.0f, 3.0f}}, {"b", 3, {1.0f, -2.0f, INFINITY}},
        {"c", 1, {-3.140625f}},              {"d", 2, {1.5f, -0.5f}},
    };
    for (size_t i = 0; i < 4; i++) {
        float out[5] = {7, 7, 7, 7, 7};
        cr_assert_eq(lf_tensor_file_read_f32(file, floats[i].name, out, floats[i].count), LF_OK, "%s",
                     lf_tensor_file_last_error(file));
        for (size_t j = 0; j < floats[i].count; j++)
            cr_assert_eq(out[j], floats[i].want[j], "%s[%zu] = %g", floats[i].name, j, out[j]);
        cr_assert_eq(out[floats[i].count], 7, "nothing written past count");
    }
    int64_t ints[2];
    cr_assert_eq(lf_tensor_file_read_i64(file, "e", ints, 2), LF_OK);
    cr_assert(ints[0] == -7 && ints[1] == 12345);
    cr_assert_eq(lf_tensor_file_read_i64(file, "f", ints, 2), LF_OK);
    cr_assert(ints[0] == INT64_MAX && ints[1] == 4294967338);
    cr_assert_eq(lf_tensor_file_read_f32(file, "g", NULL, 0), LF_OK, "an empty tensor needs no array");
    lf_tensor_file_free(file);
}

/* The call failed with `status` and the file's message names the path and `want`. */
static void expect_error(lf_tensor_file *file, lf_status got, lf_status status, const char *want)
{
    const char *msg = lf_tensor_file_last_error(file);
    cr_assert_eq(got, status, "%s: %s", lf_status_string(got), msg);
    cr_assert(strncmp(msg, path, strlen(path)) == 0, "message \"%s\" starts without the path", msg);
    cr_assert(strstr(msg, want) != NULL, "message \"%s\" lacks \"%s\"", msg, want);
}

Test(tensor_file, reads_refuse_wrong_kind_count_and_name)
{
    lf_tensor_file *file = open_ok();
    float f[8];
    int64_t i[8];
    expect_error(file, lf_tensor_file_read_f32(file, "e", f, 2), LF_ERR_FORMAT, "\"e\" is I32, not a float");
    expect_error(file, lf_tensor_file_read_i64(file, "a", i, 4), LF_ERR_FORMAT, "\"a\" is F32, not an integer");
    expect_error(file, lf_tensor_file_read_f32(file, "a", f, 5), LF_ERR_ARGUMENT,
                 "tensor \"a\" holds 4 elements, the destination 5");
    expect_error(file, lf_tensor_file_read_f32(file, "a", NULL, 4), LF_ERR_ARGUMENT, "out is NULL");
    expect_error(file, lf_tensor_file_read_f32(file, "x", f, 1), LF_ERR_FORMAT, "no tensor \"x\"");
    expect_error(file, lf_tensor_file_read_f32(file, NULL, f, 1), LF_ERR_ARGUMENT, "name is NULL");

    lf_tensor_info info;
    memset(&info, 0xab, sizeof info);
    expect_error(file, lf_tensor_file_find(file, "lengths", &info), LF_ERR_FORMAT, "no tensor \"lengths\"");
    cr_assert(info.name == NULL && info.count == 0, "info is zeroed when the tensor is absent");
    expect_error(file, lf_tensor_file_info(file, 7, &info), LF_ERR_ARGUMENT, "index 7 is out of range");

    cr_assert_eq(lf_tensor_file_info(file, 0, NULL), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_tensor_file_find(file, "a", NULL), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_tensor_file_read_f32(NULL, "a", f, 4), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_tensor_file_read_i64(NULL, "e", i, 2), LF_ERR_ARGUMENT);
    cr_assert_null(lf_tensor_file_metadata(file, NULL));
    lf_tensor_file_free(file);
}

Test(tensor_file, null_handle_is_harmless)
{
    lf_tensor_file_free(NULL);
    cr_assert_eq(lf_tensor_file_count(NULL), 0);
    cr_assert_null(lf_tensor_file_metadata(NULL, "heads"));
    cr_assert(lf_tensor_file_last_error(NULL) != NULL);
    lf_tensor_info info;
    cr_assert_eq(lf_tensor_file_info(NULL, 0, &info), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_tensor_file_find(NULL, "a", &info), LF_ERR_ARGUMENT);
    cr_assert_str_eq(lf_dtype_name(LF_DTYPE_BF16), "BF16");
    cr_assert_str_eq(lf_dtype_name(LF_DTYPE_I64), "I64");
    cr_assert_str_eq(lf_dtype_name((lf_dtype)99), "unknown");
}

/* Opening fails with `status`, *out NULL, and errbuf holding the path and `want`. */
static void expect_open_error(const char *p, lf_status status, const char *want)
{
    lf_tensor_file *file = (lf_tensor_file *)&file;
    char msg[512] = "";
    lf_status st = lf_tensor_file_open(p, &file, msg, sizeof msg);
    cr_assert_eq(st, status, "%s: %s", lf_status_string(st), msg);
    cr_assert_null(file, "*out is NULL on failure");
    if (p) cr_assert(strstr(msg, p) != NULL, "message \"%s\" lacks the path", msg);
    cr_assert(strstr(msg, want) != NULL, "message \"%s\" lacks \"%s\"", msg, want);
}

Test(tensor_file, open_refuses_what_is_not_a_tensor_file, .timeout = 20)
{
    expect_open_error(path, LF_ERR_IO, "cannot open"); /* not written yet */
    expect_open_error(dir, LF_ERR_IO, "not a regular file");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_open_error(fifo, LF_ERR_IO, "not a regular file"); /* at once: the test has a timeout */
    expect_open_error(NULL, LF_ERR_ARGUMENT, "path is NULL");
    write_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", DATA, 8);
    expect_open_error(path, LF_ERR_FORMAT, "tensor \"a\": data_offsets [0, 8] hold 8 bytes");
    static const char legacy[] = "\x80\x02\x8a\x0al\xfc\x9c\x46\xf9 j\xa8P\x19."; /* torch.save's magic */
    write_raw(legacy, sizeof legacy - 1);
    expect_open_error(path, LF_ERR_FORMAT, "PyTorch pickle checkpoint, not a safetensors file");
    char msg[64];
    cr_assert_eq(lf_tensor_file_open(path, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_tensor_file_open(path, NULL, NULL, 0), LF_ERR_ARGUMENT, "errbuf may be NULL");
}
