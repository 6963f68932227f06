/* bench_progress.h - progress on stderr for bench and rank: a line per
 * finished step and, on a terminal, a bar below it. Each line goes out in one
 * write with the bar cleared first, so another writer's output (a compiler's
 * note) never lands inside one. */
#ifndef LF_BENCH_PROGRESS_H
#define LF_BENCH_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "bench.h"

typedef struct bench_progress {
    size_t total, done;
    bool tty;
    struct timespec start;
} bench_progress;

void bench_progress_start(bench_progress *pg, size_t total);

/* A finished step's line (`step` true) or a note, printed above the bar. */
void bench_progress_line(bench_progress *pg, bool step, const char *line);

/* A finished step without a line: on a terminal the bar, with what it did. */
void bench_progress_tick(bench_progress *pg, const char *what);

/* Clears the bar (before other output, or at the end). */
void bench_progress_clear(const bench_progress *pg);

/* The line of a bench point: its time and accuracy, or OOM with why. */
void bench_progress_row(bench_progress *pg, const bench_row *r, const char *oom_msg);

#endif
