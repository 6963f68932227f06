"""load(): every file `linformer run` serves, as a Model."""
import ctypes
from typing import Optional, Union

from . import _native as n
from ._context import INT_MAX, UINT64_MAX, Device, c_integer, c_string, call_with_errbuf, text
from ._kernels import PathLike, open_context
from .errors import ArgumentError
from .model import Model, ModelInfo

DeviceArg = Union[str, Device, None]
PROJECTIONS = {"learned": 0, "random": 1, "mean": 2, "max": 3}
KINDS = {1: "encoder", 2: "token encoder", 3: "language model"}


def _parse(fn, name, what):
    value = ctypes.c_int()
    if fn(c_string(what, name), ctypes.byref(value)):
        raise ArgumentError(f"{what} \"{name}\" is not known")
    return value.value


def is_layer_file(path):
    """A file of one attention layer (lucidrains' LinformerSelfAttention names) rather than a model."""
    f, t = n.handle(), n.TensorInfo()
    call_with_errbuf(n.lib.lf_tensor_file_open, path, ctypes.byref(f))
    try:
        return n.lib.lf_tensor_file_find(f, b"to_q.weight", ctypes.byref(t)) == 0
    finally:
        n.lib.lf_tensor_file_free(f)


def layer_info(cfg, mode):
    return ModelInfo(kind="layer", takes_tokens=False, d_model=cfg.d_model, heads=cfg.heads, k=cfg.k,
                     max_seq_len=cfg.max_seq_len, vocab=0, layers=1, out_width=cfg.d_model,
                     mode=text(n.lib.lf_mode_name(mode)))


def stack_info(ctx, handle):
    """The model's info; k from its first layer's config."""
    info, cfg, layer = n.ModelInfo(), n.AttentionConfig(), n.handle()
    ctx.check(n.lib.lf_model_info_get(handle, ctypes.byref(info)))
    ctx.check(n.lib.lf_model_layer_attention(handle, 0, None, ctypes.byref(layer)))
    n.lib.lf_attention_config_get(layer, ctypes.byref(cfg))
    n.lib.lf_attention_free(layer)
    return ModelInfo(kind=KINDS[info.kind], takes_tokens=info.kind != 1, d_model=info.d_model, heads=info.heads,
                     k=cfg.k, max_seq_len=info.max_seq_len, vocab=info.vocab, layers=info.layers,
                     out_width=info.vocab if info.kind == 3 else info.d_model)


def _load_layer(ctx, path, heads, mode, causal, projection, k, seed):
    opts = n.LoadOptions()
    n.lib.lf_load_options_init(ctypes.byref(opts))
    opts.heads = heads
    if mode is not None:
        opts.mode = _parse(n.lib.lf_mode_parse, mode, "mode")
    opts.causal = -1 if causal is None else int(bool(causal))
    if projection is not None:
        if projection not in PROJECTIONS:
            raise ArgumentError(f"projection \"{projection}\" is not one of {', '.join(PROJECTIONS)}")
        opts.projection = PROJECTIONS[projection]
    opts.k, opts.seed = k, seed
    handle, cfg = n.handle(), n.AttentionConfig()
    ctx.check(n.lib.lf_attention_load_with(ctx.handle, path, ctypes.byref(opts), ctypes.byref(handle)))
    n.lib.lf_attention_config_get(handle, ctypes.byref(cfg))
    return Model(ctx, handle, layer_info(cfg, opts.mode), is_layer=True)


def _load_stack(ctx, path, heads, prefix, activation, norm):
    opts = n.ModelOptions(heads=heads)
    if activation is not None:
        opts.activation = _parse(n.lib.lf_activation_parse, activation, "activation")
    if norm is not None:
        opts.norm = _parse(n.lib.lf_norm_parse, norm, "norm")
    opts.prefix = c_string("prefix", prefix) if prefix is not None else None
    handle = n.handle()
    ctx.check(n.lib.lf_model_load(ctx.handle, path, ctypes.byref(opts), ctypes.byref(handle)))
    try:
        info = stack_info(ctx, handle)
    except Exception:
        n.lib.lf_model_free(handle)
        raise
    return Model(ctx, handle, info, is_layer=False)


def load(path: PathLike, device: DeviceArg = None, heads: Optional[int] = None, *, mode: Optional[str] = None,
         causal: Optional[bool] = None, projection: Optional[str] = None, k: Optional[int] = None, seed: int = 0,
         prefix: Optional[str] = None, activation: Optional[str] = None, norm: Optional[str] = None,
         cache_dir: Optional[PathLike] = None) -> Model:
    """Opens a safetensors file of one attention layer or a whole model on a device; returns a Model.

    device: a selector string ("pocl", "intel", "gpu", "0:1": see
    linformer_cl.devices(), whose `selector` picks exactly one), a Device, or
    None (LINFORMER_DEVICE, else the first GPU, accelerator, then CPU).
    cache_dir: the folder the compiled kernels are kept in ("off": none; None:
    LINFORMER_CACHE_DIR, else ~/.cache/linformer); where none is cached, the
    first forward compiles them (seconds), which is said through logging
    (logger "linformer_cl").
    mode ("linformer", "dense", "flash"), causal, projection ("learned",
    "random", "mean", "max"), k and seed apply to a layer file; prefix,
    activation ("gelu", "gelu_tanh", "relu") and norm ("pre", "post") to a
    model. heads, when given, must agree with the file's __metadata__. None
    (k, heads) is the file's. A string holding a NUL byte, or an integer
    outside what its C field holds, is an ArgumentError naming it.
    """
    path = c_string("path", path)
    heads = 0 if heads is None else c_integer("heads", heads, 1, INT_MAX)
    k = 0 if k is None else c_integer("k", k, 1, INT_MAX)
    seed = c_integer("seed", seed, 0, UINT64_MAX)
    layer = is_layer_file(path) and prefix is None
    if layer and (activation or norm):
        raise ArgumentError("activation and norm are for models; the file holds one attention layer")
    if not layer and (mode or causal is not None or projection or k):
        raise ArgumentError("mode, causal, projection and k are for a single attention layer; the file holds a model")
    ctx = open_context(device, cache_dir)
    try:
        if layer:
            return _load_layer(ctx, path, heads, mode, causal, projection, k, seed)
        return _load_stack(ctx, path, heads, prefix, activation, norm)
    except Exception:
        ctx.close()
        raise
