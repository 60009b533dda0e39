r"""Where one model beats another, split by how often each word was seen in training.

The scored tokens :math:`x_1, \dots, x_N` fall into bands by :math:`c(x_t)`, the count of the word in the
training text: band :math:`b` holds the tokens with :math:`e_{b-1} \le c(x_t) < e_b` for the edges
:math:`0 = e_0 < e_1 < \dots` (the last band is open above). In band :math:`b`, with :math:`N_b` tokens, each
model has a mean loss in nats per token, and the **change** is the new model's minus the base model's:

.. math::

    \Delta_b = \frac{1}{N_b} \sum_{t \in b} \bigl[-\log p_{\text{new}}(x_t)\bigr]
             - \frac{1}{N_b} \sum_{t \in b} \bigl[-\log p_{\text{base}}(x_t)\bigr],

**negative where the new model is better** (the one sign convention of the course: for tying, change =
tied − untied, negative = tying helps). With the band's share :math:`\pi_b = N_b / N`, the contributions
:math:`\pi_b \Delta_b` add up to the change of the whole text's mean loss, :math:`\log` of the perplexity ratio.
A band's perplexity is :math:`\exp` of its mean loss. Each side is a list of models, one per seed, paired
by position; every number is kept per seed, so a lesson ranks with :mod:`lmcourse.course.seeds`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .seeds import describe

__all__ = ["EDGES", "BandComparison", "band_labels", "band_of", "compare_log_probs", "compare_by_frequency"]

EDGES = (1, 10, 100, 1000)  # bands: unseen, 1-9, 10-99, 100-999 and 1000+ times in training


def _check_edges(edges: Sequence[int]) -> tuple[int, ...]:
    e = tuple(int(x) for x in edges)
    if not e or e[0] < 1 or any(b <= a for a, b in zip(e, e[1:])):
        raise ValueError(f"the band edges {tuple(edges)} must be counts of at least 1, in increasing order "
                         "(e.g. (1, 10, 100)): the first band is then the words unseen in training.")
    return e


def band_labels(edges: Sequence[int] = EDGES) -> list[str]:
    """One label per band: ``"unseen"``, ``"1-9"``, ..., ``"1000+"`` for the edges (1, 10, 100, 1000)."""
    e = _check_edges(edges)
    lows = (0,) + e
    labels = [("unseen" if lo == 0 else f"{lo}" if hi - lo == 1 else f"{lo}-{hi - 1}") for lo, hi in zip(lows, e)]
    return labels + [f"{e[-1]}+"]


def band_of(counts: torch.Tensor, edges: Sequence[int] = EDGES) -> torch.Tensor:
    r"""The band of each count, :math:`b` with :math:`e_{b-1} \le c < e_b`: ``counts`` (N,) -> (N,) in 0..len(edges)."""
    e = torch.tensor(_check_edges(edges), dtype=counts.dtype, device=counts.device)
    return torch.bucketize(counts, e, right=True)                                # (N,)


@dataclass(frozen=True)
class BandComparison:
    """Two models' losses by training-frequency band, per seed. ``nll_base`` and ``nll_new`` are (S, B): the
    mean loss in nats per token of seed s in band b; ``share`` (B,) the bands' shares of the scored tokens; only
    bands holding tokens are kept."""

    labels: tuple[str, ...]
    share: torch.Tensor       # (B,)
    tokens: torch.Tensor      # (B,) tokens in each band
    nll_base: torch.Tensor    # (S, B)
    nll_new: torch.Tensor     # (S, B)

    @property
    def change(self) -> torch.Tensor:  # (S, B)
        r""":math:`\Delta_b` per seed: new − base, nats per token; negative where the new model is better."""
        return self.nll_new - self.nll_base

    @property
    def contribution(self) -> torch.Tensor:  # (S, B)
        r""":math:`\pi_b \Delta_b` per seed; each row adds up to :attr:`total`."""
        return self.change * self.share

    @property
    def total(self) -> torch.Tensor:  # (S,)
        """The change of the whole text's mean loss per seed (new − base, nats per token)."""
        return self.contribution.sum(1)

    def ppl(self, side: str) -> torch.Tensor:  # (S, B)
        """Each band's perplexity per seed, for ``side`` ``"base"`` or ``"new"``."""
        if side not in ("base", "new"):
            raise ValueError(f"side must be 'base' or 'new', got {side!r}.")
        return (self.nll_base if side == "base" else self.nll_new).exp()

    def markdown(self, base: str = "base", new: str = "new", digits: int = 3) -> str:
        """A table, one row per band: share, both perplexities and the change (mean ± sd over seeds)."""
        rows = [f"| seen in training | share of tokens | {base}: ppl | {new}: ppl | change = {new} − {base}, "
                "nats per token | contribution |", "|---|---:|---:|---:|---:|---:|"]
        pb, pn, ch, co = self.ppl("base"), self.ppl("new"), self.change, self.contribution
        for b, label in enumerate(self.labels):
            rows.append(f"| {label} | {float(self.share[b]):.1%} | {describe(pb[:, b].tolist(), 1)} | "
                        f"{describe(pn[:, b].tolist(), 1)} | {describe(ch[:, b].tolist(), digits)} | "
                        f"{describe(co[:, b].tolist(), digits)} |")
        rows.append(f"| all | 100% | | | {describe(self.total.tolist(), digits)} | |")
        return "\n".join(rows)


def compare_log_probs(log_p_base: torch.Tensor, log_p_new: torch.Tensor, counts: torch.Tensor,
                      edges: Sequence[int] = EDGES) -> BandComparison:
    """The comparison from per-token log-probabilities, (S, N) each (or (N,) for one seed), and ``counts`` (N,):
    the training count of each scored token's word."""
    base, new = (torch.as_tensor(x).double() for x in (log_p_base, log_p_new))
    base, new = (x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1) for x in (base, new))  # (S, N)
    if base.shape != new.shape or base.shape[1] != counts.numel():
        raise ValueError(f"the log-probabilities ({tuple(base.shape)} and {tuple(new.shape)}, seeds x tokens) and "
                         f"the counts ({counts.numel()} tokens) must cover the same tokens and seeds: score the "
                         "same text with both models, one model per seed on each side.")
    band = band_of(counts.to(base.device), edges)                                 # (N,)
    onehot = torch.nn.functional.one_hot(band, len(edges) + 1).double()          # (N, B)
    n_b = onehot.sum(0)                                                          # (B,)
    keep = n_b > 0
    mean = lambda log_p: ((-log_p) @ onehot)[:, keep] / n_b[keep]  # noqa: E731  (S, B) mean loss per band
    labels = tuple(label for label, k in zip(band_labels(edges), keep.tolist()) if k)
    return BandComparison(labels, (n_b / n_b.sum())[keep].cpu(), n_b[keep].long().cpu(), mean(base).cpu(),
                          mean(new).cpu())


def compare_by_frequency(base_models: Sequence, new_models: Sequence, tokens: torch.Tensor, train: torch.Tensor,
                         edges: Sequence[int] = EDGES) -> BandComparison:
    """Score ``tokens`` with every model (``score``, the one interface) and split the change by the training
    count of each word in ``train``: ``base_models`` and ``new_models`` hold one model per seed, paired."""
    if len(base_models) != len(new_models) or not base_models:
        raise ValueError(f"give one model per seed on each side, paired by seed: got {len(base_models)} base and "
                         f"{len(new_models)} new models.")
    vocab_size = int(max(int(train.max()), int(tokens.max()))) + 1
    counts = torch.bincount(train.reshape(-1).cpu(), minlength=vocab_size)[tokens.reshape(-1).cpu()]  # (N,)
    with torch.no_grad():
        score = lambda models: torch.stack([m.score(tokens).double().cpu() for m in models])  # noqa: E731  (S, N)
        return compare_log_probs(score(base_models), score(new_models), counts, edges)
