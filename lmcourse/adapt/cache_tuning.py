r"""Tuning the neural cache on validation text: the model runs once, every setting reuses its states.

The cache's knobs (:math:`\theta`, :math:`\lambda` or :math:`\alpha`, the window) change nothing in
the model, so one pass collects what every setting needs, per position :math:`t`:
the state :math:`h_t` (it has read :math:`x_1, \dots, x_t`), the log-probability of the word it predicts,
:math:`\log p_{\text{vocab}}(x_{t+1})`, its logit :math:`z_{t,x_{t+1}}` and :math:`\log\sum_w e^{z_{t,w}}` (:func:`collect`; nothing of size ``V`` is
kept). Then

- :func:`grid_search` computes the cache sums :math:`L^{\text{all}}_t, L^{\text{match}}_t` once per
  :math:`\theta` — all thetas in one batched product per chunk — and mixes them with every
  :math:`\lambda` (or :math:`\alpha`) at once, a ``(n_theta, n_lam, T)`` tensor;
- :func:`window_sweep` does the same for a list of window sizes (a log scale, as Grave et al. 2017
  explored them);
- :func:`cache_scores` gives the per-token log-probabilities of one setting, for plots, and :func:`cached` those
  of the setting a grid chose (:attr:`CacheGrid.setting`) on other text.

All three give the numbers :class:`lmcourse.adapt.cache.NeuralCache` gives on the same text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from ..lm import check_tokens, perplexity_from_nll
from ..networks.base import log_softmax
from ..progress import progress_enabled, tqdm
from .cache import CacheMemory, mix_global, mix_linear
from .cache_support import check_lam, check_mode, check_theta, check_window, number, skip_first

PIECE = 4096  # positions per progress-bar step
FIELDS = ("targets", "hidden", "log_p", "z", "log_z")


@dataclass
class CacheInputs:
    """What the cache needs from one pass of the model over a stream, one row per position."""

    targets: torch.Tensor  # (T,) the tokens x_{t+1}, each the word h_t predicts
    hidden: torch.Tensor  # (T, H) the last layer's output h_t, which has read x_1..x_t
    log_p: torch.Tensor  # (T,) log p_vocab(x_{t+1})
    z: torch.Tensor  # (T,) the logit z_{t, x_{t+1}}
    log_z: torch.Tensor  # (T,) log sum_w exp z_{t, w}

    def __len__(self) -> int:
        return self.targets.shape[0]

    def head(self, n: int) -> "CacheInputs":
        """The first ``n`` positions (a prefix keeps every position's history intact)."""
        return CacheInputs(*(getattr(self, f)[:n] for f in FIELDS))

    def to(self, device) -> "CacheInputs":
        return CacheInputs(*(getattr(self, f).to(device) for f in FIELDS))

    def ppl(self) -> float:
        """The model's own perplexity on the stream."""
        return perplexity_from_nll(-float(self.log_p.double().mean()))  # a diverged stream: inf, not an error


def _bar(total: int, desc: str, progress: Optional[bool]):
    return tqdm(total=total, desc=desc, unit="tok", unit_scale=True, disable=not progress_enabled(progress),
                leave=False)


def collect(model, tokens, progress: Optional[bool] = None) -> CacheInputs:
    """Run ``model.stream(tokens)`` once and keep :class:`CacheInputs` (see the module docstring)."""
    vocab = getattr(model, "vocab", None)
    if vocab is None or not callable(getattr(model, "stream", None)):
        raise TypeError("collect needs a model with a vocabulary and a stream(tokens) method, such as an RNNLM "
                        "with model.vocab set.")
    tokens = check_tokens(tokens, len(vocab))
    parts, start = [], 0
    with _bar(len(tokens), "model pass", progress) as bar:
        for logits, h in model.stream(tokens):
            with torch.no_grad():
                logits = logits.detach().to(torch.promote_types(logits.dtype, torch.float32))
                y = tokens[start:start + h.shape[0]].to(logits.device).view(-1, 1)
                parts.append((y.view(-1), h.detach(), log_softmax(logits).gather(1, y).view(-1),
                              logits.gather(1, y).view(-1), torch.logsumexp(logits, 1)))
            start += h.shape[0]
            bar.update(h.shape[0])
    return CacheInputs(*(torch.cat(p) for p in zip(*parts)))


def cache_sums(inputs: CacheInputs, thetas, window: int, progress: Optional[bool] = None, desc: str = "cache"):
    r""":math:`L^{\text{all}}, L^{\text{match}}` (each (n_theta, T)) for every theta, one pass over the stream."""
    h = inputs.hidden
    thetas = torch.as_tensor([check_theta(float(t)) for t in thetas], dtype=h.dtype, device=h.device)
    memory, l_all, l_match = CacheMemory(check_window(window)), [], []
    with _bar(len(inputs), desc, progress) as bar:
        for a in range(0, len(inputs), PIECE):
            la, lm = memory.read(h[a:a + PIECE], inputs.targets[a:a + PIECE].to(h.device), thetas)
            l_all.append(la)
            l_match.append(lm)
            bar.update(la.shape[1])
    return torch.cat(l_all, 1), torch.cat(l_match, 1)


def _mixed(inputs: CacheInputs, l_all, l_match, weights, mode: str, window: int, pointer_compat: bool):
    """Log-probabilities (n_theta, n_weights, T) for every lam (linear) or alpha (global)."""
    lp, dev = inputs.log_p, inputs.log_p.device
    w = torch.as_tensor(weights, dtype=lp.dtype, device=dev).view(1, -1, 1)       # (1, n_w, 1)
    l_all, l_match = l_all.to(lp).unsqueeze(1), l_match.to(lp).unsqueeze(1)     # (n_theta, 1, T)
    if mode == "linear":
        out = mix_linear(lp, l_all, l_match, w)
    else:
        out = mix_global(inputs.z.to(lp), inputs.log_z.to(lp), l_all, l_match, w)
    return skip_first(out, lp, 0, window) if pointer_compat else out


def _weights(mode: str, lams, alphas) -> list[float]:
    if check_mode(mode) == "linear":
        if lams is None:
            raise ValueError("mode='linear' needs lam values: pass lams=[...] (numbers in [0, 1]).")
        return [check_lam(float(v)) for v in lams]
    if alphas is None:
        raise ValueError("mode='global' needs alpha values: pass alphas=[...].")
    return [number(float(v), "alpha") for v in alphas]


def cache_scores(inputs: CacheInputs, theta: float, window: int, lam: Optional[float] = None,
                 alpha: Optional[float] = None, mode: str = "linear", pointer_compat: bool = False,
                 progress: Optional[bool] = None) -> torch.Tensor:  # -> (T,) float64
    """Per-token log-probabilities with one cache setting, as :class:`~lmcourse.adapt.cache.NeuralCache` gives them."""
    weights = _weights(mode, None if lam is None else [lam], None if alpha is None else [alpha])
    l_all, l_match = cache_sums(inputs, [theta], window, progress)
    return _mixed(inputs, l_all, l_match, weights, mode, window, pointer_compat)[0, 0].double().cpu()


@dataclass
class CacheGrid:
    """Validation perplexity for every (theta, lam) or (theta, alpha) pair, and the best of them."""

    mode: str
    window: int
    thetas: list
    weights: list  # the lams (linear) or alphas (global)
    ppl: torch.Tensor  # (n_theta, n_weights)
    base_ppl: float  # the model alone

    @property
    def best(self) -> tuple[float, float, float]:
        """(theta, lam or alpha, perplexity) of the lowest perplexity."""
        k = int(torch.argmin(self.ppl))
        i, j = divmod(k, self.ppl.shape[1])
        return self.thetas[i], self.weights[j], float(self.ppl[i, j])

    @property
    def setting(self) -> dict:
        """The best linear cache as ``dict(theta, lam, window, ppl)`` (``ppl`` infinite where it is not a number),
        what :func:`cached` scores other text with and what the lessons store."""
        if self.mode != "linear":
            raise ValueError(f"setting is the linear cache's (theta, lam); this grid is {self.mode!r}: read .best.")
        theta, lam, ppl = self.best
        return dict(theta=theta, lam=lam, window=self.window, ppl=ppl if math.isfinite(ppl) else math.inf)


def grid_search(inputs: CacheInputs, thetas: Sequence[float], lams: Optional[Sequence[float]] = None,
                alphas: Optional[Sequence[float]] = None, window: int = 2000, mode: str = "linear",
                pointer_compat: bool = False, progress: Optional[bool] = None, sums=None) -> CacheGrid:
    r"""Perplexity over a :math:`\theta \times \lambda` (or :math:`\theta \times \alpha`) grid; see the module docstring.

    ``sums``: :func:`cache_sums` of these ``thetas`` and ``window``, when already computed (a linear
    and a global grid over the same thetas share them)."""
    weights = _weights(mode, lams, alphas)
    thetas = [check_theta(float(t)) for t in thetas]
    l_all, l_match = sums if sums is not None else cache_sums(inputs, thetas, window, progress, desc="cache grid")
    if l_all.shape != (len(thetas), len(inputs)):
        raise ValueError(f"sums hold {tuple(l_all.shape)} values, not (n_theta, T) = ({len(thetas)}, {len(inputs)}): "
                         "compute them with cache_sums(inputs, thetas, window).")
    nll = torch.stack([-_mixed(inputs, l_all[i:i + 1], l_match[i:i + 1], weights, mode, window,
                               pointer_compat)[0].double().mean(-1) for i in range(len(thetas))])  # (n_theta, n_w)
    return CacheGrid(mode, window, thetas, weights, nll.exp().cpu(), inputs.ppl())  # float64: inf past MAX_LOG too


def cached(inputs: CacheInputs, setting: dict) -> torch.Tensor:  # -> (T,) float64
    """Per-token log-probabilities of ``inputs`` with the linear cache ``setting`` (:attr:`CacheGrid.setting`, tuned
    on other text)."""
    return cache_scores(inputs, setting["theta"], setting["window"], lam=setting["lam"])


def window_sweep(inputs: CacheInputs, windows: Sequence[int], theta: float, lam: Optional[float] = None,
                 alpha: Optional[float] = None, mode: str = "linear", progress: Optional[bool] = None) -> list[float]:
    """Perplexity for each window size (e.g. a log scale, 50 ... 10,000) at one theta and lam or alpha."""
    weights = _weights(mode, None if lam is None else [lam], None if alpha is None else [alpha])
    out = []
    for w in windows:
        l_all, l_match = cache_sums(inputs, [theta], check_window(w), progress, desc=f"window {w}")
        out.append(perplexity_from_nll(-float(_mixed(inputs, l_all, l_match, weights, mode, w, False).double().mean())))
    return out
