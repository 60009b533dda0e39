r"""What the training loop keeps of its losses: the divergence check and the epoch's means.

A step's loss stays on the device; the loop reads a run of them with one sync
(:func:`first_diverged`), every batch on the CPU and every 50 on a GPU. A loss diverged when it
is not finite or exceeds a uniform guess by more than :data:`DIVERGENCE_MARGIN` nats,

.. math::  L_i > \log V + \text{margin}.

Under ``torchrun`` the ranks agree on the earliest diverged batch of any rank and on anyone's stop
flag (:func:`agree`), so every rank leaves the epoch at the same batch. The epoch's loss is the
token-weighted mean :math:`\bar L = \sum_i n_i L_i / \sum_i n_i`, summed in float64 (:func:`epoch_means`).
"""
from __future__ import annotations

import math

import torch

from . import distributed

__all__ = ["DIVERGENCE_MARGIN", "loss_limit", "first_diverged", "agree", "epoch_means"]

# Nats above log V (a uniform guess) that count as a diverged loss. SGD at rate 20 (Zaremba et al. 2014;
# pytorch/examples 2017) overshoots log V by up to about 4.5 nats in its first steps and then recovers.
DIVERGENCE_MARGIN = 6.0


def loss_limit(vocab_size: int) -> float:
    """:math:`\\log V` + :data:`DIVERGENCE_MARGIN`: a loss above it has diverged."""
    return math.log(vocab_size) + DIVERGENCE_MARGIN


def first_diverged(losses: list, since: int, limit: float) -> tuple[int, float]:
    """``(index, value)`` of the first diverged loss in ``losses[since:]`` (one device sync), else ``(-1, nan)``."""
    if len(losses) <= since:
        return -1, math.nan
    recent = torch.stack(losses[since:])  # (n,)
    bad = ~torch.isfinite(recent) | (recent > limit)
    if not bool(bad.any()):
        return -1, math.nan
    index = int(bad.nonzero()[0])
    return index, float(recent[index])


def agree(index: int, value: float, since: int, stop: bool) -> tuple[int, float, bool]:
    """The earliest diverged batch of any rank (relative to ``since``; its value on the rank that saw it,
    NaN elsewhere) and whether any rank asked to stop."""
    mine = float(since + index) if index >= 0 else math.inf
    flags = distributed.all_max(torch.tensor([-mine, float(stop)], dtype=torch.float64))
    first = -float(flags[0])
    value = value if first == mine else math.nan
    return (int(first) - since if math.isfinite(first) else -1), value, bool(flags[1])


def epoch_means(losses: list, weights: list, penalties: list, device) -> dict:
    """``{"tokens", "loss"[, "ar", "tar"]}``: the token-weighted mean loss and the mean (AR, TAR) of the steps."""
    n = sum(weights)
    w = torch.tensor(weights, dtype=torch.float64, device=device)
    out = {"tokens": n, "loss": float((torch.stack(losses).double() * w).sum()) / n if losses else math.nan}
    if penalties and penalties[0]:
        out["ar"], out["tar"] = torch.stack([torch.stack(p) for p in penalties]).double().mean(0).tolist()
    return out
