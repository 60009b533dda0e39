r"""Lesson 09's ladder: one corpus variant, one set of sizes, each rung adding one idea.

The regime (measured in ``benchmarks/bench_ladder.py``, figures in ``benchmarks/README.md``) is
chosen so that each idea has the problem it solves:

- **overfitting** (dropouts and tying pay): a few tens of thousands of training tokens, many epochs;
- **a plateau** (NT-ASGD's average pays): SGD at a constant rate, which stalls on validation text
  (the rate rises over the first ``warmup`` batches, so that the head's product of small matrices
  does not blow up on its first steps);
- **a head of small rank** (MoS pays): every rung's head has dimension :math:`d` (``head_size``), and
  the key-value lookups of the corpus need a log-probability matrix of rank ``n_keys`` > :math:`d + 1`
  (lesson 09 measures where the mixture gains: off the lookups, whose table the models learn only
  roughly from this many tokens); the output word vectors are E = ``emb_size`` wide, tied
  or not, and the head reads them through a learned map :math:`U` (E, d), so that tying shares
  E numbers per word while the softmax keeps rank :math:`d`;
- **recurring rare words** (the cache pays): names drawn per document, with a small CRP concentration,
  so that a document repeats its own names;
- **drift** (dynamic evaluation pays): documents with strong topics.

A rung is one dict of settings (:func:`rung_settings`) in the course's one vocabulary
(:mod:`lmcourse.training.settings`): the config classes' field names (``emb_size``, ``hidden_size``,
``batch_size``, ``n_experts``, ...), the corpus variant as its ``Params`` fields, and the lesson's own knobs
(``d``, ``dropout_scale``, ``rung``, and the rung's additions under ``model`` and ``train``); the lesson
trains it through :func:`train_rung`, which stores it as the reference run ``09-ladder`` (``make runs LESSONS=09``).
The wrappers (:func:`wrappers`) train nothing: the cache and dynamic evaluation are tuned on the
seed's validation text and scored on its test text.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Callable, Optional

import torch

from ... import config
from ...adapt.cache_tuning import cache_scores, collect, grid_search as cache_grid
from ...adapt.dyneval import DynamicEval, gradient_stats
from ...config import by_scale, seed_everything
from ...corpora.grammar import Params
from ...lm import perplexity_from_nll
from ...networks.models import LMConfig, RNNLM
from ...store.stored_runs import CachedRun, train_or_load
from ...training.callbacks import LivePlot
from ...training.settings import configs
from ...training.trainer import Trainer, TrainConfig

__all__ = ["RUNS", "SEEDS", "RUNGS", "TRAINED", "AWD_PTB_DROPOUTS", "ladder_params", "ladder_corpus", "shared_settings",
           "rung_settings", "wrapper_settings", "fit_on_one_thread", "train_rung", "wrappers", "run_ladder"]

SEEDS = (0, 1, 2)
AWD_PTB_DROPOUTS = dict(dropout=0.4, dropouth=0.25, dropouti=0.4, dropoute=0.1, wdrop=0.5)  # Merity et al. 2018
AWD_TRAINING = dict(optimizer="ntasgd", variable_bptt=True, alpha=2.0, beta=1.0, weight_decay=1.2e-6)  # the same
TRAINED = ("LSTM", "+ dropouts", "+ tying", "AWD recipe", "MoS")
RUNGS = ("KN5",) + TRAINED + ("+ cache", "+ dynamic evaluation", "all together")

# The corpus variant's knobs (the rest are the embedded corpus's defaults); see the module docstring.
VARIANT = dict(n_nouns=100, n_verbs=40, n_adjs=60, n_advs=20, n_names=1000, name_alpha=0.3, n_keys=50,
               n_values=50, lookup_rate=0.8, topic_boost=30.0, off_topic=0.02, doc_sentences=40.0, phrase_rate=0.0)
# Shared settings that only their rung reads (MoS, the AWD recipe): they reach its configs through its own
# ``model`` and ``train`` additions, so that a rung before them keeps the configs' defaults.
RUNG_ONLY = ("n_experts", "dropoutl", "mos_latent", "nonmono")
CACHE_GRID = dict(thetas=[0.3, 1.0, 3.0, 10.0, 30.0, 100.0], lams=[0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3], window=1000)
DYN_GRID = dict(lrs=[1e-5, 3e-5, 1e-4, 3e-4], decays=[0.0, 1e-3, 1e-2], eps=2e-5, bptt=5, tune_tokens=4_000)


def ladder_params(scale: str, **changes) -> Params:
    """The corpus variant of the ladder at ``scale`` (:class:`lmcourse.corpora.grammar.Params`)."""
    train, valid, test = by_scale(ci=(4_000, 1_000, 1_000), cpu=(40_000, 10_000, 10_000), gpu=(200_000, 20_000, 20_000),
                                  scale=scale)
    return Params(**{**VARIANT, "train_tokens": train, "valid_tokens": valid, "test_tokens": test, **changes})


def ladder_corpus(params: Params):
    """The ladder's corpus for ``params`` (generated into the cache folder on first use, in seconds)."""
    from ...corpora import embedded
    from ...corpora.data import load_corpus

    return load_corpus(embedded.ensure(params=params))


def shared_settings(scale: str, **changes) -> dict:
    """What all rungs share at ``scale``, named as the config classes name them: sizes (``emb_size``, the word
    vectors' width, input and output, tied or not; ``hidden_size``), training (``warmup``: batches over which
    the rate rises), the mixture's ``n_experts``, ``dropoutl`` and ``mos_latent`` and the AWD recipe's
    ``nonmono`` (read by their rungs only: :data:`RUNG_ONLY`); the lesson's own ``d`` (the head's dimension)
    and ``dropout_scale``; and the corpus variant (its ``Params`` fields, as a dict)."""
    common = dict(lr=8.0, bptt=35, clip=0.25, dropout_scale=0.5, mos_latent="tanh")
    shared = by_scale(ci=dict(common, emb_size=8, hidden_size=16, d=4, epochs=2, warmup=10, batch_size=10, nonmono=1,
                              n_experts=2, dropoutl=0.1),
                      cpu=dict(common, emb_size=64, hidden_size=64, d=16, epochs=40, warmup=100, batch_size=10,
                               nonmono=2, n_experts=10, dropoutl=0.145),
                      gpu=dict(common, emb_size=128, hidden_size=256, d=32, epochs=40, warmup=100, batch_size=20,
                               nonmono=3, n_experts=5, dropoutl=0.145),
                      scale=scale)
    corpus_changes = {k: v for k, v in changes.items() if k in Params.__dataclass_fields__}
    shared.update({k: v for k, v in changes.items() if k not in corpus_changes})
    shared["corpus"] = asdict(ladder_params(scale, **corpus_changes))
    return shared


def rung_settings(rung: str, seed: int, shared: dict) -> dict:
    """The full settings of one trained rung: each rung is the one before plus its idea."""
    drop = {k: round(p * shared["dropout_scale"], 6) for k, p in AWD_PTB_DROPOUTS.items()}
    model = dict(tie=False)
    train: dict = {}
    if rung != "LSTM":
        model.update(drop)
    if rung in ("+ tying", "AWD recipe", "MoS"):
        model["tie"] = True
    if rung in ("AWD recipe", "MoS"):
        train = dict(AWD_TRAINING, nonmono=shared["nonmono"])
    if rung == "MoS":
        model.update(head="mos", **{k: shared[k] for k in ("n_experts", "dropoutl", "mos_latent")})
    if rung not in TRAINED:
        raise ValueError(f"{rung!r} is not a trained rung of the ladder: pick one of {', '.join(TRAINED)}.")
    return dict(shared, rung=rung, model=model, train=train, seed=seed)


def wrapper_settings(seed: int, shared: dict) -> dict:
    """What decides the wrappers' numbers for one seed: its MoS rung and the grids they are tuned over."""
    return dict(rung_settings("MoS", seed, shared), wrappers=dict(cache=CACHE_GRID, dyneval=DYN_GRID))


def rung_configs(settings: dict, vocab_size: int, **shown) -> tuple[LMConfig, TrainConfig]:
    """The rung's :class:`LMConfig` and :class:`TrainConfig`, through the one adapter
    (:func:`lmcourse.training.settings.configs`): the shared fields every rung reads, the rung's ``model`` and
    ``train`` additions, and the sizes :math:`d` decides. ``num_layers`` LSTM layers (1 unless the settings
    say) of ``hidden_size`` units, the last one of ``d`` units (the head's dimension; with one layer, a linear
    map to ``d`` when ``d`` differs from ``hidden_size``); SGD's rate is kept (``lr_decay`` 1)."""
    s = {k: v for k, v in settings.items() if k not in RUNG_ONLY}
    if s.get("num_layers", 1) > 1:
        sizes = dict(last_size=s["d"])
    else:
        sizes = dict(num_layers=1, head_size=None if s["d"] == s["hidden_size"] else s["d"])
    if s["d"] != s["emb_size"] and not s["model"].get("tie"):  # untied output vectors as wide as the tied ones
        sizes["vector_size"] = s["emb_size"]
    return configs(s, vocab_size, model={**sizes, **s["model"]}, **{"lr_decay": 1.0, **s["train"], **shown})


def model_config(settings: dict, vocab_size: int) -> LMConfig:
    """The rung's network (:func:`rung_configs`)."""
    return rung_configs(settings, vocab_size)[0]


def train_config(settings: dict, **shown) -> TrainConfig:
    """How the rung is trained (:func:`rung_configs`); ``shown``: how training is shown."""
    return rung_configs(settings, 1, **shown)[1]


def fit_on_one_thread(build: Callable[[], torch.nn.Module], settings: dict, corpus, config: TrainConfig,
                      floor: Optional[float] = None, plot: bool = True) -> tuple:
    """``(model, history)``: ``build()`` made from ``settings["seed"]`` and trained on one thread, so that the
    summation order, hence the run, is the same whatever the machine's cores (lessons 09 and 10 alike)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seed_everything(settings["seed"])
        lm = build()
        lm.vocab = corpus.vocab
        callbacks = [LivePlot(floor=floor, title=f"{settings['rung']}, seed {settings['seed']}")] if plot else []
        return lm, Trainer(lm, corpus.train, corpus.valid, config, callbacks=callbacks).fit()
    finally:
        torch.set_num_threads(threads)


def train_rung(settings: dict, corpus, floor: Optional[float] = None, retrain: Optional[bool] = None,
               plot: bool = True, progress: Optional[bool] = None, store: bool = True, scale: Optional[str] = None,
               dataset=None):
    """Train one rung (or load it: the committed reference run, then the user's cache); a CachedRun.

    ``scale`` and ``dataset`` (default: the current ones) go into the stored run's key."""
    def fit():
        return fit_on_one_thread(lambda: RNNLM(model_config(settings, len(corpus.vocab))), settings, corpus,
                                 train_config(settings, progress=progress, live_plot=plot), floor, plot)

    if not store:  # the benchmark's path: train, keep nothing
        model, history = fit()
        return CachedRun(model, list(getattr(history, "rows", history)), False, None)
    run = train_or_load("09-ladder", settings, fit, corpus.vocab, retrain=retrain, scale=scale or config.SCALE,
                        dataset=config.DATASET if dataset is None else dataset)
    run.model.vocab = corpus.vocab
    return run


def averaging_epoch(history) -> Optional[int]:
    """The first epoch trained with averaged SGD (NT-ASGD fired at the end of the epoch before), or None."""
    return next((row["epoch"] for row in history if row.get("optimizer") == "asgd"), None)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def best_cache(inputs, progress: Optional[bool] = False) -> dict:
    """The best linear cache on ``inputs`` (validation text): theta and lam over :data:`CACHE_GRID`."""
    g = CACHE_GRID
    theta, lam, ppl = cache_grid(inputs, g["thetas"], lams=g["lams"], window=g["window"], progress=progress).best
    return dict(theta=theta, lam=lam, window=g["window"], ppl=_finite(ppl))


def cached(inputs, best: dict) -> torch.Tensor:
    """Per-token log-probabilities of ``inputs`` with the cache ``best`` (from :func:`best_cache`)."""
    return cache_scores(inputs, best["theta"], best["window"], lam=best["lam"])


def _ppl(logp: torch.Tensor) -> float:
    return perplexity_from_nll(-float(logp.double().mean()))


def wrappers(model, corpus, progress: Optional[bool] = False, dyn_grid: Optional[dict] = None) -> dict:
    """The three test-time rungs over ``model``, tuned on validation text: their perplexities, their
    settings, and the log-probability of every test token under each (and under ``model`` alone).
    ``dyn_grid``: dynamic evaluation's grid, :data:`DYN_GRID` by default."""
    static = {split: collect(model, getattr(corpus, split), progress=progress) for split in ("valid", "test")}
    best = best_cache(static["valid"], progress)
    scored = {s: cached(static[s], best) for s in static}
    log_p = {"MoS": static["test"].log_p.float(), "+ cache": scored["test"].float()}
    out = {"+ cache": {s: _ppl(scored[s]) for s in scored}}
    notes = {"+ cache": best}
    d = DYN_GRID if dyn_grid is None else dyn_grid
    stats = gradient_stats(model, corpus.train, batch_size=100, bptt=d["bptt"])
    tune = corpus.valid[:d["tune_tokens"]]
    alone, joint = {}, {}  # (lr, decay) -> validation perplexity: dynamic evaluation alone; with its best cache
    for lr in d["lrs"]:
        for decay in d["decays"]:
            rule = DynamicEval(model, "rms", lr=lr, decay=decay, eps=d["eps"], bptt=d["bptt"], stats=stats)
            seen = collect(rule, tune, progress=progress)
            alone[lr, decay] = seen.ppl()
            joint[lr, decay] = best_cache(seen, progress)
    lr, decay = min(alone, key=lambda k: _finite(alone[k]))
    out["+ dynamic evaluation"], adapted = _adapted(model, corpus, lr, decay, stats, progress, d)
    adapted_alone = adapted
    notes["+ dynamic evaluation"] = dict(lr=lr, decay=decay, bptt=d["bptt"])
    lr2, decay2 = min(joint, key=lambda k: _finite(joint[k]["ppl"]))  # all together is tuned as a whole
    if (lr2, decay2) != (lr, decay):
        _, adapted = _adapted(model, corpus, lr2, decay2, stats, progress, d)
    log_p["+ dynamic evaluation"] = adapted_alone["test"].log_p.float()
    scored = {s: cached(adapted[s], joint[lr2, decay2]) for s in adapted}
    out["all together"] = {s: _ppl(scored[s]) for s in scored}
    log_p["all together"] = scored["test"].float()
    notes["all together"] = dict(lr=lr2, decay=decay2, bptt=d["bptt"], cache=joint[lr2, decay2])
    return {"ppl": out, "notes": notes, "log_p": log_p}  # log_p: per test token, for each test-time rung


def _adapted(model, corpus, lr, decay, stats, progress, d):
    rule = DynamicEval(model, "rms", lr=lr, decay=decay, eps=d["eps"], bptt=d["bptt"], stats=stats)
    adapted = {split: collect(rule, getattr(corpus, split), progress=progress) for split in ("valid", "test")}
    return {s: adapted[s].ppl() for s in adapted}, adapted


def run_ladder(seed: int, scale: str = "cpu", changes: Optional[dict] = None, progress: Optional[bool] = False,
               store: bool = False, wrap: bool = True) -> dict:
    """Every rung for one seed (the benchmark's path; the lesson trains rung by rung on screen);
    ``wrap=False`` skips the test-time rungs."""
    from ...corpora.oracle import Oracle
    from ...lm import perplexity
    from ...ngram.model import NGramLM

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
        run = train_rung(settings, corpus, plot=False, progress=progress, store=store, scale=scale)
        model, history = run.model.eval(), run.history
        ladder[rung] = {s: perplexity(model, getattr(corpus, s)) for s in ("valid", "test")}
        if rung == "AWD recipe":
            switch = averaging_epoch(history)
    wrapped = wrappers(model, corpus, progress=progress) if wrap else {"ppl": {}, "notes": {}}
    ladder.update(wrapped["ppl"])
    return {"ladder": ladder, "notes": wrapped["notes"], "switch": switch, "floor": floor}


def _trained_rungs(scale: str) -> list:
    """The trained rungs: five rungs times three seeds, each on the ladder's own variant of the embedded
    corpus (its ``Params`` fields in the settings' ``corpus``)."""
    shared = shared_settings(scale)
    return [rung_settings(rung, seed, shared) for rung in TRAINED for seed in SEEDS]


def _wrapper_runs(scale: str) -> list:
    """The test-time rungs (cache, dynamic evaluation, both) over each seed's MoS rung, stored as numbers."""
    shared = shared_settings(scale)
    return [wrapper_settings(seed, shared) for seed in SEEDS]


RUNS = {"09-ladder": _trained_rungs, "09-wrappers": _wrapper_runs}
