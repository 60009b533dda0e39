"""Which runs each lesson stores, and the check that the committed reference runs are still the lessons'.

A lesson whose central training is longer than its time budget declares it here: the run's name
and, for a scale, the list of settings dicts it trains (one per seed, variant, ...)::

    @declare("06-mos")
    def _mos(scale):
        return [dict(d=8, epochs=6, seed=s, ...) for s in range(3)]

and takes its settings from :func:`settings` (instructor knobs stay plain variables: a changed knob
gives other settings, which are simply trained afresh). :func:`problems` compares the manifest of
``reference_runs/`` with this registry and today's corpus, so a lesson whose settings or corpus
moved without ``make runs`` fails the tests with a sentence that says so.
"""
from __future__ import annotations

import json
from typing import Callable, Optional

from .. import config
from ..training import reference_runs as reference

REGISTRY: dict[str, Callable[[str], list]] = {}


def declare(name: str):
    """Register ``fn(scale) -> [settings, ...]`` as the runs named ``name``."""
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"The run name {name!r} is declared twice: give each lesson's run its own name.")
        REGISTRY[name] = fn
        return fn
    return register


def settings(name: str, scale: Optional[str] = None) -> list:
    """The settings dicts the run ``name`` trains at ``scale`` (default: the current one)."""
    if name not in REGISTRY:
        raise KeyError(f"No lesson declares a run named {name!r}: declare it in lmcourse/course/lesson_runs.py.")
    return REGISTRY[name](scale or config.SCALE)


def _canonical(settings: dict) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def problems(runs: Optional[list] = None, fingerprints: Optional[dict] = None, budget: int = reference.BUDGET_BYTES,
             where=None) -> list:
    """One sentence per committed run that is no longer what its lesson would train, plus the size budget.

    ``fingerprints`` maps a dataset to its corpus fingerprint today (computed when needed)."""
    where = where or reference.folder()
    runs = reference.read_manifest(where) if runs is None else runs
    fingerprints = dict(fingerprints or {})
    found = []
    for entry in runs:
        name, lesson = entry.get("name", "?"), entry.get("lesson") or "?"
        redo = f"run `make runs LESSONS={lesson}` to regenerate it"
        if name not in REGISTRY:
            found.append(f"The reference run {entry.get('file')} is for '{name}', which no lesson declares: "
                         f"declare it in lmcourse/course/lesson_runs.py or {redo}.")
            continue
        wanted = {_canonical(s) for s in settings(name, entry.get("scale"))}
        if _canonical(entry.get("settings")) not in wanted:
            found.append(f"The reference run {entry.get('file')} was trained with settings lesson {lesson} no "
                         f"longer uses: {redo}.")
        dataset = entry.get("dataset", config.EMBEDDED)
        if dataset not in fingerprints:
            fingerprints[dataset] = _fingerprint(dataset)
        if entry.get("corpus") != fingerprints[dataset]:
            found.append(f"The reference run {entry.get('file')} was trained on another version of the "
                         f"{dataset} corpus: {redo}.")
    size = reference.total_bytes(where)
    if size > budget:
        found.append(f"The reference runs take {size / 1e6:.1f} MB, over the course's budget of {budget / 1e6:.0f} MB: "
                     f"store fewer or smaller runs.")
    return found


def _fingerprint(dataset: str) -> str:
    from ..corpora.data import load_corpus
    from ..training.stored_runs import corpus_fingerprint

    return corpus_fingerprint(load_corpus(dataset).vocab)


from . import dyneval_runs  # noqa: E402,F401  lesson 08's stored passes register themselves
