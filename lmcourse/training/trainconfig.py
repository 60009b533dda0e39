"""The settings of a training run (:class:`TrainConfig`) and the record it keeps (:class:`History`).

Both are plain dataclasses, so a run's settings and history save as JSON (see
:mod:`lmcourse.training.rundir`) and come back with :func:`load_run_config`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Optional

from ..errors import RunDirError, sentence
from ..lm import model_config_class
from .compat import kind_of
from .optim import OPTIMIZERS
from .rundir import CONFIG, RunDir

__all__ = ["TrainConfig", "History", "load_run_config", "RESUMABLE_CHANGES", "MIN_WINDOW", "LATER_FIELDS", "key_fields"]

# Fields added after runs were committed whose keys list every TrainConfig field (lessons 05 and 06): left out of
# such a key while they keep their default, so that a new field never re-keys a stored run it cannot change.
LATER_FIELDS = {"max_decays": None, "min_gain": 0.0}
# the settings that may differ when resuming
RESUMABLE_CHANGES = ("epochs", "progress", "live_plot", "checkpoint", "out_dir", "checkpoint_every", "tf32")
MIN_WINDOW = 5  # the shortest variable-BPTT window (Merity et al. 2018, Section 4.1)
MAX_SEED = 2**31 - 1  # seeds of the ranks and of resumed epochs are derived from it and stay below 2**32


def _positive_int(value, name: str, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"TrainConfig.{name} must be a positive integer{' or None' if allow_none else ''}, "
                         f"got {value!r}.")


def _non_negative(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"TrainConfig.{name} must be a finite number >= 0, got {value!r}.")


def _flag(value, name: str, allow_none: bool = False) -> None:
    if not (isinstance(value, bool) or (allow_none and value is None)):
        raise ValueError(f"TrainConfig.{name} must be True or False{' or None' if allow_none else ''}, "
                         f"got {value!r}.")


@dataclass
class TrainConfig:
    r"""How to train; the defaults are pytorch/examples' (lr 20, clip 0.25, batch 20, bptt 35).

    ``optimizer``: ``sgd`` (rate divided by ``lr_decay`` when validation does not improve; 1 keeps
    it), ``ntasgd`` (SGD, then averaged SGD once validation stalls for ``nonmono`` epochs), ``asgd``
    (averaging from the first step) or ``adam`` (decays like ``sgd``). ``clip``: the gradient-norm
    bound (0 or None: none). ``alpha``, ``beta``: AR and TAR weights (AWD-LSTM uses 2 and 1).
    ``decay_after``: a fixed schedule instead: after every epoch from this one on, divide the rate
    by ``lr_decay`` whatever validation says (Zaremba et al. 2014, Section 4.1: after 6 epochs, by
    1.2 after each epoch). ``stop_nonmono``: end the run as soon as the validation loss is worse than
    the best of the epochs before the last ``nonmono`` ones, NT-ASGD's trigger used as a stopping
    rule (stop_reason ``'non-monotone'``; the awd-lstm-lm code's ``finetune.py``). ``max_decays``: with
    ``sgd`` or ``adam``, end the run (stop_reason ``'converged'``) at the first epoch that fails to improve
    validation after the rate has already been divided ``max_decays`` times: "train until validation stops
    improving" as a rule (None: run all ``epochs``). ``min_gain``: the rate's decay and that stop count an epoch as
    improving only when it lowers the best validation perplexity by more than this fraction (0.01: by more than 1%;
    0: any improvement); the best weights are kept on any improvement.
    ``variable_bptt``: AWD-LSTM's random window lengths; ``max_seq_len_delta``: cap them at
    ``bptt + delta`` (None: no cap). ``small_batch_size``: read the batch in sub-batches of at most
    this many columns per process, accumulating the gradient (None: all at once).
    ``checkpoint``: a path that receives the best model. ``out_dir``: a folder for the whole run
    (config, history, best and last state, curves), which ``Trainer.fit(resume=True)`` continues.
    ``max_batches``: a cap per epoch. ``progress``, ``live_plot``: True, False or None (automatic:
    on, except under ``CI`` or at the ``ci`` scale; the plot only in a notebook). ``warmup``: raise
    the rate linearly over the first ``warmup`` batches of the first epoch, :math:`\eta_i = \eta\,
    \min(1, i / \text{warmup})` for batch :math:`i = 1, 2, \dots` (0: none), which keeps a head of
    products of small matrices from blowing up on its first steps.

    Speed: ``checkpoint_every``: write ``last.pt`` (the resume state) every N epochs and at the run's
    last one (``best.pt`` is still written whenever validation improves); a resumed run continues from
    the last one written. ``bf16``: the training steps' forward passes under bfloat16 autocast (matrix
    products in bf16, softmaxes and losses in float32; validation stays float32); on a CPU whose kernels
    lack bfloat16 (AVX2 without AVX-512, as torch reports it) torch's LSTM layers run in float32 and the
    rest under autocast, with one sentence saying so (:mod:`lmcourse.training.precision`). ``tf32``: True or
    False sets TF32 for CUDA's matrix products and cuDNN (:func:`lmcourse.config.set_tf32`) when the
    run starts; None leaves torch's setting alone.
    """

    epochs: int
    batch_size: int = 20
    eval_batch_size: int = 10
    bptt: int = 35
    lr: float = 20.0
    clip: float = 0.25
    optimizer: str = "sgd"
    lr_decay: float = 4.0
    weight_decay: float = 0.0
    variable_bptt: bool = False
    alpha: float = 0.0
    beta: float = 0.0
    nonmono: int = 5
    seed: int = 1111
    checkpoint: Optional[str] = None
    max_batches: Optional[int] = None
    progress: Optional[bool] = None
    live_plot: Optional[bool] = None
    small_batch_size: Optional[int] = None
    max_seq_len_delta: Optional[int] = None
    out_dir: Optional[str] = None
    decay_after: Optional[int] = None
    stop_nonmono: bool = False
    warmup: int = 0
    checkpoint_every: int = 1
    max_decays: Optional[int] = None
    min_gain: float = 0.0
    bf16: bool = False
    tf32: Optional[bool] = None

    def __post_init__(self):
        for name in ("epochs", "batch_size", "eval_batch_size", "bptt", "nonmono", "checkpoint_every"):
            _positive_int(getattr(self, name), name)
        for name in ("max_batches", "small_batch_size", "decay_after", "max_decays"):
            _positive_int(getattr(self, name), name, allow_none=True)
        w = self.warmup
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ValueError(f"TrainConfig.warmup must be a whole number of batches >= 0 (0: none), got {w!r}.")
        if self.clip is None:
            self.clip = 0.0  # no clipping
        for name in ("lr", "clip", "weight_decay", "alpha", "beta"):
            _non_negative(getattr(self, name), name)
        g = self.min_gain
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g < 1:
            raise ValueError(f"TrainConfig.min_gain must be a fraction in [0, 1) (0.01: 1%), got {g!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"TrainConfig.seed must be a whole number from 0 to {MAX_SEED}, got {self.seed!r}.")
        for name in ("variable_bptt", "stop_nonmono", "bf16"):
            _flag(getattr(self, name), name)
        for name in ("progress", "live_plot", "tf32"):
            _flag(getattr(self, name), name, allow_none=True)
        if not isinstance(self.optimizer, str) or self.optimizer not in OPTIMIZERS:
            raise ValueError(f"TrainConfig.optimizer={self.optimizer!r} is unknown: "
                             f"use one of {', '.join(OPTIMIZERS)}.")
        decay = self.lr_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not (math.isfinite(decay) and decay >= 1):
            raise ValueError(f"TrainConfig.lr_decay must be a finite number >= 1 (1 keeps the rate), got {decay!r}.")
        small = self.small_batch_size
        if small is not None and small < self.batch_size and self.batch_size % small:
            raise ValueError(f"TrainConfig.small_batch_size={small} does not divide batch_size={self.batch_size}: "
                             "use a divisor, so every sub-batch has the same number of columns.")
        delta = self.max_seq_len_delta
        if delta is not None:
            if isinstance(delta, bool) or not isinstance(delta, int) or delta < 0:
                raise ValueError(f"TrainConfig.max_seq_len_delta must be an integer >= 0 or None, got {delta!r}.")
            if self.bptt + delta < MIN_WINDOW:
                raise ValueError(f"bptt + max_seq_len_delta = {self.bptt + delta} is below the shortest window "
                                 f"({MIN_WINDOW}): raise max_seq_len_delta.")
        for name in ("checkpoint", "out_dir"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, (str, os.PathLike)):
                raise ValueError(f"TrainConfig.{name} must be a path or None, got {type(value).__name__}.")
            if not str(value).strip():
                raise ValueError(f"TrainConfig.{name} is empty: give a path, or None for no {name}.")
            setattr(self, name, str(value))


@dataclass
class History:
    """One row (a dict) per epoch, the best row by validation loss, why training stopped, and
    ``start``: the validation loss and perplexity of the starting weights."""

    rows: list = field(default_factory=list)
    best: Optional[dict] = None
    stop_reason: Optional[str] = None
    start: Optional[dict] = None

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        """The values of one field over the epochs, e.g. ``history.column('valid_ppl')``."""
        return [row.get(name) for row in self.rows]

    def as_dict(self) -> dict:
        """Columns: ``{field: [value per epoch]}``."""
        names = list(dict.fromkeys(k for row in self.rows for k in row))
        return {name: self.column(name) for name in names}

    def state(self) -> dict:
        """Everything, as plain data (what ``history.json`` holds)."""
        return {"rows": self.rows, "best": self.best, "start": self.start, "stop_reason": self.stop_reason}


def load_run_config(out_dir) -> tuple:
    """``(model config, TrainConfig)`` a run in ``out_dir`` was started with (its ``config.json``): the model's
    config is the class registered for the kind the file names (a file that names none holds an ``rnnlm``)."""
    run = RunDir(out_dir)
    config = run.read_config()
    try:
        model = model_config_class(kind_of(config))(**config["model"])
        return model, TrainConfig(**config["train"])
    except (TypeError, ValueError) as error:
        raise RunDirError(f"{run.file(CONFIG)} holds settings that are not valid (edited by hand?), "
                          f"{sentence(error).rstrip('.')}: restore the file the run wrote, or start the run again "
                          "in a new folder.") from None


def key_fields(config: TrainConfig, shown=("progress", "live_plot")) -> dict:
    """The fields of ``config`` that decide a run, for a key that lists them all: every field but how training is
    ``shown``, and the :data:`LATER_FIELDS` still at their defaults."""
    return {k: v for k, v in vars(config).items()
            if k not in shown and not (k in LATER_FIELDS and v == LATER_FIELDS[k])}
