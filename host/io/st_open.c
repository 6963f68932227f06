/*
 * st_open.c - a safetensors file read from disk whole, then parsed
 * (safetensors.c). Only a regular file is read, so a FIFO or a device never
 * blocks the caller.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include "kernel_cache.h" /* lf__read_fd, lf__file_kind */
#include "runtime.h"       /* lf__fail_buf */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAIL(status, ...) lf__fail_buf(msg, msg_size, (status), __VA_ARGS__)

/* Reads the whole of `fd` (a regular file of `size` bytes) into a new buffer. */
static lf_status read_all(int fd, const char *path, size_t size, uint8_t **out, char *msg, size_t msg_size)
{
    char *text = NULL;
    const lf_status st = lf__read_fd(fd, size, &text);
    if (st == LF_ERR_OUT_OF_MEMORY) return FAIL(st, "cannot allocate %zu bytes for \"%s\"", size, path);
    if (st != LF_OK)
        return FAIL(st, "cannot read \"%s\": %s", path, errno ? strerror(errno) : "the file shrank while being read");
    *out = (uint8_t *)text;
    return LF_OK;
}

/* Opens without blocking (a FIFO with no writer would wait forever in a
 * plain open) and refuses anything but a regular file. */
static lf_status open_regular(const char *path, int *fd, size_t *size, char *msg, size_t msg_size)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return FAIL(LF_ERR_IO, "cannot open \"%s\": %s", path, strerror(errno));
    struct stat sb;
    lf_status st = LF_OK;
    if (fstat(*fd, &sb) != 0)
        st = FAIL(LF_ERR_IO, "cannot stat \"%s\": %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = FAIL(LF_ERR_IO, "\"%s\" is not a regular file: it is %s", path, lf__file_kind(sb.st_mode));
    else if ((uintmax_t)sb.st_size > SIZE_MAX)
        st = FAIL(LF_ERR_OUT_OF_MEMORY, "\"%s\" does not fit in memory", path);
    if (st != LF_OK) {
        close(*fd);
        *fd = -1;
        return st;
    }
    *size = (size_t)sb.st_size;
    return LF_OK;
}

lf_status lf_st_open(const char *path, lf_st_file *out, char *msg, size_t msg_size)
{
    if (!out) return FAIL(LF_ERR_ARGUMENT, "lf_st_open: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return FAIL(LF_ERR_ARGUMENT, "lf_st_open: path is NULL");

    int fd;
    size_t size = 0;
    uint8_t *bytes = NULL;
    lf_status st = open_regular(path, &fd, &size, msg, msg_size);
    if (st != LF_OK) return st;
    st = read_all(fd, path, size, &bytes, msg, msg_size);
    close(fd);
    if (st != LF_OK) return st;

    st = lf_st_parse(bytes, size, out, msg, msg_size);
    /* Put the path in front of what the parser said. */
    char *inner = st != LF_OK && msg && msg_size ? strdup(msg) : NULL;
    if (inner) FAIL(st, "%s: %s", path, inner);
    free(inner);
    return st;
}
