/*
 * test_layouts.c - the table of layouts (host/io/layouts.c): every row's layer
 * names read back as the layer and role they were written for, and what
 * lf_layout_tensors gives hosts (the Python package) is those same tensors.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "layouts.h"

/* A layer's prefix in each layout, as a host holding a state dict writes it ("{i}." for layer 7). */
static void layer_prefix(const lf_layout *l, char *out, size_t size)
{
    snprintf(out, size, "%s%s%s", l->base, l->stack ? l->stack : "", l->stack ? "7." : "");
}

Test(layouts, tensors_for_hosts_read_back_as_the_loaders_roles)
{
    for (int id = 0; id < LF_LAYOUT_COUNT; id++) {
        const lf_layout *l = &lf__layouts[id];
        lf_layout_tensor t[LF_R_COUNT + 1];
        size_t count = 0;
        cr_assert_eq(lf_layout_tensors(l->key, LF_LAYOUT_LAYER, t, LF_R_COUNT + 1, &count, NULL, 0), LF_OK, "%s",
                     l->key);
        size_t roles = 0;
        for (int r = 0; r < LF_R_COUNT; r++) roles += l->layer[r].suffix != NULL;
        cr_expect_eq(count, roles, "%s: %zu layer tensors, the table has %zu", l->key, count, roles);
        char prefix[LF_LAYOUT_NAME_MAX], name[LF_LAYOUT_NAME_MAX];
        layer_prefix(l, prefix, sizeof prefix);
        for (size_t i = 0; i < count; i++) {
            snprintf(name, sizeof name, "%s%s", prefix, t[i].name);
            int layer = -1;
            const int r = lf__layout_layer_role(l, "", 8, name, &layer);
            cr_assert_geq(r, 0, "%s: \"%s\" is no tensor the loader reads", l->key, name);
            cr_expect_eq(layer, l->stack ? 7 : 0, "%s: \"%s\"", l->key, name);
            cr_expect_str_eq(t[i].weight, l->layer[r].weight, "%s: \"%s\"", l->key, name);
            cr_expect(t[i].ndim == l->layer[r].ndim && t[i].required == l->layer[r].required &&
                          t[i].transposed == l->layer[r].transposed, "%s: \"%s\"", l->key, name);
        }
        cr_assert_eq(lf_layout_tensors(l->key, LF_LAYOUT_MODEL, t, LF_R_COUNT + 1, &count, NULL, 0), LF_OK);
        cr_expect_eq(count, l->model_count, "%s: %zu model tensors", l->key, count);
        for (size_t i = 0; i < count; i++)
            cr_expect(lf__layout_model_role(l, t[i].weight) && !strcmp(t[i].name, l->model[i].suffix), "%s: %s",
                      l->key, t[i].name);
    }
}

Test(layouts, tensors_for_hosts_say_what_the_files_hold)
{
    lf_layout_tensor t[LF_R_COUNT];
    size_t count = 0;
    cr_assert_eq(lf_layout_tensors("lucidrains-attention", LF_LAYOUT_LAYER, t, LF_R_COUNT, &count, NULL, 0), LF_OK);
    bool proj_k = false;
    for (size_t i = 0; i < count; i++)
        proj_k |= !strcmp(t[i].name, "proj_k") && !strcmp(t[i].weight, "e") && t[i].transposed && t[i].required;
    cr_expect(proj_k, "lucidrains' proj_k is E^T, required");
    cr_assert_eq(lf_layout_tensors("lucidrains-reversible", LF_LAYOUT_LAYER, t, LF_R_COUNT, &count, NULL, 0), LF_OK);
    cr_expect_str_eq(t[0].name, "f.net.norm.weight", "a reversible block's first tensor");
    cr_assert_eq(lf_layout_tensors("fairseq", LF_LAYOUT_LAYER, t, LF_R_COUNT, &count, NULL, 0), LF_OK);
    size_t required = 0;
    for (size_t i = 0; i < count; i++) required += t[i].required;
    cr_expect(count == 18 && required == 10, "fairseq's layer: %zu tensors, %zu required", count, required);
}

Test(layouts, tensors_for_hosts_refuse_bad_arguments)
{
    lf_layout_tensor t[4];
    memset(t, 0x5a, sizeof t);
    size_t count = 99;
    char err[512];
    cr_expect_eq(lf_layout_tensors("fairseq", LF_LAYOUT_LAYER, t, 2, &count, err, sizeof err), LF_OK);
    cr_expect_eq(count, 18, "the count is the part's, not the capacity's");
    cr_expect(t[2].ndim == 0x5a5a5a5a, "an entry past the capacity was written");
    const struct {
        const char *layout;
        int part;
        bool no_out, no_count;
        const char *named;
    } bad[] = {{"lucid", LF_LAYOUT_LAYER, false, false, "layout \"lucid\" is not one of lucidrains-attention, "},
               {NULL, LF_LAYOUT_MODEL, false, false, "layout NULL"},
               {"fairseq", 2, false, false, "part 2"},
               {"fairseq", -1, false, false, "part -1"},
               {"fairseq", LF_LAYOUT_LAYER, true, false, "out is NULL but capacity is 4"},
               {"fairseq", LF_LAYOUT_LAYER, false, true, "count is NULL"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        count = 99;
        err[0] = 0;
        cr_expect_eq(lf_layout_tensors(bad[i].layout, (lf_layout_part)bad[i].part, bad[i].no_out ? NULL : t, 4,
                                       bad[i].no_count ? NULL : &count, err, sizeof err),
                     LF_ERR_ARGUMENT, "case %zu", i);
        cr_expect(strstr(err, bad[i].named), "case %zu: \"%s\" does not name \"%s\"", i, err, bad[i].named);
        if (!bad[i].no_count) cr_expect_eq(count, 0, "case %zu: count %zu", i, count);
    }
    cr_expect_eq(lf_layout_tensors("fairseq", LF_LAYOUT_MODEL, NULL, 0, &count, NULL, 0), LF_OK, "a count alone");
    cr_expect_eq(count, 9);
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
