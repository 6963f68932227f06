/*
 * tune_entry.c - CLBlast's sets per GEMM class as text: the stored entries'
 * and the built-in table's lines, "[CLASS] KERNEL NAME=VALUE ...".
 */
#include "tune_space.h"

#include <stdio.h>
#include <string.h>

static int class_of(const char *name)
{
    int c = 0;
    while (c < C_COUNT && strcmp(name, lf__gemm_class_names[c]) != 0) c++;
    return c < C_COUNT ? c : -1;
}

static int kernel_of(const char *name)
{
    int k = 0;
    while (k < K_COUNT && strcmp(name, lf__tune_spaces[k].kernel) != 0) k++;
    return k < K_COUNT ? k : -1;
}

/* One line with every parameter of a known kernel, a valid set on d, for its class or for every class. */
static bool parse_line(const char *line, const lf_device_info *d, lf_tuned *t)
{
    char word[32];
    int used = 0;
    if (sscanf(line, "%31s%n", word, &used) != 1) return false;
    const int c = class_of(word);
    if (c >= 0) {
        line += used;
        if (sscanf(line, "%31s%n", word, &used) != 1) return false;
    }
    const int k = kernel_of(word);
    if (k < 0) return false;
    line += used;
    size_t v[LF_TUNE_MAX_PARAMS] = {0};
    for (int i = 0; i < lf__tune_spaces[k].count; i++) {
        char name[32];
        unsigned long long value;
        if (sscanf(line, " %31[A-Z_]=%llu%n", name, &value, &used) != 2 ||
            strcmp(name, lf__tune_spaces[k].names[i]) != 0)
            return false;
        v[i] = (size_t)value;
        line += used;
    }
    if (!lf__tune_stored_valid(k, v, d)) return false;
    for (int each = 0; each < C_COUNT; each++)
        if (c < 0 || each == c) {
            memcpy(t->v[each][k], v, sizeof v);
            t->have[each][k] = true;
        }
    return true;
}

bool lf__tune_parse(char *text, const lf_device_info *d, lf_tuned *t)
{
    memset(t, 0, sizeof *t);
    bool ok = true;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && ok; line = strtok_r(NULL, "\n", &save))
        ok = parse_line(line, d, t);
    for (int k = 0; k < K_COUNT && ok; k++) {
        int classes = 0;
        for (int c = 0; c < C_COUNT; c++) classes += t->have[c][k];
        ok = classes == 0 || classes == C_COUNT;
    }
    if (!ok) memset(t, 0, sizeof *t);
    return ok;
}

static size_t format_set(const lf_tuned *t, int c, int k, const char *class_name, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "%s%s%s", class_name, *class_name ? " " : "", lf__tune_spaces[k].kernel);
    for (int i = 0; i < lf__tune_spaces[k].count && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, " %s=%zu", lf__tune_spaces[k].names[i], t->v[c][k][i]);
    if (used < size) used += (size_t)snprintf(out + used, size - used, "\n");
    return used;
}

void lf__tune_format(const lf_tuned *t, char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int k = 0; k < K_COUNT && used < size; k++) {
        if (!t->have[0][k]) continue;
        bool same = true;
        for (int c = 1; c < C_COUNT; c++) same &= memcmp(t->v[c][k], t->v[0][k], sizeof t->v[0][k]) == 0;
        for (int c = 0; c < (same ? 1 : C_COUNT) && used < size; c++)
            used += format_set(t, c, k, same ? "" : lf__gemm_class_names[c], out + used, size - used);
    }
}
