r"""Lesson 09's ladder: the course model's rungs (:mod:`lmcourse.course.runs.course_model`), each adding one
idea, then the test-time rungs that wrap the last one.

The trained rungs, their regime and their settings live in :mod:`.course_model` (the one home of the course
model, which lessons 03, 04, 07, 08 and 10 share); this module re-exports them for the lesson. It adds the
wrappers (:func:`wrappers`), which train nothing: the cache and dynamic evaluation are tuned on the seed's
validation text and scored on its test text, and stored as numbers (``09-wrappers``).

Every run and number of the ladder is keyed by :data:`DATASET`, the course model's variant of the embedded corpus,
whatever ``LMCOURSE_DATASET`` says: the ladder reads that variant alone (its Penn Treebank rows come from
:mod:`lmcourse.course.runs.ptb_model`, keyed by ``"ptb"``).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from ...adapt.cache_tuning import cached, collect, grid_search as cache_grid
from ...adapt.dyneval import DynamicEval, gradient_stats
from ...config import EMBEDDED
from ...corpora.grammar import Params
from ...corpora.oracle import Oracle
from ...lm import perplexity_from_nll, perplexity
from ...ngram.model import NGramLM
from .course_model import (AWD_PTB_DROPOUTS, AWD_TRAINING, CACHE_GRID, RUNG_ONLY, SEEDS, TRAINED, VARIANT,
                           averaging_epoch, course_model, fit_on_one_thread, ladder_corpus, ladder_params, model_config,
                           rung_configs, rung_settings, shared_settings, train_config, train_rung)
from .lesson08 import RULE, STATS_BATCH, rule as dyneval_rule

__all__ = ["RUNS", "DATASET", "SEEDS", "RUNGS", "TRAINED", "AWD_PTB_DROPOUTS", "ladder_params", "ladder_corpus", "shared_settings",
           "rung_settings", "wrapper_settings", "fit_on_one_thread", "train_rung", "wrappers", "dyneval_rule",
           "interior", "best_cache", "cached", "run_ladder", "CACHE_GRID", "DYN_GRID"]
DATASET = EMBEDDED  # what the ladder's stored runs and numbers are keyed by: the variant, not LMCOURSE_DATASET
RUNGS = ("KN5",) + TRAINED + ("+ cache", "+ dynamic evaluation")  # each rung stands on the one before
DYN_GRID = RULE  # lesson 08's update rule and grid (the course's one), so that this ladder adapts as 08 does


def wrapper_settings(seed: int, shared: dict) -> dict:
    """What decides the wrappers' numbers for one seed: its MoS rung and the grids they are tuned over."""
    return dict(rung_settings("MoS", seed, shared), wrappers=dict(cache=CACHE_GRID, dyneval=DYN_GRID))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def best_cache(inputs, progress: Optional[bool] = False, grid: Optional[dict] = None) -> dict:
    """The best linear cache on ``inputs`` (validation text): theta and lam over ``grid`` (:data:`CACHE_GRID`)."""
    g = CACHE_GRID if grid is None else grid
    return cache_grid(inputs, g["thetas"], lams=g["lams"], window=g["window"], progress=progress).setting


def _ppl(logp: torch.Tensor) -> float:
    return perplexity_from_nll(-float(logp.double().mean()))


def wrappers(model, corpus, progress: Optional[bool] = False, dyn_grid: Optional[dict] = None,
             cache_grid: Optional[dict] = None) -> dict:
    r"""The test-time rungs over ``model``, nested and tuned on validation text, each on its own knobs only:

    1. **+ cache**: :math:`\theta` and :math:`\lambda` over :data:`CACHE_GRID`, on the static model;
    2. **+ dynamic evaluation**, standing on rung 1: the cache keeps rung 1's setting and sits on the adapting
       model; dynamic evaluation's rate and decay are tuned over ``dyn_grid`` (lesson 08's rule: its ``method``,
       ``lrs``, ``decays``) on the first ``tune_tokens`` validation tokens (all of them when None).

    Returns their perplexities (``ppl``), settings (``notes``, with each chosen value's index in its grid), and
    the log-probability of every test token (``log_p``) under the model, each rung, and dynamic evaluation
    without the cache ("dynamic evaluation alone", read from the same adapting pass: not a rung, a measurement).
    ``dyn_grid``: :data:`DYN_GRID` by default; ``cache_grid``: :data:`CACHE_GRID` by default."""
    d = DYN_GRID if dyn_grid is None else dyn_grid
    c = CACHE_GRID if cache_grid is None else cache_grid
    static = {split: collect(model, getattr(corpus, split), progress=progress) for split in ("valid", "test")}
    best = best_cache(static["valid"], progress, c)
    scored = {s: cached(static[s], best) for s in static}
    out = {"+ cache": {s: _ppl(scored[s]) for s in scored}}
    notes = {"+ cache": dict(best, at=[c["thetas"].index(best["theta"]), c["lams"].index(best["lam"])])}
    log_p = {"MoS": static["test"].log_p.float(), "+ cache": scored["test"].float()}
    rms = d["method"] == "rms"
    stats = gradient_stats(model, corpus.train, batch_size=STATS_BATCH, bptt=d["bptt"]) if rms else None
    tune = corpus.valid[:d["tune_tokens"]]
    tuned, passes = {}, {}  # (lr, decay) -> validation perplexity of the cache (rung 1's setting) over it; its pass
    for lr in d["lrs"]:
        for decay in d["decays"]:
            passes[lr, decay] = collect(dyneval_rule(model, d, lr, decay, stats), tune, progress=progress)
            tuned[lr, decay] = _finite(_ppl(cached(passes[lr, decay], best)))
            kept = min(tuned, key=tuned.get)
            passes = {kept: passes[kept]}                  # only the best pass so far is kept
    lr, decay = min(tuned, key=tuned.get)
    adapting = dyneval_rule(model, d, lr, decay, stats)
    whole = len(tune) == len(corpus.valid)                 # tuned on all of valid: its pass is the rung's valid pass
    adapted = {s: passes[lr, decay] if s == "valid" and whole
               else collect(adapting, getattr(corpus, s), progress=progress) for s in ("valid", "test")}
    both = {s: cached(adapted[s], best) for s in adapted}
    out["+ dynamic evaluation"] = {s: _ppl(both[s]) for s in both}
    out["dynamic evaluation alone"] = {s: adapted[s].ppl() for s in adapted}
    notes["+ dynamic evaluation"] = dict(rule=d["method"], lr=lr, decay=decay, bptt=d["bptt"], cache=best,
                                         at=[d["lrs"].index(lr), d["decays"].index(decay)],
                                         tuned_valid=tuned[lr, decay])
    log_p["+ dynamic evaluation"] = both["test"].float()
    log_p["dynamic evaluation alone"] = adapted["test"].log_p.float()
    return {"ppl": out, "notes": notes, "log_p": log_p}


def interior(at: Sequence[int], grid: Sequence[Sequence], ends: Optional[Sequence] = None) -> bool:
    """Whether each chosen index ``at`` lies strictly inside its grid. A grid of one value is fixed, not tuned; a
    choice at a grid's first value counts as inside when that value is the parameter's natural end (``ends``, one
    per grid or None: a decay of 0 pulls nothing back, and no smaller decay exists to try)."""
    ends = ends or [None] * len(grid)
    return all(len(g) == 1 or 0 < i < len(g) - 1 or (i == 0 and end is not None and g[0] == end)
               for i, g, end in zip(at, grid, ends))


def run_ladder(seed: int, scale: str = "cpu", changes: Optional[dict] = None, progress: Optional[bool] = False,
               store: bool = False, wrap: bool = True) -> dict:
    """Every rung for one seed (the benchmark's path; the lesson trains rung by rung on screen);
    ``wrap=False`` skips the test-time rungs."""
    shared = shared_settings(scale, **(changes or {}))
    params = Params(**shared["corpus"])
    corpus = ladder_corpus(params)
    oracle = Oracle(corpus.vocab, params)
    floor = {s: perplexity(oracle, getattr(corpus, s)) for s in ("valid", "test")}
    kn5 = NGramLM(corpus.vocab, order=5, smoothing="mkn", mode="stream").fit(corpus.train)
    ladder = {"KN5": {s: perplexity(kn5, getattr(corpus, s)) for s in ("valid", "test")}}
    switch, model = None, None
    for rung in TRAINED:
        settings = rung_settings(rung, seed, shared)
        run = train_rung(settings, corpus, plot=False, progress=progress, store=store, scale=scale,
                         dataset=DATASET)
        model, history = run.model.eval(), run.history
        ladder[rung] = {s: perplexity(model, getattr(corpus, s)) for s in ("valid", "test")}
        if rung == "AWD recipe":
            switch = averaging_epoch(history)
    wrapped = wrappers(model, corpus, progress=progress) if wrap else {"ppl": {}, "notes": {}}
    ladder.update({r: v for r, v in wrapped["ppl"].items() if r in RUNGS})  # the rungs (not the measurements)
    return {"ladder": ladder, "notes": wrapped["notes"], "switch": switch, "floor": floor}


def _wrapper_runs(scale: str) -> list:
    """The test-time rungs (cache, dynamic evaluation, both) over each seed's MoS rung, stored as numbers."""
    shared = shared_settings(scale)
    return [wrapper_settings(seed, shared) for seed in SEEDS]


RUNS = {"09-wrappers": _wrapper_runs}