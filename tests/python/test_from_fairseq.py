"""from_torch of a fairseq Linformer encoder's state dict and args gives what load() gives of its converted file.

The file path (converter, then lf_model_load) is held against PyTorch by
tests/test_model_files.c; here the in-memory build must agree with it, down
to what it refuses; a state dict or args that are not what they should be
raise the package's errors naming the tensor or the arg, at build.
"""
import argparse

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import linformer_cl  # noqa: E402
from linformer_cl import convert  # noqa: E402

STEM = "encoder.sentence_encoder."


def fairseq_state(layers=2, d=8, k=3, n=10, ff=12, vocab=0, layerwise=False, compress_v=True):
    g = torch.Generator().manual_seed(41)
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.3
    state, shared = {}, r(k, n)
    for i in range(layers):
        base = f"{STEM}layers.{i}."
        for p in ("q", "k", "v", "out"):
            state[f"{base}self_attn.{p}_proj.weight"], state[f"{base}self_attn.{p}_proj.bias"] = r(d, d), r(d)
        state[base + "self_attn.compress_k.weight"] = shared if layerwise else r(k, n)
        if compress_v and not layerwise:
            state[base + "self_attn.compress_v.weight"] = r(k, n)
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            state[f"{base}{norm}.weight"], state[f"{base}{norm}.bias"] = 1 + r(d), r(d)
        state[base + "fc1.weight"], state[base + "fc1.bias"] = r(ff, d), r(ff)
        state[base + "fc2.weight"], state[base + "fc2.bias"] = r(d, ff), r(d)
    if layerwise:
        state[STEM + "compress_layer.weight"] = shared
    if vocab:
        state[STEM + "embed_tokens.weight"], state[STEM + "embed_positions.weight"] = r(vocab, d), r(n + 2, d)
        state[STEM + "layernorm_embedding.weight"], state[STEM + "layernorm_embedding.bias"] = 1 + r(d), r(d)
    return state


CASES = {"per-layer E and F": {}, "one E = F per layer": dict(compress_v=False),
         "layerwise": dict(layerwise=True), "tokens": dict(vocab=17, layers=3)}


@pytest.mark.parametrize("case", CASES)
def test_from_torch_equals_load_of_the_converted_file(tmp_path, device, case):
    state = fairseq_state(**CASES[case])
    args = argparse.Namespace(encoder_attention_heads=2, activation_fn="gelu_accurate", encoder_normalize_before=False)
    torch.save({"model": state, "args": args}, tmp_path / "f.pt")
    assert convert.main([str(tmp_path / "f.pt"), str(tmp_path / "f.safetensors")]) == 0
    vocab = CASES[case].get("vocab")
    x = np.random.default_rng(4).integers(0, vocab, (2, 9)) if vocab else \
        np.random.default_rng(4).standard_normal((2, 9, 8)).astype(np.float32)
    with linformer_cl.load(tmp_path / "f.safetensors", device=device) as filed, \
            linformer_cl.from_torch(state, device=device, args=args) as built:
        assert built.info == filed.info
        np.testing.assert_allclose(built(x, lengths=[9, 4]), filed(x, lengths=[9, 4]), rtol=0, atol=1e-6)


def test_what_is_missing_is_named():
    with pytest.raises(linformer_cl.ArgumentError, match="needs its args"):
        linformer_cl.from_torch(fairseq_state())
    with pytest.raises(linformer_cl.ArgumentError, match="encoder_attention_heads"):
        linformer_cl.from_torch(fairseq_state(), args={})
    state = fairseq_state()
    state[STEM + "layers.1.self_attn.compress_v.weight"] = torch.zeros(10, 3)  # F^T beside E [3, 10]
    with pytest.raises(linformer_cl.ArgumentError, match=r"layers.1.self_attn.compress_v.weight.*got \[10, 3\]"):
        linformer_cl.from_torch(state, args={"encoder_attention_heads": 2})


def _without_layer_2(state):
    return {name: t for name, t in state.items() if ".layers.2." not in name}


def _own_compress_k(state):
    state[STEM + "layers.1.self_attn.compress_k.weight"] = torch.randn(3, 10)
    return state


def _own_compress_v(state):
    state[STEM + "layers.1.self_attn.compress_v.weight"] = torch.randn(3, 10)
    return state


def _extra(state):
    state[STEM + "layers.0.self_attn.extra.weight"] = torch.zeros(3)
    return state


REFUSED = {"a gap in the layers": (dict(layers=4), _without_layer_2, 'unknown tensor "' + STEM + "layers.3."),
           "an unknown tensor": ({}, _extra, 'unknown tensor "' + STEM + 'layers.0.self_attn.extra.weight"'),
           "a layer's own E beside the layerwise one": (dict(layerwise=True), _own_compress_k,
                                                        "layers.1.self_attn.compress_k.weight\" .*beside the layerwise"
                                                        " \"" + STEM + "compress_layer.weight\""),
           "a layer's own F beside the layerwise one": (dict(layerwise=True), _own_compress_v,
                                                        "layers.1.self_attn.compress_v.weight\" .*beside the layerwise"
                                                        " \"" + STEM + "compress_layer.weight\"")}


@pytest.mark.parametrize("case", REFUSED)
def test_what_load_refuses_of_the_converted_file_is_refused(tmp_path, case):
    options, change, words = REFUSED[case]
    state = change(fairseq_state(**options))
    args = argparse.Namespace(encoder_attention_heads=2, activation_fn="gelu")
    with pytest.raises(linformer_cl.FormatError, match=words):
        linformer_cl.from_torch(state, device="pocl", args=args)
    torch.save({"model": state, "args": args}, tmp_path / "f.pt")
    assert convert.main([str(tmp_path / "f.pt"), str(tmp_path / "f.safetensors")]) == 0
    with pytest.raises(linformer_cl.FormatError):
        linformer_cl.load(tmp_path / "f.safetensors", device="pocl")


def test_a_masked_lm_head_is_refused_not_passed_over():
    """load() of the converted file gives the head's logits; from_torch builds no head, so it says so."""
    state = fairseq_state(vocab=17)
    state["encoder.lm_head.dense.weight"] = torch.zeros(8, 8)
    with pytest.raises(linformer_cl.UnsupportedError, match='masked-LM head \\("encoder.lm_head.dense.weight"\\)'):
        linformer_cl.from_torch(state, device="pocl", args={"encoder_attention_heads": 2})


def _set(name, value):
    return lambda state: state.__setitem__(STEM + name, value)


HEADS = {"encoder_attention_heads": 2}
BAD = {
    "fc1 missing": (lambda s: s.pop(STEM + "layers.0.fc1.weight"), HEADS, "layers.0.fc1.weight\" is missing"),
    "a later layer's fc1 missing": (lambda s: s.pop(STEM + "layers.1.fc1.weight"), HEADS,
                                    "layers.1.fc1.weight\" is missing"),
    "1-D q_proj": (_set("layers.0.self_attn.q_proj.weight", torch.zeros(8)), HEADS,
                   "q_proj.weight\" has 1 dimensions, expected 2"),
    "1-D compress_k": (_set("layers.0.self_attn.compress_k.weight", torch.zeros(3)), HEADS,
                       "compress_k.weight\" has 1 dimensions, expected 2"),
    "1-D fc1": (_set("layers.0.fc1.weight", torch.zeros(12)), HEADS, "fc1.weight\" has 1 dimensions"),
    "numpy fc1": (_set("layers.0.fc1.weight", np.zeros((12, 8), np.float32)), HEADS,
                  "fc1.weight\" is not a torch tensor \\(got ndarray\\)"),
    "meta fc2": (_set("layers.1.fc2.weight", torch.zeros(8, 12, device="meta")), HEADS,
                 "layers.1.fc2.weight\" is on the meta device"),
    "heads a word": (None, {"encoder_attention_heads": "two"}, "encoder_attention_heads must be an integer .*'two'"),
    "heads 2.7": (None, {"encoder_attention_heads": 2.7}, "encoder_attention_heads must be an integer .*2.7"),
    "padding_idx past c_int": (None, dict(HEADS, padding_idx=2**32 - 1),
                               r"padding_idx must be an integer in \[-1, 1048576\], got 4294967295"),
    "activation_fn a list": (None, dict(HEADS, activation_fn=["gelu"]), r"activation_fn \['gelu'\] is not supported"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_state_dict_or_args_raise_the_packages_errors_at_build(case):
    change, args, words = BAD[case]
    state = fairseq_state()
    if change:
        change(state)
    with pytest.raises(linformer_cl.Error, match=words):
        linformer_cl.from_torch(state, device="pocl", args=args)
