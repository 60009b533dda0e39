r"""N-gram language models: maximum likelihood, add-k, Kneser-Ney and modified Kneser-Ney.

Every estimate is one recursion over the orders :math:`n = 1 \dots N`, starting from the uniform
distribution :math:`p_0(w) = 1/V` over the vocabulary:

.. math::  p_n(w \mid h_n) = \mathrm{numr}_n(h_n w) + \mathrm{back}_n(h_n)\, p_{n-1}(w \mid h_{n-1})
           + \mathrm{const}_n(h_n),

where :math:`h_n` is the last :math:`n-1` words. The smoothing only changes the three terms:

- ``"mkn"``, interpolated modified Kneser-Ney (Chen & Goodman 1998): discounts :math:`D_1, D_2,
  D_{3+}` per order from that order's counts of counts; the top order uses raw counts, lower
  orders continuation counts :math:`N_{1+}(\bullet\, g)`; the unigram is interpolated with the
  uniform distribution. These are KenLM ``lmplz``'s conventions, and the numbers match it.
- ``"kn"``, interpolated Kneser-Ney with one discount :math:`D = t_1 / (t_1 + 2 t_2)` per order.
- ``"addk"``: :math:`p(w \mid h) = (c(hw) + k) / (c(h) + kV)` with the longest history available.
- ``"mle"``: :math:`p(w \mid h) = c(hw) / c(h)` with the longest history seen in training, so an
  unseen word after a seen history has probability 0 (log-probability :math:`-\infty`).

Two modes of reading text:

- ``"sentence"`` (default, the toolkit convention): each line (ended by ``<eos>``) is read on its
  own after a ``<s>``; ``<eos>`` plays ``</s>`` (predicted, counted once a line) and ``<s>`` is never
  predicted. Counts are collected the same way.
- ``"stream"``: histories run across lines, and the stream is read as if preceded by ``<eos>``, the
  reading every neural model in the course uses.

Usage::

    lm = NGramLM(corpus.vocab, order=5, smoothing="mkn").fit(corpus.train)
    perplexity(lm, corpus.test)
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ..lm import LanguageModel, check_tokens, perplexity
from ..vocab import Vocab
from . import counts as nc

SMOOTHINGS = ("mkn", "kn", "addk", "mle")
MODES = ("sentence", "stream")
MAX_ORDER = 10  # the counts grow with the order; 5 is the usual choice
LABELS = {"mkn": "modified Kneser-Ney", "kn": "Kneser-Ney", "addk": "add-k", "mle": "MLE"}


class NGramLM(LanguageModel):
    """An n-gram model of ``order`` >= 1 over ``vocab``; call :meth:`fit` on a training stream first.

    The step-by-step state is a LongTensor (B, order - 1) of the last words read, left-padded
    with -1; in sentence mode ``len(vocab)`` stands for ``<s>``.
    """

    def __init__(self, vocab: Vocab, order: int = 3, smoothing: str = "mkn", k: float = 1.0,
                 mode: str = "sentence"):
        _check_args(vocab, order, smoothing, k, mode)
        self.vocab, self.order, self.smoothing, self.k, self.mode = vocab, int(order), smoothing, float(k), mode
        self.V = len(vocab)
        self.W = self.V + 1  # symbols: the words, then <s>
        self.bos, self.eos = self.V, vocab.eos
        self.name = f"{LABELS[smoothing]} {order}-gram ({mode})"
        self.tables = None

    # ---------------------------------------------------------------------------- training

    def fit(self, tokens) -> "NGramLM":
        """Count the n-grams of a training stream (N,) and build every order's table; returns self."""
        if torch.as_tensor(tokens).numel() == 0:
            raise ValueError("The training text is empty: give the model at least one token to count.")
        x = check_tokens(tokens, self.V).cpu().numpy()
        lay = self._layout(x)
        keys, rows, first = nc.count_rows(lay, self.order, self.W)
        sizes = [None, self.W] + [len(keys[n]) for n in range(2, self.order + 1)]
        self.keys, self.tables = keys, [None]
        for n in range(1, self.order + 1):
            top = n == self.order or self.smoothing in ("addk", "mle")
            a = (nc.raw_counts(lay, rows, n, sizes[n]) if top
                 else nc.continuation_counts(lay, rows, first, n, sizes[n]))
            ctx, n_ctx = (np.zeros(self.W, dtype=np.int64), 1) if n == 1 else (keys[n] // self.W, sizes[n - 1])
            self.tables.append(self._table(ctx, a, n_ctx, keys[n] if n > 1 else None))
        return self

    def _table(self, ctx, a, n_ctx, keys) -> nc.OrderTable:
        if self.smoothing == "mkn":
            return nc.kneser_ney_table(ctx, a, n_ctx, nc.mkn_discounts(a), keys)
        if self.smoothing == "kn":
            return nc.kneser_ney_table(ctx, a, n_ctx, np.full(3, nc.kn_discount(a)), keys)
        if self.smoothing == "addk":
            return nc.add_k_table(ctx, a, n_ctx, self.k, self.V, keys)
        return nc.mle_table(ctx, a, n_ctx, keys)

    def _layout(self, x: np.ndarray) -> nc.Layout:
        if self.mode == "sentence":
            return nc.sentence_layout(x, self.bos, self.eos)
        return nc.stream_layout(x, self.eos)

    def _check_fitted(self) -> None:
        if self.tables is None:
            raise RuntimeError("This n-gram model has no counts yet: call .fit(train_tokens) first.")

    @property
    def num_ngrams(self) -> list:
        """Distinct n-grams stored at each order 1..N (order 1: words with a nonzero count)."""
        self._check_fitted()
        return [int((t.numr[:-2] > 0).sum()) if t.keys is None else len(t.keys) for t in self.tables[1:]]

    @property
    def discounts(self) -> list:
        """The (D1, D2, D3+) of each order 1..N for KN / MKN (KN repeats its one D), else None."""
        self._check_fitted()
        return [None if t.discount is None else t.discount.tolist() for t in self.tables[1:]]

    # ----------------------------------------------------------------------------- scoring

    def score(self, tokens) -> torch.Tensor:
        r""":math:`\log p(x_t \mid x_{<t})` for every token, all positions at once.  (N,) -> (N,) float64"""
        self._check_fitted()
        x = check_tokens(tokens, self.V).cpu().numpy()
        lay = self._layout(x)
        rows = nc.lookup_rows(lay, self.keys, self.order, self.W)
        t = np.flatnonzero(lay.target)  # (N,)
        p = np.full(len(t), 1.0 / self.V)
        for n in range(1, self.order + 1):
            tab = self.tables[n]
            h = np.zeros(len(t), dtype=np.int64) if n == 1 else rows[n - 1][t - 1]  # (N,) context rows
            p = tab.numr[rows[n][t]] + tab.back[h] * p + tab.const[h]
        with np.errstate(divide="ignore"):
            return torch.from_numpy(np.log(p))

    def start(self, batch_size: int = 1) -> torch.Tensor:
        """B contexts that have read the implicit leading ``<eos>``.  -> (B, order-1)"""
        self._check_fitted()
        state = torch.full((batch_size, self.order - 1), nc.PAD, dtype=torch.long)
        if self.order > 1:
            state[:, -1] = self.bos if self.mode == "sentence" else self.eos
        return state

    def next_log_probs(self, state: torch.Tensor) -> torch.Tensor:
        r""":math:`\log p(\cdot \mid h)` over the whole vocabulary for each context.  (B, order-1) -> (B, V) float64"""
        self._check_fitted()
        if state.dim() != 2 or state.shape[1] != self.order - 1:
            raise ValueError(f"The state has shape {tuple(state.shape)}, not (B, {self.order - 1}): "
                             "make it with this model's start() and advance().")
        s = state.detach().cpu().numpy().astype(np.int64)
        B, L = s.shape
        P = np.full((B, self.V), 1.0 / self.V)  # (B, V)
        last = np.arange(B) * L + L - 1  # (B,) flat index of each row's last slot
        rows = nc.lookup_rows(nc.state_layout(s, self.bos), self.keys, L, self.W) if L else None
        for n in range(1, self.order + 1):
            tab = self.tables[n]
            h = np.zeros(B, dtype=np.int64) if n == 1 else rows[n - 1][last]  # (B,)
            P = tab.back[h][:, None] * P + tab.const[h][:, None]
            if n == 1:
                P += tab.numr[None, :self.V]
            else:
                _add_continuations(P, tab, h, self.W)
        with np.errstate(divide="ignore"):
            return torch.from_numpy(np.log(P)).to(state.device)

    def advance(self, state: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Read one token per row; in sentence mode an ``<eos>`` starts a fresh ``<s>`` context.  (B,) -> state"""
        x = check_tokens(tokens, self.V).to(state.device)  # (B,)
        if len(x) != state.shape[0]:
            raise ValueError(f"advance got {len(x)} tokens for {state.shape[0]} contexts: give one token per row.")
        if self.order == 1:
            return state
        new = torch.cat([state[:, 1:], x[:, None]], dim=1)  # (B, order-1)
        if self.mode == "sentence":
            new[x == self.eos] = self.start(1).to(state.device)
        return new

    def reorder(self, state: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Keep (and repeat) the rows ``index`` of the state."""
        return state.index_select(0, index.to(state.device))


def _add_continuations(P: np.ndarray, tab: nc.OrderTable, h: np.ndarray, W: int) -> None:
    """Add ``numr`` of every stored n-gram ``h w`` into ``P[b, w]``, in place.

    The keys of context ``h`` are the contiguous run ``[h W, (h+1) W)`` of the sorted keys, so
    the work is the number of continuations, not B x V.
    """
    K = tab.keys
    lo = np.searchsorted(K, h * W)  # (B,)
    hi = np.searchsorted(K, (h + 1) * W)  # (B,)
    count = np.where(h >= 0, hi - lo, 0)  # (B,)
    b = np.repeat(np.arange(len(h)), count)  # (M,)
    r = np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(count.sum())  # (M,) rows
    P[b, K[r] - h[b] * W] += tab.numr[r]


def _check_args(vocab, order, smoothing, k, mode) -> None:
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a lmcourse Vocab, got {type(vocab).__name__}: pass corpus.vocab.")
    check_settings(order, smoothing, k, mode)
    try:
        vocab.eos
    except KeyError:
        raise ValueError("The vocabulary has no '<eos>' (or newline) to end lines with: add one.") from None


def check_settings(order, smoothing, k, mode) -> None:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= MAX_ORDER:
        raise ValueError(f"order={order!r} is not a valid n-gram order: use a whole number from 1 to {MAX_ORDER} "
                         "(1 to 5 is usual).")
    if smoothing not in SMOOTHINGS:
        raise ValueError(f"smoothing={smoothing!r} is unknown: use one of {', '.join(SMOOTHINGS)}.")
    if isinstance(k, bool) or not isinstance(k, numbers.Real) or not (math.isfinite(k) and k > 0):
        raise ValueError(f"k={k!r} must be a finite number > 0 for add-k smoothing (k=1 is Laplace).")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is unknown: use 'sentence' or 'stream'.")
