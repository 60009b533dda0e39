"""The stored runs of lessons 02b (the shared word LSTM), 03 (dropout) and 04 (weight tying).

Each lesson reads its knobs from here (:func:`knobs`: one value per scale, the lesson's plain
variables start from them) and builds the settings of its runs with the same function the
declaration calls, so the lesson and ``reference_runs/`` cannot disagree; a knob changed in the
lesson gives other settings, and those runs are trained afresh.

What is stored whole and what only as numbers follows what the lessons read, inside the size
budget of ``reference_runs/`` (a 1 × 128 model of the embedded corpus is 3 to 5.5 MB in half precision):

- ``word-lstm`` (``word-lstm-gpu`` at ``gpu``): lesson 02b's word LSTM, whole; lessons 07, 08 and 09
  load it by this name and these settings, and lesson 08's stored passes carry both in their keys,
  so it keeps the name it had before lessons named their runs (its entry says lesson 02b, see
  :func:`lmcourse.training.reference_runs.lesson_of`);
- ``03-dropout``: six regimes times the seeds; lesson 03 reads only their histories (every number
  it shows is measured during training), so only the histories are stored
  (:func:`lmcourse.training.stored_numbers.compute_or_load`);
- ``04-tying``: the untied and the tied model of the first seed, whole (lesson 04 looks inside their
  tables); ``04-tying-measured``: the other seeds' histories, which carry what the lesson measures on
  every model (the results table's perplexities, each validation token's loss, the tables' category
  agreement).
"""
from __future__ import annotations

from .. import config
from .lesson_runs import declare

WORD_LSTM = {  # scale: (name, settings); pytorch/examples 2017's recipe, and at gpu its medium tied model
    "ci": ("word-lstm", dict(emb_size=200, hidden_size=200, num_layers=1, tie=True, dropout=0.0, epochs=1, lr=20.0,
                             batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=20_000)),
    "cpu": ("word-lstm", dict(emb_size=200, hidden_size=200, num_layers=1, tie=True, dropout=0.0, epochs=1, lr=20.0,
                              batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=None)),
    "gpu": ("word-lstm-gpu", dict(emb_size=650, hidden_size=650, num_layers=2, tie=True, dropout=0.5, epochs=40,
                                  lr=20.0, batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=None)),
}

# Each knob: (ci, cpu, gpu).
KNOBS = {
    "03": dict(
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
    ),
    "04": dict(
        TRAIN_TOKENS=(2_000, 6_000, None),   # training tokens (None: the whole split)
        CURVE_TOKENS=(1_000, 3_000, None),   # held-out validation tokens scored after every epoch
        PROBE_TOKENS=(1_000, 3_000, 50_000),  # training tokens re-scored after every epoch
        EVAL_TOKENS=(1_000, 20_000, None),   # validation / test tokens of the results table
        SEEDS=([0, 1], [0, 1, 2], [0, 1, 2]),  # one untied and one tied model per seed
        EMB_SIZE=(16, 128, 650),             # E: the last layer outputs E units, so tying is possible
        HIDDEN_SIZE=(16, 128, 650),          # H: the units of the first layer
        LAYERS=(1, 1, 2), DROPOUT=(0.0, 0.0, 0.5), EPOCHS=(2, 10, 40),
        BATCH_SIZE=(4, 5, 20), BPTT=(20, 35, 35),
        OPTIMIZER=("sgd",) * 3, LR=(20.0,) * 3,
        LR_DECAY=(1.5, 1.5, 4),              # divide the rate by this ...
        DECAY_AFTER=(1, 4, None),            # ... after every epoch from this one on (None: when validation stalls)
        CLIP=(0.25,) * 3,                    # the gradient-norm bound
    ),
}


def knobs(lesson: str, scale: str | None = None) -> dict:
    """The knobs of ``lesson`` ("03", "04") at ``scale`` (default: the current one), by their names in the lesson."""
    scale = scale or config.SCALE
    if scale not in config.SCALES:
        raise ValueError(f"Unknown scale {scale!r}: use one of {', '.join(config.SCALES)}.")
    i = config.SCALES.index(scale)
    return {name: values[i] for name, values in KNOBS[lesson].items()}


def word_lstm(scale: str | None = None) -> tuple[str, dict]:
    """``(name, settings)`` of the shared word LSTM at ``scale``."""
    name, settings = WORD_LSTM[scale or config.SCALE]
    return name, dict(settings)


def _word_runs(name: str):
    return lambda scale: [word_lstm(scale)[1]] if word_lstm(scale)[0] == name else []


declare("word-lstm")(_word_runs("word-lstm"))
declare("word-lstm-gpu")(_word_runs("word-lstm-gpu"))


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


@declare("03-dropout")
def _dropout(scale: str) -> list:
    """Lesson 03: every regime once per seed; stored as histories only."""
    return list(dropout_runs(knobs("03", scale)).values())


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
        k = knobs("04", scale)
        return [s for (_, seed), s in tying_runs(k).items() if tying_name(seed, k["SEEDS"]) == name]
    return runs


declare("04-tying")(_tying("04-tying"))
declare("04-tying-measured")(_tying("04-tying-measured"))
