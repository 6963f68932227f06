/*
 * test_outputs.c - what the commands write, on real files: no output over an
 * input or over another output (side files included), no file replaced by a
 * run with nothing to plot, a figure checked whole before it replaces the old
 * one (a real full tmpfs), and the temporaries of a killed writer swept by the
 * next one.
 */
#define _GNU_SOURCE /* mkdtemp, mount */

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "output_file.h"
#include "rank_files.h"

static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = calloc(*size + 1, 1);
    cr_assert_eq(fread(data, 1, *size, f), *size);
    fclose(f);
    return data;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot create %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    size_t size;
    char *data = slurp(from, &size);
    FILE *f = fopen(to, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, size, f), size);
    cr_assert_eq(fclose(f), 0);
    free(data);
}

/* The names in dir that start with `prefix`. */
static int count_named(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot list %s", dir);
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) count += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return count;
}

#define MODEL "%s/tests/data/pytorch/plain.model.safetensors"
#define INPUT "%s/tests/data/pytorch/plain.io.safetensors"
#define BENCH "bench --n 16 --k 8 --d-model 32 --heads 2 --repeat 1 --modes flash"

/* ---- No output over an input or another output ---- */

Test(check, same_file_by_inode_or_by_resolved_path)
{
    char dir[64], a[128], link[128], spelled[128], fresh[128], fresh2[128];
    lf_test_make_dir(dir, "outputs");
    snprintf(a, sizeof a, "%s/a.csv", dir);
    snprintf(link, sizeof link, "%s/link.csv", dir);
    snprintf(spelled, sizeof spelled, "%s/./sub/../new.csv", dir);
    snprintf(fresh, sizeof fresh, "%s/new.csv", dir);
    snprintf(fresh2, sizeof fresh2, "%s/other.csv", dir);
    write_text(a, "a");
    cr_assert_eq(mkdir(strcat(strcpy((char[128]){0}, dir), "/sub"), 0700), 0);
    cr_assert_eq(symlink(a, link), 0);
    char err[1024];
    const named_file in[1] = {{"--model", a}};
    const named_file via_link[1] = {{"--csv", link}};
    cr_expect_eq(output_files_check(via_link, 1, in, 1, err, sizeof err), -1, "a symlink to the input is the input");
    cr_expect(strstr(err, link) && strstr(err, "--model"), "%s", err);
    const named_file spelled_twice[2] = {{"--csv", fresh}, {"--json", spelled}};
    cr_expect_eq(output_files_check(spelled_twice, 2, NULL, 0, err, sizeof err), -1, "one new file, two spellings");
    cr_expect(strstr(err, "--csv") && strstr(err, "--json"), "%s", err);
    const named_file distinct[3] = {{"--csv", fresh}, {"--json", fresh2}, {"--plot", NULL}};
    cr_expect_eq(output_files_check(distinct, 3, in, 1, err, sizeof err), 0, "%s", err);
    const named_file devices[2] = {{"--csv", "/dev/null"}, {"--json", "/dev/null"}};
    cr_expect_eq(output_files_check(devices, 2, NULL, 0, err, sizeof err), 0, "/dev/null takes both: %s", err);
    lf_test_remove_dir(dir);
}

/* Each clash is refused before any work (no device opened, no point measured) and nothing is written. */
Test(check, every_command_refuses_a_clash_before_any_work, .timeout = 600)
{
    char dir[64], model[4200], input[4200], cmd[8192], log[8192], path[256];
    lf_test_make_dir(dir, "outputs");
    snprintf(model, sizeof model, "%s/r.png.dat", dir);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    snprintf(path, sizeof path, MODEL, LF_SOURCE_DIR);
    copy_file(path, model); /* the model's file is named like the figure's data */
    size_t before_size, after_size;
    char *before = slurp(model, &before_size);
    const char *cases[][2] = {
        {"rank --model %1$s/r.png.dat --input %2$s --plot %1$s/r.png", "r.png.dat"},
        {"rank --model %1$s/r.png.dat --input %2$s --csv %1$s/s.png --plot %1$s/s.png", "--csv"},
        {"rank --model %1$s/r.png.dat --input %2$s --csv %1$s/r.png.dat", "--model"},
        {BENCH " --csv %1$s/b.csv --json %1$s/b.csv", "--json"},
        {BENCH " --csv %1$s/b.png.dat --plot %1$s/b.png", "the data of --plot"},
        {BENCH " --json %1$s/b.png.gp --plot %1$s/./b.png", "the script of --plot"},
        {"run --model %1$s/r.png.dat --input %2$s --output %1$s/../%3$s/r.png.dat", "--model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, cases[i][0], dir, input, strrchr(dir, '/') + 1);
        snprintf(cmd, sizeof cmd, "%s %s", LF_TOOL_PATH, args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s:\n%s", args, log);
        cr_expect(strstr(log, cases[i][1]) != NULL, "%s: the message lacks %s:\n%s", args, cases[i][1], log);
        cr_expect(strstr(log, "device") == NULL && strstr(log, "[1/") == NULL, "%s: work began first:\n%s", args, log);
    }
    char *after = slurp(model, &after_size);
    cr_expect(after_size == before_size && memcmp(before, after, before_size) == 0, "the model was changed");
    cr_expect_eq(count_named(dir, ""), 3, "only ., .. and the model are in the folder");
    free(before), free(after);
    lf_test_remove_dir(dir);
}

/* An empty file name is refused before any work, naming its option; nothing is written. */
Test(check, every_command_refuses_an_empty_name_before_any_work, .timeout = 600)
{
    char dir[64], model[4200], input[4200], cmd[12000], log[8192];
    lf_test_make_dir(dir, "outputs");
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    const char *cases[][2] = {
        {"run --model %s --input %s --output ''", "--output"},
        {"rank --model %s --input %s --csv ''", "--csv"},
        {BENCH " --device '' --csv ''", "--csv"}, /* the empty --device once hid the empty --csv */
        {BENCH " --json ''", "--json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[9000];
        snprintf(args, sizeof args, cases[i][0], model, input);
        snprintf(cmd, sizeof cmd, "cd %s && %s %s", dir, LF_TOOL_PATH, args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s:\n%s", args, log);
        cr_expect(strstr(log, cases[i][1]) && strstr(log, "\"\": the file name is empty"), "%s:\n%s", args, log);
        cr_expect(strstr(log, "device") == NULL && strstr(log, "[1/") == NULL, "%s: work began first:\n%s", args, log);
    }
    cr_expect_eq(count_named(dir, ""), 2, "only . and .. are in the folder");
    lf_test_remove_dir(dir);
}

/* A figure's extension is checked with the options: a usage error, as every other. */
Test(check, a_figure_of_another_kind_is_a_usage_error)
{
    char cmd[10000], log[4096], model[4200], input[4200];
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    const char *tails[] = {BENCH " --plot /tmp/out.jpg", "rank --model %s --input %s --plot /tmp/out.jpg"};
    for (size_t i = 0; i < 2; i++) {
        char args[9000];
        snprintf(args, sizeof args, tails[i], model, input);
        snprintf(cmd, sizeof cmd, "%s %s", LF_TOOL_PATH, args);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 2, "%s:\n%s", args, log);
        cr_expect(strstr(log, ".png, .svg or .pdf") && strstr(log, "--help"), "%s:\n%s", args, log);
    }
    snprintf(cmd, sizeof cmd, "%s run --help", LF_TOOL_PATH);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0);
    cr_expect(strstr(log, "[--output Y.safetensors]") != NULL, "--check makes --output optional:\n%s", log);
}

/* A single n spans nothing on a log axis: the figure gives it a range, gnuplot says nothing. */
Test(figure, a_single_n_draws_without_warnings, .timeout = 600)
{
    char dir[64], cmd[4096], log[16384];
    lf_test_make_dir(dir, "outputs");
    snprintf(cmd, sizeof cmd, "(%s " BENCH " --plot %s/one.png 2>&1 >/dev/null)", LF_TOOL_PATH, dir);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), lf_test_plot_status(), "%s", log);
    cr_expect(strstr(log, "arning") == NULL, "gnuplot's warnings on stderr:\n%s", log);
    char figure[128];
    snprintf(figure, sizeof figure, "%s/one.png", dir);
    if (lf_test_plot_status()) lf_test_expect_undrawn(figure, log);
    lf_test_remove_dir(dir);
}

/* ---- Nothing to plot: the run fails and replaces no file ---- */

/* OLD in dir/NAME.csv, NAME.png, NAME.png.dat and NAME.png.gp. */
static void plant_old_outputs(const char *dir, const char *name)
{
    const char *suffixes[] = {".csv", ".png", ".png.dat", ".png.gp"};
    for (size_t i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s%s", dir, name, suffixes[i]);
        write_text(path, "OLD");
    }
}

static void expect_old_outputs(const char *dir, const char *name)
{
    const char *suffixes[] = {".csv", ".png", ".png.dat", ".png.gp"};
    for (size_t i = 0; i < 4; i++) {
        char path[256];
        size_t size;
        snprintf(path, sizeof path, "%s/%s%s", dir, name, suffixes[i]);
        char *text = slurp(path, &size);
        cr_expect_str_eq(text, "OLD", "%s was replaced", path);
        free(text);
    }
}

Test(figure, nothing_to_plot_replaces_no_file, .timeout = 600)
{
    char dir[64], model[256], input[256], cmd[4096], log[16384];
    lf_test_make_dir(dir, "outputs");
    /* rank: every sequence of length 0 */
    static float x[2 * 48 * RANK_TEST_D];
    const int32_t lengths[2] = {0, 0};
    uint64_t rng = lf_test_seed();
    snprintf(model, sizeof model, "%s/layer.safetensors", dir);
    snprintf(input, sizeof input, "%s/len0.safetensors", dir);
    rank_write_layer(model, 48, 8, &rng);
    rank_write_input(input, x, 2, 48, lengths);
    plant_old_outputs(dir, "r");
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --csv %s/r.csv --plot %s/r.png", LF_TOOL_PATH, model,
             input, dir, dir);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
    cr_expect(strstr(log, "nothing to plot") != NULL, "%s", log);
    expect_old_outputs(dir, "r");
    /* bench: every point out of memory (64 GiB of weights past a 4 GiB data limit) */
    if (!LF_TEST_UNDER_ASAN) {
        plant_old_outputs(dir, "b");
        snprintf(cmd, sizeof cmd, "(ulimit -d 4194304 && %s bench --n 16 --k 8 --d-model 65536 --heads 2 --repeat 1 "
                 "--csv %s/b.csv --plot %s/b.png)",
                 LF_TOOL_PATH, dir, dir);
        cr_expect_eq(lf_test_system(cmd, log, sizeof log), 1, "%s", log);
        cr_expect(strstr(log, "OOM") && strstr(log, "nothing to plot"), "%s", log);
        expect_old_outputs(dir, "b");
    }
    cr_expect_eq(count_named(dir, "."), 2, "no temporary is left");
    lf_test_remove_dir(dir);
}

/* ---- A figure is whole before it replaces the old one ---- */

/* A tmpfs of 256 KiB, full but for 4 pages: the figure's data and script fit, the PNG does not. */
Test(figure, a_full_disk_keeps_the_old_figure_and_fails, .timeout = 600)
{
    char dir[64], disk[128], path[256], model[4200], input[4200], cmd[12000], log[8192];
    lf_test_make_dir(dir, "outputs");
    snprintf(disk, sizeof disk, "%s/disk", dir);
    cr_assert_eq(mkdir(disk, 0700), 0);
    if (mount("tmpfs", disk, "tmpfs", 0, "size=256k") != 0) {
        lf_test_remove_dir(dir);
        cr_skip_test("cannot mount a tmpfs (%s): a real full disk needs root", strerror(errno));
    }
    snprintf(path, sizeof path, "%s/r.png", disk);
    write_text(path, "the old figure");
    struct statvfs vfs;
    cr_assert_eq(statvfs(disk, &vfs), 0);
    snprintf(path, sizeof path, "%s/filler", disk);
    FILE *filler = fopen(path, "w");
    cr_assert_not_null(filler);
    for (unsigned long i = 0; i + 4 < vfs.f_bavail; i++)
        for (unsigned long j = 0; j < vfs.f_bsize; j++) fputc('x', filler);
    cr_assert_eq(fclose(filler), 0, "the filler fits");
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    snprintf(cmd, sizeof cmd, "%s rank --model %s --input %s --plot %s/r.png", LF_TOOL_PATH, model, input, disk);
    const int rc = lf_test_system(cmd, log, sizeof log);
    size_t size;
    snprintf(path, sizeof path, "%s/r.png", disk);
    char *figure = slurp(path, &size);
    cr_expect_eq(rc, 1, "a figure that did not fit is a failure:\n%s", log);
    cr_expect(strstr(log, "r.png") != NULL, "the message names the figure:\n%s", log);
    cr_expect_str_eq(figure, "the old figure", "the old figure stays");
    snprintf(path, sizeof path, "%s/r.png.gp", disk);
    cr_expect_eq(access(path, F_OK), 0, "the data and script were written: the failure was the figure's");
    cr_expect_eq(count_named(disk, ".r.png."), 0, "no temporary stays");
    free(figure);
    cr_assert_eq(umount2(disk, MNT_DETACH), 0);
    lf_test_remove_dir(dir);
}

/* ---- Temporaries of a killed writer ---- */

/* kill -9 of `run --output` while its temporary exists; the next run sweeps it,
 * and leaves alone one whose writer is alive (this test's own pid). */
Test(temporaries, a_killed_writers_temporary_is_swept_by_the_next, .timeout = 600)
{
    char dir[64], model[4200], input[4200], output[128], alive[256], cmd[10000], log[8192];
    lf_test_make_dir(dir, "outputs");
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    snprintf(output, sizeof output, "%s/y.safetensors", dir);
    snprintf(alive, sizeof alive, "%s/.y.safetensors.%ld.Ab1234", dir, (long)getpid());
    write_text(alive, "a live writer's");
    const pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        freopen("/dev/null", "w", stderr);
        execl(LF_TOOL_PATH, "linformer", "run", "--model", model, "--input", input, "--output", output, (char *)NULL);
        _exit(127);
    }
    int polls = 0;
    while (count_named(dir, ".y.safetensors.") < 2 && polls++ < 100000) usleep(100);
    kill(child, SIGKILL);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFSIGNALED(status), "the writer was killed before it finished (polls %d)", polls);
    cr_assert_eq(count_named(dir, ".y.safetensors."), 2, "the killed writer left its temporary");
    snprintf(cmd, sizeof cmd, "%s run --model %s --input %s --output %s", LF_TOOL_PATH, model, input, output);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect_eq(count_named(dir, ".y.safetensors."), 1, "the dead writer's temporary is swept");
    cr_expect_eq(access(alive, F_OK), 0, "a live writer's temporary stays");
    cr_expect_eq(access(output, F_OK), 0);
    lf_test_remove_dir(dir);
}

/* A name of 255 bytes, the most a folder entry takes: its temporary's name is
 * cut to fit, and a dead writer's temporary of it is still swept. */
Test(temporaries, the_longest_name_is_written, .timeout = 600)
{
    char dir[64], name[256], output[512], stale[512], model[4200], input[4200], cmd[10000], log[8192];
    lf_test_make_dir(dir, "outputs");
    memset(name, 'a', 252);
    strcpy(name + 252, ".st");
    snprintf(output, sizeof output, "%s/%s", dir, name);
    const pid_t dead = fork(); /* a pid no writer has now */
    cr_assert_geq(dead, 0);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    snprintf(stale, sizeof stale, "%s/.%.236s.%ld.Ab1234", dir, name, (long)dead);
    write_text(stale, "a dead writer's");
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    snprintf(cmd, sizeof cmd, "%s run --model %s --input %s --output %s", LF_TOOL_PATH, model, input, output);
    cr_expect_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect_eq(access(output, F_OK), 0, "the output is written");
    cr_expect_eq(count_named(dir, "."), 2, "no temporary is left, the stale one swept");
    lf_test_remove_dir(dir);
}

/* SIGINT, SIGTERM or SIGHUP while `run` or `rank` writes: the program dies of
 * the signal, its temporaries are removed and the old files stay. */
Test(temporaries, a_signal_removes_the_writers_temporaries, .timeout = 600)
{
    char dir[64], model[4200], input[4200], output[128], csv[128], plot[128];
    lf_test_make_dir(dir, "outputs");
    snprintf(model, sizeof model, MODEL, LF_SOURCE_DIR);
    snprintf(input, sizeof input, INPUT, LF_SOURCE_DIR);
    snprintf(output, sizeof output, "%s/y.st", dir);
    snprintf(csv, sizeof csv, "%s/r.csv", dir);
    snprintf(plot, sizeof plot, "%s/r.png", dir);
    write_text(output, "OLD");
    const struct {
        int sig;
        bool rank;
    } cases[] = {{SIGINT, false}, {SIGTERM, false}, {SIGHUP, false}, {SIGTERM, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
            freopen("/dev/null", "w", stderr);
            if (cases[i].rank)
                execl(LF_TOOL_PATH, "linformer", "rank", "--model", model, "--input", input, "--csv", csv, "--plot",
                      plot, (char *)NULL);
            else
                execl(LF_TOOL_PATH, "linformer", "run", "--model", model, "--input", input, "--output", output,
                      "--repeat", "1000000", (char *)NULL);
            _exit(127);
        }
        const int temps = cases[i].rank ? 4 : 1; /* rank: the CSV, the figure, its data and script */
        int polls = 0;
        while (count_named(dir, ".") < 2 + temps && polls++ < 100000) usleep(100);
        kill(child, cases[i].sig);
        int status;
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == cases[i].sig, "case %zu: status %#x (polls %d)", i,
                  status, polls);
        cr_expect_eq(count_named(dir, "."), 2, "case %zu: a temporary is left", i);
    }
    size_t size;
    char *text = slurp(output, &size);
    cr_expect_str_eq(text, "OLD", "the old output stays");
    free(text);
    cr_expect_eq(count_named(dir, ""), 3, "only ., .. and the old output: nothing of rank's was written");
    lf_test_remove_dir(dir);
}
