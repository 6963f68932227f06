/* st_write.c - the safetensors writer: the header built with cJSON, data little-endian. */
#include "st_write.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "cli.h"
#include "output_file.h"

/* JSON numbers are doubles in cJSON: integers above 2^53 are not exact. */
#define MAX_EXACT ((uint64_t)1 << 53)


/* Integers go in as raw text: cJSON prints doubles above 10^15 inexactly. */
static bool push_uint(cJSON *array, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    cJSON *item = cJSON_CreateRaw(buf);
    if (item && cJSON_AddItemToArray(array, item)) return true;
    cJSON_Delete(item);
    return false;
}

/* Checks one tensor; its byte size goes to *bytes (below 2^53 once checked). */
static int check_tensor(const st_tensor *t, uint64_t *bytes, char *err, size_t size)
{
    if (!t->name) return cli_fail(err, size, "a tensor has no name");
    if (strcmp(t->name, "__metadata__") == 0)
        return cli_fail(err, size, "\"__metadata__\" is reserved, not a tensor name");
    if (t->dtype != ST_F32 && t->dtype != ST_I32)
        return cli_fail(err, size, "tensor \"%s\": only F32 and I32 can be written", t->name);
    if (t->ndim < 0 || t->ndim > ST_MAX_DIMS || (t->ndim && !t->shape))
        return cli_fail(err, size, "tensor \"%s\": ndim %d (or its shape) is invalid", t->name, t->ndim);
    uint64_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || (uint64_t)t->shape[i] > MAX_EXACT)
            return cli_fail(err, size, "tensor \"%s\": shape[%d] is %" PRId64, t->name, i, t->shape[i]);
        if (t->shape[i] && count > MAX_EXACT / 4 / (uint64_t)t->shape[i])
            return cli_fail(err, size, "tensor \"%s\": the data passes 2^53 bytes", t->name);
        count *= (uint64_t)t->shape[i];
    }
    if (count > SIZE_MAX / 4) return cli_fail(err, size, "tensor \"%s\": the shape overflows the address space", t->name);
    if (count && !t->data) return cli_fail(err, size, "tensor \"%s\": data is NULL", t->name);
    *bytes = 4 * count;
    return 0;
}

/* One header entry: {"dtype", "shape", "data_offsets"}. */
static bool add_entry(cJSON *root, const st_tensor *t, uint64_t offset, uint64_t bytes)
{
    cJSON *entry = cJSON_AddObjectToObject(root, t->name), *shape = NULL, *offsets = NULL;
    bool ok = entry && cJSON_AddStringToObject(entry, "dtype", t->dtype == ST_F32 ? "F32" : "I32") &&
              (shape = cJSON_AddArrayToObject(entry, "shape")) &&
              (offsets = cJSON_AddArrayToObject(entry, "data_offsets"));
    for (int d = 0; d < t->ndim && ok; d++) ok = push_uint(shape, (uint64_t)t->shape[d]);
    return ok && push_uint(offsets, offset) && push_uint(offsets, offset + bytes);
}

static int add_metadata(cJSON *root, const char *const *meta_kv, size_t pairs, char *err, size_t size)
{
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    if (!meta) return cli_fail(err, size, "out of memory building __metadata__");
    for (size_t i = 0; i < pairs; i++) {
        const char *key = meta_kv[2 * i], *value = meta_kv[2 * i + 1];
        if (!key || !value) return cli_fail(err, size, "metadata pair %zu has a NULL key or value", i);
        if (cJSON_GetObjectItemCaseSensitive(meta, key)) return cli_fail(err, size, "metadata key \"%s\" is given twice", key);
        if (!cJSON_AddStringToObject(meta, key, value)) return cli_fail(err, size, "out of memory adding \"%s\"", key);
    }
    return 0;
}

/* The JSON header: the tensors laid out in order, then the metadata. */
static char *build_header(const st_tensor *tensors, size_t count, const char *const *meta_kv, size_t pairs,
                          char *err, size_t size)
{
    cJSON *root = cJSON_CreateObject();
    int rc = root ? 0 : cli_fail(err, size, "out of memory building the header");
    uint64_t offset = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        uint64_t bytes = 0;
        if ((rc = check_tensor(&tensors[i], &bytes, err, size)) != 0) break;
        if (cJSON_GetObjectItemCaseSensitive(root, tensors[i].name))
            rc = cli_fail(err, size, "tensor \"%s\" is given twice", tensors[i].name);
        else if (bytes > MAX_EXACT - offset)
            rc = cli_fail(err, size, "tensor \"%s\": the data passes 2^53 bytes", tensors[i].name);
        else if (!add_entry(root, &tensors[i], offset, bytes))
            rc = cli_fail(err, size, "out of memory building the entry of \"%s\"", tensors[i].name);
        offset += bytes;
    }
    if (rc == 0 && pairs) rc = add_metadata(root, meta_kv, pairs, err, size);
    char *text = rc == 0 ? cJSON_PrintUnformatted(root) : NULL;
    if (rc == 0 && !text) cli_fail(err, size, "out of memory printing the header");
    cJSON_Delete(root);
    return text;
}

static void store_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* Writes count 4-byte values little-endian, whatever the host's order. */
static bool write_le32(FILE *out, const void *data, uint64_t count)
{
    uint8_t buf[4096];
    const uint8_t *src = data;
    while (count) {
        const size_t n = count < sizeof buf / 4 ? (size_t)count : sizeof buf / 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, src + 4 * i, 4);
            store_le(buf + 4 * i, v, 4);
        }
        if (fwrite(buf, 4, n, out) != n) return false;
        src += 4 * n;
        count -= n;
    }
    return true;
}

int st_write(FILE *out, const st_tensor *tensors, size_t count, const char *const *meta_kv, size_t meta_pairs,
             char *err, size_t err_size)
{
    if ((count && !tensors) || (meta_pairs && !meta_kv)) return cli_fail(err, err_size, "tensors or meta_kv is NULL");
    char *text = build_header(tensors, count, meta_kv, meta_pairs, err, err_size);
    if (!text) return -1;
    /* the header is padded with spaces so that the data starts 8-byte aligned */
    const size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t head[8];
    store_le(head, padded, 8);
    bool ok = fwrite(head, 1, 8, out) == 8 && fwrite(text, 1, len, out) == len;
    for (size_t i = len; i < padded && ok; i++) ok = fputc(' ', out) != EOF;
    for (size_t i = 0; i < count && ok; i++) {
        uint64_t bytes = 0;
        check_tensor(&tensors[i], &bytes, err, err_size); /* passed in build_header */
        ok = write_le32(out, tensors[i].data, bytes / 4);
    }
    cJSON_free(text);
    return ok ? 0 : cli_fail(err, err_size, "a write failed");
}

int st_save(const char *path, const st_tensor *tensors, size_t count, const char *const *meta_kv,
            size_t meta_pairs, const char *const *inputs, size_t input_count, char *err, size_t err_size)
{
    output_file *f = output_file_open(path, inputs, input_count, err, err_size);
    if (!f) return -1;
    if (st_write(output_file_stream(f), tensors, count, meta_kv, meta_pairs, err, err_size) != 0 &&
        !ferror(output_file_stream(f))) { /* a bad tensor: nothing is replaced */
        output_file_abort(f);
        return -1;
    }
    return output_file_commit(f, err, err_size); /* reports a failed write with its reason */
}
