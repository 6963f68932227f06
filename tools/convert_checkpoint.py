#!/usr/bin/env python3
"""Turns a PyTorch checkpoint into a safetensors file that `linformer run` loads.

The checkpoint is a state dict saved with torch.save (lucidrains' Linformer,
LinformerLM or LinformerSelfAttention), a dict holding one under "state_dict",
or a fairseq checkpoint (its "model" state dict and its "args" or "cfg").
What the shapes cannot say goes into the file's __metadata__: "heads",
"activation", "norm", and for fairseq "padding_idx". A value given on the
command line that contradicts the checkpoint's own config is an error.

Tensors that share storage (fairseq's layerwise compress_layer, which every
layer also names as its compress_k) are written once, under the shortest name.

    python3 tools/convert_checkpoint.py model.pt model.safetensors --heads 8
Needs torch and safetensors.
"""
import argparse
import pickle
import sys

import torch
from safetensors.torch import save_file

ACTIVATIONS = {"gelu": "gelu", "gelu_accurate": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_tanh": "gelu_tanh",
               "relu": "relu"}
DROPPED_SUFFIXES = (".version", "._float_tensor")  # fairseq's bookkeeping buffers, not weights


class ConvertError(Exception):
    pass


def fairseq_config(ckpt):
    """heads, activation, norm, padding_idx from a fairseq checkpoint's args or cfg (None where absent)."""
    args = ckpt.get("args")
    if args is not None:
        get = lambda key: getattr(args, key, None)
    else:
        cfg = ckpt.get("cfg") or {}
        model = cfg.get("model") if hasattr(cfg, "get") else None
        get = (lambda key: model.get(key)) if model is not None else (lambda key: None)
    before = get("encoder_normalize_before")
    return {"heads": get("encoder_attention_heads"), "activation": get("activation_fn"),
            "norm": None if before is None else ("pre" if before else "post"), "padding_idx": 1}


def read_checkpoint(path):
    """The state dict and the config the checkpoint itself states."""
    ckpt = torch.load(path, map_location="cpu")
    if isinstance(ckpt, torch.nn.Module):
        return ckpt.state_dict(), {}
    if not isinstance(ckpt, dict):
        raise ConvertError(f"{path}: holds a {type(ckpt).__name__}, expected a state dict or a checkpoint dict")
    if "model" in ckpt and isinstance(ckpt["model"], dict) and ("args" in ckpt or "cfg" in ckpt):
        return ckpt["model"], fairseq_config(ckpt)
    if "state_dict" in ckpt and isinstance(ckpt["state_dict"], dict):
        return ckpt["state_dict"], {}
    return ckpt, {}


def select(state, prefix):
    """The tensors under prefix (stripped), less fairseq's bookkeeping buffers."""
    out = {}
    for name, value in state.items():
        if not torch.is_tensor(value) or not name.startswith(prefix) or name.endswith(DROPPED_SUFFIXES):
            continue
        out[name[len(prefix):]] = value
    if not out:
        raise ConvertError(f"no tensors under prefix \"{prefix}\"")
    return out


def deduplicate(state):
    """One name per storage: the shortest (a shared module's own name)."""
    seen = {}
    for name in sorted(state, key=lambda n: (len(n), n)):
        t = state[name]
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.numel() and key in seen:
            continue
        seen[key] = name
    return {name: state[name].contiguous().clone() for name in seen.values()}


def merge(flag_name, given, from_checkpoint):
    if given is not None and from_checkpoint is not None and str(given) != str(from_checkpoint):
        raise ConvertError(f"--{flag_name} {given} was given but the checkpoint says {from_checkpoint}")
    return given if given is not None else from_checkpoint


def metadata(args, config, state):
    heads = merge("heads", args.heads, config.get("heads"))
    if heads is None:
        raise ConvertError("the head count is not in the checkpoint: give --heads")
    act = config.get("activation")
    if act is not None and act not in ACTIVATIONS:
        raise ConvertError(f"activation \"{act}\" of the checkpoint is not supported ({', '.join(ACTIVATIONS)})")
    act = merge("activation", args.activation, ACTIVATIONS.get(act, act) if act else None)
    norm = merge("norm", args.norm, config.get("norm"))
    meta = {"heads": str(int(heads)), "format": "linformer-model"}
    if act:
        meta["activation"] = act
    if norm:
        meta["norm"] = norm
    if config.get("padding_idx") is not None:
        meta["padding_idx"] = str(config["padding_idx"])
    q = [t for n, t in state.items() if n.endswith(("to_q.weight", "q_proj.weight"))]
    if q and q[0].shape[0] % int(heads):
        raise ConvertError(f"{q[0].shape[0]} query rows do not split into {heads} heads")
    return meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("output")
    p.add_argument("--heads", type=int)
    p.add_argument("--activation", choices=sorted(set(ACTIVATIONS.values())))
    p.add_argument("--norm", choices=["pre", "post"])
    p.add_argument("--prefix", default="", help="convert only the tensors under this prefix (stripped)")
    args = p.parse_args(argv)
    try:
        state, config = read_checkpoint(args.checkpoint)
        state = deduplicate(select(state, args.prefix))
        meta = metadata(args, config, state)
        save_file(state, args.output, metadata=meta)
    except (ConvertError, OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        print(f"convert_checkpoint: {e}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len(state)} tensors, {meta}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
