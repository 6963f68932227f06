/*
 * kernel_cache.h - the disk cache of kernel binaries (kernel_cache.c), and
 * reading a whole regular file, which the kernel sources use too (with the
 * name of what a path holds when it is not one, for messages).
 */
#ifndef LF_KERNEL_CACHE_H
#define LF_KERNEL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "linformer.h"

/* Reads a regular file whole, NUL-terminated. It is opened without blocking
 * and anything but a regular file is refused (errno EINVAL), so a FIFO never
 * hangs the caller; `follow` false refuses a symbolic link too (errno ELOOP). */
lf_status lf__read_file(const char *path, bool follow, char **text, size_t *size);

/* What a path names when it is not a regular file, for messages: "a FIFO"... */
const char *lf__file_kind(mode_t mode);

/* Reads `size` bytes of an open file into a new NUL-terminated buffer:
 * LF_ERR_OUT_OF_MEMORY, or LF_ERR_IO with errno set, 0 when the file ended
 * before `size` (it shrank while being read). */
lf_status lf__read_fd(int fd, size_t size, char **text);
/* Reads an open file's bytes [from, to) into buf + from: LF_ERR_IO with errno
 * set, 0 when the file ended first. */
lf_status lf__pread_all(int fd, void *buf, size_t from, size_t to);

/* The cache folder (`chosen`, a context's own, when not NULL; else
 * LINFORMER_CACHE_DIR, else $XDG_CACHE_HOME/linformer, else
 * ~/.cache/linformer), created if missing, with the temporaries that dead or
 * stuck writers left removed; false when the cache is off, has no home or
 * cannot be used (see lf_kernel_cache_dir). */
bool lf__cache_dir(const char *chosen, char *out, size_t size);

/* The key of a program: everything its binary depends on. NULL without memory. */
char *lf__cache_key(const lf_device_info *device, const char *file, const char *text, size_t size,
                    const char *options);

/* The entry's path for a key, in dir. */
void lf__cache_path(const char *dir, const char *key, char *out, size_t size);

/* What lf__cache_load found. */
typedef enum {
    LF_CACHE_ABSENT, /* no entry */
    LF_CACHE_BAD,    /* not a regular file, another user's, writable by others, short, corrupt
                        or another key's: to rebuild */
    LF_CACHE_FOUND   /* *bin holds the binary (malloc'd) */
} lf_cache_result;
lf_cache_result lf__cache_load(const char *path, const char *key, unsigned char **bin, size_t *len);

/* Writes an entry: to a temporary created exclusively beside it, then renamed
 * over whatever is at the path (a symbolic link is replaced, never followed).
 * Failing to write is not an error: the cache is an optimisation. */
void lf__cache_store(const char *path, const char *key, const unsigned char *bin, size_t len);

#endif
