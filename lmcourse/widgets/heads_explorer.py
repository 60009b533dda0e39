r"""The heads beside the cache: for one position, where the neural cache looks and where each attention head looks.

Over a stream read by a Transformer (:class:`lmcourse.networks.transformer.TransformerLM`), position
:math:`t` predicts :math:`x_t` from the inputs :math:`u_0 \dots u_t` (the stream shifted by the
implicit leading ``<eos>``: :math:`u_i = x_{i-1}`). Two kinds of weights over the same text:

- the cache (lesson 07) over the model's own vectors :math:`h_i`,
  :math:`a_i = \operatorname{softmax}_i(\theta\, h_t \cdot h_i)` for :math:`i < t`; position :math:`i`
  votes for the word that followed it, :math:`x_i`;
- head :math:`k` of layer :math:`\ell`, :math:`a^{(\ell,k)}_{ti}` for :math:`t - w \le i \le t`
  (:mod:`lmcourse.networks.attention`); it reads position :math:`i`'s input :math:`u_i`.

A head **copies** when it puts its weight on earlier inputs that are the word about to come:
:func:`copy_share` measures, per head, the mean weight on inputs equal to the target, over the
positions where the target is among the inputs it can read; the cache's share is measured the same
way, on the positions whose next word is the target. :class:`HeadsExplorer` draws the weights of the
cache and of every head at one position as rows of one picture over the words of the window, and
moves with a box for :math:`t` in a widget.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..adapt.cache import attention as cache_attention, check_theta
from ..lm import check_tokens
from ..networks.base import inference
from .fallback import WithFallback, png_of

__all__ = ["head_weights", "copy_share", "cache_copy_share", "HeadsExplorer"]


def head_weights(model, tokens, chunk: int = 500) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Every head's weights by distance, and the model's vectors, over a stream read as ``score`` reads it.

    Returns ``a`` (L, n, N, w + 1), ``a[l, k, t, d]`` the weight head k of layer l puts at position
    :math:`t` on position :math:`t - d` (zero where there is none), and ``h`` (N, E)."""
    tokens = check_tokens(tokens, model.config.vocab_size).to(model.device)
    inputs = torch.cat([tokens.new_full((1,), model.eos), tokens[:-1]])  # (N,)
    w = model.config.window
    blocks = model.blocks
    out = torch.zeros(len(blocks), model.config.n_heads, len(tokens), w + 1)  # (L, n, N, w + 1)
    hs, state = [], None
    model.attention_weights(True)
    try:
        for start in range(0, len(tokens), chunk):
            with inference(model):
                step = model(inputs[start:start + chunk].view(-1, 1), state)
            T, M = step.h.size(0), (state.past[0].size(0) if state is not None else 0)
            query = torch.arange(T).view(-1, 1) + M  # (T, 1)
            distance = query - torch.arange(M + T).view(1, -1)  # (T, S)
            ok = (distance >= 0) & (distance <= w)
            for layer, block in enumerate(blocks):
                a = block.attn.weights[0].cpu()  # (n, T, S)
                t_idx, s_idx = ok.nonzero(as_tuple=True)
                out[layer][:, start + t_idx, distance[t_idx, s_idx]] = a[:, t_idx, s_idx]
            hs.append(step.h[:, 0].cpu())
            state = step.state
    finally:
        model.attention_weights(False)
    return out, torch.cat(hs)  # (L, n, N, w + 1), (N, E)


def _earlier(values: torch.Tensor, w: int) -> torch.Tensor:  # (N,) -> (N, w + 1): values[t - d], -1 before 0
    N = values.numel()
    idx = torch.arange(N).view(-1, 1) - torch.arange(w + 1).view(1, -1)  # (N, w + 1)
    return torch.where(idx >= 0, values[idx.clamp(min=0)], torch.full_like(idx, -1))


def copy_share(weights: torch.Tensor, tokens: torch.Tensor, eos: int) -> tuple[torch.Tensor, int]:
    """Per head (L, n): the mean weight on earlier inputs equal to the target, over the positions where
    such an input is in reach (their number is returned too)."""
    tokens = tokens.cpu()
    inputs = torch.cat([tokens.new_full((1,), eos), tokens[:-1]])  # (N,)
    w = weights.size(-1) - 1
    match = (_earlier(inputs, w) == tokens.view(-1, 1))  # (N, w + 1)
    match[:, 0] = False  # the input at t itself is the word before the target, not an earlier one
    reach = match.any(1)  # (N,)
    share = (weights * match).sum(-1)[..., reach].mean(-1)  # (L, n)
    return share, int(reach.sum())


def cache_copy_share(h: torch.Tensor, tokens: torch.Tensor, theta: float, window: int) -> tuple[float, int]:
    """The cache's mean weight on earlier positions followed by the target, over the positions where one is in
    reach within ``window`` (and their number): the cache's share, measured like :func:`copy_share`'s."""
    theta = check_theta(theta)
    tokens = tokens.cpu()
    N = tokens.numel()
    idx = torch.arange(N).view(-1, 1) - torch.arange(1, window + 1).view(1, -1)  # (N, window): i = t - 1 ... t - window
    valid = idx >= 0
    scores = theta * (h[idx.clamp(min=0)] * h.view(N, 1, -1)).sum(-1)  # (N, window)
    a = torch.softmax(scores.masked_fill(~valid, float("-inf")), dim=1).nan_to_num(0.0)  # row 0 has no past
    match = valid & (tokens[idx.clamp(min=0)] == tokens.view(-1, 1))  # (N, window)
    reach = match.any(1)
    return float((a * match).sum(1)[reach].mean()), int(reach.sum())


class HeadsExplorer:
    """The cache's weights and every head's weights at one position, over the words of the window."""

    def __init__(self, model, tokens, theta: float, names: tuple = (), span: Optional[int] = None):
        self.span = span  # the inputs drawn: the last ``span`` of the window (None: the whole window)
        self.tokens = check_tokens(tokens, model.config.vocab_size).cpu()
        self.vocab, self.theta, self.eos = model.vocab, check_theta(theta), model.eos
        self.window = model.config.window
        self.weights, self.h = head_weights(model, self.tokens)  # (L, n, N, w + 1), (N, E)
        self.inputs = torch.cat([self.tokens.new_full((1,), self.eos), self.tokens[:-1]])  # (N,)
        L, n = self.weights.shape[:2]
        self.rows = ["cache"] + [f"layer {l}, head {k}" for l in range(L) for k in range(n)]

    def grid(self, t: int) -> torch.Tensor:  # -> (1 + L n, w + 1): weight by distance, cache first
        """Row 0: the cache's weight on the input at each distance (the cache's position i - 1 stores the vector
        whose next word is the input u_i, so it is drawn over that input); then each head's."""
        if not 1 <= t < len(self.tokens):
            raise ValueError(f"t={t} is outside the stream of {len(self.tokens)} positions: "
                             f"pick 1 .. {len(self.tokens) - 1}.")
        w = self.window
        positions, a = cache_attention(self.h, t, self.theta, w)  # keys i < t; its vote is the input u_{i + 1}
        cache = torch.zeros(w + 1)
        cache[t - (positions + 1)] = a
        heads = self.weights[:, :, t].reshape(-1, w + 1)  # (L n, w + 1)
        return torch.cat([cache.view(1, -1), heads])

    def figure(self, t: int):
        """The weights at ``t`` as a heat map: rows cache and heads, columns the inputs of the window, oldest first;
        the inputs equal to the target are marked."""
        import matplotlib.pyplot as plt

        g = self.grid(t).flip(1)  # oldest first
        first = max(0, t - self.window, t + 1 - (self.span or self.window + 1))
        words = [self.vocab.itos[int(u)] for u in self.inputs[first:t + 1]]
        g = g[:, g.size(1) - len(words):]
        fig, ax = plt.subplots(figsize=(min(16, 2.5 + 0.5 * len(words)), 1.4 + 0.45 * len(self.rows)))
        ax.imshow(g.numpy(), aspect="auto", cmap="Oranges", vmin=0, vmax=max(float(g.max()), 1e-9))
        ax.set_yticks(range(len(self.rows)), self.rows, fontsize=11)
        ax.set_xticks(range(len(words)), words, rotation=45, ha="right", rotation_mode="anchor", fontsize=11)
        target = self.vocab.itos[int(self.tokens[t])]
        for k, word in enumerate(words[:-1]):
            if word == target:
                ax.get_xticklabels()[k].set_color("tab:blue")
                ax.get_xticklabels()[k].set_fontweight("bold")
        ax.set_title(f"position {t:,}: the next word is '{target}' (in blue where it is an earlier input)", fontsize=11)
        fig.tight_layout()
        return fig

    def widget(self, t: int):
        """A box for t (steps of one) and the picture; returned with its first picture as the static copy."""
        import ipywidgets as w
        import matplotlib.pyplot as plt


        box = w.BoundedIntText(value=int(t), min=1, max=len(self.tokens) - 1, description="t")
        out = w.Image(format="png")

        def redraw(_=None):
            fig = self.figure(box.value)
            out.value = png_of(fig)
            plt.close(fig)

        box.observe(redraw, names="value")
        redraw()
        return WithFallback(w.VBox([box, out]), png=bytes(out.value),
                            text=f"(the heads beside the cache at position {int(t):,}: it moves with a running kernel)")
