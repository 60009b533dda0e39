"""Watching a training run: the callback hooks, a progress bar and a live perplexity curve.

A callback sees the trainer at four moments (plus the start of each epoch, and the epoch's row before it is saved)::

    on_train_begin(trainer)
    on_epoch_begin(trainer, epoch)
    on_batch_end(trainer, batch_idx, loss)     # loss: a 0-d tensor, not yet synced to the host
    on_row(trainer, row)                       # the epoch's history row (a dict), before any checkpoint holds it:
                                               # what a callback adds here survives a run killed after the save
    on_epoch_end(trainer, row)                 # the same row, once the epoch's checkpoints are written
    on_train_end(trainer)

Setting ``trainer.stop = True`` in any hook ends training after the current batch.

:class:`ProgressBar` (:func:`lmcourse.progress.bar`: one output redrawn in place in a notebook, text in a
terminal) and
:class:`LivePlot` (train and validation perplexity per epoch, redrawn in place in a notebook) are
added by the trainer on their own; both stay off when the ``CI`` variable is set or at the ``ci``
scale, and the plot also outside an IPython kernel.
"""
from __future__ import annotations

import io
import math
import time
from typing import Optional

import torch

from ..corpora.data import batchify, bptt_batches
from ..lm import perplexity_from_nll
from ..networks.loss import evaluate, returns_log_probs, token_nll
from ..progress import bar, live_plot_enabled, progress_enabled


class Callback:
    """Hooks called by :class:`lmcourse.training.trainer.Trainer`; override the ones you need."""

    def on_train_begin(self, trainer) -> None:
        pass

    def on_epoch_begin(self, trainer, epoch: int) -> None:
        pass

    def on_batch_end(self, trainer, batch_idx: int, loss) -> None:
        pass

    def on_row(self, trainer, row: dict) -> None:
        pass

    def on_epoch_end(self, trainer, row: dict) -> None:
        pass

    def on_train_end(self, trainer) -> None:
        pass


def _fmt_ppl(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else str(value)


def _choose(own: Optional[bool], trainer, key: str) -> Optional[bool]:
    """A callback's own switch wins; else the trainer's ``config.<key>`` decides (None: automatic)."""
    return own if own is not None else getattr(trainer.config, key, None)


class ProgressBar(Callback):
    """One ``tqdm`` bar per epoch over its batches, with the running loss; a summary line per epoch.

    The loss is read from the device only every ``every`` batches, so the bar costs no
    synchronisation on the other batches. ``enabled``: True, False, or None (the trainer's
    ``config.progress``, automatic when that is None too).
    """

    def __init__(self, every: int = 20, enabled: Optional[bool] = None):
        self.every = every
        self.enabled = enabled
        self.bar = None

    def on_train_begin(self, trainer) -> None:
        if progress_enabled(_choose(self.enabled, trainer, "progress")):
            self.bar = bar(total=trainer.batches_per_epoch(), unit="batch", dynamic_ncols=True, enabled=True)

    def on_epoch_begin(self, trainer, epoch: int) -> None:
        if self.bar is not None:
            self.bar.reset(total=trainer.batches_per_epoch())
            self.bar.set_description(f"epoch {epoch}/{trainer.config.epochs}")

    def on_batch_end(self, trainer, batch_idx: int, loss) -> None:
        if self.bar is None:
            return
        self.bar.update(1)
        if (batch_idx + 1) % self.every == 0:
            value = float(loss)
            self.bar.set_postfix(loss=f"{value:.3f}", ppl=_fmt_ppl(perplexity_from_nll(value)), refresh=False)

    def on_epoch_end(self, trainer, row: dict) -> None:
        if self.bar is not None:
            self.bar.write(f"epoch {row['epoch']:3d} | train ppl {_fmt_ppl(row['train_ppl'])} | "
                           f"valid ppl {_fmt_ppl(row['valid_ppl'])} | lr {row['lr']:.4g} | {row['optimizer']} | "
                           f"{row['tokens_per_s']:.0f} tok/s")

    def on_train_end(self, trainer) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class LivePlot(Callback):
    """Train and validation perplexity, redrawn in place; ``floor`` draws a horizontal line.

    The figure is rendered to PNG and shown through one display handle, so a notebook keeps a single
    image that changes while training runs. Per epoch it draws the train and validation
    perplexities. Within an epoch it adds ``points`` (fractional epoch, train ppl, valid ppl):

    - by default a running training perplexity, the mean over the batches since the last point, at
      most one every ``redraw_s`` seconds (valid ppl None);
    - with ``valid`` (a 1-D token stream, e.g. a slice of the validation split) and ``every``, one
      point every ``every`` batches with that slice's perplexity too, so even a single epoch shows
      a validation curve.

    Epochs trained with averaged weights are marked. The figure appears once it has two points to
    join (an empty frame says nothing); its x-axis spans the epochs the run plans from the start, the
    log y-axis reads in plain numbers, the legend sits beside the axes, and the floor is labelled on
    the plot. ``enabled``: True, False, or None (the trainer's ``config.live_plot``, else
    ``LMCOURSE_LIVE_PLOT``, automatic when both are unset); it never draws outside an IPython kernel,
    but ``points`` are recorded whenever ``valid``/``every`` are given.
    """

    def __init__(self, floor: Optional[float] = None, floor_label: str = "oracle", title: str = "perplexity",
                 enabled: Optional[bool] = None, redraw_s: float = 3.0, valid=None, every: Optional[int] = None):
        if (valid is None) != (every is None):
            raise ValueError("Give LivePlot both valid= (a token stream) and every= (batches), or neither.")
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ValueError(f"LivePlot(every=...) must be a positive number of batches, got {every!r}.")
        self.floor, self.floor_label, self.title = floor, floor_label, title
        self.enabled, self.redraw_s, self.valid, self.every = enabled, redraw_s, valid, every
        self.active = False
        self.handle = None
        self.points: list = []
        self.planned: Optional[int] = None  # the epochs the run plans: the x-axis spans them

    def on_train_begin(self, trainer) -> None:
        self.active = live_plot_enabled(_choose(self.enabled, trainer, "live_plot"))
        self.handle, self.points, self._pending, self._batch = None, [], [], 0
        self.planned = getattr(trainer.config, "epochs", None)
        self._last = time.perf_counter()
        if self.valid is not None:
            self._valid = batchify(self.valid, min(10, len(self.valid) // 2)).to(trainer.device)  # (T, B)

    def on_batch_end(self, trainer, batch_idx: int, loss) -> None:
        self._batch = batch_idx
        if self.every is not None:
            self._pending.append(loss.detach())
            if (batch_idx + 1) % self.every == 0:
                self._record(trainer, batch_idx)
        elif self.active:
            self._pending.append(loss.detach())
            if time.perf_counter() - self._last >= self.redraw_s:
                self._record(trainer, batch_idx)

    def _record(self, trainer, batch_idx: int) -> None:
        mean = float(torch.stack(self._pending).float().mean())
        self._pending = []
        valid_ppl = None
        if self.every is not None:
            nll = evaluate(trainer.model, self._valid, trainer.config.bptt)  # restores train mode
            valid_ppl = perplexity_from_nll(nll)
        x = trainer.epoch - 1 + (batch_idx + 1) / max(trainer.batches_per_epoch(), 1)
        self.points.append((x, perplexity_from_nll(mean), valid_ppl))
        if self.active and self.drawable(trainer.history.rows):
            self._show(trainer.history.rows)

    def render(self, rows: list, points: Optional[list] = None, planned: Optional[int] = None) -> bytes:
        """The curves of ``rows`` (history rows) and within-epoch ``points`` as PNG bytes (see :meth:`figure`)."""
        buffer = io.BytesIO()
        self.figure(rows, points, planned).savefig(buffer, format="png")
        return buffer.getvalue()

    def figure(self, rows: list, points: Optional[list] = None, planned: Optional[int] = None):
        """The curves of ``rows`` (history rows) and within-epoch ``points`` as a matplotlib Figure.

        ``planned``: the epochs the x-axis spans (default: those of the run being watched, else the data)."""
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

        fig = Figure(figsize=(7.2, 3.5), dpi=90, layout="constrained")
        ax = fig.add_subplot()
        points = points or []
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], "-", color="tab:blue", alpha=0.4,
                    label="train (running)")
        if any(p[2] is not None for p in points):
            ax.plot([p[0] for p in points], [p[2] for p in points], "-", color="tab:orange", alpha=0.6,
                    label="valid (slice)")
        epochs = [r["epoch"] for r in rows]
        if rows:
            ax.plot(epochs, [r["train_ppl"] for r in rows], "o-", color="tab:blue", label="train")
            ax.plot(epochs, [r["valid_ppl"] for r in rows], "s-", color="tab:orange", label="valid")
        switch = next((r["epoch"] for r in rows if r.get("optimizer") == "asgd"), None)
        if switch is not None and switch > rows[0]["epoch"]:
            ax.axvline(switch - 0.5, color="grey", linestyle=":", label="averaging starts")
        span = planned or self.planned or max([1] + epochs + [math.ceil(p[0]) for p in points])
        span = max(span, 1)
        ax.set_xlim(0, span + max(0.03 * span, 0.06))  # a little room: the last epoch's marker is whole
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
        if self.floor is not None:
            ax.axhline(self.floor, color="black", linestyle="--", lw=1, label=f"{self.floor_label} floor")
            ax.annotate(f"{self.floor_label} {self.floor:.1f}", (1, self.floor), xycoords=("axes fraction", "data"),
                        xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=8)
        values = [v for r in rows for v in (r["train_ppl"], r["valid_ppl"])]
        values += [v for p in points for v in p[1:] if v is not None]
        finite = [v for v in values if math.isfinite(v) and v > 0] + ([self.floor] if self.floor else [])
        if finite:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylim(min(finite) / 1.15, max(finite) * 1.15)
        ax.set_xlabel("epoch")
        ax.set_ylabel("perplexity")
        ax.set_title(self.title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8, frameon=False)
        ax.grid(True, which="major", alpha=0.3)
        return fig

    def drawable(self, rows: list) -> bool:
        """True once there are two points to join: the first frame is never an empty one."""
        return len(rows) + len(self.points) >= 2

    def on_epoch_end(self, trainer, row: dict) -> None:
        if self.every is not None and self._pending:  # close the curve at the epoch's last batch
            self._record(trainer, self._batch)
        if self.active and self.drawable(trainer.history.rows):
            self._show(trainer.history.rows)

    def _show(self, rows: list) -> None:
        from IPython.display import Image, display

        self._last = time.perf_counter()
        image = Image(data=self.render(rows, self.points))
        if self.handle is None:
            self.handle = display(image, display_id=True)
        else:
            self.handle.update(image)


class KeepCurve(Callback):
    """Copies a :class:`LivePlot`'s points of the epoch into the epoch's history row (``row["curve"]``),
    so that a run loaded from disk can draw its within-epoch curve too."""

    def __init__(self, plot: LivePlot):
        self.plot = plot

    def on_epoch_end(self, trainer, row: dict) -> None:
        row["curve"] = [list(p) for p in self.plot.points if trainer.epoch - 1 < p[0] <= trainer.epoch]


class Snapshots(KeepCurve):
    """Samples the model after the batches in ``at`` (counted across epochs) with ``sample(model)``; at the end
    of each epoch keeps them (``row["samples"]``: ``[batch, text]`` pairs), the batches so far (``row["batches"]``)
    and the live plot's points of the epoch (``row["curve"]``) in the epoch's history row."""

    def __init__(self, at, sample, plot: LivePlot):
        super().__init__(plot)
        self.at, self.sample, self.samples, self.step = set(at), sample, [], 0

    def on_batch_end(self, trainer, batch_idx: int, loss) -> None:
        # batches since the run began, read off the trainer, so that a resumed run keeps counting where it stopped
        self.step = (trainer.epoch - 1) * trainer.batches_per_epoch() + batch_idx + 1
        if self.step in self.at:
            self.samples.append([self.step, self.sample(trainer.model)])

    def on_row(self, trainer, row: dict) -> None:  # before the checkpoints: a resumed run keeps every sample
        row["samples"], self.samples = self.samples, []
        row["batches"] = self.step


def nll_with_dropout(model, source: torch.Tensor, bptt: int) -> float:
    r"""Mean cross-entropy :math:`L` (nats per token) over a batchified ``source`` (T, B) with dropout on, as
    training sees it; no gradients, and the random state is put back, so measuring does not change the
    training that follows (:func:`lmcourse.networks.loss.evaluate` gives the same with dropout off)."""
    was_training, log_probs = model.training, returns_log_probs(model)
    model.train(True)
    total = 0.0
    with torch.no_grad(), torch.random.fork_rng(devices=[source.device] if source.is_cuda else []):
        state = model.init_state(source.size(1))
        for x, y in bptt_batches(source, bptt):
            out = model(x, state)
            state = out.state
            total += token_nll(out.logits, y, log_probs, reduction="sum").item()
    model.train(was_training)
    return total / ((source.size(0) - 1) * source.size(1))


class TrainProbe(Callback):
    """After every epoch, the perplexity of a slice of training text (``tokens``, read in ``columns`` columns),
    stored in the epoch's row: with the end-of-epoch weights and dropout off (``train_off_ppl``) and, with
    ``with_dropout``, on as training sees it (``train_on_ppl``): dropout's cost and overfitting told apart."""

    def __init__(self, tokens: torch.Tensor, with_dropout: bool = True, columns: int = 10):
        self.tokens, self.with_dropout, self.columns = tokens, with_dropout, columns

    def on_train_begin(self, trainer) -> None:
        self.source = batchify(self.tokens, self.columns).to(trainer.device)  # (T, columns)

    def on_epoch_end(self, trainer, row: dict) -> None:
        bptt = trainer.config.bptt
        if self.with_dropout:
            row["train_on_ppl"] = perplexity_from_nll(nll_with_dropout(trainer.model, self.source, bptt))
        row["train_off_ppl"] = perplexity_from_nll(evaluate(trainer.model, self.source, bptt))
