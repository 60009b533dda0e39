r"""The softmax bottleneck: log-probability matrices, their rank, and what a softmax of dimension d can fit.

Stack the log-probabilities of :math:`N` contexts over :math:`M` words into a matrix,
:math:`A_{iw} = \log p(w \mid c_i)`. A softmax language model turns a context into a vector
:math:`h_i \in \mathbb{R}^d` and scores word :math:`w` by :math:`h_i \cdot W_w + b_w`, so its logits are

.. math::  L = H W^\top + \mathbf{1} b^\top,\qquad \operatorname{rank}(H W^\top) \le d,\quad
           \operatorname{rank}(L) \le d + 1,

and its log-probabilities :math:`\log\operatorname{softmax}(L) = L - \lambda \mathbf{1}^\top` differ from
the logits by a row shift (:math:`\lambda_i` the row's log-normaliser), which changes a rank by at most 1.
Yang et al. (2018, Section 2, Corollary 1) conclude that a softmax without bias cannot be right
in every context when :math:`d < \operatorname{rank}(A) - 1`.

The exact statement used here, bias included. Let :math:`\bar A = P A Q` be :math:`A` with its row
means and its column means removed ("double-centred"; :math:`P, Q` the centring matrices). Then

.. math::  \exists H, W, b:\ \operatorname{softmax}(H W^\top + \mathbf{1} b^\top) = e^{A}
           \iff d \ge \operatorname{rank}(\bar A),

because softmax ignores row shifts, the bias is a column shift, :math:`P` kills
:math:`\mathbf{1}` on the left and :math:`Q` on the right, and :math:`\bar A` itself is a row and
column shift of :math:`A` (so a truncated SVD of :math:`\bar A` gives the fit). Without a bias, only
row means are removed: :math:`d \ge \operatorname{rank}(A Q)`. Both numbers lie between
:math:`\operatorname{rank}(A) - 2` and :math:`\operatorname{rank}(A)` (:func:`min_softmax_dim`).

Below that dimension the best fit keeps a positive KL divergence (:func:`fit_softmax`). Numerical
rank counts singular values above a relative tolerance (:func:`numerical_rank`); everything here
runs in float64. The matrices come from the oracle of the embedded corpus (:func:`oracle_rows`)
or from a trained model (:func:`model_rows`) at chosen positions of a token stream.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from ..corpora.grammar import Params, build_lexicon
from ..lm import check_tokens
from .base import inference, log_softmax
from ..progress import tqdm

RTOL = 1e-8  # numerical rank: singular values above RTOL * the largest one count
__all__ = ["RTOL", "singular_values", "numerical_rank", "centre", "min_softmax_dim", "spectrum", "kl_rows",
           "SoftmaxFit", "svd_init", "svd_curve", "fit_softmax", "lookup_log_probs", "lookup_positions",
           "state_positions", "oracle_rows", "model_rows", "support"]


# ---------------------------------------------------------------------------------------- rank

def _matrix(M, name: str = "the matrix") -> torch.Tensor:
    """``M`` as a finite 2-D float64 tensor, or one sentence saying what is wrong."""
    M = torch.as_tensor(M)
    if M.dim() != 2:
        raise ValueError(f"{name} must be 2-D (contexts x words), got shape {tuple(M.shape)}.")
    if not M.is_floating_point():
        M = M.double()
    if not torch.isfinite(M).all():
        raise ValueError(f"{name} has infinite or NaN entries (log 0 for impossible words): keep only the "
                         "columns every context can produce, e.g. rows[:, support(rows)].")
    return M.double()


def singular_values(M) -> torch.Tensor:
    r""":math:`\sigma_1 \ge \sigma_2 \ge \dots \ge \sigma_{\min(N, M)} \ge 0` of ``M`` (N, M), in float64."""
    return torch.linalg.svdvals(_matrix(M))  # (min(N, M),)


def numerical_rank(M, rtol: float = RTOL) -> int:
    r"""The number of singular values above ``rtol`` times the largest: :math:`\#\{i: \sigma_i > r\,\sigma_1\}`.

    Exact arithmetic would count every nonzero :math:`\sigma_i`; rounding leaves tiny ones (about
    :math:`10^{-16}\sigma_1` in float64) where the true value is 0, so a tolerance decides."""
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise ValueError(f"rtol must be a number in (0, 1), the relative tolerance, got {rtol!r}.")
    s = singular_values(M)
    if s.numel() == 0 or s[0] == 0:
        return 0
    return int((s > rtol * s[0]).sum())


def centre(A, rows: bool = True, cols: bool = True) -> torch.Tensor:
    r"""Remove the row means and/or the column means: :math:`P A Q`, :math:`Q = I - \tfrac1M \mathbf{1}\mathbf{1}^\top`
    (and :math:`P` the same with :math:`N`)."""
    A = _matrix(A, "A")
    if rows:
        A = A - A.mean(1, keepdim=True)  # (N, M) every row sums to 0
    if cols:
        A = A - A.mean(0, keepdim=True)  # (N, M) every column sums to 0
    return A


def min_softmax_dim(A, bias: bool = True, rtol: float = RTOL) -> int:
    r"""The smallest :math:`d` with :math:`\operatorname{softmax}(H W^\top [+ \mathbf{1} b^\top]) = e^A` row by row.

    With a bias: :math:`\operatorname{rank}(P A Q)`; without: :math:`\operatorname{rank}(A Q)` (see the module
    docstring)."""
    return numerical_rank(centre(A, rows=True, cols=bias), rtol)


def spectrum(A) -> torch.Tensor:
    r""":math:`\sigma_i / \sigma_1` of the double-centred :math:`A`, the part that a softmax with a bias must
    build from :math:`H W^\top`."""
    s = singular_values(centre(A))
    return s / s[0] if s.numel() and s[0] > 0 else s


# ------------------------------------------------------------------------------ fitting a softmax

def kl_rows(A, logits) -> torch.Tensor:
    r""":math:`\mathrm{KL}(p_i \,\|\, q_i) = \sum_w p_{iw} (A_{iw} - \log q_{iw})` per row, with :math:`p = e^A` and
    :math:`q = \operatorname{softmax}(\text{logits})`.

    ``A`` (N, M) holds log-probabilities (``-inf`` where :math:`p = 0`; those words add nothing)."""
    A = torch.as_tensor(A)
    if A.shape != logits.shape:
        raise ValueError(f"A {tuple(A.shape)} and the logits {tuple(logits.shape)} must have the same shape.")
    p = A.exp()                                                     # (N, M)
    gap = torch.where(p > 0, A - log_softmax(logits), torch.zeros_like(A))
    return (p * gap).sum(1)                                         # (N,)


@dataclass
class SoftmaxFit:
    """A softmax of dimension ``d`` fitted to the rows of A: logits ``H @ W.T + b``."""

    d: int
    H: torch.Tensor  # (N, d)
    W: torch.Tensor  # (M, d)
    b: torch.Tensor  # (M,)
    kl: float        # mean over rows of KL(p_i || q_i), nats
    steps: int       # objective evaluations used by the optimiser

    def logits(self) -> torch.Tensor:  # (N, M)
        return self.H @ self.W.T + self.b

    def log_probs(self) -> torch.Tensor:  # (N, M)
        return log_softmax(self.logits())


def _check_dim(d, A: torch.Tensor) -> int:
    if isinstance(d, bool) or not isinstance(d, int) or d < 0:
        raise ValueError(f"d must be a non-negative integer (the softmax's dimension), got {d!r}.")
    return min(d, min(A.shape))  # more dimensions than rows or columns add nothing


def svd_init(A, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""The closed-form start: :math:`P A Q \approx U_d S_d V_d^\top`, :math:`H = U_d S_d^{1/2}`,
    :math:`W = V_d S_d^{1/2}`, :math:`b` = the column means of :math:`A` (less the overall mean).

    The logits equal :math:`A` up to row shifts wherever the dropped singular values are 0, so this
    is already the exact fit when :math:`d \ge` :func:`min_softmax_dim`."""
    A = _matrix(A, "A")
    d = _check_dim(d, A)
    U, S, Vh = torch.linalg.svd(centre(A), full_matrices=False)    # (N, k), (k,), (k, M)
    root = S[:d].sqrt()
    H, W = U[:, :d] * root, Vh[:d].T * root                         # (N, d), (M, d)
    b = A.mean(0) - A.mean()                                        # (M,)
    return H.contiguous(), W.contiguous(), b


def svd_curve(A) -> torch.Tensor:
    r"""Mean KL of the truncated-SVD fit (:func:`svd_init`) for every :math:`d = 0 \dots k`: (k + 1,).

    All dimensions at once: the logits of dimension :math:`d` are :math:`\mathbf 1 b^\top + \sum_{j \le d}
    \sigma_j u_j v_j^\top`, a cumulative sum over the SVD's terms. An upper bound on the best KL of
    each :math:`d`, instant, and exact (zero) from :func:`min_softmax_dim` on."""
    A = _matrix(A, "A")
    U, S, Vh = torch.linalg.svd(centre(A), full_matrices=False)      # (N, k), (k,), (k, M)
    terms = (U * S).T[:, :, None] * Vh[:, None, :]                    # (k, N, M) sigma_j u_j v_j^T
    b = A.mean(0) - A.mean()                                          # (M,)
    logits = torch.cat([torch.zeros_like(A)[None], terms.cumsum(0)]) + b  # (k + 1, N, M)
    return torch.stack([kl_rows(A, z).mean() for z in logits]).clamp_min(0.0)  # (k + 1,)


@contextmanager
def _one_thread(device: torch.device):
    """Small CPU problems run faster on one thread than split across busy cores."""
    n = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def fit_softmax(A, d: int, max_iter: int = 300, weights=None) -> SoftmaxFit:
    r"""Minimise :math:`\frac1N\sum_i \mathrm{KL}(p_i \,\|\, \operatorname{softmax}(h_i W^\top + b))` over free
    :math:`H, W, b`.

    Full batch, L-BFGS with a strong-Wolfe line search, float64, started from :func:`svd_init`
    (so the result is never worse than the truncated SVD). ``A`` (N, M) must be finite: restrict
    it to the words every context can produce first. ``weights`` (N,): a weighted mean over the
    rows instead, :math:`\sum_i w_i \mathrm{KL}_i / \sum_i w_i` (the distinct rows of many contexts,
    each weighted by how often it occurs, give the same fit as all the contexts, faster).
    Deterministic on the CPU."""
    A = _matrix(A, "A")
    d = _check_dim(d, A)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative integer, got {max_iter!r}.")
    N, M = A.shape
    if weights is None:
        weights = torch.ones(N, dtype=torch.float64, device=A.device)
    weights = torch.as_tensor(weights, dtype=torch.float64).to(A.device)  # (N,) beside A, on its device
    if weights.shape != (N,) or not torch.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"weights must be {N} finite numbers >= 0 (one per row of A), not all 0.")
    weights = weights / weights.sum()
    H, W, b = svd_init(A, d)
    theta = torch.cat([H.reshape(-1), W.reshape(-1), b]).requires_grad_()  # (N d + M d + M,)

    def unpack(t):
        return t[:N * d].view(N, d), t[N * d:(N + M) * d].view(M, d), t[(N + M) * d:]

    def objective():
        h, w, bias = unpack(theta)
        return kl_rows(A, h @ w.T + bias) @ weights

    steps = 0
    if d < min(N, M) and max_iter > 0:                               # else the start is exact already
        opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=max_iter, history_size=20, tolerance_grad=1e-12,
                                tolerance_change=1e-16, line_search_fn="strong_wolfe")

        def closure():
            nonlocal steps
            steps += 1
            opt.zero_grad()
            loss = objective()
            loss.backward()
            return loss

        with _one_thread(A.device):
            opt.step(closure)
    with torch.no_grad():
        h, w, bias = (t.detach().clone() for t in unpack(theta))
        kl = float(kl_rows(A, h @ w.T + bias) @ weights)
    return SoftmaxFit(d, h, w, bias, max(kl, 0.0), steps)


# --------------------------------------------------------------------- matrices from the corpus

def lookup_log_probs(params: Params = Params()) -> torch.Tensor:
    r"""The embedded corpus's key -> value table, :math:`\log p(\text{value} \mid \text{key})`: (n_keys, n_values).

    It is ``softmax(sharpness * G)`` of a Gaussian matrix ``G`` (see :mod:`lmcourse.corpora.grammar`),
    stored as integer weights; rebuilding it from ``params`` takes a fraction of a second."""
    w = torch.as_tensor(build_lexicon(params).lookup, dtype=torch.float64)  # (n_keys, n_values)
    return (w / w.sum(1, keepdim=True)).log()


def lookup_positions(oracle, tokens) -> torch.Tensor:
    """Positions ``t`` whose previous token is a key word: there the next word is a lookup value."""
    x = check_tokens(tokens, len(oracle.vocab)).cpu().numpy()
    prev_is_key = oracle.lex.key_index[x[:-1]] >= 0                 # (N-1,)
    return torch.from_numpy(np.flatnonzero(prev_is_key) + 1)


def state_positions(oracle, tokens, states) -> torch.Tensor:
    """Positions whose grammar state (before the token) is one of ``states`` (names from ``oracle.gram.states``)."""
    names = list(oracle.gram.states)
    unknown = [s for s in states if s not in names]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a state of the grammar: pick names from oracle.gram.states.")
    x = check_tokens(tokens, len(oracle.vocab)).cpu().numpy()
    wanted = np.isin(oracle.states(x), [names.index(s) for s in states])
    return torch.from_numpy(np.flatnonzero(wanted))


def _positions(positions, n: int) -> np.ndarray:
    pos = torch.as_tensor(positions)
    if pos.dim() != 1 or pos.numel() == 0 or pos.is_floating_point():
        raise ValueError("positions must be a non-empty 1-D list of integer token positions.")
    pos = pos.long().cpu().numpy()
    if pos.min() < 0 or pos.max() >= n:
        raise ValueError(f"position {int(pos.max() if pos.max() >= n else pos.min())} is outside the stream of "
                         f"{n} tokens.")
    return pos


def _oracle_state(oracle, x: np.ndarray, pos: np.ndarray) -> dict:
    """The oracle's step state after reading ``x[:t]``, for each ``t`` in ``pos``, from whole-stream quantities."""
    N, V = len(x), len(oracle.vocab)
    post = oracle.topic_posterior(torch.from_numpy(x)).numpy()[pos]  # (P, K) p(z | x_<t)
    doc = np.concatenate([[0], np.cumsum(x[:-1] == oracle.doc)])      # (N,) document segment
    names = np.zeros((len(pos), V))                                   # (P, V) earlier names in the doc
    name_at = np.flatnonzero(oracle.is_name[x])
    earlier = (doc[name_at][None, :] == doc[pos][:, None]) & (name_at[None, :] < pos[:, None])  # (P, n)
    j, i = np.nonzero(earlier)
    np.add.at(names, (j, x[name_at[i]]), 1.0)
    before = np.maximum(pos - 1, 0)
    verb_at = np.maximum.accumulate(np.where(oracle.is_verb[x], np.arange(N), 0))[before]
    verb = np.where((pos > 0) & oracle.is_verb[x[verb_at]], oracle.lex.lemma[x[verb_at]], 0)
    with np.errstate(divide="ignore"):
        C = np.log(post)
    return {"s": oracle.states(x)[pos], "C": C, "names": names,
            "prev": np.where(pos > 0, x[before], oracle.eos), "verb": verb}


def oracle_rows(oracle, tokens, positions, chunk: int = 100) -> torch.Tensor:
    r"""Exact :math:`\log p(w \mid x_{<t})` for every word at each position ``t``: (P, V) float64, ``-inf``
    where a word is impossible.

    The stream is read as the oracle reads it (from a line start). Rows are computed ``chunk``
    positions at a time from the oracle's step API, with the state built from whole-stream
    scoring, not by stepping token by token."""
    x = check_tokens(tokens, len(oracle.vocab)).cpu().numpy()
    pos = _positions(positions, len(x))
    state = _oracle_state(oracle, x, pos)
    rows = [oracle.next_log_probs({k: v[i:i + chunk] for k, v in state.items()}) for i in range(0, len(pos), chunk)]
    return torch.cat(rows)                                            # (P, V)


def model_rows(model, tokens, positions, bptt: int = 1000, dtype=torch.float64, progress: bool = False) -> torch.Tensor:
    r"""A trained model's :math:`\log p(w \mid x_{<t})` at each position ``t``: (P, V), on the CPU.

    The stream is read as :meth:`RNNLM.score` reads it (a leading ``<eos>``, state carried across
    chunks), in the model's own precision, up to the last position. The head then maps the last
    layer's outputs :math:`g_t` (P, E_last) to log-probabilities in ``dtype`` (float64 by default), so
    the rank of the result is the head's, not blurred by float32 rounding. ``progress``: a bar over the chunks."""
    tokens = check_tokens(tokens, model.config.vocab_size)
    pos = torch.as_tensor(_positions(positions, tokens.numel()))
    sorted_pos, order = torch.sort(pos, stable=True)                  # the stream visits positions in order
    g, start, n = [], 0, int(sorted_pos[-1]) + 1
    chunks = model.stream(tokens[:n], bptt)
    if progress:
        chunks = tqdm(chunks, total=-(-n // bptt), desc="reading the text", leave=False)
    for logits, h in chunks:
        t = logits.size(0)
        here = sorted_pos[(sorted_pos >= start) & (sorted_pos < start + t)]
        g.append(h[(here - start).to(h.device)])                      # (p, E_last)
        start += t
    g_sorted = torch.cat(g)                                           # (P, E_last)
    g_t = torch.empty_like(g_sorted)
    g_t[order.to(g_sorted.device)] = g_sorted                         # back to the order of ``positions``
    head = copy.deepcopy(model.head).to(dtype)
    with inference(head):
        out = head(g_t.to(dtype)[:, None, :])[:, 0]                   # (P, V) logits (log-probs for MoS)
    return log_softmax(out).to(dtype).cpu()                           # (P, V)


def support(rows: torch.Tensor) -> torch.Tensor:
    """(V,) True for the words that have a finite log-probability in every row."""
    return torch.isfinite(torch.as_tensor(rows)).all(0)
