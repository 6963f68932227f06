#!/usr/bin/env python3
"""Writes the seed files of fuzz_safetensors into corpus_safetensors/, those
of fuzz_loader into corpus_loader/ and those of fuzz_model into corpus_model/.

A few small valid files (every dtype, metadata, a scalar, an empty tensor;
attention layers in lucidrains' names in each variant the loader infers;
tiny whole models in lucidrains' and fairseq's names) and
invalid ones one change away from valid, so the fuzzer starts near both edges.
Standard library only: python3 tests/fuzz/make_corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_safetensors")
OUT_LOADER = os.path.join(HERE, "corpus_loader")
OUT_MODEL = os.path.join(HERE, "corpus_model")


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
    """An attention layer in LinformerSelfAttention's state-dict names."""
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
    return tensors(shapes, dtype, {"heads": str(heads), "format": "pt"} if meta else None)


def tensors(shapes, dtype="F32", metadata=None):
    """A safetensors file of the given names and shapes, in sorted order.
    Values are a deterministic ramp; the fuzzer only needs the structure."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
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


def lucid_model(layers=1, d=4, ff=8, n=4, k=2, vocab=0, glu=False, drop=(), reshape=None,
                heads="1", dtype="F16", skip=()):
    """A lucidrains Linformer (vocab 0) or LinformerLM stack, tiny, so that a
    seed stays under the fuzzer's -max_len."""
    stem = "linformer.net.layers." if vocab else "net.layers."
    shapes = {}
    for i in (i for i in range(layers) if i not in skip):
        a, f = "%s%d.0." % (stem, i), "%s%d.1." % (stem, i)
        for w in ("to_q", "to_k", "to_v", "to_out"):
            shapes[a + "fn.%s.weight" % w] = [d, d]
        shapes[a + "fn.to_out.bias"] = [d]
        shapes[a + "fn.proj_k"] = [n, k]
        shapes[a + "fn.proj_v"] = [n, k]
        for x in (a, f):
            shapes[x + "norm.weight"] = [d]
            shapes[x + "norm.bias"] = [d]
        shapes[f + "fn.w1.weight"] = [2 * ff if glu else ff, d]
        shapes[f + "fn.w1.bias"] = [2 * ff if glu else ff]
        shapes[f + "fn.w2.weight"] = [d, ff]
        shapes[f + "fn.w2.bias"] = [d]
    if vocab:
        shapes.update({"token_emb.weight": [vocab, d], "pos_emb.weight": [n, d],
                       "to_logits.weight": [vocab, d], "to_logits.bias": [vocab]})
    shapes.update(reshape or {})
    for name in drop:
        shapes.pop(name, None)
    return tensors(shapes, dtype, {"heads": heads, "format": "pt"})


def fairseq_model(layers=1, d=4, ff=8, n=4, k=2, vocab=6, shared=True):
    """fairseq's Linformer sentence encoder: post-norm, token input, one
    compress_layer for every layer (or compress_k/compress_v per layer)."""
    stem = "encoder.sentence_encoder."
    shapes = {stem + "embed_tokens.weight": [vocab, d], stem + "embed_positions.weight": [n + 2, d],
              stem + "emb_layer_norm.weight": [d], stem + "emb_layer_norm.bias": [d]}
    if shared:
        shapes[stem + "compress_layer.weight"] = [k, n]
    for i in range(layers):
        a = "%slayers.%d." % (stem, i)
        for w in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[a + "self_attn.%s.weight" % w] = [d, d]
            shapes[a + "self_attn.%s.bias" % w] = [d]
        if not shared:
            shapes[a + "self_attn.compress_k.weight"] = [k, n]
            shapes[a + "self_attn.compress_v.weight"] = [k, n]
        for x in ("self_attn_layer_norm", "final_layer_norm"):
            shapes[a + x + ".weight"] = [d]
            shapes[a + x + ".bias"] = [d]
        shapes[a + "fc1.weight"] = [ff, d]
        shapes[a + "fc1.bias"] = [ff]
        shapes[a + "fc2.weight"] = [d, ff]
        shapes[a + "fc2.bias"] = [d]
    return tensors(shapes, "F16", {"heads": "2", "padding_idx": "1"})


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


def model_seeds():
    return {
        "valid_encoder.safetensors": lucid_model(),
        "valid_encoder_glu_two_layers.safetensors": lucid_model(layers=2, glu=True, heads="2"),
        "valid_lm.safetensors": lucid_model(vocab=5),
        "valid_fairseq_shared.safetensors": fairseq_model(),
        "valid_fairseq_per_layer.safetensors": fairseq_model(shared=False),
        "bad_missing_w2.safetensors": lucid_model(drop=("net.layers.0.1.fn.w2.weight",)),
        "bad_norm_shape.safetensors": lucid_model(reshape={"net.layers.0.0.norm.weight": [3]}),
        "bad_heads.safetensors": lucid_model(heads="3"),
        "bad_layer_gap.safetensors": lucid_model(layers=3, skip=(1,)),
    }


def write(folder, seeds):
    os.makedirs(folder, exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
    write(OUT_LOADER, loader_seeds())
    write(OUT_MODEL, model_seeds())
