r"""An explorer for the neural cache's attention: where does position ``t`` look, and does it pay?

For a position :math:`t` of a scored stream it shows

- the text before :math:`t`, each earlier token :math:`x_{i+1}` shaded by the attention weight
  :math:`a_i = \operatorname{softmax}_i(\theta\, h_t \cdot h_i)` of the state :math:`h_i` it followed
  (:math:`h_i` has read :math:`x_1, \dots, x_i`; the weight lands on the token after it, which is what
  the cache would predict again);
- the largest contributions, and the cache's probability per word (the weights summed by word);
- the target :math:`x_{t+1}` (the word :math:`h_t` predicts: row ``t`` of the stream) and its probability
  under the model, under the cache and mixed,
  :math:`p = (1-\lambda)\, p_{\text{vocab}} + \lambda\, p_{\text{cache}}`.

:meth:`CacheExplorer.widget` adds a box for :math:`t` that steps one position at a time, buttons that
jump to the previous or next interesting position (where the cache changes the target's probability
most, either way) and to the positions where it helps most and hurts most (skipping document
openings, where the cache still holds the previous document), and sliders for :math:`\theta` and
:math:`\lambda`. Everything is drawn as HTML with inline styles, so it looks the same in the widget,
in a saved page (the widget's output carries the first view as its static copy) and on the course
site; :meth:`CacheExplorer.figure` draws the attention against distance with matplotlib.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

import torch

from ..adapt.cache import attention, check_lam, check_theta, check_window
from ..adapt.cache_tuning import CacheInputs, cache_scores
from .fallback import WithFallback

SHADE = (230, 120, 0)  # the attention colour, as RGB
TARGET = "#1f5fbf"  # the colour that marks the target and its earlier occurrences
THETA_FLOOR = 0.01  # the theta slider's smallest value (a log slider cannot reach 0)


@dataclass
class View:
    """What the explorer shows at one position."""

    t: int
    target: str
    positions: torch.Tensor  # (n,) the stored positions i
    weights: torch.Tensor  # (n,) their attention weights a_i
    p_model: float
    p_cache: float
    p_mixed: float

    @property
    def gain(self) -> float:
        """:math:`\\log p_{\\text{mixed}} - \\log p_{\\text{model}}` in nats (positive: the cache helps)."""
        return math.log(self.p_mixed) - math.log(self.p_model) if self.p_mixed > 0 else -math.inf


class CacheExplorer:
    """The attention explorer over a stream scored once by :func:`lmcourse.adapt.cache_tuning.collect`."""

    def __init__(self, inputs: CacheInputs, vocab, theta: float, lam: float, window: int,
                 context: int = 120, top: int = 8, opening: int = 20):
        if len(inputs) < 2:
            raise ValueError("The explorer needs a stream of at least two positions: collect more text.")
        self.inputs, self.vocab = inputs.to("cpu"), vocab  # one position at a time: the CPU is quickest
        self.theta, self.lam, self.window = check_theta(theta), check_lam(lam), check_window(window)
        self.context, self.top = check_window(context, "context"), check_window(top, "top")
        if isinstance(opening, bool) or not isinstance(opening, int) or opening < 0:
            raise ValueError(f"opening must be a number of positions >= 0, got {opening!r}.")
        self.opening = opening
        self._gains: dict = {}

    # ------------------------------------------------------------------------- the numbers

    def word(self, i: int) -> str:
        return self.vocab.itos[int(self.inputs.targets[i])]

    def view(self, t: int, theta: float | None = None, lam: float | None = None) -> View:
        """The attention at position ``t`` (with the explorer's theta and lam unless given)."""
        theta = self.theta if theta is None else check_theta(theta)
        lam = self.lam if lam is None else check_lam(lam)
        t = int(t)
        i, a = attention(self.inputs.hidden, t, theta, self.window)
        i, a = i.cpu(), a.double().cpu()
        p_model = math.exp(float(self.inputs.log_p[t]))
        hit = self.inputs.targets.cpu()[i] == self.inputs.targets[t].cpu()
        p_cache = float(a[hit].sum()) if len(i) else 0.0
        p_mixed = (1 - lam) * p_model + lam * p_cache if len(i) else p_model
        return View(t, self.word(t), i, a, p_model, p_cache, p_mixed)

    def gains(self, theta: float | None = None, lam: float | None = None) -> torch.Tensor:  # (T,)
        """Per position, :math:`\\log p_{\\text{mixed}} - \\log p_{\\text{model}}`, all positions at once."""
        theta = self.theta if theta is None else check_theta(theta)
        lam = self.lam if lam is None else check_lam(lam)
        key = (theta, lam)
        if key not in self._gains:
            mixed = cache_scores(self.inputs, theta, self.window, lam=lam, progress=False)
            self._gains = {key: mixed - self.inputs.log_p.double().cpu()}
        return self._gains[key]

    def openings(self) -> torch.Tensor:  # (T,) bool
        """Document openings: a ``<doc>`` target and the ``opening`` positions after it.

        There the cache still holds the previous document, so a loss says nothing about the cache."""
        T = len(self.inputs)
        doc = self.vocab.stoi.get("<doc>") if hasattr(self.vocab, "stoi") else None
        mask = torch.zeros(T, dtype=torch.bool)
        if doc is None:
            return mask
        starts = (self.inputs.targets.cpu() == doc).nonzero().view(-1)
        for k in range(self.opening + 1):
            mask[(starts + k).clamp_max(T - 1)] = True
        return mask

    def extremes(self, k: int = 20, theta: float | None = None, lam: float | None = None):
        """(positions where the cache helps most, positions where it hurts most), ``k`` of each.

        Document openings (:meth:`openings`) are left out of the second list."""
        g = self.gains(theta, lam)
        k = min(k, len(g))
        hurt = (-g).masked_fill(self.openings(), -math.inf)
        hurts = hurt.topk(min(k, int(torch.isfinite(hurt).sum()))).indices.tolist()
        return g.topk(k).indices.tolist(), hurts

    def interesting(self, k: int = 50, theta: float | None = None, lam: float | None = None) -> list[int]:
        """The ``k`` positions where the cache helps most and the ``k`` where it hurts most, in text order."""
        helps, hurts = self.extremes(k, theta, lam)
        return sorted(set(helps) | set(hurts))

    def by_word(self, v: View) -> list[tuple[str, float]]:
        """The cache's probability of each word it points at, largest first: :math:`p_{\\text{cache}}(w)`."""
        if not len(v.positions):
            return []
        ids = self.inputs.targets.cpu()[v.positions]
        mass = torch.zeros(len(self.vocab), dtype=torch.float64).index_add_(0, ids, v.weights)
        top = mass.topk(min(self.top, int((mass > 0).sum())))
        return [(self.vocab.itos[int(w)], float(p)) for p, w in zip(top.values, top.indices)]

    # ------------------------------------------------------------------------------ drawing

    def html(self, t: int, theta: float | None = None, lam: float | None = None) -> str:
        """The view at ``t`` as an HTML fragment with inline styles: the text before ``t`` shaded by attention
        (scaled to the largest weight shown), the target's earlier occurrences underlined, its three
        probabilities, and two titled tables."""
        v = self.view(t, theta, lam)
        lam = self.lam if lam is None else lam
        weight = dict(zip(v.positions.tolist(), v.weights.tolist()))
        first = max(0, t - self.context)
        shown = [weight.get(i, 0.0) for i in range(first, t)]
        scale = max(shown, default=0.0) or 1.0
        target_id = int(self.inputs.targets[t])
        ids = self.inputs.targets.cpu()
        words, seen = [], 0
        for i, a in zip(range(first, t), shown):
            w = html.escape(self.word(i))
            style = f"background: rgba({SHADE[0]}, {SHADE[1]}, {SHADE[2]}, {a / scale:.3f}); padding: 0 2px"
            if int(ids[i]) == target_id:
                seen += 1
                style += f"; border-bottom: 3px solid {TARGET}; font-weight: bold"
            words.append(f'<span title="t - i = {t - i}, a = {a:.4f}" style="{style}">{w}</span>')
            if self.word(i) == "<eos>":
                words.append("<br>")
        target = html.escape(v.target)
        words.append(f'<span style="border: 2px solid {TARGET}; padding: 0 3px"><b>{target}</b></span> ?')
        colour = "#1a7f37" if v.gain >= 0 else "#b42318"
        head = (f"<b>position {t:,}</b>, target <b>{target}</b>: p<sub>model</sub> = {v.p_model:.3g}, "
                f"p<sub>cache</sub> = {v.p_cache:.3g}, mixed (&lambda; = {lam:.2f}) = {v.p_mixed:.3g} "
                f'<span style="color: {colour}">({v.gain:+.2f} nats)</span>')
        key = (f'<span style="background: rgba({SHADE[0]}, {SHADE[1]}, {SHADE[2]}, 1.0); padding: 0 4px">&nbsp;</span> '
               f"darkest = a<sub>i</sub> of {scale:.4f}, the largest weight among the {t - first:,} words shown "
               f"(of {len(v.positions):,} stored); "
               f'<span style="border-bottom: 3px solid {TARGET}; font-weight: bold">{target}</span> = an earlier '
               f"occurrence of the target ({seen} shown; the cache gives the target the sum of their weights)")
        order = v.weights.argsort(descending=True)[:self.top].tolist()
        rows = [(t - int(v.positions[k]), self.word(int(v.positions[k])), float(v.weights[k])) for k in order]
        strongest = _table(f"The {len(rows)} strongest attention weights", ["t − i", "word x<sub>i</sub>",
                           "a<sub>i</sub>"], [(f"{back:,}", w, f"{a:.4f}") for back, w, a in rows],
                           marked=[w == v.target for _, w, _ in rows])
        per_word = self.by_word(v)
        by_word = _table("p<sub>cache</sub>(w): the weights summed by word", ["word w", "p<sub>cache</sub>(w)"],
                         [(w, f"{p:.4f}") for w, p in per_word], marked=[w == v.target for w, _ in per_word])
        return (f'<div style="font-family: sans-serif; font-size: 13px; line-height: 1.7">{head}<br>'
                f'<div style="font-family: monospace; margin: 6px 0">{" ".join(words)}</div>'
                f'<div style="font-size: 12px; color: #444">{key}</div>'
                f'<div style="display: flex; gap: 40px; align-items: flex-start; margin-top: 8px">{strongest}{by_word}'
                f"</div></div>")

    def figure(self, t: int, theta: float | None = None, lam: float | None = None):
        """The view at ``t`` with matplotlib: attention against distance, and the three probabilities."""
        import matplotlib.pyplot as plt

        v = self.view(t, theta, lam)
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw=dict(width_ratios=[3, 1]))
        dist = (t - v.positions).numpy()
        hit = (self.inputs.targets.cpu()[v.positions] == self.inputs.targets[t].cpu()).numpy()
        ax.vlines(dist[~hit], 0, v.weights.numpy()[~hit], color="0.6", lw=1, label="another word")
        ax.vlines(dist[hit], 0, v.weights.numpy()[hit], color="tab:orange", lw=2, label=f"the target '{v.target}'")
        for k in v.weights.argsort(descending=True)[:4].tolist():
            ax.annotate(self.word(int(v.positions[k])), (dist[k], float(v.weights[k])), fontsize=10,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("distance t - i (positions back)")
        ax.set_ylabel("attention weight $a_i$")
        ax.set_title(f"position {t:,}: where the cache looks", fontsize=11)
        ax.legend(fontsize=10)
        names = ["model", "cache", "mixed"]
        probs = [v.p_model, v.p_cache, v.p_mixed]
        floor = min([1e-6] + [p / 3 for p in probs if p > 0])             # a log axis: tiny model odds stay visible
        bx.bar(names, [max(p, floor) for p in probs], color=["tab:blue", "tab:orange", "tab:green"])
        for k, p in enumerate(probs):
            bx.text(k, max(p, floor), f"{p:.2g}", ha="center", va="bottom", fontsize=10)
        bx.set_yscale("log")
        bx.set_ylim(floor, 1)
        bx.set_title(f"p('{v.target}'), log scale", fontsize=11)
        fig.tight_layout()
        return fig

    def widget(self, t: int | None = None, theta_max: float = 3.0) -> WithFallback:
        """A box for t (steps of one), jumps between interesting positions, sliders for theta and lam.

        Returned with the first view as its static copy in the same output (``.widget`` is the box);
        the controls are also kept in ``self.controls`` (a dict)."""
        import ipywidgets as w

        helps = self.extremes(1)[0]
        t0 = (helps[0] if helps else 1) if t is None else int(t)
        last = len(self.inputs) - 1
        t_box = w.BoundedIntText(value=t0, min=1, max=last, step=1, description="t",
                                 layout=w.Layout(width="190px"))
        button = lambda text, tip: w.Button(description=text, tooltip=tip, layout=w.Layout(width="auto"))
        back, forward = button("◀ t − 1", "one position back"), button("t + 1 ▶", "one position on")
        previous, following = (button("◀◀ previous", "the previous position where the cache matters most"),
                               button("next ▶▶", "the next position where the cache matters most"))
        best, worst = button("cache helps most", "repeat: the next best"), button("cache hurts most", "repeat: "
                                                                                   "the next worst")
        # theta on a log scale (the course's grid spans 3 to 10,000): one arrow key multiplies it by 10^0.1
        top = math.log10(max(theta_max, self.theta, THETA_FLOOR) * 3)
        theta = w.FloatLogSlider(value=max(self.theta, THETA_FLOOR), base=10, min=math.log10(THETA_FLOOR), max=top,
                                 step=0.1, description="theta", readout_format=".4g", continuous_update=False)
        lam = w.FloatSlider(value=self.lam, min=0.0, max=1.0, step=0.01, description="lambda",
                            continuous_update=False)
        out = w.HTML()
        clicks = {"helps": 0, "hurts": 0}

        def redraw(_=None):
            out.value = self.html(t_box.value, theta.value, lam.value)

        def move(step):
            def go(_):
                t_box.value = min(max(t_box.value + step, 1), last)
            return go

        def hop(direction):
            def go(_):
                marks = [p for p in self.interesting(50, theta.value, lam.value) if p >= 1]
                ahead = [p for p in marks if p > t_box.value] if direction > 0 else \
                        [p for p in marks if p < t_box.value][::-1]
                if ahead:
                    t_box.value = ahead[0]
            return go

        def jump(kind):
            def go(_):
                ranked = self.extremes(20, theta.value, lam.value)[kind == "hurts"]
                if ranked:
                    t_box.value = max(ranked[clicks[kind] % len(ranked)], 1)  # each click: the next one
                    clicks[kind] += 1
            return go

        for control in (t_box, theta, lam):
            control.observe(redraw, names="value")
        back.on_click(move(-1))
        forward.on_click(move(1))
        previous.on_click(hop(-1))
        following.on_click(hop(1))
        best.on_click(jump("helps"))
        worst.on_click(jump("hurts"))
        redraw()
        self.controls = dict(t=t_box, back=back, forward=forward, previous=previous, next=following, helps=best,
                             hurts=worst, theta=theta, lam=lam, out=out)
        box = w.VBox([w.HBox([t_box, back, forward, previous, following]), w.HBox([best, worst]),
                      w.HBox([theta, lam]), out])
        return WithFallback(box, html=out.value,
                            text=f"(the attention explorer at position {t0:,}: it moves with a running kernel)")


def _table(title: str, heads: list, rows: list, marked: list) -> str:
    """A small table with a title and inline styles (it keeps its look inside a widget)."""
    cell = "padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: right"
    head = "".join(f'<th style="{cell}; border-bottom: 2px solid #888; background: #f3f3f3">{h}</th>' for h in heads)
    body = "".join("<tr>" + "".join(f'<td style="{cell}{"; color: " + TARGET + "; font-weight: bold" if m else ""}">'
                                    f"{html.escape(str(x))}</td>" for x in row) + "</tr>" for row, m in zip(rows, marked))
    return (f'<table style="border-collapse: collapse; font-size: 12px">'
            f'<caption style="caption-side: top; text-align: left; font-weight: bold; padding-bottom: 4px; white-space: nowrap">'
            f"{title}"
            f"</caption><tr>{head}</tr>{body}</table>")
