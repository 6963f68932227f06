/*
 * kernel_cache.c - the disk cache of kernel binaries.
 *
 * An entry is: magic, the key text, the binary's length and checksum, the
 * binary. The key holds everything the binary depends on (source hash,
 * options, platform version, device name, driver version). An entry that is
 * short, corrupt, another key's, or not a regular file (a FIFO, a device, a
 * symbolic link) is reported bad and rebuilt, never loaded blindly and never
 * waited on. Entries are written to a temporary created exclusively beside
 * them ("ENTRY.tmp.PID.XXXXXX", mkstemp) and renamed, so readers never see half
 * of one and nothing planted at a predictable name is written through. The
 * temporaries of writers that died (kill -9) are removed when the folder is
 * next opened. A folder that is not the user's own, or that its group or
 * others may write, is not used at all; such an entry is bad.
 */
#define _POSIX_C_SOURCE 200809L

#include "kernel_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LF_CACHE_MAGIC "LFKCACHE1"
#define TMP_INFIX ".tmp."
/* A write takes milliseconds: a temporary this old belongs to a stuck writer
 * (or to a pid reused since its writer died). */
#define STALE_SECONDS (10 * 60)

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

/* ---- Reading a file ---- */

lf_status lf__pread_all(int fd, void *buf, size_t from, size_t to)
{
    while (from < to) {
        const ssize_t n = pread(fd, (char *)buf + from, to - from, (off_t)from);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = 0;
            return LF_ERR_IO;
        }
        from += (size_t)n;
    }
    return LF_OK;
}

lf_status lf__read_fd(int fd, size_t size, char **text)
{
    char *buf = malloc(size + 1);
    if (!buf) return LF_ERR_OUT_OF_MEMORY;
    if (lf__pread_all(fd, buf, 0, size) != LF_OK) {
        free(buf);
        return LF_ERR_IO;
    }
    buf[size] = 0;
    *text = buf;
    return LF_OK;
}

const char *lf__file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

lf_status lf__read_file(const char *path, bool follow, char **text, size_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) return LF_ERR_IO;
    struct stat sb;
    lf_status st = LF_ERR_IO;
    if (fstat(fd, &sb) != 0) {
        /* errno says why */
    } else if (!S_ISREG(sb.st_mode) || (uintmax_t)sb.st_size >= SIZE_MAX) {
        errno = EINVAL;
    } else if ((st = lf__read_fd(fd, (size_t)sb.st_size, text)) == LF_OK) {
        *size = (size_t)sb.st_size;
    }
    int err = errno;
    close(fd);
    errno = err;
    return st;
}

/* ---- The folder ---- */

/* "ENTRY.tmp.PID.XXXXXX": the writer's pid, or 0 when the name is no temporary. */
static long temporary_pid(const char *name)
{
    const char *infix = strstr(name, ".bin" TMP_INFIX);
    if (!infix) return 0;
    char *end;
    long pid = strtol(infix + strlen(".bin" TMP_INFIX), &end, 10);
    return *end == '.' && pid > 0 ? pid : 0;
}

/* A temporary whose writer is gone (or stuck) is removed. kill(pid, 0) says
 * ESRCH only for a pid with no process (EPERM: alive, another user's). */
static void sweep_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d))) {
        long pid = temporary_pid(e->d_name);
        if (!pid) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || S_ISDIR(sb.st_mode)) continue;
        bool dead = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (dead || now - sb.st_mtime > STALE_SECONDS) unlink(path);
    }
    closedir(d);
}

/* Writes why the cache is not used into why (may be NULL); returns false. */
static bool unusable(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
    return false;
}

/* Only a folder or entry of our own that nobody else may write can be
 * trusted: anyone who can write there can plant a binary the device runs. */
static bool foreign(const struct stat *sb) { return sb->st_uid != geteuid() || (sb->st_mode & (S_IWGRP | S_IWOTH)); }

/* The folder a context chose (lf_context_set_cache_dir), else the
 * environment's, created if missing and checked. */
static bool cache_dir(const char *chosen, char *out, size_t size, char *why, size_t why_size)
{
    static const struct { const char *var, *format; } from[] = {
        {"LINFORMER_CACHE_DIR", "%s"}, {"XDG_CACHE_HOME", "%s/linformer"}, {"HOME", "%s/.cache/linformer"}};
    const char *dir = chosen ? chosen : getenv("LINFORMER_CACHE_DIR");
    if (dir && strcmp(dir, "off") == 0)
        return unusable(why, why_size, "%s is \"off\"", chosen ? "the context's cache folder" : "LINFORMER_CACHE_DIR");
    const size_t count = sizeof from / sizeof from[0];
    size_t i = 0;
    while (!chosen && i < count && !((dir = getenv(from[i].var)) && *dir)) i++;
    if (i == count) return unusable(why, why_size, "none of LINFORMER_CACHE_DIR, XDG_CACHE_HOME and HOME is set");
    /* a cut path would be another folder */
    const int len = snprintf(out, size, from[i].format, dir);
    if (len < 0 || (size_t)len >= size)
        return unusable(why, why_size, "%s makes a cache path of %d bytes, over the limit of %zu",
                        chosen ? "the context's cache folder" : from[i].var, len, size - 1);
    /* mkdir -p; whatever stands in the way is reported below */
    for (char *p = out + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(out, 0755);
        *p = '/';
    }
    mkdir(out, 0755);
    struct stat sb;
    if (stat(out, &sb) != 0) return unusable(why, why_size, "%s cannot be created: %s", out, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return unusable(why, why_size, "%s is not a folder", out);
    if (sb.st_uid != geteuid())
        return unusable(why, why_size, "%s belongs to user %ld, not to this one (%ld)", out, (long)sb.st_uid,
                        (long)geteuid());
    if (sb.st_mode & (S_IWGRP | S_IWOTH))
        return unusable(why, why_size, "%s is writable by %s (mode %03o)", out,
                        sb.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(sb.st_mode & 0777));
    if (access(out, W_OK | X_OK) != 0) return unusable(why, why_size, "%s is not writable: %s", out, strerror(errno));
    sweep_temporaries(out);
    return true;
}

bool lf__cache_dir(const char *chosen, char *out, size_t size) { return cache_dir(chosen, out, size, NULL, 0); }

lf_status lf_kernel_cache_dir(char *out, size_t size)
{
    if (!out || size == 0) return LF_ERR_ARGUMENT;
    const char *off = getenv("LINFORMER_CACHE_DIR");
    char dir[4096];
    if (cache_dir(NULL, dir, sizeof dir, out, size)) {
        const size_t need = strlen(dir) + 1;
        if (need > size) {
            snprintf(out, size, "%zu bytes needed for the cache path, out has %zu", need, size);
            return LF_ERR_ARGUMENT;
        }
        memcpy(out, dir, need);
        return LF_OK;
    }
    return off && strcmp(off, "off") == 0 ? LF_ERR_UNSUPPORTED : LF_ERR_IO;
}

/* ---- Entries ---- */

char *lf__cache_key(const lf_device_info *device, const char *file, const char *text, size_t size,
                    const char *options)
{
    const char *fmt = "%s|%016llx|%s|%s|%s|%s";
    unsigned long long h = fnv1a(FNV_INIT, text, size);
    int n = snprintf(NULL, 0, fmt, file, h, options, device->platform_version, device->device_name,
                     device->driver_version);
    char *key = malloc((size_t)n + 1);
    if (key)
        snprintf(key, (size_t)n + 1, fmt, file, h, options, device->platform_version, device->device_name,
                 device->driver_version);
    return key;
}

void lf__cache_path(const char *dir, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s/%016llx.bin", dir, (unsigned long long)fnv1a(FNV_INIT, key, strlen(key)));
}

lf_cache_result lf__cache_load(const char *path, const char *key, unsigned char **bin, size_t *bin_size)
{
    char *data = NULL;
    size_t size = 0;
    struct stat sb;
    if (lstat(path, &sb) == 0 && foreign(&sb)) return LF_CACHE_BAD;
    if (lf__read_file(path, false, &data, &size) != LF_OK)
        return errno == ENOENT ? LF_CACHE_ABSENT : LF_CACHE_BAD;
    size_t magic = sizeof LF_CACHE_MAGIC, klen = strlen(key) + 1;
    size_t head = magic + klen + 2 * sizeof(uint64_t);
    uint64_t len, sum;
    lf_cache_result result = LF_CACHE_BAD;
    if (size > head && memcmp(data, LF_CACHE_MAGIC, magic) == 0 && memcmp(data + magic, key, klen) == 0) {
        memcpy(&len, data + magic + klen, sizeof len);
        memcpy(&sum, data + magic + klen + sizeof len, sizeof sum);
        if (len == size - head && fnv1a(FNV_INIT, data + head, len) == sum && (*bin = malloc(len))) {
            memcpy(*bin, data + head, len);
            *bin_size = len;
            result = LF_CACHE_FOUND;
        }
    }
    free(data);
    return result;
}

static bool write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

void lf__cache_store(const char *path, const char *key, const unsigned char *bin, size_t len)
{
    char tmp[4400];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s" TMP_INFIX "%ld.XXXXXX", path, (long)getpid()) >= sizeof tmp)
        return;
    int fd = mkstemp(tmp); /* O_CREAT | O_EXCL: never an existing file or link */
    if (fd < 0) return;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    uint64_t len64 = len, sum = fnv1a(FNV_INIT, bin, len);
    bool ok = write_all(fd, LF_CACHE_MAGIC, sizeof LF_CACHE_MAGIC) && write_all(fd, key, strlen(key) + 1) &&
              write_all(fd, &len64, sizeof len64) && write_all(fd, &sum, sizeof sum) && write_all(fd, bin, len);
    /* mkstemp makes it 0600; an entry is as readable as the folder lets it be */
    ok = fchmod(fd, 0644) == 0 && ok;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}
