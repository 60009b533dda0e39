"""Measurements that take minutes: computed once, stored, and loaded after.

A lesson whose central *measurement* (not a training) is longer than its time budget calls::

    out = compute_or_load("08-dyneval", settings, compute, vocab, scale=SCALE, dataset=DATASET)   # a dict

``compute()`` returns a dict of tensors, floats, ints, strings and lists. The key is the one of
:mod:`lmcourse.store.stored_runs`: the name, the settings, the dataset, the scale and the
corpus fingerprint (every file of the corpus), so a changed knob or corpus computes afresh, a changed corpus
with one sentence saying so. The order: the committed copy in
``reference_runs/`` (entered in its manifest with ``"kind": "numbers"`` and checked by its sha256),
then the user's cache (``<cache>/numbers/<name>-<key>.pt``), then ``compute()``. At the ``ci``
scale nothing is stored. While ``LMCOURSE_STORE_REFERENCE=1`` every result, computed or read from
the user's cache, is also written to the reference folder; ``LMCOURSE_RETRAIN=1`` (or
``recompute=True``) ignores what is stored.

A stored file holds ``{"format", "numbers", "sha256"}``: the checksum of :mod:`lmcourse.checksum`
over every number and tensor, checked on every read, so a flipped bit is computed afresh with one
warning instead of loading as another number. A committed copy from before the seal is read when the
manifest's sha256 vouches for its bytes.
"""
from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from .. import config
from ..checksum import KEY, atomic_write, seal, verify
from . import reference_runs as reference
from .stored_runs import check_name, corpus_fingerprint, earlier_corpus, remember, run_key, wanted

__all__ = ["compute_or_load", "numbers_path"]


def numbers_path(name: str, settings: dict, vocab, scale: str, dataset) -> Path:
    """Where the measurement ``name`` with these ``settings`` is kept in the user's cache."""
    key = run_key(check_name(name, "08-dyneval"), settings, vocab, scale, dataset)
    return config.cache_dir() / "numbers" / f"{name}-{key}.pt"


FORMAT = 1


def _write(path: Path, numbers: dict) -> Path:
    buffer = io.BytesIO()
    torch.save(seal({"format": FORMAT, "numbers": numbers}), buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = buffer.getvalue()
    return atomic_write(path, lambda f: f.write(data), needed=len(data))


def _read(path: Path, vouched: bool = False) -> Optional[dict]:
    """The numbers stored at ``path``, or None (with one warning) when the file is unreadable or its checksum
    does not match; ``vouched``: the manifest's sha256 already matched, so a file from before the seal is read."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is computed afresh
        problem = f"cannot be read ({type(err).__name__})"
    else:
        if verify(payload) and isinstance(payload.get("numbers"), dict):
            return payload["numbers"]
        if vouched and isinstance(payload, dict) and KEY not in payload:
            return payload
        problem = "does not match the checksum stored with it (it was damaged or edited)"
    warnings.warn(f"The stored measurement {path} {problem}; it is computed afresh.", RuntimeWarning, stacklevel=3)
    return None


def _from_reference(name: str, key: str) -> Optional[dict]:
    where = reference.folder()
    entry = reference.entry_for(name, key, where)
    if entry is None:
        return None
    path = reference.inside(where, entry["file"])
    if not path.is_file() or reference.sha256(path) != entry.get("sha256"):
        warnings.warn(f"The stored measurement {path} is missing or does not match the sha256 in its manifest, so "
                      f"it is computed afresh: restore it with `git checkout`, or regenerate it with `make runs`.",
                      RuntimeWarning, stacklevel=3)
        return None
    return _read(path, vouched=True)


def _to_reference(entry: reference.Entry, numbers: dict) -> Path:
    where = reference.folder()
    reference.read_manifest(where)  # a damaged manifest stops here, before anything is written
    path = _write(reference.inside(where, entry.file), numbers)
    reference.enter(entry.row(path, kind="numbers"), where)
    return path


def is_stored(name: str, settings: dict, vocab, *, scale: str, dataset) -> bool:
    """Whether :func:`compute_or_load` would find these numbers (committed, or in the user's cache) without
    computing them; nothing is read but the manifest and the cache's file names."""
    key = run_key(name, settings, vocab, scale, dataset)
    return (reference.entry_for(name, key, reference.folder()) is not None
            or numbers_path(name, settings, vocab, scale, dataset).is_file())


def compute_or_load(name: str, settings: dict, compute: Callable[[], dict], vocab, *, scale: str, dataset,
                    recompute: Optional[bool] = None, lesson: Optional[str] = None) -> dict:
    """The stored result of ``compute()`` for ``name`` and ``settings`` at ``scale`` on ``dataset``, computed and
    stored if there is none (entered as ``lesson``'s, by default the lesson its name starts with).

    The result carries ``"loaded": True`` when it was read from disk."""
    key = run_key(name, settings, vocab, scale, dataset)
    path = numbers_path(name, settings, vocab, scale, dataset)
    entry = reference.Entry(name, key, settings, scale, dataset, corpus_fingerprint(vocab), lesson)
    if wanted(recompute, scale, entry.lesson or reference.lesson_of(name)):
        found = _from_reference(name, key)
        if found is not None:
            return {**found, "loaded": True}
        found = _read(path) if path.is_file() else None
        if found is not None:
            if reference.storing(scale):
                _to_reference(entry, found)
            return {**found, "loaded": True}
        why = earlier_corpus("computed", name, settings, scale, dataset, entry.corpus, path.parent)
        if why:
            print(why)
        reference.announce_missing(name, scale)  # when the committed runs are not installed: what computing costs
    numbers = compute()
    if not isinstance(numbers, dict):
        raise TypeError(f"compute() for {name!r} must return a dict of tensors and numbers, "
                        f"got {type(numbers).__name__}.")
    numbers = {k: v for k, v in numbers.items() if k != "loaded"}
    if reference.kept(scale):
        _write(path, numbers)
        remember(path.parent, name, settings, scale, dataset, entry.corpus, path.name)
        if reference.storing(scale):
            _to_reference(entry, numbers)
    return {**numbers, "loaded": False}
