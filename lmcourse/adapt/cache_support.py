r"""What the neural cache (:mod:`.cache`) needs beside its idea: its argument checks, the rule of awd-lstm-lm's
``pointer.py`` it can follow to reproduce that code's numbers, and the cache's weights at one position, for plots.

``pointer.py`` (Merity et al. 2018) applies the cache only once more than ``window`` tokens have been read, so its
first ``window + 1`` positions are scored by the model alone; Grave et al. (2017) use whatever history exists.
``NeuralCache(pointer_compat=True)`` does as ``pointer.py`` does (:func:`skip_first`). Its other quirk, also
skipping the first token of each later ``bptt`` chunk, moves the perplexity by a few tokens in tens of thousands
and is not copied.
"""
from __future__ import annotations

import math
import operator

import torch

__all__ = ["MODES", "number", "check_theta", "check_lam", "check_window", "check_mode", "check_stream", "skip_first",
           "attention"]

MODES = ("linear", "global")


def number(value, name: str) -> float:
    """``value`` as a float; one ValueError sentence unless it is a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return float(value)


def check_theta(theta) -> float:
    theta = number(theta, "theta")
    if theta < 0:
        raise ValueError(f"theta={theta!r} is negative: the cache's inverse temperature must be >= 0 "
                         "(0 gives every stored position the same weight).")
    return theta


def check_lam(lam) -> float:
    lam = number(lam, "lam")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam={lam!r} is not a mixing weight: give a number in [0, 1] (0 = the model alone).")
    return lam


def check_window(window, name: str = "window") -> int:
    try:
        value = None if isinstance(window, bool) else operator.index(window)
    except TypeError:
        value = None
    if value is None or value < 1:
        raise ValueError(f"{name}={window!r} is not a size: give a positive integer number of positions.")
    return value


def check_mode(mode) -> str:
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is unknown: use 'linear' (interpolation with lam) "
                         "or 'global' (one softmax with alpha).")
    return mode


def check_stream(hidden: torch.Tensor, targets: torch.Tensor, scores: torch.Tensor, what: str) -> torch.Tensor:
    """``targets`` as long ids on ``hidden``'s device, once the shapes (T, V), (T, H), (T,) are seen to agree."""
    if scores.dim() != 2:
        raise ValueError(f"{what} must be (T, V), one row per position; got shape {tuple(scores.shape)}.")
    if hidden.dim() != 2:
        raise ValueError(f"hidden must be (T, H), one state per position; got shape {tuple(hidden.shape)}.")
    if targets.dim() != 1:
        raise ValueError(f"targets must be (T,), one token id per position; got shape {tuple(targets.shape)}.")
    T = scores.shape[0]
    if hidden.shape[0] != T or targets.shape[0] != T:
        raise ValueError(f"{what}, hidden and targets must have one row per position, but have "
                         f"{T}, {hidden.shape[0]} and {targets.shape[0]} rows.")
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= scores.shape[1]):
        raise ValueError(f"targets hold an id outside 0..{scores.shape[1] - 1}: they must index the "
                         f"columns of {what}.")
    return targets.long().to(hidden.device)


def skip_first(scores: torch.Tensor, log_p_vocab: torch.Tensor, start: int, window: int) -> torch.Tensor:
    """pointer.py's rule: the model alone at positions ``t <= window`` (``start``: the first row's position)."""
    t = start + torch.arange(scores.shape[-1], device=scores.device)
    return torch.where(t > window, scores, log_p_vocab.expand_as(scores))


def attention(hidden: torch.Tensor, t: int, theta: float, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The cache's weights :math:`a_i` at position ``t``: positions ``i`` (n,) and weights (n,), n <= window."""
    theta, window = check_theta(theta), check_window(window)
    if not 0 <= t < hidden.shape[0]:
        raise ValueError(f"t={t} is outside the stream of {hidden.shape[0]} positions.")
    i = torch.arange(max(0, t - window), t, device=hidden.device)           # (n,)
    return i, torch.softmax(theta * (hidden[i] @ hidden[t]), 0)             # (n,), (n,)
