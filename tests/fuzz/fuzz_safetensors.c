/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader. Any input
 * must parse or fail cleanly; whatever parses must convert, and be found again
 * by name. Run: fuzz_safetensors -max_total_time=60 tests/fuzz/corpus_safetensors
 */
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size heap copy: AddressSanitizer sees any read past the end. */
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) return 0;
    if (size) memcpy(bytes, data, size);

    lf_st_file f;
    char msg[256];
    if (lf_st_parse(bytes, size, &f, msg, sizeof msg) != LF_OK) {
        lf_st_close(&f); /* must be harmless after a failure */
        return 0;
    }
    for (size_t i = 0; i < f.count; i++) {
        const lf_st_tensor *t = &f.tensors[i];
        if (lf_st_find(&f, t->name) != t) __builtin_trap();
        /* count * dtype size <= size, so these buffers stay small. */
        void *out = malloc(t->count ? t->count * 8 : 1);
        if (!out) continue;
        lf_status st = t->dtype == LF_ST_I32 || t->dtype == LF_ST_I64
                           ? lf_st_to_i64(t, out, msg, sizeof msg)
                           : lf_st_to_f32(t, out, msg, sizeof msg);
        if (st != LF_OK) __builtin_trap();
        free(out);
    }
    for (size_t i = 0; i < f.meta_count; i++)
        if (!lf_st_meta(&f, f.meta_keys[i])) __builtin_trap();
    lf_st_close(&f);
    return 0;
}
