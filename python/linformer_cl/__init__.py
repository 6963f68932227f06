"""Linformer attention and Linformer models on any OpenCL device, through the C library linformer.

    import linformer_cl
    model = linformer_cl.load("model.safetensors", device="pocl")
    y = model(x)                       # x float32 [batch, n, d_model] -> y

devices() lists what device= takes; from_torch() builds a model from
lucidrains' modules or a fairseq state dict; linformer_cl.torch.Module wraps
a model as an nn.Module. The package speaks through the logger
"linformer_cl" (kernels about to compile, a driver that gave no platform).
`python -m linformer_cl.check` says what this Python sees of torch,
safetensors, linformer and the OpenCL devices.
"""
from ._context import Device, host_blas_library
from ._native import host_blas
from ._native import lib as _lib
from .errors import (ArgumentError, BlasError, BuildError, Error, FileError, FormatError, NoDeviceError,
                     OpenCLError, OutOfMemoryError, StateError, UnsupportedError)
from .from_torch import from_torch
from ._platforms import devices, unloaded_drivers
from .load import load
from .model import DeviceBytes, Model, ModelInfo, StageTime

__version__ = _lib.lf_version_string().decode()

__all__ = ["Device", "devices", "unloaded_drivers", "host_blas", "host_blas_library", "load", "from_torch", "Model", "ModelInfo", "DeviceBytes", "StageTime", "Error",
           "ArgumentError", "NoDeviceError", "OutOfMemoryError", "OpenCLError", "BuildError", "BlasError",
           "FileError", "FormatError", "StateError", "UnsupportedError"]
