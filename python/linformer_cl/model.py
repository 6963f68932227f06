"""Model: one attention layer or a stack of layers on a device, called on numpy arrays or torch tensors."""
import contextlib
import ctypes
import os
import threading
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from . import _native as n
from ._context import text
from .errors import ArgumentError, StateError

StageTime = namedtuple("StageTime", "stage ms commands flops bytes")
DeviceBytes = namedtuple("DeviceBytes", "weights workspace")


@dataclass(frozen=True)
class ModelInfo:
    kind: str            # "layer", "encoder", "token encoder", "language model"
    takes_tokens: bool   # int64 token ids [batch, n] in, else float32 [batch, n, d_model]
    d_model: int
    heads: int
    k: int               # the first layer's compressed length for a model
    max_seq_len: int
    vocab: int           # 0 when tokens do not come in
    layers: int
    out_width: int       # d_model, or vocab for a language model
    mode: str = "linformer"


# The C functions of each kind of handle.
LAYER = dict(free=n.lib.lf_attention_free, profile=n.lib.lf_attention_last_profile,
             device_bytes=n.lib.lf_attention_device_bytes)
STACK = dict(free=n.lib.lf_model_free, profile=n.lib.lf_model_last_profile, device_bytes=n.lib.lf_model_device_bytes)


def is_torch(x):
    """Whether x is a torch tensor; torch is not imported to tell."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def torch_values(name, t):
    """A torch tensor's values, detached on the CPU with any lazy negation or conjugation resolved (numpy()
    refuses those); ArgumentError naming it where it holds none (meta) or is not dense (sparse, nested)."""
    if getattr(t, "is_nested", False):  # torch's own reads of it fail ("NestedTensorImpl doesn't support sizes")
        raise ArgumentError(f"{name} is a nested tensor, which is not read: pad it into one dense tensor "
                            "(torch.nested.to_padded_tensor(t, 0.0)) and, for sequences of different lengths, "
                            "pass each one's length with lengths=")
    if t.is_meta:
        raise ArgumentError(f"{name} is on the meta device: it has a shape but no values")
    if str(t.layout) != "torch.strided":
        raise ArgumentError(f"{name} is a {t.layout} tensor, not a dense one (convert it with .to_dense())")
    return t.detach().cpu().resolve_conj().resolve_neg()


def _torch_in(x, name, want):
    """(numpy array, True) for a torch tensor, (x, False) otherwise; `want` says what `name` must be."""
    if not is_torch(x):
        return x, False
    t = torch_values(name, x)
    try:
        return t.numpy(), True
    except TypeError:  # bfloat16 and the other dtypes numpy has none of: refused as float16 is
        fix = " (convert it with .float())" if want == "float32" else ""
        raise ArgumentError(f"{name} must be {want}, got {t.dtype}{fix}") from None


def passed(x, was_torch):
    """What the caller passed, as a message names it: "torch.float64", "float64" for a numpy array, "a list
    (read as float64)" for anything else numpy reads."""
    dtype = np.asarray(x).dtype
    if was_torch:
        return f"torch.{dtype}"
    if isinstance(x, np.ndarray):
        return str(dtype)
    return f"a {type(x).__name__} (read as {dtype})"


def float32_fix(x, was_torch):
    """How to make x float32, in the words of what it is."""
    if was_torch:
        return "convert it with .float()"
    if isinstance(x, np.ndarray):
        return "convert it with .astype(numpy.float32)"
    return "pass numpy.asarray(x, dtype=numpy.float32) or torch.tensor(x)"


def _lengths(lengths, batch, n_rows):
    if lengths is None:
        return None
    arr = np.asarray(_torch_in(lengths, "lengths", "integers")[0])
    if arr.ndim != 1 or arr.shape[0] != batch or (arr.size and arr.dtype.kind not in "iu"):
        raise ArgumentError(f"lengths must be {batch} integers (one per sequence), got shape {arr.shape} "
                            f"of {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() > n_rows):
        raise ArgumentError(f"lengths must lie in [0, {n_rows}], got {arr.min()} to {arr.max()}")
    return np.ascontiguousarray(arr, dtype=np.int32)


class Model:
    """A layer or model on one device. model(x, lengths=None) runs a forward.

    x: float32 [batch, n, d_model], or integer token ids [batch, n] for token
    models (converted to int64), as numpy arrays or torch tensors (read on the
    CPU; meta and sparse ones are refused). Another float dtype, bfloat16
    included, is refused (no silent rounding); a non-contiguous array is
    copied; a read-only one is only read.
    A Model owns its handle of the library: it is neither copied nor pickled.
    """

    def __init__(self, context, handle, info, is_layer):
        self._ctx, self._handle, self.info = context, handle, info
        self._fns = LAYER if is_layer else STACK
        self._is_layer = is_layer
        self._lock = threading.RLock()  # close() waits for a forward in flight on another thread
        self._depth = 0  # calls in progress on the thread that holds the lock (see _guard)
        self._close_pending = False
        self._pid = os.getpid()

    @property
    def device(self) -> str:
        """The name of the OpenCL device the model runs on (its CL_DEVICE_NAME)."""
        return self._ctx.device

    @property
    def gemms(self) -> str:
        """Where the model's GEMMs run: "CLBlast" on the device, or the host BLAS ("OpenBLAS", "MKL") on a CPU
        device's buffers (LINFORMER_GEMM and LINFORMER_HOST_BLAS choose)."""
        return self._ctx.gemms

    @contextlib.contextmanager
    def _guard(self):
        """Holds the model for one call. The lock is re-entrant: a signal handler runs between two steps of the
        main thread, maybe inside a call, never inside the library, so a forward it makes runs then, and a close()
        it makes waits for the end of the call it interrupted. In a process forked from the one that made the
        model nothing is held: a forward in flight there at the fork holds the lock for good, and the library
        refuses the call at once (StateError)."""
        if self._pid != os.getpid():
            yield
            return
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._close_pending and not self._depth:
                    self._free()

    def _free(self):
        self._close_pending = False
        if self._handle:
            self._fns["free"](self._handle)
            self._handle = None
            self._ctx.close()

    def _live(self):
        if not self._handle:
            raise StateError("the model is closed")
        return self._handle

    def _input(self, given, was_torch=False):
        """x checked, then as the library reads it: every check comes before the copy, since a broadcast view
        may stand for more than memory holds."""
        x = np.asarray(given)
        info = self.info
        if info.takes_tokens:
            if x.ndim != 2 or x.dtype.kind not in "iu":
                raise ArgumentError(f"tokens must be integers [batch, n], got shape {x.shape} of "
                                    f"{passed(given, was_torch)}")
        elif x.ndim != 3 or x.shape[2] != info.d_model:
            raise ArgumentError(f"x must be [batch, n, {info.d_model}], got shape {x.shape}")
        elif x.dtype != np.float32:
            raise ArgumentError(f"x must be float32, got {passed(given, was_torch)} ({float32_fix(given, was_torch)})")
        batch, rows = x.shape[0], x.shape[1]
        if batch < 1 or rows < 1:
            raise ArgumentError(f"batch and n must be at least 1, got shape {x.shape}")
        if rows > info.max_seq_len:
            raise ArgumentError(f"n {rows} is above max_seq_len {info.max_seq_len}")
        if batch > 2**31 - 1:
            raise ArgumentError(f"batch {batch} is over the library's limit")
        if x.dtype == np.uint64 and int(x.max()) > 2**63 - 1:  # would wrap to a negative id
            raise ArgumentError(f"tokens hold {x.max()}, which does not fit the int64 ids the library takes")
        return np.ascontiguousarray(x, dtype=np.int64 if info.takes_tokens else np.float32)

    def __call__(self, x, lengths=None):
        x, was_torch = _torch_in(x, *(("tokens", "integers") if self.info.takes_tokens else ("x", "float32")))
        x = self._input(x, was_torch)
        batch, rows = x.shape[0], x.shape[1]
        lens = _lengths(lengths, batch, rows)
        y = np.empty((batch, rows, self.info.out_width), dtype=np.float32)
        lens_p = lens.ctypes.data_as(n.lengths_p) if lens is not None else None
        y_p = y.ctypes.data_as(n.floats)
        with self._guard():
            h = self._live()
            if self._is_layer:
                code = n.lib.lf_attention_forward(h, x.ctypes.data_as(n.floats), y_p, batch, rows, lens_p)
            elif self.info.takes_tokens:
                code = n.lib.lf_model_forward(h, None, x.ctypes.data_as(n.tokens_p), y_p, batch, rows, lens_p)
            else:
                code = n.lib.lf_model_forward(h, x.ctypes.data_as(n.floats), None, y_p, batch, rows, lens_p)
            self._ctx.check(code)
        if was_torch:
            import torch
            return torch.from_numpy(y)
        return y

    @property
    def device_bytes(self):
        """DeviceBytes(weights, workspace) held on the device now."""
        w, s = ctypes.c_size_t(), ctypes.c_size_t()
        with self._guard():
            self._ctx.check(self._fns["device_bytes"](self._live(), ctypes.byref(w), ctypes.byref(s)))
        return DeviceBytes(w.value, s.value)

    @property
    def last_profile(self):
        """Where the last forward's device time went: a list of StageTime(stage, ms, commands, flops, bytes), the
        last two the work of the stage's commands (lf_stage_time)."""
        stages, count = (n.StageTime * 64)(), ctypes.c_size_t()
        with self._guard():
            self._ctx.check(self._fns["profile"](self._live(), stages, 64, ctypes.byref(count)))
        return [StageTime(text(s.stage), s.ms, s.commands, s.flops, s.bytes) for s in stages[:min(count.value, 64)]]

    def close(self):
        """Frees the model and its context; calling it again does nothing. In a forked child it frees nothing
        (the library leaves the parent's objects alone there) and drops the handle."""
        with self._guard():
            if self._depth > 1:  # called in by a signal handler during another call of this thread
                self._close_pending = True
            else:
                self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce_ex__(self, protocol):
        # copy.copy, copy.deepcopy and pickle all ask this: a copy would share the C handle and free it twice.
        raise ArgumentError("a Model cannot be copied or pickled (it owns a handle of the library): "
                            "load or build the model again")

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()

    def __repr__(self):
        state = "closed" if not self._handle else self.device
        return f"<linformer_cl.Model {self.info.kind} d_model={self.info.d_model} on {state}>"
