r"""The neural cache one token at a time: the step interface of :class:`~lmcourse.adapt.cache.NeuralCache`
(sampling, beam search), which returns whole distributions over the next word.

Each row keeps its own cache, the keys :math:`h_i` and values :math:`x_{i+1}` of its last ``window`` positions,
and at a step mixes the model's distribution with

.. math::  p_{\text{cache}}(w) = \sum_{i:\ x_{i+1} = w} \operatorname{softmax}_i(\theta\, h_t \cdot h_i)

exactly as :meth:`~lmcourse.adapt.cache.NeuralCache.score` does for a whole stream. It needs :math:`h_t` and, for
global normalisation, the raw logits at each step: ``model.step_outputs(state) -> (logits (B, V), h (B, H))``,
which every :class:`~lmcourse.networks.base.NeuralLM` and :class:`~lmcourse.adapt.dyneval.DynamicEval` has.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..networks.base import log_softmax

__all__ = ["CacheState", "CacheSteps"]


class CacheState(NamedTuple):
    """The step-interface state of :class:`NeuralCache`, one row per sequence."""

    inner: object  # the wrapped model's own state
    keys: torch.Tensor  # (B, n, H): h_i of the last n <= window positions
    values: torch.Tensor  # (B, n): x_{i+1}, the token read after each of them
    query: torch.Tensor  # (B, H): h_t, the state predicting the next token x_{t+1}
    t: int  # tokens read so far (the position now predicted)
    log_probs: torch.Tensor  # (B, V): log p(. | what was read), cache included


class CacheSteps:
    """``start``, ``next_log_probs``, ``advance`` and ``reorder`` for a cache with ``model``, ``theta``, ``lam``,
    ``alpha``, ``window``, ``mode`` and ``pointer_compat`` (the attributes of :class:`NeuralCache`)."""

    def _step_outputs(self, inner) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probabilities for linear, raw logits for global) (B, V) and h_t (B, H) at a step."""
        step_outputs = getattr(self.model, "step_outputs", None)
        if not callable(step_outputs):
            raise TypeError(f"NeuralCache's step interface needs h_t at each step: give "
                            f"{type(self.model).__name__} a step_outputs(state) -> (logits, h) method.")
        z, h = step_outputs(inner)
        return (log_softmax(z) if self.mode == "linear" else z), h

    def _mix_step(self, z: torch.Tensor, h: torch.Tensor, keys, values, t: int) -> torch.Tensor:  # (B, V)
        z = z.to(torch.promote_types(z.dtype, torch.float32))
        lp = z if self.mode == "linear" else log_softmax(z)
        if keys.shape[1] == 0 or (self.pointer_compat and t <= self.window):
            return lp
        s = self.theta * torch.bmm(keys.to(z.dtype), h.to(z.dtype).unsqueeze(2)).squeeze(2)  # (B, n)
        if self.mode == "linear":
            p_cache = torch.zeros_like(z).scatter_add_(1, values, torch.softmax(s, 1))  # (B, V)
            lam = torch.tensor(self.lam, dtype=z.dtype, device=z.device)
            return torch.logaddexp(torch.log1p(-lam) + lp, torch.log(lam) + p_cache.log())
        top = s.amax(1, keepdim=True)                                                  # (B, 1)
        mass = torch.zeros_like(z).scatter_add_(1, values, torch.exp(s - top))        # (B, V)
        return log_softmax(torch.logaddexp(z, self.alpha + top + mass.log()))

    def _state(self, inner, keys, values, t: int) -> CacheState:
        with torch.no_grad():
            z, h = self._step_outputs(inner)
            return CacheState(inner, keys, values, h.detach(), t, self._mix_step(z, h.detach(), keys, values, t))

    def start(self, batch_size: int = 1) -> CacheState:
        """The wrapped model's start state and an empty cache per row."""
        inner = self.model.start(batch_size)
        _, h = self._step_outputs(inner)
        keys = h.new_zeros(h.shape[0], 0, h.shape[1])                      # (B, 0, H)
        values = torch.zeros(h.shape[0], 0, dtype=torch.long, device=h.device)
        return self._state(inner, keys, values, 0)

    def next_log_probs(self, state: CacheState) -> torch.Tensor:  # (B, V)
        return state.log_probs

    def advance(self, state: CacheState, x) -> CacheState:
        """Store ``(h_t, x)`` for each row (``x`` is :math:`x_{t+1}`, the word after :math:`h_t`), then let the
        model read ``x`` (B,)."""
        x = torch.as_tensor(x, device=state.values.device).long().view(-1)
        keys = torch.cat([state.keys, state.query.unsqueeze(1)], 1)[:, -self.window:]  # (B, n + 1, H)
        values = torch.cat([state.values, x.unsqueeze(1)], 1)[:, -self.window:]       # (B, n + 1)
        return self._state(self.model.advance(state.inner, x), keys, values, state.t + 1)

    def reorder(self, state: CacheState, index) -> CacheState:
        """Keep rows ``index`` (B',): the model's state and each row's cache."""
        index = torch.as_tensor(index, device=state.values.device).long()
        pick = lambda a: a.index_select(0, index)  # noqa: E731
        return CacheState(self.model.reorder(state.inner, index), pick(state.keys), pick(state.values),
                          pick(state.query), state.t, pick(state.log_probs))

    def __repr__(self) -> str:
        knob = f"lam={self.lam:g}" if self.mode == "linear" else f"alpha={self.alpha:g}"
        return f"NeuralCache({self.name!r}, theta={self.theta:g}, {knob}, window={self.window}, mode={self.mode!r})"
