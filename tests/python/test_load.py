"""load() of every file under tests/data against the y its io file holds, and mixed lengths."""
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

import linformer_cl
from conftest import DATA, ROOT, fixture_files, relative_error

FILES = fixture_files()
PLAIN = os.path.join(DATA, "pytorch", "plain.model.safetensors")
MODELS = os.path.join(DATA, "models")


def model_input(io):
    return io["tokens"] if "tokens" in io else io["x"]


@pytest.mark.parametrize("model_path,io_path", FILES, ids=[os.path.basename(m).split(".")[0] for m, _ in FILES])
def test_load_matches_pytorch(device, model_path, io_path):
    io = load_file(io_path)
    mode = "dense" if "causal_dense" in model_path else None  # PyTorch's exact causal attention
    with linformer_cl.load(model_path, device=device, mode=mode) as model:
        y = model(model_input(io), lengths=io.get("lengths"))
        assert y.shape == io["y"].shape
        assert relative_error(y, io["y"]) <= 1e-4  # the bound of `linformer run --check`


def test_mixed_lengths_equal_each_sequence_alone(device):
    path = os.path.join(MODELS, "encoder_depth3.model.safetensors")
    rng = np.random.default_rng(7)
    with linformer_cl.load(path, device=device) as model:
        x = rng.standard_normal((3, 19, model.info.d_model)).astype(np.float32)
        lengths = [19, 7, 0]
        y = model(x, lengths=lengths)
        for b, n in enumerate(lengths):
            if n:
                alone = model(x[b:b + 1, :n])
                np.testing.assert_allclose(y[b, :n], alone[0], rtol=0, atol=1e-6)
            assert not y[b, n:].any()


def test_info_of_a_language_model(device):
    path = os.path.join(MODELS, "lm.model.safetensors")
    with linformer_cl.load(path, device=device) as model:
        i = model.info
        assert (i.kind, i.takes_tokens, i.d_model, i.heads, i.k, i.max_seq_len, i.vocab, i.layers, i.out_width) == \
            ("language model", True, 12, 2, 4, 16, 30, 2, 30)
        model(np.zeros((1, 5), dtype=np.int64))
        assert model.device_bytes.weights > 0 and model.last_profile


def test_devices_have_selectors_that_open_them():
    found = linformer_cl.devices()
    assert sum(d.default for d in found) == 1
    for d in found:
        with linformer_cl.load(PLAIN, device=d.selector) as model:
            assert model.device == d.name


def test_gemms_name_the_backend_and_the_host_blas():
    """Model.gemms says where the GEMMs run, as LINFORMER_GEMM and LINFORMER_HOST_BLAS chose at load. Each case
    in a process of its own: the host BLAS is chosen once a process."""
    code = f"import linformer_cl\nwith linformer_cl.load({PLAIN!r}, device='pocl') as m: print(m.gemms)"
    env = {k: v for k, v in os.environ.items() if k not in ("LINFORMER_GEMM", "LINFORMER_HOST_BLAS")}

    def gemms(**extra):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(env, **extra))
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert gemms(LINFORMER_GEMM="clblast") == "CLBlast"
    assert gemms(LINFORMER_GEMM="host", LINFORMER_HOST_BLAS="openblas") == "OpenBLAS"
    assert gemms() in ("OpenBLAS", "MKL")  # a CPU device's default: the host BLAS


def test_torch_tensor_in_gives_torch_tensor_out():
    torch = pytest.importorskip("torch")
    io = load_file(PLAIN.replace(".model.", ".io."))
    with linformer_cl.load(PLAIN, device="pocl") as model:
        y = model(torch.from_numpy(io["x"]))
        assert isinstance(y, torch.Tensor) and relative_error(y.numpy(), io["y"]) <= 1e-4


def test_the_package_imports_and_loads_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import linformer_cl, numpy\n"
            f"m = linformer_cl.load({PLAIN!r}, device='pocl')\n"
            "print(m(numpy.zeros((1, 4, 32), numpy.float32)).shape)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "(1, 4, 32)" in r.stdout, r.stderr


def test_an_unmatched_linformer_device_marks_no_default(monkeypatch):
    monkeypatch.setenv("LINFORMER_DEVICE", "no-such-device")
    found = linformer_cl.devices()
    assert found and not any(d.default for d in found)


def test_importing_sets_the_blas_thread_timeout_unless_set():
    """OPENBLAS_THREAD_TIMEOUT is 4 when the library (and with it OpenBLAS) loads; a value set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    code = "import os, linformer_cl; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    for given, want in ((None, "4"), ("", "4"), ("11", "11")):
        run_env = env if given is None else dict(env, OPENBLAS_THREAD_TIMEOUT=given)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=run_env)
        assert r.returncode == 0 and r.stdout.strip() == want and not r.stderr, (given, r.stdout, r.stderr)


def test_host_blas_library_is_chosen_or_refused_by_name(tmp_path):
    """host_blas_library() names the host BLAS LINFORMER_HOST_BLAS asks for, with MKL's version where it runs,
    and raises the library's error, naming the value, for a name it does not know or an MKL that does not
    load (a FIFO at once, never waited on). Each case in a process of its own: MKL is loaded once a process."""
    code = ("import linformer_cl\ntry: print(*linformer_cl.host_blas_library(), sep='|')\n"
            "except linformer_cl.Error as e: print(type(e).__name__, e, sep='|')")
    env = {k: v for k, v in os.environ.items() if k not in ("LINFORMER_HOST_BLAS", "LINFORMER_MKL")}

    def run(**extra):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(env, **extra),
                           timeout=60)
        assert r.returncode == 0 and not r.stderr, r.stderr
        return r.stdout.strip().split("|")

    assert run(LINFORMER_HOST_BLAS="openblas") == ["OpenBLAS", "None"]
    kind, message = run(LINFORMER_HOST_BLAS="atlas")
    assert kind == "ArgumentError" and '"atlas"' in message, message
    kind, message = run(LINFORMER_HOST_BLAS="mkl", LINFORMER_MKL="/no/such/libmkl_rt.so.3")
    assert kind == "UnsupportedError" and "/no/such/libmkl_rt.so.3" in message, message
    fifo = tmp_path / "libmkl_rt.so.3"
    os.mkfifo(fifo)
    kind, message = run(LINFORMER_HOST_BLAS="mkl", LINFORMER_MKL=str(fifo))
    assert kind == "UnsupportedError" and "is a FIFO, not a library file" in message, message
    mkl = os.path.join(ROOT, "build", "mkl", "libmkl_rt.so.3")  # scripts/install-mkl.sh
    if not os.path.exists(mkl):
        pytest.skip("no MKL in build/mkl (LINFORMER_SKIP_MKL=1)")
    name, version = run(LINFORMER_HOST_BLAS="mkl", LINFORMER_MKL=mkl)
    assert name == "MKL" and "Math Kernel Library" in version, version


def test_host_blas_names_kernels_that_the_advice_selects():
    """Where OpenBLAS fell back to older kernels, host_blas() names a faster set; started with it, OpenBLAS
    runs that set and nothing is advised. Importing the package prints nothing."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    code = "import linformer_cl; print(*linformer_cl.host_blas())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    core, faster = r.stdout.split()
    assert core and not r.stderr, r.stderr
    if faster != "None":
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(env, OPENBLAS_CORETYPE=faster))
        assert r.returncode == 0 and r.stdout.split() == [faster, "None"] and not r.stderr, (r.stdout, r.stderr)
