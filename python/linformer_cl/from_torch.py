"""from_torch(): a lucidrains module built in memory through the C API, no file.

The configs come from what the module says (heads, dim_head, seq_len, k,
share_kv, its Linear layers); every tensor then goes through the shaped
setters, so a tensor whose shape differs from the config is an error naming
both. Where each tensor goes is in layouts.py; fairseq's state dicts are
read in from_fairseq.py.
"""
import ctypes
from typing import Optional

from . import _native as n
from ._build import ENCODER, GELU, GELU_TANH, LM, NORM_PRE, RELU, SHARE_HEADWISE, SHARE_KV, build_stack
from ._build import closed_on_error, set_weights
from ._kernels import open_context
from .errors import ArgumentError, UnsupportedError
from .layouts import LAYER, MODEL, tensors
from ._kernels import PathLike
from .load import DeviceArg, layer_info
from .model import Model


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


def _blocks(linformer, stem):
    if type(linformer.net).__name__ == "ReversibleSequence":
        raise UnsupportedError("a reversible Linformer (reversible=True) is not supported")
    blocks = [(block[0].fn, block[1].fn, block[0].norm, block[1].norm) for block in linformer.net.layers]
    if not blocks:
        raise ArgumentError(f"{stem}net.layers is empty: a Linformer of depth 0 has no model to run")
    for i, (_, _, *norms) in enumerate(blocks):
        for j, norm in enumerate(norms):  # the library's norms have a weight and a bias
            kind = type(norm).__name__
            if kind != "LayerNorm" or norm.weight is None or norm.bias is None:
                what = "a LayerNorm without its weight or bias" if kind == "LayerNorm" else kind
                raise UnsupportedError(f"{stem}net.layers.{i}.{j}.norm is {what}: only a LayerNorm with a weight "
                                       "and a bias is supported")
    return blocks


def model_config(linformer, lm=None):
    """The lf_model_config of a Linformer (or the LinformerLM holding it) and its layers' attention configs."""
    blocks = _blocks(linformer, "linformer." if lm is not None else "")
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


def _layer(ctx, att):
    cfg, handle = attention_config(att), n.handle()
    ctx.check(n.lib.lf_attention_create(ctx.handle, ctypes.byref(cfg), None, ctypes.byref(handle)))
    with closed_on_error(Model(ctx, handle, None, is_layer=True)) as model:
        setter = lambda name, dims, ndims, data: n.lib.lf_attention_set_weight_shaped(handle, name, dims, ndims, data)
        set_weights(ctx, setter, tensors("lucidrains-attention", LAYER), att.state_dict(), "")
        n.lib.lf_attention_config_get(handle, ctypes.byref(cfg))
        model.info = layer_info(cfg, 0)
    return model


def _stack(ctx, module, linformer, lm, stem):
    cfg, attn = model_config(linformer, lm)
    return build_stack(ctx, cfg, attn, module.state_dict(), tensors("lucidrains", LAYER),
                       lambda i: f"{stem}net.layers.{i}.", tensors("lucidrains-lm", MODEL) if lm is not None else (), "")


def from_torch(module, device: DeviceArg = None, *, args=None, cache_dir: Optional[PathLike] = None) -> Model:
    """A Model running lucidrains' LinformerSelfAttention, Linformer or LinformerLM `module` on a device.

    device: a selector string ("pocl", "intel", "gpu", "0:1": see
    linformer_cl.devices(), whose `selector` picks exactly one), a Device, or
    None (LINFORMER_DEVICE, else the first GPU, accelerator, then CPU).
    A dict is a fairseq Linformer encoder's state dict, with the checkpoint's
    `args` (a Namespace or dict: encoder_attention_heads, activation_fn,
    encoder_normalize_before, padding_idx). cache_dir: the folder the model's
    compiled kernels are kept in ("off": none; None: LINFORMER_CACHE_DIR, else
    ~/.cache/linformer). The weights are copied (later changes to the module
    are not seen); the model computes what the module computes in eval mode.
    Returns a Model; the first forward compiles its kernels where none is
    cached (said through logging, logger "linformer_cl").
    """
    if isinstance(module, dict):
        from .from_fairseq import from_fairseq
        return from_fairseq(module, args, device, cache_dir)
    kind = type(module).__name__
    if kind not in ("LinformerSelfAttention", "Linformer", "LinformerLM"):
        raise ArgumentError(f"from_torch takes lucidrains' LinformerSelfAttention, Linformer or LinformerLM, "
                            f"not {kind}")
    ctx = open_context(device, cache_dir)
    try:
        if kind == "LinformerSelfAttention":
            return _layer(ctx, module)
        if kind == "Linformer":
            return _stack(ctx, module, module, None, "")
        return _stack(ctx, module, module.linformer, module, "linformer.")
    except BaseException:
        ctx.close()  # a model that failed half-built has freed itself already
        raise
