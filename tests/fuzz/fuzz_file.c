/* fuzz_file.c - the context and temporary file of the file-loading fuzz targets. */
#include "fuzz_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static lf_context *ctx;
static char path[4096];

static void cleanup(void)
{
    if (path[0]) unlink(path);
    lf_context_free(ctx);
}

lf_context *fuzz_file_init(const char *target)
{
    char msg[1024] = "";
    if (lf_context_create(NULL, &ctx, msg, sizeof msg) != LF_OK) {
        fprintf(stderr, "%s: no OpenCL context: %s\n", target, msg);
        abort();
    }
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/lf_%s_XXXXXX", dir && *dir ? dir : "/tmp", target);
    int fd = mkstemp(path);
    if (fd < 0) {
        perror(target);
        abort();
    }
    close(fd);
    atexit(cleanup);
    return ctx;
}

const char *fuzz_file_write(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    return path;
}

void fuzz_expect_clean_failure(lf_context *ctx, lf_status st, const void *out)
{
    if (out != NULL) __builtin_trap();                         /* *out is NULL on failure */
    if (lf_context_last_error(ctx)[0] == 0) __builtin_trap();  /* and a message says why */
    if (st == LF_ERR_OPENCL || st == LF_ERR_BUILD || st == LF_ERR_BLAS) __builtin_trap();
}
