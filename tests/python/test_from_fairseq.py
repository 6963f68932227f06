"""from_torch of a fairseq Linformer encoder's state dict and args gives what load() gives of its converted file.

The file path (converter, then lf_model_load) is held against PyTorch by
tests/test_model_files.c; here the in-memory build must agree with it.
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
