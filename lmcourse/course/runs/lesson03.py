"""Lesson 03's stored runs: six dropout regimes times the seeds, stored as their histories only.

The lesson reads its knobs from :func:`knobs` (one value per scale; the lesson's plain variables start
from them) and builds the settings of its runs with :func:`dropout_runs`, the function the declaration
calls, so the lesson and ``reference_runs/`` cannot disagree; a knob changed in the lesson gives other
settings, and those runs are trained afresh. Every number the lesson shows is measured during training,
so only the histories are stored (:func:`lmcourse.store.stored_numbers.compute_or_load`).
"""
from __future__ import annotations

from ...config import by_scale


def knobs(scale: str | None = None) -> dict:
    """The knobs at ``scale`` (default: the current one), by their names in the lesson."""
    return dict(
        TRAIN_TOKENS=by_scale(ci=2_000, cpu=6_000, gpu=None, scale=scale),  # training tokens (None: the whole split)
        VALID_TOKENS=by_scale(ci=1_000, cpu=3_000, gpu=None, scale=scale),  # held-out tokens scored after every epoch
        PROBE_TOKENS=by_scale(ci=1_000, cpu=3_000, gpu=50_000, scale=scale),  # training tokens re-scored every epoch
        EVAL_TOKENS=by_scale(ci=1_000, cpu=20_000, gpu=None, scale=scale),  # validation / test tokens of the table
        EMB_SIZE=by_scale(ci=16, cpu=128, gpu=400, scale=scale),
        HIDDEN_SIZE=by_scale(ci=16, cpu=128, gpu=1150, scale=scale),
        LAYERS=by_scale(ci=1, cpu=1, gpu=3, scale=scale),
        EPOCHS=by_scale(ci=2, cpu=8, gpu=40, scale=scale),
        SEEDS=by_scale(ci=[0, 1], cpu=[0, 1, 2], gpu=[0, 1, 2], scale=scale),  # every variant is trained once per seed
        BATCH_SIZE=by_scale(ci=4, cpu=5, gpu=20, scale=scale),
        BPTT=by_scale(ci=20, cpu=35, gpu=35, scale=scale),
        OPTIMIZER=by_scale(ci="adam", cpu="adam", gpu="sgd", scale=scale),
        LR=by_scale(ci=5e-3, cpu=5e-3, gpu=20.0, scale=scale),
        LR_DECAY=by_scale(ci=1, cpu=1, gpu=4, scale=scale),  # divide the rate by this when validation stalls (1: never)
        P=0.5,                      # the dropout rate of every single-variant run
        P_EMBED_ALL=0.1,            # embedding dropout inside the combination (the AWD-LSTM's dropoute)
        ALPHA=2.0, BETA=1.0,        # AR and TAR coefficients (the AWD-LSTM's defaults)
        TABLE_VARIANT="all + AR/TAR",  # the variant whose models join the results table
    )


def dropout_variants(P, P_EMBED_ALL, ALPHA, BETA) -> dict:
    """Lesson 03's six regimes: what each changes in the model (``model``) and in training (``train``)."""
    locked = dict(dropout_kind="locked", dropouti=P, dropouth=P, dropout=P)
    everything = dict(locked, dropoute=P_EMBED_ALL, wdrop=P)
    return {
        "no dropout": dict(),
        "standard": dict(model=dict(dropout_kind="standard", dropouti=P, dropouth=P, dropout=P)),
        "locked": dict(model=locked),
        "weight drop": dict(model=dict(wdrop=P)),
        "all + AR/TAR": dict(model=everything, train=dict(alpha=ALPHA, beta=BETA)),
        "all − weight drop": dict(model=dict(everything, wdrop=0.0), train=dict(alpha=ALPHA, beta=BETA)),
    }


def dropout_runs(k: dict) -> dict:
    """``{(variant, seed): settings}`` of lesson 03 for the knobs ``k``, in training order (seed by seed)."""
    variants = dropout_variants(k["P"], k["P_EMBED_ALL"], k["ALPHA"], k["BETA"])
    sizes = dict(emb_size=k["EMB_SIZE"], hidden_size=k["HIDDEN_SIZE"], num_layers=k["LAYERS"])
    schedule = dict(epochs=k["EPOCHS"], batch_size=k["BATCH_SIZE"], bptt=k["BPTT"], optimizer=k["OPTIMIZER"],
                    lr=k["LR"], lr_decay=k["LR_DECAY"])
    return {(name, seed): dict(variant=name, spec=spec, sizes=sizes, schedule=schedule, seed=seed,
                               train_tokens=k["TRAIN_TOKENS"], valid_tokens=k["VALID_TOKENS"],
                               probe_tokens=k["PROBE_TOKENS"],
                               eval_tokens=k["EVAL_TOKENS"] if name == k["TABLE_VARIANT"] else None)
            for seed in k["SEEDS"] for name, spec in variants.items()}


def _dropout(scale: str) -> list:
    """Lesson 03: every regime once per seed; stored as histories only."""
    return list(dropout_runs(knobs(scale)).values())


RUNS = {"03-dropout": _dropout}
