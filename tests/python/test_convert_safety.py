"""The converter against hostile and careless checkpoints: nothing run, nothing lost, every error named.

A pickle that calls os.system is refused in the zip and the legacy format
and runs nothing; tied tensors keep every name; the input is never
overwritten; heads below 1, non-string keys, a tensor named __metadata__ and
dtypes the library cannot read are errors, and no file is left behind.
The output is written as the linformer program writes its own (a symlink's
target replaced, the mode kept, synced before the rename), an output or a
checkpoint that is not a regular file is refused, and every failure is one
line, never a traceback.
"""
import contextlib
import io
import os
import pickle
import stat
import subprocess
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402

import linformer_cl  # noqa: E402
from linformer_cl.convert import main  # noqa: E402
from conftest import TOOL, relative_error  # noqa: E402


def convert(*args):
    """Runs the converter's main in this process (test_convert.py runs it as a command): its status and stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse's usage errors
            code = e.code
    return types.SimpleNamespace(returncode=code, stderr=err.getvalue())


class Marker:
    """Unpickling it runs a shell command that creates a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


@pytest.mark.parametrize("form", ["zip", "legacy", "bare pickle"])
def test_a_pickle_that_calls_os_system_is_refused_and_runs_nothing(tmp_path, form):
    marker, ckpt = tmp_path / "marker", tmp_path / "evil.pt"
    if form == "bare pickle":  # what the legacy format reads first, as its magic number
        ckpt.write_bytes(pickle.dumps(Marker(marker), protocol=2))
    else:
        torch.save({"w": torch.zeros(3), "x": Marker(marker)}, ckpt, _use_new_zipfile_serialization=form == "zip")
    r = convert(ckpt, tmp_path / "out.safetensors", "--heads", "1")
    assert r.returncode == 1 and "system, which is not a tensor" in r.stderr and "refused" in r.stderr, r.stderr
    assert not marker.exists() and not (tmp_path / "out.safetensors").exists()


def test_a_zip_with_two_data_pickles_is_refused(tmp_path):
    import warnings
    import zipfile
    marker, ckpt = tmp_path / "marker", tmp_path / "twice.pt"
    torch.save({"w": torch.zeros(3)}, ckpt)
    with zipfile.ZipFile(ckpt) as z:
        entries = [(i.filename, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(ckpt, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the duplicate name is the point
        for name, data in entries:
            if name.endswith("data.pkl"):
                z.writestr(name, pickle.dumps(Marker(marker), protocol=2))
            z.writestr(name, data)
    r = convert(ckpt, tmp_path / "out.safetensors", "--heads", "1")
    assert r.returncode == 1 and "two entries of one name" in r.stderr, r.stderr
    assert not marker.exists()


def test_tied_language_model_keeps_both_names_and_serves(tmp_path):
    linformer = pytest.importorskip("linformer")
    torch.manual_seed(31)
    lm = linformer.LinformerLM(num_tokens=20, dim=12, seq_len=16, depth=1, k=4, heads=2).eval()
    lm.to_logits.weight = lm.token_emb.weight
    torch.save(lm.state_dict(), tmp_path / "lm.pt")
    r = convert(tmp_path / "lm.pt", tmp_path / "lm.safetensors", "--heads", 2)
    assert r.returncode == 0, r.stderr
    with safe_open(tmp_path / "lm.safetensors", "pt") as f:
        assert {"token_emb.weight", "to_logits.weight"} <= set(f.keys())
    tokens = torch.randint(0, 20, (2, 16))
    with torch.no_grad():
        want = lm.double()(tokens)
    with linformer_cl.load(tmp_path / "lm.safetensors", device="pocl") as model:
        assert relative_error(model(tokens.numpy()), want.numpy()) <= 1e-5


def test_fairseq_lm_head_tied_to_the_embeddings_keeps_both(tmp_path):
    emb = torch.randn(10, 4)
    state = {"encoder.sentence_encoder.embed_tokens.weight": emb, "encoder.lm_head.weight": emb,
             "encoder.sentence_encoder.layers.0.self_attn.q_proj.weight": torch.randn(4, 4)}
    torch.save(state, tmp_path / "f.pt")
    assert convert(tmp_path / "f.pt", tmp_path / "f.safetensors", "--heads", 2).returncode == 0
    with safe_open(tmp_path / "f.safetensors", "pt") as f:
        assert set(f.keys()) == set(state)
        assert torch.equal(f.get_tensor("encoder.lm_head.weight"), emb)


def test_converting_a_file_onto_itself_is_refused_before_writing(tmp_path):
    ckpt = tmp_path / "m.pt"
    torch.save({"w": torch.randn(3)}, ckpt)
    before = ckpt.read_bytes()
    os.link(ckpt, tmp_path / "link.pt")
    for out in (ckpt, tmp_path / "link.pt", tmp_path / "." / "m.pt"):
        r = convert(ckpt, out, "--heads", 1)
        assert r.returncode == 1 and "is the checkpoint itself" in r.stderr, r.stderr
    assert ckpt.read_bytes() == before


@pytest.mark.parametrize("heads", ["0", "-4", "two"])
def test_a_head_count_that_is_not_positive(tmp_path, heads):
    torch.save({"w": torch.randn(3)}, tmp_path / "m.pt")
    r = convert(tmp_path / "m.pt", tmp_path / "o.safetensors", "--heads", heads)
    assert r.returncode == 2 and "--heads" in r.stderr, r.stderr
    assert not (tmp_path / "o.safetensors").exists()


@pytest.mark.parametrize("state,words", [
    ({1: torch.zeros(2), "w": torch.zeros(2)}, "not a string: 1"),
    ({"__metadata__": torch.zeros(2)}, "\"__metadata__\""),
    ({"w": torch.zeros(2, dtype=torch.complex64)}, "\"w\" is torch.complex64"),
    ({"w": torch.zeros(2, dtype=torch.bool)}, "\"w\" is torch.bool"),
    ({"w": torch.zeros(2, dtype=torch.int8)}, "\"w\" is torch.int8"),
], ids=["int key", "__metadata__", "complex", "bool", "int8"])
def test_what_safetensors_or_the_library_cannot_hold_is_named(tmp_path, state, words):
    torch.save(state, tmp_path / "m.pt")
    r = convert(tmp_path / "m.pt", tmp_path / "o.safetensors", "--heads", 1)
    assert r.returncode == 1 and words in r.stderr, r.stderr
    assert os.listdir(tmp_path) == ["m.pt"]  # no output, no temporary left


def test_a_good_checkpoint_still_converts(tmp_path):
    torch.save({"w": torch.arange(6.0).reshape(2, 3)}, tmp_path / "m.pt")
    assert convert(tmp_path / "m.pt", tmp_path / "o.safetensors", "--heads", 1).returncode == 0
    with safe_open(tmp_path / "o.safetensors", "np") as f:
        np.testing.assert_array_equal(f.get_tensor("w"), np.arange(6.0).reshape(2, 3))


def test_the_hint_of_run_on_a_checkpoint_is_a_command_that_works(tmp_path):
    if TOOL is None:
        pytest.skip("no linformer program built")
    linformer = pytest.importorskip("linformer")
    layer = linformer.LinformerSelfAttention(dim=8, seq_len=6, k=2, heads=2).eval()
    torch.save(layer.state_dict(), tmp_path / "m.pt")
    from safetensors.torch import save_file
    save_file({"x": torch.randn(1, 6, 8)}, str(tmp_path / "x.safetensors"))
    run = lambda model: subprocess.run([TOOL, "run", "--model", model, "--input", tmp_path / "x.safetensors",
                                        "--output", tmp_path / "y.safetensors"], capture_output=True, text=True)
    r = run(tmp_path / "m.pt")
    assert r.returncode != 0
    hint = r.stderr.split("convert it with ")[1].split(" (")[0].split()
    assert hint[:3] == ["python", "-m", "linformer_cl.convert"], r.stderr
    words = {"FILE": str(tmp_path / "m.pt"), "model.safetensors": str(tmp_path / "m.safetensors"), "H": "2"}
    assert convert(*[words.get(w, w) for w in hint[3:]]).returncode == 0
    assert run(tmp_path / "m.safetensors").returncode == 0


@pytest.fixture
def ckpt(tmp_path):
    torch.save({"w": torch.ones(2, 3)}, tmp_path / "m.pt")
    return tmp_path / "m.pt"


def test_a_symlinked_output_replaces_its_target_and_keeps_the_link(ckpt, tmp_path):
    (tmp_path / "target").write_text("old")
    os.symlink("target", tmp_path / "link.safetensors")
    assert convert(ckpt, tmp_path / "link.safetensors", "--heads", 1).returncode == 0
    assert os.readlink(tmp_path / "link.safetensors") == "target"
    with safe_open(tmp_path / "target", "np") as f:
        assert f.keys() == ["w"]
    os.symlink("missing", tmp_path / "dangling.safetensors")
    r = convert(ckpt, tmp_path / "dangling.safetensors", "--heads", 1)
    assert r.returncode == 1 and "symbolic link to a missing file" in r.stderr, r.stderr
    assert os.path.islink(tmp_path / "dangling.safetensors") and not (tmp_path / "missing").exists()


def test_an_old_file_keeps_its_mode_and_a_new_one_follows_the_umask(ckpt, tmp_path):
    old = tmp_path / "old.safetensors"
    old.write_text("old")
    os.chmod(old, 0o640)
    mask = os.umask(0o027)
    try:
        assert convert(ckpt, old, "--heads", 1).returncode == 0
        assert convert(ckpt, tmp_path / "new.safetensors", "--heads", 1).returncode == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(tmp_path / "new.safetensors").st_mode) == 0o640  # 0666 & ~027


@pytest.mark.parametrize("kind", ["FIFO", "directory"])
def test_an_output_that_is_not_a_regular_file_is_refused(ckpt, tmp_path, kind):
    out = tmp_path / "out"
    os.mkfifo(out) if kind == "FIFO" else os.mkdir(out)
    r = convert(ckpt, out, "--heads", 1)
    assert r.returncode == 1 and f"cannot write {out}: it is a {kind}" in r.stderr, r.stderr
    assert (stat.S_ISFIFO if kind == "FIFO" else stat.S_ISDIR)(os.lstat(out).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["m.pt", "out"]


def test_the_data_is_synced_before_the_rename_and_a_failure_leaves_the_old_file(ckpt, tmp_path, monkeypatch):
    old = tmp_path / "o.safetensors"
    old.write_text("old")
    synced = []

    def failing_fsync(fd):
        synced.append(os.fstat(fd).st_size)
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    r = convert(ckpt, old, "--heads", 1)
    assert r.returncode == 1 and "Input/output error" in r.stderr and synced[0] > 100, (r.stderr, synced)
    assert old.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["m.pt", "o.safetensors"]


def test_a_fifo_checkpoint_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "in.pt")
    r = subprocess.run([sys.executable, "-m", "linformer_cl.convert", tmp_path / "in.pt", tmp_path / "o.safetensors",
                        "--heads", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "in.pt\" is not a regular file: it is a FIFO" in r.stderr, r.stderr


@pytest.mark.parametrize("path,words", [("/dev/null", "/dev/null\" is not a regular file: it is a character device"),
                                        (".", "is not a regular file: it is a directory"),
                                        ("empty.pt", "empty.pt\" is empty")])
def test_a_checkpoint_that_is_no_file_or_empty_is_named(tmp_path, path, words):
    (tmp_path / "empty.pt").write_bytes(b"")
    r = convert(path if path.startswith("/") else tmp_path / path, tmp_path / "o.safetensors", "--heads", 1)
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_running_out_of_memory_is_one_line(ckpt, tmp_path, monkeypatch):
    from linformer_cl import checkpoint

    def no_memory(path):
        raise MemoryError()
    monkeypatch.setattr(checkpoint, "read", no_memory)
    r = convert(ckpt, tmp_path / "o.safetensors", "--heads", 1)
    assert r.returncode == 1 and r.stderr == f"linformer_cl.convert: out of memory converting {ckpt}\n", r.stderr
