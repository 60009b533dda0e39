r"""Lesson 05 exercises: a softmax from the SVD, the softmax without a bias, the knee, the sharpness knob.

- ``05.svd-fit``: the truncated SVD of the double-centred :math:`A` plus the column means is a softmax
  of dimension :math:`d`; it is exact once :math:`d \ge \operatorname{rank}(P A Q)`.
- ``05.no-bias``: without a bias only row shifts are free, so the smallest exact :math:`d` is
  :math:`\operatorname{rank}(A Q)`, :math:`A` with its row means removed.
- ``05.knee``: the dimension at which the fitted KL to a 100 x 40 lookup table reaches zero.
- ``05.sharpness``: doubling the lookup's sharpness scales the spectrum, keeps the rank, and, for
  peaked rows, makes a small softmax's KL smaller, not larger.
- ``05.sharpness-why``: the reason behind the exercise's answer, one letter of 3.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from ...corpora.grammar import Params
from ...networks.bottleneck import (centre, fit_softmax, kl_rows, lookup_log_probs, min_softmax_dim, numerical_rank,
                                    singular_values, svd_curve)
from .registry import Wrong, exercise, multiple_choice

KNEE_VALUES = 40              # 05.knee: values in the lookup table
SHARP_FROM, SHARP_TO, SHARP_D = 2.5, 5.0, 16  # 05.sharpness: the knob moves, the fit's dimension


def _low_rank(N: int, M: int, d: int, seed: int, bias: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(N, d, generator=g, dtype=torch.float64) @ torch.randn(d, M, generator=g, dtype=torch.float64)
    return Z + torch.randn(M, generator=g, dtype=torch.float64) if bias else Z


def _fit_cases() -> list[tuple[str, torch.Tensor, int]]:
    """(what it is, A, d): a truncation and an exact case for two tables."""
    table = lookup_log_probs(Params(n_values=30))                  # (100, 30): exact from d = 29
    built = torch.log_softmax(_low_rank(40, 30, 4, 5, bias=True), 1)  # exact from d = 4
    return [("the 100 x 30 lookup table, d = 5", table, 5), ("the 100 x 30 lookup table, d = 29", table, 29),
            ("log_softmax(H W^T + b) built with d = 4, fitted with d = 2", built, 2),
            ("log_softmax(H W^T + b) built with d = 4, fitted with d = 4", built, 4)]


@exercise("05.svd-fit", hint="which two shifts does a softmax absorb for free, and what is left of A once they are "
                             "taken out? Which rank-d matrix is closest to that rest (the lesson's spectrum cell)?")
def check_svd_fit(answer) -> str:
    for what, A, d in _fit_cases():
        logits = torch.as_tensor(answer(A.clone(), d)).double()
        if logits.shape != A.shape:
            raise Wrong(f"for {what} the logits have shape {tuple(logits.shape)}, not {tuple(A.shape)} "
                        "(contexts x words).")
        if min_softmax_dim(logits, rtol=1e-6) > d:
            raise Wrong(f"for {what} your logits need {min_softmax_dim(logits, rtol=1e-6)} dimensions, more than "
                        f"d = {d}: keep only the d largest singular values.")
        got, want = float(kl_rows(A, logits).mean()), float(svd_curve(A)[d])
        if got > want + 1e-9:
            exact = " (it should be 0 here: d is the table's exact dimension)" if want < 1e-12 else ""
            raise Wrong(f"for {what} the mean KL is {got:.3g} nats, but the truncated SVD of the centred A gives "
                        f"{want:.3g}{exact}: centre both ways, and add the column means back as the bias.")
    return ("from the double-centred A's SVD you get a softmax of any d; it is exact once d reaches the rank of the "
            "centred A, which proves the 'if' half of the theorem.")


def _nobias_cases() -> list[tuple[str, torch.Tensor]]:
    return [("log_softmax(H W^T + b) with d = 3", torch.log_softmax(_low_rank(30, 25, 3, 5, bias=True), 1)),
            ("log_softmax(H W^T) with d = 4", torch.log_softmax(_low_rank(30, 30, 4, 7), 1)),
            ("the lookup table with 20 values", lookup_log_probs(Params(n_values=20)))]


@exercise("05.no-bias", hint="a softmax with a bias absorbs a row shift and a column shift; without the bias, "
                             "which of the two is still free? What does that change in the lesson's min_softmax_dim?")
def check_no_bias(answer) -> str:
    for what, A in _nobias_cases():
        got, want = answer(A.clone()), min_softmax_dim(A, bias=False)
        if int(got) != want:
            if int(got) == min_softmax_dim(A):
                raise Wrong(f"for {what} it returned {got}, the dimension of a softmax WITH a bias: without one, "
                            "the column means are not free; remove only the row means.")
            if int(got) == numerical_rank(A):
                raise Wrong(f"for {what} it returned rank(A) = {got}, but the normaliser is a free row shift: "
                            f"remove the row means first; the answer is {want}.")
            raise Wrong(f"for {what} it returned {got}, but a softmax without a bias needs d = {want}.")
    return ("without a bias the smallest exact d is rank(A Q), never more than one above the biased one: the "
            "bias is worth one dimension at most.")


@lru_cache(maxsize=1)
def knee_reference() -> int:
    return min_softmax_dim(lookup_log_probs(Params(n_values=KNEE_VALUES)))


@exercise("05.knee", predicts=lambda: (knee_reference(),),
          hint=f"the table is 100 keys x {KNEE_VALUES} values of full rank; which rank decides an exact "
                          "fit with a bias, and how does it relate to rank(A)?")
def check_knee(answer) -> str:
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise Wrong(f"give the dimension as a whole number, got {answer!r}.")
    want = knee_reference()
    if answer == want + 1:
        raise Wrong(f"{answer} is rank(A): the row shift of the normaliser is free, so one dimension fewer is "
                    "enough.")
    if answer != want:
        raise Wrong(f"{answer} is not it: A has rank {KNEE_VALUES}; the fit needs the rank of A with its row and "
                    "column means removed.")
    return (f"d = {want}: with {KNEE_VALUES} values the centred table has rank {want}, and the KL drops to zero "
            "exactly there, whatever the sharpness.")


@lru_cache(maxsize=1)
def sharpness_reference() -> dict:
    """What doubling the sharpness does: the spectrum's scale, the smallest exact d, and the KL at d = 16."""
    A, B = (lookup_log_probs(Params(lookup_sharpness=s)) for s in (SHARP_FROM, SHARP_TO))
    ratio = float(singular_values(centre(B))[0] / singular_values(centre(A))[0])
    kl_a, kl_b = (fit_softmax(T, SHARP_D, max_iter=120).kl for T in (A, B))
    return {"sigma": "doubles" if ratio > 1.5 else "halves" if ratio < 0.75 else "same",
            "min_dim": min_softmax_dim(B), "kl_16": "smaller" if kl_b < kl_a else "larger",
            "ratio": ratio, "kl": (kl_a, kl_b)}


@exercise("05.sharpness", hint="log softmax(s G) is s G less a row shift: what does multiplying a matrix by s do "
                               "to its singular values, and to its rank? Which values decide a peaked row?")
def check_sharpness(answer) -> str:
    if not isinstance(answer, dict) or set(answer) != {"sigma", "min_dim", "kl_16"}:
        raise Wrong('give a dict with the keys "sigma", "min_dim" and "kl_16".')
    ref = sharpness_reference()
    if answer["sigma"] != ref["sigma"]:
        raise Wrong(f"sigma: the centred table is sharpness x (centred G), so its singular values go up by "
                    f"{ref['ratio']:.2f}x: '{ref['sigma']}'.")
    if answer["min_dim"] != ref["min_dim"]:
        raise Wrong(f"min_dim: scaling a matrix by 2 leaves its rank alone; the smallest exact d stays "
                    f"{ref['min_dim']}.")
    if answer["kl_16"] != ref["kl_16"]:
        a, b = ref["kl"]
        raise Wrong(f"kl_16: the fit at d = {SHARP_D} went from {a:.3f} to {b:.3f} nats. Sharper rows put almost "
                    "all their mass on a few values, and KL only weighs the log-probabilities of likely words.")
    a, b = ref["kl"]
    return (f"the spectrum grows {ref['ratio']:.2f}x, the exact d stays {ref['min_dim']}, and the best d = "
            f"{SHARP_D} fit improves from {a:.3f} to {b:.3f} nats: rank says whether a fit is exact, not how "
            "much an inexact one costs.")


# 05.sharpness-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_SHARPNESS_WHY = {
    "a": "doubling the sharpness doubles every singular value alike, so the share the first 16 hold does "
         "not change: look at what KL weighs each error by.",
    "c": "the rank of s G is the rank of G, as your second answer says: look at what KL weighs each error "
         "by.",
}


multiple_choice("05.sharpness-why", right="b", why_not=_WHY_NOT_SHARPNESS_WHY,
                hint="KL(p || q) = sum_v p(v) (log p(v) - log q(v)): which values' errors count, and "
                "how many such values does a sharp row have?",
                explanation="the errors that count are those of the likely values, and a sharp row has few of them: a "
                "16-dimensional softmax can get those right while it gets the unlikely ones wrong.")
