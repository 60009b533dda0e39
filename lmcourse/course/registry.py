"""The registry of the runs each lesson stores, and the check that the committed reference runs are still the lessons'.

Every module of :mod:`lmcourse.course.runs` declares its runs in a dict ``RUNS`` (name -> ``fn(scale)``,
the list of settings dicts it trains); :data:`REGISTRY` gathers them all, finding the modules by
walking the package, so a new lesson's module is registered without a line here and nothing there
imports this module back. A lesson takes its settings from :func:`settings` (instructor knobs stay
plain variables: a changed knob gives other settings, which are simply trained afresh).
:func:`problems` compares the manifest of ``reference_runs/`` with this registry and today's corpus,
so a lesson whose settings or corpus moved without ``make runs`` fails the tests with a sentence that
says so.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Callable, Optional

from .. import config
from ..corpora import embedded
from ..corpora.data import load_corpus
from ..corpora.grammar import Params
from ..store import reference_runs as reference
from ..store.stored_runs import corpus_fingerprint

RUN_PACKAGE = "lmcourse.course.runs"  # every module of it is read (see the module's docstring)


def declare(name: str, runs: Callable[[str], list], level: str = "word", registry: Optional[dict] = None,
            levels: Optional[dict] = None) -> None:
    """Register ``runs(scale) -> [settings, ...]`` as the runs named ``name``.

    A run reads the lesson's word corpus unless its settings name another (``corpus``); ``level``
    says at which level (``"char"`` for a character model), so its fingerprint is checked on that."""
    registry = REGISTRY if registry is None else registry
    levels = LEVELS if levels is None else levels
    if name in registry:
        raise ValueError(f"The run name {name!r} is declared twice: give each lesson's run its own name.")
    registry[name] = runs
    if level != "word":
        levels[name] = level


def collect(package: str = RUN_PACKAGE) -> tuple[dict, dict, dict]:
    """``(registry, levels, owners)`` of every module of ``package``: its ``RUNS``, its ``LEVELS``, and the
    lesson of each run (the module's ``LESSON``, else the lesson its name says: ``lesson08`` -> ``08``)."""
    registry: dict[str, Callable[[str], list]] = {}
    levels: dict[str, str] = {}
    owners: dict[str, str] = {}
    where = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(where.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        lesson = getattr(module, "LESSON", info.name.removeprefix("lesson"))
        for name, runs in getattr(module, "RUNS", {}).items():
            declare(name, runs, getattr(module, "LEVELS", {}).get(name, "word"), registry, levels)
            owners[name] = lesson
    return registry, levels, owners


# run name -> fn(scale); run name -> the level of the corpus it reads, when not "word"; run name -> its lesson
REGISTRY, LEVELS, OWNERS = collect()


def lesson_of(name: str) -> str:
    """The lesson that declares the run ``name`` ("course-model" -> "09"), else the lesson its name starts with."""
    return OWNERS.get(name) or reference.lesson_of(name)


def settings(name: str, scale: Optional[str] = None) -> list:
    """The settings dicts the run ``name`` trains at ``scale`` (default: the current one)."""
    if name not in REGISTRY:
        raise KeyError(f"No lesson declares a run named {name!r}: declare it in a module of lmcourse/course/runs/.")
    return REGISTRY[name](scale or config.SCALE)


def _canonical(settings: dict) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def problems(runs: Optional[list] = None, fingerprints: Optional[dict] = None, budget: int = reference.BUDGET_BYTES,
             where=None) -> list:
    """One sentence per committed run that is no longer what its lesson would train, plus the size budget.

    ``fingerprints`` maps a dataset (a word corpus) or a pair ``(dataset, level)`` to its corpus fingerprint
    today (computed when needed)."""
    where = where or reference.folder()
    runs = reference.read_manifest(where) if runs is None else runs
    fingerprints = dict(fingerprints or {})
    found = []
    for entry in runs:
        name, lesson = entry.get("name", "?"), entry.get("lesson") or "?"
        redo = f"run `make runs LESSONS={lesson}` to regenerate it"
        if name not in REGISTRY:
            found.append(f"The reference run {entry.get('file')} is for '{name}', which no lesson declares: "
                         f"declare it in a module of lmcourse/course/runs/ or {redo}.")
            continue
        wanted = {_canonical(s) for s in settings(name, entry.get("scale"))}
        if _canonical(entry.get("settings")) not in wanted:
            found.append(f"The reference run {entry.get('file')} was trained with settings lesson {lesson} no "
                         f"longer uses: {redo}.")
        dataset = (entry.get("settings") or {}).get("corpus") or entry.get("dataset", config.EMBEDDED)
        level = LEVELS.get(name, "word")
        read = _canonical(dataset) if isinstance(dataset, dict) else dataset if level == "word" else (dataset, level)
        if read not in fingerprints:
            fingerprints[read] = _fingerprint(dataset, level)
        if entry.get("corpus") != fingerprints[read]:
            shown = f"{name}'s variant of the embedded" if isinstance(dataset, dict) else dataset
            found.append(f"The reference run {entry.get('file')} was trained on another version of the "
                         f"{shown} corpus: {redo}.")
    size = reference.total_bytes(where)
    if size > budget:
        found.append(f"The reference runs take {size / 1e6:.1f} MB, over the course's budget of {budget / 1e6:.0f} MB: "
                     f"store fewer or smaller runs.")
    return found


def _fingerprint(dataset, level: str = "word") -> str:
    """The corpus fingerprint of a dataset name, or of a variant of the embedded corpus given as the
    fields of its :class:`~lmcourse.corpora.grammar.Params` (a run whose settings carry ``corpus={...}``)."""
    if isinstance(dataset, dict):
        dataset = embedded.ensure(params=Params(**dataset))
    return corpus_fingerprint(load_corpus(dataset, level=level).vocab)
