r"""Lesson 03 exercises: embedding dropout by word type, the chance of losing a word, weight drop's noise.

- ``03.embedding``: embedding dropout, :math:`e(x_t) = m_{x_t} E[x_t] / (1-p)` with one mask entry
  :math:`m_v` per word type of the vocabulary (Gal & Ghahramani 2016; Merity et al. 2018).
- ``03.word-types``: under embedding dropout with rate :math:`p` every occurrence of a word type
  shares one draw, so three occurrences are all dropped with probability :math:`p`, not :math:`p^3`.
- ``03.weight-noise``: with DropConnect at rate :math:`p`, the noise of a pre-activation
  :math:`\sum_k M_{jk} W_{jk} h_k / (1-p)` has standard deviation proportional to
  :math:`\sqrt{p / (1-p)}`, so going from 0.5 to 0.9 multiplies it by 3.
- ``03.weight-noise-why``: the reason behind the exercise's answer, one letter of 3.
"""
from __future__ import annotations

import math

import torch

from .registry import Wrong, exercise, multiple_choice

P_EMBED, OCCURRENCES = 0.1, 3  # exercise 03.word-types
P_FROM, P_TO = 0.5, 0.9  # exercise 03.weight-noise


@exercise("03.embedding", hint="is the keep-or-drop decision made once per position of the text, or once per word "
                               "type, that is per row of the table? And by what must a kept row be multiplied so "
                               "that the expected vector stays the same?")
def check_embedding(answer) -> str:
    p, V, d, N = 0.3, 2_000, 8, 6_000
    torch.manual_seed(0)
    E = torch.ones(V, d)
    words = torch.randint(0, V, (N,))  # (N,) most words occur several times
    out = torch.as_tensor(answer(E.clone(), words, p)).float()
    if out.shape != (N, d):
        raise Wrong(f"the output has shape {tuple(out.shape)}; give one vector per word read, ({N}, {d}).")
    kept = out[out != 0]
    if len(kept) and torch.allclose(kept, torch.ones_like(kept)):
        raise Wrong("the kept vectors are not rescaled: multiply them by 1 / (1 - p) so the expected input stays the same.")
    if not torch.allclose(kept, torch.full_like(kept, 1 / (1 - p))):
        raise Wrong(f"on a table of ones every entry should be 0 or 1 / (1 - p), got values {kept.unique()[:4].tolist()}.")
    row_dropped = out[:, 0] == 0  # (N,)
    if not torch.equal(out, out[:, :1].expand_as(out)):
        raise Wrong("some vectors are only partly zeroed: embedding dropout removes a word's whole vector, "
                    "not single coordinates.")
    fate = torch.zeros(V).index_add_(0, words, row_dropped.float()) / torch.bincount(words, minlength=V).clamp(min=1)
    if ((fate > 0) & (fate < 1)).any():
        raise Wrong("a word is dropped at one occurrence and kept at another: draw one mask entry per word type "
                    "of the vocabulary, then look it up for each occurrence.")
    seen = torch.bincount(words, minlength=V) > 0
    share = float(fate[seen].mean())
    if abs(share - p) > 0.05:
        raise Wrong(f"{share:.0%} of the word types are dropped, but p = {p:.0%}: a type is kept when rand >= p.")
    return "whole word types vanish, at every occurrence, and the kept ones are scaled by 1 / (1 - p)."


@exercise("03.word-types", hint="a dropped word type is dropped at every occurrence in the batch: how many random "
                                "draws decide the fate of the three occurrences?", predicts=(P_EMBED,))
def check_word_types(answer) -> str:
    value = float(answer)
    if abs(value - P_EMBED) < 1e-9:
        return (f"one draw per word type: all {OCCURRENCES} occurrences go together, with probability p = {P_EMBED}, "
                "or none does.")
    if abs(value - P_EMBED ** OCCURRENCES) < 1e-9:
        raise Wrong(f"p^{OCCURRENCES} would be right if each occurrence had its own draw; embedding dropout draws "
                    "once per word type, so the occurrences are not independent.")
    if abs(value - (1 - P_EMBED)) < 1e-9:
        raise Wrong(f"{1 - P_EMBED:g} is the chance that the word is kept, not dropped.")
    raise Wrong(f"{value:g} is not it: how many independent draws decide whether the {OCCURRENCES} "
                "occurrences of one word are dropped?")


def noise_ratio_reference(p_from: float = P_FROM, p_to: float = P_TO) -> float:
    r""":math:`\sqrt{p_2/(1-p_2)} / \sqrt{p_1/(1-p_1)}`: the growth of DropConnect's noise."""
    return math.sqrt(p_to / (1 - p_to)) / math.sqrt(p_from / (1 - p_from))


@exercise("03.weight-noise", hint="each term M_k w_k h_k / (1-p) is a Bernoulli variable, scaled: what is its "
                                  "variance, as a function of p? When independent terms are added, what adds up, and "
                                  "what does that make of the standard deviation?")
def check_weight_noise(answer) -> str:
    value, want = float(answer), noise_ratio_reference()
    if abs(value - want) <= 0.05 * want:
        return (f"the noise grows as sqrt(p / (1 - p)): x{want:.1f} from p = {P_FROM} to {P_TO}, because the few "
                "kept weights are scaled up tenfold.")
    if abs(value - P_TO / P_FROM) < 0.05:
        raise Wrong(f"{value:g} is the ratio of the two p's; the kept weights are also scaled by 1 / (1 - p), "
                    "and the variance goes as p / (1 - p).")
    if abs(value - want ** 2) <= 0.05 * want ** 2:
        raise Wrong(f"{value:g} is the ratio of the variances; the question asks for the standard deviations.")
    raise Wrong(f"{value:g} is not the measured ratio: compare the standard deviation of the pre-activations at "
                f"p = {P_TO} with the one at p = {P_FROM}.")


# 03.weight-noise-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_WEIGHT_NOISE_WHY = {
    "b": "the variances of independent terms add, not their standard deviations: which power of p / (1 - "
         "p) does that leave for the standard deviation?",
    "c": "the rescaling multiplies each kept weight, its noise included, by 1 / (1 - p), which is 10 at p "
         "= 0.9: it cannot leave the spread alone.",
}


multiple_choice("03.weight-noise-why", right="a", why_not=_WHY_NOT_WEIGHT_NOISE_WHY,
                hint="which add up over independent terms: their variances or their standard deviations? "
                "And what is the variance of one term M_k w_k h_k / (1 - p), with M_k ~ Bernoulli(1 - p)?",
                explanation="Var = p / (1 - p) * sum w_k^2 h_k^2, so the standard deviation goes from sqrt(1) to sqrt(9): a "
                "factor 3.")
