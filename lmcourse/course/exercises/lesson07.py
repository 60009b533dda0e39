r"""Lesson 07 exercises: the cache's distribution, theta = 0, the global softmax, and lambda = 1.

- ``07.p-cache``: :math:`p_{\text{cache}}(w) = \sum_{i: x_{i+1} = w} \operatorname{softmax}_i(\theta\, h_t\cdot h_i)`
  as a (V,) vector (Grave et al. 2017); :math:`h_t` has read :math:`x_1, \dots, x_t` and predicts
  :math:`x_{t+1}`, and the value stored with :math:`h_i` is the word after it, :math:`x_{i+1}`.
- ``07.theta-zero``: at :math:`\theta = 0` every stored position weighs the same, so the cache is a
  unigram model of the window: :math:`p_{\text{cache}}(w) = \text{count}(w) / \omega` over :math:`\omega` stored positions.
- ``07.global``: :math:`\log p(x_{t+1})` under global normalisation,
  :math:`p(w) \propto e^{z_w} + \sum_{i: x_{i+1} = w} e^{\theta h_t\cdot h_i + \alpha}`.
- ``07.lam-one``: with :math:`\lambda = 1` a target absent from the window gets probability 0, so
  the perplexity of any long text is infinite.
- ``07.theta-zero-why``: the reason behind the exercise's answer, one letter of 3.
"""
from __future__ import annotations

import math

import torch

from .registry import Wrong, exercise, multiple_choice

V, H, N = 9, 5, 12  # a small cache: vocabulary, state size, stored positions


def _cache(seed: int = 0):
    """A small stored history: h_t (H,), keys (N, H), values (N,) and logits z (V,)."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.randn(N, H, generator=g, dtype=torch.float64)
    values = torch.randint(0, V - 2, (N,), generator=g)  # the last two words never occur in the window
    return torch.randn(H, generator=g, dtype=torch.float64), keys, values, 2 * torch.randn(V, generator=g, dtype=torch.float64)


def p_cache_reference(h_t, keys, values, theta: float, vocab_size: int) -> torch.Tensor:
    a = torch.softmax(theta * (keys @ h_t), 0)                                  # (n,)
    return torch.zeros(vocab_size, dtype=a.dtype).index_add_(0, values, a)      # (V,)


def _as_vector(out, what: str) -> torch.Tensor:
    out = torch.as_tensor(out, dtype=torch.float64)
    if out.shape != (V,):
        raise Wrong(f"{what} returned shape {tuple(out.shape)}; it must be one probability per word, shape ({V},).")
    return out


@exercise("07.p-cache", hint="over what do the attention weights from the scores theta h_t . h_i sum to 1: the "
                             "stored positions or the vocabulary? And how does each word then collect the weights of "
                             "the positions that stored it, into a vector of V numbers?")
def check_p_cache(answer) -> str:
    for seed, theta in [(0, 1.0), (1, 0.3), (2, 2.5)]:
        h_t, keys, values, _ = _cache(seed)
        got = _as_vector(answer(h_t, keys, values, theta, V), "p_cache")
        want = p_cache_reference(h_t, keys, values, theta, V)
        if abs(float(got.sum()) - 1) > 1e-6:
            raise Wrong(f"your vector sums to {float(got.sum()):.4f}, not 1: normalise the weights over the stored "
                        "positions (a softmax over i), not over the vocabulary.")
        if got[V - 2:].abs().max() > 1e-9:
            raise Wrong("words that never occur in the window got probability: p_cache(w) only sums the weights "
                        "of positions whose stored word is w.")
        if (got - want).abs().max() > 1e-6:
            raise Wrong(f"p_cache differs from the cache's by up to {float((got - want).abs().max()):.3g} (theta = "
                        f"{theta}): the weight of position i is softmax(theta * h_t . h_i), then summed by word.")
    return "the cache is attention over stored states whose values are the words that followed them."


@exercise("07.theta-zero", hint="with theta = 0 every score is the same: what is each of the omega weights then, and "
                                "what does p_cache(w) come down to for a word stored k times?")
def check_theta_zero(answer) -> str:
    for seed in range(3):
        h_t, keys, values, _ = _cache(seed)
        got = _as_vector(answer(values, V), "theta_zero_cache")
        want = p_cache_reference(h_t, keys, values, 0.0, V)
        if (got - want).abs().max() > 1e-9:
            if (got - torch.bincount(values, minlength=V)).abs().max() < 1e-9:
                raise Wrong("those are the counts; a distribution divides them by the number of stored positions.")
            raise Wrong("at theta = 0 the cache is the frequency of each word among the stored values; yours "
                        f"differs by up to {float((got - want).abs().max()):.3g}.")
    return "theta = 0 turns the neural cache into the classic unigram cache of Kuhn & De Mori (1990)."


def global_reference(z, h_t, keys, values, theta: float, alpha: float, target: int) -> float:
    s = theta * (keys @ h_t) + alpha                                             # (n,)
    num = torch.logaddexp(z[target], torch.logsumexp(s[values == target], 0)) if (values == target).any() else z[target]
    return float(num - torch.logaddexp(torch.logsumexp(z, 0), torch.logsumexp(s, 0)))


@exercise("07.global", hint="which terms of one softmax belong to the target: its logit, and which stored positions? "
                            "Which terms does the denominator sum over? And how do you add exponentials without "
                            "leaving the logs (torch.logsumexp)?")
def check_global(answer) -> str:
    h_t, keys, values, z = _cache(3)
    cases = [(int(values[0]), 1.0, 0.0), (int(values[3]), 0.5, 2.0), (V - 1, 1.5, -1.0)]
    for target, theta, alpha in cases:
        got = float(answer(z, h_t, keys, values, theta, alpha, target))
        want = global_reference(z, h_t, keys, values, theta, alpha, target)
        if not math.isfinite(got) or abs(got - want) > 1e-6:
            if target == V - 1:
                raise Wrong(f"for a target absent from the window the answer is {want:.4f}, yours {got:.4f}: its "
                            "numerator is exp(z_target) alone, but the cache still adds to the denominator.")
            raise Wrong(f"log p = {got:.4f}, but the global softmax gives {want:.4f} (target {target}, theta "
                        f"{theta}, alpha {alpha}): the cache terms join the vocabulary's in one normaliser.")
    return "one softmax over the vocabulary and the cache: alpha says how much a stored position is worth."


@exercise("07.lam-one", hint="what probability does p = (1 - lam) p_vocab + lam p_cache give a word that is not "
                             "in the window when lam = 1? And what does one such word do to a perplexity?")
def check_lam_one(answer) -> str:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        raise Wrong(f"give the perplexity as a number (float('inf') is a number), not {answer!r}.") from None
    if value != math.inf:
        raise Wrong(f"{value:g} is finite, but with lam = 1 a target missing from the window has probability 0, "
                    "log 0 = -inf, and one such token makes the mean log-probability -inf.")
    return "with lam = 1 the model is gone: every new word is impossible, so lam must stay below 1."


# 07.theta-zero-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_THETA_ZERO_WHY = {
    "a": "the weights are uniform over the stored positions, not over the words: what does that make "
         "p_cache(w) for a word stored three times?",
    "c": "the weights are a softmax of the scores, and a softmax of n zeros is not zero: what is each "
         "weight then?",
}


multiple_choice("07.theta-zero-why", right="b", why_not=_WHY_NOT_THETA_ZERO_WHY,
                hint="your theta_zero_cache says what the cache becomes; which words fill the last omega "
                "positions, and what share does a name seen once get?",
                explanation="a unigram cache spreads its mass like the recent words themselves, mostly over words the model "
                "already predicts; only a sharp theta puts the mass where the context matches.")
