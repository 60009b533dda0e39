"""Which lessons there are: the notebooks' folder, a lesson's id, the lessons named on a command line, and the
lessons copied out into a folder of the student's own (:func:`copy_lessons`, ``python -m lmcourse notebooks DEST``).

The one list every course tool reads (:mod:`lmcourse.authoring`'s ``lessons``, ``slides``, ``book``), kept below them
all. The folder is the clone's ``notebooks/``, or the copy installed with the package's wheel
(:func:`lmcourse.config.course_folder`); ``REPO`` is the clone, or None for an installed package.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

from .. import config
from ..checksum import atomic_write
from ..config import checkout, course_folder
from ..errors import ConfigError, MissingFileError, WriteError

REPO = checkout()
NOTEBOOKS = course_folder("notebooks")
PATTERN = "[0-9][0-9]*_*.ipynb"  # 02_lstm_from_equations.ipynb, 02b_lstm_language_models.ipynb, ...
SOLUTIONS = "solutions"  # the solutions' folder beside the lessons


def check_writable(paths: Sequence, what: str = "rewrites the lessons") -> None:
    """A :class:`ConfigError` when one of ``paths`` lies in the copy of the course installed with the package
    (under ``site-packages``), which no command writes to: ``make lessons``, ``make runs`` and the stamps are
    for a clone of the repository."""
    for path in paths:
        target = Path(path).resolve()
        if target == config.PACKAGE or config.PACKAGE in target.parents:
            raise ConfigError(f"This command {what}, and {path} is the copy installed with the package, which is "
                              "never written to: run it in a clone of the repository, or copy the lessons out with "
                              "`python -m lmcourse notebooks DEST` and name them there.")


def lesson_id(path) -> str:
    """The lesson's id, the part of its file name before the first underscore: ``02``, ``02b``."""
    return Path(path).name.split("_", 1)[0]


def lessons(names: Sequence[str] = (), folder: Path = NOTEBOOKS) -> list[Path]:
    """The lesson notebooks named (by number or path), or all of them in order."""
    every = sorted(Path(folder).glob(PATTERN))
    if not names:
        return every
    chosen = []
    for name in names:
        path = Path(name)
        if path.suffix == ".ipynb":
            if not path.is_file():
                raise FileNotFoundError(f"There is no notebook {name}: give a lesson number (1-10) or a path to "
                                        "an .ipynb file.")
            chosen.append(path)
            continue
        number = re.fullmatch(r"(\d{1,2})([a-z]?)", name.lower())
        match = [p for p in every if number and lesson_id(p) == f"{int(number[1]):02d}{number[2]}"]
        if not match:
            raise ValueError(f"{name!r} is not a lesson: give a number such as 7, 07 or 2b, or a notebook's path.")
        chosen.append(match[0])
    return chosen


# ------------------------------------------------------------------------------- the lessons copied out

def lesson_files(folder: Path = NOTEBOOKS) -> list[Path]:
    """What :func:`copy_lessons` copies, relative to ``folder``: every lesson and every solution file."""
    folder = Path(folder)
    found = [p.relative_to(folder) for p in lessons(folder=folder)]
    found += sorted(p.relative_to(folder) for p in (folder / SOLUTIONS).glob("*.py"))
    return found


def copy_lessons(dest, force: bool = False, folder: Optional[Path] = None) -> list[Path]:
    """Copy the lessons and their solutions (from ``folder``, default: the course's, wherever it is installed) into
    ``dest``, created if needed; the paths written. A ``dest`` that already holds a file this would overwrite is
    refused in one sentence unless ``force``; each file is written whole (a temporary file, then a rename)."""
    source = Path(folder) if folder is not None else NOTEBOOKS
    files = lesson_files(source)
    if not files:
        raise MissingFileError(f"No lessons were found in {source}: reinstall the course (pip install of its wheel), or "
                          "run this from a clone of its repository.")
    dest = Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise WriteError(f"{dest} is a file, not a folder: give a folder for the lessons.")
    clash = [rel for rel in files if (dest / rel).exists()]
    if clash and not force:
        more = f" and {len(clash) - 1} more" if len(clash) > 1 else ""
        raise WriteError(f"{dest} already holds {clash[0]}{more}, which copying the lessons would overwrite: give "
                          "another folder, or add --force to replace them.")
    written = []
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, (source / rel).read_bytes())
        written.append(target)
    return written


# ------------------------------------------------------------------- which corpus each lesson reads, and why

# Lessons that read the corpus LMCOURSE_DATASET names (``load_corpus(DATASET)``); every other lesson says, in its
# first cell, which corpora it reads whatever the setting says, and why (:data:`CORPORA`, :func:`corpus_note`).
HONOURS_DATASET = ("01", "02")
_COURSE_MODEL = "the course model's variant of the embedded corpus (with its exact oracle)"
_PTB = "Penn Treebank"
CORPORA = {
    "02b": (f"Tiny Shakespeare's characters and {_COURSE_MODEL}", "its two models are committed for those corpora"),
    "03": (f"{_COURSE_MODEL}, and {_PTB}", "its ablations are branches of those committed models"),
    "04": (f"{_COURSE_MODEL}, and {_PTB}", "it compares committed models trained on them"),
    "05": ("the embedded corpus and a lookup-rich variant of it",
           "their oracle gives the exact log-probability matrices whose rank the lesson measures"),
    "06": ("the same lookup-rich variant of the embedded corpus as lesson 05",
           "its lookups need a log-probability matrix of known rank"),
    "07": (f"{_COURSE_MODEL}, and {_PTB}", "the cache wraps the models committed for them"),
    "08": (f"{_COURSE_MODEL}, and {_PTB}", "dynamic evaluation wraps the models committed for them"),
    "09": (f"{_COURSE_MODEL}, and {_PTB}", "the ladder climbs the models committed for them"),
    "10": (_COURSE_MODEL, "its Transformer is set beside the course model on that corpus"),
}


def corpus_note(lesson: str, dataset: str) -> str:
    """The one sentence a lesson's first cell prints about its corpus: which corpus it reads, and, for a lesson
    that does not read the one ``LMCOURSE_DATASET`` names (``dataset``), which it reads instead and why."""
    if lesson in HONOURS_DATASET:
        return f"Corpus: {dataset!s}, as LMCOURSE_DATASET says (unset: the embedded corpus)."
    if lesson not in CORPORA:
        raise KeyError(f"Lesson {lesson!r} is not in lmcourse.course.catalog.CORPORA: say which corpus it reads and "
                       "why, or add it to HONOURS_DATASET.")
    reads, why = CORPORA[lesson]
    return f"Corpus: {reads}, whatever LMCOURSE_DATASET says (now {dataset!s}): {why}."
