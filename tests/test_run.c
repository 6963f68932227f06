/* test_run.c - `linformer run` and lf_attention_load on real safetensors files. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "reference.h"
#include "safetensors.h"
#include "st_write.h"

enum { D = 24, H = 3, DH = 8, SEQ = 40, K = 6, B = 3, N = 37 };

static char dir[64];
static void setup(void) { lf_test_make_dir(dir, "run"); }
static void teardown(void) { lf_test_remove_dir(dir); }
TestSuite(run, .init = setup, .fini = teardown, .timeout = 900); /* a cold kernel cache under ASan on 2 busy cores */

/* A LinformerSelfAttention state dict (headwise E, F; no q/k/v biases). */
typedef struct {
    float wq[H * DH * D], wk[H * DH * D], wv[H * DH * D], pk[SEQ * K], pv[SEQ * K], wo[D * H * DH], bo[D];
} lucid;

static void path(char *out, const char *name) { sprintf(out, "%s/%s", dir, name); }

static void write_model(const lucid *m, const char *file, bool heads_meta, const char *extra)
{
    const int64_t sq[2] = {H * DH, D}, sp[2] = {SEQ, K}, so[2] = {D, H * DH}, sb[1] = {D};
    st_tensor t[8] = {{"to_q.weight", ST_F32, 2, sq, m->wq}, {"to_k.weight", ST_F32, 2, sq, m->wk},
                      {"to_v.weight", ST_F32, 2, sq, m->wv}, {"proj_k", ST_F32, 2, sp, m->pk},
                      {"proj_v", ST_F32, 2, sp, m->pv},      {"to_out.weight", ST_F32, 2, so, m->wo},
                      {"to_out.bias", ST_F32, 1, sb, m->bo}};
    size_t count = 7;
    if (extra) t[count++] = (st_tensor){extra, ST_F32, 1, sb, m->bo};
    const char *meta[2] = {"heads", "3"};
    char p[128], msg[256];
    path(p, file);
    cr_assert_eq(st_save(p, t, count, meta, heads_meta ? 1 : 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
}

/* E = proj_k^T, as lucidrains' einsum('bnd,nk->bkd') uses it. */
static void reference(const lucid *m, const float *x, const int32_t *lens, double *y)
{
    static float e[K * SEQ], f[K * SEQ];
    for (int i = 0; i < SEQ; i++)
        for (int j = 0; j < K; j++) e[j * SEQ + i] = m->pk[i * K + j], f[j * SEQ + i] = m->pv[i * K + j];
    lf_attention_config c;
    lf_attention_config_init(&c, D, H, SEQ, K);
    c.bias_q = c.bias_k = c.bias_v = 0;
    lf_ref_resolve(&c);
    lf_ref_weights w = {.wq = m->wq, .wk = m->wk, .wv = m->wv, .wo = m->wo, .bo = m->bo, .e = e, .f = f};
    lf_ref_attention(&c, &w, NULL, x, B, N, lens, y);
}

Test(run, program_matches_reference)
{
    static lucid m;
    uint64_t rng = lf_test_seed();
    lf_test_fill((float *)&m, sizeof m / sizeof(float), &rng, -0.5f, 0.5f);
    write_model(&m, "model.safetensors", true, NULL);
    static float x[B * N * D];
    lf_test_fill(x, B * N * D, &rng, -1, 1);
    const int32_t lens[B] = {N, 11, 0};
    const int64_t sx[3] = {B, N, D}, sl[1] = {B};
    const st_tensor in[2] = {{"x", ST_F32, 3, sx, x}, {"lengths", ST_I32, 1, sl, lens}};
    char p[128], msg[256], cmd[1024], log[4096];
    path(p, "input.safetensors");
    cr_assert_eq(st_save(p, in, 2, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    snprintf(cmd, sizeof cmd,
             "%s run --model %s/model.safetensors --input %s/input.safetensors --output %s/y.safetensors --repeat 2 "
             "--profile", LF_TOOL_PATH, dir, dir, dir);
    int rc = lf_test_system(cmd, log, sizeof log);
    cr_assert_eq(rc, 0, "linformer run failed (%d): %s", rc, log);
    /* --profile: a table of the forward's stages, one output projection, and the total */
    const char *out_line = strstr(log, "\ngemm out ");
    cr_expect(strstr(log, "stage ") && out_line && strstr(log, "\nforward "), "no profile table: %s", log);
    double ms = 0, share = 0, gflops = -1, gbps = -1;
    unsigned commands = 0;
    if (out_line)
        cr_expect(sscanf(out_line, "\ngemm out %lf %lf%% %u %lf %lf", &ms, &share, &commands, &gflops, &gbps) == 5 &&
                      commands == 1 && gflops >= 0 && gbps >= 0,
                  "one gemm out command, and its rates: %s", log);

    lf_st_file out;
    path(p, "y.safetensors");
    cr_assert_eq(lf_st_open(p, &out, msg, sizeof msg), LF_OK, "%s", msg);
    const lf_st_tensor *y = lf_st_find(&out, "y");
    cr_assert_not_null(y);
    cr_assert_eq(y->ndim, 3);
    cr_assert(y->shape[0] == B && y->shape[1] == N && y->shape[2] == D);
    static float got[B * N * D];
    cr_assert_eq(lf_st_to_f32(y, got, msg, sizeof msg), LF_OK);
    lf_st_close(&out);
    static double ref[B * N * D];
    reference(&m, x, lens, ref);
    double e = lf_test_rel_err(got, ref, B * N * D);
    cr_expect_leq(e, 1e-5, "relative error %.3g", e);
}

static void expect_load_error(const char *file, int heads, lf_status want, const char *needle)
{
    char msg[256];
    lf_context *ctx = NULL;
    cr_assert_eq(lf_context_create(NULL, &ctx, msg, sizeof msg), LF_OK, "%s", msg);
    char p[128];
    path(p, file);
    lf_attention *layer = (lf_attention *)1;
    lf_status st = lf_attention_load(ctx, p, heads, LF_MODE_LINFORMER, &layer);
    cr_expect_eq(st, want, "%s: got %s: %s", file, lf_status_string(st), lf_context_last_error(ctx));
    cr_expect_null(layer);
    cr_expect(strstr(lf_context_last_error(ctx), needle) != NULL, "message \"%s\" does not name \"%s\"",
              lf_context_last_error(ctx), needle);
    lf_context_free(ctx);
}

Test(run, loader_refuses_bad_models)
{
    static lucid m;
    uint64_t rng = lf_test_seed();
    lf_test_fill((float *)&m, sizeof m / sizeof(float), &rng, -0.5f, 0.5f);
    write_model(&m, "extra.safetensors", true, "decoder.bias");
    expect_load_error("extra.safetensors", 0, LF_ERR_FORMAT, "decoder.bias");
    write_model(&m, "noheads.safetensors", false, NULL);
    expect_load_error("noheads.safetensors", 0, LF_ERR_ARGUMENT, "heads");
    expect_load_error("noheads.safetensors", 5, LF_ERR_FORMAT, "to_q.weight"); /* 24 rows into 5 heads */
    expect_load_error("missing.safetensors", 0, LF_ERR_IO, "missing.safetensors");

    /* a wrong shape and a missing tensor */
    const int64_t sq[2] = {H * DH, D}, bad[2] = {H * DH, D - 1}, sp[2] = {SEQ, K}, so[2] = {D, H * DH};
    st_tensor t[6] = {{"to_q.weight", ST_F32, 2, sq, m.wq}, {"to_k.weight", ST_F32, 2, bad, m.wk},
                      {"proj_k", ST_F32, 2, sp, m.pk}, {"to_out.weight", ST_F32, 2, so, m.wo},
                      {"to_v.weight", ST_F32, 2, sq, m.wv}, {"proj_v", ST_F32, 2, sp, m.pv}};
    char p[128], msg[256];
    const char *meta[2] = {"heads", "3"};
    path(p, "shape.safetensors");
    cr_assert_eq(st_save(p, t, 6, meta, 1, NULL, 0, msg, sizeof msg), 0);
    expect_load_error("shape.safetensors", 0, LF_ERR_FORMAT, "to_k.weight");
    t[1].shape = sq;
    path(p, "nopv.safetensors"); /* the same, proj_v left out */
    cr_assert_eq(st_save(p, t, 5, meta, 1, NULL, 0, msg, sizeof msg), 0);
    expect_load_error("nopv.safetensors", 0, LF_ERR_FORMAT, "proj_v");
}

Test(run, program_reports_bad_input)
{
    char cmd[1024], log[4096];
    snprintf(cmd, sizeof cmd, "%s run --model %s/none.safetensors --input x --output y", LF_TOOL_PATH, dir);
    cr_expect_neq(lf_test_system(cmd, log, sizeof log), 0);
    cr_expect(strstr(log, "none.safetensors") != NULL, "%s", log);
    snprintf(cmd, sizeof cmd, "%s run --model a --mode fast --input x --output y", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2);
    cr_expect(strstr(log, "fast") != NULL, "%s", log);
    snprintf(cmd, sizeof cmd, "%s run --help", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0);
}

/* ---- The program on the PyTorch fixture `plain` (x and the expected y) ---- */

/* The fixture's path with `suffix`; a few calls may be used at once. */
static const char *plain(const char *suffix)
{
    static char paths[4][4200];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/tests/data/pytorch/plain%s", LF_SOURCE_DIR, suffix);
    return p;
}
#define PLAIN plain("")

/* `linformer run` on the fixture with extra arguments; its exit status, output in log. */
static int run_plain(const char *args, char *log, size_t size)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --model %s.model.safetensors --input %s.io.safetensors %s", LF_TOOL_PATH, PLAIN,
             PLAIN, args);
    return lf_test_system(cmd, log, size);
}

/* Whether `file` is a safetensors file holding y [2, 48, 32], the fixture's output. */
static bool holds_output(const char *file)
{
    lf_st_file f;
    char msg[256];
    if (lf_st_open(file, &f, msg, sizeof msg) != LF_OK) return false;
    const lf_st_tensor *y = lf_st_find(&f, "y");
    const bool ok = y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 48 && y->shape[2] == 32;
    lf_st_close(&f);
    return ok;
}

static void write_text(const char *file, const char *text, mode_t mode)
{
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(file, mode), 0);
}

static bool has_text(const char *file, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(file, "r");
    if (!f) return false;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    return strcmp(buf, text) == 0;
}

static int files_in(const char *folder)
{
    int n = 0;
    DIR *d = opendir(folder);
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

Test(run, check_compares_with_the_inputs_y)
{
    char log[8192];
    int rc = run_plain("--check", log, sizeof log);
    cr_expect_eq(rc, 0, "%s", log);
    cr_expect(strstr(log, "relative error") && strstr(log, "ok"), "%s", log);
    cr_expect(strstr(log, "linformer run: device ") != NULL, "the device is named: %s", log);
    rc = run_plain("--check --tolerance 1e-12", log, sizeof log); /* float output: far above 1e-12 */
    cr_expect_eq(rc, 1, "%s", log);
    cr_expect(strstr(log, "FAILED") != NULL, "%s", log);
}

Test(run, a_failed_check_leaves_the_output_as_it_was)
{
    char out[128], args[512], log[8192];
    path(out, "y.safetensors");
    write_text(out, "old", 0644);
    snprintf(args, sizeof args, "--check --tolerance 1e-12 --output %s", out);
    cr_expect_eq(run_plain(args, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "FAILED") != NULL, "%s", log);
    cr_expect(has_text(out, "old"), "the old output is intact");
    cr_expect_eq(files_in(dir), 1, "no temporary is left");
    snprintf(args, sizeof args, "--check --output %s", out);
    cr_expect_eq(run_plain(args, log, sizeof log), 0, "%s", log);
    cr_expect(holds_output(out), "a passed check writes the output");
}

Test(run, extra_input_tensors_are_noted_and_ignored)
{
    static float x[2 * 48 * 32], extra[3];
    const int64_t sx[3] = {2, 48, 32}, se[1] = {3};
    const st_tensor in[2] = {{"x", ST_F32, 3, sx, x}, {"attention_mask", ST_F32, 1, se, extra}};
    char p[128], msg[256], cmd[2048], log[8192];
    path(p, "in.safetensors");
    cr_assert_eq(st_save(p, in, 2, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    snprintf(cmd, sizeof cmd, "%s run --model %s.model.safetensors --input %s --output %s/y.safetensors", LF_TOOL_PATH,
             PLAIN, p, dir);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "attention_mask") != NULL, "the ignored tensor is named: %s", log);
    path(p, "y.safetensors");
    cr_expect(holds_output(p));
}

/* Where kernels cannot be cached, run says so and why, never "cached in". */
Test(run, an_unusable_kernel_cache_is_said)
{
    char file[128], log[8192];
    path(file, "not-a-folder");
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    const char *places[] = {file, "/dev/null", NULL};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        if (places[i]) setenv("LINFORMER_CACHE_DIR", places[i], 1);
        else unsetenv("LINFORMER_CACHE_DIR"), unsetenv("XDG_CACHE_HOME"), unsetenv("HOME");
        cr_expect_eq(run_plain("--check", log, sizeof log), 0, "%s", log);
        cr_expect_null(strstr(log, "cached in"), "%s: %s", places[i] ? places[i] : "no HOME", log);
        cr_expect_neq(strstr(log, "not cached ("), NULL, "%s: %s", places[i] ? places[i] : "no HOME", log);
        cr_expect_neq(strstr(log, places[i] ? "is not a folder" : "HOME"), NULL, "the reason: %s", log);
    }
}

Test(run, heads_contradicting_the_metadata_is_an_error)
{
    char log[8192];
    cr_expect_eq(run_plain("--heads 2 --check", log, sizeof log), 2, "%s", log);
    cr_expect(strstr(log, "heads 2") && strstr(log, "says 4"), "both values are named: %s", log);
    cr_expect_eq(run_plain("--heads 4 --check", log, sizeof log), 0, "agreeing: %s", log);
}

Test(run, output_replaces_a_symlinks_target_and_keeps_its_mode)
{
    char target[128], link[128], args[512], log[8192];
    path(target, "kept.safetensors");
    path(link, "link.safetensors");
    write_text(target, "old", 0640);
    cr_assert_eq(symlink("kept.safetensors", link), 0);
    snprintf(args, sizeof args, "--output %s", link);
    cr_assert_eq(run_plain(args, log, sizeof log), 0, "%s", log);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_expect(S_ISLNK(st.st_mode), "the link stays a link");
    cr_assert_eq(stat(target, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
    cr_expect(holds_output(target));
    cr_expect_eq(files_in(dir), 2, "no temporary is left");
}

Test(run, output_fifo_is_written_not_replaced)
{
    char fifo[128], got[128], cmd[2048], log[8192];
    path(fifo, "fifo");
    path(got, "got.safetensors");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(cmd, sizeof cmd, "cat %s > %s & %s run --model %s.model.safetensors --input %s.io.safetensors --output %s; wait",
             fifo, got, LF_TOOL_PATH, PLAIN, PLAIN, fifo);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    struct stat st;
    cr_assert_eq(lstat(fifo, &st), 0);
    cr_expect(S_ISFIFO(st.st_mode), "the FIFO stays a FIFO");
    cr_expect(holds_output(got), "the reader got the file");
}

/* A FIFO nobody reads is refused at once, before the inputs are read (timeout: the open used to block). */
Test(run, output_fifo_without_a_reader_fails_at_once)
{
    char fifo[128], cmd[2048], log[8192];
    path(fifo, "fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(cmd, sizeof cmd, "timeout 60 %s run --model %s.model.safetensors --input /dev/null --output %s",
             LF_TOOL_PATH, PLAIN, fifo);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, fifo) && strstr(log, "FIFO with no reader"), "%s", log);
}

/* A link planted where a predictable temporary (OUTPUT.tmp.PID) would go is
 * never followed: the shell's $$ is the program's PID after exec. */
Test(run, planted_temporary_link_is_not_followed)
{
    char victim[128], cmd[2048], log[8192];
    path(victim, "victim");
    write_text(victim, "secret", 0644);
    snprintf(cmd, sizeof cmd, "cd %s && sh -c 'ln -s victim y.safetensors.tmp.$$ && exec %s run --model "
             "%s.model.safetensors --input %s.io.safetensors --output y.safetensors'", dir, LF_TOOL_PATH, PLAIN, PLAIN);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(has_text(victim, "secret"), "the file behind the link is untouched");
    char out[128];
    path(out, "y.safetensors");
    cr_expect(holds_output(out));
}

Test(run, output_naming_an_input_is_refused)
{
    char alias[128], args[4300], log[8192];
    path(alias, "alias.safetensors");
    cr_assert_eq(link(plain(".io.safetensors"), alias), 0); /* another name, the same inode */
    snprintf(args, sizeof args, "--output %s", alias);
    cr_expect_neq(run_plain(args, log, sizeof log), 0);
    cr_expect(strstr(log, "is the input") != NULL, "%s", log);
    snprintf(args, sizeof args, "--output %s", plain(".model.safetensors"));
    cr_expect_neq(run_plain(args, log, sizeof log), 0);
    cr_expect(strstr(log, "is the input") != NULL, "%s", log);
    cr_expect(holds_output(plain(".io.safetensors")), "the fixture is intact");
}

Test(run, failed_write_leaves_the_old_file)
{
    enum { BIG = 1000 }; /* [1000, 48, 32] floats: a 6 MiB output */
    static float x[BIG * 48 * 32];
    const int64_t sx[3] = {BIG, 48, 32};
    const st_tensor in = {"x", ST_F32, 3, sx, x};
    char input[128], out[128], msg[256], cmd[2048], log[8192];
    path(input, "big.safetensors");
    cr_assert_eq(st_save(input, &in, 1, NULL, 0, NULL, 0, msg, sizeof msg), 0, "%s", msg);
    path(out, "y.safetensors");
    write_text(out, "old", 0644);
    /* a file size limit of 2 to 4 MiB (512- or 1024-byte blocks): the output fails with EFBIG
     * part way, while the OpenCL compiler's cache files still fit */
    snprintf(cmd, sizeof cmd, "(ulimit -f 4000; trap '' XFSZ; exec %s run --model %s.model.safetensors "
             "--input %s --output %s)", LF_TOOL_PATH, PLAIN, input, out);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "too large") != NULL, "the reason is given: %s", log);
    cr_expect(has_text(out, "old"), "the old file is intact");
    cr_expect_eq(files_in(dir), 2, "no temporary is left");
    cr_expect_eq(run_plain("--output /dev/full", log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "/dev/full") && strstr(log, "No space left"), "%s", log);
}

Test(run, one_parser_for_every_option)
{
    char log[8192];
    cr_expect_eq(run_plain("--check --repeat=2 --warmup 0", log, sizeof log), 0, "--opt=VALUE works: %s", log);
    cr_expect_eq(run_plain("--check --repeat 2 --repeat 3", log, sizeof log), 2, "%s", log);
    cr_expect(strstr(log, "--repeat is given twice") != NULL, "%s", log);
    cr_expect_eq(run_plain("--check --repeat 1000000000", log, sizeof log), 2, "%s", log);
    cr_expect(strstr(log, "1000000") && strstr(log, "1000000000"), "the limit is stated: %s", log);
    cr_expect_eq(run_plain("--check stray", log, sizeof log), 2, "%s", log);
    cr_expect(strstr(log, "stray") != NULL, "%s", log);
}

/* devices and bench parse as run does: --opt=VALUE, repeated options, stray
 * arguments; the program's own --help and --version take nothing after them. */
Test(run, every_command_parses_alike)
{
    static const struct {
        const char *args;
        int status;
        const char *text;
    } cases[] = {
        {"devices --device=0:0", 0, "picks"}, /* the first device, on every machine */
        {"devices --device cpu --device gpu", 2, "--device is given twice"},
        {"devices stray", 2, "unexpected argument \"stray\""},
        {"bench --repeat 2 --repeat 3", 2, "--repeat is given twice"},
        {"bench --quick=1", 2, "--quick takes no value"},
        {"run --mo x", 2, "ambiguous"},
        {"devices --help > /dev/full", 1, "standard output"},
        {"--version extra", 2, "--version takes no argument, got \"extra\""},
        {"help run", 0, "--tolerance"}, /* run's own --help */
        {"help walk", 2, "help takes no argument, got \"walk\""},
        {"--version > /dev/full", 1, "standard output"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], log[8192];
        snprintf(cmd, sizeof cmd, "(%s %s)", LF_TOOL_PATH, cases[i].args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), cases[i].status, "%s: %s", cases[i].args, log);
        cr_expect(strstr(log, cases[i].text) != NULL, "%s: no \"%s\" in: %s", cases[i].args, cases[i].text, log);
        if (cases[i].status == 2) cr_expect(strstr(log, "--help") != NULL, "%s: no pointer to --help", cases[i].args);
    }
}

/* --causal with the file's learned E is refused, saying how to run it; with
 * pooling it runs; a file that says "causal" runs dense and flash causally. */
Test(run, causal_and_projection)
{
    char log[8192], cmd[8800];
    cr_expect_eq(run_plain("--check --causal", log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "local support") && strstr(log, "--projection mean"), "%s", log);
    cr_expect_eq(run_plain("--check --causal --projection max --tolerance 100", log, sizeof log), 0, "%s", log);
    cr_expect_eq(run_plain("--check --projection avg", log, sizeof log), 2, "%s", log);
    cr_expect(strstr(log, "--projection is mean or max") != NULL, "%s", log);
    for (int m = 0; m < 2; m++) {
        snprintf(cmd, sizeof cmd, "%s run --model %s/tests/data/pytorch/causal_dense.model.safetensors --input "
                 "%s/tests/data/pytorch/causal_dense.io.safetensors --check --mode %s", LF_TOOL_PATH, LF_SOURCE_DIR,
                 LF_SOURCE_DIR, m ? "flash" : "dense");
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    }
}
