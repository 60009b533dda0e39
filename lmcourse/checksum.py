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
"""
from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

import torch

KEY = "sha256"
__all__ = ["digest", "seal", "verify", "sealed_json", "read_sealed_json", "KEY"]


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
