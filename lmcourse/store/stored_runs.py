"""Runs that train once: a lesson's long training is saved the first time and loaded after.

A lesson that trains for minutes calls::

    run = train_or_load("06-mos", settings, train_fn, vocab, scale=SCALE, dataset=DATASET)
    model, rows = run.model, run.history      # rows: the training history, one dict per epoch

``settings`` is a dict of everything that decides the result (sizes, epochs, learning rate, seed);
the dataset, the scale (both given by the caller: the store reads no global setting) and a
fingerprint of the corpus (its vocabulary, and the embedded corpus's format version) are added.
Their hash names the file, ``<cache>/runs/<name>-<hash>.pt``,
so changing any knob trains again, and putting it back loads the earlier run. ``train_fn()`` must
return ``(model, history)``; only a run that finished is stored (an interrupted one is not
mistaken for a result). At the ``ci`` scale nothing is cached, so the tests always exercise the
training code. ``retrain=True`` or ``LMCOURSE_RETRAIN=1`` ignores the stored run.

Reference runs are looked for first: the runs committed with the course in ``reference_runs/``
(:mod:`lmcourse.store.reference_runs`), in half precision, each checked against the sha256 its
manifest records. So a fresh clone loads a lesson's central runs in seconds. ``make runs`` retrains
them with ``LMCOURSE_STORE_REFERENCE=1``, which makes every finished run land there too.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .. import config
from ..corpora.embedded import FORMAT as EMBEDDED_FORMAT
from ..errors import CheckpointError
from . import reference_runs as reference
from ..training.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["CachedRun", "train_or_load", "run_path", "run_key", "corpus_fingerprint", "check_name", "wanted"]


@dataclass
class CachedRun:
    model: object  # the RNNLM at its best validation weights
    history: list  # one dict per epoch
    loaded: bool  # True when read from disk instead of trained
    path: Optional[Path]


def corpus_fingerprint(vocab) -> str:
    """A short hash of the vocabulary's tokens in order, and of the embedded corpus's format version.

    A run trained on another version of a corpus is then never loaded as this one's.
    """
    tokens = getattr(vocab, "itos", None)
    if tokens is None:
        raise TypeError(f"train_or_load needs the corpus's Vocab (corpus.vocab), got {type(vocab).__name__}.")
    blob = json.dumps({"tokens": list(tokens), "embedded_format": EMBEDDED_FORMAT})
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_key(name: str, settings: dict, vocab, scale: str, dataset) -> str:
    """The hash of everything that decides a run: name, settings, dataset, scale and corpus fingerprint."""
    if scale not in config.SCALES:
        raise ValueError(f"scale={scale!r} is not a scale: use one of {', '.join(config.SCALES)}.")
    blob = json.dumps({"name": name, "settings": settings, "dataset": str(dataset), "scale": scale,
                       "corpus": corpus_fingerprint(vocab)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def check_name(name: str, example: str = "06-mos") -> str:
    """``name`` when it is a plain file name, else a ValueError saying so."""
    if not isinstance(name, str) or not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"A stored result's name must be a plain file name such as '{example}', got {name!r}.")
    return name


def run_path(name: str, settings: dict, vocab, scale: str, dataset) -> Path:
    """Where the run ``name`` with these ``settings``, on the corpus of ``vocab``, is stored."""
    return _stored(name, run_key(name, settings, vocab, scale, dataset))


def _stored(name: str, key: str) -> Path:
    return config.cache_dir() / "runs" / f"{check_name(name)}-{key}.pt"


def wanted(retrain: Optional[bool], scale: str, lesson: Optional[str] = None) -> bool:
    """Whether a stored result may be used: at a scale whose results are kept, not with ``retrain`` or
    ``LMCOURSE_RETRAIN=1``. ``LMCOURSE_RETRAIN_LESSONS`` (lesson ids, "03,09"), when set, limits the
    retraining to the results those lessons own (``lesson``): ``make runs LESSONS=03`` retrains lesson 03's
    runs and still loads the course model that lesson 03 ablates, which lesson 09 owns."""
    if retrain is not None:
        return not retrain
    if not reference.kept(scale):
        return False
    if os.environ.get("LMCOURSE_RETRAIN", "") in ("", "0"):
        return True
    only = [x.strip() for x in os.environ.get("LMCOURSE_RETRAIN_LESSONS", "").split(",") if x.strip()]
    return bool(only) and lesson not in only


def train_or_load(name: str, settings: dict, train_fn: Callable[[], tuple], vocab, *, scale: str, dataset,
                  retrain: Optional[bool] = None, reference_run: bool = True,
                  lesson: Optional[str] = None) -> CachedRun:
    """Load the finished run ``name`` trained with ``settings`` at ``scale`` on ``dataset``, or train it with
    ``train_fn`` and store it.

    The order: the committed reference run, then the user's cache, then training. ``reference_run=False``
    keeps the run out of ``reference_runs/`` (a run short enough to train on a fresh clone). While
    ``LMCOURSE_STORE_REFERENCE=1``, a finished run, trained now or read from the user's cache, is also
    written to ``reference_runs/``, entered as ``lesson``'s (default: the lesson its name starts with)."""
    key = run_key(name, settings, vocab, scale, dataset)
    path = _stored(name, key)
    entry = reference.Entry(name, key, settings, scale, dataset, corpus_fingerprint(vocab), lesson)
    if wanted(retrain, scale, entry.lesson or reference.lesson_of(name)):
        found = reference.load(name, key, vocab)
        if found is not None:
            model, info, ref_path = found
            print(f"Loaded the stored reference run '{name}' ({len(info['history'])} epochs, committed with the "
                  f"course). Set RETRAIN = True, or LMCOURSE_RETRAIN=1, to train it afresh.")
            return CachedRun(model, info["history"], True, ref_path)
    if wanted(retrain, scale, entry.lesson or reference.lesson_of(name)) and path.is_file():
        try:
            model, info = load_checkpoint(path, vocab=vocab)
        except CheckpointError as err:  # damaged, or made with another vocabulary: train again
            warnings.warn(f"The stored run '{name}' cannot be used ({reference.without_folder(err, path)}); training "
                          "it again.", RuntimeWarning, stacklevel=2)
            model, info = None, {"extra": {}}
        extra = info["extra"]
        if extra.get("complete"):
            # the file's name only: a lesson's saved output carries no folder of this machine and no date
            print(f"Loaded the finished run '{name}' ({len(info['history'])} epochs) from your stored runs "
                  f"({path.parent.name}/{path.name} in the course's cache folder). Set RETRAIN = True, or "
                  "LMCOURSE_RETRAIN=1, to train it again.")
            if reference_run and reference.storing(scale):  # `make runs` may reuse what the user trained
                reference.store(entry, model, vocab, info["history"])
            return CachedRun(model, info["history"], True, path)
    if reference_run and wanted(retrain, scale, entry.lesson or reference.lesson_of(name)):
        reference.announce_missing(name, scale)  # when the committed runs are not installed: what training costs
    model, history = train_fn()
    rows = list(getattr(history, "rows", history) or [])
    if not reference.kept(scale):
        return CachedRun(model, rows, False, None)
    complete = getattr(history, "stop_reason", "completed") in ("completed", "converged")  # ran to its end, by its rule
    extra = {"run": name, "settings": settings, "complete": complete, "saved_at": time.time()}
    save_checkpoint(path, model, vocab, rows, extra)
    if complete and reference_run and reference.storing(scale):
        reference.store(entry, model, vocab, rows)
    return CachedRun(model, rows, False, path)
