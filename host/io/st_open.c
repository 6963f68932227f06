/*
 * st_open.c - a safetensors file read from disk, its header first: the
 * header's length and the header itself are checked against the file's size
 * before the data is read, so a file that is wrong there costs no more memory
 * than its header. Only a regular file is read, so a FIFO or a device never
 * blocks the caller.
 */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include "kernel_cache.h" /* lf__file_kind, lf__pread_all */
#include "runtime.h"       /* lf__fail_buf */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAIL(status, ...) lf__fail_buf(msg, msg_size, (status), __VA_ARGS__)

/* Grows f->bytes to `to` bytes and reads the file's bytes [from, to) into it. */
static lf_status read_more(int fd, const char *path, lf_st_file *f, size_t from, size_t to, char *msg,
                           size_t msg_size)
{
    uint8_t *grown = realloc(f->bytes, to ? to : 1);
    if (!grown) return FAIL(LF_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for \"%s\"", to, path);
    f->bytes = grown;
    if (lf__pread_all(fd, grown, from, to) != LF_OK)
        return FAIL(LF_ERR_IO, "cannot read \"%s\": %s", path,
                    errno ? strerror(errno) : "the file shrank while being read");
    return LF_OK;
}

/* The parser's message, with the path in front. */
static lf_status with_path(lf_status st, const char *path, char *msg, size_t msg_size)
{
    char *inner = st != LF_OK && msg && msg_size ? strdup(msg) : NULL;
    if (inner) FAIL(st, "%s: %s", path, inner);
    free(inner);
    return st;
}

/* The first 9 bytes (enough to tell a PyTorch checkpoint), the header, the data. */
static lf_status read_file(int fd, const char *path, lf_st_file *f, char *msg, size_t msg_size)
{
    const size_t held = f->size < 9 ? f->size : 9;
    uint64_t n = 0;
    lf_status st = read_more(fd, path, f, 0, held, msg, msg_size);
    if (st == LF_OK)
        st = with_path(lf__st_header_length(f->bytes, held, f->size, &n, msg, msg_size), path, msg, msg_size);
    if (st == LF_OK) st = read_more(fd, path, f, held, 8 + (size_t)n, msg, msg_size);
    if (st == LF_OK) st = with_path(lf__st_parse_header(f, n, msg, msg_size), path, msg, msg_size);
    if (st == LF_OK) st = read_more(fd, path, f, 8 + (size_t)n, f->size, msg, msg_size);
    if (st == LF_OK) lf__st_bind(f, n);
    return st;
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
    lf_status st = open_regular(path, &fd, &out->size, msg, msg_size);
    if (st != LF_OK) return st;
    st = read_file(fd, path, out, msg, msg_size);
    close(fd);
    if (st != LF_OK) lf_st_close(out);
    return st;
}
