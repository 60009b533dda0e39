"""Reference answers to the exercises of lesson 01 (the n-gram baseline), and wrong answers their checks reject."""
import math

import torch

from lmcourse.corpora.data import load_corpus
from lmcourse.course.exercises.lesson01 import kn_discount


# 01.continuation
def p_continuation(tokens, V):
    pairs = torch.unique(torch.stack([tokens[:-1], tokens[1:]], 1), dim=0)   # (M, 2) distinct bigrams v w
    N1_dot_w = torch.bincount(pairs[:, 1], minlength=V)                       # (V,) N1+(. w)
    return N1_dot_w.double() / len(pairs)                                     # divided by N1+(. .) = M


# 01.addk-limit
addk_limit_ppl = 1_000    # (c(vw) + k) / (c(v) + kV) tends to 1/V: the uniform model, whose perplexity is V


# 01.discount
def kn_bigram_logprobs(train, test, V, eos, D=None):
    x, y = (torch.cat([torch.tensor([eos]), s]) for s in (train, test))      # both read after an <eos>
    keys, c_vw = torch.unique(x[:-1] * V + x[1:], return_counts=True)         # (M,) distinct bigrams v w
    v, w = keys // V, keys % V
    N1_w = torch.bincount(w, minlength=V).double()                            # (V,) N1+(. w)
    D1 = kn_discount(N1_w)
    p1 = (N1_w - D1).clamp(min=0) / len(keys) + D1 * float((N1_w > 0).sum()) / len(keys) / V
    D2 = kn_discount(c_vw) if D is None else D
    c_v = torch.bincount(v, weights=c_vw.double(), minlength=V)               # (V,) c(v .)
    gamma = torch.where(c_v > 0, D2 * torch.bincount(v, minlength=V).double() / c_v.clamp(min=1), 1.0)
    q = y[:-1] * V + y[1:]                                                    # (N,) the test bigrams
    i = torch.searchsorted(keys, q).clamp(max=len(keys) - 1)
    c_q = torch.where(keys[i] == q, c_vw[i], 0).double()                      # (N,) their training counts
    return ((c_q - D2).clamp(min=0) / c_v[y[:-1]].clamp(min=1) + gamma[y[:-1]] * p1[y[1:]]).log()


embedded = load_corpus("embedded")
V_e, eos_e = len(embedded.vocab), embedded.vocab.eos
ppl_by_D = {D: math.exp(-kn_bigram_logprobs(embedded.train, embedded.valid, V_e, eos_e, D).mean())
            for D in [0.1, 0.3, 0.5, 0.7, 0.9]}
best_D = min(ppl_by_D, key=ppl_by_D.get)


# 01.discount-why
discount_too_small, discount_too_large = "a", "b"


def _frequency(tokens, V):       # how often each word occurs: not the continuation probability
    return torch.bincount(tokens[1:], minlength=V).double() / (len(tokens) - 1)


def _unnormalised(tokens, V):    # the continuation counts, not divided by N1+(. .)
    pairs = torch.unique(torch.stack([tokens[:-1], tokens[1:]], 1), dim=0)
    return torch.bincount(pairs[:, 1], minlength=V).double()


ANSWERS = {
    "01.continuation": p_continuation,
    "01.addk-limit": addk_limit_ppl,
    "01.discount": best_D,
    "01.discount-why": (discount_too_small, discount_too_large),
}
WRONG = {
    "01.continuation": [_frequency, _unnormalised],
    "01.addk-limit": [float("inf"), 0.5, 500],
    "01.discount": [0.1, 0.3, 0.75],
    "01.discount-why": [("b", "a"), ("a", "c"), ("d", "b"), ("a", "e")],
}
