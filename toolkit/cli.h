/*
 * cli.h - the one command-line parser of every `linformer` command: getopt_long
 * underneath, so --opt VALUE, --opt=VALUE and unambiguous abbreviations work
 * the same everywhere. An option given twice is an error, as is an unknown
 * one, a missing value or a stray argument; messages name the option.
 */
#ifndef LF_CLI_H
#define LF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name; /* without the leading "--"; "help" also answers to -h */
    bool takes_value;
} cli_option;

/*
 * Parses argv[1..argc-1] (argv[0] is the command's name). values[i] becomes the
 * value of opts[i], "" for a flag that was given, NULL for an option absent.
 * Returns 0, or -1 with a message in err.
 */
int cli_parse(int argc, char **argv, const cli_option *opts, size_t count, const char **values, char *err,
              size_t err_size);

/* A whole decimal number in [lo, hi]; the message states the range. */
int cli_int(const char *opt, const char *value, long lo, long hi, int *out, char *err, size_t err_size);
/* An unsigned 64-bit decimal number. */
int cli_u64(const char *opt, const char *value, uint64_t *out, char *err, size_t err_size);
/* A finite number in [lo, hi]. */
int cli_double(const char *opt, const char *value, double lo, double hi, double *out, char *err, size_t err_size);

/* "linformer CMD: MESSAGE" and the pointer to --help on stderr; returns 2, the usage-error status. */
int cli_usage_error(const char *command, const char *message);

/* Writes a printf-style message into err (size bytes) and returns -1. */
int cli_fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
