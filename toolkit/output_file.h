/*
 * output_file.h - every file the program writes (run --output, bench --csv,
 * --json, --plot and the plot's data and script) goes through here.
 *
 * A regular file (or one a symlink points to) is replaced atomically: the data
 * goes to an exclusively created temporary beside it (".NAME.PID.XXXXXX", a
 * long NAME cut to fit, locked while its writer lives), is synced, and renamed over it, so a reader
 * sees the old file or the new one and a failed write leaves the old one
 * untouched. A writer ended by SIGINT, SIGTERM or SIGHUP removes its
 * temporaries; those of NAME that a killed writer left are removed when NAME
 * is next written. The existing file's mode is kept; a new file
 * gets 0666 less the umask. A symlink's target is replaced, not the link.
 * What is not a regular file (/dev/null, a FIFO, a terminal) is written to in
 * place, never replaced; a FIFO without a reader is refused, not waited on.
 * A path that names one of the inputs (same device and inode) is refused
 * before anything is written.
 */
#ifndef LF_OUTPUT_FILE_H
#define LF_OUTPUT_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct output_file output_file;

/*
 * Opens `path` for writing; `inputs` (count paths, may be NULL) are files the
 * program reads, which the output must not be. Returns NULL with a message in
 * err naming the path when it cannot be written.
 */
output_file *output_file_open(const char *path, const char *const *inputs, size_t count, char *err,
                              size_t err_size);

/* The stream to write to (buffered; errors are collected by output_file_commit). */
FILE *output_file_stream(output_file *f);

/* The path as given (valid until the file is committed or aborted). */
const char *output_file_path(const output_file *f);

/* The descriptor under the stream, flushed, for a child process to write into
 * (gnuplot's figure); what it writes is committed like the stream's. */
int output_file_fd(output_file *f);

/*
 * Flushes, syncs and puts the file in place, and frees f. Returns 0, or -1 with
 * a message in err when any write failed (ENOSPC, EFBIG, EIO...); then the
 * temporary is removed and a replaced file is left as it was.
 */
int output_file_commit(output_file *f, char *err, size_t err_size);

/* Drops what was written (the temporary is removed) and frees f; NULL is fine. */
void output_file_abort(output_file *f);

/* SIGINT, SIGTERM and SIGHUP remove the temporaries of the files open now, then
 * end the program as the signal would (one ignored stays ignored). Set up by
 * output_file_open; a command with a handler of its own calls it to hand the
 * signals back. */
void output_file_catch_signals(void);

/* A file a command names, with what it is for messages ("--csv", "the data of --plot"). */
typedef struct {
    const char *role;
    const char *path; /* NULL: not given, skipped */
} named_file;

/*
 * The check every command makes before any work: no output name is empty, no
 * output is an input, and no two outputs are one file (side files included). Files that exist are
 * compared by device and inode (symlinks followed), others by their path
 * with the folder resolved. Two outputs may share what is not a regular file
 * (/dev/null). Returns 0, or -1 with a message in err naming both.
 */
int output_files_check(const named_file *outputs, size_t nout, const named_file *inputs, size_t nin, char *err,
                       size_t err_size);

#endif
