/* kernel_params.c - the table of kernel parameters and its override (kernel_params.h). */
#define _GNU_SOURCE /* strcasestr */
#include "kernel_params.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define FAIL(...) (lf__fail_buf(msg, msg_size, LF_ERR_ARGUMENT, "LINFORMER_KERNEL_PARAMS: " __VA_ARGS__))

/*
 * The table, most specific rows first; a device takes the first row that
 * serves it. A row for one vendor's devices goes above the generic row of
 * their type, a row for wider vectors above one for narrower. The first row
 * of a variant that serves a device's vendor and width, whatever its type,
 * is also what variant=cpu|gpu starts from there.
 */
static const lf_kernel_params_row table[] = {
    /* CPU devices with 16-float vectors (AVX-512): two vectors of 16 queries
     * a work-item, 8 keys a pass (bench/NOTES.md, item 21): 16 of the 32
     * vector registers hold sums; 8 work-items a group laid across heads
     * (item 9); softmax and LayerNorm groups as on GPUs; elementwise runs of
     * float16s in groups of one (item 14: larger groups make Intel's
     * compiler gather across work-items), 256 floats a work-item as in the
     * rows below, where fewer work-groups cost both runtimes less (item 46) */
    {LF_DEVICE_CPU, NULL, 16,
     {.variant = LF_VARIANT_CPU, .tile_keys = 32, .tile_queries = 8, .query_block = 16, .query_vectors = 2,
      .key_block = 8, .d_split = 1, .softmax_group = 256, .layernorm_group = 128, .vector_width = 16, .vector_run = 16,
      .elementwise_group = 1}},
    /* Intel's CPU runtime on narrower vectors: the attention as below, the
     * elementwise runs of float16s, which its compiler takes without a
     * warning and runs faster than float8s there (item 29), 16 of them a
     * work-item (item 46) */
    {LF_DEVICE_CPU, "Intel(R)", 0,
     {.variant = LF_VARIANT_CPU, .tile_keys = 32, .tile_queries = 8, .query_block = 8, .query_vectors = 3,
      .key_block = 4, .d_split = 1, .softmax_group = 256, .layernorm_group = 128, .vector_width = 16, .vector_run = 16,
      .elementwise_group = 1}},
    /* other CPU devices (AVX2: 16 registers of 8 floats): three vectors of 8
     * queries, 4 keys a pass, so that 12 registers hold sums; elementwise
     * runs of float8s, as a float16 in a call is an ABI that PoCL's
     * compiler warns about without AVX-512 (item 29), 32 of them a
     * work-item (item 46) */
    {LF_DEVICE_CPU, NULL, 0,
     {.variant = LF_VARIANT_CPU, .tile_keys = 32, .tile_queries = 8, .query_block = 8, .query_vectors = 3,
      .key_block = 4, .d_split = 1, .softmax_group = 256, .layernorm_group = 128, .vector_width = 8, .vector_run = 32,
      .elementwise_group = 1}},
    /* every other device: one query a work-item, 64 a group, 32 keys a tile;
     * d_head split across DH / 64 work-items of a query (ds 0): a query's row
     * and sums, 2 DH floats a work-item unsplit, go to scratch or spill from
     * d_head 128 on every GPU compiler checked (bench/NOTES.md, "GPU
     * compilers"), while d_head 64 and less stay one work-item a query, clean
     * there and not yet timed split on a GPU; one float a work-item of the
     * elementwise kernels */
    {LF_DEVICE_GPU | LF_DEVICE_ACCELERATOR | LF_DEVICE_OTHER, NULL, 0,
     {.variant = LF_VARIANT_GPU, .tile_keys = 32, .tile_queries = 64, .query_block = 1, .query_vectors = 1,
      .key_block = 1, .d_split = 0, .softmax_group = 256, .layernorm_group = 128, .vector_width = 1, .vector_run = 1,
      .elementwise_group = 0}},
};
#define TABLE_ROWS (sizeof table / sizeof table[0])

/* The override's integer keys, in the order they are printed, with their ranges. */
static const struct {
    const char *key;
    size_t offset;
    int min, max;
} keys[] = {
    {"tk", offsetof(lf_kernel_params, tile_keys), 1, 1024},
    {"tq", offsetof(lf_kernel_params, tile_queries), 1, 4096},
    {"qb", offsetof(lf_kernel_params, query_block), 1, 16},
    {"qv", offsetof(lf_kernel_params, query_vectors), 1, 4},
    {"kb", offsetof(lf_kernel_params, key_block), 1, 16},
    {"ds", offsetof(lf_kernel_params, d_split), 0, 16},
    {"softmax_wg", offsetof(lf_kernel_params, softmax_group), 1, 4096},
    {"layernorm_wg", offsetof(lf_kernel_params, layernorm_group), 1, 4096},
    {"vw", offsetof(lf_kernel_params, vector_width), 1, 16},
    {"run", offsetof(lf_kernel_params, vector_run), 1, 64},
    {"elementwise_wg", offsetof(lf_kernel_params, elementwise_group), 0, 4096},
    {"split", offsetof(lf_kernel_params, split_sums), 0, 16},
};
#define KEYS (int)(sizeof keys / sizeof keys[0])
#define VARIANT_KEY KEYS /* the index of "variant" among the values parsed */

static int *field(lf_kernel_params *p, int key) { return (int *)((char *)p + keys[key].offset); }
static int value_of(const lf_kernel_params *p, int key) { return *(const int *)((const char *)p + keys[key].offset); }
static const char *variant_name(lf_kernel_variant v) { return v == LF_VARIANT_CPU ? "cpu" : "gpu"; }

/* Whether a row serves dev's vendor and vector width, whatever its type. */
static bool serves_kind(const lf_kernel_params_row *row, const lf_device_info *dev)
{
    return (!row->vendor || strcasestr(dev->vendor, row->vendor)) && dev->float_vector_width >= row->float_vector;
}

const lf_kernel_params *lf__kernel_params_match(const lf_kernel_params_row *rows, size_t count,
                                                const lf_device_info *dev)
{
    for (size_t i = 0; i < count; i++)
        if ((rows[i].types & dev->type) && serves_kind(&rows[i], dev)) return &rows[i].params;
    return NULL;
}

/* A variant's row for dev, what variant=cpu|gpu starts from: the first row
 * of that variant that serves dev's vendor and vector width. */
static lf_kernel_params variant_row(lf_kernel_variant v, const lf_device_info *dev)
{
    for (size_t i = 0; i < TABLE_ROWS; i++)
        if (table[i].params.variant == v && serves_kind(&table[i], dev)) return table[i].params;
    return table[TABLE_ROWS - 1].params; /* not reached: each variant has a row for any vendor and width */
}

/* The index of a key of klen characters: keys[] or VARIANT_KEY; -1 when unknown. */
static int find_key(const char *key, int klen)
{
    for (int k = 0; k < KEYS; k++)
        if (strlen(keys[k].key) == (size_t)klen && !strncmp(keys[k].key, key, (size_t)klen)) return k;
    return klen == 7 && !strncmp(key, "variant", 7) ? VARIANT_KEY : -1;
}

/* "variant, tk, ... and layernorm_wg", for the message of an unknown key. */
static void key_names(char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "variant");
    for (int k = 0; k < KEYS && used < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", k + 1 < KEYS ? ", " : " and ", keys[k].key);
}

/* A value of vlen characters for key into *out. */
static lf_status parse_value(int key, const char *value, int vlen, int *out, char *msg, size_t msg_size)
{
    char text[32] = ""; /* a longer value is refused whole */
    if (vlen < (int)sizeof text) memcpy(text, value, (size_t)vlen);
    if (key == VARIANT_KEY) {
        if (strcmp(text, "cpu") != 0 && strcmp(text, "gpu") != 0)
            return FAIL("variant must be cpu or gpu, got \"%.*s\"", vlen, value);
        *out = text[0] == 'c' ? LF_VARIANT_CPU : LF_VARIANT_GPU;
        return LF_OK;
    }
    char *end = NULL;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (!isdigit((unsigned char)text[0]) || *end || errno || v < keys[key].min || v > keys[key].max)
        return FAIL("%s must be an integer from %d to %d, got \"%.*s\"", keys[key].key, keys[key].min,
                    keys[key].max, vlen, value);
    *out = (int)v;
    return LF_OK;
}

/* One "key=value" entry of len characters into values[] (by the key's index). */
static lf_status parse_entry(const char *entry, size_t len, int values[], bool given[], char *msg, size_t msg_size)
{
    if (len == 0) return FAIL("an empty entry; write key=value pairs separated by commas");
    const char *eq = memchr(entry, '=', len);
    if (!eq) return FAIL("\"%.*s\" is not key=value", (int)len, entry);
    const int klen = (int)(eq - entry), key = find_key(entry, klen);
    if (key < 0) {
        char known[160];
        key_names(known, sizeof known);
        return FAIL("unknown key \"%.*s\"; the keys are %s", klen, entry, known);
    }
    if (given[key]) return FAIL("%.*s is given twice", klen, entry);
    given[key] = true;
    return parse_value(key, eq + 1, (int)(len - (size_t)klen - 1), &values[key], msg, msg_size);
}

/* QB 1 is the GPU variant's kernel; the CPU variant's QB is a vector width,
 * as vw is, and it splits no query's row across work-items (DS 1). */
static lf_status check_widths(const lf_kernel_params *p, char *msg, size_t msg_size)
{
    const int qb = p->query_block, vw = p->vector_width;
    if (vw & (vw - 1)) return FAIL("vw must be 1, 2, 4, 8 or 16, got vw=%d", vw);
    if (p->variant == LF_VARIANT_GPU && qb != 1) return FAIL("variant=gpu takes qb=1, got qb=%d", qb);
    if (p->variant == LF_VARIANT_GPU && p->query_vectors != 1)
        return FAIL("variant=gpu takes qv=1, got qv=%d", p->query_vectors);
    if (p->variant == LF_VARIANT_GPU && p->key_block != 1)
        return FAIL("variant=gpu takes kb=1, got kb=%d", p->key_block);
    if (p->variant == LF_VARIANT_CPU && (qb < 2 || (qb & (qb - 1))))
        return FAIL("variant=cpu takes qb=2, 4, 8 or 16, got qb=%d", qb);
    if (p->d_split & (p->d_split - 1)) return FAIL("ds must be 0, 1, 2, 4, 8 or 16, got ds=%d", p->d_split);
    if (p->variant == LF_VARIANT_CPU && p->d_split != 1)
        return FAIL("variant=cpu takes ds=1, got ds=%d", p->d_split);
    return LF_OK;
}

lf_status lf__kernel_params_parse(const char *text, const lf_device_info *dev, lf_kernel_params *p, char *msg,
                                  size_t msg_size)
{
    int values[KEYS + 1] = {0};
    bool given[KEYS + 1] = {false};
    for (const char *s = text;; s++) {
        const size_t len = strcspn(s, ",");
        LF_TRY(parse_entry(s, len, values, given, msg, msg_size));
        s += len;
        if (!*s) break;
    }
    lf_kernel_params q = given[VARIANT_KEY] ? variant_row((lf_kernel_variant)values[VARIANT_KEY], dev) : *p;
    for (int key = 0; key < KEYS; key++)
        if (given[key]) *field(&q, key) = values[key];
    LF_TRY(check_widths(&q, msg, msg_size));
    *p = q;
    return LF_OK;
}

lf_status lf__kernel_params(const lf_device_info *dev, lf_kernel_params *out, char *msg, size_t msg_size)
{
    const lf_kernel_params *row = lf__kernel_params_match(table, TABLE_ROWS, dev);
    *out = row ? *row : variant_row(LF_VARIANT_GPU, dev);
    /* The variable this one replaced is refused, not ignored: a setting that silently stopped working misleads. */
    const char *old = getenv("LINFORMER_KERNEL_VARIANT");
    if (old)
        return lf__fail_buf(msg, msg_size, LF_ERR_ARGUMENT,
                            "LINFORMER_KERNEL_VARIANT is no longer read: "
                            "set LINFORMER_KERNEL_PARAMS=variant=%.16s instead", old);
    const char *env = getenv("LINFORMER_KERNEL_PARAMS");
    return env && *env ? lf__kernel_params_parse(env, dev, out, msg, msg_size) : LF_OK;
}

void lf__kernel_params_format(const lf_kernel_params *p, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "variant=%s", variant_name(p->variant));
    for (int key = 0; key < KEYS && used < size; key++)
        used += (size_t)snprintf(out + used, size - used, ",%s=%d", keys[key].key, value_of(p, key));
}

lf_status lf_context_kernel_params(lf_context *ctx, char *out, size_t size)
{
    if (!ctx) return LF_ERR_ARGUMENT;
    if (!out || size == 0) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL or size is 0");
    lf_kernel_params p;
    char msg[LF_MSG_SIZE];
    const lf_status st = lf__kernel_params(&ctx->info, &p, msg, sizeof msg);
    LF_TRY(lf__context_lock(ctx));
    if (st != LF_OK) lf__fail(ctx, st, "%s", msg);
    lf__context_unlock(ctx);
    if (st == LF_OK) lf__kernel_params_format(&p, out, size);
    return st;
}
