"""Reading a torch.save checkpoint without running what its pickle names.

A checkpoint's pickle may call any importable function (os.system) while it
loads. Only what a state dict or a fairseq checkpoint needs is allowed:
containers, tensors and their storages, dtypes, argparse.Namespace.

Where the installed torch can extend its weights_only allow-list
(safe_globals, add_safe_globals), torch.load(weights_only=True) reads it.
Older ones cannot allow argparse.Namespace and ignore a pickle_module given
with weights_only=False, so the file's bytes are first unpickled dry: every
pickle torch would read (data.pkl and the others of a zip; the five pickles
of the legacy format) goes through an unpickler whose find_class refuses any
global outside the allow-list and hands out inert stand-ins for the allowed
ones, so nothing of the file is called; a pickle that cannot be checked so is
refused too. Only then does torch.load read the same bytes.
"""
import argparse
import io
import os
import pickle
import stat
import tarfile
import zipfile

from .errors import FileError, FormatError

ALLOWED = {("collections", "OrderedDict"), ("argparse", "Namespace"), ("_codecs", "encode"), ("torch", "Size"),
           ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_tensor_v2"),
           ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_parameter_with_state")}
ALLOWED |= {("torch", name) for name in ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                                         "int64", "uint8", "bool", "complex64", "complex128")}
LEGACY_PICKLES = 5  # magic number, protocol version, sys info, the object, the storage keys
# What a zip checkpoint may unpack to: its stored entries' own size, with room for a compressing re-zip.
UNPACKED_FACTOR, UNPACKED_SLACK = 16, 64 << 20


class UnsafeCheckpoint(Exception):
    pass


class _Inert:
    """What the dry run builds instead of any object: accepts every call and fills nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass

    def add(self, value):
        pass


class _DryUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in ALLOWED or (module == "torch" and name.endswith("Storage")):
            return _Inert
        raise UnsafeCheckpoint(f"its pickle calls {module}.{name}, which is not a tensor, a container or a config: "
                               "refused, nothing of it was run")

    def persistent_load(self, saved_id):
        return _Inert()


def _dry_run(stream, count):
    """Unpickles up to `count` pickles of stream with the restricted unpickler."""
    for _ in range(count):
        if not stream.read(1):
            return
        stream.seek(-1, io.SEEK_CUR)
        try:
            _DryUnpickler(stream, encoding="utf-8").load()
        except UnsafeCheckpoint:
            raise
        except Exception as e:  # what cannot be checked is not loaded
            raise UnsafeCheckpoint(f"it is no checkpoint torch.save wrote: its pickle is malformed "
                                   f"({type(e).__name__}: {e})") from None


def check(data):
    """Raises UnsafeCheckpoint unless every pickle torch.load would read of `data` names allowed globals only."""
    if data[:4] == b"PK\x03\x04":
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            names = archive.namelist()
        except zipfile.BadZipFile as e:
            raise UnsafeCheckpoint(f"it is not a readable zip archive ({e})") from None
        if any(name.endswith("constants.pkl") for name in names):
            raise UnsafeCheckpoint("it is a TorchScript archive, not a checkpoint saved with torch.save")
        if len(set(names)) != len(names):  # torch's reader and this one might take different copies
            raise UnsafeCheckpoint("its zip archive holds two entries of one name")
        for info in archive.infolist():
            if info.filename.endswith(".pkl"):
                _dry_run(io.BytesIO(archive.read(info)), 1)
        return
    if tarfile.is_tarfile(io.BytesIO(data)):
        raise UnsafeCheckpoint("it is a tar archive, the format of PyTorch before 0.4, which is not read")
    _dry_run(io.BytesIO(data), LEGACY_PICKLES)


def file_kind(mode):
    """What a file that is not a regular one is, for messages, as the C library names it."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _read_bytes(path):
    """The bytes of a regular file. Anything else is refused before it is opened: a FIFO would block until a
    writer came, /dev/zero never end."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise FileError(f"\"{os.fsdecode(path)}\" is not a regular file: it is {file_kind(mode)}")
    # O_NONBLOCK: what was swapped in since the check does not block either
    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        data = f.read()
    if not data:
        raise FormatError(f"\"{os.fsdecode(path)}\" is empty, not a checkpoint")
    return data


def check_size(data):
    """Raises UnsafeCheckpoint where a zip archive says it unpacks to far more than it holds: torch.save stores
    its entries uncompressed, and a few megabytes that inflate to gigabytes (a zip bomb) would be read whole,
    by this module and by torch, into memory."""
    if data[:4] != b"PK\x03\x04":
        return
    try:
        declared = sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist())
    except zipfile.BadZipFile as e:
        raise UnsafeCheckpoint(f"it is not a readable zip archive ({e})") from None
    if declared > UNPACKED_FACTOR * len(data) + UNPACKED_SLACK:
        raise UnsafeCheckpoint(f"its zip archive of {len(data)} bytes says it unpacks to {declared}: torch.save "
                               "stores checkpoints uncompressed, so this is no checkpoint it wrote (a zip bomb?)")


def read(path):
    """The object a checkpoint holds, read on the CPU; UnsafeCheckpoint when it names anything else or would
    unpack to far more than its size, FileError for what is not a regular file, FormatError for an empty one."""
    import torch
    data = _read_bytes(path)
    check_size(data)
    serialization = torch.serialization
    if hasattr(serialization, "safe_globals"):
        with serialization.safe_globals([argparse.Namespace]):
            return _weights_only(torch, data)
    if hasattr(serialization, "add_safe_globals"):
        serialization.add_safe_globals([argparse.Namespace])
        return _weights_only(torch, data)
    check(data)
    return torch.load(io.BytesIO(data), map_location="cpu")


def _weights_only(torch, data):
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise UnsafeCheckpoint(f"torch's weights_only loader refused it: {e}") from None
