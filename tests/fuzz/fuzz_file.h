/* fuzz_file.h - what the fuzz targets that load files share: one OpenCL
 * context and one temporary file, made in LLVMFuzzerInitialize and removed at
 * exit; each input is written to the file before it is loaded. */
#ifndef LF_FUZZ_FILE_H
#define LF_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "linformer.h"

/* Opens the default device and makes the temporary file; aborts, naming
 * `target`, when either fails. Returns the context. */
lf_context *fuzz_file_init(const char *target);

/* Writes the input to the temporary file and returns its path; aborts on a
 * write error (a fuzzing machine with a full disk is not a finding). */
const char *fuzz_file_write(const uint8_t *data, size_t size);

/* A load that failed must have left *out NULL and a message, with a status
 * that is the file's fault, not the device's; traps otherwise. */
void fuzz_expect_clean_failure(lf_context *ctx, lf_status st, const void *out);

#endif
