/*
 * test_announce.c - what the commands say on stderr while they work: the
 * device once, by run, rank and bench alike; rank's progress per layer, head
 * and sequence on a terminal (and nothing of it in a log).
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define MODEL "%1$s/tests/data/models/encoder_depth3.model.safetensors"
#define INPUT "%1$s/tests/data/models/encoder_depth3.io.safetensors"

static int occurrences(const char *text, const char *what)
{
    int count = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) count++;
    return count;
}

Test(announce, each_command_names_its_device_once, .timeout = 600)
{
    static const char *const cases[][2] = {
        {"run --model " MODEL " --input " INPUT " --check", "linformer run: device "},
        {"rank --model " MODEL " --input " INPUT, "linformer rank: device "},
        {"bench --n 16 --k 8 --d-model 32 --heads 2 --repeat 1 --modes flash", "linformer bench: device "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192], cmd[9000], log[16384];
        snprintf(args, sizeof args, cases[i][0], LF_SOURCE_DIR);
        snprintf(cmd, sizeof cmd, "(%s %s 2>&1 >/dev/null)", LF_TOOL_PATH, args); /* stderr only */
        cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s:\n%s", args, log);
        cr_expect_eq(occurrences(log, cases[i][1]), 1, "%s: the device once:\n%s", args, log);
        cr_expect_eq(occurrences(log, ": device "), 1, "%s: no other line on stderr names it:\n%s", args, log);
    }
}

Test(announce, rank_shows_its_progress_on_a_terminal_only, .timeout = 600)
{
    char args[8192], cmd[9000], log[32768];
    snprintf(args, sizeof args, "rank --model " MODEL " --input " INPUT, LF_SOURCE_DIR);
    /* script(1) gives the program a terminal */
    snprintf(cmd, sizeof cmd, "script -qec '%s %s' /dev/null", LF_TOOL_PATH, args);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "17/18") && strstr(log, "layer 2 head 1 sequence 1"), "a bar per layer and head:\n%s", log);
    snprintf(cmd, sizeof cmd, "%s %s", LF_TOOL_PATH, args);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    cr_expect(strstr(log, "[#") == NULL && strstr(log, "\033[K") == NULL, "no bar in a log:\n%s", log);
}

/* With an empty kernel cache, bench says it compiles the kernels before the silent wait. */
Test(announce, bench_says_when_it_compiles, .timeout = 600)
{
    char dir[64], cmd[4096], log[16384];
    lf_test_make_dir(dir, "announce");
    snprintf(cmd, sizeof cmd, "(LINFORMER_CACHE_DIR=%s %s bench --n 16 --k 8 --d-model 32 --heads 2 --repeat 1 "
             "--modes flash 2>&1 >/dev/null)", dir, LF_TOOL_PATH);
    cr_assert_eq(lf_test_system(cmd, log, sizeof log), 0, "%s", log);
    const char *said = strstr(log, "linformer bench: compiling the kernels"), *point = strstr(log, "[1/1]");
    cr_expect(said && point && said < point, "the word comes before the first point:\n%s", log);
    lf_test_remove_dir(dir);
}
