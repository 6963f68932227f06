/*
 * st_write.h - writes safetensors files (8-byte little-endian header length,
 * a JSON header, then the data) for the program and the tests; the library
 * only reads them.
 */
#ifndef LF_ST_WRITE_H
#define LF_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ST_MAX_DIMS 8

typedef enum { ST_F32, ST_I32 } st_dtype;

/* A tensor to write: f32 or i32 data given by the caller. */
typedef struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
} st_tensor;

/*
 * Writes the tensors (and optional string metadata pairs, meta_kv[2i] ->
 * meta_kv[2i+1]) to the stream. Returns 0, or -1 with a message in err: a bad
 * tensor (no name, a reserved or repeated name, a bad shape) or a failed write.
 */
int st_write(FILE *out, const st_tensor *tensors, size_t count, const char *const *meta_kv, size_t meta_pairs,
             char *err, size_t err_size);

/*
 * The same into the file `path` through output_file.h (atomic, never over one
 * of the `inputs`). Returns 0, or -1 with a message in err naming the path.
 */
int st_save(const char *path, const st_tensor *tensors, size_t count, const char *const *meta_kv,
            size_t meta_pairs, const char *const *inputs, size_t input_count, char *err, size_t err_size);

#endif
