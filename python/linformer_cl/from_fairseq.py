"""A fairseq Linformer encoder's state dict and args, built in memory as lf_model_load reads its file.

The shapes say the sizes and which tensors exist (biases, compress_v, one
compress_layer for every layer, embeddings and norms); args say the head
count, the activation and the norm placement. What the file loader refuses
(host/io/model_load.c) is refused here too, naming the tensor: one it does
not know under the encoder's stem (a layer past a gap in the numbering
included), a required one missing, a layer's own projection beside the
layerwise one.
"""
import ctypes

from . import _native as n
from ._build import GELU, GELU_TANH, NORM_POST, NORM_PRE, POSITION_INPUT, RELU, SHARE_HEADWISE, SHARE_KV
from ._build import SHARE_LAYERWISE, ENCODER, TOKEN_ENCODER, build_stack, torch_tensor
from ._context import INT_MAX, c_integer
from ._kernels import open_context
from .convert import DROPPED_SUFFIXES
from .errors import ArgumentError, FormatError, UnsupportedError
from .layouts import LAYER, MODEL, tensors
from .model import torch_values

PROBE = "layers.0.self_attn.q_proj.weight"
ACTIVATIONS = {"gelu": GELU, "gelu_accurate": GELU_TANH, "gelu_fast": GELU_TANH, "gelu_tanh": GELU_TANH,
               "relu": RELU}


def _arg(args, key, default=None):
    value = args.get(key) if isinstance(args, dict) else getattr(args, key, None)
    return default if value is None else value


def _stem(state):
    stems = [name[:-len(PROBE)] for name in state if isinstance(name, str) and name.endswith(PROBE)]
    if len(stems) != 1:
        raise ArgumentError(f"a fairseq state dict has one \"...{PROBE}\"; this one has {len(stems)}")
    return stems[0]


def _shape(state, name):
    """The shape of state[name], a 2-D torch tensor; None where it is absent."""
    if name not in state:
        return None
    t = torch_tensor(name, state[name])
    if t.dim() != 2:
        raise ArgumentError(f"tensor \"{name}\" has {t.dim()} dimensions, expected 2")
    return tuple(t.shape)


def _check_tensors(state, stem, layers, shared):
    """Refuses what lf_model_load refuses of the same tensors in a file, naming the tensor."""
    layer_rows = tensors("fairseq", LAYER)
    known = {stem + name for _, name, _, _ in tensors("fairseq", MODEL)}
    known |= {f"{stem}layers.{i}.{name}" for i in range(layers) for _, name, _, _ in layer_rows}
    required = [name for _, name, _, needed in layer_rows if needed]  # its biases and projections are optional
    projections = [name for weight, name, _, _ in layer_rows if weight in ("e", "f")]
    for name in state:
        if isinstance(name, str) and name.startswith(stem) and name not in known and \
                not name.endswith(DROPPED_SUFFIXES):  # fairseq's bookkeeping buffers, which the converter drops
            raise FormatError(f"unknown tensor \"{name}\" (not part of fairseq's encoder of {layers} layers)")
    ff_biases = [f"{stem}layers.0.{fc}.bias" in state for fc in ("fc1", "fc2")]
    for i in range(layers):
        base = f"{stem}layers.{i}."
        missing = next((base + name for name in required if base + name not in state), None)
        if missing:
            raise ArgumentError(f"tensor \"{missing}\" is missing")
        if [base + f"{fc}.bias" in state for fc in ("fc1", "fc2")] != ff_biases:
            raise UnsupportedError(f"layer {i}'s feed-forward differs from layer 0's in its biases")
        for name in projections:  # fairseq names the layerwise projection in every layer: only it may be here
            if shared is not None and base + name in state and not _same(base + name, state, stem):
                raise FormatError(f"tensor \"{base}{name}\" is a projection of the layer's own beside the layerwise "
                                  f"\"{stem}compress_layer.weight\"")


def _same(name, state, stem):
    """Whether state[name] holds the values of the layerwise projection, in its dtype (as the file loader
    compares them)."""
    import torch
    a, b = torch_tensor(name, state[name]), state[stem + "compress_layer.weight"]
    return a is b or (a.dtype == b.dtype and torch.equal(torch_values(f"tensor \"{name}\"", a),
                                                         torch_values(f"tensor \"{stem}compress_layer.weight\"", b)))


def _attention(state, base, heads, shared):
    """Layer `base`'s lf_attention_config: sizes from q_proj and E's shape, biases from what exists."""
    q = _shape(state, base + "self_attn.q_proj.weight")
    e = shared if shared is not None else _shape(state, base + "self_attn.compress_k.weight")
    if e is None:
        raise ArgumentError(f"\"{base}self_attn.compress_k.weight\" is missing (and there is no compress_layer)")
    if q[0] % heads:
        raise ArgumentError(f"{q[0]} query rows do not split into {heads} heads")
    cfg = n.AttentionConfig()
    n.lib.lf_attention_config_init(ctypes.byref(cfg), q[1], heads, e[1], e[0])
    has = lambda name: base + "self_attn." + name in state
    cfg.bias_q, cfg.bias_k, cfg.bias_v, cfg.bias_out = (has(p + "_proj.bias") for p in ("q", "k", "v", "out"))
    cfg.position = POSITION_INPUT
    cfg.sharing = SHARE_LAYERWISE if shared is not None else SHARE_HEADWISE if has("compress_v.weight") else SHARE_KV
    return cfg


def model_config(state, stem, args):
    # integers as the file loader takes them from __metadata__, checked before ctypes would wrap them
    heads = c_integer("encoder_attention_heads", _arg(args, "encoder_attention_heads"), 1, INT_MAX)
    padding_idx = c_integer("padding_idx", _arg(args, "padding_idx", 1), -1, 1 << 20)
    act = _arg(args, "activation_fn", "gelu")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise UnsupportedError(f"activation_fn {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    layers = 0
    while f"{stem}layers.{layers}.self_attn.q_proj.weight" in state:
        layers += 1
    shared = _shape(state, stem + "compress_layer.weight")
    _check_tensors(state, stem, layers, shared)
    attn = (n.AttentionConfig * layers)(*[_attention(state, f"{stem}layers.{i}.", heads, shared)
                                          for i in range(layers)])
    fc1, tok = _shape(state, stem + "layers.0.fc1.weight"), _shape(state, stem + "embed_tokens.weight")
    cfg = n.ModelConfig()
    n.lib.lf_model_config_init(ctypes.byref(cfg), TOKEN_ENCODER if tok is not None else ENCODER, layers,
                               fc1[1], fc1[0], tok[0] if tok is not None else 0)
    cfg.norm = NORM_PRE if _arg(args, "encoder_normalize_before", False) else NORM_POST
    cfg.activation = ACTIVATIONS[act]
    cfg.bias_ff1, cfg.bias_ff2 = (f"{stem}layers.0.{fc}.bias" in state for fc in ("fc1", "fc2"))
    pos = _shape(state, stem + "embed_positions.weight")
    cfg.positions = pos[0] if pos is not None and tok is not None else 0
    cfg.pos_offset = padding_idx + 1
    cfg.emb_norm = any(stem + f"{name}.weight" in state for name in ("layernorm_embedding", "emb_layer_norm"))
    cfg.final_norm = stem + "layer_norm.weight" in state
    return cfg, attn


def from_fairseq(state, args, device=None, cache_dir=None):
    """A Model of a fairseq Linformer encoder from its state dict and its checkpoint's args (see from_torch)."""
    if args is None:
        raise ArgumentError("a fairseq state dict needs its args (encoder_attention_heads, activation_fn, ...)")
    stem = _stem(state)
    cfg, attn = model_config(state, stem, args)
    head = stem[:-len("sentence_encoder.")] + "lm_head.dense.weight" if stem.endswith("sentence_encoder.") else None
    if cfg.kind == TOKEN_ENCODER and head in state:  # lf_model_load serves it: logits, not the encoder's output
        raise UnsupportedError(f"the state dict has a masked-LM head (\"{head}\") beside the encoder, which "
                               "from_torch does not build: convert the checkpoint (python -m linformer_cl.convert) "
                               "and load() the file, which gives its logits")
    skip = ("e", "f") if cfg.layers and attn[0].sharing == SHARE_LAYERWISE else ()  # the layers' aliases of it
    ctx = open_context(device, cache_dir)
    try:
        return build_stack(ctx, cfg, attn, state, tensors("fairseq", LAYER), lambda i: f"{stem}layers.{i}.",
                           tensors("fairseq", MODEL), stem, skip)
    except BaseException:
        ctx.close()
        raise
