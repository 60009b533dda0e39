"""Small helpers for the lessons' cells."""
from __future__ import annotations

import torch


def verdict(name: str, diff: float, atol: float) -> str:
    """The line :func:`cmp` prints: "agrees to 1.1e-16 (tolerance 1e-06)" or "DIFFERS by ...".

    ``diff`` is the largest absolute difference found, ``atol`` the tolerance it is held to."""
    if diff > atol or diff != diff:  # NaN never agrees
        return f"{name:<28} DIFFERS by {diff:.2g} (tolerance {atol:g})"
    if diff == 0:
        return f"{name:<28} agrees exactly (tolerance {atol:g})"
    return f"{name:<28} agrees to {diff:.2g} (tolerance {atol:g})"


def cmp(name: str, ours: torch.Tensor, reference: torch.Tensor, atol: float = 1e-6) -> float:
    """Compare a tensor derived on screen with the package's (or torch's) and print the verdict.

    Returns the largest absolute difference (end the cell's line with ``;`` so it is not echoed);
    raises if the shapes differ or the difference exceeds ``atol``. The two may live on different devices
    (a model's tensor on CUDA, a reference built on the CPU): both are compared on the host."""
    ours, reference = (torch.as_tensor(t).detach().cpu() for t in (ours, reference))
    if ours.shape != reference.shape:
        raise ValueError(f"{name}: shapes differ, {tuple(ours.shape)} vs {tuple(reference.shape)}.")
    diff = (ours.double() - reference.double()).abs().max().item() if ours.numel() else 0.0
    print(verdict(name, diff, atol))
    if not diff <= atol:
        raise AssertionError(f"{name}: differs by {diff:.3g}, more than the tolerance {atol:g}.")
    return diff
