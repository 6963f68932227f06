#!/usr/bin/env python3
"""Runs the same lucidrains Linformer modules through PyTorch, ONNX Runtime, OpenVINO
and `linformer run` on every OpenCL device, and prints their times side by side.

The work (d_model 512, 8 heads, k 256, batch 1): one LinformerSelfAttention at each
--n, and lucidrains' 12-layer Linformer (its GELU feed-forward of width 2048) at
--model-n. Each module gets random weights and one random input, saved as
safetensors files for `linformer run`; the ONNX peers run a torch.onnx export of
the same module (--opset). The peers run on the CPU in f32 with --threads threads
(PyTorch on the GPU with --torch-device cuda, the peer of a GPU run);
`linformer run` runs on each device `linformer devices` lists, with the host GEMMs
(OpenBLAS, or MKL where the program takes it: the table's header and the CSV's
host_blas column name it) and the CPU runtimes held to --threads as well.
--host-blas openblas,mkl runs ours once per library (LINFORMER_HOST_BLAS), each
its own side in every round, so that the two are timed against the same rounds
of OpenVINO: the choice of the default on a CPU, measured in one run.

Times are per forward, the median of --repeat after --warmup forwards: wall clock
for the peers; for ours the median device time the program prints (over
--repeat + 1 forwards), and a wall time per forward taken from two runs that
differ only in --repeat ((wall of warm-up + 1 + repeat) - (wall of warm-up + 1))
/ repeat, so loading and compiling cancel out (left blank where the difference
is not positive: the start-up swung more than the forwards took); --no-wall
skips those runs.
The sides take turns: --rounds rounds, in each of which every side runs its
forwards once, one after the other, so that a machine whose speed drifts (a
shared one) slows every side alike rather than the one that ran in a slow
minute. A row gives the median over the rounds, the fastest round, and the
median over the rounds of its time divided by OpenVINO's in the same round.
--peers chooses the peers that run beside ours (OpenVINO alone, say, for many
rounds against it in less time); without PyTorch among them, one untimed
PyTorch forward still gives the reference output. ONNX Runtime and OpenVINO are
imported only when they run. Every output is checked
against PyTorch's: the largest absolute difference and the relative error
||y - y_torch|| / ||y_torch||; a relative error above --tolerance makes the
run exit 1 after the table is printed.

The table goes to stdout, the rows to a CSV (--csv, default
bench/results/CPU-peers.csv, CPU being this machine's processor). Needs the
environment of scripts/install-peers.sh (or any Python with torch, safetensors and linformer, for
the peers left out):

    build/peers-env/bin/python bench/compare_peers.py                  # the whole comparison
    build/peers-env/bin/python bench/compare_peers.py --n 300 --model-n 300 --repeat 1 --csv build/peers-smoke.csv
"""
import argparse
import csv
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

try:
    import numpy as np
    import torch
    from linformer import Linformer, LinformerSelfAttention
    from safetensors.torch import load_file, save_file
except ImportError as e:
    sys.exit(f"compare_peers: {e}: run scripts/install-peers.sh and this script with build/peers-env/bin/python")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = ("pytorch", "onnxruntime", "openvino")
HOST_BLAS = {"openblas": "OpenBLAS", "mkl": "MKL"}  # LINFORMER_HOST_BLAS's values, and their names in the table
PLATFORM_NAMES = {"Portable Computing Language": "PoCL", "Intel(R) OpenCL": "Intel"}  # short names for the table


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["layer", "linformer12", "all"], default="all", help="the work to run")
    p.add_argument("--n", default="4096,16384", help="the layer's sequence lengths, comma-separated")
    p.add_argument("--model-n", default="4096", help="the 12-layer model's sequence lengths, comma-separated")
    p.add_argument("--repeat", type=int, default=5, help="timed forwards on every side")
    p.add_argument("--warmup", type=int, default=1, help="untimed forwards before them")
    p.add_argument("--rounds", type=int, default=3, help="turns every side takes, one after the other")
    p.add_argument("--threads", type=int, default=2, help="threads of every side")
    p.add_argument("--opset", type=int, default=17, help="the ONNX opset of the export")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest relative error against PyTorch")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="the peers timed beside ours, comma-separated from " + ", ".join(PEERS) + " (default: all)")
    p.add_argument("--devices", help="OpenCL device selectors, comma-separated (default: every device listed)")
    p.add_argument("--host-blas", help="ours once per host BLAS library, comma-separated from openblas, mkl "
                                       "(default: the program's own choice)")
    p.add_argument("--torch-device", default="cpu", help="where PyTorch runs: cpu, or cuda (a GPU's peer)")
    p.add_argument("--no-wall", action="store_true", help="skip the runs that give our wall time")
    p.add_argument("--linformer", default=os.path.join(ROOT, "build", "linformer"), help="the program")
    p.add_argument("--csv", help="where the rows go (default bench/results/CPU-peers.csv)")
    p.add_argument("--profile-dir", help="after the rounds, each of our runs once more with --profile, its stages "
                                         "into DIR/WORK-nN-SIDE.txt")
    p.add_argument("--save-models", help="keep each work's weights as DIR/WORK-nN.model.safetensors (for "
                                         "`linformer tune --model`, say)")
    args = p.parse_args()
    if args.repeat < 1 or args.rounds < 1 or args.warmup < 0 or args.threads < 1:
        p.error("--repeat, --rounds and --threads are at least 1, --warmup at least 0")
    for option in ("n", "model_n"):
        text = getattr(args, option)
        try:
            lengths = [int(v) for v in text.split(",")]
        except ValueError:
            p.error(f"--{option.replace('_', '-')} is a comma-separated list of sequence lengths, got \"{text}\"")
        if min(lengths) < 1:
            p.error(f"every --{option.replace('_', '-')} is at least 1")
        setattr(args, option, lengths)
    args.peers = args.peers.split(",") if args.peers else []
    unknown = [peer for peer in args.peers if peer not in PEERS]
    if unknown or len(set(args.peers)) != len(args.peers):
        p.error(f"--peers takes each of {', '.join(PEERS)} at most once, got \"{','.join(args.peers)}\"")
    args.host_blas = args.host_blas.split(",") if args.host_blas else [None]
    if any(b and b not in HOST_BLAS for b in args.host_blas) or len(set(args.host_blas)) != len(args.host_blas):
        p.error(f"--host-blas takes each of {', '.join(HOST_BLAS)} at most once, got \"{','.join(map(str, args.host_blas))}\"")
    if args.torch_device not in ("cpu", "cuda") or (args.torch_device == "cuda" and not torch.cuda.is_available()):
        p.error(f"--torch-device is cpu, or cuda where PyTorch sees a GPU; got \"{args.torch_device}\"")
    if not os.access(args.linformer, os.X_OK):
        p.error(f"--linformer {args.linformer}: no such program (build it with scripts/setup.sh)")
    return args


# --- the machine, the devices ---------------------------------------------------------------------------------------

def cpu_name():
    with open("/proc/cpuinfo") as f:
        found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
    return found.group(1).strip() if found else "unknown CPU"


def cpu_slug(name):
    """A file name from the CPU's name: "AMD EPYC 7B13 64-Core Processor" -> "amd-epyc-7b13-64-core"."""
    name = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "cpu"


def program_env(threads):
    """The environment of `linformer run`: both OpenCL runtimes, every thread pool held to `threads`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               DPCPP_CPU_NUM_CUS=str(threads), POCL_MAX_PTHREAD_COUNT=str(threads), POCL_CPU_MAX_CU_COUNT=str(threads))
    vendors = os.path.join(ROOT, "build", "opencl-vendors")
    if "OCL_ICD_VENDORS" not in env and os.path.isdir(vendors):
        env["OCL_ICD_VENDORS"] = vendors
    return env


def list_devices(args, env):
    """(selector, name) of every device `linformer devices` lists, or of those --devices names, and the host BLAS
    that it names."""
    out = subprocess.run([args.linformer, "devices"], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"compare_peers: {args.linformer} devices failed:\n{out.stderr}")
    devices, selector = [], None
    blas = re.search(r"^host BLAS: (.+)$", out.stdout, re.M)
    for line in out.stdout.splitlines():
        head = re.match(r"^(\d+:\d+) ", line)
        if head:
            selector = head.group(1)
        elif selector and line.strip().startswith("platform"):
            platform = line.split(None, 1)[1]
            devices.append((selector, PLATFORM_NAMES.get(platform.split(" (")[0], platform.split(" (")[0])))
    if args.devices:
        names = dict(devices)
        devices = [(s, names.get(picked_device(args, env, s), s)) for s in args.devices.split(",")]
    blas = blas.group(1) if blas else "unknown"
    if blas.startswith("none"):
        sys.exit(f"compare_peers: no host BLAS: {blas}")
    return devices, blas


def picked_device(args, env, selector):
    """The platform:device that a selector (gpu, cpu, 0:1, ...) picks, from `linformer devices --device`."""
    out = subprocess.run([args.linformer, "devices", "--device", selector], capture_output=True, text=True, env=env)
    picked = re.search(r"^selector .* picks (\d+:\d+) ", out.stdout, re.M)
    if out.returncode != 0 or not picked:
        sys.exit(f"compare_peers: --devices {selector}: {out.stderr.strip() or 'no device picked'}")
    return picked.group(1)


# --- the work -------------------------------------------------------------------------------------------------------

def make_work(args):
    """(work name, n, module factory) for every module the options ask for."""
    work = []
    if args.model in ("layer", "all"):
        for n in args.n:
            work.append(("LinformerSelfAttention", n, lambda n=n: LinformerSelfAttention(dim=512, seq_len=n, k=256,
                                                                                       heads=8)))
    if args.model in ("linformer12", "all"):
        for n in args.model_n:
            work.append(("Linformer, 12 layers", n, lambda n=n: Linformer(dim=512, seq_len=n, depth=12, k=256,
                                                                        heads=8)))
    return work


def median_ms(forward, x, args):
    """Median wall time of forward(x) in ms after the warm-up forwards, and its last output."""
    for _ in range(args.warmup):
        y = forward(x)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        y = forward(x)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), y


def pytorch_side(module, args):
    """PyTorch's forward on --torch-device; on a GPU, timed up to the end of its kernels, without the copies."""
    device = torch.device(args.torch_device)
    module = module.to(device)
    done = torch.cuda.synchronize if device.type == "cuda" else lambda: None

    def run(v):
        y = module(v)
        done()
        return y

    def forward(x):
        with torch.no_grad():
            ms, y = median_ms(run, torch.from_numpy(x).to(device), args)
        return None, ms, y.cpu().numpy()
    return forward


def peer_name(peer, args):
    """A peer's name and version, as the table shows it; PyTorch's with the GPU it runs on."""
    if peer == "pytorch":
        name = "PyTorch " + torch.__version__.split("a")[0]
        return name + f" on {torch.cuda.get_device_name()}" if args.torch_device == "cuda" else name
    version = importlib.import_module(peer).__version__
    return f"ONNX Runtime {version}" if peer == "onnxruntime" else f"OpenVINO {version.split('-')[0]}"


def onnxruntime_side(path, args):
    import onnxruntime
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
    session = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return lambda x: (None,) + median_ms(lambda v: session.run(None, {"x": v})[0], x, args)


def openvino_side(path, args):
    import openvino
    config = {"INFERENCE_NUM_THREADS": args.threads, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
    request = openvino.Core().compile_model(path, "CPU", config).create_infer_request()
    return lambda x: (None,) + median_ms(lambda v: request.infer({0: v})[0].copy(), x, args)


def linformer_run(args, env, folder, selector, warmup, repeat, extra=()):
    """One `linformer run`: its wall seconds, the median device ms it printed, the output path, its stdout."""
    out = os.path.join(folder, "y.safetensors")
    cmd = [args.linformer, "run", "--model", os.path.join(folder, "model.safetensors"), "--input",
           os.path.join(folder, "x.safetensors"), "--output", out, "--device", selector,
           "--warmup", str(warmup), "--repeat", str(repeat), *extra]
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"compare_peers: {' '.join(cmd)} failed:\n{run.stderr}")
    found = re.search(r"([0-9.]+) ms median device time", run.stderr)
    if not found:
        sys.exit(f"compare_peers: no time in the output of linformer run:\n{run.stderr}")
    return wall, float(found.group(1)), out, run.stdout


def run_ours(args, env, folder, selector):
    """Median device ms, wall ms per forward (None with --no-wall) and the output of `linformer run`."""
    wall_ms = None
    if not args.no_wall:
        linformer_run(args, env, folder, selector, 0, 1)  # fills the kernel cache, so neither timed run compiles
        base, *_ = linformer_run(args, env, folder, selector, args.warmup, 1)
    wall, device_ms, out, _ = linformer_run(args, env, folder, selector, args.warmup, args.repeat + 1)
    if not args.no_wall and wall > base:  # not so under load, when the processes' start-up swings more
        wall_ms = (wall - base) * 1e3 / args.repeat
    return device_ms, wall_ms, load_file(out)["y"].numpy()


def save_profile(args, env, folder, selector, stem):
    """`linformer run --profile` of the module once more, its stages written to --profile-dir/STEM.txt."""
    os.makedirs(args.profile_dir, exist_ok=True)
    *_, stdout = linformer_run(args, env, folder, selector, args.warmup, 1, ["--profile"])
    with open(os.path.join(args.profile_dir, stem + ".txt"), "w") as f:
        f.write(stdout)


def errors(y, y_torch):
    """Largest absolute difference and ||y - y_torch|| / ||y_torch||, in double precision."""
    d = y.astype(np.float64) - y_torch.astype(np.float64)
    return float(np.abs(d).max()), float(np.linalg.norm(d) / np.linalg.norm(y_torch.astype(np.float64)))


# --- one module through every side ----------------------------------------------------------------------------------

def save_inputs(module, x, folder, opset, onnx):
    """The files the sides read: weights and input as safetensors, and, when onnx, the module as ONNX."""
    state = {key: value.contiguous() for key, value in module.state_dict().items()}
    save_file(state, os.path.join(folder, "model.safetensors"), metadata={"heads": "8"})
    save_file({"x": torch.from_numpy(x)}, os.path.join(folder, "x.safetensors"))
    if not onnx:
        return None
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the module's shape asserts, fixed by the trace
        torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["x"], output_names=["y"],
                          opset_version=opset)
    return path


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def compare(args, ours, name, n, factory):
    """The rows of one module: side, device time, wall time, fastest round, time against OpenVINO's, errors
    against PyTorch."""
    torch.manual_seed(n)
    module = factory().eval()
    x = torch.randn(1, n, 512).numpy()
    with tempfile.TemporaryDirectory() as folder:
        onnx_path = save_inputs(module, x, folder, args.opset, {"onnxruntime", "openvino"} & set(args.peers))
        if args.save_models:
            os.makedirs(args.save_models, exist_ok=True)
            stem = re.sub(r"[^a-z0-9]+", "-", f"{name}-n{n}".lower()).strip("-")
            shutil.copyfile(os.path.join(folder, "model.safetensors"),
                            os.path.join(args.save_models, stem + ".model.safetensors"))
        start = {"pytorch": lambda: pytorch_side(module, args), "onnxruntime": lambda: onnxruntime_side(onnx_path, args),
                 "openvino": lambda: openvino_side(onnx_path, args)}
        sides = [(peer_name(peer, args), start[peer]()) for peer in PEERS if peer in args.peers]
        sides += [(side, lambda x, e=env, s=selector: run_ours(args, e, folder, s)) for side, env, selector in ours]
        times = {side: [] for side, _ in sides}  # per side, per round: (device ms, wall ms)
        outputs = {}
        for _ in range(args.rounds):
            for side, forward in sides:
                device_ms, wall_ms, outputs[side] = forward(x)
                times[side].append((device_ms, wall_ms))
        for side, env, selector in ours if args.profile_dir else ():
            stem = re.sub(r"[^a-z0-9]+", "-", f"{name}-n{n}-{side}".lower()).strip("-")
            save_profile(args, env, folder, selector, stem)
    if "pytorch" in args.peers:
        y_torch = outputs[peer_name("pytorch", args)]
    else:  # the reference without its times: one forward
        with torch.no_grad():
            y_torch = module(torch.from_numpy(x)).numpy()
    openvino_ms = [w for _, w in times[peer_name("openvino", args)]] if "openvino" in args.peers else None
    rows = []
    for side, _ in sides:
        devices_ms, walls_ms = zip(*times[side])
        main_ms = [d if d is not None else w for d, w in times[side]]  # ours: device time; the peers: wall
        ratio = statistics.median(m / o for m, o in zip(main_ms, openvino_ms)) if openvino_ms else None
        rows.append((name, n, side, median_or_none(devices_ms), median_or_none(walls_ms), min(main_ms), ratio)
                    + errors(outputs[side], y_torch))
    return rows


# --- the report -----------------------------------------------------------------------------------------------------

def fmt(ms):
    return "-" if ms is None else f"{ms:.1f}"


def fmt_ratio(ratio):
    return "-" if ratio is None else f"{ratio:.2f}"


def print_row(row):
    name, n, side, device_ms, wall_ms, best_ms, ratio, max_abs, rel = row
    print(f"| {name} | {n} | {side} | {fmt(device_ms)} | {fmt(wall_ms)} | {fmt(best_ms)} | {fmt_ratio(ratio)} "
          f"| {max_abs:.1e} | {rel:.1e} |", flush=True)


def write_csv(path, rows, args, cpu, host_blas):
    """The rows with the machine and the settings (host_blas: our sides' libraries), written to a temporary beside
    path, then renamed."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["cpu", "threads", "repeat", "rounds", "work", "n", "side", "device_ms", "wall_ms", "best_ms",
                      "vs_openvino", "max_abs_error", "relative_error", "host_blas"])
        for name, n, side, device_ms, wall_ms, best_ms, ratio, max_abs, rel in rows:
            times = ["" if ms is None else f"{ms:.3f}" for ms in (device_ms, wall_ms, best_ms)]
            out.writerow([cpu, args.threads, args.repeat, args.rounds, name, n, side] + times
                         + ["" if ratio is None else f"{ratio:.3f}", f"{max_abs:.3e}", f"{rel:.3e}"]
                         + [host_blas.get(side, "")])
    os.replace(path + ".tmp", path)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    ours, host_blas = [], {}  # ours: (side, environment, selector); host_blas: side -> library
    for library in args.host_blas:
        env = program_env(args.threads)
        if library:
            env["LINFORMER_HOST_BLAS"] = library
        devices, blas = list_devices(args, env)
        for selector, device in devices:
            side = f"linformer, {device} ({selector})" + (f", {HOST_BLAS[library]}" if library else "")
            ours.append((side, env, selector))
            host_blas[side] = blas
    cpu = cpu_name()
    csv_path = args.csv or os.path.join(HERE, "results", cpu_slug(cpu) + "-peers.csv")
    print(f"{cpu}; d_model 512, 8 heads, k 256, batch 1, f32; {args.threads} threads; "
          f"{args.rounds} rounds of the sides in turn, each the median of {args.repeat} after {args.warmup} warm-up; "
          "ms a forward, median over the rounds and the fastest round; x OpenVINO: the median over the rounds of "
          f"the time divided by OpenVINO's in the same round; errors against PyTorch; ours: host BLAS "
          + "; ".join(sorted(set(host_blas.values()))))
    print("| work | n | side | device ms | wall ms | fastest round | x OpenVINO | max abs error | relative error |\n"
          "|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for name, n, factory in make_work(args):
        for row in compare(args, ours, name, n, factory):
            print_row(row)
            rows.append(row)
    write_csv(csv_path, rows, args, cpu, host_blas)
    print(f"rows written to {csv_path}")
    bad = [r for r in rows if not r[8] <= args.tolerance]
    for name, n, side, *_, rel in bad:
        print(f"compare_peers: {side} on {name} at n {n}: relative error {rel:.2e} above {args.tolerance:.0e}",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
