/* rank.c - the measurement of `linformer rank` (see rank.h). */
#include "rank.h"

#include <lapacke.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench_memory.h"
#include "bench_progress.h"
#include "cli.h"

const double rank_levels[RANK_LEVELS] = {0.90, 0.95, 0.99};

/* A note on `log`, on a line of its own below the progress bar, if any. */
static void note(const rank_results *r, FILE *log, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(const rank_results *r, FILE *log, const char *fmt, ...)
{
    if (r->progress) bench_progress_clear(r->progress);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(log, fmt, ap);
    va_end(ap);
}

/* ---- The numbers ---- */

int rank_singular_values(const float *p, int n, double *sigma)
{
    const size_t count = (size_t)n * n;
    double *a = malloc(count * sizeof *a);
    if (!a) return -1;
    for (size_t i = 0; i < count; i++) a[i] = p[i];
    /* Values only (jobz 'N'): U and V^T are never formed. */
    const lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', n, n, a, n, sigma, NULL, n, NULL, n);
    free(a);
    return info == 0 ? 0 : -1;
}

void rank_cumulative(const double *sigma, int n, double *c)
{
    double total = 0, partial = 0;
    for (int r = 0; r < n; r++) total += sigma[r];
    for (int r = 0; r < n; r++) {
        partial += sigma[r];
        c[r] = total > 0 ? partial / total : 1.0;
    }
    c[n - 1] = 1.0; /* the whole spectrum, whatever the rounding of the sums */
}

int rank_at_level(const double *c, int n, double level)
{
    for (int r = 0; r < n; r++)
        if (c[r] >= level) return r + 1;
    return n;
}

double rank_rel_err(const float *a, const float *b, int rows, int cols, int ld)
{
    double num = 0, den = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            const double d = (double)a[(size_t)i * ld + j] - b[(size_t)i * ld + j];
            num += d * d;
            den += (double)b[(size_t)i * ld + j] * b[(size_t)i * ld + j];
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- The sweep ---- */

/* Inserts k into the ascending sweep unless it is there (or the sweep is full). */
static void add_k(rank_results *r, int k)
{
    int i = 0;
    while (i < r->ks && r->k[i] < k) i++;
    if ((i < r->ks && r->k[i] == k) || r->ks == RANK_MAX_K) return;
    memmove(&r->k[i + 1], &r->k[i], (r->ks - i) * sizeof r->k[0]);
    r->k[i] = k;
    r->ks++;
}

void rank_default_sweep(int model_k, int limit, rank_results *r)
{
    const int scaled[] = {model_k / 4, model_k / 2, model_k, model_k * 2, model_k * 4};
    for (size_t i = 0; i < sizeof scaled / sizeof scaled[0]; i++)
        add_k(r, scaled[i] < 1 ? 1 : scaled[i] > limit ? limit : scaled[i]);
}

int rank_parse_sweep(const char *list, int limit, rank_results *r, char *err, size_t err_size)
{
    r->ks = 0;
    for (const char *s = list;; s++) {
        char item[32];
        const size_t len = strcspn(s, ",");
        int k;
        if (len >= sizeof item) return snprintf(err, err_size, "--k: \"%.*s\" is not a k", (int)len, s), -1;
        memcpy(item, s, len);
        item[len] = '\0';
        if (cli_int("--k", item, 1, limit, &k, err, err_size)) return -1;
        if (r->ks == RANK_MAX_K) return snprintf(err, err_size, "--k takes at most %d values", RANK_MAX_K), -1;
        add_k(r, k);
        s += len;
        if (!*s) return 0;
    }
}

/* ---- The layers ---- */

static lf_status load(lf_context *ctx, const rank_source *src, const lf_load_options *o, lf_attention **out)
{
    if (src->model) return lf_model_layer_attention(src->model, src->index, o, out);
    return lf_attention_load_with(ctx, src->path, o, out);
}

/* A file's from proj_k [max_seq_len, k], which loading checks; a model's
 * layer's from that layer with its own projections. */
int rank_own_k(const rank_source *src)
{
    lf_attention_config cfg = {0};
    if (src->model) {
        lf_attention *a = NULL;
        if (lf_model_layer_attention(src->model, src->index, NULL, &a) == LF_OK) lf_attention_config_get(a, &cfg);
        lf_attention_free(a);
        return cfg.k;
    }
    lf_tensor_file *f = NULL;
    lf_tensor_info t;
    if (lf_tensor_file_open(src->path, &f, NULL, 0) == LF_OK && lf_tensor_file_find(f, "proj_k", &t) == LF_OK &&
        t.ndim == 2)
        cfg.k = (int)t.shape[1];
    lf_tensor_file_free(f);
    return cfg.k;
}

lf_status rank_load_exact(lf_context *ctx, const rank_source *src, int heads, rank_layer *layer)
{
    memset(layer, 0, sizeof *layer);
    layer->ctx = ctx;
    lf_load_options o;
    lf_load_options_init(&o);
    o.heads = heads;
    o.mode = LF_MODE_FLASH; /* exact head outputs without an n x n matrix; P comes whatever the mode */
    lf_status st = load(ctx, src, &o, &layer->exact);
    if (st == LF_OK) layer->model_k = rank_own_k(src);
    return st;
}

lf_status rank_load_sweep(rank_layer *layer, const rank_source *src, uint64_t seed, const rank_results *r, FILE *log)
{
    lf_attention_config cfg;
    lf_status st = lf_attention_config_get(layer->exact, &cfg);
    if (st != LF_OK) return st;
    lf_load_options o;
    lf_load_options_init(&o);
    o.heads = cfg.heads;
    o.seed = seed;
    for (int i = 0; i < r->ks; i++) {
        /* The layer's own E and F at its own k; Johnson-Lindenstrauss ones at any other. */
        o.k = r->k[i] == layer->model_k ? 0 : r->k[i];
        o.projection = o.k ? LF_PROJ_RANDOM : LF_PROJ_LEARNED;
        if (load(layer->ctx, src, &o, &layer->at_k[i]) != LF_OK)
            note(r, log, "linformer rank: note: Linformer with k = %d cannot run on layer %d (%s); its errors are left "
                    "empty\n", r->k[i], src->index, lf_context_last_error(layer->ctx));
    }
    return LF_OK;
}

void rank_free_layer(rank_layer *layer)
{
    lf_attention_free(layer->exact);
    for (int i = 0; i < RANK_MAX_K; i++) lf_attention_free(layer->at_k[i]);
    memset(layer, 0, sizeof *layer);
}

/* ---- Measuring ---- */

static rank_row *add_row(rank_results *r, int n)
{
    if (r->count == r->capacity) {
        const size_t cap = r->capacity ? 2 * r->capacity : 16;
        rank_row *rows = realloc(r->rows, cap * sizeof *rows);
        if (!rows) return NULL;
        r->rows = rows, r->capacity = cap;
    }
    rank_row *row = &r->rows[r->count];
    memset(row, 0, sizeof *row);
    if (!(row->cumulative = malloc((size_t)n * sizeof *row->cumulative))) return NULL;
    r->count++;
    return row;
}

/* What one sequence needs on the host: P of one head, its spectrum, and the
 * head outputs, exact and at each k ([ks + 1][n, width]; index 0 exact). */
typedef struct {
    float *p, *outputs;
    double *sigma;
    int n, width, d_head;
    bool not_finite; /* P was not: the sequence is skipped, the run goes on */
    char *err; /* where a failure of our own is described */
    size_t err_size;
} sequence_work;

static void work_free(sequence_work *w) { free(w->p), free(w->outputs), free(w->sigma); }

static int work_alloc(sequence_work *w, const lf_attention_config *cfg, int n, int ks, char *err, size_t err_size)
{
    *w = (sequence_work){.n = n, .width = cfg->heads * cfg->d_head, .d_head = cfg->d_head, .err = err,
                         .err_size = err_size};
    w->p = malloc((size_t)n * n * sizeof *w->p);
    w->outputs = malloc((size_t)(ks + 1) * n * w->width * sizeof *w->outputs);
    w->sigma = malloc((size_t)n * sizeof *w->sigma);
    if (w->p && w->outputs && w->sigma) return 0;
    work_free(w);
    return -1;
}

/* The heads' outputs, exact and at each k that runs. */
static lf_status head_outputs(const rank_layer *L, const float *x, const rank_results *r, sequence_work *w)
{
    const size_t size = (size_t)w->n * w->width;
    lf_status st = lf_attention_head_outputs(L->exact, x, w->outputs, 1, w->n, NULL);
    for (int i = 0; i < r->ks && st == LF_OK; i++)
        if (L->at_k[i]) st = lf_attention_head_outputs(L->at_k[i], x, w->outputs + (i + 1) * size, 1, w->n, NULL);
    return st;
}

static bool all_finite(const float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* One row: P of `head` from the device (unless w->p holds it already), its spectrum and k-levels, the errors. */
static lf_status measure_head(const rank_layer *L, const float *x, int head, bool have_p, sequence_work *w,
                              rank_row *row, const rank_results *r)
{
    const int n = w->n;
    lf_status st = have_p ? LF_OK : lf_attention_probabilities(L->exact, x, w->p, n, head);
    if (st != LF_OK) return st;
    if ((w->not_finite = !all_finite(w->p, (size_t)n * n))) {
        snprintf(w->err, w->err_size, "head %d's attention matrix is not finite (NaN or inf)", head);
        return LF_ERR_UNSUPPORTED;
    }
    if (rank_singular_values(w->p, n, w->sigma) != 0) {
        snprintf(w->err, w->err_size, "the SVD of head %d's %d x %d attention matrix failed (out of host memory, "
                 "or LAPACK did not converge)", head, n, n);
        return LF_ERR_UNSUPPORTED;
    }
    rank_cumulative(w->sigma, n, row->cumulative);
    for (int l = 0; l < RANK_LEVELS; l++) row->k_at[l] = rank_at_level(row->cumulative, n, rank_levels[l]);
    const size_t size = (size_t)n * w->width, col = (size_t)head * w->d_head;
    for (int i = 0; i < r->ks; i++)
        row->err[i] = L->at_k[i] ? rank_rel_err(w->outputs + (i + 1) * size + col, w->outputs + col, n, w->d_head, w->width)
                                 : NAN;
    return LF_OK;
}

/* Drops the rows from `first` on (a sequence skipped halfway) and counts the skip. */
static void skip_rows(rank_results *r, size_t first)
{
    while (r->count > first) free(r->rows[--r->count].cumulative);
    r->skipped++;
}

static lf_status measure_sequence(const rank_layer *L, int layer_index, int seq, const float *x, int n,
                                  rank_results *r, FILE *log, char *err, size_t err_size)
{
    lf_attention_config cfg;
    sequence_work w;
    lf_status st = lf_attention_config_get(L->exact, &cfg);
    if (st != LF_OK) return st;
    if (!all_finite(x, (size_t)n * cfg.d_model)) { /* one bad sequence does not end the run */
        note(r, log, "linformer rank: layer %d, sequence %d: its input is not finite (NaN or inf); skipped\n",
                layer_index, seq);
        r->skipped++;
        return LF_OK;
    }
    /* P in floats, its double copy for the SVD, the head outputs: checked before allocating (a lazily
     * granted malloc would be killed as it fills) */
    const double need = (double)n * n * (sizeof(float) + sizeof(double)) +
                        (double)(r->ks + 1) * n * cfg.heads * cfg.d_head * sizeof(float) + 16.0 * n * sizeof(double),
                 available = bench_host_available();
    if (need > available) {
        note(r, log, "linformer rank: sequence %d (n = %d): its %d x %d matrix, the SVD's copy and the head outputs "
             "need %.2f GiB of host memory, %.2f GiB is available; skipped\n", seq, n, n, n, need / (1 << 30),
             available / (1 << 30));
        r->skipped++;
        return LF_OK;
    }
    if (work_alloc(&w, &cfg, n, r->ks, err, err_size) != 0) {
        note(r, log, "linformer rank: sequence %d (n = %d): out of host memory for its %d x %d matrix; skipped\n", seq,
                n, n, n);
        r->skipped++;
        return LF_OK;
    }
    /* Head 0's P first: a sequence over the device's n x n budget is skipped before any other work. */
    st = lf_attention_probabilities(L->exact, x, w.p, n, 0);
    if (st == LF_OK) st = head_outputs(L, x, r, &w);
    if (st == LF_ERR_OUT_OF_MEMORY) {
        note(r, log, "linformer rank: sequence %d (n = %d) skipped: %s\n", seq, n,
                lf_context_last_error(L->ctx));
        r->skipped++;
        work_free(&w);
        return LF_OK;
    }
    const size_t first = r->count;
    for (int h = 0; h < cfg.heads && st == LF_OK; h++) {
        rank_row *row = add_row(r, n);
        if (!row) st = LF_ERR_OUT_OF_MEMORY, snprintf(err, err_size, "out of host memory for the results");
        else *row = (rank_row){.seq = seq, .layer = layer_index, .head = h, .n = n, .own_k = L->model_k,
                               .cumulative = row->cumulative};
        if (st == LF_OK) st = measure_head(L, x, h, h == 0, &w, row, r);
        if (st == LF_OK && r->progress) {
            char step[96];
            snprintf(step, sizeof step, "layer %d head %d sequence %d", layer_index, h, seq);
            bench_progress_tick(r->progress, step);
        }
    }
    if (w.not_finite) { /* this sequence only */
        note(r, log, "linformer rank: layer %d, sequence %d: %s; skipped\n", layer_index, seq, err);
        skip_rows(r, first);
        err[0] = '\0';
        st = LF_OK;
    }
    work_free(&w);
    return st;
}

lf_status rank_measure_layer(const rank_layer *layer, int layer_index, const float *x, int batch, int n,
                             const int32_t *lengths, rank_results *r, FILE *log, char *err, size_t err_size)
{
    lf_attention_config cfg;
    err[0] = '\0';
    lf_status st = lf_attention_config_get(layer->exact, &cfg);
    for (int s = 0; s < batch && st == LF_OK; s++) {
        const int len = lengths ? lengths[s] : n;
        if (len == 0) note(r, log, "linformer rank: sequence %d has length 0: nothing to measure\n", s);
        else st = measure_sequence(layer, layer_index, s, x + (size_t)s * n * cfg.d_model, len, r, log, err, err_size);
    }
    /* A failure of the library's own is described by its context. */
    if (st != LF_OK && !err[0]) snprintf(err, err_size, "%s", lf_context_last_error(layer->ctx));
    return st;
}

void rank_results_free(rank_results *r)
{
    for (size_t i = 0; i < r->count; i++) free(r->rows[i].cumulative);
    free(r->rows);
    r->rows = NULL;
    r->count = r->capacity = 0;
}
