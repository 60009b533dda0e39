"""Reference answers to lesson 10's exercises (and wrong ones the checks must reject)."""
import math

import torch


def causal_attention(q, k, v):
    T, d = q.shape
    scores = q @ k.T / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def block_params(E, F):
    return 2 * 2 * E + 3 * E * E + 3 * E + E * E + E + E * F + F + F * E + E


def reach(L, window):
    return L * window


ANSWERS = {
    "10.attention": causal_attention,
    "10.block-params": block_params,
    "10.reach": reach,
}


def _unmasked(q, k, v):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=-1) @ v


def _unscaled(q, k, v):
    T = q.shape[0]
    return torch.softmax((q @ k.T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), -1) @ v


WRONG = {
    "10.attention": [_unmasked, _unscaled],
    "10.block-params": [lambda E, F: 4 * E * E + 2 * E * F, lambda E, F: 4 * E * E + 4 * E + 2 * E * F + F + E],
    "10.reach": [lambda L, window: window, lambda L, window: L * (window + 1)],
}
