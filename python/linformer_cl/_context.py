"""Devices and contexts: what device= picks, and the lf_context a model runs on."""
import ctypes
import numbers
import os
from dataclasses import dataclass

from . import _native as n
from .errors import ArgumentError, raise_for

ERRBUF = 4096
TYPES = {1: "gpu", 2: "cpu", 4: "accelerator", 8: "other"}
INT_MAX, UINT64_MAX = 2**31 - 1, 2**64 - 1


def c_string(name, value):
    """A str, bytes or path as the bytes C reads; ArgumentError where a NUL byte would cut it short there."""
    try:
        data = os.fsencode(value)
    except TypeError:
        raise ArgumentError(f"{name} must be a string, got {type(value).__name__}") from None
    if b"\0" in data:
        raise ArgumentError(f"{name} {value!r} holds a NUL byte, where C would end it")
    return data


def c_integer(name, value, low, high):
    """An integer checked against [low, high] before ctypes would wrap it into its C type."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ArgumentError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


def text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def call_with_errbuf(fn, *args):
    """Calls a function whose last two arguments are an error buffer; raises its status."""
    buf = ctypes.create_string_buffer(ERRBUF)
    raise_for(fn(*args, buf, ERRBUF), text(buf.value))


def selector_bytes(device):
    """device= as the library takes it: None = LINFORMER_DEVICE or the default."""
    if device is None:
        return None
    if isinstance(device, Device):
        device = device.selector
    if not isinstance(device, str):
        raise TypeError(f"device must be a selector string, a Device or None, not {type(device).__name__}")
    return c_string("device", device)


def host_blas_library():
    """(name, version) of the BLAS the host GEMM backend takes: ("OpenBLAS", None), or ("MKL", MKL's version
    string). LINFORMER_HOST_BLAS=openblas|mkl chooses; unset, MKL where the dynamic loader (or LINFORMER_MKL)
    finds it on an Intel CPU. Raises what creating a context would: ArgumentError for an unknown name,
    UnsupportedError for an MKL asked for, or named by LINFORMER_MKL, that does not load."""
    name, version = ctypes.c_char_p(), ctypes.c_char_p()
    call_with_errbuf(n.lib.lf_host_blas_library, ctypes.byref(name), ctypes.byref(version))
    return text(name.value), text(version.value) if version.value else None


@dataclass(frozen=True)
class Device:
    """One OpenCL device; `selector` picks exactly it wherever device= is taken."""
    selector: str
    platform: str
    name: str
    type: str
    default: bool
    vendor: str
    driver_version: str
    global_mem_bytes: int
    compute_units: int


def _device_infos():
    count = ctypes.c_size_t(0)
    call_with_errbuf(n.lib.lf_devices_list, None, 0, ctypes.byref(count))
    infos = (n.DeviceInfo * max(count.value, 1))()
    call_with_errbuf(n.lib.lf_devices_list, infos, count.value, ctypes.byref(count))
    return infos, count.value


def devices():
    """Every device of every platform; `default` marks the one device=None opens."""
    infos, count = _device_infos()
    if count == 0:
        return []
    chosen = ctypes.c_size_t(0)
    env = os.environ.get("LINFORMER_DEVICE")
    picked = n.lib.lf_devices_select(env.encode() if env else None, infos, count, ctypes.byref(chosen), None, 0)
    default = chosen.value if picked == 0 else None  # a LINFORMER_DEVICE that matches nothing marks none
    return [Device(selector=f"{d.platform_index}:{d.device_index}", platform=text(d.platform_name),
                   name=text(d.device_name), type=TYPES.get(d.type, "other"), default=i == default,
                   vendor=text(d.vendor), driver_version=text(d.driver_version),
                   global_mem_bytes=d.global_mem_bytes, compute_units=d.compute_units)
            for i, d in enumerate(infos[:count])]


class Context:
    """An lf_context: one per model, so models on different threads run at once."""

    def __init__(self, device=None):
        self.handle = n.handle()
        call_with_errbuf(n.lib.lf_context_create, selector_bytes(device), ctypes.byref(self.handle))
        info = n.DeviceInfo()
        n.lib.lf_context_device_info(self.handle, ctypes.byref(info))
        self.device = text(info.device_name)
        host = n.lib.lf_context_gemm_backend(self.handle) == b"host"
        self.gemms = text(n.lib.lf_context_host_blas(self.handle)) if host else "CLBlast"

    def check(self, code):
        """Raises the exception of a status returned by a call on this context."""
        if code:
            raise_for(code, text(n.lib.lf_context_last_error(self.handle)))

    def close(self):
        if self.handle:
            n.lib.lf_context_free(self.handle)
            self.handle = n.handle()
