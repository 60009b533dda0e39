r"""The mixture of softmaxes (MoS): K softmaxes over the vocabulary, mixed by a context-dependent prior.

From the last LSTM layer's output :math:`g_t` (after output dropout) the head forms (Yang et al.
2018, Section 3; the ``mos`` code's ``model.py``)

.. math::

    \pi_t = \operatorname{softmax}(W_\pi g_t) \in \mathbb{R}^K, \qquad
    h_{t,k} = \tanh(W_h g_t + b_h)_{[kE:(k+1)E]} \in \mathbb{R}^E,

    p(w \mid x_{\le t}) = \sum_{k=1}^{K} \pi_{t,k}\,
    \frac{\exp(h_{t,k} \cdot e_w + b_w)}{\sum_{u} \exp(h_{t,k} \cdot e_u + b_u)},

with :math:`W_\pi` a linear map without bias, one linear map :math:`W_h` for all K latent contexts,
locked dropout ``dropoutl`` on the K latent contexts, and the decoder :math:`e_w, b_w` the (tied)
embedding matrix and a bias. Its log-probability matrix is :math:`\log \sum_k \Pi_k \exp(H_k E^\top)`,
a nonlinear function of low-rank matrices, so unlike a softmax's it is not bound to rank
:math:`d + 1`.

The head returns log-probabilities, computed in log space,

.. math::  \log p(w) = \operatorname{logsumexp}_k \big(\log \pi_k + \log\operatorname{softmax}(h_k E^\top + b)_w\big),

which stays exact where the paper's code takes :math:`\log(p + 10^{-8})`. Memory: the K logit
vectors of every position, a (T, B, K, V) tensor, are what makes MoS expensive. :func:`mos_log_probs`
keeps that tensor once (the logits, saved for backward) and does every other step chunk by chunk,
in place, so training holds about :math:`TBKV` floats where plain autograd holds several copies
(:func:`mos_log_probs_reference`); without gradients it never holds more than one chunk. Chunks are
sized for the device: a few hundred rows that stay in a CPU's cache, a quarter of the rows (at most
:data:`CHUNK_ELEMENTS_CUDA` floats) on a GPU. The rare entries recomputed in log space are found once
per pass, so a pass waits for the GPU once forward and once backward, not once per chunk.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import check_int, check_number
from .dropout import make_dropout
from .heads import register_head, up_map

__all__ = ["MixtureOfSoftmaxes", "mos_log_probs", "mos_log_probs_reference", "CHUNK_ELEMENTS",
           "CHUNK_ELEMENTS_CUDA"]

CHUNK_ELEMENTS = 1 << 22  # floats of (rows, K, V) temporaries per chunk on the CPU: 16 MiB in float32
CHUNK_ELEMENTS_CUDA = 1 << 25  # on a GPU: 128 MiB in float32, and never more than a quarter of the rows


def mos_log_probs_reference(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                            log_pi: torch.Tensor) -> torch.Tensor:  # (..., K, E) -> (..., V)
    r""":math:`\operatorname{logsumexp}_k(\log\pi_k + \log\operatorname{softmax}(h_k W^\top + b))`, written plainly.

    Autograd keeps the logits, the K log-softmaxes and their sum with the prior for backward:
    several (..., K, V) tensors. The reference the fast :func:`mos_log_probs` is tested against."""
    log_p_k = F.log_softmax(F.linear(h, weight, bias), dim=-1)  # (..., K, V)
    return torch.logsumexp(log_pi.unsqueeze(-1) + log_p_k, dim=-2)  # (..., V)


def _rows_per_chunk(N: int, K: int, V: int, device: torch.device) -> int:
    """Rows of (rows, K, V) per chunk: :data:`CHUNK_ELEMENTS` on the CPU; on CUDA few large chunks, each at most a
    quarter of the N rows, so the backward buffer adds at most a quarter of the kept tensor."""
    if device.type == "cuda":
        return max(1, min(CHUNK_ELEMENTS_CUDA // (K * V), math.ceil(N / 4)))
    return max(1, CHUNK_ELEMENTS // (K * V))


def _tiny(dtype: torch.dtype) -> float:
    """Below this a probability is recomputed in log space: 1e8 x the smallest normal number."""
    return torch.finfo(dtype).tiny * 1e8


class _MixtureLogProbs(torch.autograd.Function):
    r"""log p (N, V) from h (N, K, E), W (V, E), b (V,), log pi (N, K), holding one (N, K, V) tensor.

    With the logits :math:`z = h W^\top + b`, per expert :math:`m_k = \max_v z_{kv}`,
    :math:`e_{kv} = e^{z_{kv} - m_k} \le 1` (the one tensor kept for backward, written over
    :math:`z`), :math:`S_k = \sum_v e_{kv}` (so :math:`\mathrm{sm}_{kv} = e_{kv} / S_k`) and
    :math:`w_k = \pi_k / S_k`:

    .. math::  p_v = \sum_k w_k\, e_{kv} \quad\text{(one batched matrix-vector product)},

    exact wherever :math:`p_v` is above ``_tiny`` (summands that underflow are then below
    :math:`10^{-8} p_v`); the rare entries below it are recomputed in log space,
    :math:`\log p_v = \operatorname{logsumexp}_k(\log\pi_k - \log S_k + z_{kv} - m_k)`.

    Backward, for an upstream gradient :math:`g_v`, with :math:`q_v = g_v / p_v` and the
    responsibilities :math:`r_{kv} = \pi_k\,\mathrm{sm}_{kv} / p_v = w_k e_{kv} / p_v`:

    .. math::  s_k = \frac{\partial}{\partial \log\pi_k} = \sum_v g_v r_{kv} = w_k \sum_v e_{kv} q_v, \qquad
               \frac{\partial}{\partial z_{kv}} = g_v r_{kv} - s_k\,\mathrm{sm}_{kv}
               = e_{kv}\,\big(w_k q_v - s_k / S_k\big),

    then :math:`\partial h = \partial z\, W`, :math:`\partial W = \sum \partial z^\top h`,
    :math:`\partial b = \sum \partial z`. For the entries below ``_tiny`` the forward pass keeps
    :math:`r_{kv} = \exp(\log\pi_k - \log S_k + z_{kv} - m_k - \log p_v)` (a few (n, K) rows), and
    backward adds their :math:`g_v r_{kv}` exactly instead of :math:`w_k e_{kv} q_v`.
    """

    @staticmethod
    def forward(ctx, h, weight, bias, log_pi, keep: bool):
        N, K, E = h.shape
        V = weight.shape[0]
        rows = _rows_per_chunk(N, K, V, h.device)
        e = torch.addmm(bias, h.view(-1, E), weight.t()).view(N, K, V) if keep else None  # (N, K, V) z
        log_S, log_w, log_a, out = h.new_empty(N, K), h.new_empty(N, K), h.new_empty(N, K), h.new_empty(N, V)
        buffer = None if keep else h.new_empty(min(rows, N), K, V)  # one chunk's logits, reused
        for i in range(0, N, rows):
            j = min(i + rows, N)
            if keep:
                e_c = e[i:j]  # (c, K, V) z, becomes e below
            else:
                e_c = buffer[:j - i]
                torch.addmm(bias, h[i:j].reshape(-1, E), weight.t(), out=e_c.view(-1, V))
            m = e_c.amax(dim=-1)  # (c, K)
            e_c.sub_(m.unsqueeze(-1)).exp_()  # e_kv = exp(z_kv - m_k) <= 1
            torch.log(e_c.sum(-1), out=log_S[i:j])
            torch.sub(log_pi[i:j], log_S[i:j], out=log_w[i:j])  # (c, K) log(pi_k / S_k)
            torch.sub(log_w[i:j], m, out=log_a[i:j])  # (c, K) log(pi_k / S_k) - m_k
            p = torch.bmm(log_w[i:j].exp().unsqueeze(1), e_c).squeeze(1)  # (c, V)
            torch.log(p, out=out[i:j])
        r_idx, v_idx, r_tiny = _exact_where_tiny(out, (h, weight, bias), log_a)  # all chunks at once: one sync
        if keep:
            ctx.save_for_backward(h, weight, e, log_S, log_w, out, r_idx, v_idx, r_tiny)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):  # g (N, V)
        h, weight, e, log_S, log_w, out, r_idx, v_idx, r_tiny = ctx.saved_tensors
        N, K, E = h.shape
        V = weight.shape[0]
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(h) if need_h else None
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_b = torch.zeros(V, dtype=h.dtype, device=h.device) if need_b else None
        q = torch.neg(out).exp_().mul_(g)  # (N, V) g_v / p_v
        q[r_idx, v_idx] = 0.0  # tiny entries: added exactly below
        w = log_w.exp()  # (N, K) pi_k / S_k
        s = w * torch.bmm(e, q.unsqueeze(-1)).squeeze(-1)  # (N, K) sum_v g_v r_kv
        g_r = g[r_idx, v_idx].unsqueeze(-1) * r_tiny  # (n, K) g_v r_kv at the tiny entries
        s.index_put_((r_idx,), g_r, accumulate=True)
        minus_s_over_S = s.neg().mul_(torch.exp(-log_S))  # (N, K)
        rows = _rows_per_chunk(N, K, V, h.device)
        buffer = e.new_empty(min(rows, N), K, V)  # one chunk of dz, reused
        starts = torch.arange(0, N + rows, rows, device=r_idx.device).clamp_(max=N)  # chunk boundaries
        cut = torch.searchsorted(r_idx, starts).tolist()  # r_idx is sorted: each chunk's tiny entries, one sync
        for c, i in enumerate(range(0, N, rows)):
            j = min(i + rows, N)
            dz = buffer[:j - i]  # (c, K, V) e_kv (w_k q_v - s_k / S_k)
            torch.baddbmm(minus_s_over_S[i:j].unsqueeze(-1), w[i:j].unsqueeze(-1), q[i:j].unsqueeze(1), out=dz)
            dz.mul_(e[i:j])
            a, b = cut[c], cut[c + 1]
            if b > a:
                dz[r_idx[a:b] - i, :, v_idx[a:b]] += g_r[a:b]
            dz2 = dz.view(-1, V)  # (c K, V)
            if need_h:
                torch.mm(dz2, weight, out=grad_h[i:j].view(-1, E))
            if need_w:
                grad_w.addmm_(dz2.t(), h[i:j].reshape(-1, E))
            if need_b:
                grad_b += dz2.sum(0)
        return grad_h, grad_w, grad_b, s, None


def _exact_where_tiny(out, decoder, a):
    r"""Where :math:`p_v` is below ``_tiny``: :math:`\log p_v = \operatorname{logsumexp}_k(a_k + z_{kv})` (in place).

    ``out`` (N, V) holds :math:`\log p`; ``a`` (N, K) is :math:`\log\pi_k - \log S_k - m_k`; the logits
    :math:`z_{kv} = h_k \cdot W_v + b_v` of those few entries are recomputed from ``decoder = (h, W, b)``.
    Returns their rows (sorted), columns and responsibilities :math:`r_{kv}` (n, K)."""
    r, v = torch.nonzero(out < math.log(_tiny(out.dtype)), as_tuple=True)  # n is known on the host from here
    h, weight, bias = decoder
    K, E = h.shape[1:]
    r_tiny = out.new_empty(r.numel(), K)  # (n, K)
    step = max(1, CHUNK_ELEMENTS // (4 * K * E))  # entries per piece: the gathered h[r] stays small
    for i in range(0, r.numel(), step):
        rr, vv = r[i:i + step], v[i:i + step]
        log_pz = a[rr] + torch.einsum("nke,ne->nk", h[rr], weight[vv]) + bias[vv].unsqueeze(-1)  # log(pi_k sm_kv)
        log_p = torch.logsumexp(log_pz, dim=-1)  # (piece,)
        out[rr, vv] = log_p
        r_tiny[i:i + step] = (log_pz - log_p.unsqueeze(-1)).exp()
    return r, v, r_tiny


def _check(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, log_pi: torch.Tensor) -> None:
    if h.dim() < 2 or weight.dim() != 2 or bias.dim() != 1:
        raise ValueError(f"mos_log_probs needs h (..., K, E), weight (V, E) and bias (V,); got shapes "
                         f"{tuple(h.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}.")
    if h.shape[-1] != weight.shape[1] or bias.shape[0] != weight.shape[0]:
        raise ValueError(f"h's last size ({h.shape[-1]}) must be weight's columns ({weight.shape[1]}) and bias "
                         f"must have one entry per word ({weight.shape[0]}), got {bias.shape[0]}.")
    if tuple(log_pi.shape) != tuple(h.shape[:-1]):
        raise ValueError(f"log_pi must have shape {tuple(h.shape[:-1])} (one log prior per expert), "
                         f"got {tuple(log_pi.shape)}.")


def mos_log_probs(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                  log_pi: torch.Tensor) -> torch.Tensor:  # (..., K, E) -> (..., V)
    r""":math:`\log p_v = \operatorname{logsumexp}_k(\log\pi_k + \log\operatorname{softmax}(h_k W^\top + b)_v)`.

    ``h`` (..., K, E) are the K latent contexts, ``weight`` (V, E) and ``bias`` (V,) the decoder,
    ``log_pi`` (..., K) the log prior. With K = 1 this is one ``log_softmax``; otherwise a
    custom autograd function that keeps one (N, K, V) tensor for backward (none without grad) and
    works chunk by chunk in place. Computed in float32 at least, autocast or not; float64 stays float64."""
    _check(h, weight, bias, log_pi)
    lead, (K, E) = h.shape[:-2], h.shape[-2:]
    dtype = torch.promote_types(h.dtype, torch.float32)
    h, weight, bias, log_pi = (t.to(dtype) for t in (h, weight, bias, log_pi))
    if K == 1:  # one softmax: pi = 1
        return F.log_softmax(F.linear(h.squeeze(-2), weight, bias), dim=-1)  # (..., V)
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in (h, weight, bias, log_pi))
    flat_h = h.reshape(-1, K, E).contiguous()  # (N, K, E)
    flat_pi = log_pi.reshape(-1, K).contiguous()  # (N, K)
    with torch.autocast(h.device.type, enabled=False):  # the in-place log-space mixing needs float32 under bf16 too
        out = _MixtureLogProbs.apply(flat_h, weight.contiguous(), bias.contiguous(), flat_pi, keep)  # (N, V)
    return out.view(*lead, weight.shape[0])


def _check_sizes(**sizes) -> None:
    """Every size of the head is a whole number of at least 1 (``vector_size`` may be None)."""
    for name, value in sizes.items():
        if value is not None:
            check_int(value, name, 1)


class MixtureOfSoftmaxes(nn.Module):
    r"""The MoS head: ``forward(g (T, B, L)) -> log p (T, B, V)`` (see the module docstring).

    ``prior``: :math:`W_\pi`, ``Linear(L, K, bias=False)``; ``latent``: :math:`W_h, b_h`,
    ``Linear(L, K E)``, followed by ``activation`` (``tanh`` as in the paper, or ``linear``:
    :math:`h_{t,k} = (W_h g_t + b_h)_{[kE:(k+1)E]}`, unbounded like a softmax head's projection);
    ``drop_l``: dropout ``dropoutl`` on the latent contexts (locked: one mask
    per sequence over all K E units); ``weight`` (V, E): the decoder, the embedding matrix when
    tied (``up``: when that matrix is wider than the latent contexts' E = d, the learned map
    :math:`U` (E, d) of :func:`~lmcourse.networks.heads.up_map` reads each latent context
    into it (untied: ``vector_size`` sets that width), so every softmax keeps rank at most d);
    ``bias`` (V,). ``returns_log_probs`` tells the trainer to use the scores as they are.
    """

    returns_log_probs = True

    def __init__(self, in_size: int, emb_size: int, vocab_size: int, n_experts: int, dropoutl: float = 0.0,
                 init_range: float = 0.1, tied_weight: Optional[nn.Parameter] = None, dropout_kind: str = "locked",
                 activation: str = "tanh", vector_size: Optional[int] = None):
        super().__init__()
        if activation not in ("tanh", "linear"):
            raise ValueError(f"activation={activation!r} is unknown: use 'tanh' (the paper's) or 'linear'.")
        _check_sizes(in_size=in_size, emb_size=emb_size, vocab_size=vocab_size, n_experts=n_experts,
                     vector_size=vector_size)
        check_number(dropoutl, "dropoutl", 0.0, 1.0, high_open=True)
        check_number(init_range, "init_range", 0.0)
        self.n_experts, self.emb_size, self.activation = n_experts, emb_size, activation
        self.prior = nn.Linear(in_size, n_experts, bias=False)
        self.latent = nn.Linear(in_size, n_experts * emb_size)
        self.drop_l = make_dropout(dropoutl, dropout_kind)
        if tied_weight is None:
            width = vector_size or emb_size
            tied_weight = nn.Parameter(torch.empty(vocab_size, width).uniform_(-init_range, init_range))
        if tied_weight.dim() != 2 or tied_weight.shape[0] != vocab_size:
            raise ValueError(f"The tied decoder must be (vocab_size, E) with vocab_size={vocab_size}, "
                             f"got {tuple(tied_weight.shape)}: pass the model's embedding weight.")
        self.weight = tied_weight  # (V, E)
        self.up = up_map(emb_size, tied_weight.shape[1])  # U (E, d) when the word vectors are wider than d
        self.bias = nn.Parameter(torch.zeros(vocab_size))  # (V,)

    def mixture(self, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The log prior :math:`\log\pi` (T, B, K) and the K latent contexts :math:`h_k` (T, B, K, E)."""
        if g.dim() != 3:
            raise ValueError(f"The MoS head reads the last layer's output (T, B, L), got shape {tuple(g.shape)}.")
        T, B = g.shape[:2]
        log_pi = F.log_softmax(self.prior(g), dim=-1)  # (T, B, K)
        h = self.latent(g)  # (T, B, K E)
        h = self.drop_l(torch.tanh(h) if self.activation == "tanh" else h)  # one mask per sequence
        return log_pi, self.up(h.view(T, B, self.n_experts, self.emb_size))  # (T, B, K, E)

    def forward(self, g: torch.Tensor) -> torch.Tensor:  # (T, B, L) -> (T, B, V)
        log_pi, h = self.mixture(g)
        return mos_log_probs(h, self.weight, self.bias, log_pi)

    def extra_repr(self) -> str:
        return f"K={self.n_experts}, E={self.emb_size}, V={self.bias.numel()}, latent {self.activation}"


def _mos_head(config, embedding: nn.Embedding, in_size: int) -> nn.Module:
    """The head of an :class:`~lmcourse.networks.models.LMConfig` with ``head="mos"``."""
    size = config.head_size or config.emb_size  # d: the numbers of each latent context
    tied = embedding.weight if config.tie else None
    return MixtureOfSoftmaxes(in_size, size, config.vocab_size, config.n_experts, config.dropoutl,
                              config.init_range, tied, config.dropout_kind, config.mos_latent, config.vector_size)


register_head("mos", _mos_head)
