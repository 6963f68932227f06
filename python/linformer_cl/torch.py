"""linformer_cl.torch.Module: a Model as an nn.Module, for drop-in inference in PyTorch code.

The library runs inference only. As a frozen submodule of PyTorch does, the
module follows its parent into train mode (`parent.train()`) and still runs
inference there: the same output as in eval mode (the library has no
dropout), said once through logging. A backward pass through it raises
instead of returning made-up gradients, and tracing it (torch.jit.trace,
ONNX export) is refused: a trace would record its output as a constant.
"""
import logging
from typing import Any, Optional

import torch
from torch import nn

from ._kernels import PathLike
from ._say import say_once
from .errors import ArgumentError
from .from_torch import from_torch
from .load import DeviceArg, load
from .model import Model

INFERENCE_ONLY = ("linformer_cl runs inference only: no gradient flows through it; train the PyTorch module "
                  "and build the model from it again")
NOT_TRACEABLE = ("linformer_cl.torch.Module cannot be traced (torch.jit.trace, ONNX export): its forward runs in "
                 "the library, which a trace would record as one constant output for every later input; "
                 "call the module itself")


class _Forward(torch.autograd.Function):
    """Lets a forward on a tensor that requires grad run, and its backward fail with a clear message."""

    @staticmethod
    def forward(ctx, x, model, lengths):
        return model(x.detach(), lengths)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(INFERENCE_ONLY)


class Module(nn.Module):
    """A linformer_cl Model as an nn.Module: forward(x, lengths=None) returns a float32 tensor on x's device.

    x: float32 [batch, n, d_model] (integer token ids [batch, n] for a token
    model); lengths: None, or one integer a sequence. `module.model` is the
    Model (numpy arrays in and out). It holds no parameters; `close()` or
    `with` frees the model.
    """

    def __init__(self, model: Model):
        super().__init__()
        if not isinstance(model, Model):
            raise ArgumentError(f"model must be a linformer_cl Model, got {type(model).__name__} "
                                "(Module.from_torch builds one from a PyTorch module)")
        self.model = model
        self.training = False

    @classmethod
    def from_torch(cls, module: Any, device: DeviceArg = None, *, args: Any = None,
                   cache_dir: Optional[PathLike] = None) -> "Module":
        """The Module of linformer_cl.from_torch(module, device, args=, cache_dir=): lucidrains' modules, or
        a fairseq Linformer encoder's state dict with its checkpoint's args."""
        return cls(from_torch(module, device=device, args=args, cache_dir=cache_dir))

    @classmethod
    def load(cls, path: PathLike, device: DeviceArg = None, **options: Any) -> "Module":
        """The Module of linformer_cl.load(path, device, **options)."""
        return cls(load(path, device=device, **options))

    def train(self, mode: bool = True) -> "Module":
        """Sets the train flag, as nn.Module does; in train mode the module still runs inference."""
        if mode:
            say_once("linformer_cl.torch.Module runs inference in train mode too (the same output as in eval "
                     "mode); " + INFERENCE_ONLY, logging.INFO)
        return super().train(mode)

    def forward(self, x: torch.Tensor, lengths: Optional[Any] = None) -> torch.Tensor:
        """The model's output for x (see the class), on x's device."""
        if torch.jit.is_tracing():
            raise RuntimeError(NOT_TRACEABLE)
        if not torch.is_tensor(x):
            raise ArgumentError(f"x must be a torch tensor, got {type(x).__name__} (a Model takes numpy arrays: "
                                "call module.model)")
        y = _Forward.apply(x, self.model, lengths) if torch.is_grad_enabled() and x.requires_grad \
            else self.model(x, lengths)
        return y.to(x.device)

    def extra_repr(self) -> str:
        return repr(self.model)

    def close(self) -> None:
        """Frees the model on its device; a later forward raises StateError."""
        self.model.close()

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
