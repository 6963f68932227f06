"""Building a model in memory: tensors handed to the shaped setters by a layout's rows (layouts.py)."""
import contextlib
import ctypes

import numpy as np

from . import _native as n
from .errors import ArgumentError
from .load import stack_info
from .model import Model, is_torch, torch_values

# lf_sharing, lf_model_kind, lf_activation, lf_norm, lf_position values of include/linformer.h
SHARE_HEADWISE, SHARE_KV, SHARE_LAYERWISE = 1, 2, 3
ENCODER, TOKEN_ENCODER, LM = 1, 2, 3
GELU, GELU_TANH, RELU = 1, 2, 3
NORM_PRE, NORM_POST = 1, 2
POSITION_INPUT = 1


def torch_tensor(name, value):
    """value, a torch tensor; ArgumentError naming it otherwise (a numpy array among a state dict's tensors)."""
    if not is_torch(value):
        raise ArgumentError(f"tensor \"{name}\" is not a torch tensor (got {type(value).__name__})")
    return value


def _array(name, tensor, transposed):
    """A float32 C-ordered copy of a tensor, in the layout the library takes."""
    t = torch_values(f"tensor \"{name}\"", torch_tensor(name, tensor))
    if not t.is_floating_point():
        raise ArgumentError(f"tensor \"{name}\" is {t.dtype}, not a floating-point tensor")
    a = t.float().numpy()
    return np.ascontiguousarray(a.T if transposed else a)


def set_weights(ctx, setter, table, state, prefix, skip=()):
    """Hands every tensor of `table` (layouts.tensors' rows) found under prefix (less the names in skip) to
    setter(name, dims, ndims, data)."""
    for name, tensor_name, transposed, _ in table:
        full = prefix + tensor_name
        if full not in state or name in skip:
            continue  # an optional tensor (a bias); a missing required one is named by the library
        a = _array(full, state[full], transposed)
        dims = (ctypes.c_size_t * max(a.ndim, 1))(*a.shape)
        try:
            ctx.check(setter(name.encode(), dims, a.ndim, a.ctypes.data_as(n.floats)))
        except ArgumentError as e:
            raise ArgumentError(f"tensor \"{full}\" {tuple(a.shape)}: {e}") from None


@contextlib.contextmanager
def closed_on_error(model):
    """Yields model; closes it (its handle and context) when the block raises."""
    try:
        yield model
    except BaseException:
        model.close()
        raise


def build_stack(ctx, cfg, attn, state, layer_table, layer_prefix, model_table, model_prefix, skip=()):
    """A Model from an lf_model_config, its layers' attention configs and a state dict read by the tables.

    layer_prefix(i) is where layer i's tensors are; the model's own are under model_prefix.
    """
    handle = n.handle()
    ctx.check(n.lib.lf_model_create(ctx.handle, ctypes.byref(cfg), attn, ctypes.byref(handle)))
    with closed_on_error(Model(ctx, handle, None, is_layer=False)) as model:
        for i in range(-1, cfg.layers):
            table, prefix = (model_table, model_prefix) if i < 0 else (layer_table, layer_prefix(i))
            setter = lambda name, dims, ndims, data, i=i: n.lib.lf_model_set_weight_shaped(handle, i, name, dims,
                                                                                           ndims, data)
            set_weights(ctx, setter, table, state, prefix, skip)
        model.info = stack_info(ctx, handle)
    return model
