r"""Lesson 08's dynamic-evaluation passes over the course model, computed once per seed and stored as numbers.

The model is the course model's ``"AWD recipe"`` rung (:mod:`.course_model`), three seeds, loaded and never
trained here. Dynamic evaluation costs a backward pass and an update of every weight per segment of
``bptt`` tokens, and the lesson tunes two rules over grids, so each seed's passes are one stored measurement
(:func:`lmcourse.store.stored_numbers.compute_or_load`) named ``08-dyneval`` and keyed by the rung's settings
plus the grids (:func:`grids`, :func:`pass_settings`). One seed's passes (:func:`passes`) hold, in ``json``:

- ``grids``: the validation perplexity of each rule at every (rate, decay) of its grid (the RMS rule of
  :data:`RULE`, and SGD of :data:`SGD_GRID`), and each rule's best setting;
- ``control``: the test text's perplexity, scored statically after the chosen rule took as many steps as the
  test stream has segments, at the same rate, on *training* text (and, second control, on validation text);
- ``segments``: the chosen rule's validation perplexity for other segment lengths (rate scaled by
  ``n / bptt``);

and, as tensors: every test token's log-probability, ``static``, ``rms`` and ``sgd`` (each rule at its own best
setting with the weights carried along the whole stream) and ``reset`` (the chosen rule with its weights back at
:math:`\varphi_0` and an empty state at every ``<doc>``); and ``drift``, :math:`\lVert\varphi - \varphi_0\rVert`
along the test stream for the chosen rule, every 20 segments.

A second stored measurement per seed, ``08-dyneval-halves`` (:func:`halves`, :func:`stored_halves`), cuts every
test document at its middle and scores each half on its own, from :math:`\varphi_0` and an empty state, statically
and by the chosen rule at its tuned setting: against ``reset``, it says what the weights learned in a document's
first half is worth to its second half.

A third, ``08-dyneval-cache`` (:func:`with_cache`, :func:`stored_cache`), puts lesson 07's neural cache over the
static model and over the adapting one, each cache's :math:`\theta` and :math:`\lambda` tuned on that model's
own validation pass, and keeps both test perplexities: the lesson loads them and re-checks a part of the adapted
pass live.

:data:`RULE` is the one home of the course's update rule and its grid, for every lesson that evaluates
dynamically (lesson 09's ``+ dynamic evaluation`` rung included).
"""
from __future__ import annotations

import copy
import json
import math
import time
import warnings
from typing import Optional

import torch

from ... import config
from ...config import by_scale, device
from ...adapt.dyneval import DynamicEval, gradient_stats
from ...lm import perplexity_from_nll
from ...progress import bar
from ...store.stored_numbers import compute_or_load
from ...adapt.cache_tuning import cached, collect, grid_search as cache_grid
from .course_model import CACHE_GRID, SEEDS, course_model, rung_settings, shared_settings

__all__ = ["NAME", "HALVES", "CACHED", "cache_settings", "with_cache", "stored_cache", "RUNG", "DATASET", "RULE", "SGD_GRID", "SEGMENTS", "RUNS", "grids", "pass_settings", "rule", "tune",
           "passes", "stored_passes", "doc_pieces", "half_pieces", "halves", "halves_settings", "stored_halves",
           "with_weights"]

NAME = "08-dyneval"
HALVES = "08-dyneval-halves"  # every document's two halves, each scored on its own (:func:`halves`)
CACHED = "08-dyneval-cache"  # the cache over the static and the adapting model (:func:`with_cache`)
RUNG = "AWD recipe"  # the course model's rung that lesson 08 wraps
# The corpus the passes read, in their key: the course model's variant of the embedded corpus, whatever
# LMCOURSE_DATASET says (the passes wrap the model committed for it), so that no setting recomputes them.
DATASET = config.EMBEDDED

# The course's dynamic-evaluation rule (Krause et al. 2018, Section 5: RMS-scaled steps, decay towards the
# trained weights) and the grid its rate and decay are tuned over, on the whole validation split (``tune_tokens``
# None) with segments of ``bptt`` tokens. The rates bracket the optimum of all three seeds at ``cpu``.
RULE = dict(method="rms", lrs=[1e-5, 2e-5, 4e-5, 8e-5], decays=[0.0, 1e-3, 1e-2], eps=2e-5, bptt=5,
            tune_tokens=None)
# The rule it is measured against: SGD on the test stream (Mikolov et al. 2010), with the same decay grid.
SGD_GRID = dict(RULE, method="sgd", lrs=[0.01, 0.02, 0.04, 0.08])
SEGMENTS = [2, 5, 20, 50]  # segment lengths of the sweep (the chosen rule, its rate scaled by n / bptt)
STATS_BATCH = 100  # the gradient statistics' batch (Krause et al. 2018, dynamic-evaluation code)


def grids(scale: str) -> dict:
    """``{"rule", "sgd", "segments"}`` at ``scale``: :data:`RULE`, :data:`SGD_GRID` and :data:`SEGMENTS`, except at
    ``ci``, whose barely trained model diverges at the largest rates (and the longest segments, whose rate is
    scaled up): there only the first two of each are tried."""
    full = dict(rule=RULE, sgd=SGD_GRID, segments=SEGMENTS)
    cut = dict(rule=dict(RULE, lrs=RULE["lrs"][:2]), sgd=dict(SGD_GRID, lrs=SGD_GRID["lrs"][:2]), segments=SEGMENTS[:2])
    return by_scale(ci=cut, cpu=full, gpu=full, scale=scale)


def pass_settings(seed: int, scale: str) -> dict:
    """What decides one seed's stored passes: its rung's settings and the grids (:func:`grids`)."""
    return dict(rung_settings(RUNG, seed, shared_settings(scale)), dyneval=grids(scale))


def _declared(scale: str) -> list:
    """Every seed's passes, as ``make runs LESSONS=08`` stores them."""
    return [pass_settings(seed, scale) for seed in SEEDS]


def halves_settings(seed: int, scale: str) -> dict:
    """What decides one seed's halves (:func:`halves`): its passes' settings (:func:`pass_settings`), whose tuned
    rate and decay it reads, and the cut."""
    return dict(pass_settings(seed, scale), cut="document halves")


def cache_settings(seed: int, scale: str) -> dict:
    """What decides one seed's cache numbers (:func:`with_cache`): its passes' settings and lesson 07's cache grid."""
    return dict(pass_settings(seed, scale), cache=CACHE_GRID)


RUNS = {NAME: _declared, HALVES: lambda scale: [halves_settings(seed, scale) for seed in SEEDS],
        CACHED: lambda scale: [cache_settings(seed, scale) for seed in SEEDS]}


def rule(model, grid: dict, lr: float, decay: float, stats=None, bptt: Optional[int] = None) -> DynamicEval:
    """The rule of ``grid`` (its ``method``, ``eps``, ``bptt``) at rate ``lr`` and decay ``decay``."""
    return DynamicEval(model, grid["method"], lr=lr, decay=decay, eps=grid["eps"], bptt=bptt or grid["bptt"],
                       stats=stats if grid["method"] == "rms" else None)


def _ppl(log_p: torch.Tensor) -> float:
    return perplexity_from_nll(-float(log_p.double().mean()))


def tune(model, tokens, grid: dict, stats=None, progress: Optional[bool] = None) -> dict:
    """``{"ppl": [[...]] (lrs x decays), "lr", "decay", "best"}``: the grid on ``tokens`` and its optimum."""
    shown = bar(total=len(grid["lrs"]) * len(grid["decays"]), desc=f"grid ({grid['method']})", unit="pass",
                enabled=progress)
    ppl = []
    for lr in grid["lrs"]:
        row = []
        for decay in grid["decays"]:
            with warnings.catch_warnings():  # a diverged setting shows as an infinite perplexity
                warnings.simplefilter("ignore", RuntimeWarning)
                row.append(_ppl(rule(model, grid, lr, decay, stats).score(tokens)))
            shown.update(1)
        ppl.append(row)
    shown.close()
    flat = torch.tensor(ppl, dtype=torch.float64).nan_to_num(nan=math.inf)  # NaN: diverged
    i, j = divmod(int(torch.argmin(flat)), len(grid["decays"]))
    return dict(ppl=ppl, lr=grid["lrs"][i], decay=grid["decays"][j], best=float(flat[i, j]))


def doc_pieces(tokens: torch.Tensor, doc: int) -> list:
    """The stream cut before every ``<doc>`` (id ``doc``): ``[(a, b), ...]`` covering ``tokens``."""
    starts = (tokens == doc).nonzero().flatten().tolist()
    edges = sorted({0, *starts, len(tokens)})
    return list(zip(edges[:-1], edges[1:]))


def half_pieces(tokens: torch.Tensor, doc: int) -> list:
    """Every piece of :func:`doc_pieces` cut at its middle: ``[(a, m), (m, b), ...]``, m = a + (b - a) // 2."""
    return [half for a, b in doc_pieces(tokens, doc) for half in ((a, a + (b - a) // 2), (a + (b - a) // 2, b))]


def with_weights(model, weights: dict):
    """A copy of ``model`` (evaluation mode) holding ``weights`` ``{name: phi}`` (from ``DynamicEval.adapt``)."""
    out = copy.deepcopy(model).eval()
    with torch.no_grad():
        for name, p in out.named_parameters():
            p.copy_(weights[name])
    return out


def passes(model, corpus, grid: dict, progress: Optional[bool] = None) -> dict:
    """One seed's passes (see the module docstring) over the grids ``grid`` (:func:`grids`), as a dict of numbers
    and tensors."""
    start = time.perf_counter()
    chosen_grid, sgd_grid = grid["rule"], grid["sgd"]
    tune_tokens = corpus.valid[:chosen_grid["tune_tokens"]]
    test = corpus.test
    stats = gradient_stats(model, corpus.train, batch_size=STATS_BATCH, bptt=chosen_grid["bptt"], progress=progress)
    grids = {g["method"]: tune(model, tune_tokens, g, stats, progress) for g in (sgd_grid, chosen_grid)}
    static = model.score(test).float()
    dyn = {g["method"]: rule(model, g, grids[g["method"]]["lr"], grids[g["method"]]["decay"], stats)
           for g in (sgd_grid, chosen_grid)}
    chosen = dyn[chosen_grid["method"]]
    log_p, drift = chosen.drift(test, every=20, progress=progress)
    other = dyn[sgd_grid["method"]].score(test).float()
    reset = torch.cat([chosen.score(test[a:b]) for a, b in doc_pieces(test, model.vocab.stoi["<doc>"])]).float()
    bptt = chosen_grid["bptt"]
    steps = -(-len(test) // bptt)  # as many segments as the test stream has
    control = {}
    for split in ("train", "valid"):
        seen = getattr(corpus, split)[:steps * bptt]
        control[split] = _ppl(with_weights(model, chosen.adapt(seen)).score(test))
    b = grids[chosen_grid["method"]]
    segments = {n: _ppl(rule(model, chosen_grid, b["lr"] * n / bptt, min(b["decay"] * n / bptt, 0.5), stats,
                             bptt=n).score(tune_tokens)) for n in grid["segments"]}
    summary = dict(grids=grids, control=control, control_steps=steps, segments=segments,
                   seconds=time.perf_counter() - start, stats_segments=stats.n_segments)
    return {"json": json.dumps(summary), "static": static, chosen_grid["method"]: log_p.float(),
            sgd_grid["method"]: other, "reset": reset, "drift": drift.float()}


def halves(model, corpus, summary: dict, grid: dict, progress: Optional[bool] = None) -> dict:
    r"""Every test document cut at its middle (:func:`half_pieces`), each half scored on its own from
    :math:`\varphi_0` and an empty state: ``static`` and ``dynamic`` (the chosen rule of ``grid`` at the rate and
    decay its tuning in ``summary`` found), each (N,) in the test stream's order."""
    chosen_grid = grid["rule"]
    best = summary["grids"][chosen_grid["method"]]
    stats = gradient_stats(model, corpus.train, batch_size=STATS_BATCH, bptt=chosen_grid["bptt"], progress=progress)
    chosen = rule(model, chosen_grid, best["lr"], best["decay"], stats)
    test = corpus.test
    pieces = half_pieces(test, model.vocab.stoi["<doc>"])
    shown = bar(total=len(pieces), desc="halves", unit="piece", enabled=progress)
    static, dynamic = [], []
    for a, b in pieces:
        static.append(model.score(test[a:b]))
        dynamic.append(chosen.score(test[a:b]))
        shown.update(1)
    shown.close()
    return {"static": torch.cat(static).float(), "dynamic": torch.cat(dynamic).float()}


def with_cache(model, corpus, summary: dict, grid: dict, progress: Optional[bool] = None) -> dict:
    r"""The neural cache (Grave et al. 2017; lesson 07's grid, ``course_model.CACHE_GRID``) over the static model and
    over the chosen rule's adapting model (its rate and decay from ``summary``'s tuning). Each cache's
    :math:`\theta, \lambda` are the best on that model's own validation pass; ``json`` holds, per ``"static"`` and
    ``"dynamic"``: ``theta``, ``lam``, ``window``, ``valid`` (the tuned validation perplexity) and ``test``."""
    chosen_grid = grid["rule"]
    best = summary["grids"][chosen_grid["method"]]
    stats = gradient_stats(model, corpus.train, batch_size=STATS_BATCH, bptt=chosen_grid["bptt"], progress=progress)
    adapting = rule(model, chosen_grid, best["lr"], best["decay"], stats)
    found = {}
    for kind, scorer in (("static", model), ("dynamic", adapting)):
        valid, test = (collect(scorer, getattr(corpus, split), progress=progress) for split in ("valid", "test"))
        best = cache_grid(valid, CACHE_GRID["thetas"], lams=CACHE_GRID["lams"], window=CACHE_GRID["window"],
                          progress=progress).setting
        found[kind] = dict(theta=best["theta"], lam=best["lam"], window=best["window"], valid=best["ppl"],
                           test=_ppl(cached(test, best)))  # the test text with the cache
    return {"json": json.dumps(found)}


def stored_cache(seed: int, scale: str, progress: Optional[bool] = None, dataset=None,
                 recompute: Optional[bool] = None) -> dict:
    """One seed's cache numbers (:func:`with_cache`) at ``scale``, decoded: loaded (the committed numbers, then the
    user's cache) or computed and stored after the passes they read (:func:`stored_passes`)."""
    found, run, corpus = stored_passes(seed, scale, progress, dataset)
    model = run.model.to(device()).eval()
    got = compute_or_load(CACHED, cache_settings(seed, scale),
                          lambda: with_cache(model, corpus, found["summary"], grids(scale), progress), corpus.vocab,
                          scale=scale, dataset=DATASET if dataset is None else dataset, recompute=recompute)
    return dict(json.loads(got["json"]), loaded=got["loaded"])


def stored_halves(seed: int, scale: str, progress: Optional[bool] = None, dataset=None,
                  recompute: Optional[bool] = None) -> dict:
    """One seed's halves (:func:`halves`) at ``scale``, loaded (the committed numbers, then the user's cache) or
    computed and stored; the passes they read (:func:`stored_passes`) come first. ``dataset``: the corpus named in
    the key (default :data:`DATASET`, the one the course model reads)."""
    found, run, corpus = stored_passes(seed, scale, progress, dataset)
    model = run.model.to(device()).eval()
    return compute_or_load(HALVES, halves_settings(seed, scale),
                           lambda: halves(model, corpus, found["summary"], grids(scale), progress), corpus.vocab,
                           scale=scale, dataset=DATASET if dataset is None else dataset, recompute=recompute)


def stored_passes(seed: int, scale: str, progress: Optional[bool] = None, dataset=None,
                  recompute: Optional[bool] = None) -> tuple:
    """``(numbers, run, corpus)`` for ``seed`` at ``scale``: the passes loaded (or computed and stored), the course
    model's run and its corpus; ``numbers["summary"]`` is the decoded ``json``. ``dataset``: the corpus named in the
    key (default :data:`DATASET`, the one the course model reads, whatever ``LMCOURSE_DATASET`` says)."""
    run, corpus = course_model(RUNG, seed, scale)
    model = run.model.to(device()).eval()
    found = compute_or_load(NAME, pass_settings(seed, scale), lambda: passes(model, corpus, grids(scale), progress),
                            corpus.vocab, scale=scale, dataset=DATASET if dataset is None else dataset,
                            recompute=recompute)
    return dict(found, summary=json.loads(found["json"])), run, corpus
