r"""An explorer for the neural cache's attention: where does position ``t`` look, and does it pay?

For a position :math:`t` of a scored stream it shows

- the text before :math:`t`, each earlier token :math:`x_i` shaded by its attention weight
  :math:`a_i = \operatorname{softmax}_i(\theta\, h_t \cdot h_i)` (the weight lands on the token the
  stored state was followed by, which is what the cache would predict again);
- the largest contributions, and the cache's probability per word (the weights summed by word);
- the target :math:`x_t` and its probability under the model, under the cache and mixed,
  :math:`p = (1-\lambda)\, p_{\text{vocab}} + \lambda\, p_{\text{cache}}`.

:meth:`CacheExplorer.widget` adds a slider for :math:`t`, sliders for :math:`\theta` and
:math:`\lambda`, and buttons that jump to the positions where the cache helps most and hurts most.
Everything is drawn as HTML by ipywidgets in the browser; :meth:`CacheExplorer.figure` draws the
same view with matplotlib, for a page read without a running kernel.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

import torch

from ..adapt.cache import attention, check_lam, check_theta, check_window
from ..adapt.cache_tuning import CacheInputs, cache_scores


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
                 context: int = 120, top: int = 8):
        if len(inputs) < 2:
            raise ValueError("The explorer needs a stream of at least two positions: collect more text.")
        self.inputs, self.vocab = inputs.to("cpu"), vocab  # one position at a time: the CPU is quickest
        self.theta, self.lam, self.window = check_theta(theta), check_lam(lam), check_window(window)
        self.context, self.top = check_window(context, "context"), check_window(top, "top")
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

    def extremes(self, k: int = 20, theta: float | None = None, lam: float | None = None):
        """(positions where the cache helps most, positions where it hurts most), ``k`` of each."""
        g = self.gains(theta, lam)
        k = min(k, len(g))
        return g.topk(k).indices.tolist(), (-g).topk(k).indices.tolist()

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
        """The view at ``t`` as an HTML fragment: shaded text, the target's three probabilities, tables."""
        v = self.view(t, theta, lam)
        lam = self.lam if lam is None else lam
        weight = dict(zip(v.positions.tolist(), v.weights.tolist()))
        scale = max(weight.values(), default=1.0) or 1.0
        words = []
        for i in range(max(0, t - self.context), t):
            w = html.escape(self.word(i))
            a = weight.get(i, 0.0)
            style = f"background: rgba(230, 120, 0, {a / scale:.3f}); padding: 0 2px; border-radius: 3px"
            words.append(f'<span title="a = {a:.4f}" style="{style}">{w}</span>')
            if self.word(i) == "<eos>":
                words.append("<br>")
        target = html.escape(v.target)
        words.append(f'<span style="border: 2px solid #1f5fbf; padding: 0 3px"><b>{target}</b></span> ?')
        colour = "#1a7f37" if v.gain >= 0 else "#b42318"
        head = (f"<b>position {t:,}</b>, target <b>{target}</b>: p<sub>model</sub> = {v.p_model:.3g}, "
                f"p<sub>cache</sub> = {v.p_cache:.3g}, mixed (&lambda; = {lam:.2f}) = {v.p_mixed:.3g} "
                f'<span style="color: {colour}">({v.gain:+.2f} nats)</span>')
        order = v.weights.argsort(descending=True)[:self.top].tolist()
        rows = "".join(f"<tr><td>{t - int(v.positions[k])}</td><td>{html.escape(self.word(int(v.positions[k])))}</td>"
                       f"<td>{float(v.weights[k]):.4f}</td></tr>" for k in order)
        per_word = "".join(f"<tr><td>{html.escape(w)}</td><td>{p:.4f}</td></tr>" for w, p in self.by_word(v))
        shown = min(self.context, t)
        return (f'<div style="font-family: sans-serif; font-size: 13px; line-height: 1.7">{head}<br>'
                f'<div style="font-family: monospace; margin: 6px 0">{" ".join(words)}</div>'
                f'<small>the last {shown:,} of the {len(v.positions):,} stored positions are shown; '
                f'shading = attention weight (darkest = {scale:.4f})</small>'
                f'<div style="display: flex; gap: 40px"><table><tr><th>t - i</th><th>word x<sub>i</sub></th>'
                f'<th>a<sub>i</sub></th></tr>{rows}</table><table><tr><th>word</th><th>p<sub>cache</sub></th></tr>'
                f"{per_word}</table></div></div>")

    def figure(self, t: int, theta: float | None = None, lam: float | None = None):
        """The view at ``t`` with matplotlib: attention against distance, and the three probabilities."""
        import matplotlib.pyplot as plt

        v = self.view(t, theta, lam)
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.2), gridspec_kw=dict(width_ratios=[3, 1]))
        dist = (t - v.positions).numpy()
        hit = (self.inputs.targets.cpu()[v.positions] == self.inputs.targets[t].cpu()).numpy()
        ax.vlines(dist[~hit], 0, v.weights.numpy()[~hit], color="0.6", lw=1, label="another word")
        ax.vlines(dist[hit], 0, v.weights.numpy()[hit], color="tab:orange", lw=2, label=f"the target '{v.target}'")
        for k in v.weights.argsort(descending=True)[:4].tolist():
            ax.annotate(self.word(int(v.positions[k])), (dist[k], float(v.weights[k])), fontsize=8,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("distance t - i (positions back)")
        ax.set_ylabel("attention weight $a_i$")
        ax.set_title(f"position {t:,}: where the cache looks", fontsize=10)
        ax.legend(fontsize=8)
        names = ["model", "cache", "mixed"]
        probs = [v.p_model, v.p_cache, v.p_mixed]
        floor = min([1e-6] + [p / 3 for p in probs if p > 0])             # a log axis: tiny model odds stay visible
        bx.bar(names, [max(p, floor) for p in probs], color=["tab:blue", "tab:orange", "tab:green"])
        for k, p in enumerate(probs):
            bx.text(k, max(p, floor), f"{p:.2g}", ha="center", va="bottom", fontsize=8)
        bx.set_yscale("log")
        bx.set_ylim(floor, 1)
        bx.set_title(f"p('{v.target}'), log scale", fontsize=10)
        fig.tight_layout()
        return fig

    def widget(self, t: int | None = None, theta_max: float = 3.0):
        """Sliders for t, theta and lam, and two buttons; the view redraws as HTML below them."""
        import ipywidgets as w

        helps, hurts = self.extremes()
        t0 = helps[0] if t is None else int(t)
        t_slider = w.IntSlider(value=t0, min=1, max=len(self.inputs) - 1, description="t",
                               continuous_update=False, layout=w.Layout(width="520px"))
        theta = w.FloatSlider(value=self.theta, min=0.0, max=max(theta_max, self.theta), step=0.05,
                              description="theta", continuous_update=False)
        lam = w.FloatSlider(value=self.lam, min=0.0, max=1.0, step=0.01, description="lambda",
                            continuous_update=False)
        best, worst = w.Button(description="cache helps most"), w.Button(description="cache hurts most")
        out = w.HTML()
        clicks = {"helps": 0, "hurts": 0}

        def redraw(_=None):
            out.value = self.html(t_slider.value, theta.value, lam.value)

        def jump(kind):
            def go(_):
                ranked = self.extremes(20, theta.value, lam.value)[kind == "hurts"]
                t_slider.value = ranked[clicks[kind] % len(ranked)]  # each click: the next one
                clicks[kind] += 1
                redraw()
            return go

        for s in (t_slider, theta, lam):
            s.observe(redraw, names="value")
        best.on_click(jump("helps"))
        worst.on_click(jump("hurts"))
        redraw()
        return w.VBox([w.HBox([t_slider, best, worst]), w.HBox([theta, lam]), out])
