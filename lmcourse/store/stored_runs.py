"""Runs that train once: a lesson's long training is saved the first time and loaded after.

A lesson that trains for minutes calls::

    run = train_or_load("06-mos", settings, train_fn, vocab, scale=SCALE, dataset=DATASET)
    model, rows = run.model, run.history      # rows: the training history, one dict per epoch

``settings`` is a dict of everything that decides the result (sizes, epochs, learning rate, seed);
the dataset, the scale (both given by the caller: the store reads no global setting) and a
fingerprint of the corpus are added: its vocabulary and every byte its streams were computed from
(the size and sha256 of all three split files and the ``vocab.txt`` read, the embedded corpus's
parameters and format version; see :func:`lmcourse.corpora.data.source_fingerprint`, cheap since each
file's digest is remembered under its identity). Their hash names the file, ``<cache>/runs/<name>-<hash>.pt``,
so changing any knob, or any file of the corpus, trains again (with one sentence saying that the corpus
changed, when a run of the same settings on its earlier version is stored), and putting it back loads the
earlier run. ``train_fn()`` must
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
from ..checksum import atomic_write
from ..errors import CheckpointError
from . import reference_runs as reference
from ..training.checkpoint import load_checkpoint, save_checkpoint
from ..training.lock import RunLock
from ..vocab import Vocab

__all__ = ["CachedRun", "train_or_load", "run_path", "run_key", "corpus_fingerprint", "vocabulary_fingerprint",
           "check_name", "wanted", "earlier_corpus"]


@dataclass
class CachedRun:
    model: object  # the RNNLM at its best validation weights
    history: list  # one dict per epoch
    loaded: bool  # True when read from disk instead of trained
    path: Optional[Path]
    stop_reason: Optional[str] = None  # why a run trained now stopped ("completed", "nan", ...); None when loaded


def corpus_fingerprint(vocab) -> str:
    """A short hash of the vocabulary's tokens in order, of the embedded corpus's format version, and of the files
    the corpus was read from (``vocab.source``, set by :func:`lmcourse.corpora.data.load_corpus`: every split file,
    not only the vocabulary).

    A run trained on another version of a corpus, an edit of ``valid.txt`` or ``test.txt`` included, is then never
    loaded as this one's. A vocabulary made by hand (no ``source``) is fingerprinted by its tokens alone.
    """
    tokens = getattr(vocab, "itos", None)
    if tokens is None:
        raise TypeError(f"train_or_load needs the corpus's Vocab (corpus.vocab), got {type(vocab).__name__}.")
    parts = {"tokens": list(tokens), "embedded_format": EMBEDDED_FORMAT}
    source = getattr(vocab, "source", None)
    if source is not None:
        parts["source"] = source
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def vocabulary_fingerprint(vocab) -> str:
    """The fingerprint the store used before it covered the corpus's files: the tokens and the embedded format
    alone. :func:`lmcourse.course.registry.rekey_corpus` checks a committed run against it before filing the run
    under its new key."""
    return corpus_fingerprint(Vocab(vocab.itos))  # no source: the tokens and the format alone


def run_key(name: str, settings: dict, vocab, scale: str, dataset) -> str:
    """The hash of everything that decides a run: name, settings, dataset, scale and corpus fingerprint."""
    if scale not in config.SCALES:
        raise ValueError(f"scale={scale!r} is not a scale: use one of {', '.join(config.SCALES)}.")
    blob = json.dumps({"name": name, "settings": settings, "dataset": str(dataset), "scale": scale,
                       "corpus": corpus_fingerprint(vocab)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def same_but_corpus(name: str, settings: dict, scale: str, dataset) -> str:
    """The hash of a result's key without its corpus fingerprint: two results with the same one differ only in
    the version of the corpus they were made from."""
    blob = json.dumps({"name": name, "settings": settings, "dataset": str(dataset), "scale": scale},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


INDEX = "corpora.json"  # beside the stored results: the corpus fingerprint each was made from, by same_but_corpus


def remember(folder: Path, name: str, settings: dict, scale: str, dataset, corpus: str, file: str) -> None:
    """Note in ``folder``'s index that ``file`` holds ``name`` with these settings made from ``corpus``; the note
    only lets :func:`earlier_corpus` say why a result is made again, so a write that fails is skipped."""
    try:
        with RunLock(folder, "LMCOURSE_CACHE", name=INDEX + ".lock", wait=True):
            try:
                index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                index = {}
            index = index if isinstance(index, dict) else {}
            index[same_but_corpus(name, settings, scale, dataset)] = {"corpus": corpus, "file": file}
            atomic_write(folder / INDEX, json.dumps(index, indent=0, sort_keys=True), durable=False)
    except (OSError, ValueError):  # LMCourseError's of the lock are ValueErrors
        pass


def earlier_corpus(what: str, name: str, settings: dict, scale: str, dataset, corpus: str,
                   folder: Optional[Path] = None) -> Optional[str]:
    """The sentence saying that ``name`` with these settings was stored, but made from another version of the
    corpus (a committed result, or one in ``folder``'s index whose file is still there), so it is ``what`` ("trained",
    "computed") afresh; None when no such result is stored."""
    label = Path(str(dataset)).name or str(dataset)  # a name, never a folder of this machine
    because = (f"was made from another version of the corpus {label} (its files changed since), so it is {what} "
               "afresh")
    wanted_settings = json.dumps(settings, sort_keys=True, default=str)
    try:
        runs = reference.read_manifest()
    except CheckpointError:
        runs = []
    for row in runs:
        if (row.get("name"), row.get("scale"), row.get("dataset")) == (name, scale, str(dataset)) \
                and json.dumps(row.get("settings"), sort_keys=True, default=str) == wanted_settings \
                and row.get("corpus") != corpus:
            return f"The committed result '{name}' {because}."
    if folder is not None:
        try:
            noted = json.loads((folder / INDEX).read_text(encoding="utf-8")).get(
                same_but_corpus(name, settings, scale, dataset))
        except (OSError, ValueError, AttributeError):
            noted = None
        if isinstance(noted, dict) and noted.get("corpus") != corpus and isinstance(noted.get("file"), str) \
                and "/" not in noted["file"] and (folder / noted["file"]).is_file():
            return f"The stored result '{name}' {because}."
    return None


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
    if not config.switch("LMCOURSE_RETRAIN"):  # "false" and "no" are off too; a value that is neither is refused
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
    if wanted(retrain, scale, entry.lesson or reference.lesson_of(name)):
        why = earlier_corpus("trained", name, settings, scale, dataset, entry.corpus, path.parent)
        if why:
            print(why)
        if reference_run:
            reference.announce_missing(name, scale)  # when the committed runs are not installed: what training costs
    model, history = train_fn()
    rows = list(getattr(history, "rows", history) or [])
    stop = getattr(history, "stop_reason", None)
    if not reference.kept(scale):
        return CachedRun(model, rows, False, None, stop)
    complete = getattr(history, "stop_reason", "completed") in ("completed", "converged")  # ran to its end, by its rule
    extra = {"run": name, "settings": settings, "complete": complete, "saved_at": time.time()}
    save_checkpoint(path, model, vocab, rows, extra)
    remember(path.parent, name, settings, scale, dataset, entry.corpus, path.name)
    if complete and reference_run and reference.storing(scale):
        reference.store(entry, model, vocab, rows)
    return CachedRun(model, rows, False, path, stop)
