/* bench_scripts.h - the bench/ gnuplot scripts, built into the program (see lf_embed in CMakeLists.txt). */
#ifndef LF_BENCH_SCRIPTS_H
#define LF_BENCH_SCRIPTS_H

#include <stddef.h>

typedef struct {
    const char *name; /* the file name, NULL at the end of the table */
    const char *text;
    size_t size;
} lf_embedded_file;

extern const lf_embedded_file lf_bench_scripts[];

#endif
