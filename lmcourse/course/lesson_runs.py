"""Which runs each lesson stores, and the check that the committed reference runs are still the lessons'.

A lesson whose central training is longer than its time budget declares it here: the run's name
and, for a scale, the list of settings dicts it trains (one per seed, variant, ...)::

    @declare("06-mos")
    def _mos(scale):
        return [dict(d=8, epochs=6, seed=s, ...) for s in range(3)]

and takes its settings from :func:`settings` (instructor knobs stay plain variables: a changed knob
gives other settings, which are simply trained afresh). A run that trains on a corpus of its own (a
variant of the embedded corpus) names it: ``@declare("09-ladder", corpus=fn)``, ``fn()`` giving that
corpus's ``Vocab``, so its fingerprint is checked against that corpus rather than the dataset's. :func:`problems` compares the manifest of
``reference_runs/`` with this registry and today's corpus, so a lesson whose settings or corpus
moved without ``make runs`` fails the tests with a sentence that says so.
"""
from __future__ import annotations

import json
from typing import Callable, Optional

from .. import config
from ..training import reference_runs as reference

REGISTRY: dict[str, Callable[[str], list]] = {}
CORPORA: dict[str, Callable[[], object]] = {}  # run name -> fn() giving the Vocab of the corpus it trains on


def declare(name: str, corpus: Optional[Callable[[], object]] = None):
    """Register ``fn(scale) -> [settings, ...]`` as the runs named ``name``; ``corpus()``: their corpus's Vocab."""
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"The run name {name!r} is declared twice: give each lesson's run its own name.")
        REGISTRY[name] = fn
        if corpus is not None:
            CORPORA[name] = corpus
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
        if name in CORPORA:  # a corpus of the run's own: fingerprinted once per run name
            dataset = f"{dataset} ({name}'s variant)"
            if dataset not in fingerprints:
                from ..training.stored_runs import corpus_fingerprint
                fingerprints[dataset] = corpus_fingerprint(CORPORA[name]())
        elif dataset not in fingerprints:
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


# ---------------------------------------------------------------------------------------------
# Lesson 09: the ladder, on a variant of the embedded corpus built so that each rung's idea has work
# to do (what each rung gains there, measured over three seeds: benchmarks/README.md)

def ladder_params():
    """The corpus variant of lesson 09's ladder (:class:`lmcourse.corpora.grammar.Params`).

    A small vocabulary (short open classes, 300 names) keeps each run near a minute on one core;
    40,000 training tokens make a 64-unit LSTM overfit (for dropout and tying) and its constant-rate
    SGD plateau (for NT-ASGD's average); a lookup table of 100 keys by 100 values, full rank, in 40%
    of the objects is more than a 64-dimensional softmax can represent (for MoS); names drawn per
    document with a small CRP concentration recur inside a document (for the cache); and topics weigh
    strongly on each document's words (for dynamic evaluation)."""
    from ..corpora.grammar import Params

    return Params(n_nouns=100, n_verbs=40, n_adjs=60, n_advs=20, n_names=300, name_alpha=0.3, n_keys=100,
                  n_values=100, lookup_rate=0.4, topic_boost=30.0, off_topic=0.02, doc_sentences=40.0,
                  phrase_rate=0.0, train_tokens=40_000, valid_tokens=10_000, test_tokens=10_000)


def ladder_corpus():
    """The ladder's corpus (generated into the cache folder on first use)."""
    from ..corpora import embedded
    from ..corpora.data import load_corpus

    return load_corpus(embedded.ensure(params=ladder_params()))


LADDER_SEEDS = (0, 1, 2)
AWD_PTB_DROPOUTS = dict(dropout=0.4, dropouth=0.25, dropouti=0.4, dropoute=0.1, wdrop=0.5)  # Merity et al. 2018
LADDER_DROPOUTS = {k: p / 2 for k, p in AWD_PTB_DROPOUTS.items()}  # half the PTB rates: 64 units, not 1150
LADDER_RUNGS = {  # rung -> (what the model adds, what the training adds), each on top of the rung before
    "LSTM": (dict(tie=False), dict()),
    "+ dropouts": (dict(tie=False, **LADDER_DROPOUTS), dict()),
    "+ tying": (dict(tie=True, **LADDER_DROPOUTS), dict()),
    "AWD recipe": (dict(tie=True, **LADDER_DROPOUTS),
                   dict(optimizer="ntasgd", nonmono=2, variable_bptt=True, alpha=2.0, beta=1.0, weight_decay=1.2e-6)),
}
LADDER_RUNGS["MoS"] = (dict(LADDER_RUNGS["AWD recipe"][0], head="mos", n_experts=3, dropoutl=0.29 / 2),
                       LADDER_RUNGS["AWD recipe"][1])


@declare("09-ladder", corpus=lambda: ladder_corpus().vocab)
def _ladder(scale):
    from dataclasses import asdict

    small = scale == "ci"
    shared = dict(corpus=asdict(ladder_params()), d=16 if small else 64, epochs=2 if small else 20,
                  train_tokens=4_000 if small else 40_000, lr=20.0, lr_decay=1.0, batch=10, bptt=35, clip=0.25)
    return [dict(shared, rung=rung, model=model, train=train, seed=seed) for rung, (model, train) in LADDER_RUNGS.items()
            for seed in LADDER_SEEDS]
