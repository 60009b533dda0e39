r"""Counting n-grams with array operations, and the per-order tables an n-gram model reads.

No n-gram is ever a Python tuple or a dict key here. Word ids ``0 .. V-1`` are the vocabulary and
``V`` stands for the sentence start ``<s>``, so a position holds one of :math:`W = V + 1` symbols.
An n-gram of order 1 is its word id. An n-gram of order :math:`n \ge 2` is the pair (row of its
first :math:`n-1` words among the (n-1)-grams, last word), packed into one int64 key

.. math::  \mathrm{key}(w_1 \dots w_n) = \mathrm{row}_{n-1}(w_1 \dots w_{n-1}) \cdot W + w_n ,

and its own row is the rank of that key among the sorted distinct keys of order :math:`n`. Keys
therefore stay below (number of (n-1)-grams) x W whatever the order: no :math:`V^n` overflow.

Positions of a text are laid out as one array ``seq`` with a ``depth`` per position: the number
of words ending there that belong to the same sentence (sentence mode, which starts every line
with ``<s>``) or to the stream (stream mode, which reads the text as if preceded by ``<eos>``).
A window of order :math:`n` ending at position :math:`t` exists when ``depth[t] >= n``.

Row ids of windows use two sentinels: ``UNSEEN = -1`` (the window exists but was never counted)
and ``NONE = -2`` (the window would reach past the start of its sentence or stream).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

UNSEEN = -1
NONE = -2
PAD = -1  # a state slot that holds no word yet
MKN_FALLBACK = (0.5, 1.0, 1.5)  # KenLM lmplz --discount_fallback defaults for D1, D2, D3+


@dataclass
class Layout:
    """A text laid out for windowing: ``seq`` (T,) symbols, ``depth`` (T,) window room, ``target`` (T,) scored."""

    seq: np.ndarray
    depth: np.ndarray
    target: np.ndarray


def sentence_layout(x: np.ndarray, bos: int, eos: int) -> Layout:
    """``<s>`` (id ``bos``) before every line; a line ends after each ``eos``. All of ``x`` is scored."""
    line_start = np.concatenate([[True], x[:-1] == eos])  # (N,)
    seq = np.insert(x, np.flatnonzero(line_start), bos)  # (T,) T = N + lines
    is_bos = seq == bos
    t = np.arange(len(seq))
    depth = t - np.maximum.accumulate(np.where(is_bos, t, 0)) + 1  # (T,)
    return Layout(seq, depth, ~is_bos)


def stream_layout(x: np.ndarray, eos: int) -> Layout:
    """One ``eos`` before the stream, as context only; the stream's windows run across lines."""
    seq = np.concatenate([[eos], x])  # (N+1,)
    depth = np.arange(1, len(seq) + 1)
    target = depth > 1
    return Layout(seq, depth, target)


def state_layout(state: np.ndarray, bos: int) -> Layout:
    """Lay out model states (B, L) of left-padded contexts as one flat text of B * L positions.

    A window may not cross a pad slot nor have ``<s>`` anywhere but first, so ``depth`` restarts
    at each; because ``depth <= column + 1`` no window reaches into the row before.
    """
    B, L = state.shape
    col = np.broadcast_to(np.arange(L), (B, L))
    last_pad = np.maximum.accumulate(np.where(state == PAD, col, -1), axis=1)  # (B, L)
    last_bos = np.maximum.accumulate(np.where(state == bos, col, -1), axis=1)  # (B, L)
    depth = np.minimum(col - last_pad, np.where(last_bos >= 0, col - last_bos + 1, L + 1))  # (B, L)
    return Layout(state.reshape(-1), depth.reshape(-1), np.zeros(B * L, dtype=bool))


# ----------------------------------------------------------------------------------- rows


def sort_with_index(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted k, order)`` with ``k[order]`` sorted and ties in index order, for ``k >= 0``.

    The index is packed into the low bits of each key so that one plain ``np.sort`` (much faster
    than ``argsort``) does the work; a stable ``argsort`` serves when the bits do not fit.
    """
    bits = max(len(k) - 1, 1).bit_length()
    if len(k) and int(k.max()) >> (62 - bits):
        order = np.argsort(k, kind="stable")
        return k[order], order
    packed = np.sort((k << bits) | np.arange(len(k)))
    return packed >> bits, packed & ((1 << bits) - 1)


def unique_rows(k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group equal keys: ``(K, perm, row, starts)``.

    ``K``: the distinct keys, sorted; ``perm`` sorts ``k`` (ties in index order); ``row[j]`` is the
    row of ``k[perm[j]]`` in ``K``; ``starts``: where each row's run begins in ``perm`` order.
    """
    ks, perm = sort_with_index(k)
    new = np.ones(len(ks), dtype=bool)
    new[1:] = ks[1:] != ks[:-1]
    return ks[new], perm, np.cumsum(new) - 1, np.flatnonzero(new)


def find_rows(K: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Row of each key ``k`` in the sorted table ``K``; ``UNSEEN`` where absent or ``k < 0``.

    The queries are sorted first: a binary search over sorted needles stays in cache.
    """
    out = np.full(len(k), UNSEEN, dtype=np.int64)
    if len(K) == 0 or len(k) == 0:
        return out
    ks, order = sort_with_index(np.maximum(k, 0))
    i = np.minimum(np.searchsorted(K, ks), len(K) - 1)
    out[order] = np.where(K[i] == ks, i, UNSEEN)
    out[k < 0] = UNSEEN
    return out


def count_rows(lay: Layout, order: int, W: int) -> tuple[list, list, list]:
    """Distinct n-grams of every order, from training text.

    Returns ``keys[n]`` (sorted int64 keys of order n, n >= 2), ``rows[n]`` (T,): the row of the
    window of order n ending at each position (``NONE`` where there is none; ``rows[1]`` is
    ``seq``), and ``first[n]``: the first position where each row of order n ends.
    """
    keys, rows, first = [None, None], [None, lay.seq], [None, None]
    for n in range(2, order + 1):
        t = np.flatnonzero(lay.depth >= n)
        if len(t) and int(rows[n - 1].max()) + 1 > np.iinfo(np.int64).max // W:
            raise ValueError("The n-gram keys would overflow int64: use a smaller vocabulary or a shorter text.")
        K, perm, row, starts = unique_rows(rows[n - 1][t - 1] * W + lay.seq[t])
        t = t[perm]  # (M,) positions in key order
        R = np.full(len(lay.seq), NONE, dtype=np.int64)
        R[t] = row
        keys.append(K)
        rows.append(R)
        first.append(t[starts])
    return keys, rows, first


def lookup_rows(lay: Layout, keys: list, order: int, W: int) -> list:
    """Rows of the windows of orders 1..order at every position of a new text (``UNSEEN``/``NONE`` sentinels)."""
    rows = [None, np.where(lay.depth >= 1, lay.seq, NONE)]
    for n in range(2, order + 1):
        R = np.full(len(lay.seq), NONE, dtype=np.int64)
        t = np.flatnonzero(lay.depth >= n)
        prev = rows[n - 1][t - 1]  # (M,) UNSEEN gives a negative key
        R[t] = find_rows(keys[n], prev * W + lay.seq[t])
        rows.append(R)
    return rows


# ---------------------------------------------------------------------------------- counts


def raw_counts(lay: Layout, rows: list, n: int, size: int) -> np.ndarray:
    """:math:`c(w_1 \\dots w_n)`: occurrences of each n-gram ending at a scored position.  -> (size,)"""
    t = np.flatnonzero(lay.target & (lay.depth >= n))
    return np.bincount(rows[n][t], minlength=size)


def continuation_counts(lay: Layout, rows: list, first: list, n: int, size: int) -> np.ndarray:
    r"""Kneser-Ney's adjusted count of each n-gram below the top order.

    :math:`a(g) = N_{1+}(\bullet\, g) = |\{v : c(v\, g) > 0\}|` counts distinct left neighbours
    (Kneser & Ney 1995; Chen & Goodman 1998, sec. 2.7). An occurrence with no left neighbour (the
    n-gram starts with ``<s>``, or starts the stream) adds 1 itself, so n-grams that begin with
    ``<s>`` keep their raw count, as in KenLM's lmplz and SRILM.  -> (size,)
    """
    suffix = rows[n][first[n + 1]]  # each (n+1)-gram -> the row of its last n words
    left_edge = np.flatnonzero(lay.target & (lay.depth == n))
    return np.bincount(suffix, minlength=size) + np.bincount(rows[n][left_edge], minlength=size)


def counts_of_counts(a: np.ndarray) -> np.ndarray:
    """:math:`t_k` = number of n-grams whose count is exactly k, for k = 1..4.  -> (4,)"""
    return np.bincount(np.minimum(a[a > 0], 5), minlength=6)[1:5]


def mkn_discounts(a: np.ndarray) -> np.ndarray:
    r"""Modified Kneser-Ney discounts :math:`(D_1, D_2, D_{3+})` of one order (Chen & Goodman 1998, eq. 26).

    :math:`Y = t_1 / (t_1 + 2 t_2)`, :math:`D_k = k - (k+1)\, Y\, t_{k+1} / t_k`. When a count of
    counts is 0 or a discount falls outside :math:`(0, k)` (tiny corpora), the fallback
    (0.5, 1.0, 1.5) of KenLM's ``--discount_fallback`` is used.
    """
    t = counts_of_counts(a).astype(np.float64)
    if (t == 0).any():
        return np.array(MKN_FALLBACK)
    Y = t[0] / (t[0] + 2 * t[1])
    k = np.arange(1, 4)
    D = k - (k + 1) * Y * t[1:] / t[:-1]
    return D if ((D > 0) & (D < k)).all() else np.array(MKN_FALLBACK)


def kn_discount(a: np.ndarray) -> float:
    r"""The one Kneser-Ney discount of an order, :math:`D = t_1 / (t_1 + 2 t_2)` (Ney et al. 1994).

    0.5 when :math:`t_1` or :math:`t_2` is 0 (tiny corpora).
    """
    t1, t2 = counts_of_counts(a)[:2].astype(np.float64)
    return float(t1 / (t1 + 2 * t2)) if t1 > 0 and t2 > 0 else MKN_FALLBACK[0]


# ---------------------------------------------------------------------------------- tables


@dataclass
class OrderTable:
    r"""What one order adds to the estimate:

    .. math::  p_n(w \mid h) = \mathrm{numr}[hw] + \mathrm{back}[h]\, p_{n-1}(w \mid h') + \mathrm{const}[h]

    ``numr`` is indexed by n-gram row, ``back``/``const`` by context row; each ends with two
    entries for the ``NONE`` (index -2) and ``UNSEEN`` (index -1) sentinels.
    """

    keys: Optional[np.ndarray]  # (rows,) sorted int64 keys; None for order 1 (rows are word ids)
    numr: np.ndarray  # (rows + 2,)
    back: np.ndarray  # (contexts + 2,)
    const: np.ndarray  # (contexts + 2,)
    discount: Optional[np.ndarray] = None  # the discounts used at this order (KN / MKN)


def _with_sentinels(numr, back, const, unseen_back: float, unseen_const: float) -> tuple:
    """Append the ``NONE`` (pass the lower order through) and ``UNSEEN`` entries."""
    return (np.concatenate([numr, [0.0, 0.0]]), np.concatenate([back, [1.0, unseen_back]]),
            np.concatenate([const, [0.0, unseen_const]]))


def kneser_ney_table(ctx, a, n_ctx: int, D: np.ndarray, keys) -> OrderTable:
    r"""Interpolated (modified) Kneser-Ney at one order (Chen & Goodman 1998, eqs. 17 and 25):

    .. math::  p_n(w \mid h) = \frac{\max(a(hw) - D(a(hw)), 0)}{\sum_v a(hv)}
               + \gamma(h)\, p_{n-1}(w \mid h'), \qquad
               \gamma(h) = \frac{D_1 N_1(h\bullet) + D_2 N_2(h\bullet) + D_{3+} N_{3+}(h\bullet)}{\sum_v a(hv)}

    ``D`` holds (D1, D2, D3+); plain KN passes the same D three times. A context never followed
    by a word passes the lower order through (:math:`\gamma = 1`).
    """
    d = np.where(a > 0, D[np.clip(a, 1, 3) - 1], 0.0)  # (rows,) the discount of each n-gram
    a = a.astype(np.float64)
    den = np.bincount(ctx, weights=a, minlength=n_ctx)  # (contexts,)
    mass = np.bincount(ctx, weights=d, minlength=n_ctx)  # (contexts,)
    seen = den > 0
    safe = np.where(seen, den, 1.0)
    numr = np.maximum(a - d, 0.0) / safe[ctx]
    back = np.where(seen, mass / safe, 1.0)
    return OrderTable(keys, *_with_sentinels(numr, back, np.zeros(n_ctx), 1.0, 0.0), discount=np.asarray(D))


def add_k_table(ctx, c, n_ctx: int, k: float, V: int, keys) -> OrderTable:
    r"""Add-k (Lidstone) at one order: :math:`p(w \mid h) = (c(hw) + k) / (c(h\bullet) + kV)`.

    No lower order is mixed in; an unseen context gives the uniform :math:`1/V`. Numerator and
    denominator are divided by :math:`s = \max(k, 1)` first, so that a huge k (where :math:`kV` would
    overflow to infinity) gives its true limit, the uniform :math:`1/V`, instead of 0/inf.
    """
    s = max(float(k), 1.0)
    den = np.bincount(ctx, weights=c, minlength=n_ctx) / s + (k / s) * V  # (contexts,) = (c(h.) + kV) / s
    numr = (c / s) / den[ctx]
    return OrderTable(keys, *_with_sentinels(numr, np.zeros(n_ctx), (k / s) / den, 0.0, 1.0 / V))


def mle_table(ctx, c, n_ctx: int, keys) -> OrderTable:
    r"""Maximum likelihood at one order: :math:`p(w \mid h) = c(hw) / c(h\bullet)` for a seen context.

    A context never seen passes the lower order through, so the longest seen context decides.
    """
    den = np.bincount(ctx, weights=c, minlength=n_ctx)  # (contexts,)
    seen = den > 0
    numr = c / np.where(seen, den, 1.0)[ctx]
    back = np.where(seen, 0.0, 1.0)
    return OrderTable(keys, *_with_sentinels(numr, back, np.zeros(n_ctx), 1.0, 0.0))
