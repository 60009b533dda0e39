r"""The training and evaluation loss: cross-entropy per token, from logits or from log-probabilities.

For targets :math:`y_i` and a head's scores :math:`z_i \in \mathbb{R}^V` the loss is

.. math::  L = -\frac{1}{N}\sum_{i=1}^{N} \log p(y_i \mid \cdot), \qquad
           \log p(v) = z_v - \log\textstyle\sum_u e^{z_u} \ \text{(logits)} \quad\text{or}\quad
           \log p(v) = z_v \ \text{(log-probabilities)}.

A softmax head returns logits and the loss is ``F.cross_entropy``. A head that already returns
log-probabilities (the mixture of softmaxes, Yang et al. 2018) says so with the attribute
``returns_log_probs = True``; its scores go to ``F.nll_loss`` as they are, without a second
log-softmax pass or another (N, V) copy. Both the trainer and :func:`evaluate` use
:func:`token_nll`, so the two can never disagree.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..corpora.data import bptt_batches
from .base import inference

__all__ = ["returns_log_probs", "token_nll", "evaluate"]


def returns_log_probs(model: nn.Module) -> bool:
    """True when ``model`` (or a wrapped ``.module``) says its forward returns log-probabilities: its own
    ``returns_log_probs`` (the contract of :mod:`lmcourse.lm`), else its head's."""
    model = getattr(model, "module", model)  # DistributedDataParallel keeps the model in .module
    own = getattr(model, "returns_log_probs", None)
    if isinstance(own, bool):
        return own
    return bool(getattr(getattr(model, "head", model), "returns_log_probs", False))


def token_nll(scores: torch.Tensor, targets: torch.Tensor, log_probs: bool, reduction: str = "mean") -> torch.Tensor:
    r""":math:`-\log p(y_i)` summed or averaged over all positions; ``scores`` (..., V), ``targets`` (...).

    ``log_probs``: the scores are log-probabilities (``F.nll_loss``), else logits (``F.cross_entropy``).
    """
    flat = scores.reshape(-1, scores.size(-1))  # (N, V), a view when scores are contiguous
    y = targets.reshape(-1)  # (N,)
    if log_probs:
        return F.nll_loss(flat, y, reduction=reduction)
    return F.cross_entropy(flat, y, reduction=reduction)


def evaluate(model: nn.Module, source: torch.Tensor, bptt: int = 35) -> float:
    r"""Mean cross-entropy :math:`L` (nats per token) over a batchified ``source`` (T, B), state carried.

    Every column is read from a zero state and scored on rows 1 .. T-1, so the mean is over
    :math:`(T-1) B` tokens; the sum is accumulated in float64. The module's train/eval mode is
    restored on return.
    """
    log_probs = returns_log_probs(model)
    with inference(model):
        state = model.init_state(source.size(1))
        total = torch.zeros((), dtype=torch.float64, device=source.device)
        for x, y in bptt_batches(source, bptt):
            out = model(x, state)
            state = out.state
            scores = out.logits.to(torch.promote_types(out.logits.dtype, torch.float32))  # (t, B, V)
            total += token_nll(scores, y, log_probs, reduction="sum").double()
    return float(total) / ((source.size(0) - 1) * source.size(1))
