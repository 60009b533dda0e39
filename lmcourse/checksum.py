r"""Checksums of saved data: tensors and plain values, so that a damaged file is told from a good one.

A file the package writes (a checkpoint, a run's resume state, the token cache) holds a nested
structure of dicts, lists, strings, numbers and tensors. Its checksum is

.. math::  c = \mathrm{SHA256}(\mathrm{enc}(x)),

with :math:`\mathrm{enc}` a byte encoding that is one-to-one on such structures: every value is
written as a one-byte type tag, its length where it has one, then its content; a tensor as its
dtype, its shape and its elements' bytes in row-major order; a dict as its entries sorted by key.
Two structures that differ anywhere, by one bit of one weight or one character of one name, have
different encodings and so, but for a SHA-256 collision, different checksums.

:func:`seal` stores :math:`c` beside the data under the key ``"sha256"``; :func:`verify` recomputes
it after loading. ``torch.load`` does not check the CRCs of the zip file it reads, so without this
a flipped bit inside a tensor would load as a slightly different model.

Every file the package and its tools write (checkpoints, run files, manifests, stored numbers, lessons,
book pages, decks, caches) goes through the one :func:`atomic_write`: a temporary file of a unique
name beside the target, flushed to the disk, renamed over the target, so a crash, Ctrl-C, a full disk
or a file-size limit at any moment leaves the old file or the new one, never half of one; the new
file gets the user's umask (an existing one keeps its mode), and a failure is one sentence naming the
target.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path
from typing import Optional

import torch

from .errors import NoSpaceError, WriteError

KEY = "sha256"
__all__ = ["digest", "seal", "verify", "sealed_json", "read_sealed_json", "KEY", "atomic_write", "free_bytes",
           "new_file_mode", "new_folder_mode"]


def _update(h, value) -> None:
    """Feed ``enc(value)`` to the hash ``h``."""
    if value is None:
        h.update(b"N")
    elif isinstance(value, bool):
        h.update(b"T" if value else b"F")
    elif isinstance(value, int):
        text = str(value).encode()
        h.update(b"i" + struct.pack("<Q", len(text)) + text)
    elif isinstance(value, float):
        h.update(b"f" + struct.pack("<d", value) if not math.isnan(value) else b"n")
    elif isinstance(value, str):
        text = value.encode("utf-8", "surrogatepass")
        h.update(b"s" + struct.pack("<Q", len(text)) + text)
    elif isinstance(value, (bytes, bytearray)):
        h.update(b"b" + struct.pack("<Q", len(value)) + bytes(value))
    elif isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        head = f"{t.dtype}|{tuple(t.shape)}".encode()
        h.update(b"t" + struct.pack("<Q", len(head)) + head)
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())  # the elements' bytes, no copy
    elif isinstance(value, (list, tuple)):
        h.update(b"l" + struct.pack("<Q", len(value)))
        for item in value:
            _update(h, item)
    elif isinstance(value, dict):
        h.update(b"d" + struct.pack("<Q", len(value)))
        for key in sorted(value, key=lambda k: (type(k).__name__, repr(k))):
            _update(h, key)
            _update(h, value[key])
    else:
        raise TypeError(f"A checksum covers tensors and plain data only, got {type(value).__name__}.")


def digest(value) -> str:
    """The hexadecimal SHA-256 of ``enc(value)`` (see the module docstring)."""
    h = hashlib.sha256()
    _update(h, value)
    return h.hexdigest()


def seal(payload: dict) -> dict:
    """``payload`` with its checksum added under :data:`KEY` (a new dict; the input is not changed)."""
    body = {k: v for k, v in payload.items() if k != KEY}
    return {**body, KEY: digest(body)}


def verify(payload) -> bool:
    """True when ``payload`` is a dict whose :data:`KEY` entry is the checksum of the rest of it."""
    if not isinstance(payload, dict) or not isinstance(payload.get(KEY), str):
        return False
    try:
        return digest({k: v for k, v in payload.items() if k != KEY}) == payload[KEY]
    except TypeError:  # something a checksum never covers: not a file this package wrote
        return False


def sealed_json(payload: dict) -> bytes:
    """The UTF-8 JSON text of ``payload`` sealed with its checksum (:func:`seal`), for a small file of plain values."""
    return json.dumps(seal(payload), indent=1, sort_keys=True).encode("utf-8")


def read_sealed_json(path) -> dict:
    """The payload of a file written from :func:`sealed_json`, its checksum removed.

    Raises ``FileNotFoundError`` when there is no file, and ``ValueError`` (one sentence naming the
    file) when it is not such a file or its checksum no longer matches: a flipped bit is refused, never
    read as another number."""
    try:
        payload = json.loads(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} cannot be read as sealed JSON ({type(err).__name__}): it was damaged; "
                         "delete it and it is written again.") from None
    if not verify(payload):
        raise ValueError(f"{path} does not match the checksum stored in it: it was damaged or edited; "
                         "delete it and it is written again.")
    return {k: v for k, v in payload.items() if k != KEY}


# ------------------------------------------------------------------------------- the one atomic write

def free_bytes(folder: Path) -> Optional[int]:
    """The bytes free on the disk of ``folder`` (None when the system does not say)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _umask() -> int:
    """This process's umask, read without changing it where the system tells it (Linux), else set and put back."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a new file gets from ``open()`` under the user's umask (0o644 under umask 022)."""
    return 0o666 & ~_umask()


def new_folder_mode() -> int:
    """The mode a new folder gets from ``mkdir`` under the user's umask (0o755 under umask 022), for a folder
    made by ``tempfile.mkdtemp`` (0o700) that is then renamed into place."""
    return 0o777 & ~_umask()


def _file_size_limit() -> Optional[int]:
    """The file-size limit of this process (``ulimit -f``) in bytes, or None when there is none."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"


def _out_of_space(error: BaseException, folder: Path, needed: int) -> bool:
    """True when ``error`` (raised while writing in ``folder``) means the disk is full."""
    cause = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        cause = cause.__cause__ or cause.__context__
    free = free_bytes(folder)
    return free is not None and isinstance(error, (OSError, RuntimeError)) and free < needed + (1 << 20)


def _too_large(error: BaseException, written: int) -> bool:
    """True when ``error`` means the file outgrew the process's file-size limit (``ulimit -f``): EFBIG, or
    torch's writer failing once the file reached the limit."""
    cause = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EFBIG:
            return True
        cause = cause.__cause__ or cause.__context__
    limit = _file_size_limit()
    return limit is not None and written >= limit


def _write_failed(path: Path, error: BaseException, needed: int, written: int = 0) -> Exception:
    """One sentence for a failed write of ``path``: a file-size limit, a full disk, or what the system said
    (its ``reason`` attribute: the cause in a few words, for a caller that names the write in its own sentence)."""
    if _too_large(error, written):
        limit = _file_size_limit()
        what = f" of {_size(limit)}" if limit is not None else ""
        failed = WriteError(f"{path} cannot be written: it is larger than this shell's file-size limit{what} "
                            "(ulimit -f), so the file was left as it was; raise the limit (ulimit -f unlimited) "
                            "and run the command again.")
        failed.reason = f"larger than the file-size limit{what}, ulimit -f"
    elif _out_of_space(error, path.parent, needed):
        left = free_bytes(path.parent)
        free = "" if left is None else f", {_size(left)} free"
        failed = NoSpaceError(f"No space left on the disk of {path.parent} to write {path.name} (needed about "
                              f"{_size(needed)}{free}): free some space, or write to another folder.")
        failed.reason = "No space left on device"
    elif isinstance(error, OSError):
        failed = WriteError(f"{path} cannot be written ({error.strerror or type(error).__name__}): choose a "
                            "folder you may write to.")
        failed.reason = error.strerror or type(error).__name__
    else:
        failed = WriteError(f"{path} could not be written ({type(error).__name__}: {' '.join(str(error).split())}): "
                            "check the disk, then save again.")
        failed.reason = type(error).__name__
    return failed


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entry of a renamed file to the disk (where the system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, write, needed: int = 0, durable: bool = True) -> Path:
    """Replace the file ``path`` whole with what ``write`` gives: bytes, a str (written as UTF-8), or a function
    called with the open binary file.

    The data goes to a temporary file of a unique name beside ``path`` (``.<name>.<random>.tmp``, created
    exclusively, never through a link), is flushed to the disk (with ``durable``, the default; a cache that can
    be rebuilt passes False), then renamed over ``path``, and the folder is flushed too. A crash or Ctrl-C at any
    moment leaves either the old file or the new one, never half of one (a process killed outright may leave
    its temporary file behind; a run's folder removes them on its next start, see
    :meth:`lmcourse.training.rundir.RunDir.clean`). A link at ``path`` is replaced, never followed. A new file
    gets the user's umask (0o644 under umask 022), a replaced one keeps its mode.

    ``needed`` is the expected size in bytes: a disk with less free space, or a file-size limit below it, is
    refused before anything is written. A failure is a :class:`~lmcourse.errors.NoSpaceError` when the disk is
    full (saying how much was needed) and a :class:`~lmcourse.errors.WriteError` otherwise (a file-size limit
    named as such), each naming ``path``, never the temporary file.
    """
    path = Path(path)
    if isinstance(write, str):
        write = write.encode("utf-8")
    if isinstance(write, (bytes, bytearray, memoryview)):
        data, needed = bytes(write), max(needed, len(write))
        write = lambda f: f.write(data)  # noqa: E731
    limit = _file_size_limit()
    if limit is not None and needed > limit:
        raise _write_failed(path, OSError(errno.EFBIG, "File too large"), needed, needed)
    left = free_bytes(path.parent) if path.parent.is_dir() else None
    if left is not None and left < needed:  # it cannot fit: say so before writing anything
        raise _write_failed(path, OSError(errno.ENOSPC, "No space left on device"), needed)
    try:
        before = os.lstat(path)
        mode = stat.S_IMODE(before.st_mode) if stat.S_ISREG(before.st_mode) else new_file_mode()
    except OSError:
        mode = new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise _write_failed(path, error, needed) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), mode)
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        try:
            written = os.path.getsize(tmp)
            os.remove(tmp)
        except OSError:
            written = 0
        if isinstance(error, (OSError, RuntimeError)) and not isinstance(error, (NoSpaceError, WriteError)):
            raise _write_failed(path, error, needed, written) from None
        raise
    if durable:
        _sync_folder(path.parent)
    return path
