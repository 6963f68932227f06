/*
 * test_tune_classes.c - CLBlast's sets per GEMM shape class: a stored entry
 * (one set for all, as stored before the classes, or one per class) and the
 * built-in table's row (LINFORMER_GEMM_TABLE in its place) are applied class
 * by class before each CLBlast GEMM and only where another set is in force;
 * `tune --model` searches the GEMMs the forward runs, holds its time limit
 * and checks each result against the host BLAS's.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas.h"
#include "helpers.h"
#include "kernel_cache.h"
#include "runtime.h"
#include "tune_space.h"

#include <clblast_c.h>

/* One GEMM of each class, C = A B^T (lf_gemm_rate's). */
static const size_t class_shape[C_COUNT][3] = {
    [C_TILE] = {256, 192, 160}, [C_SUM] = {160, 192, 1024}, [C_HEAD] = {256, 64, 64}};

Test(tune_classes, the_rule_sorts_the_layers_gemms)
{
    for (int c = 0; c < C_COUNT; c++)
        cr_expect_eq(lf__gemm_class(class_shape[c][0], class_shape[c][1], class_shape[c][2]), c, "%s",
                     lf__gemm_class_names[c]);
    cr_expect_eq(lf__gemm_class(4096, 1536, 512), C_TILE, "a Q|K|V projection");
    cr_expect_eq(lf__gemm_class(256, 512, 4096), C_SUM, "the compression E X");
    cr_expect_eq(lf__gemm_class(4096, 256, 64), C_HEAD, "one head's scores");
    cr_expect_eq(lf__gemm_class(4096, 64, 256), C_HEAD, "one head's P V");
}

/* The stored entry's path and key for this device, in a new cache folder,
 * with an empty table in the built-in one's place (it may have a row of this
 * device). */
static void entry_at(char *dir, char *path, char *key)
{
    lf_test_make_dir(dir, "tune-classes");
    cr_assert_eq(setenv("LINFORMER_CACHE_DIR", dir, 1), 0);
    snprintf(path, 4200, "%s/no-rows", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(setenv("LINFORMER_GEMM_TABLE", path, 1), 0);
    cr_assert_eq(setenv("LINFORMER_GEMM", "clblast", 1), 0);
    lf_context *ctx = lf_test_context();
    snprintf(key, 1024, "gemm-tune 1|CLBlast %d.%d.%d|%s|%s|%s", CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR,
             CLBLAST_VERSION_PATCH, ctx->info.platform_version, ctx->info.device_name, ctx->info.driver_version);
    lf_context_free(ctx);
    lf__cache_path(dir, key, path, 4200);
}

#define XGEMM(MWG, NWG) \
    "Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=8 MDIMC=8 MWG=" #MWG " NDIMB=8 NDIMC=8 NWG=" #NWG " SA=0 SB=0 STRM=0 " \
    "STRN=0 VWM=1 VWN=1\n"
#define DIRECT(WGD) "XgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=8 NDIMCD=8 PADA=1 PADB=1 VWMD=1 VWND=1 WGD=" #WGD "\n"

/* The MWG of Xgemm and WGD of XgemmDirect in force, and the threshold; 0 where none is known. */
static void in_force(lf_context *ctx, size_t out[3])
{
    size_t v[LF_TUNE_MAX_PARAMS];
    out[0] = lf__tune_in_force(ctx->device, K_XGEMM, v) ? v[6] : 0;
    out[1] = lf__tune_in_force(ctx->device, K_DIRECT, v) ? v[9] : 0;
    out[2] = lf__tune_in_force(ctx->device, K_ROUTINE, v) ? v[0] : 0;
}

static void gemm_of(lf_context *ctx, int c)
{
    double gflops = 0;
    cr_assert_eq(lf_gemm_rate(ctx, class_shape[c][0], class_shape[c][1], class_shape[c][2], &gflops), LF_OK, "%s",
                 lf_context_last_error(ctx));
}

Test(tune_classes, an_entry_of_one_set_is_the_set_of_every_class, .timeout = 900)
{
    char dir[64], key[1024], path[4200];
    entry_at(dir, path, key);
    const char *text = XGEMM(32, 32) DIRECT(16) "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=64\n";
    lf__cache_store(path, key, (const unsigned char *)text, strlen(text));
    lf_context *ctx = lf_test_context();
    cr_assert_eq(ctx->cache_rejected, 0);
    cr_assert_not_null(ctx->tuned, "the entry was not loaded");
    for (int c = 0; c < C_COUNT; c++) {
        gemm_of(ctx, c);
        size_t got[3];
        in_force(ctx, got);
        cr_expect(got[0] == 32 && got[1] == 16 && got[2] == 64, "%s: MWG %zu, WGD %zu, threshold %zu",
                  lf__gemm_class_names[c], got[0], got[1], got[2]);
    }
    cr_expect_eq(ctx->tune_applied, 3, "one set per kernel, applied once: %u", ctx->tune_applied);
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}

Test(tune_classes, each_class_runs_its_own_sets_applied_only_on_a_change, .timeout = 900)
{
    char dir[64], key[1024], path[4200];
    entry_at(dir, path, key);
    const char *text = "tile " XGEMM(32, 32) "sum " XGEMM(64, 32) "head " XGEMM(16, 16) DIRECT(16)
                       "tile GemmRoutine XGEMM_MIN_INDIRECT_SIZE=0\nsum GemmRoutine XGEMM_MIN_INDIRECT_SIZE=0\n"
                       "head GemmRoutine XGEMM_MIN_INDIRECT_SIZE=65536\n";
    lf__cache_store(path, key, (const unsigned char *)text, strlen(text));
    lf_context *ctx = lf_test_context();
    cr_assert_not_null(ctx->tuned, "the entry was not loaded (%u bad)", ctx->cache_rejected);
    static const size_t want[C_COUNT][3] = {[C_TILE] = {32, 16, 0}, [C_SUM] = {64, 16, 0}, [C_HEAD] = {16, 16, 65536}};
    static const int order[] = {C_TILE, C_TILE, C_SUM, C_HEAD, C_HEAD, C_TILE};
    /* after each: tile all 3; sum Xgemm; head Xgemm and the threshold */
    static const unsigned applied[] = {3, 3, 4, 6, 6, 8};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const int c = order[i];
        gemm_of(ctx, c);
        size_t got[3];
        in_force(ctx, got);
        cr_expect(got[0] == want[c][0] && got[1] == want[c][1] && got[2] == want[c][2],
                  "step %zu, %s: MWG %zu, WGD %zu, threshold %zu", i, lf__gemm_class_names[c], got[0], got[1], got[2]);
        cr_expect_eq(ctx->tune_applied, applied[i], "step %zu (%s): %u sets applied, wanted %u", i,
                     lf__gemm_class_names[c], ctx->tune_applied, applied[i]);
    }
    lf_context_free(ctx);
    /* a kernel with sets in some classes only is a bad entry, never applied */
    const char *partial = "tile " XGEMM(32, 32);
    lf__cache_store(path, key, (const unsigned char *)partial, strlen(partial));
    ctx = lf_test_context();
    cr_expect_eq(ctx->cache_rejected, 1);
    cr_expect_null(ctx->tuned);
    lf_context_free(ctx);
    lf_test_remove_dir(dir);
}

/* A table file's row for this device is applied; a stored entry wins over it; another device's row is not. */
Test(tune_classes, the_tables_row_of_the_device_applies_and_an_entry_wins, .timeout = 900)
{
    char dir[64], key[1024], path[4200], table[4300];
    entry_at(dir, path, key);
    lf_context *ctx = lf_test_context();
    const lf_device_info d = ctx->info;
    lf_context_free(ctx);
    snprintf(table, sizeof table, "%s/table.txt", dir);
    for (int row = 0; row < 3; row++) {
        FILE *f = fopen(table, "w");
        cr_assert_not_null(f);
        fprintf(f, "device Other vendor|Other device|0|nowhere\n%s", XGEMM(64, 64));
        fprintf(f, "device %s|%s|%u|here, today\n%s", row == 2 ? "no such vendor" : d.vendor, d.device_name,
                row == 1 ? d.compute_units + 1 : d.compute_units, XGEMM(16, 16));
        fclose(f);
        cr_assert_eq(setenv("LINFORMER_GEMM_TABLE", table, 1), 0);
        ctx = lf_test_context();
        if (row == 0) {
            cr_assert_not_null(ctx->tuned, "the device's row was not applied");
            cr_expect_eq(ctx->tuned->v[C_SUM][K_XGEMM][6], 16);
        } else {
            cr_expect_null(ctx->tuned, "row %d names another device", row);
        }
        lf_context_free(ctx);
    }
    FILE *f = fopen(table, "w");
    fprintf(f, "device %s|%s|0|here\n%s", d.vendor, d.device_name, XGEMM(16, 16));
    fclose(f);
    const char *text = XGEMM(32, 32);
    lf__cache_store(path, key, (const unsigned char *)text, strlen(text));
    ctx = lf_test_context();
    cr_assert_not_null(ctx->tuned);
    cr_expect_eq(ctx->tuned->v[C_TILE][K_XGEMM][6], 32, "the stored entry wins over the table");
    lf_context_free(ctx);
    /* a table that cannot be read, or whose row of the device is no valid set, fails naming it */
    static const char *const bad[] = {"/nonexistent/table", NULL};
    f = fopen(table, "w");
    fprintf(f, "device %s|%s|0|here\nXgemm GEMMK=7\n", d.vendor, d.device_name);
    fclose(f);
    unlink(path);
    for (int i = 0; i < 2; i++) {
        setenv("LINFORMER_GEMM_TABLE", bad[i] ? bad[i] : table, 1);
        char msg[1024] = "";
        lf_context *c = NULL;
        cr_expect_neq(lf_context_create(NULL, &c, msg, sizeof msg), LF_OK);
        cr_expect_null(c);
        cr_expect(strstr(msg, bad[i] ? "LINFORMER_GEMM_TABLE" : table), "%s", msg);
    }
    unsetenv("LINFORMER_GEMM_TABLE");
    lf_test_remove_dir(dir);
}
#undef XGEMM
#undef DIRECT

/* ---- tune --model ---- */

static const char *model_path(void)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/models/encoder_depth3.model.safetensors", LF_SOURCE_DIR);
    return path;
}

/* The stages of GEMMs (stages.c, model_forward.c; the sequence projections
 * are GEMMs with learned E and F, as this model's), a prefix each. */
static const char *const gemm_stages[] = {"gemm", "sum of slices", "bias kv (row sums)", "row sums of E",
                                          "seq_project"};

/* The GEMM calls the forward runs (its profile's GEMM stages' commands) are the calls noted. */
Test(tune_classes, the_shapes_noted_are_the_forwards_gemms, .timeout = 600)
{
    lf_context *ctx = lf_test_context();
    lf_model *model = NULL;
    cr_assert_eq(lf_model_load(ctx, model_path(), NULL, &model), LF_OK, "%s", lf_context_last_error(ctx));
    lf_model_info info;
    lf_model_info_get(model, &info);
    const int n = info.max_seq_len, batch = 2;
    float *x = calloc((size_t)batch * n * info.d_model, sizeof *x);
    float *y = calloc((size_t)batch * n * info.d_model, sizeof *y);
    cr_assert_eq(lf_model_forward(model, x, NULL, y, batch, n, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    lf_stage_time stages[64];
    size_t count = 0;
    cr_assert_eq(lf_model_last_profile(model, stages, 64, &count), LF_OK);
    unsigned gemms = 0;
    for (size_t i = 0; i < count && i < 64; i++)
        for (size_t j = 0; j < sizeof gemm_stages / sizeof gemm_stages[0]; j++)
            if (strncmp(stages[i].stage, gemm_stages[j], strlen(gemm_stages[j])) == 0) {
                gemms += stages[i].commands;
                break;
            }
    lf_gemm_record r = {0};
    ctx->gemm_record = &r;
    cr_assert_eq(lf_model_forward(model, x, NULL, y, batch, n, NULL), LF_OK, "%s", lf_context_last_error(ctx));
    ctx->gemm_record = NULL;
    cr_expect_gt(gemms, 0);
    cr_expect_eq(r.calls, gemms, "noted %u GEMM calls, the forward's profile has %u", r.calls, gemms);
    unsigned calls = 0;
    for (size_t i = 0; i < r.count; i++) calls += r.shapes[i].calls;
    cr_expect_eq(calls, r.calls, "each call is one shape's");
    for (size_t i = 0; i < r.count; i++)
        for (size_t j = 0; j < i; j++)
            cr_expect(memcmp(&r.shapes[i], &r.shapes[j], offsetof(lf_gemm_shape, calls)) != 0, "shapes %zu and %zu", i,
                      j);
    free(x), free(y);
    lf_model_free(model);
    lf_context_free(ctx);
}

/* A GEMM whose result differs from the host BLAS's is refused as wrong. */
Test(tune_classes, the_check_catches_a_wrong_gemm, .timeout = 600)
{
    cr_assert_eq(setenv("LINFORMER_GEMM", "clblast", 1), 0);
    lf_context *ctx = lf_test_context();
    const lf_gemm_shape s = {.trans_b = true, .batched = true, .m = 48, .n = 40, .k = 24, .batch = 3, .calls = 1};
    float *ref = lf__gemm_reference(&s);
    cr_assert_not_null(ref);
    double ms = 0;
    cr_expect_eq(lf__gemm_time(ctx, &s, 1, ref, &ms), LF_OK, "%s", lf_context_last_error(ctx));
    ref[2 * 48 * 40 + 7] += 1.0f; /* one element of the last matrix */
    cr_expect_eq(lf__gemm_time(ctx, &s, 1, ref, &ms), LF_ERR_BLAS);
    cr_expect(strstr(lf_context_last_error(ctx), "is wrong"), "%s", lf_context_last_error(ctx));
    free(ref);
    lf_context_free(ctx);
}

/* The command: a model file that cannot be read fails with its path, status 1, before any search. */
Test(tune_classes, tune_model_names_a_bad_file, .timeout = 300)
{
    char cmd[1024], log[8192];
    snprintf(cmd, sizeof cmd, "%s tune --model /nonexistent/model.safetensors --seconds 600", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "linformer tune: ") && strstr(log, "/nonexistent/model.safetensors") &&
              !strstr(log, "tuning CLBlast"), "%s", log);
}
