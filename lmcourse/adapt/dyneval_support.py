r"""What dynamic evaluation (:mod:`.dyneval`) needs beside its idea: argument checks, the reference code's defaults
and the papers' settings in its old scaling, the copy of the model that can be differentiated in evaluation mode,
progress, and the warning when the scores cannot be right.

**The adapting copy.** Dropout is off throughout. cuDNN refuses the backward pass of an LSTM in evaluation mode (the
reason the reference code broke on later PyTorch versions), so the copy runs with every module in evaluation mode
*except* torch's recurrent layers, which are in training mode with their own dropout set to 0. An ``nn.LSTM``
reads its mode for two things only, the dropout between stacked layers (zero here) and cuDNN's permission to
differentiate, so the numbers are those of evaluation mode, cuDNN keeps its fast kernels, and no other module
(embedding dropout, locked dropout, weight drop, a mixture-of-softmaxes head) ever sees training mode.
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings

import torch
import torch.nn as nn

from ..lm import check_neural
from ..networks.base import log_softmax
from ..progress import progress_enabled, tqdm

__all__ = ["METHODS", "MAX_LR", "DEFAULTS", "PAPER_SETTINGS", "number", "positive_int", "check_model", "check_method",
           "check_stats", "from_old_hyperparameters", "adaptation_copy", "segment_nll", "shown", "diagnose"]

METHODS = ("rms", "sgd")
MAX_LR = 100.0  # the largest learning rate accepted: far above any useful one (the papers' are below 1)
# The reference code's defaults for ``rms`` at bptt 5 (dynamic-evaluation code, dynamiceval.py).
DEFAULTS = dict(lr=5e-5, decay=2e-3, eps=2e-5)
# Settings published in the *old* scaling of the first version of the reference code; convert them
# with from_old_hyperparameters (Krause et al. 2018 for AWD-LSTM, dynamic-evaluation code README;
# Yang et al. 2018 for MoS, mos code README).
PAPER_SETTINGS = {
    "AWD-LSTM": dict(lr=0.002, decay=0.02, eps=0.001),
    "MoS, ptb": dict(lr=0.002, decay=0.075, eps=0.001),
    "MoS, wikitext-2": dict(lr=0.002, decay=0.02, eps=0.002),
}


# ----------------------------------------------------------------------------- checks

def number(value, name: str, low: float, high: float = math.inf, low_open: bool = False,
           high_closed: bool = False) -> float:
    """``value`` as a float in the interval; one ValueError sentence saying why it must be, otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    value = float(value)
    if value < low or (low_open and value == low) or value > high or (value == high and not high_closed):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"{name}={value:g} is outside {interval}: " + {
            "lr": ("a step moves each weight by about lr times its (scaled) gradient, so 0 leaves the weights as "
                   f"trained and a rate above {MAX_LR:g} only wrecks them; the papers' rates are below 1."),
            "decay": "a decay of 1 or more would overshoot the trained weights phi_0; use 0 <= decay < 1.",
            "eps": "eps keeps the step gradient / (MS + eps) finite where MS is 0; give a small positive number.",
        }[name])
    return value


def positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


def check_model(model) -> None:
    check_neural(model, "dyneval")


def check_method(method) -> str:
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}: use 'rms' (steps scaled by training-set RMS gradients) "
                         "or 'sgd' (plain gradient steps).")
    return method


def check_stats(model: nn.Module, stats) -> dict:
    """``stats`` when it holds a finite, non-negative MS of the shape of every parameter of ``model``."""
    if stats is None:
        raise ValueError("method='rms' divides each step by the training-set RMS gradient: pass "
                         "stats=gradient_stats(model, corpus.train), or use method='sgd'.")
    for name, p in model.named_parameters():
        if name not in stats:
            raise ValueError(f"stats has no entry for parameter {name!r}: compute them with "
                             "gradient_stats(...) on this very model.")
        if tuple(stats[name].shape) != tuple(p.shape):
            raise ValueError(f"stats[{name!r}] has shape {tuple(stats[name].shape)} but the parameter has "
                             f"{tuple(p.shape)}: compute the stats on this very model.")
    for name, _ in model.named_parameters():  # every entry is there: now their values
        ms = stats[name]
        if not bool(torch.isfinite(ms).all()) or bool((ms < 0).any()):
            raise ValueError(f"stats[{name!r}] holds NaN, an infinity or a negative number, so no learning rate "
                             "could give a finite step: recompute them with gradient_stats on a model whose "
                             "weights and training loss are finite.")
    return stats


# ----------------------------------------------------------------------- the old scaling

def from_old_hyperparameters(lr: float, decay: float, eps: float, n_segments: int, n_tensors: int) -> dict:
    r"""Convert settings of the reference code's first version into this module's scaling.

    That version summed instead of averaging: :math:`\mathrm{MS}_{old} = \sqrt{\sum_k (\nabla_k)^2} = \sqrt{K}\,\mathrm{MS}`
    over the K statistics segments, and it normalised the decay rates by the *sum* over the P
    parameter tensors, so :math:`r_{old} = r / P`. The same update therefore follows from
    :math:`\eta = \eta_{old}/\sqrt{K}`, :math:`\epsilon = \epsilon_{old}/\sqrt{K}`,
    :math:`\rho = \rho_{old}/P` (the decay; the ``--oldhyper`` switch of the dynamic-evaluation code).
    The papers' settings (:data:`PAPER_SETTINGS`) are in the old scaling; ``K`` is
    ``stats.n_segments`` and ``P`` is ``len(stats)``.
    """
    n_segments, n_tensors = positive_int(n_segments, "n_segments"), positive_int(n_tensors, "n_tensors")
    root = math.sqrt(n_segments)
    return dict(lr=lr / root, decay=decay / n_tensors, eps=eps / root)


# ----------------------------------------------------------------- the adapting copy

def adaptation_copy(model: nn.Module) -> nn.Module:
    """A private copy of ``model`` that can be differentiated with every dropout off, on CPU and cuDNN.

    Evaluation mode everywhere except torch's recurrent layers (``nn.RNNBase``: LSTM, GRU, RNN),
    which get training mode and dropout 0 (see the module docstring for why that leaves the numbers
    unchanged). Any submodule with ``flatten_parameters`` gets its copied weights made one cuDNN
    block again (a no-op on the CPU).
    """
    vocab = getattr(model, "vocab", None)
    net = copy.deepcopy(model, memo={} if vocab is None else {id(vocab): vocab})
    net.eval()
    for module in net.modules():
        if isinstance(module, nn.RNNBase):
            module.dropout = 0.0
            module.train()
        if callable(getattr(module, "flatten_parameters", None)):
            module.flatten_parameters()
    for p in net.parameters():
        p.requires_grad_(True)
    return net


def segment_nll(out_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the targets: logits (t, B, V), targets (t, B) -> ()."""
    logp = log_softmax(out_logits)  # (t, B, V)
    return -logp.gather(-1, targets.unsqueeze(-1)).mean()


# ------------------------------------------------------------------- progress and warnings

def shown(batches, total: int, desc: str, progress):
    """``batches`` behind a progress bar of ``total`` segments when ``progress`` asks for one."""
    if not progress_enabled(progress):
        return batches
    return tqdm(batches, total=total, desc=desc, unit="segment", dynamic_ncols=True)


def diagnose(model: nn.Module, log_p: torch.Tensor, lr: float, vocab_size: int) -> None:
    """Warn, in one sentence naming the cause, when the scores cannot be right: the trained weights
    are not finite, or the adapted ones diverged (no finite score, or worse than a uniform guess)."""
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        warnings.warn("Dynamic evaluation read a model whose trained weights hold NaN or an infinity, whatever "
                      "the learning rate: load weights saved before its training diverged.", RuntimeWarning,
                      stacklevel=3)
    elif not bool(torch.isfinite(log_p).all()):  # a softmax of finite logits never gives NaN or -inf
        first = int((~torch.isfinite(log_p)).nonzero()[0])
        warnings.warn(f"Dynamic evaluation diverged: from token {first} on the adapted weights give no finite "
                      f"log-probabilities; lower the learning rate (lr={lr:g}).", RuntimeWarning, stacklevel=3)
    elif log_p.numel() and -float(log_p.mean()) > math.log(vocab_size) + 1.0:
        warnings.warn(f"Dynamic evaluation diverged: the adapted weights score {-float(log_p.mean()):.3g} nats a "
                      f"token, worse than a uniform guess ({math.log(vocab_size):.3g}); lower the "
                      f"learning rate (lr={lr:g}).", RuntimeWarning, stacklevel=3)
