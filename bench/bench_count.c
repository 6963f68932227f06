/*
 * bench_count.c - flops and bytes of one forward, step by step as host/attention/attention.c
 * runs it. B = batch, D = d_model, H = heads, KV = kv_heads, dh = d_head,
 * g = 2 key/value groups (1 with share_kv), nk = keys attended (k, or n when exact).
 *
 * Flops (a multiply-add is 2):
 *   QKV GEMM          2 B n D (H dh + g KV dh)
 *   E K, F V          2 B k n g KV dh          (Linformer only)
 *   scores and P V    4 B H n nk dh
 *   output GEMM       2 B n H dh D
 * Bias additions (B n (H dh + g KV dh + D)) are left out: under 1% of the total.
 * Softmax: 5 flops per score, reported apart and left out of GFLOP/s.
 */
#include "bench_count.h"

typedef struct {
    uint64_t B, n, k, nk, D, qd, kvd, g;
} dims;

static dims dims_of(const bench_shape *s)
{
    dims d;
    d.B = (uint64_t)s->batch;
    d.n = (uint64_t)s->n;
    d.k = s->mode == LF_MODE_LINFORMER ? (uint64_t)s->k : 0;
    d.nk = s->mode == LF_MODE_LINFORMER ? d.k : d.n;
    d.D = (uint64_t)s->d_model;
    d.qd = (uint64_t)s->heads * s->d_head;
    d.kvd = (uint64_t)s->kv_heads * s->d_head;
    d.g = s->share_kv ? 1 : 2;
    return d;
}

bench_flops bench_count_flops(const bench_shape *s)
{
    const dims d = dims_of(s);
    const uint64_t H = (uint64_t)s->heads, dh = (uint64_t)s->d_head;
    bench_flops f;
    f.matmul = 2 * d.B * d.n * d.D * (d.qd + d.g * d.kvd) /* QKV */
             + 2 * d.B * d.k * d.n * d.g * d.kvd          /* sequence projection (k = 0 when exact) */
             + 4 * d.B * H * d.n * d.nk * dh              /* scores and P V */
             + 2 * d.B * d.n * d.qd * d.D;                /* output projection */
    f.softmax = 5 * d.B * H * d.n * d.nk;
    return f;
}

/*
 * Bytes: a compulsory-traffic model. Each kernel reads each of its operands once
 * and writes its result once; re-reads across work-groups (tiles of K and V that
 * every query block loads again) are taken to hit in cache and are not counted,
 * so this is a lower bound. Per step, in floats:
 *   QKV GEMM     read x B n D and W (H dh + g KV dh) D, write QKV B n C (C = H dh + g KV dh)
 *   QKV bias     read and write QKV, read the bias C
 *   E K, F V     read K, V B n g KV dh and E, F g k n, write K~, V~ B k g KV dh
 *   attention    read Q B n H dh, keys and values B nk g KV dh, write O B n H dh;
 *                with scores in memory also: the score GEMM writes B H n nk, the
 *                softmax reads and writes them, P V reads them (4 B H n nk)
 *   output GEMM  read O B n H dh and Wo D H dh, write y B n D
 *   output bias  read and write y, read the bias D (the pass that also zeroes padding)
 */
uint64_t bench_count_bytes(const bench_shape *s)
{
    const dims d = dims_of(s);
    const uint64_t C = d.qd + d.g * d.kvd, H = (uint64_t)s->heads;
    uint64_t floats = d.B * d.n * d.D + C * d.D + d.B * d.n * C /* QKV GEMM */
                    + 2 * d.B * d.n * C + C                     /* QKV bias */
                    + d.B * d.n * d.qd + d.B * d.nk * d.g * d.kvd + d.B * d.n * d.qd; /* attention */
    if (s->mode == LF_MODE_LINFORMER)
        floats += d.B * d.n * d.g * d.kvd + d.g * d.k * d.n + d.B * d.k * d.g * d.kvd;
    if (s->scores_in_memory) floats += 4 * d.B * H * d.n * d.nk;
    floats += d.B * d.n * d.qd + d.D * d.qd + d.B * d.n * d.D /* output GEMM */
            + 2 * d.B * d.n * d.D + d.D;                      /* output bias */
    return floats * sizeof(float);
}
