"""linformer_cl.torch.Module: a Model as an nn.Module, for eval-mode drop-in use in PyTorch code.

The library runs inference only: the module refuses train mode, and a
backward pass through it raises instead of returning made-up gradients.
"""
import torch
from torch import nn

from .errors import ArgumentError
from .from_torch import from_torch
from .load import load

INFERENCE_ONLY = ("linformer_cl runs inference only: no gradient flows through it; train the PyTorch module "
                  "and build the model from it again")


class _Forward(torch.autograd.Function):
    """Lets a forward on a tensor that requires grad run, and its backward fail with a clear message."""

    @staticmethod
    def forward(ctx, x, model, lengths):
        return model(x.detach(), lengths)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(INFERENCE_ONLY)


class Module(nn.Module):
    """Wraps a linformer_cl Model; forward(x, lengths=None) returns a tensor on x's device."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.training = False

    @classmethod
    def from_torch(cls, module, device=None):
        return cls(from_torch(module, device=device))

    @classmethod
    def load(cls, path, device=None, **options):
        return cls(load(path, device=device, **options))

    def train(self, mode=True):
        if mode:
            raise RuntimeError(INFERENCE_ONLY + " (train mode is refused)")
        return super().train(False)

    def forward(self, x, lengths=None):
        if self.training:
            raise RuntimeError(INFERENCE_ONLY + " (train mode is refused)")
        if not torch.is_tensor(x):
            raise ArgumentError(f"x must be a torch tensor, got {type(x).__name__} (a Model takes numpy arrays: "
                                "call module.model)")
        y = _Forward.apply(x, self.model, lengths) if torch.is_grad_enabled() and x.requires_grad \
            else self.model(x, lengths)
        return y.to(x.device)

    def close(self):
        self.model.close()
