"""Shared pieces of the package's tests: the two CPU runtimes and the fixture files.

Every device test runs on PoCL and on Intel's OpenCL CPU runtime, which the
ICD loader sees through build/opencl-vendors (scripts/setup.sh installs it).
"""
import os

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
VENDORS = os.path.join(ROOT, "build", "opencl-vendors")
if "OCL_ICD_VENDORS" not in os.environ and os.path.isdir(VENDORS):
    os.environ["OCL_ICD_VENDORS"] = VENDORS  # read once, when the first context is created
# PyTorch first, as its users import it: Debian's loads the system's older
# libtbb, beside which Intel's runtime must load its own oneTBB.
try:
    import torch  # noqa: F401
except ImportError:
    pass

# Intel's runtime unless it is absent or skipped, as tests/CMakeLists.txt decides.
INTEL = os.path.exists(os.path.join(os.environ["OCL_ICD_VENDORS"], "intel-cpu.icd")) \
    if os.environ.get("OCL_ICD_VENDORS") else False
# The linformer program: LF_TOOL_PATH, else the build's; None when neither exists.
TOOL = os.environ.get("LF_TOOL_PATH") or os.path.join(ROOT, "build", "linformer")
TOOL = TOOL if os.path.exists(TOOL) else None

RUNTIMES = ["pocl"] + (["intel"] if INTEL and os.environ.get("LINFORMER_SKIP_INTEL") != "1" else [])


@pytest.fixture(params=RUNTIMES)
def device(request):
    return request.param


def relative_error(y, want):
    y, want = np.asarray(y, dtype=np.float64), np.asarray(want, dtype=np.float64)
    den = np.linalg.norm(want)
    return np.linalg.norm(y - want) / (den if den > 0 else 1.0)


def fixture_files():
    """(model file, io file) of every fixture under tests/data."""
    pairs = []
    for folder in ("pytorch", "models"):
        for name in sorted(os.listdir(os.path.join(DATA, folder))):
            if name.endswith(".model.safetensors"):
                base = os.path.join(DATA, folder, name[:-len(".model.safetensors")])
                pairs.append((base + ".model.safetensors", base + ".io.safetensors"))
    return pairs
