/* cli.c - getopt_long behind one table-driven parser for every command. */
#define _GNU_SOURCE /* getopt_long */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTIONS 64

int cli_fail(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* What getopt_long refused: an unknown name, an abbreviation of several, or a flag given a value. */
static int unknown(const char *arg, const cli_option *opts, size_t count, char *err, size_t err_size)
{
    const char *name = arg + strspn(arg, "-"), *eq = strchr(name, '=');
    const size_t len = eq ? (size_t)(eq - name) : strlen(name);
    size_t matches = 0, exact = count;
    for (size_t i = 0; i < count; i++) {
        matches += strncmp(opts[i].name, name, len) == 0;
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) exact = i;
    }
    if (arg[1] == '-' && exact < count && eq) return cli_fail(err, err_size, "--%s takes no value", opts[exact].name);
    if (arg[1] == '-' && matches > 1) return cli_fail(err, err_size, "option \"%s\" is ambiguous", arg);
    return cli_fail(err, err_size, "unknown option \"%s\"", arg);
}

/* getopt_long returns opts[i] as FIRST + i, above every short option. */
enum { FIRST = 256 };

int cli_parse(int argc, char **argv, const cli_option *opts, size_t count, const char **values, char *err,
              size_t err_size)
{
    struct option longs[MAX_OPTIONS + 1];
    if (count > MAX_OPTIONS) return cli_fail(err, err_size, "too many options");
    int help = -1;
    for (size_t i = 0; i < count; i++) {
        longs[i] = (struct option){opts[i].name, opts[i].takes_value ? required_argument : no_argument, NULL,
                                   FIRST + (int)i};
        values[i] = NULL;
        if (strcmp(opts[i].name, "help") == 0) help = (int)i;
    }
    longs[count] = (struct option){NULL, 0, NULL, 0};
    opterr = 0; /* the messages are ours */
    optind = 0; /* 0 re-initialises glibc's getopt: commands (and tests) parse more than once */
    int c;
    while ((c = getopt_long(argc, argv, help >= 0 ? "+:h" : "+:", longs, NULL)) != -1) {
        if (c == 'h') c = FIRST + help;
        if (c == ':') return cli_fail(err, err_size, "%s needs a value", argv[optind - 1]);
        if (c < FIRST) return unknown(argv[optind - 1], opts, count, err, err_size);
        const int i = c - FIRST;
        if (values[i]) return cli_fail(err, err_size, "--%s is given twice", opts[i].name);
        values[i] = optarg ? optarg : "";
    }
    if (optind < argc) return cli_fail(err, err_size, "unexpected argument \"%s\"", argv[optind]);
    return 0;
}

int cli_int(const char *opt, const char *value, long lo, long hi, int *out, char *err, size_t err_size)
{
    char *end;
    errno = 0;
    const long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < lo || v > hi)
        return cli_fail(err, err_size, "%s takes an integer from %ld to %ld, got \"%s\"", opt, lo, hi, value);
    *out = (int)v;
    return 0;
}

int cli_u64(const char *opt, const char *value, uint64_t *out, char *err, size_t err_size)
{
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(value, &end, 10);
    if (errno || end == value || *end || strchr(value, '-'))
        return cli_fail(err, err_size, "%s takes an integer from 0 to %llu, got \"%s\"", opt, (unsigned long long)UINT64_MAX,
                    value);
    *out = v;
    return 0;
}

int cli_double(const char *opt, const char *value, double lo, double hi, double *out, char *err, size_t err_size)
{
    char *end;
    const double v = strtod(value, &end);
    if (end == value || *end || !isfinite(v) || v < lo || v > hi)
        return cli_fail(err, err_size, "%s takes a number from %g to %g, got \"%s\"", opt, lo, hi, value);
    *out = v;
    return 0;
}

int cli_usage_error(const char *command, const char *message)
{
    fprintf(stderr, "linformer %s: %s\n(see `linformer %s --help`)\n", command, message, command);
    return 2;
}
