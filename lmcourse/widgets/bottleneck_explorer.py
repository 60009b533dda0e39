r"""An explorer for the softmax bottleneck: sliders for the softmax dimension d and the lookup's knobs.

It rebuilds the embedded corpus's key -> value table :math:`A` (n_keys x n_values) from
:class:`lmcourse.corpora.grammar.Params` (a fraction of a second, no corpus is written), and draws three
panels for the chosen :math:`d`:

1. the spectrum :math:`\mathrm{sv}_i / \mathrm{sv}_1` of the double-centred :math:`A`, split at :math:`d`: what a
   softmax of dimension :math:`d` can build and what it must leave out;
2. the best mean :math:`\mathrm{KL}(A \,\|\, \operatorname{softmax}(H W^\top + b))` against :math:`d`:
   the truncated SVD for every :math:`d` (instant) and the optimised fits computed so far;
3. the key the fit serves worst: its true :math:`p(\text{value} \mid \text{key})` against the fit's.

Fits are cached per (sharpness, n_values, d), so moving back to a setting is instant.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..corpora.grammar import Params
from ..networks import bottleneck as bn
from .fallback import WithFallback

EXACT = 1e-10  # a mean KL below this (nats) is float64 rounding: the fit is exact


class BottleneckExplorer:
    """``BottleneckExplorer().figure()`` draws the default state; ``.widget()`` adds the sliders."""

    def __init__(self, params: Params = Params(), d: int = 16, max_iter: int = 150):
        self.params, self.d, self.max_iter = params, d, max_iter
        self._tables: dict = {}
        self._fits: dict = {}
        self._curves: dict = {}

    # ------------------------------------------------------------------ cached maths
    def _knobs(self) -> tuple:
        return (self.params.lookup_sharpness, self.params.n_values)

    def table(self) -> torch.Tensor:  # (n_keys, n_values)
        if self._knobs() not in self._tables:
            self._tables[self._knobs()] = bn.lookup_log_probs(self.params)
        return self._tables[self._knobs()]

    def fit(self, d: int) -> bn.SoftmaxFit:
        key = self._knobs() + (d,)
        if key not in self._fits:
            self._fits[key] = bn.fit_softmax(self.table(), d, max_iter=self.max_iter)
        return self._fits[key]

    def curve(self) -> torch.Tensor:  # (k + 1,) truncated-SVD KL for d = 0..k
        if self._knobs() not in self._curves:
            self._curves[self._knobs()] = bn.svd_curve(self.table())
        return self._curves[self._knobs()]

    def set(self, d: int | None = None, sharpness: float | None = None, n_values: int | None = None):
        """Change the state; unchanged knobs keep their value."""
        if sharpness is not None:
            self.params = replace(self.params, lookup_sharpness=float(sharpness))
        if n_values is not None:
            self.params = replace(self.params, n_values=int(n_values))
        if d is not None:
            self.d = int(d)
        return self

    # ------------------------------------------------------------------ drawing
    def figure(self):
        """The three panels for the current state, as a matplotlib Figure."""
        from matplotlib.figure import Figure

        A, d = self.table(), min(self.d, min(self.table().shape))
        r = bn.min_softmax_dim(A)
        fit = self.fit(d)
        fig = Figure(figsize=(10, 4.2), dpi=100)  # the largest a slide shows at full size: text at its size
        ax1, ax2, ax3 = fig.subplots(1, 3)
        self._draw_spectrum(ax1, A, d, r)
        self._draw_curve(ax2, d, r)
        self._draw_worst_key(ax3, A, fit)
        fig.suptitle(f"lookup table {A.shape[0]} keys x {A.shape[1]} values, sharpness "
                     f"{self.params.lookup_sharpness:g}: a softmax needs d >= {r}; here d = {d}, "
                     f"mean KL {fit.kl:.2e} nats", fontsize=11)
        fig.tight_layout()
        return fig

    @staticmethod
    def _draw_spectrum(ax, A, d, r):
        s = bn.spectrum(A).numpy()[:r]                           # the nonzero part (rank r)
        i = np.arange(1, len(s) + 1)
        ax.semilogy(i[:d], s[:d], ".", color="tab:blue", label=f"kept (d = {d})")
        ax.semilogy(i[d:], s[d:], ".", color="tab:red", label="left out")
        ax.axvline(d + 0.5, color="grey", linestyle=":")
        ax.set_xlabel("i")
        ax.set_ylabel(r"$\mathrm{sv}_i / \mathrm{sv}_1$ of the centred $A$", fontsize=10)
        ax.set_title("spectrum", fontsize=11)
        ax.legend(fontsize=10, loc="lower left")

    def _draw_curve(self, ax, d, r):
        c = self.curve().numpy()
        done = sorted((k[2], f.kl) for k, f in self._fits.items() if k[:2] == self._knobs())
        here = self.fit(d).kl
        values = np.concatenate([c, [y for _, y in done], [here]])
        real = values[values > EXACT]
        bottom = real.min() / 4 if len(real) else EXACT
        ax.set_ylim(bottom, values.max() * 3 if len(real) else 1.0)

        def shown(y):  # a KL below EXACT is rounding noise: drawn on the bottom edge as "exact"
            y = np.asarray(y, dtype=float)
            return np.where(y > EXACT, y, bottom)

        ax.semilogy(np.arange(len(c)), shown(c), "-", color="grey", label="truncated SVD")
        ax.semilogy([x for x, _ in done], shown([y for _, y in done]), "o", color="tab:blue", ms=4,
                    label="optimised fit", clip_on=False)
        ax.semilogy([d], shown([here]), "o", color="tab:orange", ms=9, label=f"d = {d}", clip_on=False)
        ax.axvline(r, color="black", linestyle="--", lw=0.8, label=f"d = {r}: exact")
        ax.text(0.97, 0.97, f"bottom edge: exact\n(KL < {EXACT:.0e})", transform=ax.transAxes,
                ha="right", va="top", fontsize=10, color="0.35")
        ax.set_xlabel("softmax dimension d", fontsize=10)
        ax.set_ylabel("mean KL (nats)", fontsize=10)
        ax.set_title("best KL against d", fontsize=11)
        ax.legend(fontsize=10, loc="lower left")

    @staticmethod
    def _draw_worst_key(ax, A, fit):
        kl = bn.kl_rows(A, fit.logits())                          # (n_keys,)
        k = int(kl.argmax())
        p, q = A[k].exp().numpy(), fit.log_probs()[k].exp().numpy()
        order = np.argsort(-p)[:30]
        ax.bar(np.arange(len(order)), p[order], color="lightgrey", label="true p(value | key)")
        ax.plot(np.arange(len(order)), q[order], "o", color="tab:orange", ms=4, label="fitted softmax")
        ax.set_xlabel("values, most likely first (top 30)", fontsize=10)
        ax.set_ylabel("probability", fontsize=10)
        ax.set_title(f"worst key ({k}): KL {float(kl[k]):.2e}", fontsize=11)
        ax.legend(fontsize=10)

    # ------------------------------------------------------------------ the widget
    def widget(self) -> WithFallback:
        """Sliders for d, the sharpness and the number of values, redrawing the panels (needs ipywidgets).

        Shown with a picture of the first state in the same output, for a page read without a kernel;
        ``.widget`` is the ipywidgets box."""
        import ipywidgets as widgets
        from IPython.display import display

        n = self.params.n_values
        d_slider = widgets.IntSlider(value=self.d, min=1, max=n, description="d", continuous_update=False)
        s_slider = widgets.FloatSlider(value=self.params.lookup_sharpness, min=0.5, max=8.0, step=0.5,
                                       description="sharpness", continuous_update=False)
        v_slider = widgets.IntSlider(value=n, min=10, max=n, step=10, description="n_values",
                                     continuous_update=False)
        out = widgets.Output()
        drawn = []

        def redraw(_=None):
            d_slider.max = v_slider.value
            self.set(d=d_slider.value, sharpness=s_slider.value, n_values=v_slider.value)
            fig = self.figure()
            drawn.append(fig)
            with out:
                out.clear_output(wait=True)
                display(fig)

        for s in (d_slider, s_slider, v_slider):
            s.observe(redraw, names="value")
        redraw()
        box = widgets.VBox([widgets.HBox([d_slider, s_slider, v_slider]), out])
        return WithFallback(box, figure=drawn[0],
                            text="(the rank explorer's sliders move with a running kernel; its first state is "
                                 "drawn here)")
