"""devices() and the installed OpenCL drivers that gave no platform."""
import logging
from typing import List

from . import _context
from . import _native as n
from ._context import Device, text
from ._say import say_once


def unloaded_drivers() -> List[str]:
    """Each installed OpenCL driver that gave no platform, and why, as the library found it: "FILE.icd names
    LIBRARY, which does not load: REASON" (the dynamic loader's message), or an OCL_ICD_VENDORS naming no
    folder. The ICD loader drops such a driver without a word; [] when every one loaded."""
    return text(n.lib.lf_devices_unloaded()).splitlines()


def devices() -> List[Device]:
    """Every device of every platform; `default` marks the one device=None opens, `selector` is what device=
    takes to pick exactly it. An installed driver that gave no platform is logged as a warning (logger
    "linformer_cl") naming its library and why it did not load; unloaded_drivers() lists them."""
    try:
        return _context.devices()
    finally:
        for problem in unloaded_drivers():
            say_once(f"an installed OpenCL driver gave no platform: {problem}", logging.WARNING)
