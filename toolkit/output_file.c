/* output_file.c - atomic replacement of regular files, in-place writes to the rest. */
#define _GNU_SOURCE /* fopencookie; realpath, fchown */
#include "output_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct output_file {
    FILE *stream;     /* buffered on top of fd, through write_fd below */
    int fd;
    int error;        /* errno of the first failed write, which the stream's error flag does not keep */
    char *path;       /* as given, for messages */
    char *target;     /* what is replaced: the path, or where its symlink points */
    char *temp;       /* the temporary beside target; NULL when writing in place */
    int slot;         /* temp's entry in `temps` below, -1 for none */
};

/* ---- Temporaries removed when a signal ends the program ---- */

/* The temporaries that exist now, for the signal handler: an entry is filled
 * while `making` (below) is held and freed by clearing `used`. bench holds at
 * most 5 at once; one past the table is left to the next writer's sweep. */
enum { MAX_TEMPS = 8 };
static struct {
    char name[PATH_MAX];
    atomic_int used;
} temps[MAX_TEMPS];

/* Held while a temporary is made and remembered, and for good by the handler:
 * a signal handled in another thread (the BLAS's) waits for a temporary being
 * made, and none is made after. */
static atomic_flag making = ATOMIC_FLAG_INIT;

static void remove_temps(int sig)
{
    while (atomic_flag_test_and_set(&making)) {}
    for (int i = 0; i < MAX_TEMPS; i++)
        if (atomic_load(&temps[i].used)) unlink(temps[i].name);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the program ends as the signal would end it */
}

static const int ending_signals[] = {SIGINT, SIGTERM, SIGHUP};

void output_file_catch_signals(void)
{
    for (size_t i = 0; i < sizeof ending_signals / sizeof ending_signals[0]; i++) {
        struct sigaction old, sa = {.sa_handler = remove_temps};
        sigfillset(&sa.sa_mask); /* one handler at a time */
        if (sigaction(ending_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(ending_signals[i], &sa, NULL);
    }
}

static int remember_temp(const char *name)
{
    for (int i = 0; i < MAX_TEMPS; i++)
        if (!atomic_load(&temps[i].used) && strlen(name) < sizeof temps[i].name) {
            strcpy(temps[i].name, name);
            atomic_store(&temps[i].used, 1);
            return i;
        }
    return -1;
}

/* The stream's writes: all of the buffer, and the first error remembered. */
static ssize_t write_fd(void *cookie, const char *buf, size_t size)
{
    output_file *f = cookie;
    size_t done = 0;
    while (done < size) {
        const ssize_t n = write(f->fd, buf + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!f->error) f->error = n < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int close_fd(void *cookie)
{
    output_file *f = cookie;
    if (close(f->fd) != 0 && !f->error) f->error = errno;
    return f->error ? -1 : 0;
}

/* A message naming the path; returns NULL for the callers' convenience. */
static void *fail(char *err, size_t size, const char *path, const char *what)
{
    snprintf(err, size, "cannot write \"%s\": %s", path, what);
    return NULL;
}

/* Frees f, whose temporary is gone (renamed or removed). */
static void discard(output_file *f)
{
    if (!f) return;
    if (f->slot >= 0) atomic_store(&temps[f->slot].used, 0);
    free(f->path);
    free(f->target);
    free(f->temp);
    free(f);
}

/* The file a path leads to: a symlink is followed (its target is what changes). */
static char *resolve(const char *path, char *err, size_t size)
{
    struct stat st;
    char *real = lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) ? strdup(path) : realpath(path, NULL);
    if (!real) fail(err, size, path, errno == ENOENT ? "it is a symbolic link to a missing file" : strerror(errno));
    return real;
}

/* Whether `st` is one of the inputs. */
static const char *same_as_input(const struct stat *st, const char *const *inputs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct stat in;
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == st->st_dev && in.st_ino == st->st_ino)
            return inputs[i];
    }
    return NULL;
}

/* A temporary's name is ".BASE.PID.XXXXXX" with BASE cut to leave room for
 * the rest within a folder entry's limit: dots, 10 digits of a pid and XXXXXX. */
#define TEMP_BASE_MAX (NAME_MAX - 19)

static int temp_base_len(const char *base)
{
    const size_t len = strlen(base);
    return len < TEMP_BASE_MAX ? (int)len : TEMP_BASE_MAX;
}

/* The pid of the writer of a temporary of `base`, or 0 for another name. */
static long temporary_pid(const char *name, const char *base)
{
    const size_t len = (size_t)temp_base_len(base);
    if (name[0] != '.' || strncmp(name + 1, base, len) != 0 || name[len + 1] != '.') return 0;
    char *end;
    const long pid = strtol(name + len + 2, &end, 10);
    return pid > 0 && *end == '.' && strlen(end + 1) == 6 ? pid : 0;
}

/* Removes the temporaries of `base` that a killed writer left in dir: no
 * process has its pid here, and no one holds the lock every writer keeps on
 * its temporary (a writer on another host of a shared folder). */
static void sweep_stale(const char *dir, const char *base)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const long pid = temporary_pid(e->d_name, base);
        if (!pid || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        const int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
        if (fd >= 0) close(fd);
    }
    if (d) closedir(d);
}

/* An exclusive temporary ".NAME.PID.XXXXXX" (mkostemp: O_EXCL, a random name;
 * a long NAME cut, see TEMP_BASE_MAX) in the target's folder with `mode`,
 * locked while this process (or gnuplot, which shares it) lives; stale ones of
 * the same target are swept first. */
static int create_temp(output_file *f, mode_t mode)
{
    char *copy1 = strdup(f->target), *copy2 = strdup(f->target);
    int fd = -1;
    if (copy1 && copy2) {
        const char *dir = dirname(copy1), *base = basename(copy2);
        size_t size = strlen(dir) + strlen(base) + 40;
        sweep_stale(dir, base);
        if ((f->temp = malloc(size))) {
            snprintf(f->temp, size, "%s/.%.*s.%ld.XXXXXX", dir, temp_base_len(base), base, (long)getpid());
            fd = mkostemp(f->temp, O_CLOEXEC); /* a child (gnuplot) gets only what it is handed */
        }
    }
    free(copy1);
    free(copy2);
    if (fd >= 0 && (fchmod(fd, mode) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0)) {
        close(fd);
        unlink(f->temp);
        fd = -1;
    }
    if (fd < 0) {
        free(f->temp);
        f->temp = NULL;
    }
    return fd;
}

/* create_temp, the temporary remembered for the signal handler before any
 * handler can look (see `making`); the signals wait meanwhile in this thread,
 * whose handler would wait on itself. */
static int make_temp(output_file *f, mode_t mode)
{
    sigset_t ending, old;
    sigemptyset(&ending);
    for (size_t i = 0; i < sizeof ending_signals / sizeof ending_signals[0]; i++) sigaddset(&ending, ending_signals[i]);
    pthread_sigmask(SIG_BLOCK, &ending, &old);
    while (atomic_flag_test_and_set(&making)) {}
    output_file_catch_signals();
    const int fd = create_temp(f, mode);
    if (fd >= 0) f->slot = remember_temp(f->temp);
    atomic_flag_clear(&making);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return fd;
}

static mode_t new_file_mode(void)
{
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* Opens what is written in place. O_NONBLOCK keeps a FIFO without a reader
 * from blocking the open forever (it fails with ENXIO instead); the writes
 * then block as usual. */
static int open_in_place(const char *path)
{
    const int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

output_file *output_file_open(const char *path, const char *const *inputs, size_t count, char *err, size_t err_size)
{
    output_file *f = calloc(1, sizeof *f);
    if (!f) return fail(err, err_size, path, "out of memory");
    f->slot = -1;
    if (!(f->path = strdup(path))) return discard(f), fail(err, err_size, path, "out of memory");
    if (!(f->target = resolve(path, err, err_size))) return discard(f), NULL;
    struct stat st;
    const bool exists = stat(f->target, &st) == 0;
    if (!exists && errno != ENOENT) return discard(f), fail(err, err_size, path, strerror(errno));
    const char *input = exists ? same_as_input(&st, inputs, count) : NULL;
    if (input) {
        snprintf(err, err_size, "cannot write \"%s\": it is the input \"%s\"", path, input);
        return discard(f), NULL;
    }
    if (exists && S_ISDIR(st.st_mode)) return discard(f), fail(err, err_size, path, strerror(EISDIR));
    if (exists && S_ISREG(st.st_mode) && access(f->target, W_OK) != 0)
        return discard(f), fail(err, err_size, path, strerror(errno));
    int fd;
    if (exists && !S_ISREG(st.st_mode)) { /* a device, FIFO or socket: written to, never replaced */
        fd = open_in_place(f->target);
        if (fd < 0 && errno == ENXIO) return discard(f), fail(err, err_size, path, "it is a FIFO with no reader");
    } else {
        fd = make_temp(f, exists ? st.st_mode & 07777 : new_file_mode());
        /* the owner is kept where that is allowed (as root); elsewhere the file becomes the user's */
        if (fd >= 0 && exists && fchown(fd, st.st_uid, st.st_gid) != 0) errno = 0;
    }
    f->fd = fd;
    if (fd < 0 || !(f->stream = fopencookie(f, "w", (cookie_io_functions_t){.write = write_fd, .close = close_fd}))) {
        const int e = errno;
        if (fd >= 0) close(fd);
        if (f->temp) unlink(f->temp);
        return discard(f), fail(err, err_size, path, strerror(e));
    }
    return f;
}

FILE *output_file_stream(output_file *f) { return f->stream; }

const char *output_file_path(const output_file *f) { return f->path; }

int output_file_fd(output_file *f)
{
    fflush(f->stream);
    return f->fd;
}

int output_file_commit(output_file *f, char *err, size_t err_size)
{
    bool ok = fflush(f->stream) == 0 && !ferror(f->stream);
    if (ok && f->temp && fsync(f->fd) != 0) f->error = errno, ok = false;
    if (fclose(f->stream) != 0) ok = false; /* closes fd; f->error says why */
    if (ok && f->temp && rename(f->temp, f->target) != 0) f->error = errno, ok = false;
    if (!ok) {
        if (f->temp) unlink(f->temp);
        fail(err, err_size, f->path, strerror(f->error ? f->error : EIO));
    }
    discard(f);
    return ok ? 0 : -1;
}

void output_file_abort(output_file *f)
{
    if (!f) return;
    fclose(f->stream);
    if (f->temp) unlink(f->temp);
    discard(f);
}

/* ---- The check before any work ---- */

/* What a path names: the file when it exists, else the path with its folder resolved. */
typedef struct {
    bool exists, regular;
    dev_t dev;
    ino_t ino;
    char *where; /* malloc'd; NULL for a file that exists */
} file_identity;

static char *resolved_path(const char *path)
{
    char *copy1 = strdup(path), *copy2 = strdup(path), *dir = copy1 ? realpath(dirname(copy1), NULL) : NULL;
    char *out = NULL;
    if (dir && copy2) {
        const char *base = basename(copy2);
        const size_t size = strlen(dir) + strlen(base) + 2;
        if ((out = malloc(size))) snprintf(out, size, "%s/%s", strcmp(dir, "/") ? dir : "", base);
    }
    free(copy1), free(copy2), free(dir);
    return out ? out : strdup(path); /* a missing folder: the path as given (opening it fails later) */
}

static void identify(const char *path, file_identity *id)
{
    struct stat st;
    if (!path) return;
    if (stat(path, &st) == 0) {
        *id = (file_identity){true, S_ISREG(st.st_mode), st.st_dev, st.st_ino, NULL};
        return;
    }
    id->where = resolved_path(path);
}

static bool same_file(const file_identity *a, const file_identity *b)
{
    if (a->exists || b->exists) return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
    return a->where && b->where && strcmp(a->where, b->where) == 0;
}

/* The first clash of output i with an input or an earlier output; -1 with the message in err. */
static int clash(size_t i, const named_file *outputs, const named_file *inputs, size_t nin, const file_identity *ids,
                 size_t nout, char *err, size_t err_size)
{
    const named_file *o = &outputs[i];
    for (size_t j = 0; j < nin; j++)
        if (inputs[j].path && same_file(&ids[i], &ids[nout + j])) {
            snprintf(err, err_size, "cannot write \"%s\" (%s): it is the input \"%s\" (%s)", o->path, o->role,
                     inputs[j].path, inputs[j].role);
            return -1;
        }
    const bool shareable = ids[i].exists && !ids[i].regular; /* /dev/null takes any number of writers */
    for (size_t j = 0; j < i && !shareable; j++)
        if (outputs[j].path && same_file(&ids[i], &ids[j])) {
            snprintf(err, err_size, "\"%s\" (%s) and \"%s\" (%s) are the same file: one output would be lost",
                     outputs[j].path, outputs[j].role, o->path, o->role);
            return -1;
        }
    return 0;
}

int output_files_check(const named_file *outputs, size_t nout, const named_file *inputs, size_t nin, char *err,
                       size_t err_size)
{
    for (size_t i = 0; i < nout; i++)
        if (outputs[i].path && !*outputs[i].path)
            return snprintf(err, err_size, "%s \"\": the file name is empty", outputs[i].role), -1;
    file_identity *ids = calloc(nout + nin + 1, sizeof *ids);
    if (!ids) return snprintf(err, err_size, "out of host memory"), -1;
    for (size_t i = 0; i < nout; i++) identify(outputs[i].path, &ids[i]);
    for (size_t i = 0; i < nin; i++) identify(inputs[i].path, &ids[nout + i]);
    int rc = 0;
    for (size_t i = 0; i < nout && rc == 0; i++)
        if (outputs[i].path) rc = clash(i, outputs, inputs, nin, ids, nout, err, err_size);
    for (size_t i = 0; i < nout + nin; i++) free(ids[i].where);
    free(ids);
    return rc;
}
