"""Measurements that take minutes: computed once, stored, and loaded after.

A lesson whose central *measurement* (not a training) is longer than its time budget calls::

    out = compute_or_load("08-dyneval", settings, compute, vocab)   # a dict of tensors and numbers

``compute()`` returns a dict of tensors, floats, ints, strings and lists. The key is the one of
:mod:`lmcourse.store.stored_runs`: the name, the settings, the dataset, the scale and the
corpus fingerprint, so a changed knob or corpus computes afresh. The order: the committed copy in
``reference_runs/`` (entered in its manifest with ``"kind": "numbers"`` and checked by its sha256),
then the user's cache (``<cache>/numbers/<name>-<key>.pt``), then ``compute()``. At the ``ci``
scale nothing is stored. While ``LMCOURSE_STORE_REFERENCE=1`` every result, computed or read from
the user's cache, is also written to the reference folder; ``LMCOURSE_RETRAIN=1`` (or
``recompute=True``) ignores what is stored.
"""
from __future__ import annotations

import io
import json
import os
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from .. import config
from . import reference_runs as reference
from ..training.checkpoint import atomic_write
from .stored_runs import corpus_fingerprint, run_key

__all__ = ["compute_or_load", "numbers_path"]


def numbers_path(name: str, settings: dict, vocab) -> Path:
    """Where the measurement ``name`` with these ``settings`` is kept in the user's cache."""
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"A measurement's name must be a plain file name such as '08-dyneval', got {name!r}.")
    return config.cache_dir() / "numbers" / f"{name}-{run_key(name, settings, vocab)}.pt"


def _wanted(recompute: Optional[bool]) -> bool:
    if recompute is not None:
        return not recompute
    return config.SCALE != "ci" and os.environ.get("LMCOURSE_RETRAIN", "") in ("", "0")


def _write(path: Path, numbers: dict) -> Path:
    buffer = io.BytesIO()
    torch.save(numbers, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda f: f.write(buffer.getvalue()))


def _read(path: Path) -> Optional[dict]:
    try:
        numbers = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is computed afresh
        warnings.warn(f"The stored measurement {path} cannot be read ({type(err).__name__}); it is computed afresh.",
                      RuntimeWarning, stacklevel=3)
        return None
    return numbers if isinstance(numbers, dict) else None


def _from_reference(name: str, key: str) -> Optional[dict]:
    where = reference.folder()
    entry = next((r for r in reference.read_manifest(where) if r.get("key") == key and r.get("name") == name), None)
    if entry is None:
        return None
    path = where / entry["file"]
    if not path.is_file() or reference.sha256(path) != entry.get("sha256"):
        warnings.warn(f"The stored measurement {path} is missing or does not match the sha256 in its manifest, so "
                      f"it is computed afresh: restore it with `git checkout`, or regenerate it with `make runs`.",
                      RuntimeWarning, stacklevel=3)
        return None
    return _read(path)


def _to_reference(name: str, key: str, settings: dict, numbers: dict, corpus: str) -> Path:
    where = reference.folder()
    file = f"{name}-{key}.pt"
    path = _write(where / file, numbers)
    entry = {"file": file, "kind": "numbers", "lesson": reference.lesson_of(name), "name": name,
             "key": key, "settings": json.loads(json.dumps(settings, default=str)), "scale": config.SCALE,
             "dataset": str(config.DATASET), "corpus": corpus, "epochs": 0, "bytes": path.stat().st_size,
             "sha256": reference.sha256(path), "saved_at": time.time()}
    runs = [r for r in reference.read_manifest(where) if r.get("file") != file]
    reference.write_manifest(runs + [entry], where)
    return path


def compute_or_load(name: str, settings: dict, compute: Callable[[], dict], vocab,
                    recompute: Optional[bool] = None) -> dict:
    """The stored result of ``compute()`` for ``name`` and ``settings``, computed and stored if there is none.

    The result carries ``"loaded": True`` when it was read from disk."""
    key = run_key(name, settings, vocab)
    path = numbers_path(name, settings, vocab)
    if _wanted(recompute):
        found = _from_reference(name, key)
        if found is not None:
            return {**found, "loaded": True}
        found = _read(path) if path.is_file() else None
        if found is not None:
            if reference.storing():
                _to_reference(name, key, settings, found, corpus_fingerprint(vocab))
            return {**found, "loaded": True}
    numbers = compute()
    if not isinstance(numbers, dict):
        raise TypeError(f"compute() for {name!r} must return a dict of tensors and numbers, "
                        f"got {type(numbers).__name__}.")
    numbers = {k: v for k, v in numbers.items() if k != "loaded"}
    if config.SCALE != "ci":
        _write(path, numbers)
        if reference.storing():
            _to_reference(name, key, settings, numbers, corpus_fingerprint(vocab))
    return {**numbers, "loaded": False}
