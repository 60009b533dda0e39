r"""Activation regularisation (AR) and temporal activation regularisation (TAR).

Both are L2 penalties on the last LSTM layer's outputs, added to the loss that is back-propagated
(not to the reported loss). Merity, Keskar & Socher 2017 (arXiv 1708.02182, §4.6), as computed in
AWD-LSTM's ``main.py`` (awd-lstm-lm code; Merity et al. 2018, Section 4.6): a *mean* over all ``T*B*H`` entries, defaults
``alpha = 2`` and ``beta = 1``.
"""
from __future__ import annotations

import math
import numbers

import torch

__all__ = ["activation_regularization", "temporal_activation_regularization"]


def _check_coefficient(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"The coefficient {name} must be a number, got {type(value).__name__}: "
                        "pass a float such as 2.0.")
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"The coefficient {name}={value} is negative or not finite: use {name} >= 0.")
    return value


def _check_sequence(h, what: str) -> None:
    if not isinstance(h, torch.Tensor) or not h.is_floating_point() or h.dim() < 1:
        raise TypeError(f"{what} expects a floating-point tensor (T, B, H) with time first: pass the LSTM output.")


def activation_regularization(h_dropped: torch.Tensor, alpha: float) -> torch.Tensor:
    r"""AR: penalise large activations of the *dropped* last-layer output.

    .. math::  \text{AR} = \alpha \, \frac{1}{T B H} \sum_{t,b,h} (m \odot h_t)_{b,h}^2 .

    Args:
        h_dropped: ``(T, B, H)`` output after the final (locked) dropout.
        alpha: ``alpha >= 0``.
    Returns: a scalar tensor.
    """
    alpha = _check_coefficient(alpha, "alpha")
    _check_sequence(h_dropped, "activation_regularization")
    return alpha * h_dropped.pow(2).mean()


def temporal_activation_regularization(h_raw: torch.Tensor, beta: float) -> torch.Tensor:
    r"""TAR: penalise changes of the *raw* (not dropped) last-layer output between time steps.

    .. math::  \text{TAR} = \beta \, \frac{1}{(T-1) B H} \sum_{t=2}^{T} \sum_{b,h} (h_{t,b,h} - h_{t-1,b,h})^2 .

    A sequence of one step has no consecutive pair, and the penalty is zero.

    Args:
        h_raw: ``(T, B, H)`` output before the final dropout, time first.
        beta: ``beta >= 0``.
    Returns: a scalar tensor.
    """
    beta = _check_coefficient(beta, "beta")
    _check_sequence(h_raw, "temporal_activation_regularization")
    if h_raw.shape[0] < 2:
        return h_raw.new_zeros(())
    dh = h_raw[1:] - h_raw[:-1]  # (T-1, B, H)
    return beta * dh.pow(2).mean()
