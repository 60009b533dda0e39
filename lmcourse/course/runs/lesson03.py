"""Lesson 03's stored runs: six dropout regimes times the seeds, stored as their histories only.

The lesson reads its knobs from :func:`knobs` (one value per scale; the lesson's plain variables start
from them) and builds the settings of its runs with :func:`dropout_runs`, the function the declaration
calls, so the lesson and ``reference_runs/`` cannot disagree; a knob changed in the lesson gives other
settings, and those runs are trained afresh. Every number the lesson shows is measured during training,
so only the histories are stored (:func:`lmcourse.store.stored_numbers.compute_or_load`).
"""
from __future__ import annotations

from ... import config

KNOBS = dict(  # each knob: (ci, cpu, gpu)
    TRAIN_TOKENS=(2_000, 6_000, None),   # training tokens (None: the whole split)
    VALID_TOKENS=(1_000, 3_000, None),   # held-out tokens scored after every epoch
    PROBE_TOKENS=(1_000, 3_000, 50_000),  # training tokens re-scored after every epoch
    EVAL_TOKENS=(1_000, 20_000, None),   # validation / test tokens of the results table
    EMB_SIZE=(16, 128, 400), HIDDEN_SIZE=(16, 128, 1150), LAYERS=(1, 1, 3),
    EPOCHS=(2, 8, 40),
    SEEDS=([0, 1], [0, 1, 2], [0, 1, 2]),  # every variant is trained once per seed
    BATCH_SIZE=(4, 5, 20), BPTT=(20, 35, 35),
    OPTIMIZER=("adam", "adam", "sgd"), LR=(5e-3, 5e-3, 20.0),
    LR_DECAY=(1, 1, 4),                  # divide the rate by this when validation stalls (1: never)
    P=(0.5,) * 3,                        # the dropout rate of every single-variant run
    P_EMBED_ALL=(0.1,) * 3,              # embedding dropout inside the combination (the AWD-LSTM's dropoute)
    ALPHA=(2.0,) * 3, BETA=(1.0,) * 3,   # AR and TAR coefficients (the AWD-LSTM's defaults)
    TABLE_VARIANT=("all + AR/TAR",) * 3,  # the variant whose models join the results table
)


def knobs(scale: str | None = None) -> dict:
    """The knobs at ``scale`` (default: the current one), by their names in the lesson."""
    scale = scale or config.SCALE
    if scale not in config.SCALES:
        raise ValueError(f"Unknown scale {scale!r}: use one of {', '.join(config.SCALES)}.")
    i = config.SCALES.index(scale)
    return {name: values[i] for name, values in KNOBS.items()}


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
