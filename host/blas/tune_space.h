/*
 * tune_space.h - the parameters tune.c searches: CLBlast's GEMM kernels, the
 * values each parameter takes, and which sets are valid on a device.
 */
#ifndef LF_TUNE_SPACE_H
#define LF_TUNE_SPACE_H

#include "blas.h"

#include <stdint.h>

#define LF_TUNE_MAX_PARAMS 16

typedef struct {
    const char *kernel;
    int count;
    const char *names[LF_TUNE_MAX_PARAMS];      /* CLBlast's database order */
    size_t choices[LF_TUNE_MAX_PARAMS][6];      /* values searched, 0-terminated */
} lf_space;

enum { K_XGEMM, K_DIRECT, K_ROUTINE, K_COUNT };

/* The parameters searched, by kernel. */
extern const lf_space lf__tune_spaces[K_COUNT];

/* The GEMM shape classes, each with sets of its own, by one GEMM's m, n, k
 * (of a batch: one matrix's), in this order:
 *   sum   the inner dimension at least 4 times the longer side of C:
 *         short, wide sums such as the compression E X (k rows of n positions);
 *   head  a side of 128 or less: the per-head scores and P V (d_head wide)
 *         and any small GEMM;
 *   tile  the rest: the projections, the output, the feed-forward. */
enum { C_TILE, C_SUM, C_HEAD, C_COUNT };
extern const char *const lf__gemm_class_names[C_COUNT];
int lf__gemm_class(size_t m, size_t n, size_t k);

/* CLBlast's sets by class and kernel: a stored entry, a row of the built-in
 * table, what a context applies before its GEMMs. A kernel has a set in
 * every class or in none (CLBlast cannot go back to its own set). */
struct lf_tuned {
    bool have[C_COUNT][K_COUNT];
    size_t v[C_COUNT][K_COUNT][LF_TUNE_MAX_PARAMS];
};
typedef struct lf_tuned lf_tuned;

/* XGEMM_MIN_INDIRECT_SIZE's extremes: m n k below its cube goes direct. */
#define LF_NEVER_DIRECT 0
#define LF_ALWAYS_DIRECT 65536 /* its cube is past any m n k here */

/* A stored set as the search would make one: every value among its choices
 * (which keeps the validity products from overflowing), the set valid on d. */
bool lf__tune_stored_valid(int kernel, const size_t *v, const lf_device_info *d);
/* A random valid set of `kernel` on d into v; false when none was found. */
bool lf__tune_random_set(int kernel, const lf_device_info *d, uint64_t *rng, size_t *v);

/* ---- The search (tune.c) ---- */
typedef struct {
    lf_context *ctx;
    lf_tune_log log;
    void *user;
    uint64_t rng;
    double seconds, deadline; /* the limit, and when it is reached (monotonic seconds) */
} lf_tuner;
/* GEMM shapes timed together, each weighted by its calls; with refs (one per
 * shape, lf__gemm_reference's) each result is checked. */
typedef struct {
    const lf_gemm_shape *shapes;
    int count;
    const float *const *refs;
} lf_tune_shapes;
/* Sets tried before the random ones (those not valid on the device are skipped). */
typedef struct {
    const size_t (*sets)[LF_TUNE_MAX_PARAMS];
    int count;
} lf_tune_seeds;
double lf__tune_now(void);
void lf__tune_say(lf_tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A step that runs once whatever the time (the parameters in force, one
 * crossover edge) and ends past the deadline is said: the limit did not hold. */
void lf__tune_overrun(lf_tuner *t, const char *what, const char *which, double began);
/* The ms of the shapes under the parameters in force, given up past `limit`;
 * 1e300 where a GEMM does not build, run, or (*wrong set) gives a wrong result.
 * The compiled programs are kept for the next call (`clear` false) or dropped. */
double lf__tune_cost(lf_context *ctx, const lf_tune_shapes *s, double limit, bool clear, bool *wrong);
/* The seeds, then random valid sets of `kernel`, while there is time before
 * `until`; true with the best in `best` and its ms in *best_ms when one beats
 * *best_ms (1e300: any that runs right). */
bool lf__tune_search(lf_tuner *t, int kernel, double until, const lf_tune_shapes *s, const lf_tune_seeds *seeds,
                     size_t *best, double *best_ms);
/* A search under ctx's lock and the CLBlast lock, on CLBlast whatever ctx's
 * backend: `body` fills `found` (the stored entry's sets at the start), which
 * is then stored and becomes ctx's. */
lf_status lf__tune_run(lf_context *ctx, double seconds, lf_tune_log log, void *user,
                       lf_status (*body)(lf_tuner *t, lf_tuned *found, void *arg), void *arg);

/* ---- The parameters in force (tune_use.c), under the CLBlast lock ---- */
/* Applies a set of `kernel` to ctx's device and notes it as in force there. */
lf_status lf__tune_set(lf_context *ctx, int kernel, const size_t *values);
/* The set of `kernel` last applied to the device into values; false when none is known. */
bool lf__tune_in_force(cl_device_id device, int kernel, size_t *values);

/* ---- Entries as text (tune_entry.c) ---- */
/* Lines "[CLASS] KERNEL NAME=VALUE ..." with every parameter of a known
 * kernel, in CLBlast's database order; a line without a class holds the set
 * of every class (the one-set entries stored before the classes). False, and
 * nothing kept, when a line does not parse, a set is not one the search could
 * make on d, or a kernel has sets in some classes only. `text` is cut up. */
bool lf__tune_parse(char *text, const lf_device_info *d, lf_tuned *t);
/* The lines of t: a kernel's set once where every class has the same. */
void lf__tune_format(const lf_tuned *t, char *out, size_t size);

/* ---- The built-in table (tune_table.c) ---- */
/* The table's row of device d into t; *found false when no row is d's. LINFORMER_GEMM_TABLE names a file read in
 * the table's place (rows in the same text): one that cannot be read, or a
 * row of d that does not parse, fails with the message in errbuf. */
lf_status lf__tune_table(const lf_device_info *d, lf_tuned *t, bool *found, char *errbuf, size_t errbuf_size);

#endif
