/*
 * fuzz_loader.c - libFuzzer target for lf_attention_load, the model loader on
 * top of the safetensors reader. Each input is written to a temporary file and
 * loaded in one of the three modes on a context opened once in
 * LLVMFuzzerInitialize; whatever loads must describe itself consistently and is
 * freed. Any input must load or fail with a status and a message, cheaply:
 * shapes that would need huge allocations are refused before any is made.
 * Run with a small -max_len, e.g.
 *   fuzz_loader -max_len=4096 -max_total_time=60 corpus_loader_copy/
 */
#include <stdlib.h>

#include "fuzz_file.h"

static lf_context *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    ctx = fuzz_file_init("fuzz_loader");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size);

    /* The mode varies with the input, so every mode's layout is fuzzed. */
    const lf_mode mode = (lf_mode)(size % 3);
    lf_attention *layer = (lf_attention *)0x1;
    lf_status st = lf_attention_load(ctx, path, 0, mode, &layer);
    if (st != LF_OK) {
        fuzz_expect_clean_failure(ctx, st, layer);
        return 0;
    }
    lf_attention_config cfg;
    size_t weights = 0, workspace = 1;
    if (lf_attention_config_get(layer, &cfg) != LF_OK) __builtin_trap();
    if (cfg.mode != mode || cfg.d_model <= 0 || cfg.heads <= 0 || cfg.d_head <= 0 || cfg.max_seq_len <= 0)
        __builtin_trap();
    if (lf_attention_device_bytes(layer, &weights, &workspace) != LF_OK || weights == 0 || workspace != 0)
        __builtin_trap();
    /* Device memory is bounded by the file: every weight came from its bytes
     * (f16 doubles, plus the fused bias slots and E/F copies). */
    if (weights > 16 * (size_t)size + 4096) __builtin_trap();
    lf_attention_free(layer);
    return 0;
}
