r"""Causal self-attention, from its equations and on torch's fused kernel.

Lesson 07's cache scores the word that followed each past position :math:`i` by
:math:`\exp(\theta\, h_t \cdot h_i)`: attention whose keys are the past hidden states, whose values
are the next words, with one fixed temperature. Self-attention learns all three (Vaswani et al.
2017, Section 3.2). For the inputs :math:`x_1 \dots x_S` of a layer (D numbers each), one head of
size :math:`d` computes

.. math::

    q_t = W_Q x_t, \qquad k_i = W_K x_i, \qquad v_i = W_V x_i, \qquad
    a_{ti} = \frac{\exp(q_t \cdot k_i / \sqrt{d} + b_{t-i})}
                  {\sum_{j \in C(t)} \exp(q_t \cdot k_j / \sqrt{d} + b_{t-j})},
    \qquad y_t = \sum_{i \in C(t)} a_{ti}\, v_i,

over the positions :math:`C(t) = \{i : t - w \le i \le t\}` a language model may read: itself and at
most :math:`w` before it (``window``), never after (causal). :math:`b_{t-i}` is an optional learned
bias by distance (the model's relative positions). ``n_heads`` heads of size :math:`d = D / n`
attend in parallel; their outputs are concatenated and mixed by :math:`W_O`.

Two implementations of the same weights: :func:`attention_equations`, the equations above with an
explicit softmax (the reference, which also returns the weights :math:`a_{ti}` that the lesson
draws), and :func:`attention_fused`, ``torch.nn.functional.scaled_dot_product_attention``, which
never forms the weights in memory on the kernels that support it. Tensors are laid out
(B, heads, T, d) inside; the layer reads and writes (T, B, D) like the LSTM.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ATTENTIONS", "allowed_positions", "attention_equations", "attention_fused", "split_heads",
           "merge_heads", "CausalSelfAttention"]

ATTENTIONS = ("fused", "equations")


def allowed_positions(T: int, M: int, window: Optional[int], device=None) -> torch.Tensor:  # -> (T, M + T) bool
    r"""Which keys each query may read: query ``t`` (at position :math:`M + t` of the keys, after
    ``M`` remembered ones) reads key :math:`i` when :math:`M + t - w \le i \le M + t` (``window`` =
    :math:`w`; None: every earlier key)."""
    query = torch.arange(T, device=device).view(-1, 1) + M  # (T, 1)
    key = torch.arange(M + T, device=device).view(1, -1)  # (1, S)
    allowed = key <= query  # (T, S): causal
    if window is not None:
        allowed &= key >= query - window
    return allowed


def attention_equations(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                        bias: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(y, a)``: :math:`a = \operatorname{softmax}(q k^\top / \sqrt d + b)` over the allowed keys, and
    :math:`y = a v`.

    ``q`` (B, n, T, d), ``k`` and ``v`` (B, n, S, d), ``allowed`` (T, S), ``bias`` (n, T, S) or None.
    Returns ``y`` (B, n, T, d) and the weights ``a`` (B, n, T, S)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, n, T, S)
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~allowed, float("-inf"))
    a = torch.softmax(scores, dim=-1)  # (B, n, T, S)
    return a @ v, a


def attention_fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                    bias: Optional[torch.Tensor] = None, dropout_p: float = 0.0) -> torch.Tensor:
    """The same attention through ``scaled_dot_product_attention`` (``is_causal=True`` when the mask is
    the plain causal one, else the mask and bias as one additive float mask); ``y`` (B, n, T, d)."""
    T, S = allowed.shape
    if bias is None and T == S and bool(allowed.equal(torch.ones_like(allowed).tril())):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    mask = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed, float("-inf"))  # (T, S)
    if bias is not None:
        mask = mask + bias.to(q.dtype)  # (n, T, S)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:  # (S, B, D) -> (B, n, S, D / n)
    S, B, D = x.shape
    return x.view(S, B, n_heads, D // n_heads).permute(1, 2, 0, 3)


def merge_heads(y: torch.Tensor) -> torch.Tensor:  # (B, n, T, d) -> (T, B, n d)
    B, n, T, d = y.shape
    return y.permute(2, 0, 1, 3).reshape(T, B, n * d)


class CausalSelfAttention(nn.Module):
    r"""Multi-head causal self-attention: :math:`W_O\,[y^{(1)}; \dots; y^{(n)}]`, each head as in the module docstring.

    ``forward(x, past, allowed, bias)`` reads the new positions ``x`` (T, B, D) after the remembered
    inputs ``past`` (M, B, D) (keys and values are computed from both; queries from ``x`` only).
    ``attention``: ``fused`` (torch's kernel) or ``equations`` (the reference); ``keep_weights=True``
    makes the equations path store its last weights in ``self.weights`` (B, n, T, M + T).
    """

    def __init__(self, size: int, n_heads: int, dropout: float = 0.0, attention: str = "fused"):
        super().__init__()
        if size % n_heads:
            raise ValueError(f"The model size {size} does not split into {n_heads} heads: "
                             "pick n_heads dividing emb_size.")
        if attention not in ATTENTIONS:
            raise ValueError(f"attention={attention!r} is unknown: use 'fused' or 'equations'.")
        self.n_heads, self.dropout, self.attention = n_heads, dropout, attention
        self.qkv = nn.Linear(size, 3 * size)  # W_Q, W_K, W_V stacked
        self.out = nn.Linear(size, size)  # W_O
        self.keep_weights = False
        self.weights: Optional[torch.Tensor] = None

    def forward(self, x: torch.Tensor, past: torch.Tensor, allowed: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:  # (T, B, D) -> (T, B, D)
        T, D = x.size(0), x.size(2)
        q = split_heads(F.linear(x, self.qkv.weight[:D], self.qkv.bias[:D]), self.n_heads)  # (B, n, T, d)
        kv = F.linear(torch.cat([past, x]), self.qkv.weight[D:], self.qkv.bias[D:])  # (S, B, 2D)
        k, v = (split_heads(part, self.n_heads) for part in kv.split(D, dim=-1))  # (B, n, S, d) each
        p = self.dropout if self.training else 0.0
        if self.attention == "equations" or self.keep_weights:
            y, a = attention_equations(q, k, v, allowed, bias)
            self.weights = a.detach() if self.keep_weights else None
            if p > 0:  # dropout on the weights, as the fused kernel does
                y = F.dropout(a, p, training=True) @ v
        else:
            y = attention_fused(q, k, v, allowed, bias, p)
        return self.out(merge_heads(y))  # (T, B, D)
