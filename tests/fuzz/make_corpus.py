#!/usr/bin/env python3
"""Writes the seed files of fuzz_safetensors into corpus_safetensors/ and
those of fuzz_loader into corpus_loader/.

A few small valid files (every dtype, metadata, a scalar, an empty tensor;
attention layers in lucidrains' names in each variant the loader infers) and
invalid ones one change away from valid, so the fuzzer starts near both edges.
Standard library only: python3 tests/fuzz/make_corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_safetensors")
OUT_LOADER = os.path.join(HERE, "corpus_loader")


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


def layer(d=8, heads=2, dh=4, kv_heads=2, n=6, k=3, share_kv=False, biases=True,
          dtype="F32", meta=True, drop=(), extra=None, reshape=None):
    """An attention layer in LinformerSelfAttention's state-dict names.
    Values are a deterministic ramp; the fuzzer only needs the structure."""
    q, kv = heads * dh, kv_heads * dh
    shapes = {"to_q.weight": [q, d], "to_k.weight": [kv, d], "proj_k": [n, k],
              "to_out.weight": [d, q], "to_out.bias": [d]}
    if not share_kv:
        shapes["to_v.weight"] = [kv, d]
        shapes["proj_v"] = [n, k]
    if biases:
        shapes["to_q.bias"] = [q]
        shapes["to_k.bias"] = [kv]
        if not share_kv:
            shapes["to_v.bias"] = [kv]
    if extra:
        shapes.update(extra)
    if reshape:
        shapes.update(reshape)
    for name in drop:
        shapes.pop(name, None)
    width = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}[dtype]
    header, data = {}, b""
    if meta:
        header["__metadata__"] = {"heads": str(heads), "format": "pt"}
    for name in sorted(shapes):
        count = 1
        for s in shapes[name]:
            count *= s
        vals = [((i * 37) % 17 - 8) / 16.0 for i in range(count)]
        if dtype == "F32":
            blob = struct.pack("<%df" % count, *vals)
        elif dtype == "F64":
            blob = struct.pack("<%dd" % count, *vals)
        elif dtype == "F16":
            blob = struct.pack("<%de" % count, *vals)
        else:  # BF16: the high half of the f32 bits
            blob = b"".join(struct.pack("<f", v)[2:] for v in vals)
        header[name] = entry(dtype, shapes[name], len(data), len(data) + len(blob))
        data += blob
    return safetensors(header, data)


def loader_seeds():
    return {
        "valid_headwise.safetensors": layer(),
        "valid_share_kv.safetensors": layer(share_kv=True),
        "valid_one_kv_head.safetensors": layer(kv_heads=1),
        "valid_no_biases_f16.safetensors": layer(biases=False, dtype="F16"),
        "valid_bf16_one_head.safetensors": layer(heads=1, dh=8, dtype="BF16"),
        "valid_f64_k_over_n.safetensors": layer(n=3, k=5, dtype="F64"),
        "bad_no_heads.safetensors": layer(meta=False),
        "bad_missing_out.safetensors": layer(drop=("to_out.weight",)),
        "bad_unknown_tensor.safetensors": layer(extra={"net.layers.0.w": [2]}),
        "bad_kv_rows.safetensors": layer(reshape={"to_k.weight": [3, 8]}),
        "bad_proj_v_shape.safetensors": layer(reshape={"proj_v": [6, 2]}),
        "bad_proj_v_alone.safetensors": layer(share_kv=True, extra={"proj_v": [6, 3]}),
        "bad_rank.safetensors": layer(reshape={"proj_k": [6, 3, 1]}),
    }


def write(folder, seeds):
    os.makedirs(folder, exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
    write(OUT_LOADER, loader_seeds())
