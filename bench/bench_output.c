/* bench_output.c - CSV (RFC 4180 quoting) and JSON (cJSON) files of the results. */
#include "bench_output.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_paper.h"

static const char csv_header[] =
    "device,device_name,mode,n,k,batch,heads,d_model,ms_median,ms_min,ms_max,gflops,flops,softmax_flops,"
    "bytes_moved,device_bytes,vs_exact,xdev,status,causal\n";

/* A field that may hold commas or quotes (device names) is quoted, quotes doubled. */
static void csv_string(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* ",value" with printf format, or "," alone for NaN */
static void csv_number(FILE *out, const char *fmt, double v)
{
    fputc(',', out);
    if (!isnan(v)) fprintf(out, fmt, v);
}

int bench_csv_write(FILE *out, const bench_results *r)
{
    fputs(csv_header, out);
    for (size_t i = 0; i < r->count; i++) {
        const bench_row *w = &r->rows[i];
        const bool ok = w->status == BENCH_OK;
        csv_string(out, w->device);
        fputc(',', out);
        csv_string(out, w->device_name);
        fprintf(out, ",%s,%d,%d,%d,%d,%d", lf_mode_name(w->mode), w->n, w->k, w->batch, w->heads, w->d_model);
        csv_number(out, "%.4f", w->ms_median);
        csv_number(out, "%.4f", w->ms_min);
        csv_number(out, "%.4f", w->ms_max);
        csv_number(out, "%.3f", w->gflops);
        if (w->flops) fprintf(out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, w->flops, w->softmax_flops, w->bytes_moved);
        else fputs(",,,", out); /* the layer could not be created */
        fputc(',', out);
        if (ok) fprintf(out, "%" PRIu64, w->device_bytes);
        csv_number(out, "%.3e", w->vs_exact);
        csv_number(out, "%.3e", w->xdev);
        fprintf(out, ",%s,%d\n", bench_status_name(w->status), w->causal);
    }
    return ferror(out) ? -1 : 0;
}

/* ---- JSON ---- */

static void json_number(cJSON *obj, const char *name, double v)
{
    if (isnan(v))
        cJSON_AddNullToObject(obj, name);
    else
        cJSON_AddNumberToObject(obj, name, v);
}

/* An unsigned count as an exact JSON integer (cJSON's doubles round above 2^53);
 * null when not known (0). */
static void json_count(cJSON *obj, const char *name, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    if (v) cJSON_AddRawToObject(obj, name, text);
    else cJSON_AddNullToObject(obj, name);
}

static cJSON *json_int_list(const int *v, int count)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < count; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *json_options(const bench_options *o)
{
    cJSON *j = cJSON_CreateObject(), *modes = cJSON_CreateArray();
    cJSON_AddItemToObject(j, "n", json_int_list(o->ns, o->n_count));
    cJSON_AddItemToObject(j, "k", json_int_list(o->ks, o->k_count));
    cJSON_AddNumberToObject(j, "d_model", o->d_model);
    cJSON_AddNumberToObject(j, "heads", o->heads);
    cJSON_AddNumberToObject(j, "batch", o->batch);
    for (int m = 0; m < 3; m++)
        if (o->modes[m]) cJSON_AddItemToArray(modes, cJSON_CreateString(lf_mode_name((lf_mode)m)));
    cJSON_AddItemToObject(j, "modes", modes);
    cJSON_AddNumberToObject(j, "repeat", o->repeat);
    cJSON_AddNumberToObject(j, "warmup", o->warmup);
    char seed[24]; /* a string: JSON readers hold numbers as doubles, exact to 2^53 only */
    snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
    cJSON_AddStringToObject(j, "seed", seed);
    cJSON_AddBoolToObject(j, "quick", o->quick);
    cJSON_AddBoolToObject(j, "full", o->full);
    return j;
}

static cJSON *json_device(const lf_device_info *d)
{
    char sel[32];
    snprintf(sel, sizeof sel, "%u:%u", d->platform_index, d->device_index);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "device", sel);
    cJSON_AddStringToObject(j, "name", d->device_name);
    cJSON_AddStringToObject(j, "platform", d->platform_name);
    cJSON_AddStringToObject(j, "driver", d->driver_version);
    json_count(j, "global_mem_bytes", d->global_mem_bytes);
    json_count(j, "max_alloc_bytes", d->max_alloc_bytes);
    json_count(j, "local_mem_bytes", d->local_mem_bytes);
    cJSON_AddNumberToObject(j, "compute_units", d->compute_units);
    return j;
}

static cJSON *json_row(const bench_row *w)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "device", w->device);
    cJSON_AddStringToObject(j, "device_name", w->device_name);
    cJSON_AddStringToObject(j, "mode", lf_mode_name(w->mode));
    cJSON_AddNumberToObject(j, "n", w->n);
    cJSON_AddNumberToObject(j, "k", w->k);
    cJSON_AddNumberToObject(j, "batch", w->batch);
    cJSON_AddNumberToObject(j, "heads", w->heads);
    cJSON_AddNumberToObject(j, "d_model", w->d_model);
    cJSON_AddBoolToObject(j, "causal", w->causal);
    json_number(j, "ms_median", w->ms_median);
    json_number(j, "ms_min", w->ms_min);
    json_number(j, "ms_max", w->ms_max);
    json_number(j, "gflops", w->gflops);
    json_count(j, "flops", w->flops);
    json_count(j, "softmax_flops", w->flops ? w->softmax_flops : 0);
    json_count(j, "bytes_moved", w->flops ? w->bytes_moved : 0);
    json_count(j, "device_bytes", w->status == BENCH_OK ? w->device_bytes : 0);
    json_number(j, "vs_exact", w->vs_exact);
    json_number(j, "xdev", w->xdev);
    cJSON_AddStringToObject(j, "status", bench_status_name(w->status));
    return j;
}

int bench_json_write(FILE *out, const bench_options *o, const lf_device_info *devices, size_t device_count,
                     const bench_results *r)
{
    cJSON *root = cJSON_CreateObject(), *devs = cJSON_CreateArray(), *rows = cJSON_CreateArray();
    char tool[64];
    snprintf(tool, sizeof tool, "linformer bench %s", lf_version_string());
    cJSON_AddStringToObject(root, "tool", tool);
    cJSON_AddStringToObject(root, "paper", bench_paper_source);
    cJSON_AddItemToObject(root, "options", json_options(o));
    for (size_t i = 0; i < device_count; i++) cJSON_AddItemToArray(devs, json_device(&devices[i]));
    cJSON_AddItemToObject(root, "devices", devs);
    for (size_t i = 0; i < r->count; i++) cJSON_AddItemToArray(rows, json_row(&r->rows[i]));
    cJSON_AddItemToObject(root, "rows", rows);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const int rc = text && fputs(text, out) >= 0 && fputc('\n', out) != EOF ? 0 : -1;
    cJSON_free(text);
    return rc;
}
