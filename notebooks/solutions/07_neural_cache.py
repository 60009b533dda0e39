"""Reference answers to the exercises of lesson 07 (the neural cache), and wrong answers their checks reject."""
import math

import torch


# 07.p-cache
def p_cache(h_t, keys, values, theta, V):
    a = torch.softmax(theta * (keys @ h_t), 0)                 # (n,): one weight per stored position
    return torch.zeros(V, dtype=a.dtype).index_add_(0, values, a)   # (V,): the weights summed by word


# 07.theta-zero
def theta_zero_cache(values, V):
    counts = torch.bincount(values, minlength=V).double()      # (V,): how often each word is stored
    return counts / len(values)                                # every position weighs 1/n


why_theta_zero = "b"    # a unigram cache: mostly frequent words, and 1/n for a name seen once


# 07.global
def global_log_prob(z, h_t, keys, values, theta, alpha, target):
    s = theta * (keys @ h_t) + alpha                           # (n,): log-weight of each stored position
    hit = s[values == target]                                  # the positions that stored the target
    numerator = torch.logsumexp(torch.cat([z[target].view(1), hit]), 0)
    denominator = torch.logaddexp(torch.logsumexp(z, 0), torch.logsumexp(s, 0))
    return float(numerator - denominator)


# 07.lam-one
lam_one_perplexity = math.inf   # a target missing from the window gets p = 0: log 0 = -inf


def _softmax_over_vocab(h_t, keys, values, theta, V):          # normalises over words, not positions
    s = torch.zeros(V, dtype=keys.dtype).index_add_(0, values, torch.exp(theta * (keys @ h_t)))
    return s / s.sum() * 0.9 + 0.1 / V


def _uniform_weights(h_t, keys, values, theta, V):            # forgets theta
    return torch.zeros(V, dtype=keys.dtype).index_add_(0, values, torch.full((len(values),), 1 / len(values),
                                                                             dtype=keys.dtype))


def _counts(values, V):
    return torch.bincount(values, minlength=V).double()


def _no_cache_in_denominator(z, h_t, keys, values, theta, alpha, target):
    s = theta * (keys @ h_t) + alpha
    return float(torch.logsumexp(torch.cat([z[target].view(1), s[values == target]]), 0) - torch.logsumexp(z, 0))


ANSWERS = {
    "07.p-cache": p_cache,
    "07.theta-zero": theta_zero_cache,
    "07.global": global_log_prob,
    "07.lam-one": lam_one_perplexity,
    "07.theta-zero-why": why_theta_zero,
}
WRONG = {
    "07.p-cache": [_softmax_over_vocab, _uniform_weights],
    "07.theta-zero": [_counts, lambda values, V: torch.full((V,), 1.0 / V, dtype=torch.float64)],
    "07.global": [_no_cache_in_denominator],
    "07.lam-one": [1.0, 1e6, "infinite"],
    "07.theta-zero-why": ["a", "c", "d"],
}
