/*
 * run_input.h - the input file of `linformer run` and `linformer rank`: `x`
 * f32 [batch, n, width] (or `tokens` i64 [batch, n] for a language model),
 * optional `lengths` i32/i64 [batch], and for a check the expected `y`. Other
 * tensors are noted on stderr and ignored.
 */
#ifndef LF_RUN_INPUT_H
#define LF_RUN_INPUT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    float *x;         /* [batch, n, width], or NULL with tokens */
    int64_t *tokens;  /* [batch, n], or NULL */
    int32_t *lengths; /* [batch], or NULL: every sequence has n rows */
    float *y;         /* [batch, n, y_width] when asked for, else NULL */
    int batch, n;
} run_input;

typedef struct {
    const char *command; /* "run", "rank": names the messages */
    bool tokens;         /* read `tokens` instead of `x` */
    int width;           /* x's last dimension */
    int max_n;           /* n may be at most this */
    int y_width;         /* 0: no `y`; else read it, [batch, n, y_width] */
} run_input_spec;

/* Reads the file; 0, or 1 after a message on stderr. run_input_free frees it either way. */
int run_input_read(const char *path, const run_input_spec *spec, run_input *in);
void run_input_free(run_input *in);

#endif
