r"""Dynamic evaluation: a trained model keeps learning from the text it is scoring (Krause et al. 2018).

The evaluation stream is cut into segments :math:`s_1, s_2, \dots` of ``bptt`` tokens, read in order with the
model's state carried across them (Section 3). The course writes the weights :math:`\varphi` and the decay
:math:`\rho` (the paper's :math:`\theta` and :math:`\lambda`, which the course keeps for the cache). For each
segment:

1. the model, with its *current* weights :math:`\varphi`, predicts every token of :math:`s_i`; these
   log-probabilities are recorded first, so every number is a genuine prediction;
2. :math:`\nabla_\varphi \mathcal{L}(s_i)`, the gradient of the segment's mean negative log-likelihood;
3. the weights move towards the text just read (:math:`\varphi_0` are the trained weights):

   - ``rms`` (Section 5):
     :math:`\varphi \leftarrow \varphi - \eta\, \nabla_\varphi \mathcal{L} / (\mathrm{MS} + \epsilon)
     + \rho\, r \odot (\varphi_0 - \varphi)`,
     with :math:`\mathrm{MS}` the root-mean-square gradient on the training text (:func:`gradient_stats`) and
     the decay rates :math:`r = \min(\mathrm{MS} / \overline{\mathrm{MS}}, 1/\rho)` (:func:`decay_rates`);
   - ``sgd`` (Mikolov et al. 2010): :math:`\varphi \leftarrow \varphi - \eta\, \nabla_\varphi \mathcal{L}
     + \rho\, (\varphi_0 - \varphi)`; :math:`\rho = 0` is plain SGD on the test stream.

The wrapped model is never changed: each pass adapts its own copy (:func:`adaptation_copy`, dropout off), from
:math:`\varphi_0`, so two calls give the same numbers. Beside the idea: checks, the papers' settings in the old
scaling and the adapting copy (:mod:`.dyneval_support`), the step interface and the drift
(:mod:`.dyneval_steps`), the grid search (:mod:`.dyneval_tuning`). In the code, ``theta`` and ``theta_0`` name
:math:`\varphi` and :math:`\varphi_0` (the reference code's names), and ``decay`` is :math:`\rho`.
"""
from __future__ import annotations

import math
from typing import Iterator, NamedTuple, Optional, Sequence

import torch
import torch.nn as nn

from ..corpora.data import batchify, bptt_batches
from ..lm import LanguageModel, check_tokens
from ..networks.base import log_softmax
from .dyneval_steps import DynamicState, DynamicSteps  # noqa: F401 (DynamicState: named here too)
from .dyneval_support import (DEFAULTS, MAX_LR, METHODS, PAPER_SETTINGS, adaptation_copy, check_method,  # noqa: F401
                              check_model, check_stats, diagnose, from_old_hyperparameters, number, positive_int,
                              segment_nll as _segment_nll, shown)
from .dyneval_tuning import Grid, paper_grid, search

__all__ = ["METHODS", "DEFAULTS", "PAPER_SETTINGS", "GradientStats", "gradient_stats", "adaptation_copy",
           "decay_rates", "Step", "make_step", "update_", "from_old_hyperparameters", "DynamicEval", "Grid",
           "grid_search", "paper_grid"]


class GradientStats(dict):
    """``{parameter name: MS}``, plus ``n_segments``, the number of segments it averages over."""

    n_segments: int = 0


def gradient_stats(model: nn.Module, tokens, batch_size: int = 100, bptt: int = 5,
                   progress: Optional[bool] = None) -> GradientStats:
    r""":math:`\mathrm{MS} = \sqrt{\frac{1}{K}\sum_k (\nabla_k)^2}` per parameter (``named_parameters()`` names):
    ``tokens`` batchified into ``batch_size`` columns and walked in segments of ``bptt``, state carried, dropout off,
    and :math:`\nabla_k` the gradient of segment :math:`k`'s mean cross-entropy (Krause et al. 2018, Section 5)."""
    check_model(model)
    batch_size, bptt = positive_int(batch_size, "batch_size"), positive_int(bptt, "bptt")
    tokens = check_tokens(tokens, model.config.vocab_size)
    net = adaptation_copy(model)
    names, params = zip(*net.named_parameters())
    source = batchify(tokens.to(params[0].device), batch_size)  # (n, B)
    squares = [torch.zeros_like(p) for p in params]
    batches = shown(bptt_batches(source, bptt), math.ceil((source.size(0) - 1) / bptt), "gradient statistics", progress)
    state, count = None, 0
    for x, y in batches:  # x, y: (t, B)
        with torch.enable_grad():
            out = net(x, state)
            grads = torch.autograd.grad(_segment_nll(out.logits, y), params)
        with torch.no_grad():
            for s, g in zip(squares, grads):
                s.addcmul_(g, g)
        state, count = net.detach_state(out.state), count + 1
    stats = GradientStats({name: (s / count).sqrt_() for name, s in zip(names, squares)})
    stats.n_segments = count
    return stats


def decay_rates(stats: dict, decay: float) -> dict:
    r""":math:`r = \min(\mathrm{MS} / \overline{\mathrm{MS}},\ 1/\rho)` per parameter (``decay`` is :math:`\rho`),
    :math:`\overline{\mathrm{MS}}` the mean over the P tensors of each one's mean MS: rates about 1, and
    :math:`\rho\, r \le 1` never overshoots."""
    mean_ms = sum(float(ms.double().mean()) for ms in stats.values()) / len(stats)
    rates = {name: ms / mean_ms for name, ms in stats.items()}
    if decay > 0:
        rates = {name: r.clamp(max=1.0 / decay) for name, r in rates.items()}
    return rates


class Step(NamedTuple):
    r"""One parameter's update, fixed for a stream: ``rms`` the step scale :math:`s = \eta / (\mathrm{MS} + \epsilon)`
    and the pull ``rho`` :math:`= \rho\, r` (tensors); ``sgd`` :math:`s = \eta` and the pull :math:`\rho` (numbers)."""

    scale: object  # s, a tensor or a number
    rho: object  # the pull towards phi_0, a tensor or a number; None when it is 0
    theta_0: torch.Tensor  # the trained value phi_0, read only


def make_step(theta_0: torch.Tensor, scale, rho) -> Step:
    r"""The :class:`Step` of a parameter with trained value ``theta_0`` (:math:`\varphi_0`), step scale ``s`` and
    pull ``rho``."""
    return Step(scale, None if not isinstance(rho, torch.Tensor) and rho == 0 else rho, theta_0)


def update_(theta: torch.Tensor, g: torch.Tensor, step: Step) -> None:
    r"""In place, on the weights ``theta`` (:math:`\varphi`) with the gradient ``g`` (:math:`\nabla_\varphi \mathcal{L}`):
    :math:`\varphi \leftarrow \varphi + \rho \odot (\varphi_0 - \varphi) - s \odot \nabla_\varphi \mathcal{L}`, the
    pull reading :math:`\varphi` before the step (``lerp_``, then ``addcmul_``: two passes, no temporary tensor)."""
    if step.rho is not None:
        theta.lerp_(step.theta_0, step.rho)
    if isinstance(step.scale, torch.Tensor):
        theta.addcmul_(g, step.scale, value=-1.0)
    elif step.scale != 0:
        theta.add_(g, alpha=-step.scale)


class DynamicEval(DynamicSteps, LanguageModel):
    r"""A trained neural LM under dynamic evaluation (see the module docstring); a LanguageModel. ``method``:
    ``"rms"`` (needs ``stats`` from :func:`gradient_stats`) or ``"sgd"``; ``lr`` :math:`\eta`, ``decay``
    :math:`\rho \in [0, 1)`, ``eps`` :math:`\epsilon` (``rms`` only), ``bptt`` the segment length. The defaults
    are the reference code's for ``rms`` at bptt 5; ``sgd`` needs a far larger ``lr``."""

    def __init__(self, model: nn.Module, method: str = "rms", lr: float = DEFAULTS["lr"],
                 decay: float = DEFAULTS["decay"], eps: float = DEFAULTS["eps"], bptt: int = 5,
                 stats: Optional[dict] = None):
        check_model(model)
        self.model, self.method, self.vocab = model, check_method(method), model.vocab
        self.lr, self.decay = number(lr, "lr", 0.0, MAX_LR, high_closed=True), number(decay, "decay", 0.0, 1.0)
        self.eps = number(eps, "eps", 0.0, low_open=True)  # read by "rms" only, checked for both
        self.bptt = positive_int(bptt, "bptt")
        self.stats = check_stats(model, stats) if method == "rms" else None
        self.name = f"{getattr(model, 'name', 'model')} + dynamic evaluation ({method})"

    def steps(self, names: Sequence[str], params: Sequence[torch.Tensor]) -> list:
        """Per parameter, the :class:`Step` of :func:`update_` (computed once per stream)."""
        theta_0 = self._theta_0(names)
        if self.method == "sgd":
            return [make_step(t0, self.lr, self.decay) for t0 in theta_0]
        rates = decay_rates(self.stats, self.decay)
        out = []
        for name, p, t0 in zip(names, params, theta_0):
            ms, r = (x.to(device=p.device, dtype=p.dtype) for x in (self.stats[name], rates[name]))
            scale = self.lr / (ms + self.eps)  # s = lr / (MS + eps)
            if not bool(torch.isfinite(scale).all()):
                raise ValueError(f"The step scale lr / (MS + eps) of {name} overflows {p.dtype} (lr={self.lr:g}, "
                                 f"eps={self.eps:g}, smallest MS={float(ms.min()):g}): raise eps above "
                                 f"{self.lr / torch.finfo(p.dtype).max:.3g} or lower lr.")
            out.append(make_step(t0, scale, self.decay * r if self.decay > 0 else 0.0))
        return out

    def _theta_0(self, names: Sequence[str]) -> list:
        own = dict(self.model.named_parameters())
        return [own[n].detach() for n in names]  # read only: the wrapped model is never written

    @staticmethod
    def _update(params, grads, steps) -> None:
        for theta, g, step in zip(params, grads, steps):
            update_(theta, g, step)

    def _segments(self, tokens) -> Iterator[tuple]:
        """Per segment: (logits (t, V), h (t, E_last)) before the update, the names, the updated weights."""
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        net = adaptation_copy(self.model)
        names, params = zip(*net.named_parameters())  # computed once per stream
        steps = self.steps(names, params)
        inputs = torch.cat([tokens.new_full((1,), self.eos), tokens[:-1]])  # (N,)
        state = None
        for i in range(0, tokens.numel(), self.bptt):
            x, y = inputs[i:i + self.bptt].view(-1, 1), tokens[i:i + self.bptt].view(-1, 1)  # (t, 1)
            with torch.enable_grad():
                out = net(x, state)
                grads = torch.autograd.grad(_segment_nll(out.logits, y), params)
            with torch.no_grad():
                self._update(params, grads, steps)
            state = net.detach_state(out.state)
            yield out.logits[:, 0].detach(), out.h[:, 0].detach(), names, params

    def stream(self, tokens) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        r"""``(logits (t, V), h (t, E_last))`` per segment, before its update; the protocol of
        :meth:`lmcourse.networks.base.NeuralLM.stream`, so a neural cache can wrap this model."""
        for logits, h, _, _ in self._segments(tokens):
            yield logits, h

    def adapt(self, tokens) -> dict:
        """The weights ``{name: phi}`` after reading ``tokens`` (the wrapped model keeps phi_0)."""
        names, params = (), ()
        for _, _, names, params in self._segments(tokens):
            pass
        return {n: p.detach().clone() for n, p in zip(names, params)}

    def score(self, tokens) -> torch.Tensor:  # (N,) -> (N,) float64
        r""":math:`\log p(x_t \mid x_{<t})` for every token, each predicted before the weights saw it."""
        tokens = check_tokens(tokens, self.config.vocab_size).to(self.device)
        out = torch.empty(tokens.numel(), dtype=torch.float64, device=self.device)  # (N,): one buffer, filled in place
        i = 0
        for logits, _ in self.stream(tokens):  # nothing of a segment is kept past its turn
            t = logits.size(0)
            out[i:i + t] = log_softmax(logits).gather(1, tokens[i:i + t].view(-1, 1)).squeeze(1)  # (t,)
            i += t
        diagnose(self.model, out, self.lr, self.config.vocab_size)
        return out.cpu()


def grid_search(model: nn.Module, tokens, lrs: Sequence[float], decays: Sequence[float], method: str = "rms",
                stats: Optional[dict] = None, eps: float = DEFAULTS["eps"], bptt: int = 5,
                progress: Optional[bool] = None) -> Grid:
    """Dynamic-evaluation perplexity of ``tokens`` (a validation slice) for every ``lr`` x ``decay``."""
    make = lambda lr, decay: DynamicEval(model, method, lr, decay, eps, bptt, stats)  # noqa: E731
    return search(make, tokens, lrs, decays, method, bptt, progress)
