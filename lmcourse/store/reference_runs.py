"""The reference runs committed with the course: a lesson's central trainings, ready on a fresh clone.

The folder ``reference_runs/`` at the top of the repository, installed with the package's wheel as
``lmcourse/_course/reference_runs/`` (:func:`lmcourse.config.course_folder` finds it wherever the package is;
``LMCOURSE_REFERENCE_RUNS`` points elsewhere), holds one checkpoint per run, its weights in half precision, and
``manifest.json``, one entry per run::

    {"file": "06-mos-3f2a....pt", "lesson": "06", "name": "06-mos", "key": "3f2a...",
     "settings": {...}, "scale": "cpu", "dataset": "embedded", "corpus": "<fingerprint>",
     "epochs": 6, "bytes": 812345, "sha256": "...", "saved_at": 1790000000.0}

:func:`load` gives a run back only when its key (settings, scale, dataset and corpus fingerprint,
hashed by :mod:`lmcourse.store.stored_runs`, all given by the caller as an :class:`Entry`) matches and the file's sha256 equals the manifest's;
a damaged file is reported in one sentence and skipped, so the lesson trains instead of crashing.
:func:`store` is called for every finished run while ``LMCOURSE_STORE_REFERENCE=1`` (what ``make runs``
sets). The whole folder stays under :data:`BUDGET_BYTES`. Nothing is ever written into the copy installed with
the package (under ``site-packages``): :func:`store`, :func:`rekey`, :func:`prune` and :func:`write_manifest` refuse
it in one sentence (``make runs`` is for a clone of the repository).

When the folder holds no manifest at all (the runs were not installed, or ``LMCOURSE_REFERENCE_RUNS`` names an
empty folder), :func:`announce_missing` says so once, in one sentence with what training costs, before the first
run a lesson would have loaded is trained (:data:`CPU_COST` holds the measured costs).

An entry's ``file`` is a bare file name inside the folder: one that is not (``../x``, an absolute path,
a link that leads out) refuses the manifest in one sentence, so :func:`load`, :func:`store` and
:func:`prune` never read or delete a file elsewhere. A damaged manifest is named in one sentence:
:func:`load` warns and the lesson trains afresh, :func:`store` and :func:`prune` stop before writing.
A folder that holds runs but no manifest is named too.
"""
from __future__ import annotations

import copy
import json
import os
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import config
from ..checksum import atomic_write
from ..config import by_scale, switch
from ..corpora.download import sha256_of as sha256
from ..errors import CheckpointError, ConfigError
from ..training.checkpoint import load_checkpoint, save_checkpoint

FOLDER_ENV = "LMCOURSE_REFERENCE_RUNS"
STORE_ENV = "LMCOURSE_STORE_REFERENCE"
MANIFEST = "manifest.json"
BUDGET_BYTES = 40 * 10**6  # the whole course's committed runs: 40 MB


COMMITTED_SCALE = "cpu"  # the scale every committed run is trained at
# What each committed run costs to train at cpu when it cannot be loaded: (runs committed, minutes of one CPU core
# each), keyed by the run's name or the start of it ("06-mos" covers "06-mos-d4-k4-seed0"). Measured when the runs
# were made: the trained runs' histories (elapsed_s) and the lessons' stated times for the stored measurements;
# tests/test_reference_runs.py checks the counts against the manifest and the minutes against the histories.
CPU_COST = {
    "course-model": (15, 2.5),       # five rungs x three seeds: about a minute each, MoS about nine
    "02b-char-lstm": (3, 30.0),     # three seeds until validation stops improving: 29 to 34 minutes each
    "02b-char-bits": (3, 3.0),      # each seed scored on all of validation and test
    "03-dropout": (24, 2.5),
    "05-softmax-d32": (1, 8.0),
    "06-mos": (3, 1.5),
    "06-softmax": (3, 0.5),
    "08-dyneval": (3, 2.0),
    "08-dyneval-halves": (3, 0.5),
    "08-dyneval-cache": (3, 0.5),   # the cache over the static and the adapting model: 30 s a seed
    "09-wrappers": (3, 2.0),
    "10-transformer": (3, 2.5),
    "10-equal-time": (3, 1.0),
    "10-wrappers": (3, 1.0),
    "ptb-model": (1, 80),     # the PTB model's dropout rung, seed 0 (its weights): 13-15 epochs of about 5.5 min
    "ptb-summary": (6, 50),   # each PTB training's numbers: training it, but seed 0 of that rung is ptb-model's
    "ptb-wrappers": (3, 25),  # the cache and dynamic evaluation over one seed: tuning and three passes
}
# The runs trained on real text (Tiny Shakespeare, Penn Treebank), a track of their own: hours where the embedded
# corpus's runs take minutes, so the two are stated apart (:func:`course_minutes`).
REAL_TEXT = ("02b-char-lstm", "02b-char-bits", "ptb-model", "ptb-summary", "ptb-wrappers")
_announced: set = set()  # the folders already said to be missing, in this process


def folder() -> Path:
    """Where the reference runs are: ``$LMCOURSE_REFERENCE_RUNS``, else the course's ``reference_runs/`` (the
    clone's, or the one installed with the package: :func:`lmcourse.config.course_folder`)."""
    given = os.environ.get(FOLDER_ENV)
    return Path(given).expanduser() if given else config.course_folder("reference_runs")


def _may_write(where: Path) -> Path:
    """``where`` when runs may be written there; a :class:`ConfigError` for the copy installed with the package."""
    target = Path(where).resolve()
    if target == config.PACKAGE or config.PACKAGE in target.parents:
        raise ConfigError(f"{where} is the copy of the committed runs installed with the package, which is never "
                          f"written to: regenerate them in a clone of the repository (`make runs`), or set "
                          f"{FOLDER_ENV} to a folder of your own.")
    return Path(where)


def cost(name: str) -> Optional[tuple]:
    """``(runs committed, one-core minutes each at cpu)`` of the run ``name`` (:data:`CPU_COST`), or None."""
    keys = [k for k in CPU_COST if name == k or name.startswith(k + "-")]
    return CPU_COST[max(keys, key=len)] if keys else None


def course_minutes(track: Optional[str] = None) -> float:
    """One-core minutes to train the committed runs at cpu: all of them, or one track's (``"embedded"``, or
    ``"real text"``: the runs named in :data:`REAL_TEXT`)."""
    if track not in (None, "embedded", "real text"):
        raise ValueError(f"track must be 'embedded', 'real text' or None, got {track!r}.")
    return sum(n * minutes for key, (n, minutes) in CPU_COST.items()
               if track is None or (key in REAL_TEXT) == (track == "real text"))


def missing_sentence(name: str, where: Optional[Path] = None) -> str:
    """The one sentence :func:`announce_missing` prints: where the runs were looked for, what ``name`` costs to
    train, what the whole course costs, and how to get the runs."""
    where = Path(where or folder())
    found = cost(name)
    this = f"about {found[1]:g} minutes of one CPU core" if found else "minutes of one CPU core or more"
    return (f"The course's committed runs are not here ({where} holds no {MANIFEST}), so this lesson trains what "
            f"they would have loaded, starting with '{name}': {this} for it, and as much again for each further "
            f"run the lesson reads (all of the course's runs at {COMMITTED_SCALE}: about "
            f"{course_minutes('embedded') / 60:.1f} hours on the embedded corpus, "
            f"{course_minutes('real text') / 60:.1f} on real text); install the course's wheel, or work in a clone of its repository, to load them in "
            "seconds instead.")


def announce_missing(name: str, scale: str) -> bool:
    """Print :func:`missing_sentence` when the reference folder holds no manifest and ``scale`` is the one the runs
    are committed at; once per folder and process; True when it printed. The lessons' run loaders
    (:func:`lmcourse.store.stored_runs.train_or_load`, :func:`lmcourse.store.stored_numbers.compute_or_load`) call
    it just before they train or compute."""
    where = folder()
    if scale != COMMITTED_SCALE or (where / MANIFEST).is_file() or str(where) in _announced:
        return False
    _announced.add(str(where))
    print(missing_sentence(name, where))
    return True


def kept(scale: str) -> bool:
    """Whether results at ``scale`` are stored at all: not at ``ci``, whose runs always exercise the code."""
    return by_scale(ci=False, cpu=True, gpu=True, scale=scale)


def storing(scale: str) -> bool:
    """True while ``LMCOURSE_STORE_REFERENCE=1`` at a scale whose results are :func:`kept`: finished runs are
    written into the reference folder too."""
    return kept(scale) and switch(STORE_ENV)


@dataclass(frozen=True)
class Entry:
    """What a stored result is filed under: its name, its key and what the key hashes, and its lesson."""
    name: str
    key: str
    settings: dict
    scale: str
    dataset: object  # a corpus name or folder
    corpus: str  # the corpus fingerprint
    lesson: Optional[str] = None  # default: the lesson the name starts with (:func:`lesson_of`)

    @property
    def file(self) -> str:
        return f"{self.name}-{self.key}.pt"

    def row(self, path: Path, kind: Optional[str] = None, epochs: int = 0) -> dict:
        """The manifest's entry for the file ``path`` written under this key."""
        row = {"file": self.file, "lesson": self.lesson or lesson_of(self.name), "name": self.name, "key": self.key,
               "settings": json.loads(json.dumps(self.settings, default=str)), "scale": self.scale,
               "dataset": str(self.dataset), "corpus": self.corpus, "epochs": epochs, "bytes": path.stat().st_size,
               "sha256": sha256(path), "saved_at": time.time()}
        return {"kind": kind, **row} if kind else row


def enter(row: dict, where: Optional[Path] = None) -> None:
    """Add ``row`` to the manifest, replacing the entry of the same file."""
    runs = [r for r in read_manifest(where) if r.get("file") != row["file"]]
    write_manifest(runs + [row], where)


def _damaged(path: Path, what: str) -> CheckpointError:
    return CheckpointError(f"{path} {what}: restore it with `git checkout -- {path}` or regenerate the runs "
                           "with `make runs`.")


def read_manifest(where: Optional[Path] = None) -> list[dict]:
    """The manifest's entries (empty when there is none), each checked: a dict whose ``file`` is a bare
    name of a file inside the folder; anything else is a :class:`CheckpointError` naming the manifest."""
    where = Path(where or folder())
    path = where / MANIFEST
    if not path.exists():
        return []
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise _damaged(path, f"is not a readable manifest ({type(err).__name__})") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, list):
        raise _damaged(path, 'is not a manifest (it should be {"runs": [one entry per run]})')
    for i, entry in enumerate(runs):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise _damaged(path, f"has an entry ({i + 1} of {len(runs)}) without the name of its file")
        inside(where, entry["file"], path)
    return list(runs)


def inside(where: Path, name: str, manifest: Optional[Path] = None) -> Path:
    """``where / name`` when ``name`` is a bare name of a stored result (``*.pt``) that stays inside ``where``,
    links followed; else a :class:`CheckpointError`: a manifest may never name a file elsewhere, nor one of the
    folder's own files (the manifest, a README), which no entry owns."""
    target = Path(where) / name
    bare = name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\0" not in name
    if not bare or not name.endswith(".pt") or target.resolve().parent != Path(where).resolve():
        raise _damaged(manifest or Path(where) / MANIFEST,
                       f"names the file {name!r}, which is not a file inside {where} that an entry may own; an "
                       f"entry's file is a bare name ending in .pt, never {MANIFEST} or a README")
    return target


def _unlisted_runs(where: Path) -> Optional[str]:
    """The sentence for a folder that holds runs but no manifest, else None."""
    if (where / MANIFEST).exists() or not where.is_dir():
        return None
    files = sorted(p.name for p in where.glob("*.pt"))
    if not files:
        return None
    return (f"The reference folder {where} holds {len(files)} runs ({files[0]}, ...) but no {MANIFEST}, so none "
            f"can be checked and they are trained afresh: restore it with `git checkout -- {where / MANIFEST}` or "
            "regenerate the runs with `make runs`.")


def entry_for(name: str, key: str, where: Optional[Path] = None) -> Optional[dict]:
    """The manifest's entry of ``name`` with ``key``, or None; a damaged or missing manifest is named in a warning."""
    where = Path(where or folder())
    try:
        runs = read_manifest(where)
    except CheckpointError as err:
        warnings.warn(f"{str(err)[:-1]}; until then the lessons train their runs afresh.", RuntimeWarning,
                      stacklevel=3)
        return None
    missing = _unlisted_runs(where)
    if missing:
        warnings.warn(missing, RuntimeWarning, stacklevel=3)
    return next((r for r in runs if r.get("key") == key and r.get("name") == name), None)


def write_manifest(runs: list[dict], where: Optional[Path] = None) -> Path:
    """Write the entries, sorted by file name, atomically."""
    target = _may_write(Path(where or folder()))
    target.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"runs": sorted(runs, key=lambda r: r["file"])}, indent=1, sort_keys=True) + "\n"
    return atomic_write(target / MANIFEST, lambda f: f.write(text.encode("utf-8")))


def load(name: str, key: str, vocab):
    """``(model, info, path)`` of the reference run ``name`` with ``key``, or None when there is none usable."""
    where = folder()
    entry = entry_for(name, key, where)
    if entry is None:
        return None
    path = inside(where, entry["file"])
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
            problem = f"cannot be read ({without_folder(err, path)})"
    warnings.warn(f"The reference run {path.name} (in reference_runs/) {problem}, so it is trained afresh: restore it "
                  f"with `git checkout`, or regenerate it with `make runs`.", RuntimeWarning, stacklevel=3)
    return None


def without_folder(text, path: Path) -> str:
    """``text`` with ``path`` named by its file name alone: a warning a lesson prints, and saves with its outputs,
    carries no folder of the machine that ran it."""
    return str(text).replace(str(path), path.name)


def lesson_of(name: str) -> str:
    """The lesson a run's name starts with: "06-mos" -> "06", "02b-char-lstm" -> "02b", "word-lstm" -> "".

    A run whose name starts with no lesson (the course model) says whose it is in its :class:`Entry`."""
    lesson = re.match(r"\d\d[a-z]?(?=-)", name)
    return lesson[0] if lesson else ""


def store(entry: Entry, model, vocab, rows: list) -> Path:
    """Write a finished run in half precision and enter it in the manifest (replacing one of the same key)."""
    where = _may_write(folder())
    where.mkdir(parents=True, exist_ok=True)
    read_manifest(where)  # a damaged manifest stops here, before anything is written
    half = copy.deepcopy(model).cpu().half()
    path = save_checkpoint(inside(where, entry.file), half, vocab, rows, {"run": entry.name, "settings": entry.settings,
                                                                   "complete": True, "precision": "float16"})
    enter(entry.row(path, epochs=len(rows)), where)
    return path


def rekey(old_file: str, entry: Entry, where: Optional[Path] = None) -> Path:
    """File the committed result ``old_file`` under ``entry`` (a new key, the same training: e.g. its settings
    renamed, or the corpus fingerprint computed a new way): the file is renamed, its bytes and sha256 stay, and its
    manifest entry takes the new name, key, settings and corpus fingerprint. Nothing is retrained. (Every entry of
    a folder after a change of the fingerprint: :func:`lmcourse.course.registry.rekey_corpus`.)"""
    where = _may_write(Path(where or folder()))
    runs = read_manifest(where)
    old = next((r for r in runs if r.get("file") == old_file), None)
    if old is None:
        raise CheckpointError(f"{old_file} is not in {where / MANIFEST}: give the file name of a committed entry.")
    path = inside(where, entry.file)
    if entry.file != old_file and any(r.get("file") == entry.file for r in runs):
        raise CheckpointError(f"{where / MANIFEST} already has an entry for {entry.file}: remove one of the two "
                              f"entries before filing {old_file} under that key.")
    source = inside(where, old_file)
    if source.exists() or not path.exists():  # else renamed by a rekey stopped before it wrote the manifest
        os.replace(source, path)
    row = dict(old, file=entry.file, name=entry.name, key=entry.key, lesson=entry.lesson or old.get("lesson"),
               settings=json.loads(json.dumps(entry.settings, default=str)), corpus=entry.corpus)
    write_manifest([r for r in runs if r is not old] + [row], where)
    return path


def prune(lesson: str, since: float, where: Optional[Path] = None) -> list[str]:
    """Remove the entries (and files) of ``lesson`` ("06") saved before ``since``: runs its regeneration no longer made.

    Only the ``.pt`` file an entry owns is deleted, never the manifest, a README or a file elsewhere: a manifest
    whose entry names one is refused in one sentence before anything changes, and a file that another, kept
    entry also names stays."""
    where = _may_write(Path(where or folder()))
    runs = read_manifest(where)  # every entry's file checked to be a .pt file inside the folder
    stale = [r for r in runs if r.get("lesson") == lesson and _saved_at(r) < since]
    if not stale:
        return []
    kept = [r for r in runs if r not in stale]
    write_manifest(kept, where)
    still_named = {r["file"] for r in kept}
    for r in stale:
        if r["file"] not in still_named:
            inside(where, r["file"]).unlink(missing_ok=True)
    return [r["file"] for r in stale]


def _saved_at(entry: dict) -> float:
    value = entry.get("saved_at", 0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def total_bytes(where: Optional[Path] = None) -> int:
    """The size of every file in the reference folder."""
    where = Path(where or folder())
    return sum(p.stat().st_size for p in where.glob("*") if p.is_file()) if where.is_dir() else 0
