"""python -m linformer_cl.check [--need MODULE ...]: what this Python sees of what the package uses, and how to
get what is missing.

It names the interpreter, then each optional module (torch for from_torch and
linformer_cl.torch, safetensors for linformer_cl.convert, lucidrains'
linformer for the README's example), then the OpenCL devices and each
installed driver that gave no platform. Where torch is missing but Debian's
python3-torch is installed for another interpreter, it says which one sees
it. Exits 1 when a module named by --need is missing or no device is found.
"""
import argparse
import importlib
import os
import sys
from typing import List, Optional

from ._platforms import devices, unloaded_drivers
from .errors import Error

OPTIONAL = {"torch": "from_torch(), linformer_cl.torch.Module",
            "safetensors": "python -m linformer_cl.convert (pip install safetensors)",
            "linformer": "lucidrains' modules for from_torch() (pip install --no-deps linformer==0.2.3)"}
DEBIAN_SITE = "/usr/lib/python3/dist-packages"
DEBIAN_PYTHON = "/usr/bin/python3"


def torch_hint() -> str:
    """Why torch is not seen, where Debian's PyTorch is installed for another interpreter."""
    if not os.path.isdir(os.path.join(DEBIAN_SITE, "torch")) or DEBIAN_SITE in sys.path:
        return "pip install torch, or Debian's python3-torch"
    return (f"Debian's PyTorch is in {DEBIAN_SITE}, which this Python ({sys.executable}, "
            f"{sys.version_info.major}.{sys.version_info.minor}) does not see: make the environment with "
            f"{DEBIAN_PYTHON} -m venv --system-site-packages")


def report(need: List[str]) -> int:
    """Prints what this Python sees; returns the exit status (1 where something needed is missing)."""
    status = 0
    print(f"python       {sys.executable} ({sys.version.split()[0]})")
    for name, use in OPTIONAL.items():
        try:
            module = importlib.import_module(name)
            print(f"{name:12} {getattr(module, '__version__', 'present')} ({os.path.dirname(module.__file__)})")
        except ImportError as e:
            status |= name in need
            print(f"{name:12} missing ({e}); needed for {use}" + (f": {torch_hint()}" if name == "torch" else ""))
    try:
        found = devices()
    except Error as e:
        found, status = [], 1
        print(f"devices      none: {e}")
    for d in found:
        print(f"device       {d.selector} {d.type} \"{d.name}\" on \"{d.platform}\"{' (default)' if d.default else ''}")
    for problem in unloaded_drivers():
        print(f"not loaded   {problem}")
    return status


def main(argv: Optional[List[str]] = None) -> int:
    """The command line: python -m linformer_cl.check [--need MODULE ...]."""
    parser = argparse.ArgumentParser(prog="python -m linformer_cl.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--need", nargs="*", default=[], choices=sorted(OPTIONAL), metavar="MODULE",
                        help=f"modules that must be present: {', '.join(OPTIONAL)}")
    return report(parser.parse_args(argv).need)


if __name__ == "__main__":
    sys.exit(main())
