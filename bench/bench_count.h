/* bench_count.h - flops and bytes of one attention forward, from the data path
 * of host/attention/attention.c (see the comments in bench_count.c). */
#ifndef LF_BENCH_COUNT_H
#define LF_BENCH_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "linformer.h"

typedef struct {
    lf_mode mode;
    int batch, n, k; /* k: Linformer's compressed length, ignored by the exact modes */
    int d_model, heads, d_head, kv_heads;
    bool share_kv;
    /* the n x (k or n) scores go through device memory: dense always, Linformer
     * on its GEMM path; flash and fused Linformer keep them on chip */
    bool scores_in_memory;
} bench_shape;

typedef struct {
    uint64_t matmul;  /* multiply-adds x 2 of the GEMMs and the attention kernels */
    uint64_t softmax; /* 5 per score (max, subtract, exp, sum, divide), kept apart */
} bench_flops;

bench_flops bench_count_flops(const bench_shape *s);

/* Estimated device-memory traffic of one forward in bytes (model in bench_count.c). */
uint64_t bench_count_bytes(const bench_shape *s);


#endif
