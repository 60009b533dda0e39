r"""Lesson 01 exercises: the Kneser-Ney continuation probability, add-k's limit, the discount.

- ``01.continuation``: :math:`p_{\mathrm{cont}}(w) = N_{1+}(\bullet\, w) / N_{1+}(\bullet\,\bullet)`,
  the distinct left neighbours of ``w`` over the distinct bigrams (Kneser & Ney 1995).
- ``01.addk-limit``: as :math:`k \to \infty`, :math:`(c(vw) + k) / (c(v) + kV) \to 1/V`, so the
  perplexity tends to :math:`V`.
- ``01.discount``: the discount :math:`D` of the interpolated Kneser-Ney bigram, on a grid, with the
  lowest validation perplexity on the embedded corpus.
- ``01.discount-why``: what a too small and a too large :math:`D` do, as a choice among :data:`DISCOUNT_EFFECTS`.
"""
from __future__ import annotations

import math

import torch

from ...corpora.data import load_corpus
from .registry import Unsolved, Wrong, exercise

DISCOUNTS = (0.1, 0.3, 0.5, 0.7, 0.9)  # the grid of exercise 01.discount
ADDK_V = 1_000  # the vocabulary size of exercise 01.addk-limit


def _toy_stream(seed: int, V: int = 12, N: int = 600) -> torch.Tensor:
    """Random words in which word 1 is frequent but always follows word 0: counts and contexts disagree."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(2, V, (N,), generator=g)  # (N,)
    x[::3] = 0
    x[1::3] = 1  # (N,) every third position "0 1"
    return x


def continuation_reference(tokens: torch.Tensor, V: int) -> torch.Tensor:
    r""":math:`N_{1+}(\bullet\, w) / N_{1+}(\bullet\,\bullet)` over the bigrams of ``tokens``.  (N,) -> (V,)"""
    pairs = torch.unique(torch.stack([tokens[:-1], tokens[1:]], 1), dim=0)  # (M, 2) distinct bigrams
    return torch.bincount(pairs[:, 1], minlength=V).double() / len(pairs)  # (V,)


@exercise("01.continuation", hint="N1+(• w) counts each distinct bigram once, however often it occurs: which torch call "
                                  "keeps each row of the (N-1, 2) pairs once, and which one then counts, for every word, "
                                  "the distinct bigrams that end in it? What do you divide by so that the values sum to 1?")
def check_continuation(answer) -> str:
    for seed, V in ((0, 12), (1, 30)):
        x = _toy_stream(seed, V)
        want = continuation_reference(x, V)
        got = torch.as_tensor(answer(x.clone(), V)).double()
        if got.shape != want.shape:
            raise Wrong(f"it returned shape {tuple(got.shape)}; give one probability per word, shape ({V},).")
        if torch.allclose(got, want, atol=1e-9):
            continue
        if abs(float(got.sum()) - 1) > 1e-6:
            raise Wrong(f"your values sum to {float(got.sum()):.4g}, not 1: divide the counts by N1+(••), "
                        "the number of distinct bigrams.")
        freq = torch.bincount(x[1:], minlength=V).double() / (len(x) - 1)
        if torch.allclose(got, freq, atol=1e-6):
            raise Wrong("these are how often each word occurs; the continuation probability counts the "
                        "distinct words that precede it instead.")
        raise Wrong(f"for the word 1, which always follows the word 0, you give {float(got[1]):.4f} but "
                    f"N1+(• w)/N1+(••) = {float(want[1]):.4f}.")
    return ("a word that occurs often but after one word only gets a small continuation probability: "
            "it is what KN backs off to.")


@exercise("01.addk-limit", hint="write (c(vw) + k) / (c(v) + kV) for a very large k: which terms still matter?",
          predicts=(ADDK_V,))
def check_addk_limit(answer) -> str:
    value = float(answer)
    if math.isnan(value) or value < 1:
        raise Wrong(f"{value:g} cannot be a perplexity: the perplexity of any model is at least 1.")
    if math.isinf(value):
        raise Wrong("add-k never gives probability 0, so its perplexity stays finite: every count gets k added.")
    if abs(value - ADDK_V) > 1:
        raise Wrong(f"{value:g} is not the limit: as k grows, (c(vw) + k) / (c(v) + kV) tends to 1/V for every "
                    "word, the uniform model. What is the perplexity of a uniform model over V words?")
    return f"as k grows every word gets 1/V, the uniform model, whose perplexity is V = {ADDK_V:,}."


def kn_discount(counts: torch.Tensor) -> float:
    r"""The Kneser-Ney discount :math:`D = t_1 / (t_1 + 2 t_2)` from the counts of counts."""
    t1, t2 = float((counts == 1).sum()), float((counts == 2).sum())
    return t1 / (t1 + 2 * t2)


def kn_bigram_logprobs(train: torch.Tensor, test: torch.Tensor, V: int, eos: int, D=None) -> torch.Tensor:
    r"""Interpolated Kneser-Ney bigram, :math:`\log p(x_t \mid x_{t-1})` for every test token (both streams
    read after an ``<eos>``); ``D`` replaces the bigram level's estimated discount.  (N,) -> (N,)"""
    x, y = (torch.cat([torch.tensor([eos]), s]) for s in (train, test))  # (N+1,) each
    keys, c_vw = torch.unique(x[:-1] * V + x[1:], return_counts=True)  # (M,) distinct bigrams v w
    v, w = keys // V, keys % V
    N1_w = torch.bincount(w, minlength=V).double()  # (V,) N1+(. w)
    D_o1 = kn_discount(N1_w)  # D^(1), the unigram level's discount
    p1 = (N1_w - D_o1).clamp(min=0) / len(keys) + D_o1 * float((N1_w > 0).sum()) / len(keys) / V  # (V,)
    D_o2 = kn_discount(c_vw) if D is None else D  # D^(2), the bigram level's
    c_v = torch.bincount(v, weights=c_vw.double(), minlength=V)  # (V,) c(v .)
    gamma = torch.where(c_v > 0, D_o2 * torch.bincount(v, minlength=V).double() / c_v.clamp(min=1), 1.0)  # (V,)
    q = y[:-1] * V + y[1:]  # (N,) the test bigrams
    i = torch.searchsorted(keys, q).clamp(max=len(keys) - 1)
    c_q = torch.where(keys[i] == q, c_vw[i], 0).double()  # (N,) their training counts
    return ((c_q - D_o2).clamp(min=0) / c_v[y[:-1]].clamp(min=1) + gamma[y[:-1]] * p1[y[1:]]).log()


def best_discount(grid=DISCOUNTS) -> tuple[float, float]:
    """The bigram discount on ``grid`` with the lowest validation perplexity on the embedded corpus, and
    the discount Kneser-Ney estimates from the counts of counts."""
    corpus = load_corpus("embedded")
    V, eos = len(corpus.vocab), corpus.vocab.eos
    ppl = {D: float(-kn_bigram_logprobs(corpus.train, corpus.valid, V, eos, D).mean()) for D in grid}
    x = torch.cat([torch.tensor([eos]), corpus.train])
    estimate = kn_discount(torch.unique(x[:-1] * V + x[1:], return_counts=True)[1])
    return min(ppl, key=ppl.get), estimate


@exercise("01.discount", hint="kn_bigram_logprobs takes D as its last argument: what validation perplexity does the "
                              "embedded corpus give at each D of the grid, and which D gives the lowest?")
def check_discount(answer) -> str:
    value = float(answer)
    if not any(abs(value - D) < 1e-9 for D in DISCOUNTS):
        raise Wrong(f"{value:g} is not on the grid: give one of {', '.join(f'{D:g}' for D in DISCOUNTS)}.")
    best, estimate = best_discount()
    if abs(value - best) > 1e-9:
        side = "larger" if best > value else "smaller"
        raise Wrong(f"D = {value:g} is not the best on the grid: a {side} discount gives a lower validation "
                    "perplexity. Compare all five.")
    return (f"D = {best:g}, near the estimate t1 / (t1 + 2 t2) = {estimate:.2f}: a smaller D leaves too little mass "
            "for the words never seen after a context, a larger one takes too much from those that were.")


# 01.discount-why: the choices the lesson lists, and why each wrong one is wrong
DISCOUNT_EFFECTS = {
    "a": "the discounts free too little mass, so a word never seen after the context gets too low a probability",
    "b": "each seen bigram loses too much of its count, so the model trusts the unigram level even where the "
         "pair was seen",
    "c": "the probabilities of a context's next words no longer sum to one",
    "d": "nothing: the interpolation weight gamma makes up for any D exactly",
}
_WHY_NOT = {
    "c": "they still sum to one for every D between 0 and 1: gamma(v) hands the unigram level exactly the mass "
         "the discounts took.",
    "d": "gamma makes the sum right, not the split: D decides how much of a seen pair's count goes to the "
         "unigram level, and the validation perplexities differ across D.",
}


@exercise("01.discount-why", hint="write out p(w | v) for a pair seen once, and for a pair never seen, at D = 0.1 "
                                  "and at D = 0.9; which of the two terms grows with D?")
def check_discount_why(answer) -> str:
    small, large = (str(a).strip().lower() if a is not None else None for a in answer)
    if small is None or large is None:
        raise Unsolved
    for which, got in (("too small", small), ("too large", large)):
        if got not in DISCOUNT_EFFECTS:
            raise Wrong(f"answer one of {', '.join(DISCOUNT_EFFECTS)} for D {which}, not {got!r}.")
        if got in _WHY_NOT:
            raise Wrong(f"({got}) for D {which}: {_WHY_NOT[got]}")
    if (small, large) != ("a", "b"):
        raise Wrong("the two are swapped: a small D takes little from the seen pairs, so little is left over for "
                    "the unseen ones; a large D takes much.")
    return ("a small D starves the unseen continuations (gamma(v) is proportional to D), a large D flattens the "
            "seen ones towards the unigram level; the best D on the grid sits between.")
