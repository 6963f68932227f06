"""The converter against hostile checkpoints and outputs, the fourth round.

A zip checkpoint that inflates far past its size (a zip bomb) is refused
before anything is unpacked; tensors that share, overlap or stride through one
storage keep their own values; a name holding a NUL, a prefix that leaves a
tensor no name, and an output whose folder cannot take a file are errors that
name them (the folder, not a temporary's name).
"""
import subprocess
import sys
import zipfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402


# The converter's main in a process of its own, which says on its last line of stderr the most memory it held.
RUN_AND_MEASURE = ("import resource, sys\n"
                   "from linformer_cl.convert import main\n"
                   "code = main(sys.argv[1:])\n"
                   "print('max_rss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
                   "sys.exit(code)\n")


def convert(*args):
    """The converter as a command: its status, its one line of stderr, and the most memory it held (KiB)."""
    r = subprocess.run([sys.executable, "-c", RUN_AND_MEASURE, *map(str, args), "--heads", "1"],
                       capture_output=True, text=True, timeout=300)
    *lines, rss = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and rss.startswith("max_rss_kib "), r.stderr
    return r.returncode, lines[0], int(rss.split()[1])


def zip_bomb(tmp_path, inflated_mib):
    """A real checkpoint whose data.pkl is rewritten deflated, followed by inflated_mib MiB of zeros (which the
    unpickler never reaches): a file of a few hundred KiB that unpacks to the whole."""
    good = tmp_path / "good.pt"
    torch.save({"w": torch.randn(4, 4)}, good)
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bomb, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if not info.filename.endswith("data.pkl"):
                out.writestr(info, data, compress_type=zipfile.ZIP_STORED)
                continue
            entry = zipfile.ZipInfo(info.filename)
            entry.compress_type = zipfile.ZIP_DEFLATED
            with out.open(entry, "w", force_zip64=True) as f:
                f.write(data)
                for _ in range(inflated_mib):
                    f.write(bytes(1 << 20))
    return bomb


def test_a_zip_bomb_is_refused_before_it_is_unpacked(tmp_path):
    bomb = zip_bomb(tmp_path, 512)
    assert bomb.stat().st_size < 4 << 20
    code, line, max_rss_kib = convert(bomb, tmp_path / "out.safetensors")
    assert code == 1 and "says it unpacks to" in line and "zip bomb" in line, line
    assert max_rss_kib < 400 << 10, f"the refusal held {max_rss_kib} KiB: it unpacked the archive"
    assert not (tmp_path / "out.safetensors").exists()


def test_a_checkpoint_recompressed_within_reason_still_converts(tmp_path):
    weights = {"w": torch.randn(64, 64)}
    stored = tmp_path / "stored.pt"
    torch.save(weights, stored)
    deflated = tmp_path / "deflated.pt"
    with zipfile.ZipFile(stored) as src, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info.filename, src.read(info))
    code, line, _ = convert(deflated, tmp_path / "out.safetensors")
    assert code == 0, line
    with safe_open(tmp_path / "out.safetensors", "pt") as f:
        assert torch.equal(f.get_tensor("w"), weights["w"])


@pytest.mark.parametrize("zip_format", [True, False])
def test_tensors_sharing_overlapping_and_striding_one_storage_keep_their_values(tmp_path, zip_format):
    base = torch.randn(40)
    state = {"a": base[0:6].view(2, 3), "b": base[3:9].view(3, 2), "c": base[:20].view(4, 5).t(),
             "d": base[:20].view(4, 5)[:, ::2], "e": base[7:8], "f": base}
    ckpt = tmp_path / "views.pt"
    torch.save(state, ckpt, _use_new_zipfile_serialization=zip_format)
    code, line, _ = convert(ckpt, tmp_path / "out.safetensors")
    assert code == 0, line
    with safe_open(tmp_path / "out.safetensors", "pt") as f:
        assert sorted(f.keys()) == sorted(state)
        for name, t in state.items():
            assert torch.equal(f.get_tensor(name), t), name


def test_a_name_holding_a_nul_is_refused_before_a_file_the_library_refuses_is_written(tmp_path):
    ckpt = tmp_path / "nul.pt"
    torch.save({"w\0x": torch.ones(2)}, ckpt)
    code, line, _ = convert(ckpt, tmp_path / "out.safetensors")
    assert code == 1 and "tensor 'w\\x00x' holds a NUL character" in line, line
    assert not (tmp_path / "out.safetensors").exists()


def test_a_prefix_that_leaves_a_tensor_no_name_is_named(tmp_path):
    ckpt = tmp_path / "prefix.pt"
    torch.save({"model.": torch.ones(2), "model.w": torch.ones(2)}, ckpt)
    code, line, _ = convert(ckpt, tmp_path / "out.safetensors", "--prefix", "model.")
    assert code == 1 and 'tensor "model." has no name left once the prefix "model." is taken off' in line, line
    assert not (tmp_path / "out.safetensors").exists()


@pytest.mark.parametrize("where,words", [("missing/out.safetensors", "No such file or directory"),
                                         ("a-file/out.safetensors", "Not a directory")])
def test_an_output_whose_folder_takes_no_file_names_the_folder(tmp_path, where, words):
    ckpt = tmp_path / "good.pt"
    torch.save({"w": torch.ones(2)}, ckpt)
    (tmp_path / "a-file").write_text("not a folder")
    out = tmp_path / where
    code, line, _ = convert(ckpt, out)
    folder = str(out.parent)
    assert code == 1 and f"cannot write {out}: {words} (creating a file in \"{folder}\")" == line.split(": ", 1)[1], line
