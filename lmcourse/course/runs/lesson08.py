r"""Lesson 08's dynamic-evaluation passes, declared per scale, computed once and stored.

Dynamic evaluation costs a backward pass and an update of every weight per segment of 5 tokens,
so lesson 08's tuning grids and whole-split passes take far longer than a lesson's run. Each pass
is one stored measurement (:func:`lmcourse.store.stored_numbers.compute_or_load`) named
``08-dyneval`` and keyed by its settings dict, which carries a ``role``:

- ``grid``: one rule (``sgd`` or ``rms``) at one :math:`(\eta, \lambda)` on the first ``tune``
  validation tokens: the summed negative log-likelihood and :math:`\lVert\theta - \theta_0\rVert` along the stream;
- ``split``: one rule at the best setting of its own grid over the first ``split_tokens`` tokens of a
  split (None: all), per token, with the neural cache on top for every :math:`(\theta, \lambda_{\text{cache}})`
  of a small grid (summed per slice);
- ``segment``: the winning rule at another segment length, on the first ``segment_tokens`` tokens;
- ``reset``: the winning rule with its weights reset at every ``<doc>`` of the test text's start.

The winner is the rule whose best grid perplexity is lower: chosen on validation text only.
"""
from __future__ import annotations

import json
import time
from typing import Optional

import torch

from ...adapt.cache_tuning import cache_scores, collect
from ...adapt.dyneval import DynamicEval, gradient_stats
from ...lm import perplexity_from_nll
from ...store.stored_numbers import compute_or_load

NAME = "08-dyneval"
METHODS = ("sgd", "rms")

_SHARED = dict(eps=2e-5, bptt=5, stats_tokens=50_000, drift_every=20, cache_window=1000)
PLANS = {
    "ci": dict(_SHARED, stats_tokens=3_000, tune=400, slices=2, split_tokens=800, segment_tokens=400, reset_tokens=800,
               lrs=dict(sgd=[0.1], rms=[1e-5, 1e-4]), decays=dict(sgd=[0.0], rms=[0.0, 1e-2]), segments=[5, 20],
               cache_thetas=[0.3], cache_lams=[0.1]),
    "cpu": dict(_SHARED, tune=20_000, slices=3, split_tokens=30_000, segment_tokens=1_000, reset_tokens=4_000,
                lrs=dict(sgd=[0.02, 0.05, 0.1], rms=[1.5e-5, 3e-5, 6e-5]), decays=dict(sgd=[0.0, 3e-3], rms=[0.0, 3e-3]),
                segments=[2, 5, 20, 50], cache_thetas=[0.3, 1.0, 1.5, 2.0], cache_lams=[0.02, 0.05, 0.1]),
    "gpu": dict(_SHARED, stats_tokens=None, tune=30_000, slices=4, split_tokens=None, segment_tokens=30_000,
                reset_tokens=60_000, lrs=dict(sgd=[0.03, 0.1, 0.3, 1.0], rms=[3e-5, 5e-5, 7e-5, 1e-4]),
                decays=dict(sgd=[0.0, 1e-3, 1e-2], rms=[0.0, 1e-3, 2e-3, 5e-3]), segments=[2, 5, 10, 20, 50],
                cache_thetas=[0.3, 0.6, 1.0], cache_lams=[0.05, 0.1, 0.15, 0.2]),
}
# the shared word LSTM (lessons 02, 07, 08, 09) whose passes these are
MODELS = {
    "ci": dict(name="word-lstm", emb_size=200, hidden_size=200, num_layers=1, tie=True, dropout=0.0, epochs=1,
               lr=20.0, batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=5_000),
    "cpu": dict(name="word-lstm", emb_size=200, hidden_size=200, num_layers=1, tie=True, dropout=0.0, epochs=1,
                lr=20.0, batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=None),
    "gpu": dict(name="word-lstm-gpu", emb_size=650, hidden_size=650, num_layers=2, tie=True, dropout=0.5, epochs=40,
                lr=20.0, batch_size=20, bptt=35, clip=0.25, seed=1111, train_tokens=None),
}


def plan(scale: str) -> dict:
    """The knobs of lesson 08's passes at ``scale``."""
    if scale not in PLANS:
        raise ValueError(f"Unknown scale {scale!r}: use one of {sorted(PLANS)}.")
    return PLANS[scale]


def _base(scale: str) -> dict:
    p = plan(scale)
    return dict(model=MODELS[scale], eps=p["eps"], stats_tokens=p["stats_tokens"])


def _grids(scale: str) -> dict:
    p = plan(scale)
    return {m: dict(lrs=p["lrs"][m], decays=p["decays"][m], tune=p["tune"], bptt=p["bptt"]) for m in METHODS}


def grid_settings(scale: str, method: str, lr: float, decay: float) -> dict:
    p = plan(scale)
    return dict(_base(scale), role="grid", method=method, lr=lr, decay=decay, bptt=p["bptt"], tune=p["tune"],
                every=p["drift_every"])


def split_settings(scale: str, method: str, split: str) -> dict:
    p = plan(scale)
    return dict(_base(scale), role="split", method=method, split=split, tokens=p["split_tokens"],
                grids=_grids(scale), slices=p["slices"], window=p["cache_window"], thetas=p["cache_thetas"],
                lams=p["cache_lams"])


def segment_settings(scale: str, n: int) -> dict:
    p = plan(scale)
    return dict(_base(scale), role="segment", bptt=n, tokens=p["segment_tokens"], grids=_grids(scale))


def reset_settings(scale: str) -> dict:
    p = plan(scale)
    return dict(_base(scale), role="reset", tokens=p["reset_tokens"], grids=_grids(scale))


def declared(scale: str) -> list:
    """Every pass lesson 08 stores at ``scale``."""
    p = plan(scale)
    out = [grid_settings(scale, m, lr, d) for m in METHODS for lr in p["lrs"][m] for d in p["decays"][m]]
    out += [split_settings(scale, m, "test") for m in METHODS]
    out += [segment_settings(scale, n) for n in p["segments"]] + [reset_settings(scale)]
    return out


RUNS = {NAME: declared}


class Passes:
    """Lesson 08's passes for ``model`` on ``corpus`` at ``scale``: each computed once, then loaded."""

    def __init__(self, model, corpus, scale: str, stats: Optional[dict] = None, progress: Optional[bool] = None):
        self.model, self.corpus, self.scale, self.progress = model, corpus, scale, progress
        self.plan = plan(scale)
        self._stats, self._memo = stats, {}  # stats: gradient_stats over the first stats_tokens training tokens

    @property
    def stats(self):
        """The RMS gradients of the training text (computed only when a pass needs them)."""
        if self._stats is None:
            n = self.plan["stats_tokens"]
            train = self.corpus.train if n is None else self.corpus.train[:n]
            self._stats = gradient_stats(self.model, train, bptt=self.plan["bptt"], progress=self.progress)
        return self._stats

    def rule(self, method: str, lr: float, decay: float, bptt: Optional[int] = None) -> DynamicEval:
        stats = self.stats if method == "rms" else None
        return DynamicEval(self.model, method, lr=lr, decay=decay, eps=self.plan["eps"],
                           bptt=bptt or self.plan["bptt"], stats=stats)

    def _stored(self, settings: dict, compute) -> dict:
        key = json.dumps(settings, sort_keys=True, default=str)
        if key not in self._memo:  # at the ci scale nothing is stored on disk, so each pass runs once here
            self._memo[key] = compute_or_load(NAME, settings, compute, self.model.vocab)
        return self._memo[key]

    @property
    def tune(self) -> torch.Tensor:
        return self.corpus.valid[:self.plan["tune"]]

    def grid_pass(self, method: str, lr: float, decay: float) -> dict:
        """``nll`` (summed), ``n``, ``drift`` (every ``drift_every`` segments) and ``seconds`` on the tuning slice."""
        def compute():
            start = time.perf_counter()
            log_p, d = self.rule(method, lr, decay).drift(self.tune, self.plan["drift_every"], progress=self.progress)
            return dict(nll=float(-log_p.sum()), n=len(log_p), drift=d, seconds=time.perf_counter() - start)
        return self._stored(grid_settings(self.scale, method, lr, decay), compute)

    def grid(self, method: str) -> torch.Tensor:  # (len(lrs), len(decays))
        """The tuning slice's perplexity for every (lr, decay) of ``method``'s grid."""
        lrs, decays = self.plan["lrs"][method], self.plan["decays"][method]
        ppl = torch.empty(len(lrs), len(decays), dtype=torch.float64)
        for i, lr in enumerate(lrs):
            for j, decay in enumerate(decays):
                g = self.grid_pass(method, lr, decay)
                ppl[i, j] = perplexity_from_nll(g["nll"] / g["n"])
        return ppl

    def best(self, method: str) -> dict:
        """``{"lr", "decay", "ppl"}`` of the lowest tuning perplexity of ``method``."""
        ppl = self.grid(method)
        i, j = divmod(int(torch.argmin(ppl)), ppl.shape[1])
        return dict(lr=self.plan["lrs"][method][i], decay=self.plan["decays"][method][j], ppl=float(ppl[i, j]))

    def winner(self) -> str:
        """The rule with the lower best tuning perplexity (chosen on validation text only)."""
        return min(METHODS, key=lambda m: self.best(m)["ppl"])

    def split_pass(self, method: str, split: str) -> dict:
        """``method`` at its best setting over ``split``: ``log_p`` (N,), ``seconds``, and the cache on top:
        ``cache_nll`` (thetas, lams, slices), summed over each of ``slices`` equal slices, ``slice_n`` (slices,)."""
        tokens = getattr(self.corpus, split)
        n = self.plan["split_tokens"]
        tokens = tokens if n is None else tokens[:n]

        def compute():
            b = self.best(method)
            start = time.perf_counter()
            inputs = collect(self.rule(method, b["lr"], b["decay"]), tokens, progress=self.progress)
            seconds = time.perf_counter() - start
            edges = torch.linspace(0, len(tokens), self.plan["slices"] + 1).round().long().tolist()
            thetas, lams = self.plan["cache_thetas"], self.plan["cache_lams"]
            nll = torch.empty(len(thetas), len(lams), len(edges) - 1, dtype=torch.float64)
            for i, theta in enumerate(thetas):
                for j, lam in enumerate(lams):
                    lp = cache_scores(inputs, theta, self.plan["cache_window"], lam=lam, progress=False)
                    nll[i, j] = torch.stack([-lp[a:b].sum() for a, b in zip(edges[:-1], edges[1:])])
            return dict(log_p=inputs.log_p.float().cpu(), seconds=seconds, cache_nll=nll,
                        slice_n=torch.tensor([b - a for a, b in zip(edges[:-1], edges[1:])]), lr=b["lr"],
                        decay=b["decay"])
        return self._stored(split_settings(self.scale, method, split), compute)

    def segment_pass(self, n: int) -> dict:
        """The winner at segment length ``n`` (lr and decay scaled by ``n / bptt``): ``nll``, ``n_tokens``, ``seconds``."""
        def compute():
            m = self.winner()
            b, f = self.best(m), n / self.plan["bptt"]
            tokens = self.corpus.valid[:self.plan["segment_tokens"]]
            start = time.perf_counter()
            log_p = self.rule(m, b["lr"] * f, min(b["decay"] * f, 0.5), bptt=n).score(tokens)
            return dict(nll=float(-log_p.sum()), n_tokens=len(tokens), seconds=time.perf_counter() - start)
        return self._stored(segment_settings(self.scale, n), compute)

    def reset_pass(self) -> dict:
        """The winner scoring the whole documents of the test text's start one by one (weights reset):
        ``log_p`` over ``[first, last)``, the positions from the first ``<doc>`` to the last."""
        def compute():
            m = self.winner()
            b = self.best(m)
            part = self.corpus.test[:self.plan["reset_tokens"]]
            starts = (part == self.model.vocab.stoi["<doc>"]).nonzero().flatten().tolist()
            if len(starts) < 2:
                raise ValueError("The reset pass needs two <doc> lines in its tokens: raise reset_tokens.")
            dyn = self.rule(m, b["lr"], b["decay"])
            log_p = torch.cat([dyn.score(part[a:c]) for a, c in zip(starts, starts[1:])])
            return dict(log_p=log_p.float(), first=starts[0], last=starts[-1])
        return self._stored(reset_settings(self.scale), compute)
