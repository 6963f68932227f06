"""Load test of linformer-serve on loopback: exact answers under dynamic batching.

    python bench/serve_load.py MODEL [--device SEL|all] [--gemm host|clblast] [--clients 4] [--requests 50]

Starts the server on 127.0.0.1 (free ports), then C clients each send R
requests of random lengths. Every answer is compared, bit for bit, with a
direct forward of the same input on the device that answered. With --bad,
one more client sends each kind of bad request while the others go on and
expects an error naming the problem; clients that hang up mid-request are
mixed in. With --hostile, another sends requests that lie about their
shapes and bytes, overflow, lack the access token, or are left half-sent
(serve_hostile.py), each of which must be refused. At the end a SIGTERM
must stop the server once the requests in flight are answered. Prints
requests/s, p50 and p99 latency and the batch sizes Triton formed; exits 1
on any mismatch, failed good request or unanswered bad one. Every loop is bounded in count and time.

With --grpc-only the server runs with --no-http: every client speaks gRPC,
the HTTP port must refuse connections, and SIGTERM must end the server with
status 0 (the bad requests, the mixed batch and the statistics, which go
through HTTP, are left out).
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np

import linformer_cl
import tritonclient.grpc as grpc
import tritonclient.http as http
from tritonclient.utils import InferenceServerException
from serve_hostile import DuringShutdown, HostileClient, read_status, stopped_while_starting

HOST = "127.0.0.1"


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind((HOST, 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def get_json(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    """linformer-serve in a child process, its log in a file."""

    def __init__(self, args, log_path):
        self.http, self.grpc, self.metrics = free_ports(3)
        self.url = f"http://{HOST}:{self.http}"
        self.name = pathlib.Path(args.model).name.split(".")[0]
        command = [sys.executable, "-m", "linformer_cl.serve", args.model, "--host", HOST,
                   "--http-port", str(self.http), "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics),
                   "--max-batch", str(args.max_batch), "--max-queue-delay-us", str(args.max_queue_delay_us),
                   "--exit-timeout-s", str(args.exit_timeout_s)]
        if args.device:
            command += ["--device", args.device]
        if args.grpc_only:
            command += ["--no-http"]
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds, grpc_only=False):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"serve_load: the server exited ({self.process.returncode}): see {self.log.name}")
            try:
                if grpc_only:
                    with self.client(grpc) as client:
                        if client.is_model_ready(self.name):
                            return client.get_model_config(self.name, as_json=True)["config"]
                    time.sleep(0.5)
                    continue
                urllib.request.urlopen(f"{self.url}/v2/models/{self.name}/ready", timeout=2).close()
                return get_json(f"{self.url}/v2/models/{self.name}/config")
            except (OSError, InferenceServerException):
                time.sleep(0.5)
        self.kill()
        raise SystemExit(f"serve_load: the server was not ready in {seconds} s: see {self.log.name}")

    def requests_taken(self):
        """Requests of the model that Triton has taken so far: answered (either way) or waiting to run."""
        with urllib.request.urlopen(f"http://{HOST}:{self.metrics}/metrics", timeout=5) as r:
            lines = r.read().decode().splitlines()
        names = ("nv_inference_request_success{", "nv_inference_request_failure{",
                 "nv_inference_pending_request_count{")
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines
                   if line.startswith(names) and f'model="{self.name}"' in line)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def client(self, protocol):
        """A client of Triton's HTTP or gRPC endpoint (the modules' InferenceServerClient)."""
        if protocol is grpc:
            return grpc.InferenceServerClient(f"{HOST}:{self.grpc}")
        return http.InferenceServerClient(f"{HOST}:{self.http}", network_timeout=60.0)


def make_input(rng, info, batch, n):
    if info.takes_tokens:
        return rng.integers(0, info.vocab, size=(batch, n), dtype=np.int64)
    return rng.standard_normal((batch, n, info.d_model)).astype(np.float32)


def infer(client, name, info, array):
    """(y, device selector) of one request; raises InferenceServerException on an error response."""
    protocol = grpc if isinstance(client, grpc.InferenceServerClient) else http
    dtype = {np.dtype(np.int64): "INT64", np.dtype(np.float32): "FP32"}.get(array.dtype, "FP64")
    tensor = protocol.InferInput("tokens" if info.takes_tokens else "x", list(array.shape), dtype)
    tensor.set_data_from_numpy(array)
    bounded = {"client_timeout": 60.0} if protocol is grpc else {}  # HTTP's: the client's network_timeout
    result = client.infer(name, [tensor], **bounded)
    return result.as_numpy("y"), result.as_numpy("device")[0, 0].decode()


class Load:
    """C clients of R requests each; what they sent, got and how long it took."""

    def __init__(self, server, info, args):
        self.server, self.info, self.args = server, info, args
        self.answers, self.latencies, self.failures = [], [], []
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + args.seconds

    def client(self, seed):
        rng = np.random.default_rng(seed)
        client = self.server.client(grpc if seed % 2 or self.args.grpc_only else http)
        try:
            for _ in range(self.args.requests):
                if time.monotonic() > self.deadline:
                    break
                n = int(rng.integers(1, min(self.args.max_n, self.info.max_seq_len) + 1))
                x = make_input(rng, self.info, int(rng.integers(1, 3)), n)
                start = time.monotonic()
                try:
                    y, device = infer(client, self.server.name, self.info, x)
                except (InferenceServerException, OSError) as e:
                    with self.lock:
                        self.failures.append(str(e))
                    continue
                with self.lock:
                    self.latencies.append(time.monotonic() - start)
                    self.answers.append((x, y, device))
        finally:
            client.close()

    def run(self, extra=()):
        threads = [threading.Thread(target=self.client, args=(seed,)) for seed in range(self.args.clients)]
        threads += [threading.Thread(target=fn) for fn in extra]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, self.deadline - time.monotonic() + 60))
        return time.monotonic() - start


def mismatches(answers, model_file, selectors):
    """How many answers differ in any bit from a direct forward on the device that gave them."""
    models = {s: linformer_cl.load(model_file, device=s) for s in selectors}
    try:
        bad = sum(1 for x, y, device in answers if not np.array_equal(models[device](x), y))
        per_device = {s: sum(1 for *_, d in answers if d == s) for s in selectors}
    finally:
        for m in models.values():
            m.close()
    return bad, per_device


def bad_requests(info):
    """(what, input array, a word the error must hold) for every kind of bad request."""
    rng = np.random.default_rng(7)
    good = make_input(rng, info, 1, min(5, info.max_seq_len))
    cases = [("n = 0", good[:, :0], "n = 0"),
             ("n above max_seq_len", make_input(rng, info, 1, info.max_seq_len + 1), "max_seq_len"),
             ("wrong rank", good[0], "shape")]
    if info.takes_tokens:
        cases += [("token id outside the vocabulary", np.full_like(good, info.vocab), "vocabulary"),
                  ("negative token id", np.full_like(good, -1), "vocabulary"),
                  ("wrong dtype", good.astype(np.float32), "data-type")]
    else:
        nan = good.copy()
        nan[0, -1, 0] = np.nan
        cases += [("NaN", nan, "NaN"), ("wrong width", make_input(rng, info, 1, 3)[:, :, 1:], "shape"),
                  ("wrong dtype", good.astype(np.float64), "data-type")]
    return cases


class BadClient:
    """Sends each bad request (and hangs up mid-request) while the load goes on; notes what came back."""

    def __init__(self, server, info, rounds):
        self.server, self.info, self.rounds = server, info, rounds
        self.wrong = []  # what a bad request got instead of an error naming its problem
        self.answered = 0

    def run(self):
        client = self.server.client(http)
        try:
            for _ in range(self.rounds):
                for what, array, word in bad_requests(self.info):
                    self.check(client, what, array, word)
                    hang_up(self.server, self.info)
        finally:
            client.close()

    def check(self, client, what, array, word):
        try:
            infer(client, self.server.name, self.info, array)
            self.wrong.append(f"{what}: answered without an error")
        except InferenceServerException as e:
            if word.lower() in str(e).lower() and e.status() == "400":
                self.answered += 1
            else:
                self.wrong.append(f"{what}: not a 400 that says \"{word}\": {e}")


def raw_request(server, info, array, close=True):
    """The bytes of one HTTP infer request (KServe v2 JSON)."""
    name, dtype = ("tokens", "INT64") if info.takes_tokens else ("x", "FP32")
    body = json.dumps({"inputs": [{"name": name, "shape": list(array.shape), "datatype": dtype,
                                   "data": array.ravel().tolist()}]}).encode()
    head = (f"POST /v2/models/{server.name}/infer HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n")
    return head.encode() + body


def hang_up(server, info):
    """A client that sends half a request and leaves, and one that leaves before its answer."""
    request = raw_request(server, info, make_input(np.random.default_rng(3), info, 1, 4))
    for part in (request[:len(request) // 2], request):
        with socket.create_connection((HOST, server.http), timeout=10) as s:
            s.sendall(part)


def send_together(server, info, arrays, then=lambda: None, wait_s=30):
    """Sends one raw request per array at once, calls then(), and reads each one's HTTP status."""
    requests = [raw_request(server, info, array) for array in arrays]  # all made first: sent close together
    sockets = [socket.create_connection((HOST, server.http), timeout=10) for _ in arrays]
    for sock, request in zip(sockets, requests):
        sock.sendall(request)
    then()
    statuses = []
    for sock in sockets:
        with sock:
            try:
                statuses.append(read_status(sock, wait_s))
            except OSError:
                statuses.append("")
    return statuses


def mixed_batch(server, info, tries=5):
    """Whether a bad request and three good ones, once Triton ran them as one batch, got 400 and 200s."""
    rng = np.random.default_rng(9)
    # As short as the good ones (NaN, not n above max_seq_len), so that all
    # four reach Triton's queue together at any model size.
    bad = np.full((1, 3), info.vocab, dtype=np.int64) if info.takes_tokens else make_input(rng, info, 1, 3)
    if not info.takes_tokens:
        bad[0, 1, 0] = np.nan
    for _ in range(tries):
        before = batch_sizes(server).get(4, 0)
        statuses = send_together(server, info, [bad] + [make_input(rng, info, 1, n) for n in (2, 3, 4)])
        if batch_sizes(server).get(4, 0) > before:
            return statuses == ["400", "200", "200", "200"]
    return False


def sigterm_while_busy(server, info, exit_timeout_s, count=4, around=None):
    """Sends `count` of the longest requests, SIGTERMs the server and reads their answers; `around`, a
    DuringShutdown, sends its own just before the signal and follows it with more.

    (answered, seconds from the signal to the last answer, exit status).
    """
    rng = np.random.default_rng(5)
    arrays = [make_input(rng, info, 1, info.max_seq_len) for _ in range(count)]
    signalled, before = [], server.requests_taken()

    def signal_once_taken():
        """SIGTERM once Triton holds all of them (sent is not yet received): a signal that came first would
        find nothing in flight and refuse them. A small model may have answered some by then."""
        deadline = time.monotonic() + 30
        while server.requests_taken() < before + count and time.monotonic() < deadline:
            time.sleep(0.002)
        if around:
            around.before()
        server.process.send_signal(signal.SIGTERM)
        signalled.append(time.monotonic())
        if around:
            around.after()

    statuses = send_together(server, info, arrays, then=signal_once_taken, wait_s=exit_timeout_s + 10)
    seconds = time.monotonic() - signalled[0]
    try:
        status = server.process.wait(timeout=exit_timeout_s + 60)
    except subprocess.TimeoutExpired:
        server.kill()
        status = f"killed after {exit_timeout_s + 60} s"
    if around:
        around.finish()
    return statuses.count("200"), seconds, status


def batch_sizes(server):
    """{batch size: forwards} that Triton ran, from the model's statistics."""
    stats = get_json(f"{server.url}/v2/models/{server.name}/stats")["model_stats"][0]
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--device", help="selector or `all` (default: the library's default device)")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--requests", type=int, default=50, help="requests per client")
    p.add_argument("--max-n", type=int, default=4096, help="longest sequence sent (at most max_seq_len)")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--max-queue-delay-us", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=300, help="the load stops sending after this")
    p.add_argument("--exit-timeout-s", type=int, default=120, help="the server's: how long SIGTERM waits")
    p.add_argument("--bad", type=int, default=0, metavar="ROUNDS", help="rounds of every bad request")
    p.add_argument("--hostile", type=int, default=0, metavar="ROUNDS",
                   help="rounds of every hostile request (serve_hostile.py): lies, overflows, tokens, connections")
    p.add_argument("--grpc-only", action="store_true", help="serve and send over gRPC alone (the server's --no-http)")
    p.add_argument("--gemm", choices=("host", "clblast"),
                   help="LINFORMER_GEMM of the server and of the direct forwards (default: as set, else the "
                        "library's choice for the device)")
    p.add_argument("--log", default="serve_load.log", help="the server's output")
    args = p.parse_args()
    if args.gemm:  # read as each context is made: the server's instances inherit it, the direct forwards here too
        os.environ["LINFORMER_GEMM"] = args.gemm
    return args


def report(load, elapsed, sizes, exact, per_device):
    lat = np.array(load.latencies) * 1000 if load.latencies else np.zeros(1)
    print(f"serve_load: {len(load.answers)} answers in {elapsed:.1f} s, {len(load.answers) / elapsed:.1f} "
          f"requests/s, latency p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms")
    print("serve_load: batches formed (size x forwards): "
          + ", ".join(f"{size} x {count}" for size, count in sorted(sizes.items())))
    print(f"serve_load: {exact} answers bit for bit equal to a direct forward; answers per device: {per_device}")
    for failure in load.failures[:5]:
        print(f"serve_load: a good request failed: {failure}")


def http_refused(server):
    try:
        socket.create_connection((HOST, server.http), timeout=5).close()
        return False
    except ConnectionRefusedError:
        return True


def main_grpc_only(args):
    server = Server(args, args.log)
    try:
        config = server.wait_ready(180, grpc_only=True)
        selectors = config["parameters"]["devices"]["string_value"].split(",")
        with linformer_cl.load(args.model, device=selectors[0]) as model:
            info = model.info
        load = Load(server, info, args)
        elapsed = load.run()
        refused = http_refused(server)
        server.process.send_signal(signal.SIGTERM)
        status = server.process.wait(timeout=args.exit_timeout_s + 60)
    finally:
        server.kill()
    wrong, per_device = mismatches(load.answers, args.model, selectors)
    lat = np.array(load.latencies) * 1000 if load.latencies else np.zeros(1)
    print(f"serve_load: gRPC alone: {len(load.answers)} answers in {elapsed:.1f} s, p50 {np.percentile(lat, 50):.1f} "
          f"ms, {len(load.answers) - wrong} bit for bit equal to a direct forward ({per_device}); HTTP port "
          f"{'refused' if refused else 'OPEN'}; SIGTERM: exit status {status}")
    for failure in load.failures[:5]:
        print(f"serve_load: a good request failed: {failure}")
    failed = wrong + len(load.failures) + (not refused) + (status != 0)
    failed += args.clients * args.requests - len(load.answers) - len(load.failures)  # never sent: deadline
    print(f"serve_load: {len(load.answers) - wrong + refused + (status == 0)} passed, {failed} failed")
    return 1 if failed else 0


def main():
    args = parse_args()
    if args.grpc_only:
        return main_grpc_only(args)
    starting = [(f"{sig.name} once {when} is reached",
                 stopped_while_starting(lambda: Server(args, f"{args.log}.{sig.name}"), sig, when))
                for sig in (signal.SIGTERM, signal.SIGINT) for when in ("repository", "triton", "live")
                ] if args.hostile else []
    server = Server(args, args.log)
    try:
        config = server.wait_ready(180)
        selectors = config["parameters"]["devices"]["string_value"].split(",")
        with linformer_cl.load(args.model, device=selectors[0]) as model:
            info = model.info
        load = Load(server, info, args)
        bad = BadClient(server, info, args.bad)
        hostile = HostileClient(server, info, args.hostile, args.max_batch)
        elapsed = load.run(([bad.run] if args.bad else []) + ([hostile.run] if args.hostile else []))
        mixed = mixed_batch(server, info)
        sizes = batch_sizes(server)
        around = DuringShutdown(server, info, args.max_batch, args.exit_timeout_s + 10) if args.hostile else None
        answered, sigterm_s, status = sigterm_while_busy(server, info, args.exit_timeout_s, around=around)
    finally:
        server.kill()
    wrong, per_device = mismatches(load.answers, args.model, selectors)
    report(load, elapsed, sizes, len(load.answers) - wrong, per_device)
    for line in bad.wrong:
        print(f"serve_load: bad request: {line}")
    for line in hostile.wrong:
        print(f"serve_load: hostile request not refused: {line}")
    shutdown_wrong = (around.wrong if around else []) + [f"{sig} while starting: {got}" for sig, got in starting if got]
    for line in shutdown_wrong:
        print(f"serve_load: around the shutdown: {line}")
    if args.hostile:
        print(f"serve_load: {hostile.refused} hostile requests refused with the server serving on; around the "
              f"SIGTERM, {around.held} held (after it, HTTP got {around.http_after}, gRPC {around.grpc_after}); "
              f"SIGTERM and SIGINT while starting: {sum(not got for _, got in starting)} of {len(starting)} exited 0, "
              "leaving nothing")
    print(f"serve_load: {bad.answered} bad requests answered with an error naming the problem; "
          f"a bad request in one batch with three good ones: {'400 and 200s' if mixed else 'FAILED'}; "
          f"SIGTERM: {answered} of 4 requests taken before it answered in {sigterm_s:.1f} s, "
          f"server exit status {status}")
    passed = len(load.answers) - wrong + bad.answered + hostile.refused + mixed + answered
    passed += (around.held if around else 0) + sum(not got for _, got in starting)
    failed = wrong + len(load.failures) + len(bad.wrong) + len(hostile.wrong) + (not mixed) + (4 - answered)
    failed += len(shutdown_wrong)
    failed += status != 0
    failed += args.clients * args.requests - len(load.answers) - len(load.failures)  # never sent: deadline
    print(f"serve_load: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
