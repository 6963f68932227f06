"""How linformer-serve runs a batch of requests (linformer_cl._batching).

Each request is checked on its own; the good ones run as one padded forward
with lengths, whose answers must equal, bit for bit, each request's forward
alone, with either GEMM backend.
"""
import os

import numpy as np
import pytest

import linformer_cl
from linformer_cl._batching import forward_padded, request_problem
from conftest import DATA

MODELS = os.path.join(DATA, "models")
FLOATS = linformer_cl.ModelInfo(kind="encoder", takes_tokens=False, d_model=6, heads=2, k=3, max_seq_len=10,
                                vocab=0, layers=1, out_width=6)
TOKENS = linformer_cl.ModelInfo(kind="language model", takes_tokens=True, d_model=6, heads=2, k=3,
                                max_seq_len=10, vocab=20, layers=1, out_width=20)


def random_input(rng, info, batch, n):
    if info.takes_tokens:
        return rng.integers(0, info.vocab, size=(batch, n), dtype=np.int64)
    return rng.standard_normal((batch, n, info.d_model)).astype(np.float32)


@pytest.mark.parametrize("gemm", ["host", "clblast"])
@pytest.mark.parametrize("name", ["encoder_short", "lm"])
def test_padded_forward_equals_each_request_alone(device, name, gemm, monkeypatch):
    monkeypatch.setenv("LINFORMER_GEMM", gemm)  # read when the model's context is made
    rng = np.random.default_rng(11)
    with linformer_cl.load(os.path.join(MODELS, name + ".model.safetensors"), device=device) as model:
        info = model.info
        arrays = [random_input(rng, info, b, n) for b, n in ((1, 5), (2, 1), (1, info.max_seq_len), (1, 3))]
        answers = forward_padded(model, arrays)
        assert len(answers) == len(arrays)
        for array, y in zip(arrays, answers):
            assert y.shape == array.shape[:2] + (info.out_width,)
            assert np.array_equal(y, model(array))


def test_a_good_request_has_no_problem():
    rng = np.random.default_rng(3)
    assert request_problem(random_input(rng, FLOATS, 2, 10), FLOATS) is None
    assert request_problem(random_input(rng, TOKENS, 1, 1), TOKENS) is None


@pytest.mark.parametrize("info,shape,poison,words", [
    (FLOATS, (1, 0), None, "n = 0"),
    (FLOATS, (0, 4), None, "batch 0"),
    (FLOATS, (1, 11), None, "max_seq_len 10"),
    (FLOATS, (1, 4), np.nan, "NaN"),
    (FLOATS, (2, 4), -np.inf, "infinite"),
    (TOKENS, (1, 4), 20, "vocabulary [0, 19]"),
    (TOKENS, (1, 4), -1, "vocabulary [0, 19]"),
    (TOKENS, (1, 11), None, "max_seq_len 10"),
])
def test_each_problem_is_named(info, shape, poison, words):
    array = random_input(np.random.default_rng(5), info, *shape)
    if poison is not None:
        array[-1, -1] = poison
    problem = request_problem(array, info)
    assert problem is not None and words in problem
