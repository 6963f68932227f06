/*
 * test_layouts.c - the table of layouts (host/layouts.c): it names the same
 * tensors, with the same weights and storage, as the Python package's table
 * (python/linformer_cl/layouts.py, read by the interpreter itself), and every
 * row's layer names read back as the layer and role they were written for.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "layouts.h"

/* The Python tables and the C rows they mirror: a row's layer roles or its model's own. */
static const struct {
    const char *table;
    lf_layout_id layout;
    bool layer;
} twins[] = {{"LUCIDRAINS_ATTENTION", LF_LAYOUT_LUCID_ATTENTION, true},
             {"LUCIDRAINS_BLOCK", LF_LAYOUT_LUCID, true},
             {"LUCIDRAINS_LM", LF_LAYOUT_LUCID_LM, false},
             {"FAIRSEQ_LAYER", LF_LAYOUT_FAIRSEQ, true},
             {"FAIRSEQ_MODEL", LF_LAYOUT_FAIRSEQ, false}};
#define TWINS (sizeof twins / sizeof *twins)

typedef struct {
    char table[32], weight[32], name[64], stored[16];
} py_row;

/* Every row of the Python tables, as "table\tweight\tname\tstored" lines from the interpreter. */
static size_t python_rows(py_row *rows, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import runpy, sys\n"
             "t = runpy.run_path(sys.argv[1])\n"
             "for k in sys.argv[2:]:\n"
             "    for w, n, s in t[k]: print(k, w, n, s, sep=\"\\t\")' %s/python/linformer_cl/layouts.py",
             LF_SOURCE_DIR);
    for (size_t i = 0; i < TWINS; i++) strcat(strcat(cmd, " "), twins[i].table);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run python3");
    size_t count = 0;
    char line[256];
    while (count < cap && fgets(line, sizeof line, p)) {
        py_row *r = &rows[count++];
        cr_assert_eq(sscanf(line, "%31[^\t]\t%31[^\t]\t%63[^\t]\t%15[^\n]", r->table, r->weight, r->name, r->stored),
                     4, "a line of the Python table: %s", line);
    }
    cr_assert_eq(pclose(p), 0, "python3 could not read layouts.py's tables");
    return count;
}

/* The C roles of a twin: a layer's with a name in the layout, or the model's own. */
static size_t c_roles(size_t twin, const lf_role **out)
{
    const lf_layout *l = &lf__layouts[twins[twin].layout];
    size_t count = 0;
    if (!twins[twin].layer) {
        for (size_t r = 0; r < l->model_count; r++) out[count++] = &l->model[r];
        return count;
    }
    for (int r = 0; r < LF_R_COUNT; r++)
        if (l->layer[r].suffix) out[count++] = &l->layer[r];
    return count;
}

Test(layouts, name_the_same_tensors_as_the_python_tables)
{
    py_row rows[128];
    const size_t n = python_rows(rows, 128);
    cr_assert_gt(n, 0, "the Python tables are empty");
    for (size_t i = 0; i < TWINS; i++) {
        const lf_role *roles[LF_R_COUNT + 16];
        const size_t count = c_roles(i, roles);
        size_t in_python = 0;
        for (size_t j = 0; j < n; j++) in_python += strcmp(rows[j].table, twins[i].table) == 0;
        cr_expect_eq(in_python, count, "%s has %zu rows in Python, %zu in C", twins[i].table, in_python, count);
        for (size_t c = 0; c < count; c++) {
            const char *stored = roles[c]->transposed ? "transposed" : "as is";
            bool found = false;
            for (size_t j = 0; j < n && !found; j++)
                found = !strcmp(rows[j].table, twins[i].table) && !strcmp(rows[j].weight, roles[c]->weight) &&
                        !strcmp(rows[j].name, roles[c]->suffix) && !strcmp(rows[j].stored, stored);
            cr_expect(found, "%s: (\"%s\", \"%s\", \"%s\") is in C's table, not in Python's", twins[i].table,
                      roles[c]->weight, roles[c]->suffix, stored);
        }
    }
}

Test(layouts, layer_names_read_back_as_their_layer_and_role)
{
    const int layers[] = {0, 7, 10, 123};
    const char *stems[] = {"", "encoder.sentence_encoder."};
    for (int id = 0; id < LF_LAYOUT_COUNT; id++) {
        const lf_layout *l = &lf__layouts[id];
        for (size_t s = 0; s < 2; s++)
            for (size_t i = 0; i < (l->stack ? 4 : 1); i++)
                for (int r = 0; r < LF_R_COUNT; r++) {
                    if (!l->layer[r].suffix) continue;
                    char name[LF_LAYOUT_NAME_MAX];
                    lf__layout_layer_name(l, stems[s], layers[i], (lf_role_id)r, name, sizeof name);
                    int layer = -1;
                    cr_expect_eq(lf__layout_layer_role(l, stems[s], 124, name, &layer), r, "%s: \"%s\"", l->name, name);
                    cr_expect_eq(layer, layers[i], "%s: \"%s\"", l->name, name);
                    cr_expect_eq(lf__layout_layer_role(l, stems[s], layers[i], name, &layer), l->stack ? -1 : r,
                                 "%s: \"%s\" is past the last of %d layers", l->name, name, layers[i]);
                }
    }
}

Test(layouts, names_of_no_layer_are_refused)
{
    const lf_layout *l = &lf__layouts[LF_LAYOUT_LUCID];
    const char *names[] = {"net.layers.01.0.fn.to_q.weight", "net.layers.x.0.fn.to_q.weight",
                           "net.layers.1.0.fn.to_q", "layers.1.0.fn.to_q.weight", "net.layers.1.2.fn.to_q.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int layer;
        cr_expect_eq(lf__layout_layer_role(l, "", 8, names[i], &layer), -1, "\"%s\" read as a layer's", names[i]);
    }
}
