"""Each bad input raises the exception of its status with a message, and the model still works afterwards."""
import os

import numpy as np
import pytest

import linformer_cl
from linformer_cl import ArgumentError, FileError, FormatError, NoDeviceError, StateError
from conftest import DATA

LAYER = os.path.join(DATA, "pytorch", "plain.model.safetensors")  # d_model 32, max_seq_len 48
LM = os.path.join(DATA, "models", "lm.model.safetensors")         # vocab 30, max_seq_len 16

x = np.random.default_rng(3).standard_normal((2, 40, 32)).astype(np.float32)
BAD_X = {
    "float64": (x.astype(np.float64), None, "float32"),
    "rank 2": (x[0], None, "[batch, n, 32]"),
    "width": (x[..., :31].copy(), None, "[batch, n, 32]"),
    "n 0": (x[:, :0], None, "at least 1"),
    "n above max_seq_len": (np.zeros((1, 49, 32), np.float32), None, "max_seq_len 48"),
    "batch past the limit, as a broadcast view": (np.broadcast_to(x[:1, :1], (2**33, 1, 32)), None, "batch 8589934592"),
    "negative length": (x, [3, -1], "[0, 40]"),
    "length above n": (x, [41, 3], "[0, 40]"),
    "one length for two sequences": (x, [3], "2 integers"),
    "float lengths": (x, [3.5, 2.0], "2 integers"),
}


@pytest.fixture(scope="module")
def layer():
    with linformer_cl.load(LAYER, device="pocl") as model:
        yield model


@pytest.mark.parametrize("case", BAD_X)
def test_bad_input_of_a_layer(layer, case):
    before = layer(x)
    bad, lengths, words = BAD_X[case]
    with pytest.raises(ArgumentError, match=words.replace("[", r"\[").replace("]", r"\]")):
        layer(bad, lengths=lengths)
    np.testing.assert_array_equal(layer(x), before)


def test_non_contiguous_and_read_only_inputs_are_read_as_they_are(layer):
    wide = np.zeros((2, 40, 64), np.float32)
    wide[..., ::2] = x
    ro = x.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(layer(wide[..., ::2]), layer(x))
    np.testing.assert_array_equal(layer(ro), layer(x))


@pytest.mark.parametrize("tokens,words", [(np.full((1, 4), 30), "vocab"), (np.full((1, 4), -1), "vocab"),
                                          (np.zeros((1, 4), np.float32), "integers"),
                                          (np.zeros((1, 4, 1), np.int64), "integers"),
                                          (np.full((1, 4), 2**63 + 1, np.uint64), "9223372036854775809.*int64")])
def test_bad_tokens(tokens, words):
    with linformer_cl.load(LM, device="pocl") as lm:
        good = np.arange(4, dtype=np.int64)[None]
        before = lm(good)
        with pytest.raises(ArgumentError, match=words):
            lm(tokens)
        np.testing.assert_array_equal(lm(good), before)


def test_a_closed_model_says_so():
    model = linformer_cl.load(LAYER, device="pocl")
    model.close()
    model.close()
    with pytest.raises(StateError, match="closed"):
        model(x)


def test_files_and_devices(tmp_path):
    with pytest.raises(FileError, match="missing"):
        linformer_cl.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10" * 64)
    with pytest.raises(FormatError, match="junk"):
        linformer_cl.load(tmp_path / "junk.safetensors")
    with pytest.raises(NoDeviceError, match="no-such-device"):
        linformer_cl.load(LAYER, device="no-such-device")
    with pytest.raises(ArgumentError, match="heads"):
        linformer_cl.load(LAYER, heads=0)
    with pytest.raises(ArgumentError, match="contradict|heads"):
        linformer_cl.load(LAYER, heads=2)
    with pytest.raises(ArgumentError, match="for models"):
        linformer_cl.load(LAYER, norm="pre")


@pytest.mark.parametrize("options,words", [
    (dict(path=LAYER + "\0junk"), r"path '.*plain.model.safetensors\\x00junk' holds a NUL byte"),
    (dict(device="pocl\0xyz"), r"device 'pocl\\x00xyz' holds a NUL byte"),
    (dict(mode="dense\0junk"), "mode 'dense.*' holds a NUL byte"),
    (dict(path=os.path.join(DATA, "models", "encoder_short.model.safetensors"), prefix="\0zz"), "prefix '.*zz' holds"),
    (dict(heads=2**32 + 4), r"heads must be an integer in \[1, 2147483647\], got 4294967300"),
    (dict(projection="random", k=2**32 + 4), r"k must be an integer in \[1, 2147483647\], got 4294967300"),
    (dict(projection="random", k=10**30), r"k must be an integer .*, got 10{30}"),
    (dict(projection="random", seed=2**64 + 1), r"seed must be an integer in \[0, 18446744073709551615\]"),
], ids=["NUL in path", "NUL in device", "NUL in mode", "NUL in prefix", "heads", "k", "huge k", "seed"])
def test_what_ctypes_would_cut_short_is_refused(options, words):
    with pytest.raises(ArgumentError, match=words):
        linformer_cl.load(**{"path": LAYER, "device": "pocl", **options})


def test_every_status_has_its_class():
    from linformer_cl import errors
    names = [cls.status for cls in errors.BY_CODE[1:]]
    assert len(set(names)) == len(names) and all(issubclass(c, linformer_cl.Error) for c in errors.BY_CODE[1:])
    lib = linformer_cl._native.lib
    assert names == [lib.lf_status_string(code).decode() for code in range(1, len(errors.BY_CODE))]


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_model_is_neither_copied_nor_pickled(layer, how):
    import copy
    import pickle
    fn = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    with pytest.raises(ArgumentError, match="cannot be copied or pickled"):
        fn(layer)
    assert layer(x).shape == x.shape


def test_torch_tensors_are_read_as_they_are_or_refused_by_name(layer):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(layer(torch._neg_view(t)).numpy(), layer(-x))  # negated lazily: the bit resolved
    bad = {"x must be float32, got torch.bfloat16": (t.bfloat16(), None),
           "x is on the meta device": (t.to("meta"), None),
           "x is a torch.sparse_coo tensor, not a dense one": (t.to_sparse(), None),
           "x is a nested tensor, which is not read: pad it": (torch.nested.nested_tensor([t[0, :3], t[1]]), None),
           "lengths is on the meta device": (t, torch.zeros(2, dtype=torch.int64, device="meta"))}
    for words, (tensor, lengths) in bad.items():
        with pytest.raises(ArgumentError, match=words):
            layer(tensor, lengths=lengths)
