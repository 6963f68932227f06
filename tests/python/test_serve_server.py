"""linformer-serve as an orchestrator and its users see it, on loopback.

One server at a time (a small model on PoCL), started as bench/serve_load.py
starts it: readiness that follows the Python backend's processes, a first
request that finds the kernels compiled, what the metrics count a rejected
request in, a model configuration without host paths, a start without the
GPU metrics' errors; and an exported repository (--export-repository)
served by the stock tritonserver of the PyTriton wheel. Run by
scripts/check-serve.sh, which installs PyTriton and Triton's client.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("pytriton")
pytest.importorskip("tritonclient.http")
psutil = pytest.importorskip("psutil")

from conftest import DATA, ROOT  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import serve_load  # noqa: E402  (the load test's server and client helpers)

MODEL = os.path.join(DATA, "models", "encoder_short.model.safetensors")
STUB = "triton_python_backend_stub"


def status_of(url):
    """The HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def started(log_path):
    """A server on PoCL, ready; stopped by SIGTERM (else killed) when the test is done."""
    args = types.SimpleNamespace(model=MODEL, device="pocl", max_batch=8, max_queue_delay_us=2000,
                                 exit_timeout_s=20, grpc_only=False)
    s = serve_load.Server(args, log_path)
    try:
        s.wait_ready(600)  # its --load-timeout-s: a cold start compiles the kernels
        yield s
    finally:
        if s.process.poll() is None:
            s.process.send_signal(signal.SIGTERM)
            try:
                s.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                s.kill()
        s.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the tests that leave it as it was."""
    yield from started(tmp_path_factory.mktemp("serve") / "serve.log")


@pytest.fixture
def own_server(tmp_path):
    """A server of the test's own."""
    yield from started(tmp_path / "serve.log")


@pytest.fixture
def cold_server(tmp_path, monkeypatch):
    """A server of the test's own, with kernel caches of its own: nothing is compiled before it starts."""
    monkeypatch.setenv("LINFORMER_CACHE_DIR", str(tmp_path / "kernel-cache"))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "pocl-cache"))
    yield from started(tmp_path / "serve.log")


def processes(server):
    """The server's process and all of its descendants (Triton, the Python backend's stubs)."""
    root = psutil.Process(server.process.pid)
    return [root] + root.children(recursive=True)


def metric(server, name):
    with urllib.request.urlopen(f"http://{serve_load.HOST}:{server.metrics}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith(name + "{") and f'model="{server.name}"' in line)


# What a request is counted in: Triton's own counters, and the model's count of the requests it refused.
COUNTERS = ("nv_inference_request_success", "nv_inference_request_failure", "linformer_request_rejected")


def settled(server, names, seconds=10):
    """The metrics once they stop moving: Triton counts a request after its answer has gone."""
    last, deadline = None, time.monotonic() + seconds
    while time.monotonic() < deadline:
        values = [metric(server, name) for name in names]
        if values == last:
            return values
        last = values
        time.sleep(0.5)
    return last


def rejections_counted(server, client, info):
    """How far each of COUNTERS moved over a good request, two that the model refuses (n above
    max_seq_len) and one that Triton refuses before the model (FP64), each refusal an HTTP 400.

    Triton 2.51 (docs/serving.md): its Python backend counts every request of
    an execute() that returns in nv_inference_request_success, error responses
    included, and in nv_inference_request_failure only those of an execute()
    that raised (all of them, answered with a 500); a request that Triton's
    core refuses is counted in neither.
    """
    good = np.ones((1, 2, info.d_model), dtype=np.float32)
    too_long = np.zeros((1, info.max_seq_len + 1, info.d_model), dtype=np.float32)
    before = settled(server, COUNTERS)
    serve_load.infer(client, server.name, info, good)
    for array, word in ((too_long, "max_seq_len"), (too_long, "max_seq_len"), (good.astype(np.float64), "FP64")):
        with pytest.raises(serve_load.InferenceServerException, match=word) as refused:
            serve_load.infer(client, server.name, info, array)
        assert refused.value.status() == "400"
    return [after - start for after, start in zip(settled(server, COUNTERS), before)]


def test_a_killed_stub_ends_readiness(own_server):
    server = own_server
    stubs = [p for p in processes(server) if p.name() == STUB]
    assert len(stubs) == 1
    stubs[0].kill()
    deadline = time.monotonic() + 60
    ready = [f"{server.url}/v2/health/ready", f"{server.url}/v2/models/{server.name}/ready"]
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            assert server.process.returncode != 0  # an orchestrator restarts it
            return
        if all(status_of(url) != 200 for url in ready):
            return
        time.sleep(0.5)
    pytest.fail("60 s after its stub was killed the server is still alive and ready")


def test_the_first_request_finds_the_kernels_compiled(cold_server):
    server = cold_server
    info = linformer_info()
    x = np.random.default_rng(1).standard_normal((1, info.max_seq_len, info.d_model)).astype(np.float32)
    with server.client(serve_load.http) as client:
        start = time.monotonic()
        serve_load.infer(client, server.name, info, x)
        first = time.monotonic() - start
        start = time.monotonic()
        serve_load.infer(client, server.name, info, x)
        second = time.monotonic() - start
    # Compiling the kernels takes seconds on PoCL; a forward of this model, milliseconds.
    assert first < 0.5 + 5 * second, (first, second)


def test_what_counts_a_rejected_request(server):
    with server.client(serve_load.http) as client:
        assert rejections_counted(server, client, linformer_info()) == [3, 0, 2]


def test_the_config_shows_no_host_paths(server):
    config = json.dumps(serve_load.get_json(f"{server.url}/v2/models/{server.name}/config"))
    import linformer_cl
    for path in (pathlib.Path(MODEL).resolve(), pathlib.Path(linformer_cl.__file__).resolve().parent.parent):
        assert str(path) not in config and str(path.parent) not in config


def test_the_start_logs_no_gpu_metrics_errors(server):
    # What is left of the GPU-less start is a line on the pinned memory pool
    # and "CudaDriverHelper has not been initialized" (docs/serving.md).
    log = pathlib.Path(server.log.name).read_text()
    for words in ("NVML", "DCGM"):
        assert words not in log


def test_help_says_max_batch_caps_a_request():
    out = subprocess.run([sys.executable, "-m", "linformer_cl.serve", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "one request" in " ".join(out.split())


def test_the_stock_tritonserver_serves_the_exported_repository(tmp_path):
    from pytriton.utils.distribution import get_libs_path, get_root_module_path, get_stub_path
    repository = tmp_path / "repository"
    subprocess.run([sys.executable, "-m", "linformer_cl.serve", MODEL, "--export-repository", str(repository),
                    "--name", "enc", "--device", "pocl"], timeout=120, check=True)
    files = sorted(str(f.relative_to(repository)) for f in repository.rglob("*") if not f.is_dir())
    assert files == ["enc/1/model.py", "enc/1/model.safetensors", "enc/config.pbtxt"]
    assert not any(f.is_symlink() for f in repository.rglob("*"))
    assert '"/' not in (repository / "enc" / "config.pbtxt").read_text()  # no absolute path
    # Triton's own binary and Python backend from the PyTriton wheel, the
    # backend's stub for this Python, as PyTriton lays them out.
    triton = get_root_module_path() / "tritonserver"
    backend = tmp_path / "backends" / "python"
    backend.mkdir(parents=True)
    for f in (triton / "backends" / "python").iterdir():
        (backend / f.name).symlink_to(f)
    (backend / "triton_python_backend_stub").symlink_to(get_stub_path(f"{sys.version_info[0]}.{sys.version_info[1]}"))
    http_port, grpc_port, metrics_port = serve_load.free_ports(3)
    import linformer_cl
    # The package where this Python finds it, and this Python first on PATH:
    # the stub takes its packages from the first python3 there, as under
    # PyTriton (the Triton image's own Python in a container).
    env = dict(os.environ, LD_LIBRARY_PATH=str(get_libs_path()),
               PYTHONPATH=str(pathlib.Path(linformer_cl.__file__).resolve().parent.parent),
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    host = serve_load.HOST
    command = [str(triton / "bin" / "tritonserver"), f"--model-repository={repository}",
               f"--backend-directory={backend.parent}", "--allow-gpu-metrics=false",
               f"--http-address={host}", f"--http-port={http_port}", f"--grpc-address={host}",
               f"--grpc-port={grpc_port}", f"--metrics-address={host}", f"--metrics-port={metrics_port}"]
    with open(tmp_path / "tritonserver.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while status_of(f"http://{host}:{http_port}/v2/models/enc/ready") != 200:
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "tritonserver.log").read_text()
            time.sleep(0.5)
        info = linformer_info()
        x = np.random.default_rng(2).standard_normal((2, 7, info.d_model)).astype(np.float32)
        client = serve_load.http.InferenceServerClient(f"{host}:{http_port}", network_timeout=60.0)
        try:
            y, device = serve_load.infer(client, "enc", info, x)
            # The same model.py, the same counts as under linformer-serve.
            stock = types.SimpleNamespace(metrics=metrics_port, name="enc")
            assert rejections_counted(stock, client, info) == [3, 0, 2]
        finally:
            client.close()
        assert device == "pocl"
        with linformer_cl.load(MODEL, device="pocl") as model:
            assert np.array_equal(y, model(x))
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def linformer_info():
    import linformer_cl
    with linformer_cl.load(MODEL, device="pocl") as model:
        return model.info
