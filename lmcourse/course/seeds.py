r"""Ranking over seeds: the course's one rule for saying that one thing beats another.

A claim compares two settings A and B, each trained once per seed, by a score where lower is better
(perplexity). With :math:`\bar a, \bar b` the means and :math:`s_a, s_b` the sample standard deviations
over the seeds, A beats B **beyond the spread** when

.. math::

    \bar b - \bar a > s_a + s_b,

so that the gap is wider than both settings' seed-to-seed wobble together. With fewer than 2 seeds on
either side there is no spread, and nothing is ranked (the rule says so, it does not guess). Every lesson
that ranks uses :func:`beyond_spread`, and prints :func:`mean_sd` as "mean ± sd".
"""
from __future__ import annotations

import math
import statistics
from typing import Sequence

__all__ = ["MIN_SEEDS", "mean_sd", "beyond_spread", "gap", "describe"]

MIN_SEEDS = 2  # fewer seeds on a side: no spread, no ranking


def _values(xs: Sequence[float], what: str) -> list[float]:
    values = [float(x) for x in xs]
    if not values:
        raise ValueError(f"{what} has no scores: give one score per seed.")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{what} holds a score that is not a finite number ({values}): rerun the diverged seed.")
    return values


def mean_sd(xs: Sequence[float], what: str = "the scores") -> tuple[float, float]:
    """``(mean, sample sd)`` over seeds; the sd is 0.0 for a single seed (no spread measured)."""
    v = _values(xs, what)
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def beyond_spread(better: Sequence[float], worse: Sequence[float]) -> bool:
    r"""True when ``better`` (scores per seed, lower is better) beats ``worse`` by more than the two spreads:
    :math:`\bar w - \bar b > s_b + s_w`. False whenever either side has fewer than :data:`MIN_SEEDS` seeds."""
    b, w = _values(better, "the better side"), _values(worse, "the worse side")
    if len(b) < MIN_SEEDS or len(w) < MIN_SEEDS:
        return False
    (mb, sb), (mw, sw) = mean_sd(b), mean_sd(w)
    return mw - mb > sb + sw


def gap(better: Sequence[float], worse: Sequence[float]) -> float:
    r"""The relative change of the means, :math:`\bar b / \bar w - 1` (negative when ``better`` is lower)."""
    return mean_sd(better, "the better side")[0] / mean_sd(worse, "the worse side")[0] - 1


def describe(xs: Sequence[float], digits: int = 2) -> str:
    """``"mean ± sd"`` of the scores, as every lesson prints them."""
    m, s = mean_sd(xs)
    return f"{m:.{digits}f} ± {s:.{digits}f}"
