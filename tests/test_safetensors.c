/*
 * test_safetensors.c - the safetensors reader and writer: a round trip, dtype
 * conversions against hand-computed values, and one test per malformed input
 * (each a small change to a file that the baseline test shows to be valid).
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "safetensors.h"
#include "st_write.h"

/* ---- Building files in memory -------------------------------------------- */

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* A file of raw parts: the 8-byte length `header_len` (normally strlen(header)),
 * the header text, then `data_size` bytes of a nonzero pattern, or `data`. */
static uint8_t *make_raw(uint64_t header_len, const char *header, const void *data, size_t data_size,
                         size_t *size)
{
    size_t text = strlen(header);
    *size = 8 + text + data_size;
    uint8_t *b = malloc(*size);
    cr_assert(b != NULL);
    put_u64(b, header_len);
    memcpy(b + 8, header, text);
    for (size_t i = 0; i < data_size; i++)
        b[8 + text + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)(i * 37 + 1);
    return b;
}

static uint8_t *make_file(const char *header, size_t data_size, size_t *size)
{
    return make_raw(strlen(header), header, NULL, data_size, size);
}

static void assert_zeroed(const lf_st_file *f)
{
    cr_assert(f->bytes == NULL && f->size == 0 && f->tensors == NULL && f->count == 0 &&
              f->meta_keys == NULL && f->meta_values == NULL && f->meta_count == 0,
              "a failed parse must leave *out zeroed");
}

/* Parses a file that must be rejected as malformed, with a message holding
 * `want` (and `want2` when not NULL). */
static void expect_format_raw(uint8_t *bytes, size_t size, const char *want, const char *want2)
{
    lf_st_file f;
    memset(&f, 0xab, sizeof f); /* garbage in, so zeroing is really checked */
    char msg[512] = "";
    lf_status st = lf_st_parse(bytes, size, &f, msg, sizeof msg);
    cr_assert_eq(st, LF_ERR_FORMAT, "status %s, message \"%s\"", lf_status_string(st), msg);
    cr_assert(strstr(msg, want) != NULL, "message \"%s\" lacks \"%s\"", msg, want);
    if (want2) cr_assert(strstr(msg, want2) != NULL, "message \"%s\" lacks \"%s\"", msg, want2);
    assert_zeroed(&f);
    lf_st_close(&f);
}

static void expect_format(const char *header, size_t data_size, const char *want, const char *want2)
{
    size_t size;
    uint8_t *b = make_file(header, data_size, &size);
    expect_format_raw(b, size, want, want2);
}

static void parse_ok(const char *header, size_t data_size, lf_st_file *f)
{
    size_t size;
    uint8_t *b = make_file(header, data_size, &size);
    char msg[512] = "";
    lf_status st = lf_st_parse(b, size, f, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "status %s, message \"%s\"", lf_status_string(st), msg);
}

/* The valid file every bad case below changes in one place. */
#define GOOD_Q "\"to_q.weight\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,128]}"
#define GOOD_K "\"to_k.weight\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[128,140]}"
#define GOOD_META "\"__metadata__\":{\"heads\":\"4\",\"format\":\"pt\"}"

Test(safetensors_parse, baseline_is_valid)
{
    lf_st_file f;
    parse_ok("{" GOOD_K "," GOOD_Q "," GOOD_META "}", 140, &f);
    cr_assert_eq(f.count, 2);
    cr_assert_str_eq(f.tensors[0].name, "to_k.weight", "tensors are sorted by name");
    cr_assert_str_eq(f.tensors[1].name, "to_q.weight");

    const lf_st_tensor *q = lf_st_find(&f, "to_q.weight");
    cr_assert(q == &f.tensors[1]);
    cr_assert_eq(q->dtype, LF_ST_F32);
    cr_assert_eq(q->ndim, 2);
    cr_assert(q->shape[0] == 4 && q->shape[1] == 8);
    cr_assert_eq(q->count, 32);
    size_t data_start = f.size - 140;
    cr_assert(q->data == f.bytes + data_start);
    const lf_st_tensor *k = lf_st_find(&f, "to_k.weight");
    cr_assert(k && k->dtype == LF_ST_F16 && k->count == 6);
    cr_assert(k->data == f.bytes + data_start + 128);
    cr_assert_null(lf_st_find(&f, "to_v.weight"));

    cr_assert_eq(f.meta_count, 2);
    cr_assert_str_eq(lf_st_meta(&f, "heads"), "4");
    cr_assert_str_eq(lf_st_meta(&f, "format"), "pt");
    cr_assert_null(lf_st_meta(&f, "norm"));
    lf_st_close(&f);
    assert_zeroed(&f);
}

Test(safetensors_parse, padded_header_scalar_and_empty_tensors)
{
    lf_st_file f;
    /* An empty tensor inside another's range holds no byte, so no overlap; a
     * zero dimension makes the count 0 even beside huge ones. */
    parse_ok("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
             "\"e\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[2,2]},"
             "\"z\":{\"dtype\":\"F64\",\"shape\":[9007199254740992,9007199254740992,0],"
             "\"data_offsets\":[4,4]}}    \n\t  ",
             4, &f);
    cr_assert_eq(f.count, 3);
    const lf_st_tensor *s = lf_st_find(&f, "s"), *e = lf_st_find(&f, "e"), *z = lf_st_find(&f, "z");
    cr_assert(s && s->ndim == 0 && s->count == 1);
    cr_assert(e && e->ndim == 2 && e->count == 0);
    cr_assert(z && z->ndim == 3 && z->count == 0);
    lf_st_close(&f);

    parse_ok("{}      ", 0, &f);
    cr_assert_eq(f.count, 0);
    cr_assert_null(lf_st_find(&f, "s"));
    lf_st_close(&f);
}

/* ---- File-level errors --------------------------------------------------- */

Test(safetensors_bad, file_shorter_than_8_bytes)
{
    uint8_t *b = malloc(5);
    cr_assert(b != NULL);
    memcpy(b, "\x02\0\0\0\0", 5);
    expect_format_raw(b, 5, "shorter", "5 bytes");
}

Test(safetensors_bad, header_length_past_end)
{
    size_t size;
    uint8_t *b = make_raw(1000, "{}", NULL, 10, &size);
    expect_format_raw(b, size, "header length 1000", "past the end");
}

Test(safetensors_bad, header_length_absurd)
{
    size_t size;
    uint8_t *b = make_raw(200u * 1000 * 1000, "{}", NULL, 10, &size);
    expect_format_raw(b, size, "header length 200000000", "limit");
}

/* A PyTorch checkpoint: torch.save's zip archive (a local file header, its
 * first entry "archive/data.pkl") or the legacy pickle stream (protocol 2,
 * starting with torch's magic number; protocols up to 5 exist). */
static void expect_pytorch(const char *head, size_t len, const char *kind)
{
    uint8_t *b = malloc(len);
    cr_assert(b != NULL);
    memcpy(b, head, len);
    expect_format_raw(b, len, kind, "not a safetensors file; convert it with python -m linformer_cl.convert FILE model.safetensors --heads H");
}

Test(safetensors_bad, pytorch_checkpoints_are_named)
{
    static const char zip[] = "PK\x03\x04\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x10\0\0\0archive/data.pkl";
    expect_pytorch(zip, sizeof zip - 1, "a PyTorch zip checkpoint");
    static const char legacy[] = "\x80\x02\x8a\x0al\xfc\x9c\x46\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.";
    expect_pytorch(legacy, sizeof legacy - 1, "a PyTorch pickle checkpoint");
    static const char proto5[] = "\x80\x05\x95\x10\0\0\0\0\0\0\0}\x94\x8c\x01w\x94K\x01s.";
    expect_pytorch(proto5, sizeof proto5 - 1, "a PyTorch pickle checkpoint");
}

Test(safetensors_parse, header_length_like_a_magic_number_is_still_safetensors)
{
    /* A length whose low bytes read "\x80\x02" is a (big) safetensors header
     * when the JSON follows: the magic alone does not decide. */
    char header[0x280 + 1];
    memset(header, ' ', 0x280);
    memcpy(header, "{}", 2);
    header[0x280] = 0;
    size_t size;
    uint8_t *b = make_raw(0x280, header, NULL, 0, &size);
    cr_assert(b[0] == 0x80 && b[1] == 0x02);
    lf_st_file f;
    char msg[256] = "";
    cr_assert_eq(lf_st_parse(b, size, &f, msg, sizeof msg), LF_OK, "%s", msg);
    lf_st_close(&f);
}

Test(safetensors_bad, json_malformed)
{
    expect_format("{\"to_q.weight\":{\"dtype\":\"F32\",\"shape\":[4,8}}", 128, "not valid JSON", NULL);
}

Test(safetensors_bad, json_truncated_after_comma)
{
    expect_format("{" GOOD_Q ",", 128, "not valid JSON", NULL);
}

Test(safetensors_bad, json_empty_header)
{
    expect_format("", 0, "not valid JSON", NULL);
}

Test(safetensors_bad, json_not_an_object)
{
    expect_format("[1, 2, 3]", 0, "not a JSON object", NULL);
}

Test(safetensors_bad, text_after_json)
{
    expect_format("{" GOOD_Q "} {}", 128, "after", NULL);
}

/* ---- Entry errors -------------------------------------------------------- */

Test(safetensors_bad, entry_not_an_object)
{
    expect_format("{" GOOD_Q ",\"bias\":[1,2]}", 128, "\"bias\"", "not a JSON object");
}

Test(safetensors_bad, dtype_missing)
{
    expect_format("{\"w\":{\"shape\":[4,8],\"data_offsets\":[0,128]}}", 128, "\"w\"", "dtype");
}

Test(safetensors_bad, dtype_not_a_string)
{
    expect_format("{\"w\":{\"dtype\":4,\"shape\":[4,8],\"data_offsets\":[0,128]}}", 128, "\"w\"", "dtype");
}

Test(safetensors_bad, unknown_dtype)
{
    expect_format("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[4,8],\"data_offsets\":[0,32]}}", 32,
                  "tensor \"w\"", "unknown dtype \"F8_E4M3\"");
}

Test(safetensors_bad, shape_missing)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,128]}}", 128, "\"w\"", "shape");
}

Test(safetensors_bad, shape_not_an_array)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":32,\"data_offsets\":[0,128]}}", 128, "\"w\"", "shape");
}

Test(safetensors_bad, data_offsets_missing)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8]}}", 128, "\"w\"", "data_offsets");
}

Test(safetensors_bad, data_offsets_not_an_array)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":\"0-128\"}}", 128, "\"w\"",
                  "data_offsets");
}

Test(safetensors_bad, too_many_dims)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                  "\"w\"", "9 dimensions");
}

Test(safetensors_bad, negative_dim)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,-8],\"data_offsets\":[0,128]}}", 128,
                  "\"w\": shape[1] is -8", NULL);
}

Test(safetensors_bad, fractional_dim)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,2.5],\"data_offsets\":[0,40]}}", 40,
                  "\"w\": shape[1] is 2.5", NULL);
}

Test(safetensors_bad, dim_past_2_53)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[9007199254740994],\"data_offsets\":[0,4]}}", 4,
                  "\"w\": shape[0]", "2^53");
}

Test(safetensors_bad, dim_not_a_number)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,\"8\"],\"data_offsets\":[0,128]}}", 128,
                  "\"w\": shape[1] is not a number", NULL);
}

Test(safetensors_bad, shape_product_overflows)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data_offsets\":[0,0]}}",
                  0, "\"w\"", "overflows");
}

Test(safetensors_bad, shape_byte_size_overflows)
{
    /* 2^61 elements fit in size_t, their 2^64 bytes do not. */
    expect_format("{\"w\":{\"dtype\":\"F64\",\"shape\":[1125899906842624,2048],\"data_offsets\":[0,0]}}", 0,
                  "\"w\"", "overflows");
}

Test(safetensors_bad, data_offsets_one_entry)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[128]}}", 128, "\"w\"",
                  "data_offsets has 1 entries");
}

Test(safetensors_bad, data_offsets_three_entries)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,128,256]}}", 256, "\"w\"",
                  "data_offsets has 3 entries");
}

Test(safetensors_bad, data_offsets_negative)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[-4,124]}}", 128,
                  "\"w\": data_offsets[0] is -4", NULL);
}

Test(safetensors_bad, data_offsets_fractional)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,127.5]}}", 128,
                  "\"w\": data_offsets[1] is 127.5", NULL);
}

Test(safetensors_bad, data_offsets_not_numbers)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[null,128]}}", 128,
                  "\"w\": data_offsets[0] is not a number", NULL);
}

Test(safetensors_bad, data_offsets_begin_after_end)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[64,0]}}", 128, "\"w\"",
                  "[64, 0] begin after their end");
}

Test(safetensors_bad, data_offsets_past_data)
{
    expect_format("{" GOOD_Q "}", 100, "\"to_q.weight\"", "past the data section (100 bytes)");
}

Test(safetensors_bad, byte_length_mismatch)
{
    size_t size;
    uint8_t *b = make_file("{\"to_q.weight\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,100]}}",
                           128, &size);
    lf_st_file f;
    char msg[512] = "";
    cr_assert_eq(lf_st_parse(b, size, &f, msg, sizeof msg), LF_ERR_FORMAT);
    cr_assert_str_eq(msg, "tensor \"to_q.weight\": data_offsets [0, 100] hold 100 bytes, "
                          "shape [4, 8] F32 needs 128");
}

Test(safetensors_bad, overlapping_tensors)
{
    expect_format("{\"a\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]},"
                  "\"b\":{\"dtype\":\"I32\",\"shape\":[16],\"data_offsets\":[32,96]}}",
                  96, "\"a\" [0, 64] and \"b\" [32, 96] overlap", NULL);
}

Test(safetensors_bad, overlap_found_whatever_the_order)
{
    /* The overlapping pair is neither first in the JSON nor adjacent in it. */
    expect_format("{\"c\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[100,116]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[40,56]},"
                  "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[8,16]},"
                  "\"y\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[52,60]}}",
                  116, "\"x\" [40, 56] and \"y\" [52, 60] overlap", NULL);
}

Test(safetensors_bad, duplicate_tensor_names)
{
    expect_format("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                  16, "duplicate tensor \"w\"", NULL);
}

Test(safetensors_bad, metadata_value_not_a_string)
{
    expect_format("{" GOOD_Q ",\"__metadata__\":{\"format\":\"pt\",\"heads\":8}}", 128,
                  "__metadata__ \"heads\"", "not a string");
}

Test(safetensors_bad, metadata_not_an_object)
{
    expect_format("{" GOOD_Q ",\"__metadata__\":\"heads=8\"}", 128, "__metadata__", "not a JSON object");
}

Test(safetensors_bad, metadata_duplicate_key)
{
    expect_format("{" GOOD_Q ",\"__metadata__\":{\"heads\":\"8\",\"heads\":\"4\"}}", 128,
                  "duplicate __metadata__ key \"heads\"", NULL);
}

Test(safetensors_bad, metadata_twice)
{
    expect_format("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__", NULL);
}

/* "\u0000" would cut a name, key or value short ("x\u0000y" read as "x"):
 * refused, the string shown as written; an escaped backslash before "u0000" is
 * no NUL. */
Test(safetensors_bad, escaped_nul_in_a_name_key_or_value)
{
    expect_format("{\"to_q\\u0000.weight\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,128]}}", 128,
                  "the name \"to_q\\u0000.weight\" holds an escaped NUL", NULL);
    expect_format("{" GOOD_Q ",\"__metadata__\":{\"heads\\u0000x\":\"8\"}}", 128,
                  "the name \"heads\\u0000x\" holds an escaped NUL", NULL);
    expect_format("{" GOOD_Q ",\"__metadata__\":{\"heads\" : \"8\\u0000\"}}", 128,
                  "the value \"8\\u0000\" of \"heads\" holds an escaped NUL", NULL);
    lf_st_file f;
    parse_ok("{" GOOD_Q ",\"__metadata__\":{\"a\\\\u0000\":\"\\\\u0000\"}}", 128, &f);
    cr_assert_str_eq(lf_st_meta(&f, "a\\u0000"), "\\u0000");
    lf_st_close(&f);
}

/* ---- Arguments and messages ---------------------------------------------- */

Test(safetensors_args, null_arguments)
{
    lf_st_file f;
    char msg[256] = "";
    cr_assert_eq(lf_st_parse(NULL, 16, &f, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_assert(strstr(msg, "bytes") != NULL, "%s", msg);
    assert_zeroed(&f);
    size_t size;
    uint8_t *b = make_file("{" GOOD_Q "}", 128, &size);
    cr_assert_eq(lf_st_parse(b, size, NULL, msg, sizeof msg), LF_ERR_ARGUMENT); /* b is freed */
    cr_assert_eq(lf_st_open(NULL, &f, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_st_to_f32(NULL, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_assert_eq(lf_st_to_i64(NULL, NULL, msg, sizeof msg), LF_ERR_ARGUMENT);
    cr_assert_null(lf_st_find(NULL, "w"));
    cr_assert_null(lf_st_meta(NULL, "w"));
    lf_st_close(NULL);
    lf_st_file zero = {0};
    lf_st_close(&zero);
    assert_zeroed(&zero);
}

Test(safetensors_args, message_buffer_optional_and_bounded)
{
    size_t size;
    lf_st_file f;
    uint8_t *b = make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,-8],\"data_offsets\":[0,128]}}", 128, &size);
    cr_assert_eq(lf_st_parse(b, size, &f, NULL, 0), LF_ERR_FORMAT);

    char msg[12];
    memset(msg, 'x', sizeof msg);
    b = make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[4,-8],\"data_offsets\":[0,128]}}", 128, &size);
    cr_assert_eq(lf_st_parse(b, size, &f, msg, 8), LF_ERR_FORMAT);
    cr_assert_str_eq(msg, "tensor ", "truncated to the buffer, NUL-terminated");
    cr_assert_eq(msg[8], 'x', "nothing written past msg_size");
}

Test(safetensors_args, dtype_names)
{
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_F32), "F32");
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_F16), "F16");
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_BF16), "BF16");
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_F64), "F64");
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_I32), "I32");
    cr_assert_str_eq(lf_st_dtype_name(LF_ST_I64), "I64");
    cr_assert_str_eq(lf_st_dtype_name((lf_st_dtype)99), "unknown");
}

/* ---- Conversions against hand-computed values ---------------------------- */

/* Parses a one-tensor file whose tensor sits at an odd address: an even
 * header length, then a 3-byte pad, then the tensor's little-endian bytes. */
static const lf_st_tensor *one_tensor(lf_st_file *f, const char *dtype, size_t count,
                                      const uint8_t *bytes, size_t nbytes)
{
    char header[256];
    snprintf(header, sizeof header,
             "{\"t\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[3,%zu]}} ", dtype, count,
             3 + nbytes);
    if (strlen(header) % 2) strcat(header, " ");
    uint8_t data[256] = {0x55, 0x66, 0x77};
    cr_assert(nbytes + 3 <= sizeof data);
    memcpy(data + 3, bytes, nbytes);
    size_t size;
    uint8_t *b = make_raw(strlen(header), header, data, 3 + nbytes, &size);
    char msg[512] = "";
    lf_status st = lf_st_parse(b, size, f, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s", msg);
    const lf_st_tensor *t = lf_st_find(f, "t");
    cr_assert(t && t->count == count);
    cr_assert((uintptr_t)t->data % 2 == 1, "the data should sit at an odd address");
    return t;
}

/* `bytes` as one tensor of `dtype` with `count` values converts to exactly
 * `want` (NaN to NaN, -0 to -0), and nothing is written past count. */
static void expect_f32(const char *dtype, const uint8_t *bytes, size_t nbytes, const float *want, size_t count)
{
    float out[16];
    cr_assert_lt(count, sizeof out / sizeof out[0]);
    out[count] = LF_POISON;
    lf_st_file f;
    const lf_st_tensor *t = one_tensor(&f, dtype, count, bytes, nbytes);
    cr_assert_eq(lf_st_to_f32(t, out, NULL, 0), LF_OK, "%s", dtype);
    for (size_t i = 0; i < count; i++) {
        if (isnan(want[i])) {
            cr_assert(isnan(out[i]), "%s [%zu]: got %g, want NaN", dtype, i, out[i]);
        } else {
            cr_assert(out[i] == want[i] && !signbit(out[i]) == !signbit(want[i]),
                      "%s [%zu]: got %.9g, want %.9g", dtype, i, out[i], want[i]);
        }
    }
    cr_assert_eq(out[count], LF_POISON, "%s: nothing written past count", dtype);
    lf_st_close(&f);
}

Test(safetensors_convert, f16)
{
    static const uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x3555,
                                 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x8001};
    const float want[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, 1023 * 0x1p-24f, 0x1p-14f,
                          0.333251953125f, INFINITY, -INFINITY, NAN, -0.0f, -0x1p-24f};
    enum { N = sizeof h / sizeof h[0] };
    uint8_t bytes[2 * N];
    for (size_t i = 0; i < N; i++) {
        bytes[2 * i] = (uint8_t)h[i];
        bytes[2 * i + 1] = (uint8_t)(h[i] >> 8);
    }
    expect_f32("F16", bytes, sizeof bytes, want, N);
}

Test(safetensors_convert, bf16)
{
    static const uint8_t bytes[] = {0x80, 0x3f, 0x49, 0xc0, 0x80, 0x7f, 0x01, 0x00, 0x00, 0x80, 0xc0, 0x7f};
    const float want[] = {1.0f, -3.140625f, INFINITY, 0x1p-133f, -0.0f, NAN};
    expect_f32("BF16", bytes, sizeof bytes, want, 6);
}

Test(safetensors_convert, f32_and_f64)
{
    /* 1.5, -0.1 (0xbfb999999999999a), 1e300 (past f32: +inf), 2^-1074 (to 0). */
    static const uint8_t f64[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99,
                                  0xb9, 0xbf, 0x9c, 0x75, 0x00, 0x88, 0x3c, 0xe4, 0x37, 0x7e,
                                  1, 0, 0, 0, 0, 0, 0, 0};
    const float want64[] = {1.5f, -0.1f, INFINITY, 0.0f};
    expect_f32("F64", f64, sizeof f64, want64, 4);

    /* -2.5 (0xc0200000) and 3e-45 (0x00000002, subnormal). */
    static const uint8_t f32[] = {0, 0, 0x20, 0xc0, 2, 0, 0, 0};
    const float want32[] = {-2.5f, 0x1p-148f};
    expect_f32("F32", f32, sizeof f32, want32, 2);
}

Test(safetensors_convert, i32_and_i64)
{
    static const uint8_t i64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  /* -1 */
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,  /* INT64_MAX */
                                  0, 0, 0, 0, 0, 0, 0, 0x80,                       /* INT64_MIN */
                                  0x2a, 0, 0, 0, 1, 0, 0, 0};                      /* 2^32 + 42 */
    const int64_t want64[] = {-1, INT64_MAX, INT64_MIN, 4294967338};
    lf_st_file f;
    const lf_st_tensor *t = one_tensor(&f, "I64", 4, i64, sizeof i64);
    int64_t out[4];
    cr_assert_eq(lf_st_to_i64(t, out, NULL, 0), LF_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], want64[i], "[%d]: %lld", i, (long long)out[i]);
    lf_st_close(&f);

    static const uint8_t i32[] = {0xf9, 0xff, 0xff, 0xff, 0, 0, 0, 0x80, 0x39, 0x30, 0, 0};
    const int64_t want32[] = {-7, INT32_MIN, 12345};
    t = one_tensor(&f, "I32", 3, i32, sizeof i32);
    cr_assert_eq(lf_st_to_i64(t, out, NULL, 0), LF_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(out[i], want32[i], "[%d]: %lld", i, (long long)out[i]);
    lf_st_close(&f);
}

Test(safetensors_convert, wrong_kind_is_a_format_error)
{
    static const uint8_t four[] = {1, 2, 3, 4};
    lf_st_file f;
    const lf_st_tensor *t = one_tensor(&f, "I32", 1, four, 4);
    float fl;
    char msg[256] = "";
    cr_assert_eq(lf_st_to_f32(t, &fl, msg, sizeof msg), LF_ERR_FORMAT);
    cr_assert_str_eq(msg, "tensor \"t\" is I32, not a float type");
    lf_st_close(&f);

    t = one_tensor(&f, "BF16", 2, four, 4);
    int64_t i64[2];
    cr_assert_eq(lf_st_to_i64(t, i64, msg, sizeof msg), LF_ERR_FORMAT);
    cr_assert_str_eq(msg, "tensor \"t\" is BF16, not an integer type");
    lf_st_close(&f);
}

/* ---- Files: writing, reading back, errors -------------------------------- */

static char dir[64];

static void make_dir(void) { lf_test_make_dir(dir, "safetensors"); }
static void remove_dir(void) { lf_test_remove_dir(dir); }

static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

TestSuite(safetensors_file, .init = make_dir, .fini = remove_dir);

Test(safetensors_file, write_read_round_trip)
{
    uint64_t seed = lf_test_seed();
    float a[2 * 3 * 5], scalar;
    lf_test_fill(a, 30, &seed, -4.0f, 4.0f);
    lf_test_fill(&scalar, 1, &seed, 1.0f, 2.0f);
    const int32_t ints[7] = {-7, 0, 1, INT32_MAX, INT32_MIN, 123456, -2};
    const int64_t shape_a[] = {2, 3, 5}, shape_i[] = {7}, shape_e[] = {0, 3};
    const st_tensor tensors[] = {
        {"layers.0.w", ST_F32, 3, shape_a, a},
        {"lengths", ST_I32, 1, shape_i, ints},
        {"scale", ST_F32, 0, NULL, &scalar},
        {"empty", ST_F32, 2, shape_e, NULL},
    };
    const char *meta[] = {"heads", "4", "activation", "gelu \"erf\""};
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    cr_assert_eq(st_save(path, tensors, 4, meta, 2, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(files_in_dir(), 1, "the temporary file is renamed away");

    lf_st_file f;
    lf_status st = lf_st_open(path, &f, msg, sizeof msg);
    cr_assert_eq(st, LF_OK, "%s: %s", lf_status_string(st), msg);

    /* Layout: 8-byte length, a header padded with spaces to a multiple of 8, data. */
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)f.bytes[i] << 8 * i;
    cr_assert_eq(n % 8, 0);
    cr_assert_eq(f.size, 8 + n + sizeof a + sizeof ints + sizeof scalar);
    cr_assert_eq(f.bytes[8], '{');
    cr_assert(f.bytes[8 + n - 1] == '}' || f.bytes[8 + n - 1] == ' ');

    cr_assert_eq(f.count, 4);
    const lf_st_tensor *t = lf_st_find(&f, "layers.0.w");
    cr_assert(t && t->dtype == LF_ST_F32 && t->ndim == 3 && t->count == 30);
    cr_assert(t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 5);
    cr_assert(t->data == f.bytes + 8 + n, "tensors are laid out in the order given");
    float back[30];
    lf_test_poison(back, 30);
    cr_assert_eq(lf_st_to_f32(t, back, NULL, 0), LF_OK);
    cr_assert(memcmp(back, a, sizeof a) == 0, "f32 data must come back bit for bit");

    t = lf_st_find(&f, "lengths");
    cr_assert(t && t->dtype == LF_ST_I32 && t->ndim == 1 && t->shape[0] == 7);
    int64_t iback[7];
    cr_assert_eq(lf_st_to_i64(t, iback, NULL, 0), LF_OK);
    for (int i = 0; i < 7; i++) cr_assert_eq(iback[i], ints[i]);

    t = lf_st_find(&f, "scale");
    cr_assert(t && t->ndim == 0 && t->count == 1);
    float s = LF_POISON;
    cr_assert_eq(lf_st_to_f32(t, &s, NULL, 0), LF_OK);
    cr_assert_eq(s, scalar);

    t = lf_st_find(&f, "empty");
    cr_assert(t && t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 3 && t->count == 0);

    cr_assert_eq(f.meta_count, 2);
    cr_assert_str_eq(lf_st_meta(&f, "heads"), "4");
    cr_assert_str_eq(lf_st_meta(&f, "activation"), "gelu \"erf\"");
    lf_st_close(&f);
}

Test(safetensors_file, write_replaces_existing_file)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    FILE *fp = fopen(path, "w");
    cr_assert(fp != NULL);
    fputs("old contents", fp);
    fclose(fp);

    const float v[3] = {1.25f, -3.5f, 7.0f};
    const int64_t shape[] = {3};
    const st_tensor t = {"v", ST_F32, 1, shape, v};
    cr_assert_eq(st_save(path, &t, 1, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    lf_st_file f;
    cr_assert_eq(lf_st_open(path, &f, msg, sizeof msg), LF_OK, "%s", msg);
    float back[3];
    cr_assert_eq(lf_st_to_f32(lf_st_find(&f, "v"), back, NULL, 0), LF_OK);
    cr_assert(memcmp(back, v, sizeof v) == 0);
    cr_assert_eq(f.meta_count, 0);
    lf_st_close(&f);
}

Test(safetensors_file, header_padded_to_multiple_of_8)
{
    /* Names of 1 to 8 characters give headers of every length modulo 8. */
    const int32_t v[2] = {-3, 9};
    const int64_t shape[] = {2};
    char path[128], msg[512] = "", name[16] = "";
    snprintf(path, sizeof path, "%s/p.safetensors", dir);
    for (int len = 1; len <= 8; len++) {
        strcat(name, "n");
        const st_tensor t = {name, ST_I32, 1, shape, v};
        cr_assert_eq(st_save(path, &t, 1, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
        lf_st_file f;
        cr_assert_eq(lf_st_open(path, &f, msg, sizeof msg), LF_OK, "%s", msg);
        uint64_t n = 0;
        for (int i = 0; i < 8; i++) n |= (uint64_t)f.bytes[i] << 8 * i;
        cr_assert_eq(n % 8, 0, "header length %llu", (unsigned long long)n);
        const uint8_t *pad = memchr(f.bytes + 8, ' ', n); /* the JSON itself has no spaces */
        size_t json_len = pad ? (size_t)(pad - f.bytes - 8) : n;
        cr_assert_eq(f.bytes[8 + json_len - 1], '}');
        cr_assert_lt(n - json_len, 8, "at most 7 spaces of padding");
        for (size_t i = json_len; i < n; i++) cr_assert_eq(f.bytes[8 + i], ' ');
        cr_assert(lf_st_find(&f, name) && lf_st_find(&f, name)->data == f.bytes + 8 + n);
        lf_st_close(&f);
    }
}

static void expect_write_error(const st_tensor *t, size_t count, const char *const *meta, size_t pairs,
                               const char *text)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    cr_assert_eq(st_save(path, t, count, meta, pairs, NULL, 0, msg, sizeof msg), -1, "no error: %s", msg);
    cr_assert(strstr(msg, text) != NULL, "message \"%s\" lacks \"%s\"", msg, text);
    cr_assert_eq(files_in_dir(), 0, "a failed write leaves no file");
}

Test(safetensors_file, write_rejects_bad_tensors)
{
    const float v[4] = {1, 2, 3, 4};
    const int64_t shape[] = {4}, negative[] = {-4};
    const st_tensor twice[] = {{"w", ST_F32, 1, shape, v}, {"w", ST_F32, 1, shape, v}};
    expect_write_error(twice, 2, NULL, 0, "tensor \"w\" is given twice");
    const st_tensor reserved = {"__metadata__", ST_F32, 1, shape, v};
    expect_write_error(&reserved, 1, NULL, 0, "reserved");
    const st_tensor neg = {"n", ST_F32, 1, negative, v};
    expect_write_error(&neg, 1, NULL, 0, "tensor \"n\": shape[0] is -4");
    const st_tensor nodata = {"d", ST_I32, 1, shape, NULL};
    expect_write_error(&nodata, 1, NULL, 0, "tensor \"d\": data is NULL");
    const st_tensor ok = {"w", ST_F32, 1, shape, v};
    const char *meta[] = {"k", "1", "k", "2"};
    expect_write_error(&ok, 1, meta, 2, "metadata key \"k\" is given twice");
    const char *null_value[] = {"k", NULL};
    expect_write_error(&ok, 1, null_value, 1, "metadata pair 0");
}

Test(safetensors_file, write_to_missing_directory)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/no/such/dir/m.safetensors", dir);
    const float v = 1;
    const st_tensor t = {"v", ST_F32, 0, NULL, &v};
    cr_assert_eq(st_save(path, &t, 1, NULL, 0, NULL, 0, msg, sizeof msg), -1, "%s", msg);
    cr_assert(strstr(msg, path) != NULL, "message \"%s\" lacks the path", msg);
}

Test(safetensors_file, directory_in_the_way_leaves_no_temporary)
{
    /* A directory in the way is refused before a temporary file is made. */
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/taken", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    const float v = 1;
    const st_tensor t = {"v", ST_F32, 0, NULL, &v};
    cr_assert_eq(st_save(path, &t, 1, NULL, 0, NULL, 0, msg, sizeof msg), -1, "%s", msg);
    cr_assert(strstr(msg, "Is a directory") != NULL, "%s", msg);
    cr_assert_eq(files_in_dir(), 1, "only the directory remains");
    rmdir(path);
}

Test(safetensors_file, open_missing_file)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    lf_st_file f;
    cr_assert_eq(lf_st_open(path, &f, msg, sizeof msg), LF_ERR_IO);
    cr_assert(strstr(msg, path) != NULL, "message \"%s\" lacks the path", msg);
    assert_zeroed(&f);
    lf_st_close(&f);
}

Test(safetensors_file, open_directory)
{
    char msg[512] = "";
    lf_st_file f;
    cr_assert_eq(lf_st_open(dir, &f, msg, sizeof msg), LF_ERR_IO);
    cr_assert(strstr(msg, dir) != NULL && strstr(msg, "not a regular file"), "%s", msg);
}

/* A FIFO with no writer would block a plain open() forever. */
Test(safetensors_file, open_fifo_and_device_refused_without_waiting, .timeout = 20)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/fifo.safetensors", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    lf_st_file f;
    cr_assert_eq(lf_st_open(path, &f, msg, sizeof msg), LF_ERR_IO, "%s", msg);
    cr_assert(strstr(msg, path) && strstr(msg, "not a regular file"), "%s", msg);
    cr_assert(strstr(msg, "FIFO"), "the message says what it is: %s", msg);
    assert_zeroed(&f);
    cr_assert_eq(lf_st_open("/dev/null", &f, msg, sizeof msg), LF_ERR_IO, "%s", msg);
    cr_assert(strstr(msg, "/dev/null") && strstr(msg, "character device"), "%s", msg);
}

Test(safetensors_file, open_malformed_file_names_path_and_tensor)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    size_t size;
    uint8_t *b = make_file("{\"to_v.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, &size);
    FILE *fp = fopen(path, "wb");
    cr_assert(fp != NULL);
    cr_assert_eq(fwrite(b, 1, size, fp), size);
    fclose(fp);
    free(b);
    lf_st_file f;
    cr_assert_eq(lf_st_open(path, &f, msg, sizeof msg), LF_ERR_FORMAT);
    char want[256];
    snprintf(want, sizeof want, "%s: tensor \"to_v.weight\": data_offsets [0, 8] hold 8 bytes", path);
    cr_assert(strncmp(msg, want, strlen(want)) == 0, "message \"%s\"", msg);
    assert_zeroed(&f);
}

/* A 4 GiB sparse file whose header is wrong, opened with room for 256 MiB
 * more than the process maps: the header is checked before the data is read,
 * so the error is the header's, never a failure to allocate the file. */
static void expect_header_error_in_big_file(const uint8_t *start, size_t len, const char *want)
{
    char path[128], msg[512] = "";
    snprintf(path, sizeof path, "%s/big.safetensors", dir);
    FILE *fp = fopen(path, "wb");
    cr_assert(fp != NULL);
    cr_assert_eq(fwrite(start, 1, len, fp), len);
    cr_assert_eq(ftruncate(fileno(fp), (off_t)4 << 30), 0);
    fclose(fp);
    long pages = 0;
    fp = fopen("/proc/self/statm", "r");
    cr_assert(fp && fscanf(fp, "%ld", &pages) == 1);
    fclose(fp);
    const rlim_t mapped = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    const struct rlimit limit = {mapped + (256 << 20), mapped + (256 << 20)};
    cr_assert_eq(setrlimit(RLIMIT_AS, &limit), 0);
    lf_st_file f;
    const lf_status st = lf_st_open(path, &f, msg, sizeof msg);
    cr_assert_eq(st, LF_ERR_FORMAT, "%s: %s", lf_status_string(st), msg);
    cr_assert(strstr(msg, path) && strstr(msg, want), "message \"%s\" lacks the path or \"%s\"", msg, want);
    assert_zeroed(&f);
}

Test(safetensors_file, big_file_header_length_checked_first)
{
    const uint8_t start[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    expect_header_error_in_big_file(start, sizeof start, "header length 18446744073709551615 is over the limit");
}

Test(safetensors_file, big_file_header_checked_first)
{
    uint8_t start[8 + 4] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'x', '"'};
    expect_header_error_in_big_file(start, sizeof start, "header is not valid JSON");
}
