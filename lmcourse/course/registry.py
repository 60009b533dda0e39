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

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Callable, Optional

from .. import EXIT_INTERRUPTED, _ctrl_c_raises, config
from ..corpora import embedded
from ..corpora.data import load_corpus
from ..corpora.grammar import Params
from ..errors import LMCourseError, sentence
from ..store import reference_runs as reference
from ..store.stored_runs import corpus_fingerprint, run_key, vocabulary_fingerprint
from ..vocab import Vocab

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


def _vocab(dataset, level: str = "word"):
    """The vocabulary (with the fingerprint of its files) of a dataset name, or of a variant of the embedded corpus
    given as the fields of its :class:`~lmcourse.corpora.grammar.Params` (a run whose settings carry
    ``corpus={...}``), read as the lessons read it."""
    if isinstance(dataset, dict):
        dataset = embedded.ensure(params=Params(**dataset))
    return load_corpus(dataset, level=level).vocab


def _fingerprint(dataset, level: str = "word") -> str:
    """The corpus fingerprint of a dataset name or embedded variant (see :func:`_vocab`)."""
    return corpus_fingerprint(_vocab(dataset, level))


def rekey_corpus(where=None, dry_run: bool = False) -> tuple[list, list]:
    """File every committed result of the reference folder ``where`` (default ``reference_runs/``, else
    ``$LMCOURSE_REFERENCE_RUNS``; any folder with its own ``manifest.json``) under the key of today's corpus
    fingerprint, without retraining: ``(moved, refused)``, ``moved`` as ``(old file, new file)`` pairs and
    ``refused`` one sentence per entry left as it was.

    For after a change of how the fingerprint is computed (it came to cover every file of the corpus, not only
    its vocabulary): an entry is re-keyed only when its recorded fingerprint and key are those the earlier rule
    (:func:`lmcourse.store.stored_runs.vocabulary_fingerprint`) gives today's corpus, so a result made from a
    corpus whose vocabulary differs is refused, never filed as this one's. (The earlier rule saw the vocabulary
    alone: a result made before an edit of a split that kept the vocabulary cannot be told from one made after
    it, so re-key only a folder whose results were made from today's files.) An entry already under today's key
    is left alone, so running it twice changes nothing. The corpora must be where the lessons read them
    (``LMCOURSE_DATA`` for Tiny Shakespeare). ``dry_run``: say what would move, move nothing.

    From the command line: ``python -m lmcourse.course.registry rekey [FOLDER] [--dry-run]``."""
    where = Path(where) if where is not None else reference.folder()
    moved, refused, vocabs = [], [], {}
    for entry in reference.read_manifest(where):
        name, file = entry.get("name", "?"), entry.get("file")
        settings, scale, dataset = entry.get("settings") or {}, entry.get("scale"), entry.get("dataset")
        read = settings.get("corpus") if isinstance(settings, dict) else None
        read = read or dataset or config.EMBEDDED
        level = LEVELS.get(name, "word")
        label = _canonical(read) if isinstance(read, dict) else f"{read}/{level}"
        if label not in vocabs:
            vocabs[label] = _vocab(read, level)
        vocab = vocabs[label]
        new_fp, old_fp = corpus_fingerprint(vocab), vocabulary_fingerprint(vocab)
        if entry.get("corpus") == new_fp:
            continue
        tokens_only = Vocab(vocab.itos)  # no source: keyed as the earlier rule keyed it
        if entry.get("corpus") != old_fp or run_key(name, settings, tokens_only, scale, dataset) != entry.get("key"):
            refused.append(f"{file} was not made from today's {name} corpus (its fingerprint or key is not the one "
                           f"the earlier rule gives it), so it is left as it is: run `make runs LESSONS="
                           f"{entry.get('lesson') or '?'}` to regenerate it.")
            continue
        key = run_key(name, settings, vocab, scale, dataset)
        new = reference.Entry(name, key, settings, scale, dataset, new_fp, entry.get("lesson"))
        if not dry_run:
            reference.rekey(file, new, where)
        moved.append((file, new.file))
    return moved, refused


def main(argv=None) -> int:
    """``python -m lmcourse.course.registry rekey [FOLDER] [--dry-run]`` (see :func:`rekey_corpus`), and
    ``python -m lmcourse.course.registry check [FOLDER]``: the problems of :func:`problems`, one a line."""
    parser = argparse.ArgumentParser(prog="python -m lmcourse.course.registry",
                                     description="Check the committed reference runs, or re-key them after a change "
                                                 "of the corpus fingerprint.")
    parser.add_argument("command", choices=("check", "rekey"))
    parser.add_argument("folder", nargs="?", default=None, help="a reference folder with its manifest.json "
                                                                "(default: reference_runs/)")
    parser.add_argument("--dry-run", action="store_true", help="rekey: say what would move, move nothing")
    _ctrl_c_raises()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            found = problems(where=Path(args.folder) if args.folder else None)
            print("\n".join(found) or "The committed runs are the lessons' own.")
            return 1 if found else 0
        moved, refused = rekey_corpus(args.folder, dry_run=args.dry_run)
    except (LMCourseError, ValueError, OSError) as err:  # a damaged manifest, a corpus that cannot be read or had
        print(f"error: {sentence(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nerror: interrupted; each entry is re-keyed whole (file and manifest), so run it again to finish.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    for old, new in moved:
        print(f"{'would move' if args.dry_run else 'moved'} {old} -> {new}")
    for line in refused:
        print(f"left: {line}", file=sys.stderr)
    print(f"{len(moved)} re-keyed, {len(refused)} left as they were.")
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
