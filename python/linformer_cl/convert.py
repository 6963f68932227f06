"""Turns a PyTorch checkpoint into a safetensors file that `linformer run` and linformer_cl.load() read.

    python -m linformer_cl.convert model.pt model.safetensors --heads 8

The checkpoint is a state dict saved with torch.save (lucidrains' Linformer,
LinformerLM or LinformerSelfAttention), a dict holding one under
"state_dict", or a fairseq checkpoint (its "model" state dict and its "args"
or "cfg"). It is read without running its pickle's code (checkpoint.py).
What the shapes cannot say goes into the file's __metadata__: "heads",
"activation", "norm", and for fairseq "padding_idx". A value given on the
command line that contradicts the checkpoint's own config is an error.

Every tensor keeps its name, tied ones (a LinformerLM's token_emb and
to_logits, fairseq's embed_tokens and lm_head) included; only fairseq's
layerwise compress_layer, which every layer also names as its compress_k, is
written once. The output is written whole or not at all, never over the input:
as the linformer program writes its outputs, the data goes to a temporary
beside the file, is synced and renamed over it; a symlink's target is
replaced, not the link; an existing file keeps its mode, a new one gets 0666
less the umask. An output that exists and is not a regular file (a FIFO, a
device, a folder) is refused (the program writes into such files in place).
A checkpoint that is not a regular file is refused before it is opened.
SIGINT or SIGTERM during a conversion removes the temporary and ends it with
128 plus the signal's number, the output left as it was (SIGKILL leaves the
temporary, never a partial output).
Needs torch and safetensors.
"""
import argparse
import contextlib
import errno
import os
import pickle
import signal
import stat
import sys
import tempfile
import threading

from .checkpoint import file_kind
from .errors import Error, FileError

ACTIVATIONS = {"gelu": "gelu", "gelu_accurate": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_tanh": "gelu_tanh",
               "relu": "relu"}
DROPPED_SUFFIXES = (".version", "._float_tensor")  # fairseq's bookkeeping buffers, not weights
LAYERWISE = "compress_layer.weight"
LAYERWISE_ALIASES = ("self_attn.compress_k.weight", "self_attn.compress_v.weight")
READABLE = ("float32", "float16", "bfloat16", "float64", "int32", "int64")  # what the library reads
STOPS = (signal.SIGINT, signal.SIGTERM)  # what ends a conversion with its temporary removed
TEMP_NAME_BYTES = 200  # of the output's name in its temporary's, which takes ".", "." and 8 more in 255


class ConvertError(Exception):
    pass


class Interrupted(BaseException):
    """SIGINT or SIGTERM during the command, raised where the conversion stands (before the output's rename)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
    from . import checkpoint
    try:
        ckpt = checkpoint.read(path)
    except checkpoint.UnsafeCheckpoint as e:
        raise ConvertError(f"{path}: {e}") from None
    if not isinstance(ckpt, dict):
        raise ConvertError(f"{path}: holds a {type(ckpt).__name__}, expected a state dict or a checkpoint dict")
    if "model" in ckpt and isinstance(ckpt["model"], dict) and ("args" in ckpt or "cfg" in ckpt):
        return ckpt["model"], fairseq_config(ckpt)
    if "state_dict" in ckpt and isinstance(ckpt["state_dict"], dict):
        return ckpt["state_dict"], {}
    return ckpt, {}


def select(state, prefix):
    """The tensors under prefix (stripped), less fairseq's bookkeeping buffers; every name checked."""
    import torch
    out = {}
    for name, value in state.items():
        if not isinstance(name, str):
            raise ConvertError(f"the state dict has a key that is not a string: {name!r}")
        if not torch.is_tensor(value) or not name.startswith(prefix) or name.endswith(DROPPED_SUFFIXES):
            continue
        short = name[len(prefix):]
        try:
            short.encode("utf-8")
        except UnicodeEncodeError:
            raise ConvertError(f"tensor {name!r} is not text that UTF-8 can hold (a lone surrogate), as a "
                               "safetensors name must be") from None
        if "\0" in short:  # the library refuses such a file: refused here, before it is written
            raise ConvertError(f"tensor {name!r} holds a NUL character, which no name the library reads may hold")
        if not short:
            raise ConvertError(f"tensor \"{name}\" has no name left once the prefix \"{prefix}\" is taken off")
        if short == "__metadata__":
            raise ConvertError("a tensor is named \"__metadata__\", the name safetensors keeps for its metadata")
        if str(value.dtype).replace("torch.", "") not in READABLE:
            raise ConvertError(f"tensor \"{name}\" is {value.dtype}; the library reads {', '.join(READABLE)}")
        out[short] = value
    if not out:
        raise ConvertError(f"no tensors under prefix \"{prefix}\"")
    return out


def drop_layerwise_aliases(state):
    """Every tensor as its own copy, less the per-layer names of fairseq's one layerwise projection."""
    shared = {state[n].data_ptr() for n in state if n.endswith(LAYERWISE) and state[n].numel()}
    return {name: t.contiguous().clone() for name, t in state.items()
            if not (name.endswith(LAYERWISE_ALIASES) and t.numel() and t.data_ptr() in shared)}


def merge(flag_name, given, from_checkpoint):
    if given is not None and from_checkpoint is not None and str(given) != str(from_checkpoint):
        raise ConvertError(f"--{flag_name} {given} was given but the checkpoint says {from_checkpoint}")
    return given if given is not None else from_checkpoint


def metadata(args, config, state):
    heads = merge("heads", args.heads, config.get("heads"))
    if heads is None:
        raise ConvertError("the head count is not in the checkpoint: give --heads")
    if int(heads) < 1:
        raise ConvertError(f"the checkpoint's head count {heads} is not positive")
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


def _target(path):
    """What writing `path` replaces, and its stat (None for a new file), as the linformer program decides
    (toolkit/output_file.c): a symlink's target, never the link; a regular file only where it may be
    written. What is not a regular file (a FIFO, a device, a folder) is refused: simpler than writing into it
    in place as the program does, and a safetensors file is no stream for one."""
    if not path:
        raise FileError("the output path is empty")
    if path.endswith(os.sep):
        raise FileError(f"cannot write {path}: it ends with \"{os.sep}\", as a folder's name does: name the file")
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        if target != path:
            raise FileError(f"cannot write {path}: it is a symbolic link to a missing file") from None
        return target, None
    except NotADirectoryError as e:
        raise _no_file_in_folder(path, target, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise FileError(f"cannot write {path}: it is {file_kind(st.st_mode)}, not a regular file")
    if not os.access(target, os.W_OK):
        read_only = os.statvfs(target).f_flag & os.ST_RDONLY  # which root meets too, unlike a mode
        raise FileError(f"cannot write {path}: {os.strerror(errno.EROFS if read_only else errno.EACCES)}")
    return target, st


def _no_file_in_folder(path, target, e):
    """The error of a folder that cannot take the output: it names the folder, not a temporary's name."""
    return FileError(f"cannot write {path}: {e.strerror} (creating a file in \"{os.path.dirname(os.path.abspath(target))}\")")


def _new_file_mode():
    mask = os.umask(0)  # the only way to read it: put back at once
    os.umask(mask)
    return 0o666 & ~mask


def _temp_prefix(name):
    """The start of the temporary's name beside the file `name`: short enough for mkstemp's 8 characters."""
    while len(os.fsencode(name)) > TEMP_NAME_BYTES:
        name = name[:-1]
    return f".{name}."


def write(state, path, meta, before_rename=None):
    """Writes the file whole beside what it replaces, syncs it, then renames it there (before_rename is called
    just before); on any failure the temporary is removed and the old file is left as it was. The old file's
    mode (and owner, where that is allowed) is kept; a new file gets 0666 less the umask."""
    from safetensors.torch import save  # not save_file, which puts a new file of mode 0600 at its path
    target, old = _target(path)
    folder, name = os.path.split(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(name), dir=folder)
    except OSError as e:
        raise _no_file_in_folder(path, target, e) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, stat.S_IMODE(old.st_mode) if old else _new_file_mode())
            if old:
                with contextlib.suppress(OSError):  # allowed only where the owner may be given away (root)
                    os.fchown(fd, old.st_uid, old.st_gid)
            f.write(save(state, metadata=meta))
            f.flush()
            os.fsync(fd)
        if before_rename:
            before_rename()
        os.replace(tmp, target)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):  # a full disk, a quota: named with the output, not the temporary
            raise FileError(f"cannot write {path}: {e.strerror or e}") from None
        raise


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m linformer_cl.convert", description=__doc__.split("\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("output")
    p.add_argument("--heads", type=positive)
    p.add_argument("--activation", choices=sorted(set(ACTIVATIONS.values())))
    p.add_argument("--norm", choices=["pre", "post"])
    p.add_argument("--prefix", default="", help="convert only the tensors under this prefix (stripped)")
    return p.parse_args(argv)


def _interrupt(signum, frame):
    raise Interrupted(signum)


def _hold_stops():
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)


@contextlib.contextmanager
def _stoppable():
    """In the main thread: SIGINT and SIGTERM raise Interrupted until the output is renamed into place, after
    which they wait; the handlers and the signal mask are put back at the end (a signal that waited then acts
    as it would have)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    handlers = {s: signal.signal(s, _interrupt) for s in STOPS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        yield _hold_stops
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def convert(args, before_rename=None):
    if os.path.exists(args.output) and os.path.exists(args.checkpoint) and \
            os.path.samefile(args.checkpoint, args.output):
        raise ConvertError(f"{args.output} is the checkpoint itself: give another output")
    _target(args.output)  # an output that cannot be written is refused before the checkpoint is read
    state, config = read_checkpoint(args.checkpoint)
    state = drop_layerwise_aliases(select(state, args.prefix))
    meta = metadata(args, config, state)
    write(state, args.output, meta, before_rename)
    return state, meta


def main(argv=None):
    args = parse(argv)
    try:
        import safetensors.torch  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"linformer_cl.convert: needs torch and safetensors ({e})", file=sys.stderr)
        return 1
    try:
        with _stoppable() as before_rename:
            state, meta = convert(args, before_rename)
    except Interrupted as e:
        print(f"linformer_cl.convert: interrupted ({e}): {args.output} was not written", file=sys.stderr)
        return 128 + e.signum
    except (ConvertError, Error, OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as e:
        print(f"linformer_cl.convert: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"linformer_cl.convert: out of memory converting {args.checkpoint}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len(state)} tensors, {meta}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
