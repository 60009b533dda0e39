"""Lesson 04's stored runs: an untied and a tied model per seed.

The untied and the tied model of the first seed are stored whole (``04-tying``: the lesson looks inside
their tables); the other seeds' histories (``04-tying-measured``) carry what the lesson measures on every
model (the results table's perplexities, each validation token's loss, the tables' category agreement).
As in lesson 03, the lesson's knobs start from :func:`knobs` and :func:`tying_runs` builds the settings
for the lesson and for the declaration alike.
"""
from __future__ import annotations

from ...config import by_scale


def knobs(scale: str | None = None) -> dict:
    """The knobs at ``scale`` (default: the current one), by their names in the lesson."""
    return dict(
        TRAIN_TOKENS=by_scale(ci=2_000, cpu=6_000, gpu=None, scale=scale),  # training tokens (None: the whole split)
        CURVE_TOKENS=by_scale(ci=1_000, cpu=3_000, gpu=None, scale=scale),  # validation tokens scored every epoch
        PROBE_TOKENS=by_scale(ci=1_000, cpu=3_000, gpu=50_000, scale=scale),  # training tokens re-scored every epoch
        EVAL_TOKENS=by_scale(ci=1_000, cpu=20_000, gpu=None, scale=scale),  # validation / test tokens of the table
        SEEDS=by_scale(ci=[0, 1], cpu=[0, 1, 2], gpu=[0, 1, 2], scale=scale),  # one untied and one tied model per seed
        EMB_SIZE=by_scale(ci=16, cpu=128, gpu=650, scale=scale),  # E: the last layer outputs E units, so tying is possible
        HIDDEN_SIZE=by_scale(ci=16, cpu=128, gpu=650, scale=scale),  # H: the units of the first layer
        LAYERS=by_scale(ci=1, cpu=1, gpu=2, scale=scale),
        DROPOUT=by_scale(ci=0.0, cpu=0.0, gpu=0.5, scale=scale),
        EPOCHS=by_scale(ci=2, cpu=10, gpu=40, scale=scale),
        BATCH_SIZE=by_scale(ci=4, cpu=5, gpu=20, scale=scale),
        BPTT=by_scale(ci=20, cpu=35, gpu=35, scale=scale),
        OPTIMIZER="sgd", LR=20.0,
        LR_DECAY=by_scale(ci=1.5, cpu=1.5, gpu=4, scale=scale),  # divide the rate by this ...
        DECAY_AFTER=by_scale(ci=1, cpu=4, gpu=None, scale=scale),  # ... every epoch from this one (None: on a stall)
        CLIP=0.25,                  # the gradient-norm bound
    )


def tying_runs(k: dict) -> dict:
    """``{(tie, seed): settings}`` of lesson 04 for the knobs ``k``, in training order (seed by seed, untied first)."""
    d = k["DROPOUT"]
    sizes = dict(emb_size=k["EMB_SIZE"], hidden_size=k["HIDDEN_SIZE"], num_layers=k["LAYERS"], last_size=k["EMB_SIZE"],
                 dropout=d, dropouth=d, dropouti=d, dropout_kind="standard")
    schedule = dict(epochs=k["EPOCHS"], batch_size=k["BATCH_SIZE"], bptt=k["BPTT"], optimizer=k["OPTIMIZER"],
                    lr=k["LR"], lr_decay=k["LR_DECAY"], decay_after=k["DECAY_AFTER"], clip=k["CLIP"])
    return {(tie, seed): dict(tie=tie, seed=seed, sizes=sizes, schedule=schedule, train_tokens=k["TRAIN_TOKENS"],
                              curve_tokens=k["CURVE_TOKENS"], probe_tokens=k["PROBE_TOKENS"],
                              eval_tokens=k["EVAL_TOKENS"])
            for seed in k["SEEDS"] for tie in (False, True)}


def tying_name(seed: int, seeds) -> str:
    """The stored run's name: the first seed's models are stored whole, the others as their histories."""
    return "04-tying" if seed == seeds[0] else "04-tying-measured"


def _tying(name: str):
    def runs(scale: str) -> list:
        k = knobs(scale)
        return [s for (_, seed), s in tying_runs(k).items() if tying_name(seed, k["SEEDS"]) == name]
    return runs


RUNS = {"04-tying": _tying("04-tying"), "04-tying-measured": _tying("04-tying-measured")}
