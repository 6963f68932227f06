/*
 * safetensors.h - reads safetensors files (header: 8-byte little-endian length,
 * then a JSON object of tensors, then the data) into f32 host tensors.
 * Every field of the header is validated before any byte of data is used.
 */
#ifndef LF_SAFETENSORS_H
#define LF_SAFETENSORS_H

#include "linformer.h"

#define LF_ST_MAX_DIMS 8

typedef enum { LF_ST_F32, LF_ST_F16, LF_ST_BF16, LF_ST_F64, LF_ST_I32, LF_ST_I64 } lf_st_dtype;

typedef struct {
    char *name;
    lf_st_dtype dtype;
    int ndim;
    int64_t shape[LF_ST_MAX_DIMS];
    size_t count;        /* product of shape */
    const uint8_t *data; /* into the file's data section, count * dtype size bytes */
    size_t offset;       /* of data in the data section */
} lf_st_tensor;

typedef struct {
    uint8_t *bytes; /* the whole file */
    size_t size;
    lf_st_tensor *tensors; /* sorted by name */
    size_t count;
    char **meta_keys; /* __metadata__ string entries */
    char **meta_values;
    size_t meta_count;
} lf_st_file;

/* Parses a file already in memory. Takes ownership of `bytes` (from malloc):
 * on success lf_st_close frees it; on failure everything, `bytes` included, is
 * freed at once and *out is zeroed, so lf_st_close(out) is then harmless.
 * A malformed file gives LF_ERR_FORMAT and msg (may be NULL) says what is
 * wrong, naming the tensor. */
lf_status lf_st_parse(uint8_t *bytes, size_t size, lf_st_file *out, char *msg, size_t msg_size);
/* Reads and parses a file (LF_ERR_IO when it cannot be read); the same rules
 * as lf_st_parse, and msg starts with the path. */
lf_status lf_st_open(const char *path, lf_st_file *out, char *msg, size_t msg_size);
void lf_st_close(lf_st_file *f);

/* lf_st_parse in steps, for lf_st_open, which reads the header and checks it
 * before it reads the data. lf__st_header_length takes the file's first
 * bytes (`held` of them: 9, or all of a shorter file) and its size, and gives
 * the header's length n; lf__st_parse_header then parses the header (f->bytes
 * holds the first 8 + n bytes, f->size is the file's size; on failure
 * lf_st_close frees what was filled); once f->bytes holds the whole file,
 * lf__st_bind points the tensors at their data. */
lf_status lf__st_header_length(const uint8_t *start, size_t held, size_t file_size, uint64_t *n, char *msg,
                               size_t msg_size);
lf_status lf__st_parse_header(lf_st_file *f, uint64_t n, char *msg, size_t msg_size);
void lf__st_bind(lf_st_file *f, uint64_t n);

const lf_st_tensor *lf_st_find(const lf_st_file *f, const char *name);
const char *lf_st_meta(const lf_st_file *f, const char *key); /* NULL if absent */
const char *lf_st_dtype_name(lf_st_dtype dtype);              /* "F32", ... */

/* Converts a float tensor (F32, F16, BF16, F64) to f32; out holds t->count floats.
 * Another dtype gives LF_ERR_FORMAT naming the tensor. */
lf_status lf_st_to_f32(const lf_st_tensor *t, float *out, char *msg, size_t msg_size);
/* Converts an integer tensor (I32, I64) to int64; out holds t->count values.
 * Another dtype gives LF_ERR_FORMAT naming the tensor. */
lf_status lf_st_to_i64(const lf_st_tensor *t, int64_t *out, char *msg, size_t msg_size);

#endif
