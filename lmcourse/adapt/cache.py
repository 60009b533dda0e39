r"""The neural cache: a trained language model made better with no training (Grave et al. 2017).

The model's last-layer output :math:`h_t` has read :math:`x_1 \dots x_t` and predicts :math:`x_{t+1}`. The cache
keeps the pairs :math:`(h_i, x_{i+1})` of the last ``window`` positions and points back at those whose state looks
like :math:`h_t`, then mixes with the model's :math:`p_{\text{vocab}} = \operatorname{softmax}(z_t)`, linearly
(``lam``) or in one softmax (``alpha``); an empty cache leaves :math:`p_{\text{vocab}}`:

.. math::

    a_i = \frac{e^{\theta\, h_t \cdot h_i}}{\sum_j e^{\theta\, h_t \cdot h_j}}, \qquad
    p_{\text{cache}}(w) = \sum_{i:\ x_{i+1} = w} a_i, \qquad t - \text{window} \le i < t,

    p(w) = (1 - \lambda)\, p_{\text{vocab}}(w) + \lambda\, p_{\text{cache}}(w)
    \quad\text{or}\quad p(w) \propto e^{z_{t,w}} + \sum_{i:\ x_{i+1} = w} e^{\theta\, h_t \cdot h_i + \alpha}.

Scoring text needs only the target's probability, so both mixtures read two log-sums per position,
:math:`L^{\text{all}}_t = \log\sum_i e^{\theta h_t\cdot h_i}` and :math:`L^{\text{match}}_t`, the same over the
:math:`i` with :math:`x_{i+1} = x_{t+1}` (:func:`logsums`): a chunk of ``c`` queries is one matrix product
against the window, ``c x (c + window)`` numbers, never ``T x T``. Beside the idea: argument checks and
``pointer.py``'s rule (:mod:`.cache_support`), the step interface (:mod:`.cache_steps`), tuning (:mod:`.cache_tuning`).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

import torch

from ..lm import LanguageModel, check_neural, check_tokens
from ..networks.base import log_softmax
from .cache_steps import CacheState, CacheSteps  # noqa: F401 (CacheState: named here too)
from .cache_support import (MODES, attention, check_lam, check_mode, check_stream, check_theta,  # noqa: F401
                            check_window, number, skip_first)

CHUNK = 128  # queries scored together: memory CHUNK x (CHUNK + window), small enough to stay in cache


@lru_cache(maxsize=8)
def _window_bias(c: int, m: int, window: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(c, m + c): 0 where query ``j`` (row ``m + j``) may attend to row ``i``, ``-inf`` elsewhere."""
    lag = m + torch.arange(c, device=device).unsqueeze(1) - torch.arange(m + c, device=device).unsqueeze(0)
    valid = (lag >= 1) & (lag <= window)                                    # t - window <= i < t
    return torch.zeros(c, m + c, device=device, dtype=dtype).masked_fill_(~valid, -math.inf)


def logsums(h_q: torch.Tensor, y_q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
            window: int, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`L^{\text{all}}_t, L^{\text{match}}_t` (each (n_theta, c), :math:`-\infty` for an empty cache or a
    miss) of the queries ``h_q`` (c, H) with targets ``y_q``, the last ``c`` rows of ``keys`` (their stored words
    ``values``); the dot products are made once for all thetas."""
    c, k = h_q.shape[0], keys.shape[0]
    bias = _window_bias(c, k - c, window, keys.device, keys.dtype)          # (c, k)
    dots = h_q @ keys.T                                                     # (c, k)
    match = values.unsqueeze(0) == y_q.unsqueeze(1)                         # (c, k), masked by the bias below
    l_all, l_match = [], []
    for theta in thetas.tolist():                                           # a loop over settings, not tokens
        s = torch.add(bias, dots, alpha=theta)                              # (c, k): -inf off the window
        top = s.amax(1, keepdim=True)                                       # (c, 1)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # empty cache: any finite shift
        e = s.sub_(top).exp_()                                              # (c, k), 0 off the window
        top = top.squeeze(1)
        l_all.append(top + e.sum(1).log())
        l_match.append(top + torch.where(match, e, torch.zeros((), dtype=e.dtype, device=e.device)).sum(1).log())
    return torch.stack(l_all), torch.stack(l_match)                         # (n, c), (n, c)


class CacheMemory:
    """The last ``window`` pairs ``(h_i, x_{i+1})`` of one stream, carried from chunk to chunk: ``read(h, y,
    thetas)`` scores a chunk against them and its own earlier rows (:func:`logsums`), then keeps it."""

    def __init__(self, window: int, chunk: int = CHUNK):
        self.window, self.chunk = check_window(window), check_window(chunk, "chunk")
        self.keys: Optional[torch.Tensor] = None  # (<= window, H)
        self.values: Optional[torch.Tensor] = None  # (<= window,)
        self.seen = 0  # positions read so far

    def store(self, h: torch.Tensor, y: torch.Tensor) -> None:
        """Remember ``(h, y)`` (c, H), (c,) without scoring them (e.g. a warm start from earlier text)."""
        keys = h if self.keys is None else torch.cat([self.keys, h.to(self.keys.dtype)])
        values = y if self.values is None else torch.cat([self.values, y])
        self.keys, self.values = keys[-self.window:], values[-self.window:]
        self.seen += h.shape[0]

    def read(self, h: torch.Tensor, y: torch.Tensor, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`logsums` for the chunk ``h`` (c, H), ``y`` (c,): two (n_theta, c) tensors."""
        m = 0 if self.keys is None else self.keys.shape[0]
        keys = h if self.keys is None else torch.cat([self.keys, h.to(self.keys.dtype)])  # (m + c, H)
        values = y if self.values is None else torch.cat([self.values, y])                # (m + c,)
        thetas = thetas.to(keys)
        all_, match = [], []
        for a in range(m, keys.shape[0], self.chunk):  # pieces of `chunk` queries keep memory bounded
            b, lo = min(a + self.chunk, keys.shape[0]), max(0, a - self.window)
            la, lm = logsums(keys[a:b], values[a:b], keys[lo:b], values[lo:b], self.window, thetas)
            all_.append(la)
            match.append(lm)
        self.keys, self.values = keys[-self.window:].clone(), values[-self.window:].clone()
        self.seen += h.shape[0]
        return torch.cat(all_, 1), torch.cat(match, 1)


def mix_linear(log_p_vocab: torch.Tensor, l_all: torch.Tensor, l_match: torch.Tensor, lam) -> torch.Tensor:
    r""":math:`\log((1-\lambda) p_{\text{vocab}} + \lambda\, e^{L^{\text{match}} - L^{\text{all}}})`, and
    :math:`\log p_{\text{vocab}}` where the cache is empty. ``lam`` may be a tensor that broadcasts."""
    lam = torch.as_tensor(lam, dtype=log_p_vocab.dtype, device=log_p_vocab.device)
    p_cache_log = l_match - torch.where(torch.isfinite(l_all), l_all, torch.zeros_like(l_all))
    mixed = torch.logaddexp(torch.log1p(-lam) + log_p_vocab, torch.log(lam) + p_cache_log)
    return torch.where(torch.isfinite(l_all), mixed, log_p_vocab.expand_as(mixed))


def mix_global(z_target: torch.Tensor, log_z: torch.Tensor, l_all: torch.Tensor, l_match: torch.Tensor,
               alpha) -> torch.Tensor:
    r""":math:`\log(e^{z_{t,x_{t+1}}} + e^{\alpha + L^{\text{match}}}) - \log(\sum_w e^{z_{t,w}} + e^{\alpha + L^{\text{all}}})`,
    with ``log_z`` :math:`= \log\sum_w e^{z_{t,w}}`; ``alpha`` may be a tensor that broadcasts."""
    alpha = torch.as_tensor(alpha, dtype=z_target.dtype, device=z_target.device)
    return torch.logaddexp(z_target, alpha + l_match) - torch.logaddexp(log_z, alpha + l_all)


def linear_cache(log_p_vocab, hidden, targets, theta, lam, window) -> torch.Tensor:  # -> (T,)
    r""":math:`\log p(x_{t+1})` of the linear mixture, from the model's ``log_p_vocab`` (T, V), its ``hidden`` (T, H)
    :math:`h_t` and the ``targets`` (T,) they predict; the cache holds the previous ``window`` positions."""
    targets = check_stream(hidden, torch.as_tensor(targets), log_p_vocab, "log_p_vocab")
    theta, lam, window = check_theta(theta), check_lam(lam), check_window(window)
    lp = log_p_vocab.gather(1, targets.view(-1, 1).to(log_p_vocab.device)).squeeze(1)  # (T,)
    l_all, l_match = CacheMemory(window).read(hidden, targets, torch.tensor([theta]))
    return mix_linear(lp, l_all[0].to(lp.device), l_match[0].to(lp.device), lam)


def global_cache(logits, hidden, targets, theta, alpha, window) -> torch.Tensor:  # -> (T,)
    r""":math:`\log p(x_{t+1})` of the global mixture, from the model's ``logits`` (T, V) :math:`z_t` before the
    softmax, ``hidden`` (T, H) and ``targets`` (T,); the cache holds the previous ``window`` positions."""
    targets = check_stream(hidden, torch.as_tensor(targets), logits, "logits")
    theta, alpha, window = check_theta(theta), number(alpha, "alpha"), check_window(window)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    z = logits.gather(1, targets.view(-1, 1).to(logits.device)).squeeze(1)  # (T,)
    l_all, l_match = CacheMemory(window).read(hidden, targets, torch.tensor([theta]))
    return mix_global(z, torch.logsumexp(logits, 1), l_all[0].to(z.device), l_match[0].to(z.device), alpha)


class NeuralCache(CacheSteps, LanguageModel):
    r"""A trained model with a neural cache on top (Grave et al. 2017); a :class:`LanguageModel`.

    ``model``: anything with ``vocab`` and ``stream(tokens)`` yielding ``(logits (t, V), h (t, H))`` chunks in order
    (a :class:`~lmcourse.networks.base.NeuralLM`, or dynamic evaluation); the history runs across chunks. ``mode``
    ``"linear"`` mixes with ``lam`` (0: the model's own scores), ``"global"`` with ``alpha``. Defaults:
    :math:`\theta = 1`, :math:`\lambda = 0.1` (the awd-lstm-lm code's PTB settings), 2,000 positions (Grave et al.
    2017, Table 2). ``pointer_compat=True``: ``pointer.py``'s first positions (:mod:`.cache_support`)."""

    def __init__(self, model, theta: float = 1.0, lam: float = 0.1, window: int = 2000, mode: str = "linear",
                 alpha: float = 0.0, pointer_compat: bool = False, chunk: int = CHUNK):
        check_neural(model, "cache")
        if getattr(model, "vocab", None) is None:
            raise ValueError("The wrapped model has no vocabulary: set model.vocab = corpus.vocab first.")
        self.model, self.vocab, self.mode = model, model.vocab, check_mode(mode)
        self.theta, self.lam, self.window = check_theta(theta), check_lam(lam), check_window(window)
        self.alpha = number(alpha, "alpha")
        self.pointer_compat, self.chunk = bool(pointer_compat), check_window(chunk, "chunk")
        self.name = f"{getattr(model, 'name', 'model')} + {'cache' if mode == 'linear' else 'global cache'}"

    def _mix(self, logits: torch.Tensor, l_all, l_match, y: torch.Tensor, start: int) -> torch.Tensor:
        """Log-probabilities of ``y`` (t,) from the model's logits (t, V) and the cache sums (t,)."""
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        lp = log_softmax(logits).gather(1, y.view(-1, 1)).squeeze(1)  # (t,)
        l_all, l_match = l_all.to(lp), l_match.to(lp)
        if self.mode == "linear":
            out = mix_linear(lp, l_all, l_match, self.lam)
        else:
            z = logits.gather(1, y.view(-1, 1)).squeeze(1)
            out = mix_global(z, torch.logsumexp(logits, 1), l_all, l_match, self.alpha)
        return skip_first(out, lp, start, self.window) if self.pointer_compat else out

    def score(self, tokens) -> torch.Tensor:  # (N,) -> (N,) float64
        r""":math:`\log p(x_{t+1} \mid x_{\le t})` for every token, model state and cache carried over the whole stream."""
        tokens = check_tokens(tokens, len(self.vocab))
        memory, start = CacheMemory(self.window, self.chunk), 0
        out = None  # (N,) float64, one buffer on the model's device, filled chunk by chunk
        for logits, h in self.model.stream(tokens):
            with torch.no_grad():  # per chunk: nothing is left switched off between yields
                h = h.detach()
                if out is None:
                    out = torch.empty(tokens.numel(), dtype=torch.float64, device=logits.device)
                y = tokens[start:start + h.shape[0]].to(h.device)
                theta = torch.tensor([self.theta], dtype=h.dtype, device=h.device)
                l_all, l_match = memory.read(h, y, theta)
                out[start:start + h.shape[0]] = self._mix(logits.detach(), l_all[0], l_match[0],
                                                          y.to(logits.device), start)
            start += h.shape[0]
        return out.cpu()
