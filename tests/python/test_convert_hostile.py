"""The converter against hostile checkpoints and outputs, the fourth round.

A zip checkpoint that inflates far past its size (a zip bomb) is refused
before anything is unpacked; tensors that share, overlap or stride through one
storage keep their own values; a name holding a NUL, a prefix that leaves a
tensor no name, and an output whose folder cannot take a file are errors that
name them (the folder, not a temporary's name). So are an empty output path,
one ending in "/", a tensor name UTF-8 cannot hold, a full disk and a
read-only file system (mounted where mount is allowed); an output name as long
as a folder takes is written; SIGINT and SIGTERM while the file is written
remove the temporary (SIGKILL leaves it, never a partial output); links,
look-alike names and two conversions into one output at once are held.
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


def run_plain(*args):
    """The converter as a command without the measuring wrapper: its status and its whole stderr."""
    r = subprocess.run([sys.executable, "-m", "linformer_cl.convert", *map(str, args), "--heads", "1"],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stderr.strip()


def small_checkpoint(tmp_path):
    ckpt = tmp_path / "good.pt"
    torch.save({"w": torch.ones(2)}, ckpt)
    return ckpt


def test_an_output_name_as_long_as_a_folder_takes_is_written(tmp_path):
    out = tmp_path / ("a" * 240 + ".safetensors")  # 252 bytes: the folder takes it, a temporary of ".name.XXXX" not
    code, line = run_plain(small_checkpoint(tmp_path), out)
    assert code == 0, line
    with safe_open(out, "pt") as f:
        assert f.keys() == ["w"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("given,words", [("", "the output path is empty"),
                                         ("new.safetensors/", 'ends with "/", as a folder\'s name does')])
def test_an_output_path_that_names_no_file_is_refused_by_name_before_anything_is_written(tmp_path, given, words):
    import os
    ckpt = small_checkpoint(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    r = subprocess.run([sys.executable, "-m", "linformer_cl.convert", str(ckpt), given, "--heads", "1"],
                       capture_output=True, text=True, timeout=300, cwd=folder)
    assert r.returncode == 1 and words in r.stderr and ".safetensors." not in r.stderr, r.stderr
    assert sorted(os.listdir(folder)) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["good.pt", "work"]


def test_a_tensor_name_that_is_no_text_is_refused_by_name(tmp_path):
    ckpt = tmp_path / "surrogate.pt"
    torch.save({"w\udc80": torch.ones(2)}, ckpt)
    code, line = run_plain(ckpt, tmp_path / "out.safetensors")
    assert code == 1 and "tensor 'w\\udc80'" in line and "UTF-8" in line, line
    assert not (tmp_path / "out.safetensors").exists()


def mounted(tmp_path, *how):
    """A folder with `how` mounted on it (mount's arguments before the folder), or a skip where mount is not
    allowed (not root, or a container without the capability)."""
    folder = tmp_path / "mnt"
    folder.mkdir()
    if subprocess.run(["mount", *how, str(folder)], capture_output=True).returncode != 0:
        pytest.skip("mount is not allowed here")
    return folder


def umount(folder):
    subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_names_the_output_and_leaves_the_old_file_whole(tmp_path):
    folder = mounted(tmp_path, "-t", "tmpfs", "-o", "size=1m", "tmpfs")
    try:
        out = folder / "out.safetensors"
        assert run_plain(small_checkpoint(tmp_path), out)[0] == 0
        before = out.read_bytes()
        big = tmp_path / "big.pt"
        torch.save({"w": torch.randn(512, 512)}, big)  # 1 MiB of data: more than the folder has left
        code, line = run_plain(big, out)
        assert code == 1 and line == f"linformer_cl.convert: cannot write {out}: No space left on device", line
        assert out.read_bytes() == before and [p.name for p in folder.iterdir()] == ["out.safetensors"]
    finally:
        umount(folder)


@pytest.mark.parametrize("existing", [False, True])
def test_a_read_only_file_system_is_named_as_such(tmp_path, existing):
    source = tmp_path / "source"
    source.mkdir()
    if existing:
        (source / "out.safetensors").write_bytes(b"old")
    folder = mounted(tmp_path, "--bind", str(source))
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode:
            pytest.skip("a read-only remount is not allowed here")
        out = folder / "out.safetensors"
        code, line = run_plain(small_checkpoint(tmp_path), out)
        assert code == 1 and f"cannot write {out}: Read-only file system" in line, line
    finally:
        umount(folder)
    assert [p.name for p in source.iterdir()] == (["out.safetensors"] if existing else [])


def huge_checkpoint(tmp_path):
    ckpt = tmp_path / "huge.pt"
    torch.save({f"w{i}": torch.randn(1024, 1024) for i in range(40)}, ckpt)  # 160 MiB: seconds to write
    return ckpt


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_a_conversion_killed_while_it_writes_leaves_no_output_and_no_temporary_it_could_remove(tmp_path, sig):
    import signal
    import time
    ckpt, out = huge_checkpoint(tmp_path), tmp_path / "out.safetensors"
    p = subprocess.Popen([sys.executable, "-m", "linformer_cl.convert", str(ckpt), str(out), "--heads", "1"],
                         stderr=subprocess.PIPE, text=True)
    try:
        while p.poll() is None and not [q for q in tmp_path.iterdir() if q.name.startswith(".out.")]:
            time.sleep(0.005)
        assert p.poll() is None, "the converter ended before it wrote"
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert not out.exists()
    left = [q.name for q in tmp_path.iterdir() if q.name.startswith(".out.")]
    if sig == "SIGKILL":  # nothing runs after it: the temporary stays, the output never appears
        assert p.returncode == -9 and len(left) == 1, (p.returncode, left)
        return
    assert left == [] and "Traceback" not in err, err
    assert p.returncode == {"SIGTERM": 143, "SIGINT": 130}[sig], (p.returncode, err)
    assert f"interrupted ({sig}): {out} was not written" in err, err


def test_a_chain_of_links_and_a_linked_folder_lead_to_the_file_and_stay_links(tmp_path):
    ckpt = small_checkpoint(tmp_path)
    (tmp_path / "real.safetensors").write_bytes(b"old")
    (tmp_path / "l1").symlink_to("real.safetensors")
    (tmp_path / "l2").symlink_to("l1")
    (tmp_path / "folder").mkdir()
    (tmp_path / "linked").symlink_to("folder")
    for out in (tmp_path / "l2", tmp_path / "linked" / "out.safetensors"):
        code, line = run_plain(ckpt, out)
        assert code == 0, line
    assert (tmp_path / "l2").is_symlink() and (tmp_path / "l1").is_symlink() and (tmp_path / "linked").is_symlink()
    for written in (tmp_path / "real.safetensors", tmp_path / "folder" / "out.safetensors"):
        with safe_open(written, "pt") as f:
            assert torch.equal(f.get_tensor("w"), torch.ones(2))


def test_a_link_to_dev_full_is_refused_as_a_device(tmp_path):
    (tmp_path / "full").symlink_to("/dev/full")
    code, line = run_plain(small_checkpoint(tmp_path), tmp_path / "full")
    assert code == 1 and "it is a character device, not a regular file" in line, line


def test_names_that_meet_once_a_prefix_is_taken_off_or_look_alike_keep_their_own_values(tmp_path):
    # "w" outside the prefix is left out, not mixed with "model.w"; "café" composed and decomposed are two names.
    ckpt = tmp_path / "alike.pt"
    torch.save({"w": torch.zeros(2), "model.w": torch.ones(2), "model.caf\u00e9": torch.full((2,), 2.0),
                "model.cafe\u0301": torch.full((2,), 3.0)}, ckpt)
    out = tmp_path / "out.safetensors"
    code, line = run_plain(ckpt, out, "--prefix", "model.")
    assert code == 0, line
    with safe_open(out, "pt") as f:
        assert sorted(f.keys()) == sorted(["w", "caf\u00e9", "cafe\u0301"])
        assert torch.equal(f.get_tensor("w"), torch.ones(2))
        assert torch.equal(f.get_tensor("caf\u00e9"), torch.full((2,), 2.0))
        assert torch.equal(f.get_tensor("cafe\u0301"), torch.full((2,), 3.0))


def test_two_conversions_into_one_output_at_once_leave_one_of_them_whole(tmp_path):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    torch.save({"w": torch.randn(512, 512)}, one)
    torch.save({"w": torch.randn(512, 512)}, two)
    out = tmp_path / "out.safetensors"
    procs = [subprocess.Popen([sys.executable, "-m", "linformer_cl.convert", str(c), str(out), "--heads", "1"],
                              stderr=subprocess.PIPE) for c in (one, two)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    with safe_open(out, "pt") as f:
        got = f.get_tensor("w")
    assert any(torch.equal(got, torch.load(c)["w"]) for c in (one, two))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
