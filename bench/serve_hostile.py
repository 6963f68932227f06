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
"""
import json
import socket

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
    """The model's input as a request describes it: name, datatype, a good shape and its bytes."""

    def __init__(self, info):
        self.name, self.dtype = ("tokens", "INT64") if info.takes_tokens else ("x", "FP32")
        self.shape = [1, 2] if info.takes_tokens else [1, 2, info.d_model]
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
        self.server, self.rounds = server, rounds
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
