"""The package as a PyTorch user meets it: torch imported first, a driver that does not load, the messages of a
wrong dtype, the nn.Module in a model being trained, a word before kernels compile, and help()."""
import argparse
import inspect
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
linformer = pytest.importorskip("linformer")

import linformer_cl  # noqa: E402
from linformer_cl.torch import Module  # noqa: E402
from conftest import INTEL, TOOL, relative_error  # noqa: E402
from test_from_fairseq import fairseq_state  # noqa: E402


def python(code, **env):
    """Runs code in a fresh interpreter (the ICD loader reads its drivers once a process)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


@pytest.mark.skipif(not INTEL, reason="Intel's OpenCL runtime is not installed")
def test_intel_runtime_loads_and_computes_after_import_torch():
    r = python("""
        import torch, linformer
        import linformer_cl
        print([d.platform for d in linformer_cl.devices()])
        torch.manual_seed(0)
        m = linformer.LinformerSelfAttention(dim=64, seq_len=128, k=32, heads=4).eval()
        x = torch.randn(2, 128, 64)
        with linformer_cl.from_torch(m, device="Intel(R) OpenCL") as lf, torch.no_grad():
            want = m(x)
            print(float((lf(x) - want).norm() / want.norm()))
        """)
    assert r.returncode == 0, r.stderr
    platforms, error = r.stdout.splitlines()
    assert "Intel(R) OpenCL" in platforms and "Portable Computing Language" in platforms
    assert float(error) <= 1e-5


SYSTEM_POCL = "/etc/OpenCL/vendors/pocl.icd"


def broken_vendors(tmp_path):
    """An ICD folder holding PoCL's driver and one whose library is no shared object."""
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    with open(SYSTEM_POCL) as f:
        (vendors / "pocl.icd").write_text(f.read())
    lib = tmp_path / "libbroken.so"
    lib.write_text("not a shared object")
    (vendors / "broken.icd").write_text(f"{lib}\n")
    return vendors, lib


@pytest.mark.skipif(not os.path.exists(SYSTEM_POCL), reason="PoCL's driver is not installed system-wide")
def test_a_driver_that_does_not_load_is_named_with_the_reason(tmp_path):
    vendors, lib = broken_vendors(tmp_path)
    r = python("""
        import linformer_cl
        print([d.platform for d in linformer_cl.devices()])
        print(linformer_cl.unloaded_drivers())
        try:
            linformer_cl.load("nothing", device="no such device")
        except linformer_cl.Error as e:
            print(e)
        """, OCL_ICD_VENDORS=str(vendors))
    assert r.returncode == 0, r.stderr
    listed, unloaded, message = r.stdout.splitlines()[:3]
    assert "Portable Computing Language" in listed
    assert "broken.icd" in unloaded and str(lib) in unloaded and "does not load" in unloaded
    assert "broken.icd" in r.stderr and "gave no platform" in r.stderr  # the warning of devices()
    if TOOL:
        out = subprocess.run([TOOL, "devices"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "OCL_ICD_VENDORS": str(vendors)}).stdout
        assert "installed drivers that gave no platform" in out and f"{lib}, which does not load" in out


def test_an_ocl_icd_vendors_folder_that_does_not_exist_is_named(tmp_path):
    missing = tmp_path / "no-such-folder"
    r = python("""
        import linformer_cl
        try:
            linformer_cl.devices()
        except linformer_cl.NoDeviceError as e:
            print(e)
        """, OCL_ICD_VENDORS=str(missing))
    assert r.returncode == 0, r.stderr
    assert "no OpenCL platform found" in r.stdout
    assert f'OCL_ICD_VENDORS is "{missing}", which does not exist' in r.stdout


@pytest.fixture
def attention(device):
    torch.manual_seed(3)
    lucid = linformer.LinformerSelfAttention(dim=16, seq_len=8, k=4, heads=2).eval()
    with linformer_cl.from_torch(lucid, device=device) as model:
        yield lucid, model


def test_a_wrong_dtype_is_named_in_the_words_of_what_was_passed(attention):
    _, model = attention
    x = torch.randn(1, 8, 16)
    with pytest.raises(linformer_cl.ArgumentError, match=r"got torch\.float64 \(convert it with \.float\(\)\)"):
        model(x.double())
    with pytest.raises(linformer_cl.ArgumentError, match=r"got a list \(read as float64\)"):
        model(x.tolist())
    with pytest.raises(linformer_cl.ArgumentError, match=r"got float64 \(convert it with \.astype\(numpy\.float32\)\)"):
        model(x.double().numpy())
    with pytest.raises(linformer_cl.ArgumentError, match=r"torch\.bfloat16 \(convert it with \.float\(\)\)"):
        model(x.bfloat16())


def test_a_frozen_backbone_under_a_trained_head(device):
    torch.manual_seed(5)
    lucid = linformer.Linformer(dim=12, seq_len=16, depth=2, k=4, heads=2).eval()
    with Module.from_torch(lucid, device=device) as backbone:
        head = torch.nn.Linear(12, 3)
        net = torch.nn.Sequential(backbone, head)
        net.train()  # the usual loop: the whole model in train mode, the backbone frozen
        assert backbone.training
        x, target = torch.randn(4, 16, 12), torch.randn(4, 16, 3)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        loss = torch.nn.functional.mse_loss(net(x), target)
        loss.backward()
        optimizer.step()
        assert head.weight.grad is not None
        with torch.no_grad():
            assert relative_error(backbone(x).numpy(), lucid(x).numpy()) <= 1e-5  # inference, in train mode too
        assert "Model" in repr(backbone) and "d_model=12" in repr(backbone)
    with pytest.raises(linformer_cl.StateError, match="closed"):
        backbone(x)


def test_tracing_is_refused(attention):
    module = Module(attention[1])
    with pytest.raises(RuntimeError, match="cannot be traced"):
        torch.jit.trace(module, torch.randn(1, 8, 16))


def test_fairseq_args_are_taken_by_the_module(device):
    state = fairseq_state()
    args = argparse.Namespace(encoder_attention_heads=2, activation_fn="gelu_accurate", encoder_normalize_before=False)
    x = np.random.default_rng(4).standard_normal((2, 9, 8)).astype(np.float32)
    with Module.from_torch(state, device=device, args=args) as module, \
            linformer_cl.from_torch(state, device=device, args=args) as model:
        np.testing.assert_array_equal(module(torch.from_numpy(x)).numpy(), model(x))


def test_compiling_is_said_and_cache_dir_is_taken(tmp_path, device, caplog):
    folder = tmp_path / "kernels"
    path = os.path.join(os.path.dirname(__file__), "..", "data", "pytorch", "plain.model.safetensors")
    with caplog.at_level(logging.INFO, logger="linformer_cl"):
        with linformer_cl.load(path, device=device, cache_dir=folder) as model:
            model(np.zeros((1, 4, model.info.d_model), np.float32))
    said = [r.getMessage() for r in caplog.records if r.name == "linformer_cl"]
    assert any("compiling the kernels" in m and str(folder) in m for m in said), said
    assert os.listdir(folder), "no kernel was cached in cache_dir"
    with pytest.raises(linformer_cl.ArgumentError, match="cache_dir"):
        linformer_cl.load(path, device=device, cache_dir="")


def test_compiling_is_said_once_on_stderr_without_logging(tmp_path):
    path = os.path.join(os.path.dirname(__file__), "..", "data", "pytorch", "plain.model.safetensors")
    r = python(f"""
        import numpy as np, linformer_cl
        for _ in range(2):
            with linformer_cl.load({path!r}, device="pocl") as m:
                m(np.zeros((1, 4, m.info.d_model), np.float32))
        """, LINFORMER_CACHE_DIR=str(tmp_path / "cold"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("compiling the kernels") == 1, r.stderr


def test_types_docs_and_help():
    import linformer_cl.torch as lt
    assert os.path.exists(os.path.join(os.path.dirname(linformer_cl.__file__), "py.typed"))
    public = [getattr(linformer_cl, name) for name in linformer_cl.__all__] + [lt.Module]
    for obj in public:
        assert inspect.getdoc(obj), f"{obj.__name__} has no docstring"
    for cls in (linformer_cl.Model, lt.Module):
        for name, member in vars(cls).items():
            if not name.startswith("_") and (callable(member) or isinstance(member, property)):
                assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"
    for fn in (linformer_cl.load, linformer_cl.from_torch, linformer_cl.devices):
        hints = inspect.signature(fn)
        assert hints.return_annotation is not inspect.Signature.empty, f"{fn.__name__} has no return type"
        assert "device" in inspect.getdoc(fn) or fn is linformer_cl.devices
    assert "selector" in inspect.getdoc(linformer_cl.load)


@pytest.mark.skipif(not os.path.isdir("/usr/lib/python3/dist-packages/torch"), reason="Debian's PyTorch is absent")
def test_check_names_the_python_that_sees_debians_torch(tmp_path):
    # A Python that does not see Debian's packages (as a pyenv one first on PATH): numpy and the package only.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=300)
    only = tmp_path / "only"
    only.mkdir()
    os.symlink(os.path.dirname(np.__file__), only / "numpy")
    os.symlink(os.path.dirname(linformer_cl.__file__), only / "linformer_cl")
    r = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-m", "linformer_cl.check", "--need", "torch"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(only)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "/usr/lib/python3/dist-packages, which this Python" in r.stdout
    assert "/usr/bin/python3 -m venv --system-site-packages" in r.stdout
    r = subprocess.run([sys.executable, "-m", "linformer_cl.check", "--need", "torch", "safetensors"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "device" in r.stdout, r.stdout + r.stderr
