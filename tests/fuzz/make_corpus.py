#!/usr/bin/env python3
"""Writes the seed files of fuzz_safetensors into corpus_safetensors/.

A few small valid files (every dtype, metadata, a scalar, an empty tensor) and
invalid ones one change away from valid, so the fuzzer starts near both edges.
Standard library only: python3 tests/fuzz/make_corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_safetensors")


def safetensors(header, data, header_len=None):
    """8-byte little-endian length, JSON padded with spaces to 8 bytes, data."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def main():
    q = struct.pack("<6f", 0.5, -1.25, 3.0, 1e-3, -7.5, 2.0)
    k = struct.pack("<6H", 0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00, 0x7E00)  # F16 edges
    attention = safetensors(
        {
            "__metadata__": {"heads": "2", "format": "pt"},
            "to_q.weight": entry("F32", [2, 3], 0, 24),
            "proj_k": entry("F16", [3, 2], 24, 36),
        },
        q + k,
    )

    data = (
        struct.pack("<2H", 0x3F80, 0xC049)  # BF16 1.0, -3.140625
        + struct.pack("<2d", 1.5, -1e300)
        + struct.pack("<3i", -7, 0, 2**31 - 1)
        + struct.pack("<2q", -1, 2**40)
        + struct.pack("<f", 0.25)
    )
    dtypes = safetensors(
        {
            "b": entry("BF16", [2], 0, 4),
            "d": entry("F64", [1, 2], 4, 20),
            "i": entry("I32", [3], 20, 32),
            "l": entry("I64", [2, 1], 32, 48),
            "scalar": entry("F32", [], 48, 52),
            "empty": entry("F32", [0, 4], 52, 52),
        },
        data,
    )

    overlap = safetensors(
        {"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 8, 24)}, bytes(range(1, 25))
    )
    length = safetensors({"to_q.weight": entry("F32", [4, 8], 0, 100)}, bytes(100))
    past_end = safetensors({"w": entry("I64", [1], 0, 8)}, bytes(8), header_len=4096)

    seeds = {
        "valid_attention.safetensors": attention,
        "valid_all_dtypes.safetensors": dtypes,
        "bad_overlap.safetensors": overlap,
        "bad_length.safetensors": length,
        "bad_header_length.safetensors": past_end,
    }
    os.makedirs(OUT, exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
