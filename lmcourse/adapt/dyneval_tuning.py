"""Tuning dynamic evaluation's rate and decay on validation text: a grid of settings, each one adapting pass
(:func:`lmcourse.adapt.dyneval.grid_search` builds the settings and hands them here)."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from ..lm import mean_nll, perplexity_from_nll
from ..progress import progress_enabled, tqdm
from .dyneval_support import positive_int

__all__ = ["Grid", "paper_grid", "search"]


@dataclass
class Grid:
    """Perplexities of a grid search: ``ppl[i, j]`` for ``lrs[i]`` and ``decays[j]``."""

    lrs: list
    decays: list
    ppl: torch.Tensor  # (len(lrs), len(decays))
    method: str
    bptt: int

    @property
    def best(self) -> dict:
        """``{"lr", "decay", "ppl"}`` of the lowest perplexity."""
        k = int(torch.argmin(self.ppl))
        i, j = divmod(k, len(self.decays))
        return dict(lr=self.lrs[i], decay=self.decays[j], ppl=float(self.ppl[i, j]))


def paper_grid(bptt: int = 5) -> tuple[list, list]:
    """The reference code's search grid, scaled by ``bptt / 5`` (dynamic-evaluation code, ``--grid``)."""
    f = positive_int(bptt, "bptt") / 5.0
    return [v * 1e-5 * f for v in (3, 4, 5, 6, 7, 10)], [v * 1e-3 * f for v in (1, 2, 3, 5)]


def search(make: Callable[[float, float], object], tokens, lrs: Sequence[float], decays: Sequence[float], method: str,
           bptt: int, progress: Optional[bool] = None) -> Grid:
    """The perplexity of ``tokens`` under ``make(lr, decay)`` (a dynamically evaluated model, built for every setting
    before any is scored, so a bad one is refused first) for every ``lr`` x ``decay``."""
    lrs, decays = [float(v) for v in lrs], [float(v) for v in decays]
    if not lrs or not decays:
        raise ValueError("grid_search needs at least one lr and one decay to try.")
    runs = [make(lr, decay) for lr in lrs for decay in decays]
    ppl = torch.full((len(lrs), len(decays)), math.nan, dtype=torch.float64)
    bar = None
    if progress_enabled(progress):
        bar = tqdm(total=len(runs), desc=f"grid {len(lrs)} lr x {len(decays)} decay", unit="run", dynamic_ncols=True)
    for k, run in enumerate(runs):
        with warnings.catch_warnings():  # a diverged setting is marked below, by its infinite perplexity
            warnings.simplefilter("ignore", RuntimeWarning)
            nll = mean_nll(run, tokens)
        ppl.view(-1)[k] = perplexity_from_nll(nll)  # a diverged setting: infinite perplexity
        if bar is not None:
            bar.update(1)
            bar.set_postfix(lr=f"{run.lr:.3g}", decay=f"{run.decay:.3g}", ppl=f"{float(ppl.view(-1)[k]):.2f}")
    if bar is not None:
        bar.close()
    return Grid(lrs, decays, ppl, method, bptt)
