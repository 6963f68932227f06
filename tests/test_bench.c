/*
 * test_bench.c - `linformer bench`: flop and byte counts against hand-computed
 * numbers, the CSV writer's exact text, option parsing, the plot data, a bench
 * point against the double-precision reference, and tiny end-to-end runs of
 * the program. No test asserts a time.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_count.h"
#include "bench_data.h"
#include "bench_options.h"
#include "bench_output.h"
#include "bench_paper.h"
#include "bench_plot.h"
#include "helpers.h"
#include "reference.h"

/* ---- Counting ---- */

/* B 2, n 10, D 12, H 3, d_head 4: small enough to count by hand. */
static bench_shape shape(lf_mode mode, int k, bool scores_in_memory)
{
    return (bench_shape){.mode = mode, .batch = 2, .n = 10, .k = k, .d_model = 12, .heads = 3, .d_head = 4,
                         .kv_heads = 3, .share_kv = false, .scores_in_memory = scores_in_memory};
}

Test(count, flops_by_hand)
{
    /* QKV 2*2*10*12*(12+24) = 17280, output 2*2*10*12*12 = 5760 */
    bench_shape s = shape(LF_MODE_DENSE, 0, true);
    bench_flops f = bench_count_flops(&s);
    cr_expect_eq(f.matmul, 17280 + 4 * 2 * 3 * 10 * 10 * 4 + 5760, "dense: %llu", (unsigned long long)f.matmul);
    cr_expect_eq(f.softmax, 5 * 2 * 3 * 10 * 10);

    s = shape(LF_MODE_FLASH, 0, false);
    cr_expect_eq(bench_count_flops(&s).matmul, 32640);

    /* Linformer k = 4: + E K, F V 2*2*4*10*2*12 = 3840; attention 4*2*3*10*4*4 = 3840 */
    s = shape(LF_MODE_LINFORMER, 4, false);
    f = bench_count_flops(&s);
    cr_expect_eq(f.matmul, 17280 + 3840 + 3840 + 5760, "linformer: %llu", (unsigned long long)f.matmul);
    cr_expect_eq(f.softmax, 5 * 2 * 3 * 10 * 4);

    /* k is ignored by the exact modes */
    s = shape(LF_MODE_DENSE, 4, true);
    cr_expect_eq(bench_count_flops(&s).matmul, 32640);

    /* share_kv: one group. QKV 2*2*10*12*24 = 11520, E K 2*2*4*10*12 = 1920 */
    s = shape(LF_MODE_LINFORMER, 4, false);
    s.share_kv = true;
    cr_expect_eq(bench_count_flops(&s).matmul, 11520 + 1920 + 3840 + 5760);

    /* one key/value head: QKV 2*2*10*12*(12+8) = 9600, E K, F V 2*2*4*10*2*4 = 1280 */
    s = shape(LF_MODE_LINFORMER, 4, false);
    s.kv_heads = 1;
    cr_expect_eq(bench_count_flops(&s).matmul, 9600 + 1280 + 3840 + 5760);
}

Test(count, bytes_by_hand)
{
    /* floats: QKV GEMM 240 + 432 + 720, QKV bias 1440 + 36, attention 240 + 480 + 240,
     * scores 4*2*3*10*10 = 2400, output GEMM 240 + 144 + 240, output bias 480 + 12 */
    bench_shape s = shape(LF_MODE_DENSE, 0, true);
    cr_expect_eq(bench_count_bytes(&s), 7344 * 4, "dense: %llu", (unsigned long long)bench_count_bytes(&s));
    s = shape(LF_MODE_FLASH, 0, false);
    cr_expect_eq(bench_count_bytes(&s), (7344 - 2400) * 4);
    /* Linformer k = 4: attention reads 2*4*2*12 = 192 compressed floats instead of 480;
     * E K, F V read 480 + 2*4*10 = 80, write 192; the GEMM path adds 4*2*3*10*4 = 960 */
    s = shape(LF_MODE_LINFORMER, 4, false);
    cr_expect_eq(bench_count_bytes(&s), 5408 * 4, "linformer: %llu", (unsigned long long)bench_count_bytes(&s));
    s.scores_in_memory = true;
    cr_expect_eq(bench_count_bytes(&s), (5408 + 960) * 4);
}

Test(paper, table3_entries)
{
    double t = 0, m = 0;
    cr_expect(bench_paper_lookup(512, 128, &t, &m));
    cr_expect(t == 1.5 && m == 1.7);
    cr_expect(bench_paper_lookup(65536, 2048, &t, &m));
    cr_expect(t == 7.9 && m == 18);
    cr_expect(!bench_paper_lookup(512, 512, &t, &m), "the paper has no k >= n figure");
    cr_expect(!bench_paper_lookup(1000, 128, &t, &m));
    cr_expect(!bench_paper_lookup(512, 64, &t, &m));
}

/* ---- CSV ---- */

static bench_row sample_row(void)
{
    bench_row r;
    memset(&r, 0, sizeof r);
    strcpy(r.device, "0:1");
    strcpy(r.device_name, "Some GPU");
    r.mode = LF_MODE_LINFORMER;
    r.n = 1024;
    r.k = 128;
    r.batch = 1;
    r.heads = 8;
    r.d_model = 512;
    r.ms_median = 1.5;
    r.ms_min = 1.25;
    r.ms_max = 2.0;
    r.gflops = 123.4567;
    r.flops = 1000000;
    r.softmax_flops = 5000;
    r.bytes_moved = 4096;
    r.device_bytes = 65536;
    r.vs_exact = 0.25;
    r.xdev = NAN;
    r.status = BENCH_OK;
    return r;
}

static char *csv_text(const bench_results *res)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    cr_assert(f != NULL);
    cr_assert_eq(bench_csv_write(f, res), 0);
    fclose(f);
    return buf;
}

Test(csv, two_rows_exact_text)
{
    bench_results res = {0};
    bench_row a = sample_row(), b = sample_row();
    strcpy(b.device_name, "Dev, \"quoted\"");
    b.mode = LF_MODE_DENSE;
    b.k = 0;
    b.status = BENCH_OOM;
    b.ms_median = b.ms_min = b.ms_max = b.gflops = NAN;
    b.vs_exact = b.xdev = NAN;
    bench_row c = b; /* a layer that could not even be created: no counts */
    strcpy(c.device_name, "Some GPU");
    c.mode = LF_MODE_FLASH;
    c.flops = c.softmax_flops = c.bytes_moved = 0;
    c.causal = true;
    cr_assert(bench_results_add(&res, &a) && bench_results_add(&res, &b) && bench_results_add(&res, &c));
    char *text = csv_text(&res);
    const char *want =
        "device,device_name,mode,n,k,batch,heads,d_model,ms_median,ms_min,ms_max,gflops,flops,softmax_flops,"
        "bytes_moved,device_bytes,vs_exact,xdev,status,causal\n"
        "0:1,Some GPU,linformer,1024,128,1,8,512,1.5000,1.2500,2.0000,123.457,1000000,5000,4096,65536,"
        "2.500e-01,,ok,0\n"
        "0:1,\"Dev, \"\"quoted\"\"\",dense,1024,0,1,8,512,,,,,1000000,5000,4096,,,,OOM,0\n"
        "0:1,Some GPU,flash,1024,0,1,8,512,,,,,,,,,,,OOM,1\n";
    cr_expect_str_eq(text, want);
    free(text);
    bench_results_free(&res);
}

Test(results, find)
{
    bench_results res = {0};
    bench_row a = sample_row(), b = sample_row();
    b.k = 256;
    bench_results_add(&res, &a);
    bench_results_add(&res, &b);
    cr_expect_eq(bench_results_find(&res, "0:1", LF_MODE_LINFORMER, 1024, 256), &res.rows[1]);
    cr_expect_null(bench_results_find(&res, "0:0", LF_MODE_LINFORMER, 1024, 256));
    cr_expect_null(bench_results_find(&res, "0:1", LF_MODE_DENSE, 1024, 0));
    bench_results_free(&res);
}

Test(plot, data_blocks)
{
    bench_results res = {0};
    bench_row a = sample_row(), b = sample_row(), c = sample_row();
    b.n = 2048;
    c.n = 4096;
    c.status = BENCH_OOM; /* left out of the plot */
    bench_results_add(&res, &a);
    bench_results_add(&res, &b);
    bench_results_add(&res, &c);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    bench_plot_styles styles;
    cr_assert_eq(bench_plot_data(f, &res, &styles), 1);
    fclose(f);
    cr_expect_str_eq(buf, "\"linformer k=128, Some GPU\" ms MiB\n1024 1.5 0.0625\n2048 1.5 0.0625\n");
    free(buf);
    /* a second device and a second mode: colour by mode (and k), dash by device */
    bench_row d = sample_row(), e = sample_row();
    strcpy(d.device, "1:0");
    strcpy(d.device_name, "Other");
    e.mode = LF_MODE_FLASH, e.k = 0;
    bench_results_add(&res, &d);
    bench_results_add(&res, &e);
    f = open_memstream(&buf, &size);
    cr_assert_eq(bench_plot_data(f, &res, &styles), 3);
    fclose(f);
    free(buf);
    cr_expect_str_eq(styles.colours, "1 1 2");
    cr_expect_str_eq(styles.dashes, "1 2 1");
    cr_expect(strstr(styles.shape, "d_model") != NULL, "%s", styles.shape);
    bench_results_free(&res);
}

/* ---- Options ---- */

static int parse(bench_options *o, char *err, size_t size, const char *const *args)
{
    char *argv[64] = {"bench"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return bench_options_parse(argc, argv, o, err, size);
}

Test(options, good)
{
    bench_options o;
    char err[512] = "";
    const char *args[] = {"--n", "512,1024", "--k", "64", "--d-model", "128", "--heads", "4", "--batch", "2",
                          "--modes", "linformer,flash", "--repeat", "7", "--warmup=0", "--seed",
                          "18446744073709551615", "--device", "all", "--csv", "a.csv", "--json", "a.json",
                          "--plot", "a.png", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, args), 0, "%s", err);
    cr_expect_eq(o.n_count, 2);
    cr_expect(o.ns[0] == 512 && o.ns[1] == 1024);
    cr_expect(o.k_count == 1 && o.ks[0] == 64);
    cr_expect(o.d_model == 128 && o.heads == 4 && o.batch == 2 && o.repeat == 7 && o.warmup == 0);
    cr_expect(o.modes[LF_MODE_LINFORMER] && !o.modes[LF_MODE_DENSE] && o.modes[LF_MODE_FLASH]);
    cr_expect(o.seed == UINT64_MAX);
    cr_expect_str_eq(o.device, "all");
    cr_expect_str_eq(o.csv, "a.csv");
    cr_expect_str_eq(o.json, "a.json");
    cr_expect_str_eq(o.plot, "a.png");
    cr_expect(!o.help && !o.quick);
}

Test(options, defaults_range_quick_and_full)
{
    bench_options o;
    char err[512] = "";
    const char *none[] = {NULL};
    cr_assert_eq(parse(&o, err, sizeof err, none), 0, "%s", err);
    cr_expect(o.n_count == 4 && o.ns[0] == 512 && o.ns[3] == 4096, "the default sweep is docs/benchmark.md's: %d", o.n_count);
    cr_expect(o.k_count == 2 && o.ks[0] == 128 && o.ks[1] == 256);
    cr_expect(o.d_model == 512 && o.heads == 8 && o.batch == 1 && o.repeat == 5 && o.warmup == 1);
    cr_expect(o.modes[0] && o.modes[1] && o.modes[2]);
    cr_expect_null(o.device);

    const char *full[] = {"--full", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, full), 0, "%s", err);
    cr_expect_eq(o.n_count, 0, "--full's range waits for the devices");
    bench_options_default_ns(&o, false);
    cr_expect(o.n_count == 6 && o.ns[0] == 512 && o.ns[5] == 16384);
    o.n_count = 0;
    bench_options_default_ns(&o, true);
    cr_expect(o.n_count == 8 && o.ns[7] == 65536);

    const char *range[] = {"--n=256..2048", "--full", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, range), 0, "%s", err);
    cr_expect(o.n_count == 4 && o.ns[0] == 256 && o.ns[3] == 2048);
    bench_options_default_ns(&o, true);
    cr_expect_eq(o.n_count, 4, "an explicit --n stays");

    const char *quick[] = {"--k", "16", "--quick", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, quick), 0, "%s", err);
    cr_expect(o.quick && o.n_count == 3 && o.ns[2] == 2048 && o.repeat == 3);
    cr_expect(o.d_model == 512 && o.heads == 8, "--quick keeps the default sweep's layer");
    cr_expect(o.k_count == 1 && o.ks[0] == 16, "an explicit option beats --quick");

    const char *help[] = {"--help", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, help), 0);
    cr_expect(o.help);
}

Test(options, each_bad_option_is_named)
{
    static const struct {
        const char *args[5];
        const char *named;
    } bad[] = { /* each message names the option, and the limit where there is one */
        {{"--n", "abc"}, "--n"},           {{"--n", "0"}, "--n"},
        {{"--n", "1,x"}, "--n"},           {{"--n", "4..2"}, "--n"},
        {{"--n", ""}, "--n"},              {{"--k", "-1"}, "--k"},
        {{"--d-model", "wide"}, "--d-model"}, {{"--heads", "0"}, "--heads"},
        {{"--batch", "0"}, "--batch"},     {{"--modes", "sparse"}, "--modes"},
        {{"--modes", "linformer,foo"}, "--modes"}, {{"--modes", "all,dense"}, "\"all\" stands alone"},
        {{"--repeat", "0"}, "--repeat"},
        {{"--warmup", "-1"}, "--warmup"},  {{"--seed", "-3"}, "--seed"},
        {{"--k", "99999999"}, "16777216"}, {{"--bogus"}, "--bogus"},
        {{"--warmup", "2147483647"}, "100000"}, {{"--repeat", "1000000000"}, "100000"},
        {{"--n", "5", "--n", "6"}, "--n is given twice"}, {{"--quick", "--full"}, "--full"},
        {{"--plot", ""}, "--plot"},        {{"--seed", "18446744073709551616"}, "--seed"},
        {{"--bogus=1"}, "--bogus"},        {{"--n"}, "--n"},
        {{"--csv"}, "--csv"},              {{"--heads", "3"}, "--heads"}, /* 3 does not divide 512 */
        {{"--n", "16,16"}, "--n: 16 is given twice"}, {{"--k", "4,8,4"}, "--k: 4 is given twice"},
        {{"--n", "16,,32"}, "--n: \"16,,32\" has an empty item"}, {{"--k", "4,"}, "--k: \"4,\" has an empty item"},
        {{"--n", ",16"}, "--n: \",16\" has an empty item"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bench_options o;
        char err[512] = "";
        int rc = parse(&o, err, sizeof err, bad[i].args);
        cr_expect_eq(rc, -1, "case %zu (%s %s) was accepted", i, bad[i].args[0], bad[i].args[1] ? bad[i].args[1] : "");
        cr_expect(strstr(err, bad[i].named) != NULL, "case %zu: \"%s\" does not name %s", i, err, bad[i].named);
    }
}

/* ---- The program, end to end ---- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)size + 1, 1);
    cr_assert_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    return text;
}

/* The field `col` (0-based) of a CSV line without quoted commas. */
static void field(const char *line, int col, char *out, size_t size)
{
    for (int c = 0; c < col && line; c++) {
        line = strchr(line, ',');
        if (line) line++;
    }
    size_t len = line ? strcspn(line, ",\n") : 0;
    if (len >= size) len = size - 1;
    memcpy(out, line ? line : "", len);
    out[len] = 0;
}


#define TINY "--n 16,32 --k 8 --d-model 32 --heads 2 --repeat 1"

Test(program, tiny_sweep_writes_every_file, .timeout = 600)
{
    char dir[64], cmd[2048], log[8192], path[128];
    lf_test_make_dir(dir, "bench");
    snprintf(cmd, sizeof cmd, "%s bench " TINY " --seed 18446744073709551615 --csv %s/a.csv --json %s/a.json "
             "--plot %s/a.svg", LF_TOOL_PATH, dir, dir, dir);
    int rc = lf_test_system(cmd, log, sizeof log);
    cr_assert_eq(rc, lf_test_plot_status(), "%s failed (%d):\n%s", cmd, rc, log);
    cr_expect(strstr(log, "linformer") && strstr(log, "vs_exact") && strstr(log, "random"),
              "no table, or no word on vs_exact, on stdout:\n%s", log);

    snprintf(path, sizeof path, "%s/a.csv", dir);
    char *csv = slurp(path);
    int seen[3][2] = {{0}}; /* mode x n */
    const char *line = strchr(csv, '\n');
    cr_assert(line != NULL && strncmp(csv, "device,device_name,mode,n,k,", 28) == 0, "bad header:\n%s", csv);
    for (line++; *line; line = strchr(line, '\n') + 1) {
        char mode[32], n[16], ms[32], vs[32], status[16];
        field(line, 2, mode, sizeof mode);
        field(line, 3, n, sizeof n);
        field(line, 8, ms, sizeof ms);
        field(line, 16, vs, sizeof vs);
        field(line, 18, status, sizeof status);
        lf_mode m;
        cr_assert_eq(lf_mode_parse(mode, &m), LF_OK, "unknown mode \"%s\" in:\n%s", mode, csv);
        char *end;
        double t = strtod(ms, &end);
        cr_expect(end != ms && *end == 0 && isfinite(t) && t > 0, "ms_median \"%s\" is not a time", ms);
        if (m == LF_MODE_FLASH) cr_expect(strtod(vs, NULL) < 1e-5, "flash against dense: \"%s\"", vs);
        if (m == LF_MODE_LINFORMER) cr_expect(strtod(vs, NULL) > 0, "Linformer against exact: \"%s\"", vs);
        cr_expect_str_eq(status, "ok");
        seen[m][strcmp(n, "32") == 0]++;
        if (!strchr(line, '\n')) break;
    }
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < 2; i++)
            cr_expect_eq(seen[m][i], 1, "%s at n=%d: %d rows", lf_mode_name((lf_mode)m), 16 << i, seen[m][i]);
    free(csv);

    snprintf(path, sizeof path, "%s/a.json", dir);
    char *json = slurp(path);
    cr_expect(strstr(json, "\"seed\":\t\"18446744073709551615\"") != NULL, "the seed is exact:\n%.400s", json);
    free(json);
    snprintf(path, sizeof path, "%s/a.svg", dir);
    if (lf_test_plot_status() == 0) {
        char *svg = slurp(path);
        cr_expect(strncmp(svg, "<?xml", 5) == 0 && strstr(svg, "<svg"), "--plot a.svg draws SVG: %.40s", svg);
        free(svg);
    } else {
        lf_test_expect_undrawn(path, log);
    }
    lf_test_remove_dir(dir);
}

Test(program, bad_option_fails_naming_it)
{
    char cmd[1024], log[4096];
    snprintf(cmd, sizeof cmd, "%s bench --modes sparse", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2);
    cr_expect(strstr(log, "--modes") && strstr(log, "sparse"), "%s", log);
}

/* What cannot work is refused before the first point is measured. */
Test(program, refuses_before_the_sweep, .timeout = 600)
{
    static const struct {
        const char *args, *named;
    } bad[] = {
        {TINY " --csv /nonexistent/a.csv", "/nonexistent/a.csv"},
        /* within the options' limits, past the library's (k x n above 2^40) */
        {"--n 16,16777216 --k 16777216 --d-model 32 --heads 2 --modes dense,linformer", "k=16777216"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024], log[8192];
        snprintf(cmd, sizeof cmd, "%s bench %s", LF_TOOL_PATH, bad[i].args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s:\n%s", bad[i].args, log);
        cr_expect(strstr(log, bad[i].named) != NULL, "%s: the message lacks %s:\n%s", bad[i].args, bad[i].named, log);
        cr_expect(strstr(log, "[1/") == NULL, "%s: a point was measured first:\n%s", bad[i].args, log);
    }
}

Test(program, failed_writes_fail_the_run, .timeout = 600)
{
    char dir[64], cmd[1024], log[8192], path[128];
    lf_test_make_dir(dir, "bench");
    snprintf(path, sizeof path, "%s/kept.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    /* the table cannot be written; the CSV is still replaced, the status says it failed */
    snprintf(cmd, sizeof cmd, "(%s bench --n 16 --k 8 --d-model 32 --heads 2 --repeat 1 --modes flash --csv %s > /dev/full)",
             LF_TOOL_PATH, path);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "standard output") && strstr(log, "No space left"), "%s", log);
    char *csv = slurp(path);
    cr_expect(strncmp(csv, "device,", 7) == 0, "%s", csv);
    free(csv);
    /* a CSV on a full device fails naming it */
    snprintf(cmd, sizeof cmd, "%s bench --n 16 --k 8 --d-model 32 --heads 2 --repeat 1 --modes flash --csv /dev/full",
             LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "--csv") && strstr(log, "/dev/full") && strstr(log, "No space left"), "%s", log);
    lf_test_remove_dir(dir);
}

/* A bench point checked against the double-precision reference: the layer and
 * input the bench measures, rebuilt from its own functions. */
Test(program, bench_points_match_the_reference, .timeout = 600)
{
    bench_options o;
    char err[512] = "";
    const char *args[] = {"--n", "40", "--k", "12", "--d-model", "32", "--heads", "4", "--batch", "2", NULL};
    cr_assert_eq(parse(&o, err, sizeof err, args), 0, "%s", err);
    enum { N = 40, K = 12, COUNT = 2 * N * 32 };
    bench_weights w;
    cr_assert_eq(bench_weights_make(&o, &w), 0);
    static float x[COUNT], y[COUNT], ef[2 * K * N];
    static double ref[COUNT];
    bench_input(&o, N, x);
    lf_ref_random_projection(ef, 2 * K * N, o.seed, K); /* E then F, one stream, as the layer draws them */
    const lf_ref_weights rw = {w.w[BENCH_WQ], w.w[BENCH_WK], w.w[BENCH_WV], w.w[BENCH_WO], w.w[BENCH_BQ],
                               w.w[BENCH_BK], w.w[BENCH_BV], w.w[BENCH_BO], ef,           ef + K * N};
    lf_context *ctx = lf_test_context();
    for (int m = 0; m < 3; m++) {
        lf_attention *layer = NULL;
        cr_assert_eq(bench_layer_create(ctx, &o, (lf_mode)m, N, K, &w, &layer), LF_OK, "%s", lf_context_last_error(ctx));
        cr_assert_eq(lf_attention_forward(layer, x, y, 2, N, NULL), LF_OK, "%s", lf_context_last_error(ctx));
        lf_attention_free(layer);
        lf_attention_config c = bench_layer_config(&o, (lf_mode)m, N, K);
        lf_ref_resolve(&c);
        lf_ref_attention(&c, &rw, NULL, x, 2, N, NULL, ref);
        const double e = lf_test_rel_err(y, ref, COUNT);
        cr_expect_leq(e, 1e-5, "%s: relative error %.3g", lf_mode_name((lf_mode)m), e);
    }
    lf_context_free(ctx);
    bench_weights_free(&w);
}

/* --causal: every row is causal, Linformer on mean pooling, all of them run */
Test(program, causal_sweep, .timeout = 600)
{
    char dir[64], cmd[2048], log[8192], path[128];
    lf_test_make_dir(dir, "bench");
    snprintf(cmd, sizeof cmd, "%s bench " TINY " --causal --csv %s/c.csv", LF_TOOL_PATH, dir);
    int rc = lf_test_system(cmd, log, sizeof log);
    cr_assert_eq(rc, 0, "%s failed (%d):\n%s", cmd, rc, log);
    cr_expect(strstr(log, "causal") && strstr(log, "mean pooling"), "the table does not say it is causal:\n%s", log);
    snprintf(path, sizeof path, "%s/c.csv", dir);
    char *csv = slurp(path);
    int rows = 0;
    for (const char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1, rows++) {
        char status[16], causal[8];
        field(line, 18, status, sizeof status);
        field(line, 19, causal, sizeof causal);
        cr_expect_str_eq(status, "ok", "%.120s", line);
        cr_expect_str_eq(causal, "1", "%.120s", line);
    }
    cr_expect_gt(rows, 0);
    free(csv);
    lf_test_remove_dir(dir);
}
