"""The reference runs committed with the course: a lesson's central trainings, ready on a fresh clone.

The folder ``reference_runs/`` at the top of the repository (``LMCOURSE_REFERENCE_RUNS`` points
elsewhere) holds one checkpoint per run, its weights in half precision, and ``manifest.json``,
one entry per run::

    {"file": "06-mos-3f2a....pt", "lesson": "06", "name": "06-mos", "key": "3f2a...",
     "settings": {...}, "scale": "cpu", "dataset": "embedded", "corpus": "<fingerprint>",
     "epochs": 6, "bytes": 812345, "sha256": "...", "saved_at": 1790000000.0}

:func:`load` gives a run back only when its key (settings, scale, dataset and corpus fingerprint,
hashed by :mod:`lmcourse.store.stored_runs`) matches and the file's sha256 equals the manifest's;
a damaged file is reported in one sentence and skipped, so the lesson trains instead of crashing.
:func:`store` is called for every finished run while ``LMCOURSE_STORE_REFERENCE=1`` (what ``make runs``
sets). The whole folder stays under :data:`BUDGET_BYTES`.
"""
from __future__ import annotations

import copy
import json
import os
import re
import time
import warnings
from pathlib import Path
from typing import Optional

from .. import config
from ..corpora.download import sha256_of as sha256
from ..errors import CheckpointError
from ..training.checkpoint import atomic_write, load_checkpoint, save_checkpoint

FOLDER_ENV = "LMCOURSE_REFERENCE_RUNS"
STORE_ENV = "LMCOURSE_STORE_REFERENCE"
MANIFEST = "manifest.json"
BUDGET_BYTES = 25 * 10**6  # the whole course's committed runs: 25 MB


def folder() -> Path:
    """Where the reference runs are: ``$LMCOURSE_REFERENCE_RUNS``, else ``reference_runs/`` beside the package."""
    given = os.environ.get(FOLDER_ENV)
    return Path(given).expanduser() if given else Path(__file__).resolve().parents[2] / "reference_runs"


def storing() -> bool:
    """True while ``LMCOURSE_STORE_REFERENCE=1``: finished runs are written into the reference folder too."""
    return os.environ.get(STORE_ENV, "") not in ("", "0") and config.SCALE != "ci"


def read_manifest(where: Optional[Path] = None) -> list[dict]:
    """The manifest's entries (empty when there is none)."""
    path = Path(where or folder()) / MANIFEST
    if not path.is_file():
        return []
    try:
        runs = json.loads(path.read_text(encoding="utf-8")).get("runs", [])
    except (ValueError, AttributeError) as err:
        raise CheckpointError(f"{path} is not a readable manifest ({err}): restore it with `git checkout "
                              f"{path.name}` or regenerate the runs with `make runs`.") from None
    return list(runs)


def write_manifest(runs: list[dict], where: Optional[Path] = None) -> Path:
    """Write the entries, sorted by file name, atomically."""
    target = Path(where or folder())
    target.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"runs": sorted(runs, key=lambda r: r["file"])}, indent=1, sort_keys=True) + "\n"
    return atomic_write(target / MANIFEST, lambda f: f.write(text.encode("utf-8")))


def load(name: str, key: str, vocab):
    """``(model, info, path)`` of the reference run ``name`` with ``key``, or None when there is none usable."""
    where = folder()
    entry = next((r for r in read_manifest(where) if r.get("key") == key and r.get("name") == name), None)
    if entry is None:
        return None
    path = where / entry["file"]
    problem = None
    if not path.is_file():
        problem = "is missing"
    elif sha256(path) != entry.get("sha256"):
        problem = "does not match the sha256 in its manifest (the file is damaged or was replaced)"
    if problem is None:
        try:
            model, info = load_checkpoint(path, vocab=vocab)
            model.float()  # stored in half precision
            return model, info, path
        except CheckpointError as err:
            problem = f"cannot be read ({err})"
    warnings.warn(f"The reference run {path} {problem}, so it is trained afresh: restore it with `git checkout`, "
                  f"or regenerate it with `make runs`.", RuntimeWarning, stacklevel=3)
    return None


# Runs whose name does not start with their lesson: the shared word LSTM kept the name it had before
# lessons named their runs, since lessons 07-09 load it by that name and lesson 08's stored passes
# carry it in their keys. Lesson 02b trains it.
OWNERS = {"word-lstm": "02b", "word-lstm-gpu": "02b"}


def lesson_of(name: str) -> str:
    """The lesson that trains the run ``name``: "06-mos" -> "06", "02b-char-lstm" -> "02b", "word-lstm" -> "02b"."""
    if name in OWNERS:
        return OWNERS[name]
    lesson = re.match(r"\d\d[a-z]?(?=-)", name)
    return lesson[0] if lesson else ""


def store(name: str, key: str, settings: dict, model, vocab, rows: list, corpus: str) -> Path:
    """Write a finished run in half precision and enter it in the manifest (replacing one of the same key)."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    entry_file = f"{name}-{key}.pt"
    half = copy.deepcopy(model).cpu().half()
    path = save_checkpoint(where / entry_file, half, vocab, rows, {"run": name, "settings": settings,
                                                                   "complete": True, "precision": "float16"})
    entry = {"file": entry_file, "lesson": lesson_of(name), "name": name, "key": key,
             "settings": json.loads(json.dumps(settings, default=str)), "scale": config.SCALE,
             "dataset": str(config.DATASET), "corpus": corpus, "epochs": len(rows), "bytes": path.stat().st_size,
             "sha256": sha256(path), "saved_at": time.time()}
    runs = [r for r in read_manifest(where) if r.get("file") != entry_file]
    write_manifest(runs + [entry], where)
    return path


def prune(lesson: str, since: float, where: Optional[Path] = None) -> list[str]:
    """Remove the entries (and files) of ``lesson`` ("06") saved before ``since``: runs its regeneration no longer made."""
    where = Path(where or folder())
    runs = read_manifest(where)
    stale = [r for r in runs if r.get("lesson") == lesson and r.get("saved_at", 0) < since]
    if not stale:
        return []
    write_manifest([r for r in runs if r not in stale], where)
    for r in stale:
        (where / r["file"]).unlink(missing_ok=True)
    return [r["file"] for r in stale]


def total_bytes(where: Optional[Path] = None) -> int:
    """The size of every file in the reference folder."""
    where = Path(where or folder())
    return sum(p.stat().st_size for p in where.glob("*") if p.is_file()) if where.is_dir() else 0
