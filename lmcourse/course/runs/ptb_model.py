r"""The real-text course model: a small word LSTM on Penn Treebank, trained on a laptop CPU.

The embedded corpus teaches each mechanism against an exact oracle; this model connects the course to the
papers' own corpus (Mikolov's PTB: 929,589 training tokens, 10,000 words). Two rungs, three seeds each:

- ``"LSTM"``: one LSTM layer of :math:`H` units over word vectors of :math:`E = H` numbers, untied, no dropout;
- ``"+ dropouts and tying"``: the same network with the AWD-LSTM's dropouts (Merity et al. 2018: output 0.4,
  input 0.4, embedding 0.1, weight drop 0.5 on :math:`W_{hh}`), scaled by ``dropout_scale`` for a network
  this small, and the decoder tied to the embedding (Press & Wolf 2016; Inan et al. 2016).

Both train as pytorch/examples' word model does (SGD at rate 20, gradients clipped at 0.25, windows of 35
tokens; the rate divided by 4 whenever validation improves by less than 1%), until validation stops improving:
the run ends at the first epoch that fails to improve by 1% after the rate was divided ``max_decays`` = 2 times
(:class:`~lmcourse.training.trainconfig.TrainConfig`). The sizes were chosen by measurement
(``benchmarks/README.md``): at :math:`E = H = 200` one epoch takes about 5 minutes on one core (6.5 at 256), and
the softmax over 10,000 words is most of it. Lesson 01's modified Kneser-Ney 5-gram (141.2 in the literature,
Mikolov et al. 2011) is the baseline. Lessons 03, 04, 07, 08 and 09 read these runs (``make runs
LESSONS=09`` trains them: their one-core hours are :data:`~lmcourse.store.reference_runs.CPU_COST`'s, and
``docs/maintainers.md`` states them).
"""
from __future__ import annotations

import json
from typing import Optional

import torch

from ...adapt.cache_tuning import cached, collect, grid_search as cache_grid
from ...adapt.dyneval import gradient_stats
from ...config import by_scale, device, seed_everything
from ...corpora.data import load_corpus
from ...corpora.download import DownloadError
from ...errors import sentence
from ...lm import perplexity, perplexity_from_nll
from ...ngram.model import NGramLM
from ...store.reference_runs import kept
from ...store.stored_numbers import compute_or_load, is_stored
from ...networks.models import RNNLM
from ...store.stored_runs import CachedRun, train_or_load
from ...training.callbacks import LivePlot
from ...training.settings import configs
from ...training.trainer import Trainer
from .lesson08 import rule, tune, with_weights

__all__ = ["RUNS", "LESSON", "NAME", "DATASET", "SEEDS", "RUNGS", "WRAPPERS", "RUNG", "CACHE_GRID", "DYN_GRID",
           "settings", "rung_settings", "tokens", "train", "grids", "wrapper_settings", "wrap", "wrapped", "load",
           "seed_runs", "summary", "numbers", "SUMMARY", "WEIGHTS_SEEDS",
           "regime"]

LESSON = "09"  # ``make runs LESSONS=09`` regenerates it, with the course model
NAME = "ptb-model"
DATASET = "ptb"
SEEDS = (0, 1, 2)
RUNGS = ("LSTM", "+ dropouts and tying")
SUMMARY = "ptb-summary"  # what the lessons read of every run, stored as numbers (:func:`summary`)
WEIGHTS_SEEDS = (0,)  # whose weights are committed: the lessons read the weights of the wrapped rung's seed 0 only
AWD_PTB_DROPOUTS = dict(dropout=0.4, dropouti=0.4, dropoute=0.1, wdrop=0.5)  # Merity et al. 2018 (PTB), one layer


def settings(scale: str) -> dict:
    """What both rungs share at ``scale``: sizes, the schedule, and how many training tokens (None: all)."""
    common = dict(num_layers=1, lr=20.0, clip=0.25, bptt=35, lr_decay=4.0, min_gain=0.01, max_decays=2,
                  dropout_scale=0.5)
    return by_scale(ci=dict(common, emb_size=8, hidden_size=8, batch_size=10, epochs=1, max_decays=1,
                            train_tokens=5_000, eval_tokens=600),
                    cpu=dict(common, emb_size=200, hidden_size=200, batch_size=32, epochs=40, train_tokens=None,
                             eval_tokens=None),
                    gpu=dict(common, emb_size=650, hidden_size=650, num_layers=2, batch_size=20, epochs=60,
                             dropout_scale=1.0, train_tokens=None, eval_tokens=None),
                    scale=scale)


def rung_settings(rung: str, seed: int, shared: dict) -> dict:
    """One rung's full settings: the shared ones, the rung's dropouts and tying, the seed."""
    if rung not in RUNGS:
        raise ValueError(f"{rung!r} is not a rung of the PTB model: pick one of {', '.join(RUNGS)}.")
    extra = dict(tie=False)
    if rung != "LSTM":
        extra = dict(tie=True, **{k: round(p * shared["dropout_scale"], 6) for k, p in AWD_PTB_DROPOUTS.items()})
    return dict(shared, rung=rung, seed=seed, **extra)


def _runs(scale: str) -> list:
    shared = settings(scale)
    return [rung_settings(rung, seed, shared) for rung in RUNGS for seed in SEEDS]


def tokens(corpus, settings_: dict) -> tuple:
    """``(train, valid, test)`` token streams the run reads: the whole splits at ``cpu``, slices at ``ci``."""
    n, m = settings_["train_tokens"], settings_["eval_tokens"]
    return (corpus.train if n is None else corpus.train[:n], corpus.valid if m is None else corpus.valid[:m],
            corpus.test if m is None else corpus.test[:m])


def train(settings_: dict, corpus, scale: str, retrain: Optional[bool] = None, plot: bool = True,
          progress: Optional[bool] = None, out_dir: Optional[str] = None) -> CachedRun:
    """The rung of ``settings_`` on ``corpus`` (PTB), loaded when stored (the committed reference run, then the
    user's cache), else trained on one thread, so that one seed gives one run whatever the machine's cores.

    ``out_dir``: a folder for the run's checkpoints, so that an interrupted training resumes where it stopped."""
    train_tokens, valid_tokens, _ = tokens(corpus, settings_)

    def fit():
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            seed_everything(settings_["seed"])
            model_config, train_config = configs(settings_, len(corpus.vocab), progress=progress, live_plot=plot,
                                                 out_dir=out_dir)
            model = RNNLM(model_config)
            model.vocab = corpus.vocab
            callbacks = [LivePlot(title=f"PTB, {settings_['rung']}, seed {settings_['seed']}")] if plot else []
            trainer = Trainer(model, train_tokens, valid_tokens, train_config, callbacks=callbacks)
            return model, trainer.fit(resume="auto" if out_dir else False)
        finally:
            torch.set_num_threads(threads)

    committed = settings_["rung"] == RUNG and settings_["seed"] in WEIGHTS_SEEDS  # the others are kept as numbers
    run = train_or_load(NAME, settings_, fit, corpus.vocab, scale=scale, dataset=DATASET, retrain=retrain,
                        lesson=LESSON, reference_run=committed)
    run.model.vocab = corpus.vocab
    return run


def regime(shared: dict, corpus=None) -> str:
    """The one wording of what a PTB row was measured on: ``"PTB model: 929,589 training tokens, 1 x 256, E = 256"``."""
    n = shared["train_tokens"] if corpus is None or shared["train_tokens"] is not None else len(corpus.train)
    n = n if n is not None else 929_589
    return f"PTB model: {n:,} training tokens, {shared['num_layers']} x {shared['hidden_size']}, E = {shared['emb_size']}"


RUNS = {NAME: _runs}


# ------------------------------------------------------------------------------ the wrappers, stored as numbers

WRAPPERS = "ptb-wrappers"
RUNG = "+ dropouts and tying"  # the rung the cache and dynamic evaluation wrap
# The cache over the PTB model (Grave et al. 2017 tune theta, lambda and the window on validation; the awd-lstm-lm
# pointer uses theta 1.0, lambda 0.1 and a window of 500 on PTB): theta on a half-decade log scale.
CACHE_GRID = dict(thetas=[0.03, 0.1, 0.3, 1.0, 3.0, 10.0], lams=[0.02, 0.05, 0.1, 0.15, 0.2, 0.3], window=2000)
# Dynamic evaluation: the course's rule (lesson 08's RMS steps with decay towards the trained weights, segments of
# 5 tokens), its rate and decay tuned on the first ``tune_tokens`` validation tokens, its gradient statistics
# read on the first ``stats_tokens`` training tokens (Krause et al. 2018 read them on all of the training text; on
# one core that pass alone would take over half an hour, and the mean squared gradient settles much sooner).
DYN_GRID = dict(method="rms", lrs=[1e-5, 3e-5, 1e-4, 3e-4], decays=[0.0, 1e-2], eps=2e-5, bptt=5, tune_tokens=20_000,
                stats_tokens=100_000)


def grids(scale: str) -> dict:
    """``{"cache", "dyneval"}`` at ``scale`` (at ``ci`` a corner of each, on a few hundred tokens)."""
    full = dict(cache=CACHE_GRID, dyneval=DYN_GRID)
    cut = dict(cache=dict(CACHE_GRID, thetas=CACHE_GRID["thetas"][2:5], lams=CACHE_GRID["lams"][1:4], window=200),
               dyneval=dict(DYN_GRID, lrs=DYN_GRID["lrs"][:2], decays=DYN_GRID["decays"][:1], tune_tokens=200,
                            stats_tokens=1_000))
    return by_scale(ci=cut, cpu=full, gpu=full, scale=scale)


def wrapper_settings(seed: int, scale: str) -> dict:
    """What decides one seed's wrapper numbers: its rung's settings and the grids."""
    return dict(rung_settings(RUNG, seed, settings(scale)), wrappers=grids(scale))


def _ppl(log_p: torch.Tensor) -> float:
    return perplexity_from_nll(-float(log_p.double().mean()))


def wrap(model, streams, grid: dict, progress: Optional[bool] = None) -> dict:
    r"""The cache and dynamic evaluation over ``model`` on ``streams`` (``train``, ``valid``, ``test`` token
    streams), each tuned on validation text alone, and the training-text control. Returns ``json`` alone: the tuned
    settings, the grids' validation perplexities (``cache_grid``: theta x lambda) and the test perplexities of
    ``static``, ``cache``, ``dyneval`` (the weights carried along the stream), ``both`` (the cache with its own tuned
    setting on the adapting model) and ``control`` (the static model after dynamic evaluation's chosen rule took as
    many steps on training text as the test stream has segments). The per-token log-probabilities behind them are
    not kept: no lesson reads them, and they would cost 1.6 MB a seed in ``reference_runs/``."""
    c, d = grid["cache"], grid["dyneval"]
    static = {s: collect(model, streams[s], progress=progress) for s in ("valid", "test")}
    searched = cache_grid(static["valid"], c["thetas"], lams=c["lams"], window=c["window"], progress=progress)
    best = searched.setting
    stats = gradient_stats(model, streams["train"][:d["stats_tokens"]], batch_size=100, bptt=d["bptt"],
                           progress=progress)
    tuned = tune(model, streams["valid"][:d["tune_tokens"]], d, stats, progress)
    chosen = rule(model, d, tuned["lr"], tuned["decay"], stats)
    adapted = collect(chosen, streams["test"], progress=progress)
    steps = -(-len(streams["test"]) // d["bptt"])
    control = with_weights(model, chosen.adapt(streams["train"][:steps * d["bptt"]])).score(streams["test"]).float()
    log_p = {"static": static["test"].log_p.float(), "cache": cached(static["test"], best).float(),
             "dyneval": adapted.log_p.float(), "both": cached(adapted, best).float(), "control": control}
    summary = dict(cache=best, cache_grid=searched.ppl.tolist(), cache_at=[c["thetas"].index(best["theta"]), c["lams"].index(best["lam"])],
                   dyneval=tuned, dyneval_at=[d["lrs"].index(tuned["lr"]), d["decays"].index(tuned["decay"])],
                   test={k: _ppl(v) for k, v in log_p.items()}, control_steps=steps)
    return {"json": json.dumps(summary)}


def wrapped(seed: int, scale: str, corpus, progress: Optional[bool] = None, recompute: Optional[bool] = None,
            run: Optional[CachedRun] = None) -> dict:
    """One seed's wrapper numbers (:func:`wrap`), loaded (the committed numbers, then the user's cache) or computed
    and stored; ``numbers["summary"]`` is the decoded ``json``. ``run``: the seed's :data:`RUNG`, when the caller
    has it already (else it is loaded, or trained)."""
    train_, valid, test = tokens(corpus, settings(scale))
    streams = dict(train=train_, valid=valid, test=test)

    def compute():  # the run is loaded (or trained) only when the numbers are not stored
        found = run or train(rung_settings(RUNG, seed, settings(scale)), corpus, scale, plot=False, progress=progress)
        return wrap(found.model.to(device()).eval(), streams, grids(scale), progress)

    found = compute_or_load(WRAPPERS, wrapper_settings(seed, scale), compute, corpus.vocab, scale=scale,
                            dataset=DATASET, recompute=recompute)
    return dict(found, summary=json.loads(found["json"]))


RUNS[WRAPPERS] = lambda scale: [wrapper_settings(seed, scale) for seed in SEEDS]
RUNS[SUMMARY] = _runs


# ------------------------------------------------------------------------- what the lessons read, in one place

def load(level: str = "word"):
    """Penn Treebank (downloaded once, checked by sha256), or None after one sentence saying why the lesson's
    real-text section is skipped (offline and no copy on disk)."""
    try:
        return load_corpus(DATASET, level=level)
    except (DownloadError, OSError) as error:
        print(f"The real-text section is skipped: Penn Treebank could not be had ({sentence(error).rstrip('.')}); "
              "put ptb/train.txt, valid.txt and test.txt under LMCOURSE_DATA, or connect once, and run it again.")
        return None


def seed_runs(rung: str, scale: str, corpus, progress: Optional[bool] = None) -> list:
    """The rung's run for every seed of :data:`SEEDS` (committed for the wrapped rung's seed 0; the others are
    stored in the user's cache once trained: hours at ``cpu``). The lessons read :func:`numbers` instead."""
    shared = settings(scale)
    return [train(rung_settings(rung, seed, shared), corpus, scale, plot=False, progress=progress) for seed in SEEDS]


def summary(rung: str, seed: int, scale: str, corpus, progress: Optional[bool] = None,
            run: Optional[CachedRun] = None) -> dict:
    """What the lessons read of one trained run, stored as numbers (``ptb-summary``): ``history`` (its rows, one per
    epoch), ``test`` (its test perplexity at its best validation weights) and ``parameters``. The run itself (``run``,
    else loaded or trained) is read only when the numbers are not stored."""
    s = rung_settings(rung, seed, settings(scale))

    def compute():
        found = run or train(s, corpus, scale, plot=False, progress=progress)
        test = tokens(corpus, settings(scale))[2]
        return {"json": json.dumps(dict(history=found.history, test=perplexity(found.model.eval(), test),
                                        parameters=found.model.num_parameters()))}

    return json.loads(compute_or_load(SUMMARY, s, compute, corpus.vocab, scale=scale, dataset=DATASET)["json"])


def pending(scale: str, corpus) -> Optional[str]:
    """None when :func:`numbers` reads everything it shows from disk at ``scale`` (always at ``ci``, where the tiny
    runs train in seconds), else one sentence saying what is not stored yet and how to make it, so that a lesson
    skips its PTB section instead of training for hours."""
    if not kept(scale):
        return None
    shared = settings(scale)
    missing = [f"{rung}, seed {seed}" for rung in RUNGS for seed in SEEDS
               if not is_stored(SUMMARY, rung_settings(rung, seed, shared), corpus.vocab, scale=scale, dataset=DATASET)]
    missing += [f"the cache and dynamic evaluation, seed {seed}" for seed in SEEDS
                if not is_stored(WRAPPERS, wrapper_settings(seed, scale), corpus.vocab, scale=scale, dataset=DATASET)]
    if not missing:
        return None
    return (f"The Penn Treebank section is skipped at {scale!r}: {len(missing)} of its stored results are not here yet "
            f"({'; '.join(missing[:3])}{'; ...' if len(missing) > 3 else ''}); `make runs LESSONS={LESSON}` trains "
            f"and stores them (hours of one CPU core), or set LMCOURSE_SCALE=ci to see the section on a tiny model.")


def numbers(scale: str, corpus, progress: Optional[bool] = None) -> dict:
    """Every real-text number the lessons show, per seed: ``{"test": {row: [ppl per seed]}, "valid": {...},
    "best_epoch": {rung: [...]}, "epochs": {rung: [...]}, "history": {rung: [rows per seed]},
    "parameters": {rung: n}, "wrappers": [summary per seed]}``. Rows: ``"KN5"`` (lesson 01's modified Kneser-Ney
    5-gram, the same for every seed), both rungs, and over the :data:`RUNG` the wrappers' ``"+ cache"``,
    ``"+ dynamic evaluation"`` (both, the cache on the adapting model), ``"dynamic evaluation alone"`` and
    ``"training-text control"``. At ``cpu`` all of it is committed as numbers (no weights are read)."""
    train_, valid, test = tokens(corpus, settings(scale))
    kn5 = NGramLM(corpus.vocab, order=5, smoothing="mkn", mode="stream").fit(train_)
    out = {"test": {"KN5": [perplexity(kn5, test)] * len(SEEDS)}, "valid": {"KN5": [perplexity(kn5, valid)] * len(SEEDS)},
           "best_epoch": {}, "epochs": {}, "history": {}, "parameters": {}, "wrappers": []}
    shared = settings(scale)
    runs = {}  # where nothing is stored (ci), each run is trained once for its summary and its wrappers

    def run_of(rung, seed):
        if not kept(scale):
            if (rung, seed) not in runs:
                runs[rung, seed] = train(rung_settings(rung, seed, shared), corpus, scale, plot=False, progress=progress)
            return runs[rung, seed]
        return None

    for rung in RUNGS:
        found = [summary(rung, seed, scale, corpus, progress, run=run_of(rung, seed)) for seed in SEEDS]
        out["history"][rung] = [f["history"] for f in found]
        out["test"][rung] = [f["test"] for f in found]
        out["valid"][rung] = [min(row["valid_ppl"] for row in f["history"]) for f in found]
        out["best_epoch"][rung] = [min(f["history"], key=lambda row: row["valid_ppl"])["epoch"] for f in found]
        out["epochs"][rung] = [len(f["history"]) for f in found]
        out["parameters"][rung] = found[0]["parameters"]
    wrapped_ = [wrapped(seed, scale, corpus, progress, run=run_of(RUNG, seed)) for seed in SEEDS]
    out["wrappers"] = [f["summary"] for f in wrapped_]
    for row, key in (("+ cache", "cache"), ("dynamic evaluation alone", "dyneval"), ("+ dynamic evaluation", "both"),
                     ("training-text control", "control")):
        out["test"][row] = [f["summary"]["test"][key] for f in wrapped_]
    return out
