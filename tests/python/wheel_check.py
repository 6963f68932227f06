"""Run by scripts/check-wheel.sh in a fresh environment holding the repaired wheel: a model on each CPU runtime
against PyTorch's output, with CLBlast, OpenBLAS, cJSON and the ICD loader the wheel's own copies.

python wheel_check.py DATA_DIR: exits 1 naming what failed.
"""
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file

import linformer_cl

BUNDLED = ("libclblast", "libopenblas", "libcjson", "libOpenCL", "liblapack", "libgfortran")


SYSTEM = ("/usr/", "/lib/", "/lib64/")


def system_copies(paths):
    """The paths of a bundled library in a system folder."""
    return [p for p in paths if any(name in os.path.basename(p) for name in BUNDLED) and p.startswith(SYSTEM)]


def main(data):
    package = os.path.dirname(linformer_cl.__file__)
    failures = []
    if not package.startswith(sys.prefix) or "linformer_cl.libs" not in os.listdir(os.path.dirname(package)):
        failures.append(f"linformer_cl in {package} has no linformer_cl.libs beside it in {sys.prefix}: "
                        "the wheel carries no libraries")
    ldd = subprocess.run(["ldd", os.path.join(package, "liblinformer.so")], capture_output=True, text=True).stdout
    resolved = [line.split("=>")[1].split()[0] for line in ldd.splitlines() if "=>" in line and "/" in line]
    failures += [f"ldd: {path}" for path in system_copies(resolved)]
    failures += [f"ldd: {line.strip()}" for line in ldd.splitlines() if "not found" in line]
    base = os.path.join(data, "pytorch", "plain")
    io = load_file(base + ".io.safetensors")
    platforms = {d.platform for d in linformer_cl.devices()}
    runtimes = ["pocl"] + (["Intel(R) OpenCL"] if "Intel(R) OpenCL" in platforms else [])
    for device in runtimes:
        with linformer_cl.load(base + ".model.safetensors", device=device) as model:
            y = model(io["x"], lengths=io.get("lengths"))
        error = np.linalg.norm(y.astype(np.float64) - io["y"]) / np.linalg.norm(io["y"])
        print(f"wheel_check: {device}: relative error {error:.1e} against PyTorch")
        if not error <= 1e-4:
            failures.append(f"{device}: relative error {error} against PyTorch")
    with open("/proc/self/maps") as f:
        mapped = sorted({line.split()[-1] for line in f if "/" in line})
    failures += [f"mapped: {path}" for path in system_copies(mapped)]
    tool = subprocess.run([os.path.join(os.path.dirname(sys.executable), "linformer"), "devices"],
                          capture_output=True, text=True)
    if tool.returncode != 0:
        failures.append(f"linformer devices: {tool.stderr.strip()}")
    for failure in failures:
        print(f"wheel_check: {failure}", file=sys.stderr)
    print(f"wheel_check: {'FAILED' if failures else 'ok'}: {len(runtimes)} runtime(s), the wheel's libraries only")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
