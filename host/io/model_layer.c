/*
 * model_layer.c - one layer of a model as an attention layer of its own, for
 * measuring it (`linformer rank`): the layer's config changed as load options
 * change a file's layer, its weights copied on the device through the plans'
 * weight tables. The model's layerwise projection E = F becomes the layer's
 * own E = F (LF_SHARE_KV): the same matrix, without a shared object.
 */
#include "attention.h"
#include "loader.h"
#include "model.h"

/* Layer i's config as the options change it. */
static lf_status layer_config(const lf_model *m, int i, const lf_load_options *o, lf_attention_config *c)
{
    const lf_plan *p = &m->layer[i].plan;
    *c = p->cfg;
    if (o->heads && o->heads != c->heads)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "heads %d was given but layer %d has %d", o->heads, i, c->heads);
    if (o->causal != -1 && o->causal != c->causal)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "causal %d was given but layer %d is %scausal", o->causal, i,
                        c->causal ? "" : "not ");
    const bool own = o->projection == LF_PROJ_LEARNED;
    if (o->mode == LF_MODE_LINFORMER && own && !p->linformer)
        return lf__fail(m->ctx, LF_ERR_ARGUMENT, "layer %d runs %s attention and has no projections of its own: "
                        "choose a random or pooling projection and its k", i, lf_mode_name(c->mode));
    c->mode = o->mode;
    c->path = LF_PATH_AUTO; /* chosen again for the mode and k asked for */
    if (!own) c->proj_kind = o->projection, c->seed = o->seed, c->k = o->k ? o->k : c->k;
    if (c->sharing == LF_SHARE_LAYERWISE) c->sharing = LF_SHARE_KV;
    return LF_OK;
}

/* Every weight the new layer has, from the model's buffers (E from the
 * layerwise projection when the model shares one). */
static lf_status copy_weights(const lf_model *m, int i, lf_attention *a)
{
    const lf_model_layer *L = &m->layer[i];
    const lf_plan *to = lf__attention_plan(a);
    for (int id = 0; id < LF_W_COUNT; id++) {
        const lf_weight_slot *t = &to->weights[id], *f = &L->plan.weights[id];
        if (!t->count) continue;
        const bool shared = (id == LF_P_E || id == LF_P_F) && m->cfg.info.layerwise;
        const size_t have = shared ? (size_t)m->cfg.shared_k * m->cfg.shared_n : f->count;
        if (have != t->count) /* a plan that does not match the model's: never for configs made above */
            return lf__fail(m->ctx, LF_ERR_STATE, "weight \"%s\" of layer %d holds %zu floats, the copy needs %zu",
                            t->name, i, have, t->count);
        LF_TRY(lf__attention_copy_weight(a, (lf_weight_id)id, shared ? m->m[LF_M_SHARED_E] : L->w.buf[f->buf],
                                         shared ? 0 : f->offset));
    }
    LF_CL_CHECK(m->ctx, clFinish(m->ctx->queue), "clFinish");
    return LF_OK;
}

lf_status lf_model_layer_attention(lf_model *model, int layer, const lf_load_options *opts, lf_attention **out)
{
    if (out) *out = NULL;
    if (!model) return LF_ERR_ARGUMENT;
    lf_context *ctx = model->ctx;
    if (!out) return lf__fail(ctx, LF_ERR_ARGUMENT, "out is NULL");
    if (layer < 0 || layer >= model->cfg.info.layers)
        return lf__fail(ctx, LF_ERR_ARGUMENT, "layer %d is outside [0, %d)", layer, model->cfg.info.layers);
    lf_load_options o;
    lf_load_options_init(&o);
    if (opts) o = *opts;
    LF_TRY(lf__load_options_check(ctx, &o));
    lf_attention_config cfg;
    LF_TRY(layer_config(model, layer, &o, &cfg));
    LF_TRY(lf__context_lock(ctx));
    lf_status st = lf__model_check_set(model);
    lf__context_unlock(ctx);
    lf_attention *a = NULL;
    if (st == LF_OK) st = lf_attention_create(ctx, &cfg, NULL, &a);
    if (st != LF_OK) return st;
    st = lf__context_lock(ctx);
    if (st == LF_OK) {
        st = copy_weights(model, layer, a);
        lf__context_unlock(ctx);
    }
    if (st != LF_OK) {
        lf_attention_free(a);
        return st;
    }
    *out = a;
    return LF_OK;
}
