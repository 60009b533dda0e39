"""Many runs in one live figure: each run's curves per epoch, redrawn in place after every epoch.

A lesson that trains several runs side by side (variants, seeds) makes one :class:`LiveCompare` and
gives every run its :meth:`~LiveCompare.callback`; a run loaded from disk is drawn from its history
with :meth:`~LiveCompare.replay`. One figure, one progress bar over every epoch of every run::

    live = LiveCompare(group=lambda key: key[0], series={"valid_ppl": ("o-", "validation")})
    bar = progress.bar(total=runs * epochs)
    Trainer(..., callbacks=[live.callback(("locked", 0), bar)]).fit()

A run is named by a key (``(variant, seed)``); runs of one group (``group(key)``, the variant) share a
colour and one legend entry.
"""
from __future__ import annotations

import io
from typing import Callable, Hashable, Optional

from ..progress import in_notebook
from .callbacks import Callback

__all__ = ["LiveCompare"]


class _Epochs(Callback):
    def __init__(self, live: "LiveCompare", key: Hashable, progress):
        self.live, self.key, self.progress = live, key, progress

    def on_epoch_end(self, trainer, row: dict) -> None:
        if self.progress is not None:
            self.progress.update(1)
        self.live.add(self.key, row)


class LiveCompare:
    """Per-epoch curves of many runs in one figure. ``series``: row key -> (line style, label), e.g.
    ``{"valid_ppl": ("o-", "validation"), "train_off_ppl": (":", "training text")}``; ``group(key)`` and
    ``label(group)`` give a run's colour group and its legend text; ``colors`` maps a group to a colour
    (default: the cycle in order of appearance); ``floor`` draws a dashed line. It draws only when
    ``enabled`` and inside a notebook; the curves are recorded either way."""

    def __init__(self, series: Optional[dict] = None, group: Callable = lambda key: key[0], label: Callable = str,
                 colors: Optional[dict] = None, floor: Optional[float] = None, floor_label: str = "oracle (floor)",
                 ylabel: str = "validation perplexity", enabled: bool = True):
        self.series = series or {"valid_ppl": ("o-", None)}
        self.group, self.label, self.colors = group, label, dict(colors or {})
        self.floor, self.floor_label, self.ylabel = floor, floor_label, ylabel
        self.enabled = bool(enabled)
        self.curves: dict = {}  # key -> {row key: [value per epoch]}
        self.handle = None

    def add(self, key: Hashable, row: dict, draw: bool = True) -> None:
        """Append an epoch's ``row`` to the run ``key``'s curves, and redraw (``draw``)."""
        curves = self.curves.setdefault(key, {name: [] for name in self.series})
        for name in self.series:
            curves[name].append(row[name])
        if draw:
            self.draw()

    def replay(self, key: Hashable, rows: list, progress=None) -> None:
        """A stored run's history, added without redrawing (``progress`` advances by its epochs)."""
        for row in rows:
            self.add(key, row, draw=False)
        if progress is not None:
            progress.update(len(rows))

    def callback(self, key: Hashable, progress=None) -> Callback:
        """The trainer callback of the run ``key``: after every epoch, ``progress`` advances and the figure redraws."""
        return _Epochs(self, key, progress)

    def figure(self):
        """The figure as it stands (a matplotlib ``Figure``, not shown)."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.4, 3.4), dpi=80)
        ax = fig.add_subplot()
        seen = set()
        for key, curves in self.curves.items():
            g = self.group(key)
            color = self.colors.setdefault(g, f"C{len(self.colors)}")
            for name, (style, what) in self.series.items():
                values = curves[name]
                text = None if (g, name) in seen else self.label(g) + (f", {what}" if what else "")
                seen.add((g, name))
                ax.plot(range(1, len(values) + 1), values, style, ms=2, color=color, alpha=0.8, label=text)
        if self.floor is not None:
            ax.axhline(self.floor, color="k", ls="--", label=self.floor_label)
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(self.ylabel)
        ax.legend(fontsize=7, ncol=2)
        return fig

    def draw(self) -> None:
        """Show the figure in place of the last one (only when enabled, inside a notebook)."""
        if not (self.enabled and in_notebook()) or not self.curves:
            return
        from IPython.display import Image, display

        buffer = io.BytesIO()
        self.figure().savefig(buffer, format="png")
        image = Image(data=buffer.getvalue())
        if self.handle is None:
            self.handle = display(image, display_id=True)
        else:
            self.handle.update(image)
