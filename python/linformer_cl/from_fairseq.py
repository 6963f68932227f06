"""A fairseq Linformer encoder's state dict and args, built in memory as lf_model_load reads its file.

The shapes say the sizes and which tensors exist (biases, compress_v, one
compress_layer for every layer, embeddings and norms); args say the head
count, the activation and the norm placement.
"""
import ctypes

from . import _native as n
from ._build import GELU, GELU_TANH, NORM_POST, NORM_PRE, POSITION_INPUT, RELU, SHARE_HEADWISE, SHARE_KV
from ._build import SHARE_LAYERWISE, ENCODER, TOKEN_ENCODER, build_stack
from ._context import Context
from .errors import ArgumentError, UnsupportedError
from .layouts import FAIRSEQ_LAYER, FAIRSEQ_MODEL

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


def _attention(state, base, heads, shared):
    """Layer `base`'s lf_attention_config: sizes from q_proj and E's shape, biases from what exists."""
    q = state[base + "self_attn.q_proj.weight"]
    e = shared if shared is not None else state.get(base + "self_attn.compress_k.weight")
    if e is None:
        raise ArgumentError(f"\"{base}self_attn.compress_k.weight\" is missing (and there is no compress_layer)")
    if q.shape[0] % heads:
        raise ArgumentError(f"{q.shape[0]} query rows do not split into {heads} heads")
    cfg = n.AttentionConfig()
    n.lib.lf_attention_config_init(ctypes.byref(cfg), q.shape[1], heads, e.shape[1], e.shape[0])
    has = lambda name: base + "self_attn." + name in state
    cfg.bias_q, cfg.bias_k, cfg.bias_v, cfg.bias_out = (has(p + "_proj.bias") for p in ("q", "k", "v", "out"))
    cfg.position = POSITION_INPUT
    cfg.sharing = SHARE_LAYERWISE if shared is not None else SHARE_HEADWISE if has("compress_v.weight") else SHARE_KV
    return cfg


def model_config(state, stem, args):
    heads = int(_arg(args, "encoder_attention_heads", 0))
    if heads < 1:
        raise ArgumentError("args give no positive encoder_attention_heads")
    act = _arg(args, "activation_fn", "gelu")
    if act not in ACTIVATIONS:
        raise UnsupportedError(f"activation \"{act}\" is not supported ({', '.join(ACTIVATIONS)})")
    layers = 0
    while f"{stem}layers.{layers}.self_attn.q_proj.weight" in state:
        layers += 1
    shared = state.get(stem + "compress_layer.weight")
    attn = (n.AttentionConfig * layers)(*[_attention(state, f"{stem}layers.{i}.", heads, shared)
                                          for i in range(layers)])
    fc1, tok = state[stem + "layers.0.fc1.weight"], state.get(stem + "embed_tokens.weight")
    cfg = n.ModelConfig()
    n.lib.lf_model_config_init(ctypes.byref(cfg), TOKEN_ENCODER if tok is not None else ENCODER, layers,
                               fc1.shape[1], fc1.shape[0], tok.shape[0] if tok is not None else 0)
    cfg.norm = NORM_PRE if _arg(args, "encoder_normalize_before", False) else NORM_POST
    cfg.activation = ACTIVATIONS[act]
    cfg.bias_ff1, cfg.bias_ff2 = (f"{stem}layers.0.{fc}.bias" in state for fc in ("fc1", "fc2"))
    pos = state.get(stem + "embed_positions.weight")
    cfg.positions = pos.shape[0] if pos is not None and tok is not None else 0
    cfg.pos_offset = int(_arg(args, "padding_idx", 1)) + 1
    cfg.emb_norm = any(stem + f"{name}.weight" in state for name in ("layernorm_embedding", "emb_layer_norm"))
    cfg.final_norm = stem + "layer_norm.weight" in state
    return cfg, attn


def from_fairseq(state, args, device=None):
    """A Model of a fairseq Linformer encoder from its state dict and its checkpoint's args."""
    if args is None:
        raise ArgumentError("a fairseq state dict needs its args (encoder_attention_heads, activation_fn, ...)")
    stem = _stem(state)
    cfg, attn = model_config(state, stem, args)
    skip = ("e", "f") if cfg.layers and attn[0].sharing == SHARE_LAYERWISE else ()  # the layers' aliases of it
    ctx = Context(device)
    try:
        return build_stack(ctx, cfg, attn, state, FAIRSEQ_LAYER, lambda i: f"{stem}layers.{i}.", FAIRSEQ_MODEL, stem,
                           skip)
    except BaseException:
        ctx.close()
        raise
