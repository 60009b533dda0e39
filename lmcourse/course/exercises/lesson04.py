r"""Lesson 04 exercises: the tie itself, which rows get a gradient, the most tying can save, its change in a band.

- ``04.tie``: make the decoder's weight *the same* Parameter as the embedding (Press & Wolf 2017;
  Inan et al. 2017), so there is one table and one gradient.
- ``04.rows``: the input embedding gets a gradient only in the rows of the words read; the output
  embedding in every row, since the softmax's normaliser involves every word.
- ``04.share-limit``: tying a one-layer model with :math:`E = H` removes :math:`VE` of
  :math:`N = 2VE + V + 4(2E^2 + 2E)` parameters, a share that tends to :math:`E / (2E + 1)` as
  :math:`V` grows.
- ``04.share-limit-why``: the reason behind the exercise's answer, one letter of 3.
- ``04.band``: the change that tying makes in one training-frequency band, with the course's sign
  (:mod:`lmcourse.course.frequency`): :math:`\Delta_b` = mean loss tied − mean loss untied over the tokens
  whose word was seen :math:`lo \le c < hi` times in training; negative where tying helps.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...networks.models import LMConfig, RNNLM
from ..frequency import compare_log_probs
from .registry import Wrong, exercise, multiple_choice

READ, TARGETS, V_ROWS = [1, 3, 1], [3, 1, 4], 6  # exercise 04.rows
E_LIMIT = 200  # exercise 04.share-limit


def _small_untied(V: int = 11, E: int = 6, seed: int = 0):
    torch.manual_seed(seed)
    return RNNLM(LMConfig(vocab_size=V, emb_size=E, hidden_size=E, num_layers=1, tie=False))


@exercise("04.tie", hint="is a tied model two tables holding equal numbers, or one Parameter object reachable under "
                         "two names? Which attribute holds the decoder's matrix, and what does assigning the "
                         "embedding's Parameter to it do to model.parameters()?")
def check_tie(answer) -> str:
    model = _small_untied()
    before = sum(p.numel() for p in model.parameters())
    out = answer(model)
    model = out if out is not None else model
    E, W = model.embedding.weight, model.head.decoder.weight
    if W is not E:
        if torch.equal(W.detach(), E.detach()):
            raise Wrong("the two tables hold the same numbers but are two Parameters, so they drift apart after the "
                        "first step: make the decoder use the embedding's Parameter object itself.")
        raise Wrong("the decoder's weight is still its own matrix: set model.head.decoder.weight to the embedding's "
                    "Parameter.")
    saved = before - sum(p.numel() for p in model.parameters())
    V, d = E.shape
    if saved != V * d:
        raise Wrong(f"the parameter count fell by {saved}, not by V x E = {V * d}: only the weight is shared, "
                    "the decoder keeps its bias.")
    return "one Parameter, one storage, one gradient: the tied model has V x E fewer numbers to learn."


def rows_reference(read=READ, targets=TARGETS, V: int = V_ROWS) -> tuple:
    """(rows of dL/dE, rows of dL/dW) that are nonzero, for an untied model reading ``read``."""
    torch.manual_seed(0)
    model = RNNLM(LMConfig(vocab_size=V, emb_size=4, hidden_size=4, num_layers=1, tie=False))
    out = model(torch.tensor(read).view(-1, 1))
    F.cross_entropy(out.logits.view(-1, V), torch.tensor(targets)).backward()
    rows = lambda g: {int(i) for i in (g.abs().sum(1) > 0).nonzero().flatten()}  # noqa: E731
    return rows(model.embedding.weight.grad), rows(model.head.decoder.weight.grad)


@exercise("04.rows", hint="which rows of E does the lookup E[x_t] touch, given the words the model reads? And over "
                          "which words does the softmax's normaliser sum?", predicts=lambda: rows_reference())
def check_rows(answer) -> str:
    want_in, want_out = rows_reference()
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        raise Wrong("give a pair of sets: (rows of the input embedding's gradient, rows of the output's).")
    got_in, got_out = (set(int(i) for i in a) for a in answer)
    if got_in != want_in:
        raise Wrong(f"the input embedding: {sorted(got_in)} is not it. The model reads the words {READ}; "
                    "which rows does the lookup E[x_t] touch?")
    if got_out != want_out:
        raise Wrong(f"the output embedding: {sorted(got_out)} is not it. The softmax's normaliser sums over "
                    f"all {V_ROWS} words, so which rows does it push down?")
    return (f"reading {READ} moves rows {sorted(want_in)} of E but all {V_ROWS} rows of W; with tying, every "
            "row of the shared table learns at every step.")


def share_limit_reference(E: int = E_LIMIT) -> float:
    r""":math:`\lim_{V\to\infty} VE / (2VE + V + 4(2E^2 + 2E)) = E / (2E + 1)`."""
    return E / (2 * E + 1)


@exercise("04.share-limit", hint="which terms of the untied count grow with V, and which of them does tying remove? "
                                 "What is their ratio once V is so large that the rest no longer counts?", predicts=lambda: (share_limit_reference(),))
def check_share_limit(answer) -> str:
    value, want = float(answer), share_limit_reference()
    if abs(value - want) < 5e-4:
        return (f"E / (2E + 1) = {want:.4f}: just under a half, because the decoder's bias (V numbers) "
                "stays untied and the LSTM's share vanishes as V grows.")
    if abs(value - 0.5) < 5e-4:
        raise Wrong("close, but not a half: the decoder keeps its bias, V numbers that tying does not remove.")
    raise Wrong(f"{value:g} is not the limit: as V grows, which terms of the parameter count grow with V?")


# 04.share-limit-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_SHARE_LIMIT_WHY = {
    "a": "the LSTM's weights do not grow with V, so their share goes to zero as V grows: what else grows "
         "with V and is not tied?",
    "c": "the share tends to a limit below one half however large V gets: count the parameters each word "
         "of the vocabulary brings, tied and untied.",
}


multiple_choice("04.share-limit-why", right="b", why_not=_WHY_NOT_SHARE_LIMIT_WHY,
                hint="as V grows, only the parameters proportional to V count: how many does each "
                "word bring to the untied model, and how many of them does tying remove?",
                explanation="per word the untied model holds an embedding row, a decoder row and a decoder bias, 2E + 1 "
                "numbers; tying removes E of them, hence E / (2E + 1) = 200 / 401.")


BAND = (1, 10)  # exercise 04.band: the words seen 1 to 9 times in training


def _band_case(seed: int = 0) -> tuple:
    """Random per-token log-probabilities of an untied and a tied model, and counts that include the band's
    edges (0, 1, 9, 10), so that an inclusive upper bound or a missing mask shows."""
    g = torch.Generator().manual_seed(seed)
    n = 200
    counts = torch.cat([torch.tensor([0, 1, 9, 10, 10, 10]), torch.randint(0, 30, (n - 6,), generator=g)])  # (n,)
    untied = -torch.rand(n, generator=g, dtype=torch.float64) * 6                                       # (n,)
    tied = untied + torch.where(counts < 10, 0.5, -0.3).double() * torch.rand(n, generator=g, dtype=torch.float64)
    return untied, tied, counts


@exercise("04.band", hint="which tokens belong to the band, if the upper edge hi belongs to the next one? What is "
                          "a token's loss, given its log-probability? And which model's mean comes first, so "
                          "that a negative change means tying helps?")
def check_band(answer) -> str:
    untied, tied, counts = _band_case()
    lo, hi = BAND
    want = float(compare_log_probs(untied, tied, counts, edges=BAND).change[0, 1])
    got = float(answer(untied, tied, counts, lo, hi))
    inside = (counts >= lo) & (counts < hi)
    if abs(got - want) < 1e-9:
        return (f"{want:+.4f} nats per token: negative, so tying helps in this band; lmcourse.course.frequency "
                "gives every band at once, with the same sign.")
    if abs(got + want) < 1e-9:
        raise Wrong("the sign is reversed: the change is tied − untied in loss, mean(-log p_tied) − "
                    "mean(-log p_untied), negative where tying helps.")
    if abs(got - float((untied - tied).mean())) < 1e-9 or abs(got - float((tied - untied).mean())) < 1e-9:
        raise Wrong("that is the change over all tokens: keep only those whose word was seen lo <= count < hi "
                    "times in training.")
    closed = (counts >= lo) & (counts <= hi)
    if abs(got - float((untied[closed] - tied[closed]).mean())) < 1e-9:
        raise Wrong("a word seen exactly hi times belongs to the next band: the band is lo <= count < hi.")
    if abs(got - float((untied[inside] - tied[inside]).sum())) < 1e-9:
        raise Wrong("that is a sum over the band's tokens: the change is per token, a mean.")
    raise Wrong(f"{got:+.4f} is not the band's change: mean(-log p_tied) − mean(-log p_untied) over the tokens "
                "with lo <= count < hi.")
