"""The context a model is built on: its kernel cache folder (cache_dir=), and a word before kernels compile."""
import ctypes
import os
from typing import Optional, Union

from . import _native as n
from ._context import Context, c_string, text
from ._say import say_once

PathLike = Union[str, bytes, "os.PathLike[str]"]


def _cache_state(cache_dir: Optional[bytes]):
    """(folder, why not cached): the folder kernels are cached in and None, or None and why they are not."""
    if cache_dir is None:
        buf = ctypes.create_string_buffer(4096)
        if n.lib.lf_kernel_cache_dir(buf, len(buf)) != 0:
            return None, text(buf.value)
        return text(buf.value), None
    if cache_dir == b"off":
        return None, 'cache_dir is "off"'
    return os.fsdecode(cache_dir), None


def _has_entries(folder: str) -> bool:
    try:
        return any(not name.startswith(".") for name in os.listdir(folder))
    except OSError:
        return False


def open_context(device, cache_dir: Optional[PathLike] = None) -> Context:
    """A Context on `device` caching its kernels in cache_dir (None: LINFORMER_CACHE_DIR or ~/.cache/linformer;
    "off": none), after saying, through logging, that kernels are about to be compiled where none is cached."""
    chosen = None if cache_dir is None else c_string("cache_dir", cache_dir)
    if chosen == b"":
        from .errors import ArgumentError
        raise ArgumentError("cache_dir is empty (None: the environment's folder, \"off\": no cache)")
    ctx = Context(device)
    try:
        if chosen is not None:
            ctx.check(n.lib.lf_context_set_cache_dir(ctx.handle, chosen))
        folder, why = _cache_state(chosen)
        if why is not None:
            say_once(f"compiling the kernels on {ctx.device} at every load: they are not cached ({why})")
        elif not _has_entries(folder):
            say_once(f"compiling the kernels on {ctx.device} for the first forward (2 to 10 s on a CPU, once); "
                     f"they are cached in {folder} for the next runs (cache_dir= or LINFORMER_CACHE_DIR moves it)")
    except BaseException:
        ctx.close()
        raise
    return ctx
