"""Small helpers for the lessons' cells."""
from __future__ import annotations

import torch


def cmp(name: str, ours: torch.Tensor, reference: torch.Tensor, atol: float = 1e-6) -> float:
    """Compare a tensor derived on screen with the package's (or torch's) and print the verdict.

    Returns the largest absolute difference; raises if the shapes differ or it exceeds ``atol``."""
    ours, reference = torch.as_tensor(ours), torch.as_tensor(reference)
    if ours.shape != reference.shape:
        raise ValueError(f"{name}: shapes differ, {tuple(ours.shape)} vs {tuple(reference.shape)}.")
    diff = (ours.double() - reference.double()).abs().max().item() if ours.numel() else 0.0
    exact = torch.equal(ours, reference)
    print(f"{name:<28} exact: {str(exact):<5}  max |diff|: {diff:.2e}")
    if diff > atol:
        raise AssertionError(f"{name}: differs by {diff:.3g}, more than {atol:g}.")
    return diff
