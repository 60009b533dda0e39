r"""Lesson 10's Transformer on lesson 09's ladder: the same corpus variant, batch, window and epochs.

The rung it is set beside is the ladder's "AWD recipe" (:mod:`lmcourse.course.runs.lesson09`): one LSTM layer
of 64 units, E = 64 tied, a head of d = 16. The Transformer (:mod:`lmcourse.networks.transformer`) is
sized to the same number of parameters: the same tied embedding and head (``head_size`` d), and one
pre-norm block of width E = 64 with 4 heads and a feed-forward layer of 128 units, which together
take the LSTM layer's share. Two budgets, each over the ladder's three seeds:

- ``equal parameters``: the ladder's epochs (40 at ``cpu``);
- ``equal time``: as many epochs as fit in the AWD rung's training time, from one epoch of each timed
  in turn on one thread (``benchmarks/bench_transformer_time.py``; :data:`EPOCHS_EQUAL_TIME`), since
  a run's own seconds on a shared machine say as much about the load as about the model.

The Transformer is trained with Adam and a warm-up (its usual optimizer; the recurrent rungs' SGD at
rate 8 is tuned for an LSTM), the rate halved when validation stalls, and dropout at the ladder's
output-dropout rate. Its window is the ladder's BPTT length: each token reads at most ``bptt``
tokens back, and the state carries them across batches.

Its runs and numbers are keyed by :data:`DATASET` (lesson 09's: the course model's variant of the embedded corpus),
whatever ``LMCOURSE_DATASET`` says, since the lesson reads that variant alone.
"""
from __future__ import annotations

import json
import math
from typing import Optional

from ... import config as global_config
from ...lm import perplexity
from ...store.stored_numbers import compute_or_load
from ...store.stored_runs import CachedRun, train_or_load
from ...training.settings import Adapter
from . import lesson09 as ladder

__all__ = ["RUNS", "DATASET", "BUDGETS", "SEEDS", "TRANSFORMER", "CACHE_GRID", "DYN_GRID", "transformer_settings",
           "transformer_fields", "EQUAL_TIME_TIMING", "TRANSFORMER_RUN", "model_config", "train_config", "fit", "train_transformer", "equal_time_numbers", "epochs_for_time", "wrapper_settings", "wrappers"]

SEEDS = ladder.SEEDS
DATASET = ladder.DATASET  # the key part of every stored run and number of this lesson: the variant it reads
BUDGETS = ("equal parameters", "equal time")
# The block's sizes by scale (E and d are the ladder's).
TRANSFORMER = {
    "ci": dict(layers=1, heads=2, ffn=16, lr=3e-3, warmup=10, lr_decay=2.0, positions="learned"),
    "cpu": dict(layers=1, heads=4, ffn=128, lr=3e-3, warmup=100, lr_decay=2.0, positions="learned"),
    "gpu": dict(layers=2, heads=4, ffn=512, lr=1e-3, warmup=200, lr_decay=2.0, positions="learned"),
}
# What sets EPOCHS_EQUAL_TIME["cpu"]: one epoch of each model at cpu, timed in turn, three rounds, their medians in
# seconds (benchmarks/bench_transformer_time.py; its table in benchmarks/README.md). A run's own seconds on a shared
# machine tell its load as much as its model, so the lesson prints these beside what the stored runs' clocks say.
EQUAL_TIME_TIMING = {"cpu": dict(awd_s=4.10, transformer_s=5.21, script="benchmarks/bench_transformer_time.py",
                                 machine="one thread of a shared 2-core CPU")}


def epochs_for_time(target_seconds: float, seconds_per_epoch: float) -> int:
    """The whole epochs that fit in ``target_seconds`` at ``seconds_per_epoch`` (at least one)."""
    if not (math.isfinite(seconds_per_epoch) and seconds_per_epoch > 0):
        raise ValueError(f"seconds_per_epoch must be a positive number, got {seconds_per_epoch!r}.")
    return max(1, int(target_seconds // seconds_per_epoch))


# The Transformer's epochs at equal time: at cpu as many as fit in the AWD rung's 40 epochs at the timing above
# (40 x 4.10 s hold 31 epochs of 5.21 s); at ci and gpu the count is set, not timed.
EPOCHS_EQUAL_TIME = {"ci": 1, "gpu": 40,
                     "cpu": epochs_for_time(ladder.shared_settings("cpu")["epochs"] * EQUAL_TIME_TIMING["cpu"]["awd_s"],
                                            EQUAL_TIME_TIMING["cpu"]["transformer_s"])}
# Dynamic evaluation's grid over the Transformer: the RMS rule (Krause et al. 2018), rates reaching far lower. The RMS
# rule divides each gradient by the root of its mean square on the training text, and on the Transformer the rate
# that suits the LSTM takes far too large a step: on the ladder's grid (1e-5 to 3e-4) every seed chose 1e-5, the
# edge, and one seed got 14% worse on test. Over this grid the optimum lies inside (about 1e-6 at cpu on the
# validation text's first 4,000 tokens; 1e-5 there is worse than no adaptation).
DYN_GRID = dict(method="rms", lrs=[1e-7, 3e-7, 1e-6, 3e-6, 1e-5], decays=[0.0, 1e-3, 1e-2], eps=2e-5, bptt=5,
                tune_tokens=4_000)
# The cache's grid over the Transformer: lesson 07's, its theta reaching down to 0 (the cache's attention spread
# evenly over the window: a bag of recent words). On lesson 07's grid (theta 3 to 10,000) the choice sat at theta
# 3, its edge, and at cpu two seeds of three still chose the smallest theta of 0.1 to 100: theta = 0 is the
# parameter's natural end, as a decay of 0 is dynamic evaluation's.
CACHE_GRID = dict(ladder.CACHE_GRID, thetas=[0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0])
# What the Transformer takes of the ladder's shared settings (the rest are the LSTM's: its width, rate, experts).
SHARED_FIELDS = ("corpus", "emb_size", "d", "epochs", "batch_size", "bptt", "clip", "dropout_scale")


def transformer_settings(budget: str, seed: int, shared: dict, scale: str) -> dict:
    """The full settings of one Transformer run: the ladder's shared settings at ``scale``, the block, the budget."""
    if budget not in BUDGETS:
        raise ValueError(f"{budget!r} is not a budget of lesson 10: pick one of {', '.join(BUDGETS)}.")
    block = dict(TRANSFORMER[scale])
    epochs = shared["epochs"] if budget == "equal parameters" else EPOCHS_EQUAL_TIME[scale]
    dropout = round(ladder.AWD_PTB_DROPOUTS["dropout"] * shared["dropout_scale"], 6)
    shared = {k: v for k, v in shared.items() if k in SHARED_FIELDS}
    return dict(shared, rung=f"Transformer, {budget}", budget=budget, seed=seed, epochs=epochs, block=block,
                model=dict(tie=True, dropout=dropout), train=dict(optimizer="adam"))


def transformer_fields(settings: dict) -> dict:
    """The run's settings as the one adapter reads them (:mod:`lmcourse.training.settings`, a ``transformer``): the
    Transformer of width ``emb_size``, head of dimension ``d`` and window ``bptt``, the block's sizes; trained with
    the settings' TrainConfig fields, the block's rate, decay and warm-up, and the run's ``train``."""
    s, b = settings, settings["block"]
    return dict(s, kind="transformer", num_layers=b["layers"], n_heads=b["heads"], ffn_size=b["ffn"], window=s["bptt"],
                positions=b["positions"], head_size=None if s["d"] == s["emb_size"] else s["d"], lr=b["lr"],
                lr_decay=b["lr_decay"], warmup=b["warmup"], **s["model"], **s["train"])


TRANSFORMER_RUN = Adapter(transformer_fields)  # a run's network, its training, or a fresh model of it
model_config, train_config = TRANSFORMER_RUN.model_config, TRANSFORMER_RUN.train_config


def fit(settings: dict, corpus, floor: Optional[float] = None, plot: bool = True, progress: Optional[bool] = None):
    """Train one Transformer run from its seed on one thread: ``(model, history)``."""
    return ladder.fit_on_one_thread(lambda: TRANSFORMER_RUN.build(settings, len(corpus.vocab)), settings,
                                    corpus, train_config(settings, progress=progress, live_plot=plot), floor, plot)


def train_transformer(settings: dict, corpus, floor: Optional[float] = None, retrain: Optional[bool] = None,
                      plot: bool = True, progress: Optional[bool] = None, scale: Optional[str] = None,
                      dataset=None) -> CachedRun:
    """Train one Transformer run (or load it: the committed reference run, then the user's cache).

    ``scale`` (default: the current one) and ``dataset`` (default: :data:`DATASET`) go into the stored run's key."""
    run = train_or_load("10-transformer", settings, lambda: fit(settings, corpus, floor, plot, progress), corpus.vocab,
                        retrain=retrain, **_key_parts(scale, dataset))
    run.model.vocab = corpus.vocab
    return run


def _key_parts(scale: Optional[str], dataset) -> dict:
    """The scale and dataset a stored result is keyed by: the ones given, else the current scale and :data:`DATASET`
    (never ``LMCOURSE_DATASET``'s corpus, which the lesson does not read)."""
    return {"scale": scale or global_config.SCALE, "dataset": DATASET if dataset is None else dataset}


def equal_time_numbers(settings: dict, corpus, floor: Optional[float] = None, retrain: Optional[bool] = None,
                       plot: bool = True, progress: Optional[bool] = None, scale: Optional[str] = None,
                       dataset=None) -> dict:
    """An equal-time run's numbers, its weights not kept (the lesson reads only these): its validation and test
    perplexity and its history, as ``{"valid", "test", "history"}``; stored like the runs."""
    def compute() -> dict:
        model, history = fit(settings, corpus, floor, plot, progress)
        model.eval()
        rows = list(getattr(history, "rows", history))
        return {"json": json.dumps({"valid": perplexity(model, corpus.valid), "test": perplexity(model, corpus.test),
                                    "history": rows})}

    found = compute_or_load("10-equal-time", settings, compute, corpus.vocab, recompute=retrain,
                            **_key_parts(scale, dataset))
    return json.loads(found["json"])


def wrapper_settings(seed: int, shared: dict, scale: str) -> dict:
    """What decides the wrappers' numbers over one seed's Transformer at equal parameters: its settings and the
    ladder's grids (the cache and dynamic evaluation are tuned exactly as lesson 09 tunes them over MoS)."""
    return dict(transformer_settings("equal parameters", seed, shared, scale),
                wrappers=dict(cache=CACHE_GRID, dyneval=DYN_GRID))


def wrappers(model, corpus, progress: Optional[bool] = False) -> dict:
    """The cache, then dynamic evaluation standing on it, over a Transformer, tuned as lesson 09 tunes them over
    MoS (:func:`lmcourse.course.runs.lesson09.wrappers`) but over this lesson's :data:`CACHE_GRID` and
    :data:`DYN_GRID`."""
    return ladder.wrappers(model, corpus, progress=progress, dyn_grid=DYN_GRID, cache_grid=CACHE_GRID)


def _trained(scale: str) -> list:
    shared = ladder.shared_settings(scale)
    return [transformer_settings("equal parameters", seed, shared, scale) for seed in SEEDS]


def _equal_time(scale: str) -> list:
    shared = ladder.shared_settings(scale)
    return [transformer_settings("equal time", seed, shared, scale) for seed in SEEDS]


def _wrapped(scale: str) -> list:
    shared = ladder.shared_settings(scale)
    return [wrapper_settings(seed, shared, scale) for seed in SEEDS]


RUNS = {"10-transformer": _trained, "10-equal-time": _equal_time, "10-wrappers": _wrapped}


# ------------------------------------------------------------------------------- at gpu: the two on Penn Treebank

# The command line's finished PTB runs the lesson reads at ``gpu`` (label -> its run directory and the presets that
# train it, in order): the AWD-LSTM after its finetuning, and the course's Transformer of the same 24M parameters.
PTB_RUNS = {
    "AWD-LSTM": ("runs/awd-lstm-ptb-finetune-gpu", ("awd-lstm-ptb", "awd-lstm-ptb-finetune")),
    "Transformer": ("runs/transformer-ptb-gpu", ("transformer-ptb",)),
}
__all__ += ["PTB_RUNS", "ptb_runs", "ptb_train_command"]


def ptb_runs(scale: str) -> dict:
    """``{label: run directory}`` of the PTB runs the lesson reads at ``scale`` (only at ``gpu``; none below)."""
    return {label: folder for label, (folder, _) in PTB_RUNS.items()} if scale == "gpu" else {}


def ptb_train_command(label: str) -> str:
    """The command lines that train the run ``label`` of :data:`PTB_RUNS`, in one line."""
    if label not in PTB_RUNS:
        raise ValueError(f"{label!r} is not one of lesson 10's PTB runs: use one of {', '.join(PTB_RUNS)}.")
    return " && ".join(f"python -m lmcourse train --preset {name} --scale gpu" for name in PTB_RUNS[label][1])
