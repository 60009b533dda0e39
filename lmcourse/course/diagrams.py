r"""The course's diagrams: the architectures and algorithms drawn with matplotlib, one function each.

Each function returns a :class:`matplotlib.figure.Figure` made for a projector: at most
:data:`MAX_SIZE` inches (it shows at its own size, 100 pixels an inch, in a JupyterLab column and on a
1200 x 800 slide of the decks), no text under :data:`MIN_POINTS` points at that size, in the notation
of :mod:`lmcourse.course.notation`. Nothing is fetched and nothing is random, so a diagram is the same
in the notebook, the RISE show, ``make slides`` and ``make book``, and ``tests/test_diagrams.py`` builds
every one of them. In a lesson, the figure is the cell's last expression::

    from lmcourse.course import diagrams
    diagrams.lstm_cell()

- :func:`kn_backoff` (01): the interpolated Kneser-Ney bigram, the counts then :math:`\gamma(v)` times the shorter history;
- :func:`lstm_cell` (02, 02b): the gates, the cell state and the path a gradient takes through it;
- :func:`gradient_path` (02): that path over several steps, a product of forget gates, beside a plain RNN's;
- :func:`dropout_masks` (03): what one draw of the mask covers: a step, a word type, a sequence, :math:`W_{hh}`;
- :func:`tied_matrix` (04): one :math:`V \times d` matrix, read at the input and scored at the output;
- :func:`softmax_bottleneck` (05): :math:`A \approx H W^\top`, an :math:`N \times V` matrix through :math:`d`;
- :func:`mos_head` (06): :math:`K` softmaxes from tanh projections, mixed by a prior;
- :func:`cache_attention` (07): the cache as attention over past states, mixed in with :math:`\lambda`;
- :func:`dynamic_evaluation` (08): a stream scored segment by segment, a step after each, the pull back;
- :func:`ladder` (09): the rungs from KN5 to dynamic evaluation (at their numbers, when given them);
- :func:`attention_block` (10): queries, keys, values, the causal mask and the heads.

:func:`problems` says what keeps a figure (a diagram or any lesson's plot) from a projector: too large,
text under :data:`MIN_POINTS` points at the size it shows, text that leaves the figure or covers other
text. ``python -m lmcourse.course.diagrams --out DIR`` writes every diagram as a PNG to look at.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from ..checksum import atomic_write
from .notation import change

__all__ = ["MAX_SIZE", "MIN_POINTS", "DIAGRAMS", "kn_backoff", "lstm_cell", "gradient_path", "dropout_masks", "tied_matrix",
           "softmax_bottleneck", "mos_head", "cache_attention", "dynamic_evaluation", "ladder", "attention_block",
           "LADDER", "small_text", "outside_text", "overlapping_text", "problems", "png"]

MAX_SIZE = (10.0, 6.0)  # inches, at 100 dpi: fits a JupyterLab column and a 1200 x 800 slide below its title
MIN_POINTS = 10.0  # the smallest text, in points at the size the figure shows
DPI = 100

FS = 13  # body text
SMALL = 11  # labels beside arrows, ticks
TITLE = 15

INK = "#222222"
GREY = "#8C8C8C"
PALE = "#F2F2F2"
BLUE, ORANGE, GREEN, RED, PURPLE = "#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"
LIGHT = {BLUE: "#DCE6F2", ORANGE: "#F8E1D2", GREEN: "#DDEEDD", RED: "#F3D9DA", PURPLE: "#E4E0F0", GREY: "#EBEBEB"}


# ---------------------------------------------------------------------------------------------- drawing

def _blank(width: float, height: float):
    """A figure of ``width`` x ``height`` inches with no axes yet (for panels of plots)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, facecolor="white")
    FigureCanvasAgg(fig)
    _drawn_in_notebooks(Figure)
    return fig


def _drawn_in_notebooks(figure_class) -> None:
    """In a Jupyter kernel, make IPython draw a figure made without pyplot as a picture. Its inline backend
    teaches IPython that only once pyplot has drawn something, so a lesson's first diagram would otherwise show
    as the text ``<Figure size ...>``."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(figure_class)
    except KeyError:
        from IPython.core.pylabtools import select_figure_formats  # only inside a kernel, where IPython is loaded

        select_figure_formats(shell, {"png"}, bbox_inches="tight")


def _figure(width: float, height: float):
    """A figure of ``width`` x ``height`` inches whose one axes is drawn in inches (origin bottom left)."""
    fig = _blank(width, height)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _box(ax, x, y, w, h, text="", color=GREY, size=FS, lw=1.6, zorder=2):
    """A rounded box centred on (x, y), ``w`` x ``h`` inches, filled with ``color``'s light shade, ``text`` inside."""
    from matplotlib.patches import FancyBboxPatch

    pad = min(0.08, w / 4, h / 4)
    ax.add_patch(FancyBboxPatch((x - w / 2 + pad, y - h / 2 + pad), w - 2 * pad, h - 2 * pad,
                                boxstyle=f"round,pad={pad}", fc=LIGHT.get(color, PALE), ec=color, lw=lw, zorder=zorder))
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, color=INK, zorder=zorder + 1)


def _node(ax, x, y, text, r=0.22, color=INK, size=FS, fill="white", zorder=4):
    """A small round operation node (×, +, tanh) centred on (x, y)."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y), r, fc=fill, ec=color, lw=1.6, zorder=zorder))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=color, zorder=zorder + 1)


def _arrow(ax, start, end, color=INK, lw=1.6, style="-|>", rad=0.0, ls="-", zorder=3, head=12):
    """An arrow from ``start`` to ``end`` (inches, drawn to the points themselves), bent by ``rad``."""
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=head, color=color, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0, linestyle=ls,
                                 zorder=zorder))


def _panel(ax, x, y, w, h, color=GREY):
    """A pale rounded panel behind a group of parts (a cell, a block)."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.1", fc="#FAFAFA", ec=color, lw=1.2, zorder=0))


def _rect(ax, x, y, w, h, fill, edge=None, lw=1.4, zorder=1):
    """A plain rectangle with its lower left corner at (x, y)."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, fc=fill, ec=edge or fill, lw=lw, zorder=zorder))


def _line(ax, xs, ys, color=INK, lw=1.6, ls="-", zorder=1):
    ax.plot(xs, ys, color=color, lw=lw, ls=ls, zorder=zorder, solid_capstyle="round")


def _say(ax, x, y, text, size=FS, color=INK, ha="center", va="center", **kw):
    return ax.text(x, y, text, fontsize=size, color=color, ha=ha, va=va, **kw)


# ---------------------------------------------------------------------------------------------- 01: counting

def kn_backoff():
    r"""Lesson 01's interpolated Kneser-Ney bigram as a chain: the discounted counts of :math:`v\,w`, plus
    :math:`\gamma(v)` (the mass the discounts freed) times the continuation unigram, which is itself discounted
    and mixed with the uniform :math:`1/V`; an unseen history passes everything down (:math:`\gamma = 1`)."""
    fig, ax = _figure(10, 4.4)
    y, h = 2.45, 1.5
    parts = [(1.55, 2.7, BLUE, "the bigram's counts", r"$\dfrac{\max(c(v\,w) - D,\ 0)}{c(v\,\bullet)}$"),
             (5.15, 2.7, ORANGE, "continuation unigram", r"$\dfrac{N_{1+}(\bullet\,w)}{N_{1+}(\bullet\,\bullet)}$"),
             (8.6, 1.9, GREY, "uniform", r"$\dfrac{1}{V}$")]
    for x, w, color, name, formula in parts:
        _box(ax, x, y, w, h, color=color)
        _say(ax, x, y + 0.42, name, size=SMALL)
        _say(ax, x, y - 0.2, formula)
    for (xa, wa, *_), (xb, wb, *_), label in zip(parts, parts[1:], (r"$+\,\gamma(v)\,\times$", r"$+\,\gamma\,\times$")):
        start, end = xa + wa / 2 + 0.05, xb - wb / 2 - 0.05
        _arrow(ax, (start, y - 0.2), (end, y - 0.2), lw=2)
        _say(ax, (start + end) / 2, y + 0.2, label)
    _say(ax, 5.0, 3.95, r"$p(w \mid v)$, read left to right: what the counts say, plus what they gave up, passed on")
    _say(ax, 5.0, 1.15, r"$\gamma(v) = D\,N_{1+}(v\,\bullet)\,/\,c(v\,\bullet)$: the mass the discounts freed",
         color=BLUE)
    _say(ax, 5.0, 0.45, r"a history never seen: $\gamma(v) = 1$, all of it to the shorter history; "
         "orders 3 to 5 stack the same way", size=SMALL)
    return fig


# ---------------------------------------------------------------------------------------------- 02: the LSTM

def lstm_cell():
    r"""One LSTM step (lesson 02's equations): the four gates read :math:`x_t` and :math:`h_{t-1}`; the cell
    state runs along the top, touched only by :math:`\times f_t` and :math:`+ i_t g_t`, which is the path
    along which a gradient reaches :math:`c_{t-1}` unsquashed: :math:`\partial c_t / \partial c_{t-1} = f_t`."""
    fig, ax = _figure(10, 5.4)
    _panel(ax, 1.45, 0.95, 6.9, 3.55)
    top, bus, gy = 3.95, 1.35, 2.25
    # the cell state's path, the gradient's highway
    _line(ax, [0.55, 9.45], [top, top], color=RED, lw=4, zorder=1)
    _arrow(ax, (9.0, top), (9.5, top), color=RED, lw=4, head=18)
    _say(ax, 0.5, top + 0.35, r"$c_{t-1}$", ha="left")
    _say(ax, 9.5, top + 0.35, r"$c_t$", ha="right")
    _node(ax, 2.9, top, r"$\times$")
    _node(ax, 4.85, top, r"$+$")
    # the inputs: h_{t-1} from the left, x_t from below, on one bus to the four gates
    _line(ax, [0.55, 6.7], [bus, bus], lw=2)
    _say(ax, 0.5, bus + 0.3, r"$h_{t-1}$", ha="left")
    _line(ax, [1.9, 1.9], [0.35, bus], lw=2)
    _say(ax, 2.05, 0.3, r"$x_t$", ha="left")
    for x, fn in ((2.9, r"$\sigma$"), (4.2, r"$\sigma$"), (5.5, r"$\tanh$"), (6.7, r"$\sigma$")):
        _box(ax, x, gy, 0.8, 0.55, fn, color=BLUE)
        _arrow(ax, (x, bus), (x, gy - 0.28))
    _arrow(ax, (2.9, gy + 0.28), (2.9, top - 0.22))
    _say(ax, 2.72, 3.2, r"$f_t$", ha="right")
    _node(ax, 4.85, 3.1, r"$\times$")
    _arrow(ax, (4.2, gy + 0.28), (4.7, 2.95))
    _say(ax, 4.2, 2.9, r"$i_t$", ha="right")
    _arrow(ax, (5.5, gy + 0.28), (5.0, 2.95))
    _say(ax, 5.52, 2.9, r"$g_t$", ha="left")
    _arrow(ax, (4.85, 3.32), (4.85, top - 0.22))
    # the output: h_t = o_t * tanh(c_t)
    _line(ax, [7.75, 7.75], [top, 3.45])
    _node(ax, 7.75, 3.2, r"$\tanh$", r=0.3, size=SMALL)
    _node(ax, 7.75, gy, r"$\times$")
    _arrow(ax, (7.75, 2.9), (7.75, gy + 0.22))
    _arrow(ax, (7.1, gy), (7.53, gy))
    _say(ax, 7.2, gy + 0.3, r"$o_t$", ha="left")
    _arrow(ax, (7.97, gy), (9.5, gy), lw=2)
    _say(ax, 9.5, gy + 0.3, r"$h_t$", ha="right")
    # what the picture says
    _say(ax, 5.0, 5.05, r"gradient path: $\partial c_t / \partial c_{t-1} = f_t$  (no matrix, no squashing)",
         color=RED)
    _say(ax, 5.0, 0.45, r"$c_t = f_t \odot c_{t-1} + i_t \odot g_t \qquad h_t = o_t \odot \tanh(c_t)$")
    return fig


def gradient_path(steps: int = 4):
    r"""The gradient from :math:`c_t` back ``steps`` - 1 steps: along the cell path a product of forget
    gates, :math:`\prod_j f_j`; along a plain RNN's state, :math:`h_t = \tanh(U_x x_t + U h_{t-1} + b)`, a product of
    :math:`U^\top\,\mathrm{diag}(\tanh')` (``U``: the plain RNN's own :math:`d_h \times d_h` matrix, not the LSTM's stacked
    :math:`W_{hh}`). The lag is :math:`\ell`, as in lesson 02."""
    if not 2 <= steps <= 6:
        raise ValueError(f"steps = {steps}: draw between 2 and 6 steps so the labels stay readable.")
    fig, ax = _figure(10, 4.6)
    x0, x1 = 1.6, 9.4
    xs = np.linspace(x0, x1, steps)

    def name(k):
        return "t" if k == 0 else f"t-{k}"

    for row, (y, color, state, op, label) in enumerate(
            [(3.0, RED, "c", lambda k: rf"$\times f_{{{name(k)}}}$", "LSTM: the cell path"),
             (1.3, GREY, "h", lambda k: r"$U^{\top}\,\mathrm{diag}(\tanh')$", "plain RNN: the state")]):
        _say(ax, 0.2, y + 0.62, label, ha="left", color=color if row == 0 else INK)
        for j, x in enumerate(xs):
            k = steps - 1 - j
            _box(ax, x, y, 0.95, 0.55, rf"${state}_{{{name(k)}}}$", color=color)
            if j:
                _arrow(ax, (x - 0.5, y - 0.05), (xs[j - 1] + 0.5, y - 0.05), color=color, lw=2.5)
                mid = (x + xs[j - 1]) / 2
                _say(ax, mid, y - 0.55, op(k), size=SMALL if row else FS, color=color)
    _say(ax, 5.0, 4.25, r"$\partial c_t / \partial c_{t-\ell} = f_t\, f_{t-1} \cdots f_{t-\ell+1}$: near 1 while the "
         r"forget gates stay open", color=RED)
    _say(ax, 5.0, 0.3, r"$\partial h_t / \partial h_{t-\ell}$: $\ell$ matrix products, which shrink (or explode) with "
         r"the lag $\ell$")
    return fig


# ---------------------------------------------------------------------------------------------- 03: dropout

def dropout_masks(p: float = 0.5, steps: int = 10, units: int = 6, seed: int = 3):
    r"""What one draw of the dropout mask covers, over the steps of one sequence (dark: dropped): a fresh mask
    per step (standard), one entry per word type (embedding dropout: a word dropped at every occurrence),
    one mask for the whole sequence (locked), one mask on :math:`W_{hh}` (weight drop)."""
    from matplotlib.colors import ListedColormap

    if not 0 < p < 1:
        raise ValueError(f"p = {p}: a dropout rate lies strictly between 0 and 1.")
    rng = np.random.RandomState(seed)
    words = "the market fell the market rose".split()
    fig = _blank(10, 6)
    grid = fig.add_gridspec(2, 2, left=0.08, right=0.98, bottom=0.09, top=0.86, hspace=0.55, wspace=0.2)
    cmap = ListedColormap(["#333333", "#FFFFFF"])  # 0 dropped, 1 kept
    kept = lambda shape: (rng.random_sample(shape) >= p).astype(float)  # noqa: E731
    by_type = {"the": 1.0, "market": 0.0, "fell": 1.0, "rose": 1.0}  # "market" dropped at both its occurrences
    panels = [
        ("standard: a fresh mask every step", kept((units, steps)), "step $t$", "unit of $h_t$", None),
        ("embedding dropout: whole word types", np.tile([by_type[w] for w in words], (units, 1)), "",
         "coordinate of $e_w$", words),
        ("locked: one mask for the sequence", np.tile(kept((units, 1)), (1, steps)), "step $t$", "unit of $h_t$",
         None),
        (r"weight drop: one mask on $W_{hh}$, every step", kept((units, units)), "to unit of one gate (of four)",
         r"from unit of $h_{t-1}$", ()),
    ]
    for k, (title, mask, xlabel, ylabel, ticks) in enumerate(panels):
        ax = fig.add_subplot(grid[k // 2, k % 2])
        ax.imshow(mask, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, mask.shape[1]), minor=True)
        ax.set_yticks(np.arange(-0.5, mask.shape[0]), minor=True)
        ax.grid(which="minor", color=GREY, lw=0.8)
        ax.tick_params(which="minor", length=0)
        ax.set_yticks([])
        ax.set_title(title, fontsize=FS, loc="left")
        ax.set_ylabel(ylabel, fontsize=SMALL)
        ax.set_xlabel(xlabel, fontsize=SMALL)
        if ticks is None:
            ax.set_xticks(range(0, mask.shape[1], 3), [str(t + 1) for t in range(0, mask.shape[1], 3)],
                          fontsize=SMALL)
        else:
            ax.set_xticks(range(len(ticks)), ticks, fontsize=SMALL)
    fig.text(0.08, 0.955, f"dark: dropped, with probability $p$ = {p:g}; white: kept, and scaled by $1/(1-p)$",
             fontsize=FS, va="center")
    return fig


# ---------------------------------------------------------------------------------------------- 04: tying

def tied_matrix():
    r"""Weight tying: one :math:`V \times d` matrix :math:`E`, read at the input (one row, the word's vector)
    and scored at the output (every row against :math:`h_t`, the logits :math:`z_t = E h_t + b`)."""
    from matplotlib.patches import Rectangle

    fig, ax = _figure(10, 5.2)
    left, right, bottom, top = 4.3, 5.7, 0.9, 4.5
    rows = np.linspace(bottom, top, 13)
    for y0, y1 in zip(rows, rows[1:]):
        ax.add_patch(Rectangle((left, y0), right - left, y1 - y0, fc=LIGHT[BLUE], ec=BLUE, lw=1.0, zorder=1))
    row = 9  # the word read
    ax.add_patch(Rectangle((left, rows[row]), right - left, rows[row + 1] - rows[row], fc=ORANGE, ec=ORANGE, lw=1.5,
                           zorder=2))
    _say(ax, (left + right) / 2, top + 0.3, r"$E$: $V$ rows, $d$ columns", size=FS)
    ymid = (rows[row] + rows[row + 1]) / 2
    # the input: look up one row
    _box(ax, 1.25, ymid, 1.9, 0.6, r"$x_t$ = market", color=ORANGE)
    _arrow(ax, (2.2, ymid), (left - 0.05, ymid), color=ORANGE, lw=2)
    _say(ax, 3.25, ymid + 0.3, "input: read\none row", size=SMALL, color=ORANGE)
    # the vector goes to the LSTM, the LSTM's output comes back
    _box(ax, 1.25, 1.7, 1.9, 0.7, "LSTM", color=GREY)
    _arrow(ax, (left - 0.05, rows[row] + 0.05), (1.6, 2.08), color=ORANGE, lw=2, rad=-0.25)
    _say(ax, 2.85, 2.55, r"$e_{x_t}$", color=ORANGE)
    _arrow(ax, (2.2, 1.7), (left - 0.05, 1.7), color=BLUE, lw=2)
    _say(ax, 3.25, 2.0, r"$h_t$", color=BLUE)
    # the output: score every row
    _arrow(ax, (right + 0.05, 2.7), (7.4, 2.7), color=BLUE, lw=2)
    _say(ax, 6.55, 3.25, "output: score\nevery row", size=SMALL, color=BLUE)
    _say(ax, 6.55, 2.25, r"$z_t = E\,h_t + b$", size=SMALL, color=BLUE)
    _box(ax, 8.55, 2.7, 2.2, 0.8, "softmax\n" + r"$p(x_{t+1} \mid x_{\leq t})$", color=BLUE, size=SMALL)
    _say(ax, 5.0, 0.35, r"one matrix, two uses ($W = E$): its gradient is the sum of both; $V d$ parameters fewer")
    return fig


# ---------------------------------------------------------------------------------------------- 05: bottleneck

def softmax_bottleneck():
    r"""The factorisation behind the softmax bottleneck: the :math:`N \times V` log-probabilities a softmax
    gives are :math:`H W^\top` (plus a bias and a row shift), a product through :math:`d` dimensions, so of
    rank at most :math:`d + 2`, while the true :math:`A` may have rank up to :math:`\min(N, V)`."""
    from matplotlib.patches import Rectangle

    fig, ax = _figure(10, 4.8)
    y0, y1 = 1.2, 3.8
    ax.add_patch(Rectangle((0.4, y0), 3.2, y1 - y0, fc=LIGHT[RED], ec=RED, lw=1.8))
    _say(ax, 2.0, (y0 + y1) / 2 + 0.25, r"$A$", size=TITLE)
    _say(ax, 2.0, (y0 + y1) / 2 - 0.35, r"$A_{iw} = \log p^*(w \mid i)$", size=SMALL)
    _say(ax, 2.0, y1 + 0.3, r"$N$ contexts $\times$ $V$ words", size=SMALL)
    _say(ax, 4.1, (y0 + y1) / 2, r"$\approx$", size=TITLE + 4)
    ax.add_patch(Rectangle((4.6, y0), 0.6, y1 - y0, fc=LIGHT[BLUE], ec=BLUE, lw=1.8))
    _say(ax, 4.9, (y0 + y1) / 2, r"$H$", size=TITLE)
    _say(ax, 4.9, y1 + 0.3, r"$N \times d$", size=SMALL)
    _say(ax, 5.6, (y0 + y1) / 2, r"$\times$", size=TITLE)
    ax.add_patch(Rectangle((6.0, y1 - 0.6), 3.2, 0.6, fc=LIGHT[BLUE], ec=BLUE, lw=1.8))
    _say(ax, 7.6, y1 - 0.3, r"$W^{\top}$", size=TITLE)
    _say(ax, 7.6, y1 + 0.3, r"$d \times V$", size=SMALL)
    _say(ax, 7.6, 2.45, "a softmax's log-probabilities:\n" + r"$H W^{\top}$ + a bias + a row shift", size=SMALL,
         color=BLUE)
    _say(ax, 7.6, 1.45, r"rank $\leq d + 2$", color=BLUE)
    _say(ax, 5.0, 0.55, r"when rank $A \gg d$, no $H$ and $W$ get every context right (Yang et al. 2018)")
    return fig


# ---------------------------------------------------------------------------------------------- 06: MoS

def mos_head(K: int = 3):
    r"""The mixture-of-softmaxes head: :math:`K` latent contexts :math:`h_{t,k} = \tanh(W_{h,k} h_t + b_{h,k})`,
    one softmax each over the shared :math:`W`, mixed by the prior :math:`\pi_t = \mathrm{softmax}(W_\pi h_t)`."""
    if not 2 <= K <= 4:
        raise ValueError(f"K = {K}: draw 2 to 4 softmaxes so the boxes stay readable.")
    fig, ax = _figure(10, 5.4)
    ys = np.linspace(4.3, 2.1, K)
    hx, tx, sx, mx = 0.75, 3.0, 6.1, 8.3
    _box(ax, hx, 3.0, 1.1, 0.7, r"$h_t$", color=GREY)
    for k, y in enumerate(ys, start=1):
        kk = str(k) if k < K else "K"
        _box(ax, tx, y, 2.6, 0.6, rf"$\tanh(W_{{h,{kk}}} h_t + b_{{h,{kk}}})$", color=PURPLE, size=SMALL)
        _arrow(ax, (hx + 0.55, 3.0), (tx - 1.32, y), lw=1.4)
        _arrow(ax, (tx + 1.3, y), (sx - 1.12, y), lw=1.4)
        _say(ax, (tx + 1.3 + sx - 1.1) / 2, y + 0.22, rf"$h_{{t,{kk}}}$", size=SMALL)
        _box(ax, sx, y, 2.2, 0.6, rf"softmax$(W h_{{t,{kk}}} + b)$", color=BLUE, size=SMALL)
        _arrow(ax, (sx + 1.1, y), (mx - 0.3, 2.95 + (y - 3.0) * 0.15), lw=1.4)
        _say(ax, sx + 1.2, y + 0.22, rf"$p_{kk}$", size=SMALL, ha="left")
    # the prior
    _box(ax, sx, 1.0, 3.0, 0.6, r"prior $\pi_t = $softmax$(W_\pi h_t)$", color=ORANGE, size=SMALL)
    _arrow(ax, (hx, 2.65), (sx - 1.52, 1.0), lw=1.4, rad=0.25)
    _arrow(ax, (sx + 1.5, 1.0), (mx, 2.72), color=ORANGE, lw=1.8, rad=0.2)
    _say(ax, 8.7, 1.45, r"$\pi_{t,1}, \dots, \pi_{t,K}$", size=SMALL, color=ORANGE, ha="left")
    _node(ax, mx, 3.0, r"$\Sigma$", r=0.3)
    _say(ax, mx + 0.45, 3.0, r"$p(w \mid x_{<t})$", ha="left", size=SMALL)
    _say(ax, 5.0, 5.05, r"$p(w \mid x_{<t}) = \pi_{t,1}\, p_1(w) + \cdots + \pi_{t,K}\, p_K(w)$: the $K$ "
         r"softmaxes share $W$")
    _say(ax, 5.0, 0.25, r"a mixture's log-probabilities are not held to rank $d + 2$ (Yang et al. 2018)", size=SMALL,
         color=GREY)
    return fig


# ---------------------------------------------------------------------------------------------- 07: the cache

def cache_attention(theta: float = 1.0):
    r"""The neural cache as attention: the current state :math:`h_t` against every stored :math:`h_i` of the
    window, weights :math:`a_i = \mathrm{softmax}_i(\theta\, h_t \cdot h_i)`, each copying the word that
    followed, :math:`x_{i+1}`; :math:`p_\text{cache}` mixed with the model's by :math:`\lambda`."""
    fig, ax = _figure(10, 5.6)
    text = "the minister kovalski said that the minister".split()
    past, now = text[:-1], text[-1]
    scores = np.array([0.4, 3.0, 0.3, 0.2, 0.5, 0.9]) * theta  # h_t . h_i: the state after "minister" is alike
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    xs = 1.55 + 1.05 * np.arange(len(past))
    xt = 8.85
    ys, yh, yv, yb = 0.55, 1.55, 2.5, 3.0
    for y, label, color in ((ys, r"$x_i$", GREY), (yh, r"$h_i$", BLUE), (yv, r"$x_{i+1}$", GREEN),
                            (yb + 0.3, r"$a_i$", ORANGE)):
        _say(ax, 0.15, y, label, ha="left", size=FS, color=color)
    for i, (x, word, w) in enumerate(zip(xs, past, weights)):
        _say(ax, x, ys, word, size=SMALL, color=GREY)
        _box(ax, x, yh, 0.8, 0.5, rf"$h_{i + 1}$", color=BLUE, size=SMALL)
        _say(ax, x, yv, text[i + 1], size=SMALL, color=GREEN)
        _rect(ax, x - 0.3, yb, 0.6, 1.5 * w, ORANGE)
        _say(ax, x, yb + 1.5 * w + 0.2, f"{w:.2f}", size=SMALL, color=ORANGE)
    _say(ax, xt, ys, now, size=SMALL, color=INK)
    _box(ax, xt, yh, 0.8, 0.5, r"$h_t$", color=RED, size=SMALL)
    _arrow(ax, (xt - 0.45, yh), (xs[-1] + 0.45, yh), color=RED, lw=1.6)
    _say(ax, (xt + xs[-1]) / 2, yh + 0.45, "against\nevery $h_i$", size=SMALL, color=RED)
    _say(ax, (xt + xs[-1]) / 2, yh - 0.35, r"$\theta\, h_t \cdot h_i$", size=SMALL, color=RED)
    p_cache = {w: float(weights[[j for j in range(len(past)) if text[j + 1] == w]].sum()) for w in set(text[1:])}
    best = max(p_cache, key=p_cache.get)
    _say(ax, xt, 3.9, rf"$p_{{\mathrm{{cache}}}}$({best}) = {p_cache[best]:.2f}", size=SMALL, color=GREEN)
    _say(ax, xt, 3.3, "the $a_i$ of the positions\nfollowed by " + best, size=SMALL, color=GREEN)
    _say(ax, 0.15, 4.85, r"$a_i = \mathrm{softmax}_i(\theta\, h_t \cdot h_i)$ over the window $\omega$", ha="left",
         color=ORANGE)
    _say(ax, 5.0, 5.35, r"$p = (1-\lambda)\, p_{\mathrm{model}} + \lambda\, p_{\mathrm{cache}}$: no training; "
         r"$\theta$, $\lambda$ tuned on validation text; $\omega$ fixed")
    return fig


# ---------------------------------------------------------------------------------------------- 08: dyneval

def dynamic_evaluation(segments: int = 5):
    r"""Dynamic evaluation along a stream: each segment :math:`s_i` is scored with the weights
    :math:`\varphi_{i-1}`, then learned from, :math:`\varphi_i = \varphi_{i-1} - \eta\,\nabla_\varphi
    \mathcal{L}(s_i) + \rho\,(\varphi_0 - \varphi_{i-1})`, the decay pulling back towards :math:`\varphi_0`."""
    if not 3 <= segments <= 6:
        raise ValueError(f"segments = {segments}: draw 3 to 6 segments so the labels stay readable.")
    fig, ax = _figure(10, 5.2)
    x0, x1, ys = 0.9, 9.3, 4.1
    edges = np.linspace(x0, x1, segments + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    width = edges[1] - edges[0]
    _say(ax, x0, ys + 0.6, "the test stream, read once, left to right", ha="left", size=SMALL, color=GREY)
    for i, m in enumerate(mids, start=1):
        _box(ax, m, ys, width - 0.08, 0.6, rf"$s_{i}$", color=BLUE)
    # the weights under the stream: phi_{i-1} scores s_i; after it, one step gives phi_i
    drift = 1.0 - np.exp(-np.arange(segments + 1) / 2.0)  # how far the weights have moved: saturates under the pull
    yw = 1.55 + 0.9 * drift
    for i in range(segments + 1):
        x = edges[i]
        _node(ax, x, yw[i], rf"$\varphi_{i}$", r=0.3, size=SMALL, color=GREEN)
        if i < segments:
            _arrow(ax, (x + 0.25, yw[i] + 0.2), (mids[i] - 0.1, ys - 0.32), color=BLUE, lw=1.4)
            _arrow(ax, (x + 0.32, yw[i]), (edges[i + 1] - 0.32, yw[i + 1]), color=GREEN, lw=1.8)
    for i in range(segments):  # the segment's gradient drives the step after it
        ystep = (yw[i] + yw[i + 1]) / 2 + 0.12
        _arrow(ax, (mids[i] + 0.35, ys - 0.32), (mids[i] + 0.35, ystep + 0.12), color=GREEN, lw=1.3, ls="--")
    _say(ax, mids[0] - 0.45, 3.0, "score", size=SMALL, color=BLUE, ha="right")
    _say(ax, mids[0] + 0.5, 3.0, r"$\nabla_\varphi \mathcal{L}(s_1)$", size=SMALL, color=GREEN, ha="left")
    _say(ax, mids[0] + 0.1, (yw[0] + yw[1]) / 2 - 0.3, "step", size=SMALL, color=GREEN, ha="left", va="top")
    _line(ax, [x0 - 0.4, x1 + 0.3], [1.55, 1.55], color=GREY, ls="--", lw=1.4)
    _say(ax, x1 + 0.3, 1.3, r"$\varphi_0$: the trained weights", ha="right", size=SMALL, color=GREY)
    for i in range(2, segments + 1):
        _arrow(ax, (edges[i] + 0.12, yw[i] - 0.32), (edges[i] + 0.12, 1.6), color=ORANGE, lw=1.3, head=9)
    _say(ax, edges[2] + 0.25, 1.85, r"$\rho$ pulls back", ha="left", size=SMALL, color=ORANGE)
    _say(ax, 5.0, 0.55, r"$\varphi_i = \varphi_{i-1} - \eta\, \nabla_\varphi \mathcal{L}(s_i) + "
         r"\rho\,(\varphi_0 - \varphi_{i-1})$:  score $s_i$ first, then step")
    return fig


# ---------------------------------------------------------------------------------------------- 09: the ladder

LADDER = ("KN5", "LSTM", "+ dropouts", "+ tying", "AWD recipe", "MoS", "+ cache", "+ dynamic evaluation")
_KIND = {"KN5": ("counted", GREY), "+ cache": ("at test time", GREEN), "+ dynamic evaluation": ("at test time", GREEN)}


def ladder(values: Optional[Mapping[str, float]] = None, rungs: Sequence[str] = LADDER, unit: str = "test perplexity"):
    """The ladder of lesson 09, one step per rung, from the counted KN5 through the trained models to what is
    added at test time. With ``values`` (rung -> perplexity, lower is better) each step stands at its number,
    labelled with it and with its change on the rung before (:func:`lmcourse.course.notation.change`);
    without, the steps are drawn evenly as a map of the lesson."""

    rungs = list(rungs)
    if not 2 <= len(rungs) <= 9:
        raise ValueError(f"{len(rungs)} rungs: draw 2 to 9 so the names stay readable.")
    if values is not None:
        missing = [r for r in rungs if r not in values]
        if missing:
            raise ValueError(f"no value for the rungs {missing}: give a perplexity for every rung, or none.")
    fig, ax = _figure(10, 5.4)
    n = len(rungs)
    x0, x1, low, high = 0.5, 9.5, 1.3, 4.4
    width = (x1 - x0) / n
    if values is None:
        heights = np.linspace(high, low + 0.4, n)
    else:
        v = np.log([float(values[r]) for r in rungs])
        span = max(v.max() - v.min(), 1e-9)
        heights = low + 0.25 + (v - v.min()) / span * (high - low - 0.25)
    for j, (rung, h) in enumerate(zip(rungs, heights)):
        kind, color = _KIND.get(rung, ("trained", BLUE if rung != "MoS" else PURPLE))
        x = x0 + j * width
        _rect(ax, x + 0.05, low, width - 0.1, h - low, LIGHT[color], color, lw=1.6)
        name = rung.replace("+ dynamic evaluation", "+ dynamic\nevaluation").replace("AWD recipe", "AWD\nrecipe")
        name = name.replace("+ dropouts", "+ drop-\nouts")
        _say(ax, x + width / 2, low - 0.1, name, size=SMALL, va="top")
        if values is not None:
            label = f"{float(values[rung]):.1f}"
            if j:
                label += "\n" + change(values[rung], values[rungs[j - 1]])
            _say(ax, x + width / 2, h + 0.08, label, size=SMALL, va="bottom")
    legend = [("counted", GREY), ("trained", BLUE), ("new head", PURPLE), ("at test time", GREEN)]
    for k, (kind, color) in enumerate(legend):
        x = 4.75 + k * 1.3
        _rect(ax, x, 5.05, 0.22, 0.22, LIGHT[color], color)
        _say(ax, x + 0.3, 5.16, kind, size=SMALL, ha="left")
    _say(ax, x0, 5.16, unit + (" (log scale): lower is better" if values is not None else ", rung by rung"),
         ha="left", size=FS)
    return fig


# ---------------------------------------------------------------------------------------------- 10: attention

def attention_block(T: int = 5):
    r"""Causal self-attention: the inputs :math:`X` projected to queries, keys and values; the scores
    :math:`\mathbf{Q}\mathbf{K}^\top/\sqrt{d_k}` with the causal mask :math:`M` added (:math:`-\infty` above the
    diagonal), a softmax by row, the weighted sum of the values; heads side by side, joined by :math:`W_O`."""
    if not 3 <= T <= 7:
        raise ValueError(f"T = {T}: draw 3 to 7 positions so the grid stays readable.")
    from matplotlib.colors import to_rgba

    fig, ax = _figure(10, 5.6)
    # the inputs
    _rect(ax, 0.35, 1.4, 0.7, 3.0, LIGHT[GREY], GREY, lw=1.6)
    for y in np.linspace(1.4, 4.4, T + 1)[1:-1]:
        _line(ax, [0.35, 1.05], [y, y], color=GREY, lw=1)
    _say(ax, 0.7, 4.7, r"$X$", size=FS)
    _say(ax, 0.7, 1.1, r"$T \times d_{\mathrm{model}}$", size=SMALL)
    for text, y, color in ((r"$\mathbf{Q} = X W_Q$", 4.4, RED), (r"$\mathbf{K} = X W_K$", 3.1, BLUE),
                           (r"$\mathbf{V} = X W_V$", 1.2, GREEN)):
        _box(ax, 2.45, y, 1.75, 0.6, text, color=color, size=SMALL)
        _arrow(ax, (1.1, 2.9), (1.55, y), lw=1.3)
    # the scores, masked: row t (a query) reads the columns i <= t (the keys)
    gx, gy, cell = 4.3, 1.85, 0.45
    rng = np.random.RandomState(4)
    for t in range(T):
        w = np.exp(rng.normal(size=t + 1))
        w /= w.sum()
        y = gy + (T - 1 - t) * cell
        for i in range(T):
            fill = to_rgba(ORANGE, 0.12 + 0.88 * w[i]) if i <= t else "#D0D0D0"  # darker: more weight
            _rect(ax, gx + i * cell, y, cell, cell, fill, "white", lw=1.2)
    _say(ax, gx + (T - 0.5) * cell, gy + (T - 0.5) * cell, r"$-\infty$", size=SMALL)
    _say(ax, gx + T * cell / 2, gy + T * cell + 0.62, r"softmax$(\mathbf{Q}\mathbf{K}^{\top}/\sqrt{d_k} + M)$",
         size=SMALL)
    _say(ax, gx + T * cell / 2, gy + T * cell + 0.25, r"row $t$ reads the keys $i \leq t$", size=SMALL, color=GREY)
    _arrow(ax, (3.35, 4.4), (gx - 0.05, gy + T * cell - 0.25), color=RED, lw=1.3)
    _arrow(ax, (3.35, 3.1), (gx - 0.05, gy + T * cell / 2 - 0.2), color=BLUE, lw=1.3)
    # weights times values, one head of several, joined
    hx = 7.6
    for k, offset in enumerate((0.2, 0.1, 0.0)):
        _box(ax, hx + offset, 3.0 + offset, 1.3, 0.9, "" if k < 2 else r"$\times\ \mathbf{V}$" + "\none head",
             color=PURPLE, size=SMALL, zorder=2 + 2 * k)
    _arrow(ax, (gx + T * cell + 0.05, 3.0), (hx - 0.68, 3.0), lw=1.3)
    _arrow(ax, (3.35, 1.2), (hx, 2.52), color=GREEN, lw=1.3, rad=0.2)
    _say(ax, hx + 0.1, 4.1, r"heads of width $d_k$", size=SMALL, color=PURPLE)
    _box(ax, 9.35, 3.0, 1.05, 0.7, r"join: $W_O$", color=GREY, size=SMALL)
    _arrow(ax, (hx + 0.87, 3.0), (8.8, 3.0), lw=1.3)
    _arrow(ax, (9.35, 3.37), (9.35, 4.4), lw=1.3)
    _say(ax, 9.35, 4.65, r"$Y$", size=FS)
    _say(ax, 5.0, 0.4, "the cache with learned queries, keys and values: the mask $M$ keeps it a language model")
    return fig


# ---------------------------------------------------------------------------------------------- the list

DIAGRAMS: dict[str, tuple[Callable, str, str]] = {
    "kn_backoff": (kn_backoff, "01", "interpolated Kneser-Ney: counts, then gamma times the shorter history"),
    "lstm_cell": (lstm_cell, "02, 02b", "the LSTM cell and its gradient path through c_t"),
    "gradient_path": (gradient_path, "02", "the gradient back through time: a product of forget gates"),
    "dropout_masks": (dropout_masks, "03", "the four dropout masks over time"),
    "tied_matrix": (tied_matrix, "04", "one V x d matrix at the input and the output"),
    "softmax_bottleneck": (softmax_bottleneck, "05", "A = H W^T: N x V through d"),
    "mos_head": (mos_head, "06", "K softmaxes from tanh projections, mixed by a prior"),
    "cache_attention": (cache_attention, "07", "the cache as attention over past states"),
    "dynamic_evaluation": (dynamic_evaluation, "08", "segments, a step after each, the pull back to phi_0"),
    "ladder": (ladder, "09", "the rungs from KN5 to dynamic evaluation"),
    "attention_block": (attention_block, "10", "queries, keys, values, the causal mask, the heads"),
}


# ---------------------------------------------------------------------------------------------- checks

def _undrawn_tick_labels(fig) -> set:
    """The tick labels matplotlib keeps but does not draw: those of ticks outside their axis's view (a
    locator places a tick or two past each end of a plot's range, and only the ticks within it are drawn)."""
    undrawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not lo - slack <= loc <= hi + slack:
                    undrawn.update((id(tick.label1), id(tick.label2)))
    return undrawn


def _texts(fig):
    """The texts a reader sees: visible, not empty, and no tick label of a tick outside its axis's view, or of an
    axis switched off (matplotlib keeps those labels, placed off the axes, but does not draw them)."""
    from matplotlib.text import Text

    undrawn = _undrawn_tick_labels(fig)
    for ax in fig.axes:  # an axis switched off draws none of its tick labels
        for axis in (ax.xaxis, ax.yaxis):
            if not (ax.axison and axis.get_visible()):
                undrawn.update(id(label) for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                               for label in (tick.label1, tick.label2))
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in undrawn]


def _scale(fig, shown_width: Optional[float]) -> float:
    """How much smaller than its own size the figure shows: 1 when it fits ``shown_width`` inches."""
    width = fig.get_figwidth()
    return min(1.0, (shown_width or MAX_SIZE[0]) / width)


def small_text(fig, min_points: float = MIN_POINTS, shown_width: Optional[float] = None) -> list[tuple[str, float]]:
    """Each visible text of ``fig`` smaller than ``min_points`` at the size the figure shows (its own size,
    or scaled down to ``shown_width`` inches when wider), as ``(text, points shown)``."""
    scale = _scale(fig, shown_width)
    return [(t.get_text(), round(t.get_fontsize() * scale, 1)) for t in _texts(fig)
            if t.get_fontsize() * scale < min_points - 1e-9]


def _extents(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t, t.get_window_extent(renderer)) for t in _texts(fig)]


def outside_text(fig, tolerance_px: float = 1.0) -> list[str]:
    """The texts that leave the figure (cut off when it is shown)."""
    w, h = fig.get_figwidth() * fig.dpi, fig.get_figheight() * fig.dpi
    return [t.get_text() for t, e in _extents(fig)
            if e.x0 < -tolerance_px or e.y0 < -tolerance_px or e.x1 > w + tolerance_px or e.y1 > h + tolerance_px]


def overlapping_text(fig, tolerance_px: float = 1.0) -> list[tuple[str, str]]:
    """The pairs of texts that cover each other."""
    boxes = _extents(fig)
    pairs = []
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            (ta, ea), (tb, eb) = boxes[a], boxes[b]
            if (min(ea.x1, eb.x1) - max(ea.x0, eb.x0) > tolerance_px
                    and min(ea.y1, eb.y1) - max(ea.y0, eb.y0) > tolerance_px):
                pairs.append((ta.get_text(), tb.get_text()))
    return pairs


def problems(fig, min_points: float = MIN_POINTS, shown_width: Optional[float] = None) -> list[str]:
    """What keeps ``fig`` from a projector, one sentence each (empty: none): larger than :data:`MAX_SIZE`,
    text under ``min_points`` where it shows, text cut off by the figure's edge or covering other text."""
    found = []
    w, h = fig.get_figwidth(), fig.get_figheight()
    if w > MAX_SIZE[0] + 1e-9 or h > MAX_SIZE[1] + 1e-9:
        found.append(f"the figure is {w:g} x {h:g} in, larger than {MAX_SIZE[0]:g} x {MAX_SIZE[1]:g}: it is shrunk "
                     "to fit the column and the slide, and its text with it.")
    for text, points in small_text(fig, min_points, shown_width):
        found.append(f"{text!r} shows at {points:g} pt, under {min_points:g}.")
    for text in outside_text(fig):
        found.append(f"{text!r} leaves the figure.")
    for a, b in overlapping_text(fig):
        found.append(f"{a!r} covers {b!r}.")
    return found


def png(fig) -> bytes:
    """The figure as PNG bytes, at its own size (100 pixels an inch)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi)
    return buffer.getvalue()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.course.diagrams", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="diagrams", help="the folder for the PNGs (default: diagrams)")
    parser.add_argument("names", nargs="*", help=f"diagrams to draw (default: all): {', '.join(DIAGRAMS)}")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DIAGRAMS]
    if unknown:
        print(f"error: no diagram {unknown[0]!r}: choose among {', '.join(DIAGRAMS)}.", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in args.names or DIAGRAMS:
        fig = DIAGRAMS[name][0]()
        atomic_write(out / f"{name}.png", png(fig))
        found = problems(fig)
        status |= bool(found)
        print(f"{name + '.png':<26} {'ok' if not found else '; '.join(found)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
