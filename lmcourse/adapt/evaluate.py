"""A trained model scored alone and with the wrappers on top: the neural cache, dynamic evaluation, or both.

:func:`evaluate_model` is what ``python -m lmcourse evaluate`` prints and what lesson 09 reads for the
papers' recipes: valid and test perplexity, each split scored as one stream (batch size 1), the way
the papers report test perplexity.
"""
from __future__ import annotations

from typing import Optional

from ..lm import perplexity
from .cache import NeuralCache
from .cache_tuning import collect, grid_search as cache_grid
from .dyneval import (DEFAULTS, DynamicEval, PAPER_SETTINGS, from_old_hyperparameters, gradient_stats,
                      grid_search as dyneval_grid, paper_grid)

__all__ = ["evaluate_model", "CACHE_THETAS", "CACHE_LAMS", "TUNE_TOKENS"]

CACHE_THETAS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0)  # the cache's grid on validation text
CACHE_LAMS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
TUNE_TOKENS = 30_000  # dynamic evaluation's grid reads the first 30k validation tokens (its --gridfast)


def _ppl(model, tokens) -> float:
    return round(perplexity(model, tokens), 3)


def _dyneval_settings(evaluation: dict, stats) -> tuple[dict, str]:
    """The papers' dynamic-evaluation settings (converted from their old scaling), else the code's defaults."""
    paper = evaluation.get("dyneval")
    if paper:
        settings = from_old_hyperparameters(**PAPER_SETTINGS[paper["paper"]], n_segments=stats.n_segments,
                                            n_tensors=len(stats))
        return settings, paper["source"]
    return dict(DEFAULTS), "dynamic-evaluation code defaults"


def evaluate_model(model, train, valid, test, cache: bool = False, dyneval: bool = False, tune: bool = False,
                   evaluation: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    r"""Valid and test perplexity of ``model`` alone and with the chosen wrappers; returns a dict.

    Dynamic evaluation (``rms``, segments of 5; Krause et al. 2018) needs the RMS gradients of the
    training text ``train``; the cache (linear interpolation, Grave et al. 2017) wraps the model, or
    the dynamically evaluated model when both are asked for. Settings: ``tune`` searches the
    validation text (dynamic evaluation: the reference code's grid on its first :data:`TUNE_TOKENS`
    tokens; the cache: :data:`CACHE_THETAS` x :data:`CACHE_LAMS`), else ``evaluation`` (a preset's
    paper settings), else the packages' defaults. Test text is never used to choose anything.
    """
    evaluation = evaluation or {}
    out = {"base_valid_ppl": _ppl(model, valid), "base_test_ppl": _ppl(model, test)}
    scorer = model
    if dyneval:
        columns = max(1, min(100, len(train) // 50))  # the reference code's 100 streams, fewer on tiny text
        stats = gradient_stats(model, train, batch_size=columns, bptt=5, progress=progress)
        if tune:
            lrs, decays = paper_grid(5)
            best = dyneval_grid(model, valid[:TUNE_TOKENS], lrs, decays, stats=stats, bptt=5, progress=progress).best
            settings, source = dict(lr=best["lr"], decay=best["decay"], eps=_dyneval_settings({}, stats)[0]["eps"]), \
                "tuned on valid"
        else:
            settings, source = _dyneval_settings(evaluation, stats)
        scorer = DynamicEval(model, "rms", bptt=5, stats=stats, **settings)
        out["dyneval"] = {**{k: float(f"{v:.6g}") for k, v in settings.items()}, "bptt": 5, "source": source}
    if cache:
        paper = evaluation.get("cache") or {}
        window = paper.get("window", 2000)
        if tune:
            theta, lam, _ = cache_grid(collect(scorer, valid, progress), CACHE_THETAS, CACHE_LAMS, window=window,
                                       progress=progress).best
            source = "tuned on valid"
        else:
            theta, lam = paper.get("theta", 1.0), paper.get("lam", 0.1)
            source = paper.get("source", "the neural cache's defaults")
        scorer = NeuralCache(scorer, theta=theta, lam=lam, window=window)
        out["cache"] = {"theta": theta, "lam": lam, "window": window, "source": source}
    if scorer is model:
        out["valid_ppl"], out["test_ppl"] = out["base_valid_ppl"], out["base_test_ppl"]
    else:
        out["valid_ppl"], out["test_ppl"] = _ppl(scorer, valid), _ppl(scorer, test)
    return out
