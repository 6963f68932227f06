/*
 * safetensors.c - reads safetensors files (the program's toolkit/st_write.c writes them).
 *
 * The reader is fed untrusted files: every header field is checked before a
 * byte of data is used, and data is decoded byte by byte, little-endian, so
 * any alignment and any host byte order work.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include "le_bytes.h"
#include "runtime.h" /* lf__fail_buf */

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A real header is kilobytes; anything past this is garbage or an attack. */
#define MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* JSON numbers are doubles in cJSON: integers above 2^53 are not exact. */
#define MAX_EXACT ((uint64_t)1 << 53)

/* Every function that fails has msg and msg_size in scope. */
#define FAIL(status, ...) lf__fail_buf(msg, msg_size, (status), __VA_ARGS__)

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [LF_ST_F32] = {"F32", 4}, [LF_ST_F16] = {"F16", 2}, [LF_ST_BF16] = {"BF16", 2},
    [LF_ST_F64] = {"F64", 8}, [LF_ST_I32] = {"I32", 4}, [LF_ST_I64] = {"I64", 8},
};
#define DTYPE_COUNT (sizeof DTYPES / sizeof DTYPES[0])

const char *lf_st_dtype_name(lf_st_dtype dtype)
{
    return (unsigned)dtype < DTYPE_COUNT ? DTYPES[dtype].name : "unknown";
}

static bool dtype_from_name(const char *name, lf_st_dtype *out)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++) {
        if (strcmp(name, DTYPES[i].name) == 0) {
            *out = (lf_st_dtype)i;
            return true;
        }
    }
    return false;
}

/* ---- Shapes -------------------------------------------------------------- */

/* The element count of a shape, false when it or its byte size (count * elem)
 * overflows size_t. A zero dimension makes 0 whatever the others are. */
static bool shape_count(const int64_t *shape, int ndim, size_t elem, size_t *count)
{
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            *count = 0;
            return true;
        }
    }
    size_t c = 1;
    for (int i = 0; i < ndim; i++) {
        if ((uint64_t)shape[i] > SIZE_MAX / c) return false;
        c *= (size_t)shape[i];
    }
    if (c > SIZE_MAX / elem) return false;
    *count = c;
    return true;
}

/* "[4, 8]" into buf, for messages. */
static const char *shape_string(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- Reading ------------------------------------------------------------- */

/* An integer in [0, 2^53] from a JSON number: what shapes and offsets hold.
 * `what` and `index` name the field in the message. */
static lf_status read_uint(const cJSON *item, const char *tensor, const char *what, int index,
                           uint64_t *out, char *msg, size_t msg_size)
{
    if (!cJSON_IsNumber(item))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": %s[%d] is not a number", tensor, what, index);
    double d = item->valuedouble;
    /* The range test comes first: it rejects NaN and keeps the cast defined. */
    if (!(d >= 0 && d <= (double)MAX_EXACT) || d != (double)(uint64_t)d)
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": %s[%d] is %.17g, not an integer in [0, 2^53]",
                    tensor, what, index, d);
    *out = (uint64_t)d;
    return LF_OK;
}

/* Fills t (its name already set) from its header entry, its data still
 * unbound; data_size is that of the file's data section. */
static lf_status read_tensor(const cJSON *entry, lf_st_tensor *t, size_t data_size, char *msg, size_t msg_size)
{
    const char *name = t->name;
    if (!cJSON_IsObject(entry))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": entry is not a JSON object", name);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(dtype))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": dtype is missing or not a string", name);
    if (!dtype_from_name(dtype->valuestring, &t->dtype))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": unknown dtype \"%s\"", name, dtype->valuestring);
    if (!cJSON_IsArray(shape))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": shape is missing or not an array", name);
    if (!cJSON_IsArray(offsets))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": data_offsets is missing or not an array", name);

    int ndim = cJSON_GetArraySize(shape);
    if (ndim > LF_ST_MAX_DIMS)
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": shape has %d dimensions, at most %d are supported",
                    name, ndim, LF_ST_MAX_DIMS);
    t->ndim = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape) {
        uint64_t v = 0;
        lf_status st = read_uint(dim, name, "shape", t->ndim, &v, msg, msg_size);
        if (st != LF_OK) return st;
        t->shape[t->ndim++] = (int64_t)v;
    }
    size_t elem = DTYPES[t->dtype].size;
    char shp[256];
    if (!shape_count(t->shape, t->ndim, elem, &t->count))
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": shape %s %s overflows the address space", name,
                    shape_string(t->shape, t->ndim, shp, sizeof shp), DTYPES[t->dtype].name);

    int noff = cJSON_GetArraySize(offsets);
    if (noff != 2)
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": data_offsets has %d entries, not 2 [begin, end]",
                    name, noff);
    uint64_t begin = 0, end = 0;
    lf_status st = read_uint(offsets->child, name, "data_offsets", 0, &begin, msg, msg_size);
    if (st == LF_OK) st = read_uint(offsets->child->next, name, "data_offsets", 1, &end, msg, msg_size);
    if (st != LF_OK) return st;
    if (begin > end)
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] begin after their end",
                    name, begin, end);
    if (end > data_size)
        return FAIL(LF_ERR_FORMAT,
                    "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] run past the data section (%zu bytes)",
                    name, begin, end, data_size);
    if (end - begin != (uint64_t)t->count * elem)
        return FAIL(LF_ERR_FORMAT,
                    "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                    " bytes, shape %s %s needs %zu",
                    name, begin, end, end - begin, shape_string(t->shape, t->ndim, shp, sizeof shp),
                    DTYPES[t->dtype].name, t->count * elem);
    t->offset = (size_t)begin;
    return LF_OK;
}

/* Fills f->meta_* from the __metadata__ object (string -> string). */
static lf_status read_metadata(lf_st_file *f, const cJSON *meta, char *msg, size_t msg_size)
{
    if (!cJSON_IsObject(meta))
        return FAIL(LF_ERR_FORMAT, "__metadata__ is not a JSON object");
    size_t n = (size_t)cJSON_GetArraySize(meta);
    if (n == 0) return LF_OK;
    f->meta_keys = calloc(n, sizeof *f->meta_keys);
    f->meta_values = calloc(n, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values)
        return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot allocate %zu metadata entries", n);
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return FAIL(LF_ERR_FORMAT, "__metadata__ \"%s\": value is not a string", item->string);
        size_t i = f->meta_count++; /* counted first: lf_st_close frees what was copied */
        f->meta_keys[i] = strdup(item->string);
        f->meta_values[i] = strdup(item->valuestring);
        if (!f->meta_keys[i] || !f->meta_values[i])
            return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot copy __metadata__ \"%s\"", item->string);
    }
    return LF_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const lf_st_tensor *)a)->name, ((const lf_st_tensor *)b)->name);
}
static int by_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}
static int by_offset(const void *a, const void *b)
{
    const lf_st_tensor *x = *(const lf_st_tensor *const *)a, *y = *(const lf_st_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts the tensors by name (lf_st_find searches them) and rejects repeated
 * names and metadata keys. */
static lf_status check_unique(lf_st_file *f, char *msg, size_t msg_size)
{
    if (f->count) qsort(f->tensors, f->count, sizeof *f->tensors, by_name);
    for (size_t i = 1; i < f->count; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return FAIL(LF_ERR_FORMAT, "duplicate tensor \"%s\"", f->tensors[i].name);
    if (f->meta_count < 2) return LF_OK;
    char **keys = malloc(f->meta_count * sizeof *keys);
    if (!keys) return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot sort %zu metadata keys", f->meta_count);
    memcpy(keys, f->meta_keys, f->meta_count * sizeof *keys);
    qsort(keys, f->meta_count, sizeof *keys, by_key);
    lf_status st = LF_OK;
    for (size_t i = 1; i < f->meta_count && st == LF_OK; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            st = FAIL(LF_ERR_FORMAT, "duplicate __metadata__ key \"%s\"", keys[i]);
    free(keys);
    return st;
}

/* Rejects tensors whose byte ranges share a byte; empty tensors hold none. */
static lf_status check_overlap(const lf_st_file *f, char *msg, size_t msg_size)
{
    if (f->count < 2) return LF_OK;
    const lf_st_tensor **order = malloc(f->count * sizeof *order);
    if (!order) return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot sort %zu tensors", f->count);
    size_t n = 0;
    for (size_t i = 0; i < f->count; i++)
        if (f->tensors[i].count) order[n++] = &f->tensors[i];
    if (n) qsort(order, n, sizeof *order, by_offset);
    lf_status st = LF_OK;
    for (size_t i = 1; i < n && st == LF_OK; i++) {
        const lf_st_tensor *a = order[i - 1], *b = order[i];
        size_t a_end = a->offset + a->count * DTYPES[a->dtype].size;
        size_t b_begin = b->offset;
        if (b_begin < a_end)
            st = FAIL(LF_ERR_FORMAT, "tensors \"%s\" [%zu, %zu] and \"%s\" [%zu, %zu] overlap", a->name,
                      a->offset, a_end, b->name, b_begin,
                      b_begin + b->count * DTYPES[b->dtype].size);
    }
    free(order);
    return st;
}

/* Fills f from the parsed header object. */
static lf_status read_header(lf_st_file *f, const cJSON *root, size_t data_size, char *msg, size_t msg_size)
{
    size_t n = (size_t)cJSON_GetArraySize(root);
    if (n) {
        f->tensors = calloc(n, sizeof *f->tensors);
        if (!f->tensors) return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot allocate %zu tensors", n);
    }
    bool have_meta = false;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        lf_status st;
        if (strcmp(item->string, "__metadata__") == 0) {
            if (have_meta) return FAIL(LF_ERR_FORMAT, "duplicate __metadata__");
            have_meta = true;
            st = read_metadata(f, item, msg, msg_size);
        } else {
            lf_st_tensor *t = &f->tensors[f->count++];
            t->name = strdup(item->string);
            st = t->name ? read_tensor(item, t, data_size, msg, msg_size)
                         : FAIL(LF_ERR_OUT_OF_MEMORY, "cannot copy the name \"%s\"", item->string);
        }
        if (st != LF_OK) return st;
    }
    lf_status st = check_unique(f, msg, msg_size);
    return st == LF_OK ? check_overlap(f, msg, msg_size) : st;
}

static bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A raw JSON string of the header, quotes included, for messages. */
#define RAW(p, len) (int)((len) > 200 ? 200 : (len)), (p)

/* cJSON decodes "\u0000" to a NUL inside the string, where C cuts it:
 * tensor "x\u0000y" would read as "x". No string of the header may hold one;
 * the message shows the first that does as written, and the key of a value. */
static lf_status check_no_nul(const char *text, size_t n, char *msg, size_t msg_size)
{
    const char *start = NULL, *key = NULL;
    size_t key_len = 0;
    bool nul = false;
    for (size_t i = 0; i < n; i++) {
        if (!start) {
            if (text[i] == '"') start = text + i, nul = false;
        } else if (text[i] == '\\') {
            nul |= i + 5 < n && memcmp(text + i + 1, "u0000", 5) == 0;
            i++; /* the escaped character */
        } else if (text[i] == '"') {
            const size_t len = (size_t)(text + i + 1 - start);
            size_t j = i + 1;
            while (j < n && json_space(text[j])) j++;
            const bool is_key = j < n && text[j] == ':';
            if (nul && (is_key || !key))
                return FAIL(LF_ERR_FORMAT, "header: the name %.*s holds an escaped NUL (\\u0000), which no name, "
                            "key or value may hold", RAW(start, len));
            if (nul)
                return FAIL(LF_ERR_FORMAT, "header: the value %.*s of %.*s holds an escaped NUL (\\u0000), which "
                            "no name, key or value may hold", RAW(start, len), RAW(key, key_len));
            if (is_key) key = start, key_len = len;
            start = NULL;
        }
    }
    return LF_OK;
}

/* torch.save writes a zip archive (a local file header first) or, before
 * PyTorch 1.6, a pickle stream (protocol 2 to 5). Either reads as an absurd
 * header length; a real safetensors header would start with '{' at byte 8. */
static const char *pytorch_kind(const uint8_t *b, size_t size)
{
    if (size > 8 && b[8] == '{') return NULL;
    if (size >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) return "zip";
    if (size >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return "pickle";
    return NULL;
}

lf_status lf__st_header_length(const uint8_t *start, size_t held, size_t file_size, uint64_t *n, char *msg,
                               size_t msg_size)
{
    const char *torch = pytorch_kind(start, held);
    if (torch)
        return FAIL(LF_ERR_FORMAT,
                    "file is a PyTorch %s checkpoint, not a safetensors file; convert it with "
                    "python -m linformer_cl.convert FILE model.safetensors --heads H (the package "
                    "linformer_cl: pip install . in the source tree)",
                    torch);
    if (file_size < 8)
        return FAIL(LF_ERR_FORMAT, "file is %zu bytes, shorter than the 8-byte header length", file_size);
    *n = lf__st_ld64(start);
    if (*n > MAX_HEADER)
        return FAIL(LF_ERR_FORMAT, "header length %" PRIu64 " is over the limit of %" PRIu64 " bytes", *n,
                    MAX_HEADER);
    if (*n > file_size - 8)
        return FAIL(LF_ERR_FORMAT, "header length %" PRIu64 " runs past the end of the file (%zu bytes)", *n,
                    file_size);
    return LF_OK;
}

lf_status lf__st_parse_header(lf_st_file *f, uint64_t n, char *msg, size_t msg_size)
{
    const size_t data_size = f->size - 8 - (size_t)n;
    /* cJSON 1.7.15 reads a byte past the given length on input such as
     * `{"a":1,` (cJSON issue #800): parse a NUL-terminated copy. */
    char *text = malloc((size_t)n + 1);
    if (!text) return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot allocate the %" PRIu64 "-byte header", n);
    memcpy(text, f->bytes + 8, (size_t)n);
    text[n] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)n, &end, 0);
    lf_status st = LF_OK;
    if (!root) {
        st = FAIL(LF_ERR_FORMAT, "header is not valid JSON (error near byte %td of %" PRIu64 ")",
                  end ? end - text : 0, n);
    } else {
        /* Writers pad the header with spaces; anything else after the object is garbage. */
        while (end < text + n && json_space(*end)) end++;
        if (end < text + n)
            st = FAIL(LF_ERR_FORMAT, "header has text after its JSON value, at byte %td", end - text);
        else if (!cJSON_IsObject(root))
            st = FAIL(LF_ERR_FORMAT, "header is not a JSON object");
        else if ((st = check_no_nul(text, (size_t)n, msg, msg_size)) == LF_OK)
            st = read_header(f, root, data_size, msg, msg_size);
    }
    cJSON_Delete(root);
    free(text);
    return st;
}

void lf__st_bind(lf_st_file *f, uint64_t n)
{
    for (size_t i = 0; i < f->count; i++) f->tensors[i].data = f->bytes + 8 + n + f->tensors[i].offset;
}

lf_status lf_st_parse(uint8_t *bytes, size_t size, lf_st_file *out, char *msg, size_t msg_size)
{
    if (!out) {
        free(bytes);
        return FAIL(LF_ERR_ARGUMENT, "lf_st_parse: out is NULL");
    }
    memset(out, 0, sizeof *out);
    if (!bytes) return FAIL(LF_ERR_ARGUMENT, "lf_st_parse: bytes is NULL");
    out->bytes = bytes;
    out->size = size;
    uint64_t n = 0;
    lf_status st = lf__st_header_length(bytes, size, size, &n, msg, msg_size);
    if (st == LF_OK) st = lf__st_parse_header(out, n, msg, msg_size);
    if (st == LF_OK) lf__st_bind(out, n);
    if (st != LF_OK) lf_st_close(out);
    return st;
}

void lf_st_close(lf_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->count; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->meta_count; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->bytes);
    memset(f, 0, sizeof *f);
}

const lf_st_tensor *lf_st_find(const lf_st_file *f, const char *name)
{
    if (!f || !name || !f->count) return NULL;
    lf_st_tensor key = {.name = (char *)name};
    return bsearch(&key, f->tensors, f->count, sizeof *f->tensors, by_name);
}

const char *lf_st_meta(const lf_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}
