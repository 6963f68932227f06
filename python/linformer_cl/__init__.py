"""Linformer attention and Linformer models on any OpenCL device, through the C library linformer.

    import linformer_cl
    model = linformer_cl.load("model.safetensors", device="pocl")
    y = model(x)                       # x float32 [batch, n, d_model] -> y
"""
from ._context import Device, devices
import warnings as _warnings

from ._native import host_blas
from ._native import lib as _lib
from .errors import (ArgumentError, BlasError, BuildError, Error, FileError, FormatError, NoDeviceError,
                     OpenCLError, OutOfMemoryError, StateError, UnsupportedError)
from .from_torch import from_torch
from .load import load
from .model import DeviceBytes, Model, ModelInfo, StageTime

__version__ = _lib.lf_version_string().decode()

# OpenBLAS takes OPENBLAS_CORETYPE only as it loads: the `linformer` program
# restarts itself with it, a Python process can only be told.
_core, _faster = host_blas()
if _faster:
    _warnings.warn(f"OpenBLAS runs its {_core} kernels on this CPU, which takes its {_faster} ones: "
                   f"OPENBLAS_CORETYPE={_faster} set before Python starts makes the host GEMMs several times faster",
                   RuntimeWarning, stacklevel=2)

__all__ = ["Device", "devices", "host_blas", "load", "from_torch", "Model", "ModelInfo", "DeviceBytes", "StageTime", "Error",
           "ArgumentError", "NoDeviceError", "OutOfMemoryError", "OpenCLError", "BuildError", "BlasError",
           "FileError", "FormatError", "StateError", "UnsupportedError"]
