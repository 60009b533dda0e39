r"""The optimisers of the course and the knobs the trainer turns on them.

- SGD: :math:`\theta \leftarrow \theta - \eta\, g`; Adam; and averaged SGD (ASGD), which steps like
  SGD and keeps the running average :math:`\bar\theta = \frac{1}{K}\sum_{k} \theta_k` of the iterates
  since averaging began (``torch.optim.ASGD(lr, t0=0, lambd=0)``: averaging from its first step,
  no decay of the rate; Merity et al. 2018, Section 3).
- :func:`should_switch_to_asgd`: NT-ASGD's non-monotone trigger.
- :func:`scaled_lr`: variable BPTT's step size :math:`\eta\,\ell/\text{bptt}` (Merity et al. 2018,
  Section 4.1).
- :func:`averaged_weights`: evaluate (and save) :math:`\bar\theta` instead of :math:`\theta`.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

OPTIMIZERS = ("sgd", "ntasgd", "asgd", "adam")
__all__ = ["OPTIMIZERS", "make_optimizer", "optimizer_name", "set_lr", "scaled_lr", "averaged_weights",
           "should_switch_to_asgd"]


def make_optimizer(name: str, params, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """SGD, Adam, or ASGD with averaging from the first step (``t0=0``) and no decay (``lambd=0``).

    On CUDA, ASGD is built ``capturable``: its step count, rate and averaging weight stay tensors on the
    GPU, so a step never waits for the device (the default reads them back with ``.item()`` for every
    parameter at every step). On the CPU it is torch's default ASGD, which trained the committed runs.
    """
    params = list(params)
    if name == "asgd":
        on_gpu = bool(params) and all(p.is_cuda for p in params)
        return torch.optim.ASGD(params, lr=lr, t0=0, lambd=0.0, weight_decay=weight_decay, capturable=on_gpu)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name != "sgd":
        raise ValueError(f"No optimizer named {name!r}: use 'sgd', 'asgd' or 'adam'.")
    return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)


def optimizer_name(optimizer) -> str:
    """``'sgd'``, ``'asgd'`` or ``'adam'``: the name :func:`make_optimizer` builds it from."""
    return {torch.optim.ASGD: "asgd", torch.optim.Adam: "adam"}.get(type(optimizer), "sgd")


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the step size. ASGD steps with its stored ``eta`` (= lr when ``lambd=0``), so set that too."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    if isinstance(optimizer, torch.optim.ASGD):
        for state in optimizer.state.values():
            if "eta" in state:
                if torch.is_tensor(state["eta"]):
                    state["eta"].fill_(lr)
                else:
                    state["eta"] = lr


@contextmanager
def scaled_lr(optimizer: torch.optim.Optimizer, factor: float):
    r"""Step with :math:`\eta \cdot` ``factor`` inside the block, :math:`\eta` again after it.

    Variable BPTT's rescaling (Merity et al. 2018, Section 4.1).
    """
    if factor == 1:
        yield
        return
    lr = optimizer.param_groups[0]["lr"]
    set_lr(optimizer, lr * factor)
    try:
        yield
    finally:
        set_lr(optimizer, lr)


@contextmanager
def averaged_weights(optimizer: torch.optim.Optimizer, params):
    r"""Inside the block the parameters hold ASGD's averages :math:`\bar\theta` (``state['ax']``)."""
    if not isinstance(optimizer, torch.optim.ASGD):
        yield False
        return
    pairs = [(p, optimizer.state[p]["ax"]) for p in params if "ax" in optimizer.state.get(p, {})]
    saved = [p.detach().clone() for p, _ in pairs]
    with torch.no_grad():
        for p, ax in pairs:
            p.copy_(ax)
    try:
        yield bool(pairs)
    finally:
        with torch.no_grad():
            for (p, _), theta in zip(pairs, saved):
                p.copy_(theta)


def should_switch_to_asgd(val_losses: list, val_loss: float, nonmono: int) -> bool:
    r"""NT-ASGD's trigger: ``len(H) > n`` and :math:`L_{val} > \min H_{[:-n]}` (awd-lstm-lm code, ``main.py``).

    ``H`` holds the earlier validation losses; the comparison skips the last ``n`` of them (the
    code's rule; Merity et al. 2018, Section 3 words it differently, a known typo).
    """
    return len(val_losses) > nonmono and val_loss > min(val_losses[:-nonmono])
