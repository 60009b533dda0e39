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
  With ``decay_after = k`` it follows a fixed schedule instead, dividing after every epoch from
  epoch k on (Zaremba et al. 2014, Section 4.1).
- ``stop_nonmono`` ends the run on NT-ASGD's trigger (finetuning in the awd-lstm-lm code).
- NT-ASGD (Merity et al. 2018, Section 3) runs SGD until the validation loss of the epoch is worse
  than the best of all epochs *before the last* ``nonmono`` ones (:func:`~lmcourse.training.optim.should_switch_to_asgd`),
  then switches to averaged SGD and from then on evaluates and saves the averaged weights
  :math:`\bar\theta = \frac{1}{K}\sum_k \theta_k`.
- Variable BPTT: window lengths are drawn around ``bptt`` (capped at ``bptt + max_seq_len_delta``
  when given, as in the MoS code; Yang et al. 2018) and the step size is scaled to
  :math:`\eta \cdot \ell / \text{bptt}` for a window of length :math:`\ell`, then restored.
- Gradient accumulation (``small_batch_size``, the MoS code's): the B columns are read in
  sub-batches of S columns, each carrying its own hidden state; sub-batch ``j`` back-propagates
  :math:`\frac{S}{B} L_j`, so the summed gradient is that of the whole batch, then one clip and step.

The run starts by measuring the validation loss of the starting weights; a "best" model is only
kept (and checkpointed) when it beats that. The best weights are restored at the end of
:meth:`Trainer.fit`, also after Ctrl-C, a diverging loss or an exception. With ``out_dir`` the run
keeps a folder (:mod:`lmcourse.training.rundir`), held by a lock (:mod:`lmcourse.training.lock`),
that :meth:`Trainer.fit` can resume exactly (:mod:`lmcourse.training.resume`); a diverging loss is
caught by :mod:`lmcourse.training.losses`; under ``torchrun`` it trains data-parallel
(:mod:`lmcourse.training.distributed`). The model is anything that keeps the neural-model
contract of :mod:`lmcourse.lm`.

The loop, on one screen: :meth:`Trainer._epochs` -> :meth:`Trainer._epoch` (train, validate,
decide) -> :meth:`Trainer._train_epoch` (the batches) -> :meth:`Trainer._step` (forward, backward,
clip, step).
"""
from __future__ import annotations

import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict
from itertools import islice
from typing import Optional

import torch

from ..config import device, seed_everything, set_tf32
from ..corpora.data import batchify, bptt_batches, variable_bptt_batches
from ..lm import check_neural, check_tokens, perplexity_from_nll
from ..networks.base import NeuralLM
from ..networks.loss import evaluate, returns_log_probs, token_nll
from ..networks.regularize import activation_regularization, temporal_activation_regularization
from . import distributed
from .callbacks import Callback, LivePlot, ProgressBar
from .checkpoint import check_writable_file, copy_state, save_checkpoint
from .optim import averaged_weights, make_optimizer, optimizer_name, scaled_lr, set_lr, should_switch_to_asgd
from .lock import RunLock, claim_on_every_rank
from .losses import DIVERGENCE_MARGIN, agree, epoch_means, first_diverged, loss_limit
from .precision import bf16_autocast, fallback_note, lstm_in_float32
from .resume import capture_rng, restore, saved_run, snapshot
from .rundir import BEST, RunDir
from .trainconfig import MIN_WINDOW, RESUMABLE_CHANGES, History, TrainConfig, load_run_config

__all__ = ["TrainConfig", "Trainer", "History", "Callback", "evaluate", "make_optimizer", "scaled_lr",
           "averaged_weights", "should_switch_to_asgd", "load_run_config", "DIVERGENCE_MARGIN", "RESUMABLE_CHANGES"]


# ------------------------------------------------------------------------------- the trainer

class Trainer:
    """``Trainer(model, train, valid, config).fit()`` trains ``model`` (any model keeping the contract
    of :mod:`lmcourse.lm`) on 1-D token streams."""

    def __init__(self, model: NeuralLM, train, valid, config: TrainConfig, callbacks=(), vocab=None):
        check_neural(model, "train")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}: "
                            "build one with TrainConfig(epochs=...).")
        if config.checkpoint or config.out_dir:  # a run that stores its model: say so now, not after an epoch
            check_neural(model, "checkpoint")
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
            method = getattr(callback, hook, None)  # a callback written before a hook existed lacks it
            if method is not None:
                method(self, *args)

    @property
    def optimizer_name(self) -> str:
        return optimizer_name(self.optimizer)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"] if self.optimizer else self.config.lr

    def batches_per_epoch(self) -> int:
        """Batches in one epoch (the expected number under variable BPTT)."""
        cfg = self.config
        steps = self.train_tokens.numel() // cfg.batch_size - 1
        mean_len = cfg.bptt * (0.95 + 0.05 / 2) if cfg.variable_bptt else cfg.bptt
        if cfg.variable_bptt and cfg.max_seq_len_delta is not None:
            mean_len = min(mean_len, cfg.bptt + cfg.max_seq_len_delta)
        n = max(1, math.ceil(steps / mean_len))
        return min(n, cfg.max_batches) if cfg.max_batches else n

    # ------------------------------------------------------------------------------ fit

    def fit(self, resume=False, overwrite: bool = False) -> History:
        """Train until epoch ``config.epochs`` and return the :class:`History`.

        ``resume``: False starts afresh; True continues the run in ``config.out_dir`` from its
        ``last.pt``, exactly where the last finished epoch left it (a run stopped mid-epoch repeats
        that epoch); ``"auto"`` resumes when there is a run to resume and starts afresh otherwise.
        Only ``epochs``, ``progress``, ``live_plot``, ``checkpoint``, ``out_dir``, ``checkpoint_every`` and
        ``tf32`` may differ from the saved run's settings (a setting the saved run predates counts as its
        default). A fresh start refuses an ``out_dir`` that holds any run file
        (a finished run whose ``last.pt`` was deleted, a ``best.pt`` of your own) unless
        ``overwrite=True``, which deletes them first. The run holds the folder's lock throughout
        (:class:`~lmcourse.training.rundir.RunLock`): a second run there stops at once.

        Ctrl-C (``stop_reason='interrupted'``), a diverging loss (``'nan'`` for a non-finite one,
        ``'diverged'`` for one far above a uniform guess) or ``trainer.stop`` (``'callback'``) end
        the run early without raising; any other exception is re-raised after the same clean-up
        (``stop_reason='error: <type>'``). The model is left in evaluation mode at its best
        validation weights (averaged ones under ASGD), or the starting ones when no epoch beat
        them; an interruption before the first validation leaves the weights it had reached.
        """
        if resume not in (False, True, "auto"):
            raise ValueError(f"fit(resume=...) takes False, True or 'auto', got {resume!r}.")
        if not isinstance(overwrite, bool):
            raise ValueError(f"fit(overwrite=...) takes True or False, got {overwrite!r}.")
        if overwrite and resume is True:
            raise ValueError("fit(resume=True, overwrite=True) asks both to continue the run and to delete it: "
                             "pass one of them.")
        distributed.init()
        lock = self._claim_folder(resume, overwrite)
        try:
            return self._fit(resume)
        finally:
            if lock is not None:
                lock.release()

    def _fit(self, resume) -> History:
        self._best_state = None
        saved = self._setup(resume)
        reason = "completed"
        try:
            restore(self, saved) if saved is not None else self._fresh_start()
            if self.parallel:  # one sequence of window lengths for all ranks: rank 0's
                self.generator.set_state(distributed.broadcast(self.generator.get_state()))
            self.net = distributed.wrap(self.model)  # (DistributedDataParallel under torchrun)
            if self.rundir is not None and self.main:
                self.rundir.write_config(self.model.kind, self.model.config.as_dict(), asdict(self.config), self.world)
            self._emit("on_train_begin")
            reason = self._epochs()
        except KeyboardInterrupt:
            reason = "interrupted"
        except Exception as error:
            self._finish(f"error: {type(error).__name__}", quiet=True)
            silent = distributed.explain(error)  # a collective that gave up on a silent rank: name it
            if silent is not None:
                raise silent from None
            raise
        self._finish(reason)
        return self.history

    # ------------------------------------------------- the loop: epochs, batches, steps

    def _epochs(self) -> str:
        if self._stop_reason in ("non-monotone", "converged"):  # the resumed run had already ended by its own rule
            return self._stop_reason
        for epoch in range(self.epoch + 1, self.config.epochs + 1):
            self.epoch = epoch
            self._emit("on_epoch_begin", epoch)
            row, reason, complete = self._epoch(epoch)
            if reason:
                return reason
            self._save_run(complete)
            self._emit("on_epoch_end", row)
            if self.parallel:
                self.stop = bool(distributed.all_max(torch.tensor(float(self.stop))))
            if self.stop:
                return self._stop_reason or "callback"
        return "completed"

    def _epoch(self, epoch: int):
        """Train and validate; return ``(row, stop_reason or None, whether the epoch ran to its end)``."""
        stats = self._train_epoch()
        if stats["bad_batch"] is not None:
            value = stats["bad_value"]
            self._diverged(f"The training loss became {value:.4g} at epoch {epoch}, batch {stats['bad_batch'] + 1}"
                           + ("" if not math.isfinite(value) else
                              f", far above the {self._limit - DIVERGENCE_MARGIN:.3g} nats of a uniform guess"))
            return None, ("diverged" if math.isfinite(value) else "nan"), False
        with averaged_weights(self.optimizer, self.params) as averaged:
            valid_loss = self._agree(evaluate(self.model, self.valid_data, self.config.bptt))
            row = self._row(epoch, stats, valid_loss, averaged)
            self._emit("on_row", row)  # callbacks complete the row before a checkpoint holds it
            self.history.rows.append(row)
            if not (math.isfinite(row["valid_ppl"]) and valid_loss <= self._limit):
                self._diverged(f"The validation perplexity became {row['valid_ppl']:.4g} at epoch {epoch}")
                return row, "diverged", False
            improved = valid_loss < self._best_loss
            gained = valid_loss < self._best_loss + math.log1p(-self.config.min_gain)  # by more than min_gain
            if improved:
                self._keep_best(row)
        self._after_validation(valid_loss, gained)
        return row, None, not stats["cut"]

    def _train_epoch(self) -> dict:
        """One pass over the batches; the losses stay on the device until a check reads them."""
        cfg = self.config
        self.model.train()
        states = [self.model.init_state(self.sub_batch) for _ in range(self.n_sub)]  # one per sub-batch
        losses, weights, penalties = [], [], []
        every = 1 if self.device.type == "cpu" else 50  # batches between two reads of the losses
        stats = {"bad_batch": None, "bad_value": None, "cut": False}
        checked, halted, start = 0, False, time.perf_counter()
        for i, (x, y, seq_len) in enumerate(islice(self._batches(), cfg.max_batches)):
            self.seq_len = seq_len
            self._ramp = (i + 1) / cfg.warmup if self.epoch == 1 and i < cfg.warmup else 1.0  # the warm-up
            loss, penalty, states = self._step(x, y, states, seq_len)
            losses.append(loss)
            weights.append(y.numel())
            penalties.append(penalty)
            self._emit("on_batch_end", i, loss)
            if (i + 1) % every == 0 or (self.stop and not self.parallel):
                halted, checked = self._check(losses, checked, stats), i + 1
                if halted:
                    stats["cut"] = stats["bad_batch"] is None  # stopped before the epoch's end
                    break
        if not halted:
            self._check(losses, checked, stats)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        stats["seconds"] = time.perf_counter() - start
        return {**stats, **epoch_means(losses, weights, penalties, self.device)}

    def _step(self, x: torch.Tensor, y: torch.Tensor, states: list, seq_len: int):
        """One forward/backward per sub-batch, then one clip and step; returns the detached
        cross-entropy of the batch, (AR, TAR) and the new states."""
        cfg, n, s = self.config, self.n_sub, self.sub_batch
        self.optimizer.zero_grad(set_to_none=True)
        losses, penalties, new_states = [], [], []
        for j, state in enumerate(states):
            cols = slice(j * s, (j + 1) * s)
            last = j == n - 1
            with self.net.no_sync() if self.parallel and not last else nullcontext():  # one gradient sync a step
                with bf16_autocast(self.model, self.device, cfg.bf16):  # opt-in; the LSTM in float32 where it must
                    out = self.net(x[:, cols] if n > 1 else x, self.model.detach_state(state))
                    loss = token_nll(out.logits, y[:, cols] if n > 1 else y, self.log_probs)  # mean over t*S tokens
                    objective, penalty = self._objective(loss, out)
                (objective * (s / self.local_batch) if n > 1 else objective).backward()
            losses.append(loss.detach())
            penalties.append(penalty)
            new_states.append(out.state)
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip)
        factor = (seq_len / cfg.bptt if cfg.variable_bptt else 1) * self._ramp
        with scaled_lr(self.optimizer, factor):
            self.optimizer.step()
        if n == 1:
            return losses[0], penalties[0], new_states
        penalty = tuple(torch.stack(p).mean() for p in zip(*penalties)) if penalties[0] else ()
        return torch.stack(losses).mean(), penalty, new_states

    def _objective(self, loss: torch.Tensor, out) -> tuple:
        """The cross-entropy plus AR and TAR, and the detached (AR, TAR) (empty when both are off)."""
        cfg = self.config
        if not (cfg.alpha or cfg.beta):
            return loss, ()
        if getattr(out, "outputs", None) is None or getattr(out, "raw_outputs", None) is None:
            raise ValueError(f"AR and TAR read the layers' outputs, which {type(self.model).__name__}'s forward does "
                             "not return (.outputs, .raw_outputs): train it with alpha=0 and beta=0.")
        zero = loss.new_zeros(())
        ar = activation_regularization(out.outputs[-1], cfg.alpha) if cfg.alpha else zero
        tar = temporal_activation_regularization(out.raw_outputs[-1], cfg.beta) if cfg.beta else zero
        return loss + ar + tar, (ar.detach(), tar.detach())

    def _batches(self):
        cfg = self.config
        if cfg.variable_bptt:
            cap = cfg.bptt + cfg.max_seq_len_delta if cfg.max_seq_len_delta is not None else None
            return variable_bptt_batches(self.train_data, cfg.bptt, self.generator, min_len=MIN_WINDOW, max_len=cap)
        return ((x, y, x.size(0)) for x, y in bptt_batches(self.train_data, cfg.bptt))

    # ------------------------------------------------------------- checks and decisions

    def _check(self, losses: list, since: int, stats: dict) -> bool:
        """Look for a diverged loss from index ``since`` on and read the stop flag, both agreed over the
        ranks under torch.distributed (:mod:`lmcourse.training.losses`). True: stop the epoch here."""
        index, value = first_diverged(losses, since, self._limit)
        if self.parallel:  # the earliest bad batch of any rank, and anyone's stop
            index, value, self.stop = agree(index, value, since, self.stop)
        if index >= 0:
            stats["bad_batch"], stats["bad_value"] = since + index, value
        return index >= 0 or self.stop

    def _row(self, epoch: int, stats: dict, valid_loss: float, averaged: bool) -> dict:
        row = {"epoch": epoch, "train_loss": stats["loss"], "train_ppl": perplexity_from_nll(stats["loss"]),
               "valid_loss": valid_loss, "valid_ppl": perplexity_from_nll(valid_loss), "lr": self.lr,
               "optimizer": self.optimizer_name, "averaged": averaged,
               "tokens_per_s": stats["tokens"] / max(stats["seconds"], 1e-9),
               "elapsed_s": self._elapsed + time.perf_counter() - self._start}
        if self.config.alpha:
            row["ar"] = stats["ar"]
        if self.config.beta:
            row["tar"] = stats["tar"]
        return row

    def _keep_best(self, row: dict) -> None:
        """Save the best model first; only then count it as the best (a failed save changes nothing)."""
        if self.main:
            extra = {"train_config": asdict(self.config), "epoch": row["epoch"], "averaged": row["averaged"]}
            paths = [self.config.checkpoint] if self.config.checkpoint else []
            paths += [self.rundir.file(BEST)] if self.rundir is not None else []
            for path in paths:
                save_checkpoint(path, self.model, self.vocab, self.history, extra)
        self._best_state = copy_state(self.model)
        self._best_loss = row["valid_loss"]
        self.history.best = row

    def _after_validation(self, valid_loss: float, improved: bool) -> None:
        """NT-ASGD's switch, or SGD's / Adam's decay (when validation did not improve, or on the fixed
        schedule of ``decay_after``); the non-monotone stop of ``stop_nonmono``."""
        cfg = self.config
        if cfg.stop_nonmono and should_switch_to_asgd(self._val_losses, valid_loss, cfg.nonmono):
            self.stop, self._stop_reason = True, "non-monotone"
        if cfg.optimizer == "ntasgd" and self.optimizer_name == "sgd":
            if should_switch_to_asgd(self._val_losses, valid_loss, cfg.nonmono):
                self.optimizer = make_optimizer("asgd", self.params, self.lr, cfg.weight_decay)
        elif cfg.optimizer in ("sgd", "adam") and cfg.lr_decay != 1:
            scheduled = cfg.decay_after is not None and self.epoch >= cfg.decay_after
            if not improved and cfg.max_decays is not None and self._decays() >= cfg.max_decays:
                self.stop, self._stop_reason = True, "converged"
            elif scheduled or (cfg.decay_after is None and not improved):
                set_lr(self.optimizer, self.lr / cfg.lr_decay)
        self._val_losses.append(valid_loss)

    def _decays(self) -> int:
        """How many times the rate has been divided by ``lr_decay`` so far (read off the rate itself, so a resumed
        run counts the same)."""
        return max(0, round(math.log(self.config.lr / self.lr) / math.log(self.config.lr_decay)))

    def _diverged(self, what: str) -> None:
        lr = self.lr
        message = (f"{what}: the learning rate (lr={lr:g}) is probably too high for this model; "
                   f"lower it (try {lr / 4:g}) or clip gradients harder.")
        if self.main:
            warnings.warn(message, RuntimeWarning, stacklevel=6)
            print(message)

    # --------------------------------------------------------- setting up and finishing

    def _claim_folder(self, resume, overwrite: bool) -> Optional[RunLock]:
        """Rank 0 takes the lock of ``out_dir``, removes what writes killed mid-way left there, and makes
        sure a fresh start finds no run files (deleting them under ``overwrite``); when it cannot,
        every rank raises the same sentence."""
        if not self.config.out_dir:
            return None
        run = RunDir(self.config.out_dir)

        def prepare():
            run.clean()
            if not resume or (resume == "auto" and not run.has_run()):
                run.clear() if overwrite else run.refuse_fresh_start()
        return claim_on_every_rank(run, prepare)

    def _setup(self, resume) -> Optional[dict]:
        """Check the settings and paths, place model and data; return the saved state when resuming."""
        cfg = self.config
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.main, self.parallel = self.rank == 0, self.world > 1
        columns = distributed.columns(cfg.batch_size)
        self.local_batch = columns.stop - columns.start
        self.sub_batch = min(cfg.small_batch_size or self.local_batch, self.local_batch)
        if self.local_batch % self.sub_batch:
            raise ValueError(f"small_batch_size={cfg.small_batch_size} does not divide the {self.local_batch} "
                             f"columns each of {self.world} processes trains on: use a divisor of {self.local_batch}.")
        self.n_sub = self.local_batch // self.sub_batch
        self.rundir = RunDir(cfg.out_dir) if cfg.out_dir else None
        saved = saved_run(self.rundir, resume, self.model, cfg, self.vocab)
        if self.main:
            if cfg.checkpoint:
                check_writable_file(cfg.checkpoint, "TrainConfig.checkpoint")
            if self.rundir is not None:
                self.rundir.check_writable()
        if not self.main:  # only rank 0 shows progress
            for callback in self.callbacks:
                if isinstance(callback, (ProgressBar, LivePlot)):
                    callback.enabled = False
        if cfg.tf32 is not None:
            set_tf32(cfg.tf32)
        seed_everything(cfg.seed + self.rank)  # dropout masks differ between ranks
        self.device = device()
        self.model.to(self.device)
        if cfg.bf16 and self.main and lstm_in_float32(self.device) and any(
                isinstance(m, torch.nn.LSTM) for m in self.model.modules()):
            warnings.warn(fallback_note(), UserWarning, stacklevel=4)
        train = batchify(self.train_tokens, cfg.batch_size)[:, columns]  # (T, B/W): this rank's columns
        self.train_data = train.contiguous().to(self.device)
        self.valid_data = batchify(self.valid_tokens, cfg.eval_batch_size).to(self.device)  # (T', B')
        self.generator = torch.Generator().manual_seed(cfg.seed)  # the same window lengths on every rank
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.log_probs = returns_log_probs(self.model)
        first = "sgd" if cfg.optimizer == "ntasgd" else cfg.optimizer
        self.optimizer = make_optimizer(first, self.params, cfg.lr, cfg.weight_decay)
        self.stop, self._val_losses, self.history, self.epoch = False, [], History(), 0
        self._ramp = 1.0  # the warm-up's share of the rate at this batch
        self._stop_reason = None
        self._limit = loss_limit(self.model.config.vocab_size)
        self._start, self._elapsed = time.perf_counter(), 0.0
        return saved

    def _fresh_start(self) -> None:
        """Measure the starting weights once: a "best" model must beat them."""
        loss = self._agree(evaluate(self.model, self.valid_data, self.config.bptt))
        self.history.start = {"valid_loss": loss, "valid_ppl": perplexity_from_nll(loss)}
        self._best_loss = loss if math.isfinite(loss) else math.inf
        self._best_state = copy_state(self.model)

    def _agree(self, value: float) -> float:
        """Rank 0's value on every rank, so that every decision taken from it is the same everywhere."""
        if not self.parallel:
            return value
        return float(distributed.broadcast(torch.tensor(value, dtype=torch.float64)))

    def _finish(self, reason: str, quiet: bool = False) -> None:
        if self._best_state is not None and (reason != "interrupted" or self.history.best is not None):
            self.model.load_state_dict(self._best_state)
        self.model.eval()
        self.history.stop_reason = reason
        try:
            if self.rundir is not None and self.main:
                self._write_history()
            self._emit("on_train_end")
        except Exception:
            if not quiet:
                raise

    # ---------------------------------------------------------------- the run directory

    def _save_run(self, complete: bool) -> None:
        """At an epoch end: history, curves, and (when the epoch ran to its end) the resume state, every
        ``checkpoint_every`` epochs and at the run's last."""
        if self.rundir is None:
            return
        rng = distributed.all_gather_object(capture_rng()) if complete else None  # every rank's states
        if not self.main:
            return
        every = self.config.checkpoint_every
        if complete and (self.epoch % every == 0 or self.epoch >= self.config.epochs or self.stop):
            self.rundir.save_last(snapshot(self, rng))
        self._write_history()

    def _write_history(self) -> None:
        self.rundir.write_history(self.history.state())
        if self.history.rows:
            plot = next((c for c in self.callbacks if isinstance(c, LivePlot)), None) or LivePlot()
            self.rundir.write_curves(plot.render(self.history.rows, plot.points))
