"""Where each library weight sits in a PyTorch state dict: the file loaders' own table, read from the library.

A row is (library name, state-dict name, transposed, required): the name follows
a layer's prefix ("net.layers.{i}.") or the model's stem; a transposed tensor is
stored as the transpose of what the shaped setters take (lucidrains' proj_k is
E^T, [seq_len, k]). Nothing is transposed anywhere else: from_torch and
from_fairseq read these rows only.
"""
import ctypes
import functools

from . import _native as n
from ._context import call_with_errbuf

LAYER, MODEL = 0, 1  # lf_layout_part


@functools.lru_cache(maxsize=None)
def tensors(layout, part):
    """The rows of `layout`'s ("lucidrains", "fairseq", ...: lf_layout_tensors) layer or model part."""
    count = ctypes.c_size_t(0)
    call_with_errbuf(n.lib.lf_layout_tensors, layout.encode(), part, None, 0, ctypes.byref(count))
    rows = (n.LayoutTensor * max(count.value, 1))()
    call_with_errbuf(n.lib.lf_layout_tensors, layout.encode(), part, rows, count.value, ctypes.byref(count))
    return tuple((r.weight.decode(), r.name.decode(), bool(r.transposed), bool(r.required))
                 for r in rows[:count.value])
