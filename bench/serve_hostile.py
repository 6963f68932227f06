"""Hostile requests for the serving load test (serve_load.py --hostile).

Requests that lie about themselves: a declared shape against the bytes sent
(HTTP JSON, HTTP's binary tensor extension, gRPC raw and typed contents),
shapes that overflow 32 or 64 bits or are negative, inputs and outputs that
do not exist, model names and versions with path characters, the
repository, shared-memory, trace and logging endpoints without the access
token or with a wrong one, and connections opened and dropped or left
half-open. Each must get an error and leave the server serving; the good
load running beside them checks that it still answers exactly.

Left out, because they end Triton itself (docs/serving.md): an HTTP JSON
request whose shape is too large to allocate or whose data nests 100,000
deep, and a gRPC request of shape [0, 0, ...] with no contents, which is
never answered. (A gRPC request with two raw contents for its one input is
answered from the first.)

Around the SIGTERM that ends the load (serve_load.py), DuringShutdown sends
gRPC requests and a half-sent HTTP one to be in flight, a keep-alive
connection's next request, a second SIGTERM, and new HTTP connections and
gRPC requests until the server exits: each must be answered, closed or
refused, never left waiting. Requests as large as the server takes (every
request at --max-batch and max_seq_len at once, a body padded with 64 MiB of
JSON whitespace, a Content-Length of 2^40 left unsent) go with the other
probes. stopped_while_starting sends SIGTERM or SIGINT to a server starting
(its model repository written, its Triton running, Triton answering before
the model is in it): it must exit 0 and leave no process and no file.
"""
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

import grpc as grpcio
import numpy as np
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as service

HOST = "127.0.0.1"
WRONG_TOKEN = [("triton-access-token", "0" * 32)]


def read_status(sock, seconds):
    """The HTTP status code of the answer on a socket ("" if none came)."""
    sock.settimeout(seconds)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    line = data.split(b"\r\n", 1)[0].split()
    return line[1].decode() if len(line) > 1 else ""


def http_request(port, method, path, body=b"", headers=()):
    """The HTTP status of one request on a fresh connection ("" if the server closed it unanswered)."""
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers)
    with socket.create_connection((HOST, port), timeout=30) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        return read_status(s, 30)


class Tensor:
    """The model's input as a request describes it: name, datatype, a good shape and its bytes; rows and batch
    make it longer."""

    def __init__(self, info, rows=2, batch=1):
        self.name, self.dtype = ("tokens", "INT64") if info.takes_tokens else ("x", "FP32")
        self.shape = [batch, rows] if info.takes_tokens else [batch, rows, info.d_model]
        self.nbytes = int(np.prod(self.shape)) * 8 if info.takes_tokens else int(np.prod(self.shape)) * 4
        self.count = int(np.prod(self.shape))

    def with_seq(self, *dims):
        """The good shape with its leading dimensions replaced."""
        return list(dims) + self.shape[len(dims):]


def http_probes(t, model):
    """(what, method, path, body, headers) of every hostile HTTP request."""
    infer = f"/v2/models/{model}/infer"

    def as_json(shape, data, name=t.name, extra=None):
        body = {"inputs": [{"name": name, "datatype": t.dtype, "shape": shape, "data": data}]}
        return json.dumps({**body, **(extra or {})}).encode()

    def binary(shape, size, declared=None, head_length=None):
        head = json.dumps({"inputs": [{"name": t.name, "datatype": t.dtype, "shape": shape, "parameters": {
            "binary_data_size": size if declared is None else declared}}]}).encode()
        length = len(head) if head_length is None else head_length
        return head + b"\0" * size, [("Inference-Header-Content-Length", length),
                                     ("Content-Type", "application/octet-stream")]

    one = [1] * t.count
    probes = [("JSON data one short", infer, as_json(t.shape, one[1:])),
              ("JSON data one long", infer, as_json(t.shape, one + [1])),
              ("JSON negative dimension", infer, as_json(t.with_seq(1, -2), one)),
              ("JSON unknown input", infer, as_json(t.shape, one, name="z")),
              ("JSON unknown output", infer, as_json(t.shape, one, extra={"outputs": [{"name": "z"}]})),
              ("JSON strings as data", infer, as_json(t.shape, ["a"] * t.count)),
              ("JSON no inputs", infer, b'{"inputs": []}'),
              ("JSON cut short", infer, b'{"inputs": [')]
    probes = [(what, "POST", path, body, ()) for what, path, body in probes]
    for what, args in [("binary bytes one short", (t.shape, t.nbytes - 1)),
                       ("binary bytes one long", (t.shape, t.nbytes + 1)),
                       ("binary declares 1 GiB", (t.shape, t.nbytes, 1 << 30)),
                       ("binary declares 8 bytes", (t.shape, t.nbytes, 8)),
                       ("binary shape of 2^40 rows", (t.with_seq(1, 1 << 40), t.nbytes)),
                       ("binary header length past the body", (t.shape, t.nbytes, None, 999999)),
                       ("binary header length negative", (t.shape, t.nbytes, None, -5))]:
        body, headers = binary(*args)
        probes.append((what, "POST", infer, body, headers))
    for what, method, path, body in [("repository index", "POST", "/v2/repository/index", b"{}"),
                                     ("unload", "POST", f"/v2/repository/models/{model}/unload", b"{}"),
                                     ("shared memory status", "GET", "/v2/systemsharedmemory/status", b""),
                                     ("shared memory register", "POST", "/v2/systemsharedmemory/region/r/register",
                                      b'{"key": "/x", "offset": 0, "byte_size": 8}'),
                                     ("trace setting", "POST", "/v2/trace/setting", b'{"trace_level": ["TIMESTAMPS"]}'),
                                     ("logging", "POST", "/v2/logging", b'{"log_verbose_level": 1}')]:
        probes.append((what + " without the token", method, path, body, ()))
        probes.append((what + " with a wrong token", method, path, body, WRONG_TOKEN))
    for path in ["/v2/models/..%2F..%2Fetc/ready", "/v2/models/../../etc/passwd/ready", "/v2/models/%00/ready",
                 "/v2/models/" + "a" * 100000 + "/ready", f"/v2/models/{model}/versions/-1/ready"]:
        probes.append((f"path {path[:32]}", "GET", path, b"", ()))
    probes.append(("version past 64 bits", "POST", f"/v2/models/{model}/versions/99999999999999999999/infer",
                   as_json(t.shape, one), ()))
    return probes


def grpc_probes(t, model, max_batch):
    """(what, request) of every hostile gRPC infer request."""
    def request(shape, raw=None, name=model, version=""):
        r = pb.ModelInferRequest(model_name=name, model_version=version)
        tensor = r.inputs.add(name=t.name, datatype=t.dtype)
        tensor.shape.extend(shape)
        r.raw_input_contents.append(b"\0" * t.nbytes if raw is None else raw)
        return r

    def typed_short():
        r = pb.ModelInferRequest(model_name=model)
        tensor = r.inputs.add(name=t.name, datatype=t.dtype)
        tensor.shape.extend(t.shape)
        field = tensor.contents.int64_contents if t.dtype == "INT64" else tensor.contents.fp32_contents
        field.extend([0] * (t.count - 1))
        return r

    return [("raw contents one short", request(t.shape, b"\0" * (t.nbytes - 1))),
            ("raw contents one long", request(t.shape, b"\0" * (t.nbytes + 1))),
            ("shape of 2^40 rows", request(t.with_seq(1, 1 << 40))),
            ("shape of 2^63-1 rows", request(t.with_seq(1, (1 << 63) - 1))),
            ("shape whose product overflows 64 bits", request(t.with_seq(1 << 31, 1 << 31))),
            ("negative dimension", request(t.with_seq(1, -2))),
            ("every dimension -1", request([-1] * len(t.shape))),
            ("batch 0 of 2 rows", request(t.with_seq(0, 2), b"")),
            ("rank 5", request([1, 1, 1] + t.shape[1:])),
            ("typed contents one short", typed_short()),
            ("model name with path characters", request(t.shape, name="../../etc/passwd")),
            ("version -7", request(t.shape, version="-7")),
            ("batch above --max-batch", request(t.with_seq(max_batch + 1), b"\0" * t.nbytes * (max_batch + 1)))]


RESTRICTED_RPCS = [("RepositoryIndex", {}), ("RepositoryModelUnload", "model"), ("SystemSharedMemoryRegister",
                   {"name": "r", "key": "/x", "byte_size": 8}), ("TraceSetting", {}), ("LogSettings", {})]


class HostileClient:
    """Sends every hostile request `rounds` times while the load goes on; notes what was not refused."""

    def __init__(self, server, info, rounds, max_batch):
        self.server, self.rounds, self.info = server, rounds, info
        self.tensor, self.max_batch = Tensor(info), max_batch
        self.wrong = []  # what a hostile request got instead of an error
        self.refused = 0

    def note(self, what, refused, got):
        if refused:
            self.refused += 1
        else:
            self.wrong.append(f"{what}: {got}")

    def run(self):
        """Every probe, `rounds` times; the server's process must still run after each round."""
        for _ in range(self.rounds):
            self.over_http()
            self.over_grpc()
            self.connections()
            self.largest()

    def over_http(self):
        for what, method, path, body, headers in http_probes(self.tensor, self.server.name):
            try:
                status = http_request(self.server.http, method, path, body, headers)
            except OSError as e:
                status = f"no answer ({e})"
            # Triton answers some lies with 500 and a 100 kB path with a reset: refused all the same.
            self.note(f"HTTP {what}", status[:1] != "2", f"status {status}")

    def over_grpc(self):
        with grpcio.insecure_channel(f"{HOST}:{self.server.grpc}") as channel:
            stub = service.GRPCInferenceServiceStub(channel)
            calls = [(what, stub.ModelInfer, r, None) for what, r in grpc_probes(self.tensor, self.server.name,
                                                                                self.max_batch)]
            for name, fields in RESTRICTED_RPCS:
                fields = {"model_name": self.server.name} if fields == "model" else fields
                r = getattr(pb, name + "Request")(**fields)
                calls += [(f"{name} without the token", getattr(stub, name), r, None),
                          (f"{name} with a wrong token", getattr(stub, name), r, WRONG_TOKEN)]
            for what, call, r, metadata in calls:
                try:
                    call(r, timeout=30, metadata=metadata)
                    self.note(f"gRPC {what}", False, "answered OK")
                except grpcio.RpcError as e:
                    code = e.code()
                    self.note(f"gRPC {what}", code != grpcio.StatusCode.DEADLINE_EXCEEDED, code.name)

    def connections(self, dropped=300, half_open=50):
        """Connections opened and dropped at once, and requests left half-sent while the load goes on."""
        for _ in range(dropped):
            socket.create_connection((HOST, self.server.http), timeout=10).close()
        head = (f"POST /v2/models/{self.server.name}/infer HTTP/1.1\r\nHost: {HOST}\r\n"
                "Content-Length: 1000000\r\n\r\n{").encode()
        held = [socket.create_connection((HOST, self.server.http), timeout=10) for _ in range(half_open)]
        for s in held:
            s.sendall(head)
        for _ in range(dropped // 3):
            with grpcio.insecure_channel(f"{HOST}:{self.server.grpc}") as channel:
                grpcio.channel_ready_future(channel).result(timeout=10)
        for s in held:
            s.close()
        alive = self.server.process.poll() is None
        self.note(f"{dropped} connections dropped, {half_open} half-open, {dropped // 3} gRPC channels", alive,
                  "the server exited")

    def largest(self):
        """As much as the server takes: every request at once at --max-batch and max_seq_len, a good body padded
        with 64 MiB of JSON whitespace (answered), a Content-Length of 2^40 with the body never sent (left open
        beside them)."""
        port, name = self.server.http, self.server.name
        big = Tensor(self.info, self.info.max_seq_len, self.max_batch)
        body = json.dumps({"inputs": [{"name": big.name, "datatype": big.dtype, "shape": big.shape,
                                       "data": [0] * big.count}]}).encode()
        unsent = socket.create_connection((HOST, port), timeout=10)
        unsent.sendall(f"POST /v2/models/{name}/infer HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {1 << 40}"
                       "\r\n\r\n{".encode())
        statuses = [None] * 8
        def one(i):
            statuses[i] = http_request(port, "POST", f"/v2/models/{name}/infer", body)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(statuses))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.note(f"{len(statuses)} requests of {big.shape} at once", statuses == ["200"] * len(statuses),
                  f"statuses {statuses}")
        padded = body[:-1] + b" " * (64 << 20) + b"}"
        status = http_request(port, "POST", f"/v2/models/{name}/infer", padded)
        self.note("a body padded with 64 MiB of whitespace", status == "200", f"status {status}")
        unsent.close()
        self.note("a Content-Length of 2^40 left unsent", self.server.process.poll() is None, "the server exited")


class DuringShutdown:
    """Requests around the SIGTERM that stops the server (serve_load.py sigterm_while_busy): before() puts
    some in flight, after() follows the signal with a second one and new requests until the server exits,
    finish() says what was left waiting or failed (each answer, close or refusal came within `seconds`)."""

    def __init__(self, server, info, max_batch, seconds):
        self.server, self.seconds = server, seconds
        self.tensor = Tensor(info, info.max_seq_len, max_batch)
        self.small = Tensor(info)
        self.wrong, self.held, self.after_signal = [], 0, []

    def note(self, what, ok, got):
        if ok:
            self.held += 1
        else:
            self.wrong.append(f"{what}: {got}")

    def grpc_request(self, t):
        r = pb.ModelInferRequest(model_name=self.server.name)
        r.inputs.add(name=t.name, datatype=t.dtype).shape.extend(t.shape)
        r.raw_input_contents.append(b"\0" * t.nbytes)
        return r

    def http_bytes(self, t, close=True):
        body = json.dumps({"inputs": [{"name": t.name, "datatype": t.dtype, "shape": t.shape,
                                       "data": [0] * t.count}]}).encode()
        return (f"POST /v2/models/{self.server.name}/infer HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: "
                f"{len(body)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body

    def before(self):
        self.channel = grpcio.insecure_channel(f"{HOST}:{self.server.grpc}")
        self.stub = service.GRPCInferenceServiceStub(self.channel)
        self.futures = [self.stub.ModelInfer.future(self.grpc_request(self.tensor), timeout=self.seconds)
                        for _ in range(4)]
        request = self.http_bytes(self.tensor)
        self.half = socket.create_connection((HOST, self.server.http), timeout=10)
        self.half.sendall(request[:len(request) // 2])
        self.keep = socket.create_connection((HOST, self.server.http), timeout=10)
        self.keep.sendall(self.http_bytes(self.small, close=False))
        self.keep_first = read_status(self.keep, self.seconds)

    def after(self):
        self.follower = threading.Thread(target=self.follow)
        self.follower.start()

    def follow(self):
        """A second SIGTERM, then a new HTTP connection's request and a gRPC request every 0.2 s until the
        server has exited; each outcome (status, close, refusal, gRPC code) is kept, a wait past `seconds`
        as "waited"."""
        time.sleep(0.5)
        if self.server.process.poll() is None:
            self.server.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.seconds
        while self.server.process.poll() is None and time.monotonic() < deadline:
            try:
                with socket.create_connection((HOST, self.server.http), timeout=10) as s:
                    s.sendall(self.http_bytes(self.small))
                    http_got = read_status(s, self.seconds) or "closed"
            except socket.timeout:
                http_got = "waited"
            except OSError as e:
                http_got = type(e).__name__
            try:
                self.stub.ModelInfer(self.grpc_request(self.small), timeout=self.seconds)
                grpc_got = "OK"
            except grpcio.RpcError as e:
                grpc_got = e.code().name
            self.after_signal.append((http_got, grpc_got))
            time.sleep(0.2)

    def finish(self):
        """After the server's exit: what each request got."""
        self.follower.join()
        codes = []
        for f in self.futures:
            try:
                f.result()
                codes.append("OK")
            except grpcio.RpcError as e:
                codes.append(e.code().name)
        self.note("4 gRPC requests in flight at SIGTERM", codes == ["OK"] * 4, f"codes {codes}")
        try:
            half = read_status(self.half, 10) or "closed"
        except socket.timeout:
            half = "waited"
        except OSError as e:
            half = type(e).__name__
        self.note("a half-sent request at SIGTERM", half != "waited", half)
        try:
            self.keep.sendall(self.http_bytes(self.small))
            keep = read_status(self.keep, 10) or "closed"
        except socket.timeout:
            keep = "waited"
        except OSError as e:
            keep = type(e).__name__
        self.note("a keep-alive connection's requests before and after", self.keep_first == "200" and
                  keep != "waited", f"{self.keep_first}, then {keep}")
        http_got = {h for h, _ in self.after_signal}
        grpc_got = {g for _, g in self.after_signal}
        self.note("new HTTP connections after SIGTERM", bool(http_got) and "waited" not in http_got,
                  sorted(http_got))
        self.note("new gRPC requests after SIGTERM", bool(grpc_got) and "DEADLINE_EXCEEDED" not in grpc_got,
                  sorted(grpc_got))
        self.http_after, self.grpc_after = sorted(http_got), sorted(grpc_got)
        for s in (self.half, self.keep):
            s.close()
        self.channel.close()


def descendants(pid):
    """Every process below pid, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            pass
    found, todo = [], [pid]
    while todo:
        parent_pid = todo.pop()
        kids = [c for c, parent in parents.items() if parent == parent_pid]
        found += kids
        todo += kids
    return found


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def triton_live(server):
    try:
        return http_request(server.http, "GET", "/v2/health/live") == "200"
    except OSError:
        return False


def stopped_while_starting(start, sig, when, seconds=60):
    """A server from start(), with a temporary folder of its own (TMPDIR), sent sig once `when`: "repository"
    (its model repository is written there), "triton" (its Triton runs) or "live" (Triton answers, before the
    model is in it). "" when it exited 0 within `seconds`, left none of its processes running and nothing in
    the folder, else what went wrong. What it left is killed (its own processes only: those below it when the
    signal went)."""
    with tempfile.TemporaryDirectory(prefix="serve-hostile-") as tmp:
        given = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = tmp
        try:
            server = start()
        finally:
            os.environ.pop("TMPDIR") if given is None else os.environ.update(TMPDIR=given)

        def reached(below):
            if when == "repository":
                return bool(os.listdir(tmp))
            triton = any(command_name(p).startswith("tritonserver") for p in below)
            return triton and (when == "triton" or triton_live(server))

        deadline = time.monotonic() + seconds
        below = []
        while server.process.poll() is None and time.monotonic() < deadline:
            below = descendants(server.process.pid)
            if reached(below):
                break
            time.sleep(0.002)
        server.process.send_signal(sig)
        try:
            status = server.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            server.kill()
            status = f"none in {seconds} s"
        left = []
        for _ in range(100):  # what Triton ends on its own ends in a few seconds
            left = [p for p in below if command_name(p)]
            if not left:
                break
            time.sleep(0.1)
        for p in left:
            os.kill(p, signal.SIGKILL)
        wrong = [f"exit status {status}"] if status != 0 else []
        wrong += [f"left {command_name(p) or p} running" for p in left[:3]]
        wrong += [f"left {name} in its temporary folder" for name in os.listdir(tmp)[:3]]
    return "; ".join(wrong)
