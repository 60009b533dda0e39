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
LEVELS: dict[str, str] = {}  # run name -> the level of the corpus it reads, when not "word"


def declare(name: str, level: str = "word"):
    """Register ``fn(scale) -> [settings, ...]`` as the runs named ``name``.

    A run reads the lesson's word corpus unless its settings name another (``corpus``); ``level``
    says at which level (``"char"`` for a character model), so its fingerprint is checked on that."""
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"The run name {name!r} is declared twice: give each lesson's run its own name.")
        REGISTRY[name] = fn
        if level != "word":
            LEVELS[name] = level
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
                         f"declare it in lmcourse/course/lesson_runs.py or {redo}.")
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
    from ..corpora.data import load_corpus
    from ..training.stored_runs import corpus_fingerprint

    if isinstance(dataset, dict):
        from ..corpora import embedded
        from ..corpora.grammar import Params

        dataset = embedded.ensure(params=Params(**dataset))
    return corpus_fingerprint(load_corpus(dataset, level=level).vocab)


@declare("02b-char-lstm", level="char")
def _char_lstm(scale):
    """Lesson 02b's character LSTM: at ``cpu``, three epochs of Adam over Tiny Shakespeare's first million characters."""
    common = dict(lr=3e-3, clip=0.25, seed=0, temperature=0.8)
    by_scale = {
        "ci": dict(corpus="embedded", chars=40_000, emb=16, hidden=32, layers=1, epochs=1, batch=16, bptt=50, watch=8,
                   sample_len=60),
        "cpu": dict(corpus="tinyshakespeare", chars=1_000_000, emb=64, hidden=256, layers=1, epochs=3, batch=16,
                    bptt=64, watch=100, sample_len=300),
        "gpu": dict(corpus="tinyshakespeare", chars=None, emb=128, hidden=512, layers=2, epochs=20, batch=64,
                    bptt=150, watch=200, sample_len=500),
    }
    return [dict(by_scale[scale], **common)]


@declare("05-softmax-d32")
def _softmax_d32(scale: str) -> list:
    """Lesson 05: the course's usual softmax LSTM, tied at d = 32, one epoch of SGD at rate 20 on the
    embedded corpus (all of its training text from ``cpu`` on)."""
    if scale == "ci":
        return [dict(emb_size=8, hidden_size=32, num_layers=2, tie=True, epochs=1, batch_size=16, bptt=20,
                     lr=20.0, clip=0.25, seed=0, train_tokens=30_000, valid_tokens=5_000)]
    return [dict(emb_size=32, hidden_size=256, num_layers=2, tie=True, epochs=1, batch_size=64, bptt=35,
                 lr=20.0, clip=0.25, seed=0, train_tokens=None, valid_tokens=None)]


@declare("09-ladder")
def _ladder(scale: str) -> list:
    """Lesson 09's trained rungs (:mod:`lmcourse.course.ladder`): five rungs times three seeds, each on the
    ladder's own variant of the embedded corpus (its ``Params`` fields in the settings' ``corpus``)."""
    from . import ladder

    shared = ladder.shared_settings(scale)
    return [ladder.rung_settings(rung, seed, shared) for rung in ladder.TRAINED for seed in ladder.SEEDS]


@declare("09-wrappers")
def _ladder_wrappers(scale: str) -> list:
    """Lesson 09's test-time rungs (cache, dynamic evaluation, both) over each seed's MoS rung, stored numbers."""
    from . import ladder

    shared = ladder.shared_settings(scale)
    return [ladder.wrapper_settings(seed, shared) for seed in ladder.SEEDS]


from . import dyneval_runs  # noqa: E402,F401  lesson 08's stored passes register themselves
from . import lesson_runs_0304  # noqa: E402,F401  lessons 02b (the shared word LSTM), 03 and 04
