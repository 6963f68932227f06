"""linformer-serve MODEL: a model file served by Triton Inference Server.

    python -m linformer_cl.serve model.safetensors --device all --http-port 8000

The model is written as a Triton model repository (config.pbtxt, the Python
backend's model.py, the weights in the version folder) that PyTriton's Triton
loads at its start (HTTP, gRPC and metrics on --host); the model runs in
Triton's Python backend (linformer_cl/triton_model.py), one instance per
device, each with its own context, warmed up by a forward before Triton calls
it ready. Triton's dynamic batcher groups waiting requests of any length (a
ragged batch) and each instance runs them as one forward. The server exits
with status 1 when an instance's process ends under it. SIGTERM or Ctrl-C
stops the server once the requests in flight are answered (during its start,
once what has started is stopped; it exits 0).
"""
import argparse
import os
import pathlib
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading

import linformer_cl

# How long PyTriton waits, past Triton's own exit timeout, before it kills
# Triton: Triton answers what is in flight and exits within its timeout.
EXIT_GRACE_S = 10
ENDPOINTS_NEEDING_TOKEN = ["shared-memory", "model-repository", "trace", "logging"]
# The process of each instance of a Python backend model.
STUB = "triton_python_backend_stub"
# The weights' name in the model's version folder (triton_model.py reads it).
WEIGHTS = "model.safetensors"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="linformer-serve", description="Serve a model file through Triton.")
    p.add_argument("model", help="safetensors file of a layer or model (what `linformer run` takes)")
    p.add_argument("--name", help="the model's name in Triton (default: the file's name without suffixes)")
    p.add_argument("--device", help="device selector, or `all` for one instance on each device")
    p.add_argument("--heads", type=int, help="heads, for a file whose metadata does not say")
    p.add_argument("--host", default="127.0.0.1", help="address every endpoint binds to (default 127.0.0.1)")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--no-http", action="store_true",
                   help="serve gRPC alone: Triton's HTTP endpoint ends the server on a JSON request whose declared "
                        "shape it cannot allocate (docs/serving.md)")
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--max-batch", type=int, default=8,
                   help="sequences Triton may group into one forward (default 8); also the most one request may "
                        "hold: Triton refuses a larger one (HTTP 400, gRPC INVALID_ARGUMENT)")
    p.add_argument("--max-queue-delay-us", type=int, default=2000,
                   help="how long a request may wait for others to join its batch")
    p.add_argument("--export-repository", metavar="DIR",
                   help="write the model as a Triton model repository into DIR (DIR/NAME/config.pbtxt, "
                        "1/model.py and a copy of the weights, 1/model.safetensors) and exit, serving nothing: "
                        "a stock tritonserver serves it where linformer-cl is installed in its Python backend's "
                        "Python; --device names the serving host's device (default: the library's default there)")
    p.add_argument("--load-timeout-s", type=int, default=600,
                   help="how long Triton may take to start, load the model and warm it up (compiling the kernels "
                        "where they are not cached) before the server gives up (default 600)")
    p.add_argument("--exit-timeout-s", type=int, default=120,
                   help="on SIGTERM, how long the requests in flight may take to be answered (default 120)")
    args = p.parse_args(argv)
    if min(args.max_batch, args.exit_timeout_s, args.load_timeout_s) < 1 or args.max_queue_delay_us < 0:
        p.error("--max-batch, --load-timeout-s and --exit-timeout-s must be at least 1 and --max-queue-delay-us "
                "at least 0")
    if args.export_repository and args.device == "all":
        p.error("--device all names this host's devices: --export-repository takes one selector of the serving host")
    return args


def device_selectors(device):
    """The selectors of the devices to serve on, one instance each."""
    if device == "all":
        return [d.selector for d in linformer_cl.devices()]
    if device:
        return [device]
    chosen = os.environ.get("LINFORMER_DEVICE")
    # No default device: the model's load says so.
    return [chosen] if chosen else [d.selector for d in linformer_cl.devices() if d.default][:1] or [""]


def model_name(args):
    name = args.name or pathlib.Path(args.model).name.split(".")[0]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise SystemExit(f"linformer-serve: model name \"{name}\" may hold only letters, digits, _ . and -")
    return name


def triton_config(name, info, selectors, args):
    """The model's Triton configuration: tensors, batching, instances, warm-up and the model's facts."""
    if info.takes_tokens:
        x = {"name": "tokens", "data_type": "TYPE_INT64", "dims": [-1]}
    else:
        x = {"name": "x", "data_type": "TYPE_FP32", "dims": [-1, info.d_model]}
    facts = {"name": name, "kind": info.kind, "d_model": info.d_model, "heads": info.heads, "k": info.k,
             "max_seq_len": info.max_seq_len, "vocab": info.vocab, "layers": info.layers,
             "devices": ",".join(selectors), "heads_option": args.heads or 0}
    # A forward of one row and one of max_seq_len rows (token 0 or zeros) on
    # each instance before Triton calls the model ready: the kernels and
    # GEMMs of short and long sequences are compiled by then.
    warmup = [{"name": f"n={n}", "batch_size": 1,
               "inputs": {x["name"]: {"data_type": x["data_type"], "dims": [n] + x["dims"][1:], "zero_data": True}}}
              for n in sorted({1, info.max_seq_len})]
    return {
        "name": name, "backend": "python", "max_batch_size": args.max_batch,
        "input": [dict(x, allow_ragged_batch=True)],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, info.out_width]},
                   {"name": "device", "data_type": "TYPE_STRING", "dims": [1]}],
        "dynamic_batching": {"max_queue_delay_microseconds": args.max_queue_delay_us},
        "instance_group": [{"kind": "KIND_CPU", "count": len(selectors)}],
        "model_warmup": warmup,
        "parameters": {key: {"string_value": str(value)} for key, value in facts.items()},
    }


def write_repository(root, config, model_file, copy):
    """A Triton model repository at root holding the model: config.pbtxt, 1/model.py, 1/model.safetensors.

    The weights are copied (copy=True) or linked to model_file; every path
    inside is relative to the model's folder.
    """
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2
    folder = pathlib.Path(root) / config["name"]
    version = folder / "1"
    version.mkdir(parents=True)
    message = json_format.ParseDict(config, model_config_pb2.ModelConfig())
    (folder / "config.pbtxt").write_text(text_format.MessageToString(message))
    shutil.copyfile(pathlib.Path(__file__).parent / "triton_model.py", version / "model.py")
    if copy:
        shutil.copyfile(model_file, version / WEIGHTS)
    else:
        (version / WEIGHTS).symlink_to(model_file)


def check_ports_free(args):
    """Names a port already taken, before Triton's start would stall on it."""
    ports = [("--grpc-port", args.grpc_port), ("--metrics-port", args.metrics_port)]
    for what, port in ports if args.no_http else [("--http-port", args.http_port)] + ports:
        with socket.socket() as s:
            try:
                s.bind((args.host, port))
            except OSError as e:
                raise SystemExit(f"linformer-serve: {what} {port} on {args.host}: {e.strerror}")


def start_triton(args, repository):
    """Triton, serving the models of the repository once they are loaded and warmed up."""
    try:
        import pytriton.triton
        from pytriton.server import triton_server
        from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig
    except ImportError:
        raise SystemExit("linformer-serve needs PyTriton: pip install \"linformer-cl[serve]\"") from None
    # PyTriton kills Triton 30 s after asking it to stop, whatever Triton's
    # exit timeout: requests in flight that need longer (long sequences, a
    # busy host) would go unanswered. It waits out that timeout instead.
    triton_server.SERVER_OUTPUT_TIMEOUT_SECS = args.exit_timeout_s + EXIT_GRACE_S
    # It gives Triton 120 s to be ready, which loading and warming up a model
    # (compiling its kernels, on a busy host) may take.
    pytriton.triton.DEFAULT_TRITON_STARTUP_TIMEOUT_S = args.load_timeout_s
    # The Python backend's processes import this package from where this one found it.
    root = str(pathlib.Path(linformer_cl.__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    security = TritonSecurityConfig(restricted_endpoints=ENDPOINTS_NEEDING_TOKEN)
    # No GPU metrics: on a host without NVIDIA's driver they only log NVML and DCGM errors.
    config = TritonConfig(model_repository=pathlib.Path(repository), allow_http=not args.no_http,
                          http_address=args.host, http_port=args.http_port, grpc_address=args.host,
                          grpc_port=args.grpc_port, metrics_address=args.host, metrics_port=args.metrics_port,
                          allow_gpu_metrics=False, exit_timeout_secs=args.exit_timeout_s)
    triton = Triton(config=config, security_config=security)
    try:
        triton.run()
    except Exception as e:  # noqa: BLE001  (PyTriton's: Triton ended at its start, its log above says why)
        triton.stop()
        raise SystemExit(f"linformer-serve: Triton did not start: {e}") from None
    return triton


def model_ready(args, name):
    import tritonclient.grpc as grpc  # gRPC, which serves with or without --no-http
    client = grpc.InferenceServerClient(f"{args.host}:{args.grpc_port}")
    try:
        return client.is_model_ready(name)
    finally:
        client.close()


def stubs_alive():
    """How many processes of Python backend instances run under this process."""
    import psutil
    alive = 0
    for p in psutil.Process().children(recursive=True):
        try:
            alive += p.name() == STUB and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
    return alive


def stop_on_signal():
    """An event that SIGTERM or SIGINT sets: set before Triton starts, a client may see the model ready first."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def serve_until_signal(triton, instances, stop):
    """Serves until stop is set (0), or until Triton or an instance's process ends by itself (1).

    Triton goes on calling a model ready whose instance's process has died,
    and answers its requests with errors: the exit tells an orchestrator to
    restart the server.
    """
    ended = None
    while not stop.wait(timeout=1.0):  # (returns at once when it is set already)
        alive = stubs_alive()
        if not triton.is_alive():
            ended = "Triton Inference Server ended by itself"
        elif alive < instances and not stop.is_set():
            ended = f"the process of an instance ({STUB}) ended: {alive} of {instances} left"
        if ended:
            break
    if ended:
        print(f"linformer-serve: {ended}; stopping", file=sys.stderr, flush=True)
    else:
        print("linformer-serve: stopping once the requests in flight are answered", flush=True)
    triton.stop()
    return 1 if ended else 0


def export(directory, config, model_file):
    if (pathlib.Path(directory) / config["name"]).exists():
        raise SystemExit(f"linformer-serve: --export-repository {directory} already holds a model {config['name']}")
    try:
        write_repository(directory, config, model_file, copy=True)
    except ImportError:
        raise SystemExit("linformer-serve needs Triton's client: pip install \"linformer-cl[serve]\"") from None
    except OSError as e:
        raise SystemExit(f"linformer-serve: --export-repository {directory}: {e}")
    print(f"linformer-serve: {config['name']} written to {pathlib.Path(directory) / config['name']}", flush=True)
    return 0


def main(argv=None):
    args = parse_args(argv)
    # First: a signal that ended the process while it starts left its temporary repository behind.
    stop = stop_on_signal()
    path = pathlib.Path(args.model).resolve()
    name = model_name(args)
    try:
        # An exported model takes its device where it is served.
        selectors = [args.device or ""] if args.export_repository else device_selectors(args.device)
        with linformer_cl.load(path, device=selectors[0] or None, heads=args.heads) as model:
            info = model.info
    except linformer_cl.Error as e:
        raise SystemExit(f"linformer-serve: {args.model}: {e}")
    config = triton_config(name, info, selectors, args)
    if args.export_repository:
        return export(args.export_repository, config, path)
    check_ports_free(args)
    with tempfile.TemporaryDirectory(prefix="linformer-serve-") as repository:
        write_repository(repository, config, path, copy=False)
        if stop.is_set():
            return 0
        triton = start_triton(args, repository)
        try:
            ready = triton.is_alive() and model_ready(args, name)
        except Exception as e:  # noqa: BLE001  (said, with the log Triton wrote above)
            ready = e
        if ready is not True:
            triton.stop()
            raise SystemExit(f"linformer-serve: Triton could not load {name}{f': {ready}' if ready else ''}")
        http = "" if args.no_http else f"http://{args.host}:{args.http_port}/v2/models/{name}/infer, "
        print(f"linformer-serve: {name} ({info.kind}, d_model {info.d_model}) on {', '.join(selectors)}: "
              f"{http}gRPC {args.host}:{args.grpc_port}", flush=True)
        return serve_until_signal(triton, len(selectors), stop)


if __name__ == "__main__":
    sys.exit(main())
