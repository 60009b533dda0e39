r"""Lesson 10 exercises: one head of causal attention, a block's parameter count, and how far back a stack reads.

- ``10.attention``: :math:`y = \operatorname{softmax}(q k^\top / \sqrt d + m)\, v` for one head, with
  :math:`m_{ti} = -\infty` for :math:`i > t` (Vaswani et al. 2017, Section 3.2.1, with the decoder's mask).
- ``10.block-params``: the numbers of one pre-norm block of width E and feed-forward width F: two layer
  norms (:math:`2E` each), :math:`W_Q, W_K, W_V` with biases (:math:`3E^2 + 3E`), :math:`W_O`
  (:math:`E^2 + E`), the feed-forward layer (:math:`EF + F + FE + E`).
- ``10.reach``: with L layers each reading :math:`\omega` positions back (``window``), the last layer's output
  at t depends on the inputs from :math:`t - L\omega` on.
"""
from __future__ import annotations

import math

import torch

from ...networks.transformer import Block, TransformerConfig
from .registry import Wrong, exercise

__all__ = ["check_attention", "check_block_params", "check_reach"]


def _reference_attention(q, k, v):
    T, d = q.shape
    scores = q @ k.T / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@exercise("10.attention", hint="which product of q and k gives one row of scores per query, and what are they "
                               "divided by? Which keys may query t read, and what value makes a softmax ignore the "
                               "others? Along which axis does the softmax run?")
def check_attention(answer) -> str:
    g = torch.Generator().manual_seed(10)
    q, k, v = (torch.randn(6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    got = answer(q.clone(), k.clone(), v.clone())
    if not isinstance(got, torch.Tensor) or got.shape != v.shape:
        raise Wrong(f"return a tensor of shape {tuple(v.shape)}: one output vector per query.")
    want = _reference_attention(q, k, v)
    if torch.allclose(got, want, atol=1e-9):
        return "the same numbers as torch's scaled_dot_product_attention with is_causal=True."
    unmasked = torch.softmax(q @ k.T / 2.0, dim=-1) @ v
    if torch.allclose(got, unmasked, atol=1e-9):
        raise Wrong("every query reads every key, the later ones too: mask the entries above the diagonal with -inf.")
    unscaled = torch.softmax((q @ k.T).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf")), -1) @ v
    if torch.allclose(got, unscaled, atol=1e-9):
        raise Wrong("the scores are not divided by sqrt(d) = 2, so the softmax is too sharp.")
    strict = torch.ones(6, 6, dtype=torch.bool).triu(0)
    if torch.isnan(got[0]).all() or torch.allclose(got[1:], (torch.softmax((q @ k.T / 2).masked_fill(strict, float(
            "-inf")), -1) @ v)[1:], atol=1e-9):
        raise Wrong("a query must also read its own position (the diagonal stays); only later ones are masked.")
    raise Wrong("the outputs differ from softmax(q k^T / sqrt(d) + mask) v.")


def _block_params(E: int, F: int) -> int:
    with torch.device("meta"):
        block = Block(TransformerConfig(vocab_size=2, emb_size=E, n_heads=1, ffn_size=F))
    return sum(p.numel() for p in block.parameters())


@exercise("10.block-params", hint="how many numbers does a linear map from E inputs to F outputs hold, counting its bias? "
                                  "What does a layer norm learn for each of its E inputs, and how many layer norms "
                                  "does a pre-norm block have?")
def check_block_params(answer) -> str:
    cases = [(64, 128), (16, 24), (8, 32), (100, 7)]
    for E, F in cases:
        got, want = answer(E, F), _block_params(E, F)
        if got == want:
            continue
        if got == want - 4 * E:
            raise Wrong("the two layer norms are missing: each has a scale and a shift of E numbers.")
        if got == want - 5 * E - F:
            raise Wrong("the biases are missing: W_Q, W_K, W_V and W_O have one of E numbers each, W_1 one of F, W_2 "
                        "one of E.")
        raise Wrong(f"for E = {E}, F = {F} the block has {want:,} parameters, you said {got}.")
    return f"at the lesson's sizes (E = 64, F = 128) one block has {_block_params(64, 128):,} numbers."


@exercise("10.reach", predicts=(2 * 4,),  # the cell after the check probes reach(2, 4): two layers, a window of 4
          hint="which inputs does layer 1's output at t read? Layer 2's output at t reads layer 1's outputs at "
               "t - window .. t: how far back does the earliest of those reach?")
def check_reach(answer) -> str:
    for L, window in [(1, 35), (2, 35), (3, 10), (6, 512)]:
        got = answer(L, window)
        if got == L * window:
            continue
        if got == window:
            raise Wrong("that is one layer's reach: each layer adds a window more positions through the outputs it "
                        "reads.")
        if got == L * window + 1 or got == L * (window + 1):
            raise Wrong("count distances, not positions: one layer reaches back a window's positions (from "
                        "t - window to t).")
        raise Wrong(f"for L = {L} layers of window {window} the output reaches {L * window} positions back, you said "
                    f"{got}.")
    return ("L x window positions: why the state of lesson 10's Transformer keeps each layer's inputs, not only the last "
            "tokens, for a stream read in chunks to score as when read whole.")
