"""from_torch(): a lucidrains module built in memory through the C API, no file.

The configs come from what the module says (heads, dim_head, seq_len, k,
share_kv, its Linear layers); every tensor then goes through the shaped
setters, so a tensor whose shape differs from the config is an error naming
both. Where each tensor goes is in layouts.py.
"""
import contextlib
import ctypes

import numpy as np

from . import _native as n
from ._context import Context
from .errors import ArgumentError, UnsupportedError
from .layouts import LUCIDRAINS_ATTENTION, LUCIDRAINS_BLOCK, LUCIDRAINS_LM, TRANSPOSED
from .load import layer_info, stack_info
from .model import Model

SHARE_HEADWISE, SHARE_KV = 1, 2
ENCODER, LM = 1, 3
GELU, GELU_TANH, RELU = 1, 2, 3
NORM_PRE = 1


def _array(name, tensor, stored):
    """A float32 C-ordered copy of a tensor, in the layout the library takes."""
    t = tensor.detach().cpu()
    if not t.is_floating_point():
        raise ArgumentError(f"tensor \"{name}\" is {t.dtype}, not a floating-point tensor")
    a = t.float().numpy()
    return np.ascontiguousarray(a.T if stored == TRANSPOSED else a)


def set_weights(ctx, setter, table, state, prefix):
    """Hands every tensor of `table` found under prefix to setter(name, dims, ndims, data)."""
    for name, tensor_name, stored in table:
        full = prefix + tensor_name
        if full not in state:
            continue  # an optional tensor (a bias); a missing required one is named by the library
        a = _array(full, state[full], stored)
        dims = (ctypes.c_size_t * max(a.ndim, 1))(*a.shape)
        try:
            ctx.check(setter(name.encode(), dims, a.ndim, a.ctypes.data_as(n.floats)))
        except ArgumentError as e:
            raise ArgumentError(f"tensor \"{full}\" {tuple(a.shape)}: {e}") from None


def attention_config(att):
    """The lf_attention_config of a LinformerSelfAttention, from its attributes and Linear layers."""
    d_model, dh, heads = att.to_q.in_features, att.dim_head, att.heads
    kv_rows = att.to_k.out_features
    if kv_rows not in (dh, dh * heads) or att.to_q.out_features != dh * heads:
        raise ArgumentError(f"to_q has {att.to_q.out_features} rows and to_k {kv_rows}: "
                            f"neither {heads} heads of {dh} nor one key/value head")
    cfg = n.AttentionConfig()
    n.lib.lf_attention_config_init(ctypes.byref(cfg), d_model, heads, att.seq_len, att.k)
    cfg.d_head, cfg.kv_heads = dh, heads if kv_rows == dh * heads else 1
    cfg.bias_q, cfg.bias_k = att.to_q.bias is not None, att.to_k.bias is not None
    cfg.bias_v = not att.share_kv and att.to_v.bias is not None
    cfg.bias_out = att.to_out.bias is not None
    cfg.share_kv, cfg.sharing = int(att.share_kv), SHARE_KV if att.share_kv else SHARE_HEADWISE
    return cfg


def _activation(act):
    kind = type(act).__name__
    if kind == "GELU":
        return GELU_TANH if getattr(act, "approximate", "none") == "tanh" else GELU
    if kind in ("GELU_", "ReLU"):
        return GELU_TANH if kind == "GELU_" else RELU
    raise UnsupportedError(f"activation {kind} is not supported (GELU, the tanh GELU, ReLU)")


def _blocks(linformer):
    if type(linformer.net).__name__ == "ReversibleSequence":
        raise UnsupportedError("a reversible Linformer (reversible=True) is not supported")
    return [(block[0].fn, block[1].fn, block[0].norm, block[1].norm) for block in linformer.net.layers]


def model_config(linformer, lm=None):
    """The lf_model_config of a Linformer (or the LinformerLM holding it) and its layers' attention configs."""
    blocks = _blocks(linformer)
    att, ff, norm, _ = blocks[0]
    vocab = lm.token_emb.num_embeddings if lm is not None else 0
    cfg = n.ModelConfig()
    n.lib.lf_model_config_init(ctypes.byref(cfg), LM if lm is not None else ENCODER, len(blocks),
                               att.to_q.in_features, ff.w2.in_features, vocab)
    cfg.norm, cfg.activation, cfg.glu = NORM_PRE, _activation(ff.act), int(ff.glu)
    cfg.bias_ff1, cfg.bias_ff2, cfg.eps = ff.w1.bias is not None, ff.w2.bias is not None, norm.eps
    for i, (_, f, n1, n2) in enumerate(blocks):
        if (n1.eps, n2.eps, f.glu, type(f.act)) != (norm.eps, norm.eps, ff.glu, type(ff.act)):
            raise UnsupportedError(f"layer {i}'s norms or feed-forward differ from layer 0's")
    if lm is not None:
        cfg.positions, cfg.head_bias = lm.pos_emb.num_embeddings, lm.to_logits.bias is not None
    attn = (n.AttentionConfig * len(blocks))(*[attention_config(b[0]) for b in blocks])
    return cfg, attn


@contextlib.contextmanager
def _closed_on_error(model):
    """Yields model; closes it (its handle and context) when the block raises."""
    try:
        yield model
    except BaseException:
        model.close()
        raise


def _layer(ctx, att):
    cfg, handle = attention_config(att), n.handle()
    ctx.check(n.lib.lf_attention_create(ctx.handle, ctypes.byref(cfg), None, ctypes.byref(handle)))
    with _closed_on_error(Model(ctx, handle, None, is_layer=True)) as model:
        setter = lambda name, dims, ndims, data: n.lib.lf_attention_set_weight_shaped(handle, name, dims, ndims, data)
        set_weights(ctx, setter, LUCIDRAINS_ATTENTION, att.state_dict(), "")
        n.lib.lf_attention_config_get(handle, ctypes.byref(cfg))
        model.info = layer_info(cfg, 0)
    return model


def _stack(ctx, module, linformer, lm, stem):
    cfg, attn = model_config(linformer, lm)
    handle = n.handle()
    ctx.check(n.lib.lf_model_create(ctx.handle, ctypes.byref(cfg), attn, ctypes.byref(handle)))
    state = module.state_dict()
    with _closed_on_error(Model(ctx, handle, None, is_layer=False)) as model:
        for i in range(-1 if lm is not None else 0, cfg.layers):
            table, prefix = (LUCIDRAINS_LM, "") if i < 0 else (LUCIDRAINS_BLOCK, f"{stem}net.layers.{i}.")
            setter = lambda name, dims, ndims, data, i=i: n.lib.lf_model_set_weight_shaped(handle, i, name, dims,
                                                                                           ndims, data)
            set_weights(ctx, setter, table, state, prefix)
        model.info = stack_info(ctx, handle)
    return model


def from_torch(module, device=None):
    """A Model running lucidrains' LinformerSelfAttention, Linformer or LinformerLM `module` on a device.

    The module's weights are copied (later changes to it are not seen); the
    model computes what the module computes in eval mode.
    """
    kind = type(module).__name__
    if kind not in ("LinformerSelfAttention", "Linformer", "LinformerLM"):
        raise ArgumentError(f"from_torch takes lucidrains' LinformerSelfAttention, Linformer or LinformerLM, "
                            f"not {kind}")
    ctx = Context(device)
    try:
        if kind == "LinformerSelfAttention":
            return _layer(ctx, module)
        if kind == "Linformer":
            return _stack(ctx, module, module, None, "")
        return _stack(ctx, module, module.linformer, module, "linformer.")
    except BaseException:
        ctx.close()  # a model that failed half-built has freed itself already
        raise
