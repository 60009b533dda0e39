r"""Lesson 06's stored runs: one LSTM with a softmax head and with a mixture of :math:`K` softmaxes, both of
dimension :math:`d`, three seeds each, on the lookup-rich corpus (:mod:`lmcourse.course.rank_runs`).

The lesson reads its knobs from :func:`knobs` and names its runs with :func:`run_name`, so that the runs it
trains are the runs declared here; ``make runs LESSONS=06`` retrains them into ``reference_runs/`` (half
precision: the lesson reads their weights). Each run's key carries the corpus variant's fields, so the
registry rebuilds that corpus to check a committed run against it.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from functools import lru_cache

from ...config import by_scale
from ...corpora import embedded
from ...corpora.data import load_corpus
from ...corpora.grammar import Params
from .. import rank_runs

LESSON = "06"
HEADS = ("softmax", "mos")  # the two heads compared


def knobs(scale: str) -> dict:
    """The lesson's knobs at ``scale``: the model's sizes, the head's ``d`` and ``n_experts`` (:math:`K`), the
    corpus variant's split sizes, the training (Adam, the last epoch at a quarter of the rate) and the seeds."""
    return dict(d=4, n_experts=4, emb_size=32, hidden_size=by_scale(ci=32, cpu=128, gpu=128, scale=scale),
                seeds=(0, 1, 2), train_tokens=by_scale(ci=20_000, cpu=300_000, gpu=300_000, scale=scale),
                eval_tokens=by_scale(ci=5_000, cpu=40_000, gpu=40_000, scale=scale),
                curve_tokens=by_scale(ci=2_000, cpu=10_000, gpu=None, scale=scale),
                epochs=by_scale(ci=1, cpu=3, gpu=3, scale=scale), lr=2e-2, batch_size=32, bptt=35)


def run_name(head: str, seed: int, k: dict) -> str:
    """The stored run's name of ``head`` ("softmax" or "mos") for ``seed`` with the knobs ``k``."""
    if head not in HEADS:
        raise ValueError(f"{head!r} is not one of lesson 06's heads: pick one of {', '.join(HEADS)}.")
    return f"06-softmax-d{k['d']}-seed{seed}" if head == "softmax" else f"06-mos-d{k['d']}-k{k['n_experts']}-seed{seed}"


def configs(head: str, seed: int, k: dict, vocab_size: int) -> tuple:
    """``(LMConfig, TrainConfig)`` of ``head`` for ``seed``: the same LSTM and training, only the head differs."""
    model = rank_runs.model_config(vocab_size, k["d"], n_experts=1 if head == "softmax" else k["n_experts"],
                                   emb_size=k["emb_size"], hidden_size=k["hidden_size"])
    training = rank_runs.train_config(k["epochs"], seed=seed, lr=k["lr"], batch_size=k["batch_size"], bptt=k["bptt"])
    return model, training


@lru_cache(maxsize=4)
def _corpus(params_json: str):
    return load_corpus(embedded.ensure(params=Params(**json.loads(params_json))))


def _settings(scale: str) -> dict:
    """name -> the settings of each run at ``scale`` (the corpus variant is generated on first use, in seconds)."""
    k = knobs(scale)
    params = rank_runs.lookup_rich(k["train_tokens"], k["eval_tokens"])
    corpus = _corpus(json.dumps(asdict(params), sort_keys=True))
    return {run_name(head, seed, k): rank_runs.run_settings(corpus, *configs(head, seed, k, len(corpus.vocab)),
                                                            k["curve_tokens"], params)
            for head in HEADS for seed in k["seeds"]}


def _declared(name: str):
    return lambda scale: [_settings(scale)[name]]


RUNS = {name: _declared(name) for name in (run_name(h, s, knobs("cpu")) for h in HEADS for s in knobs("cpu")["seeds"])}
