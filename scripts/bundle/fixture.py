#!/usr/bin/env python3
"""A PyTorch fixture (tests/data/pytorch/NAME.io.safetensors: x and the expected y)
for a program run, with the standard library only:
  fixture.py input IO OUT   writes IO's tensors but y to OUT (the run's input)
  fixture.py compare IO Y   prints ||y - expected|| / ||expected||; exits 1 above 1e-4
"""
import json
import math
import struct
import sys
from array import array


def read(path):
    """The tensors of a safetensors file: {name: (header entry, raw bytes)}."""
    with open(path, "rb") as f:
        blob = f.read()
    size = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + size])
    header.pop("__metadata__", None)
    data = blob[8 + size:]
    return {k: (v, data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def write(path, tensors):
    header, offset = {}, 0
    for name, (entry, raw) in tensors.items():
        header[name] = {"dtype": entry["dtype"], "shape": entry["shape"],
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, raw in tensors.values():
            f.write(raw)


def floats(tensor):
    entry, raw = tensor
    assert entry["dtype"] == "F32", entry
    return array("f", raw)


def main(command, io_path, other):
    io = read(io_path)
    if command == "input":
        write(other, {k: v for k, v in io.items() if k != "y"})
        return 0
    want, got = floats(io["y"]), floats(read(other)["y"])
    if len(want) != len(got):
        print(f"y has {len(got)} values, the fixture {len(want)}")
        return 1
    num = sum((a - b) ** 2 for a, b in zip(got, want))
    err = math.sqrt(num / sum(b * b for b in want))
    print(f"relative error {err:.3g} against the fixture's y")
    return 0 if err <= 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("input", "compare"):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
