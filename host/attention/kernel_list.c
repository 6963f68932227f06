/*
 * kernel_list.c - every program the library builds on a device, with the
 * options its launchers give it there, listed from the device's description
 * alone (lf_kernel_builds, over the profiles of device_profiles.c): the
 * launchers' own specs (launch.c), the plan's tiles (plan.c), the first
 * work-group size lf__kernel_sized tries and the build options of
 * program.c.
 */
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "runtime.h"

/* The attention kernel's head widths listed: the bench's and the models' 64,
 * narrower and wider ones, up to the kernel's limit. */
static const int d_heads[] = {32, 64, 128, LF_MAX_DH_TILED};

#define LIST_MAX 32

typedef struct {
    lf_kernel_build builds[LIST_MAX];
    size_t count;
    const lf_device_info *dev;
    const char *c_version;
} lf_list;

/* Adds a spec's program, or its kernel's name to the program already listed
 * with the same file and options (activation.cl's bias_rows and copy_floats). */
static void add(lf_list *l, const lf_kernel_spec *s)
{
    char options[256];
    const size_t per = s->per ? s->per : 1;
    if (s->macro)
        lf__sized_options(s->options, s->macro, lf__group_start(s->want, per, l->dev->max_work_group_size), options,
                          sizeof options);
    else snprintf(options, sizeof options, "%s", s->options);
    lf_kernel_build *b = l->builds;
    while (b < l->builds + l->count && (strcmp(b->file, s->file) != 0 || strcmp(b->options, options) != 0)) b++;
    if (b == l->builds + LIST_MAX) return; /* not reached: LIST_MAX is above the programs listed */
    if (b < l->builds + l->count) {
        snprintf(b->kernels + strlen(b->kernels), sizeof b->kernels - strlen(b->kernels), " %s", s->name);
        return;
    }
    l->count++;
    memset(b, 0, sizeof *b);
    snprintf(b->file, sizeof b->file, "%s", s->file);
    snprintf(b->options, sizeof b->options, "%s", options);
    lf__build_options_for(l->c_version, options, b->build_options, sizeof b->build_options);
    snprintf(b->kernels, sizeof b->kernels, "%s", s->name);
}

lf_status lf__kernel_list(const lf_device_info *dev, const char *c_version, lf_kernel_build *out, size_t capacity,
                          size_t *count, char *msg, size_t msg_size)
{
    lf_kernel_params kp;
    LF_TRY(lf__kernel_params(dev, &kp, msg, msg_size));
    lf_list l = {.dev = dev, .c_version = c_version};
    lf_kernel_spec s;
    for (size_t i = 0; i < sizeof d_heads / sizeof d_heads[0]; i++) {
        const lf_attention_tiles tiles = lf__attention_tiles(&kp, d_heads[i], dev);
        for (int causal = 0; causal <= 1; causal++) lf__attention_spec(&tiles, d_heads[i], causal, &s), add(&l, &s);
    }
    lf__softmax_spec(&kp, &s), add(&l, &s);
    lf__layernorm_spec(&kp, &s), add(&l, &s);
    lf__activation_spec(&kp, "bias_rows", 0, false, &s), add(&l, &s);
    lf__activation_spec(&kp, "copy_floats", 0, false, &s), add(&l, &s);
    for (int act = LF_ACT_GELU; act <= LF_ACT_RELU; act++)
        for (int glu = 0; glu <= 1; glu++) lf__activation_spec(&kp, "bias_act", act, glu, &s), add(&l, &s);
    for (int max = 0; max <= 1; max++) lf__seq_project_spec(max, &s), add(&l, &s);
    lf__embed_spec(&s), add(&l, &s);
    for (size_t i = 0; i < l.count && i < capacity; i++) out[i] = l.builds[i];
    *count = l.count;
    return LF_OK;
}

lf_status lf_kernel_builds(const char *profile, lf_kernel_build *out, size_t capacity, size_t *count, char *errbuf,
                           size_t errbuf_size)
{
    if (!count || (capacity && !out))
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_ARGUMENT, "count is NULL, or out is NULL with capacity %zu",
                            capacity);
    const lf_device_profile *p;
    LF_TRY(lf__device_profile_find(profile, &p, errbuf, errbuf_size));
    LF_TRY(lf__kernel_list(&p->info, p->c_version, out, capacity, count, errbuf, errbuf_size));
    for (size_t i = 0; i < *count && i < capacity; i++)
        snprintf(out[i].compiler, sizeof out[i].compiler, "%s", p->compiler);
    return LF_OK;
}
