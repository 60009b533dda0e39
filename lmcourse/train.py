r"""Training a recurrent language model: truncated BPTT with SGD, (NT-)ASGD or Adam.

Each step reads a window ``x`` (t, B) from the carried, detached state and minimises

.. math::  L = -\frac{1}{tB}\sum_{s,b} \log p(y_{s,b} \mid x_{\le s, b})
           \;+\; \alpha\,\mathrm{mean}\big((m \odot h^{L}_s)^2\big)
           \;+\; \beta\,\mathrm{mean}\big((h^{L}_s - h^{L}_{s-1})^2\big),

the cross-entropy plus AR on the dropped and TAR on the raw last-layer output (Merity et al. 2018,
Section 4.6; the penalties go into the gradient only, the reported loss is the cross-entropy).
Gradients are clipped to norm ``clip``; SGD updates :math:`\theta \leftarrow \theta - \eta \nabla L`.

- Plain SGD divides :math:`\eta` by ``lr_decay`` whenever the validation loss does not improve
  (pytorch/examples ``word_language_model``).
- NT-ASGD (Merity et al. 2018, Section 3) runs SGD until the validation loss of the epoch is worse than the best
  of all epochs *before the last* ``nonmono`` ones, i.e. ``len(H) > n`` and
  :math:`L_{val} > \min H_{[:-n]}` with ``H`` the earlier validation losses (the code's rule; the
  paper's wording is a typo, awd-lstm-lm issue #13). It then switches to averaged SGD,
  ``torch.optim.ASGD(lr, t0=0, lambd=0)``, and from then on evaluates and saves the averaged
  weights :math:`\bar\theta = \frac{1}{K}\sum_k \theta_k`.
- Variable BPTT: window lengths are drawn around ``bptt`` and the step size is scaled to
  :math:`\eta \cdot \ell / \text{bptt}` for a window of length :math:`\ell`, then restored.

The best validation weights are kept (and checkpointed); at the end of :meth:`Trainer.fit` the model
holds them, also after Ctrl-C or a diverging loss.
"""
from __future__ import annotations

import math
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F

from .checkpoint import copy_state, save_checkpoint
from .config import device, seed_everything
from .data import batchify, bptt_batches, variable_bptt_batches
from .lm import check_tokens
from .live import Callback, LivePlot, ProgressBar
from .models import RNNLM, inference
from .regularize import activation_regularization, temporal_activation_regularization

OPTIMIZERS = ("sgd", "ntasgd", "asgd", "adam")
__all__ = ["TrainConfig", "Trainer", "History", "Callback", "evaluate", "make_optimizer", "scaled_lr",
           "averaged_weights", "should_switch_to_asgd"]


def _positive_int(value, name: str, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"TrainConfig.{name} must be a positive integer, got {value!r}.")


def _non_negative(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"TrainConfig.{name} must be a finite number >= 0, got {value!r}.")


@dataclass
class TrainConfig:
    """How to train; the defaults are pytorch/examples' (lr 20, clip 0.25, batch 20, bptt 35).

    ``optimizer``: ``sgd`` (rate divided by ``lr_decay`` when validation does not improve; 1 keeps
    it), ``ntasgd`` (SGD, then averaged SGD once validation stalls for ``nonmono`` epochs), ``asgd``
    (averaging from the first step) or ``adam`` (decays like ``sgd``). ``clip``: the gradient-norm
    bound (0 or None: none). ``alpha``, ``beta``: AR and TAR weights (AWD-LSTM uses 2 and 1).
    ``variable_bptt``: AWD-LSTM's random window lengths. ``checkpoint``: a path that receives the
    best model. ``max_batches``: a cap per epoch. ``progress``, ``live_plot``: True, False or None
    (automatic: on, except under ``CI`` or at the ``ci`` scale; the plot only in a notebook).
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

    def __post_init__(self):
        for name in ("epochs", "batch_size", "eval_batch_size", "bptt", "nonmono"):
            _positive_int(getattr(self, name), name)
        _positive_int(self.max_batches, "max_batches", allow_none=True)
        if self.clip is None:
            self.clip = 0.0  # no clipping
        for name in ("lr", "clip", "weight_decay", "alpha", "beta"):
            _non_negative(getattr(self, name), name)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"TrainConfig.optimizer={self.optimizer!r} is unknown: "
                             f"use one of {', '.join(OPTIMIZERS)}.")
        if not (isinstance(self.lr_decay, (int, float)) and self.lr_decay >= 1):
            raise ValueError(f"TrainConfig.lr_decay must be >= 1 (1 keeps the rate), got {self.lr_decay!r}.")
        if self.checkpoint is not None:
            self.checkpoint = str(self.checkpoint)


@dataclass
class History:
    """One row (a dict) per epoch, the best row by validation loss, and why training stopped."""

    rows: list = field(default_factory=list)
    best: Optional[dict] = None
    stop_reason: Optional[str] = None

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        """The values of one field over the epochs, e.g. ``history.column('valid_ppl')``."""
        return [row.get(name) for row in self.rows]

    def as_dict(self) -> dict:
        """Columns: ``{field: [value per epoch]}``."""
        names = list(dict.fromkeys(k for row in self.rows for k in row))
        return {name: self.column(name) for name in names}


# ------------------------------------------------------------------------------- helpers

def make_optimizer(name: str, params, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """SGD, Adam, or ASGD with averaging from the first step (``t0=0``) and no decay (``lambd=0``)."""
    params = list(params)
    if name == "asgd":
        return torch.optim.ASGD(params, lr=lr, t0=0, lambd=0.0, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the step size. ASGD steps with its stored ``eta`` (= lr when ``lambd=0``), so set that too."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    if isinstance(optimizer, torch.optim.ASGD):
        for state in optimizer.state.values():
            if "eta" in state:
                if torch.is_tensor(state["eta"]):
                    state["eta"].fill_(lr)
                else:
                    state["eta"] = lr


@contextmanager
def scaled_lr(optimizer: torch.optim.Optimizer, factor: float):
    r"""Step with :math:`\eta \cdot` ``factor`` inside the block, :math:`\eta` again after it (Merity et al. 2018, Section 4.1)."""
    if factor == 1:
        yield
        return
    lr = optimizer.param_groups[0]["lr"]
    set_lr(optimizer, lr * factor)
    try:
        yield
    finally:
        set_lr(optimizer, lr)


@contextmanager
def averaged_weights(optimizer: torch.optim.Optimizer, params):
    r"""Inside the block the parameters hold ASGD's averages :math:`\bar\theta` (``state['ax']``)."""
    if not isinstance(optimizer, torch.optim.ASGD):
        yield False
        return
    pairs = [(p, optimizer.state[p]["ax"]) for p in params if "ax" in optimizer.state.get(p, {})]
    saved = [p.detach().clone() for p, _ in pairs]
    with torch.no_grad():
        for p, ax in pairs:
            p.copy_(ax)
    try:
        yield bool(pairs)
    finally:
        with torch.no_grad():
            for (p, _), theta in zip(pairs, saved):
                p.copy_(theta)


def should_switch_to_asgd(val_losses: list, val_loss: float, nonmono: int) -> bool:
    """NT-ASGD's trigger: ``len(H) > n`` and the new loss exceeds ``min(H[:-n])`` (awd-lstm-lm code, ``main.py``)."""
    return len(val_losses) > nonmono and val_loss > min(val_losses[:-nonmono])


def evaluate(model: RNNLM, source: torch.Tensor, bptt: int = 35) -> float:
    """Mean cross-entropy (nats per token) over a batchified ``source`` (T, B), state carried."""
    with inference(model):
        state = model.init_state(source.size(1))
        total = torch.zeros((), dtype=torch.float64, device=source.device)
        for x, y in bptt_batches(source, bptt):
            out = model(x, state)
            state = out.state
            logits = out.logits.reshape(-1, out.logits.size(-1))  # (t*B, V)
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            total += F.cross_entropy(logits, y.reshape(-1), reduction="sum").double()
    return float(total) / ((source.size(0) - 1) * source.size(1))


def _ppl(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


# ------------------------------------------------------------------------------- the trainer

class Trainer:
    """``Trainer(model, train, valid, config).fit()`` trains ``model`` on 1-D token streams."""

    def __init__(self, model: RNNLM, train, valid, config: TrainConfig, callbacks=(), vocab=None):
        if not isinstance(model, RNNLM):
            raise TypeError(f"Trainer trains an RNNLM, got {type(model).__name__}.")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}: "
                            "build one with TrainConfig(epochs=...).")
        V = model.config.vocab_size
        self.model, self.config = model, config
        self.train_tokens = self._stream(train, V, config.batch_size, "train", "batch_size")
        self.valid_tokens = self._stream(valid, V, config.eval_batch_size, "valid", "eval_batch_size")
        self.vocab = vocab if vocab is not None else model.vocab
        self.callbacks = self._with_live(list(callbacks))
        self.history = History()
        self.stop = False
        self.epoch = 0
        self.seq_len = config.bptt
        self.optimizer = None

    @staticmethod
    def _stream(tokens, vocab_size: int, batch_size: int, split: str, knob: str) -> torch.Tensor:
        tokens = check_tokens(tokens, vocab_size)
        if tokens.numel() < 2 * batch_size:
            raise ValueError(f"The {split} stream has {tokens.numel()} tokens, too few for {knob}={batch_size}: "
                             f"give at least {2 * batch_size} tokens or lower {knob}.")
        return tokens

    @staticmethod
    def _with_live(callbacks: list) -> list:
        """Add a progress bar and a live plot unless given; each decides at the start whether it shows."""
        for kind in (ProgressBar, LivePlot):
            if not any(isinstance(c, kind) for c in callbacks):
                callbacks.append(kind())
        return callbacks

    def _emit(self, hook: str, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)

    @property
    def optimizer_name(self) -> str:
        return {torch.optim.ASGD: "asgd", torch.optim.Adam: "adam"}.get(type(self.optimizer), "sgd")

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"] if self.optimizer else self.config.lr

    def batches_per_epoch(self) -> int:
        """Batches in one epoch (the expected number under variable BPTT)."""
        cfg = self.config
        steps = self.train_tokens.numel() // cfg.batch_size - 1
        mean_len = cfg.bptt * (0.95 + 0.05 / 2) if cfg.variable_bptt else cfg.bptt
        n = max(1, math.ceil(steps / mean_len))
        return min(n, cfg.max_batches) if cfg.max_batches else n

    # ------------------------------------------------------------------------- fit

    def fit(self) -> History:
        """Train for ``config.epochs`` epochs and return the :class:`History`.

        Ctrl-C (``stop_reason='interrupted'``), a non-finite loss (``'nan'``) or ``trainer.stop``
        (``'callback'``) end the run early without raising. The model is left in evaluation mode
        at its best validation weights (averaged ones under ASGD); an interruption before the first
        validation leaves the weights it had reached, and a divergence before it the starting ones.
        """
        cfg = self.config
        seed_everything(cfg.seed)
        self.device = device()
        self.model.to(self.device)
        self.train_data = batchify(self.train_tokens, cfg.batch_size).to(self.device)  # (T, B)
        self.valid_data = batchify(self.valid_tokens, cfg.eval_batch_size).to(self.device)  # (T', B')
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        first = "sgd" if cfg.optimizer == "ntasgd" else cfg.optimizer
        self.optimizer = make_optimizer(first, self.params, cfg.lr, cfg.weight_decay)
        self.stop, self._val_losses, self.history = False, [], History()
        self._best_loss, self._best_state = math.inf, copy_state(self.model)
        self._start = time.perf_counter()
        reason = "completed"
        try:
            self._emit("on_train_begin")
            reason = self._epochs()
        except KeyboardInterrupt:
            reason = "interrupted"
        self._finish(reason)
        return self.history

    def _epochs(self) -> str:
        for epoch in range(1, self.config.epochs + 1):
            self.epoch = epoch
            self._emit("on_epoch_begin", epoch)
            row = self._epoch(epoch)
            if row is None:
                return "nan"
            self._emit("on_epoch_end", row)
            if self.stop:
                return "callback"
        return "completed"

    def _finish(self, reason: str) -> None:
        if reason != "interrupted" or self.history.best is not None:
            self.model.load_state_dict(self._best_state)
        self.model.eval()
        self.history.stop_reason = reason
        self._emit("on_train_end")

    def _epoch(self, epoch: int) -> Optional[dict]:
        stats = self._train_epoch()
        if stats["bad_batch"] is not None:
            self._diverged(epoch, stats["bad_batch"], stats["bad_value"])
            return None
        with averaged_weights(self.optimizer, self.params) as averaged:
            valid_loss = evaluate(self.model, self.valid_data, self.config.bptt)
            row = self._row(epoch, stats, valid_loss, averaged)
            self.history.rows.append(row)
            improved = valid_loss < self._best_loss
            if improved:
                self._keep_best(row)
        self._after_validation(valid_loss, improved)
        return row

    def _row(self, epoch: int, stats: dict, valid_loss: float, averaged: bool) -> dict:
        row = {"epoch": epoch, "train_loss": stats["loss"], "train_ppl": _ppl(stats["loss"]),
               "valid_loss": valid_loss, "valid_ppl": _ppl(valid_loss), "lr": self.lr,
               "optimizer": self.optimizer_name, "averaged": averaged,
               "tokens_per_s": stats["tokens"] / max(stats["seconds"], 1e-9),
               "elapsed_s": time.perf_counter() - self._start}
        if self.config.alpha:
            row["ar"] = stats["ar"]
        if self.config.beta:
            row["tar"] = stats["tar"]
        return row

    def _keep_best(self, row: dict) -> None:
        self._best_loss = row["valid_loss"]
        self._best_state = copy_state(self.model)
        self.history.best = row
        if self.config.checkpoint:
            extra = {"train_config": asdict(self.config), "epoch": row["epoch"], "averaged": row["averaged"]}
            save_checkpoint(self.config.checkpoint, self.model, self.vocab, self.history, extra)

    def _after_validation(self, valid_loss: float, improved: bool) -> None:
        """NT-ASGD's switch, or SGD's / Adam's decay when validation did not improve."""
        cfg = self.config
        if cfg.optimizer == "ntasgd" and self.optimizer_name == "sgd":
            if should_switch_to_asgd(self._val_losses, valid_loss, cfg.nonmono):
                self.optimizer = make_optimizer("asgd", self.params, self.lr, cfg.weight_decay)
        elif cfg.optimizer in ("sgd", "adam") and cfg.lr_decay != 1 and not improved:
            set_lr(self.optimizer, self.lr / cfg.lr_decay)
        self._val_losses.append(valid_loss)

    def _diverged(self, epoch: int, batch: int, value: float) -> None:
        lr = self.lr
        message = (f"The training loss became {value} at epoch {epoch}, batch {batch + 1}: the learning rate "
                   f"({lr:g}) is probably too high for this model; lower it (try {lr / 4:g}) or clip gradients harder.")
        warnings.warn(message, RuntimeWarning, stacklevel=5)
        print(message)

    # ------------------------------------------------------------------------- one epoch

    def _batches(self):
        cfg = self.config
        if cfg.variable_bptt:
            return variable_bptt_batches(self.train_data, cfg.bptt, self.generator)
        return ((x, y, x.size(0)) for x, y in bptt_batches(self.train_data, cfg.bptt))

    def _train_epoch(self) -> dict:
        """Train on one pass over the batches; losses stay on the device until the end."""
        cfg, model = self.config, self.model
        model.train()
        state = model.init_state(cfg.batch_size)
        losses, weights, penalties = [], [], []
        check_every = 1 if self.device.type == "cpu" else 50
        stats = {"bad_batch": None, "bad_value": None}
        start = time.perf_counter()
        for i, (x, y, seq_len) in enumerate(self._batches()):
            if cfg.max_batches and i >= cfg.max_batches:
                break
            self.seq_len = seq_len
            loss, penalty, state = self._step(x, y, model.detach_state(state), seq_len)
            losses.append(loss)
            weights.append(y.numel())
            penalties.append(penalty)
            self._emit("on_batch_end", i, loss)
            if (i + 1) % check_every == 0 and self._first_bad(losses, i + 1 - check_every, stats):
                break
            if self.stop:
                break
        if stats["bad_batch"] is None:
            self._first_bad(losses, (len(losses) // check_every) * check_every, stats)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        stats["seconds"] = time.perf_counter() - start
        return self._summarise(stats, losses, weights, penalties)

    @staticmethod
    def _first_bad(losses: list, since: int, stats: dict) -> bool:
        """Find the first non-finite loss from index ``since`` on (one device sync)."""
        recent = torch.stack(losses[since:]) if len(losses) > since else None
        if recent is None or bool(torch.isfinite(recent).all()):
            return False
        index = int((~torch.isfinite(recent)).nonzero()[0])
        stats["bad_batch"], stats["bad_value"] = since + index, float(recent[index])
        return True

    def _summarise(self, stats: dict, losses: list, weights: list, penalties: list) -> dict:
        n = sum(weights)
        w = torch.tensor(weights, dtype=torch.float64, device=self.device)
        stats["tokens"] = n
        stats["loss"] = float((torch.stack(losses).double() * w).sum()) / n if losses else math.nan
        if penalties and penalties[0]:
            ar, tar = torch.stack([torch.stack(p) for p in penalties]).double().mean(0).tolist()
            stats["ar"], stats["tar"] = ar, tar
        return stats

    def _step(self, x: torch.Tensor, y: torch.Tensor, state: list, seq_len: int):
        """One forward/backward/clip/step; returns the detached cross-entropy, (AR, TAR) and the state."""
        cfg = self.config
        out = self.model(x, state)
        V = out.logits.size(-1)
        loss = F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1))  # mean over t*B tokens
        objective, penalty = loss, ()
        if cfg.alpha or cfg.beta:
            zero = loss.new_zeros(())
            ar = activation_regularization(out.outputs[-1], cfg.alpha) if cfg.alpha else zero
            tar = temporal_activation_regularization(out.raw_outputs[-1], cfg.beta) if cfg.beta else zero
            objective = loss + ar + tar
            penalty = (ar.detach(), tar.detach())
        self.optimizer.zero_grad(set_to_none=True)
        objective.backward()
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip)
        factor = seq_len / cfg.bptt if cfg.variable_bptt else 1
        with scaled_lr(self.optimizer, factor):
            self.optimizer.step()
        return loss.detach(), penalty, out.state
