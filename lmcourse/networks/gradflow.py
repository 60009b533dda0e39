r"""How far back a gradient reaches: plain RNN against LSTM.

Let a loss depend on the last state only, :math:`L = v^\top h_T` with a fixed random unit vector
:math:`v`. Its gradient with respect to an earlier state is a product of step Jacobians,

.. math::  \frac{\partial L}{\partial h_k} = \Big(\prod_{t=k+1}^{T} \frac{\partial h_t}{\partial h_{t-1}}\Big)^\top v,

and :func:`grad_norm_vs_lag` measures :math:`\lVert \partial L / \partial h_{T-\ell} \rVert` for
every lag :math:`\ell = 0 \dots T-1` by autograd. In a tanh RNN each factor is
:math:`\mathrm{diag}(1 - h_t^2)\, W_{hh}`, so the norm shrinks geometrically when
:math:`W_{hh}`'s gain is below one (the vanishing gradient). In an LSTM the cell state adds a
direct path, :math:`\partial c_t / \partial c_{t-1} = \mathrm{diag}(f_t)` plus terms through
:math:`h_{t-1}`; along that path alone

.. math::  \frac{\partial c_T}{\partial c_k} = \mathrm{diag}\Big(\prod_{t=k+1}^{T} f_t\Big),

which :func:`forget_gate_product` computes, and which stays large while the forget gates stay near 1.
A positive forget-gate bias puts them there from the start (Jozefowicz, Zaremba and Sutskever
2015, "An Empirical Exploration of Recurrent Network Architectures").
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .lstm import LSTM, RNN, LSTMCell, RNNCell, add_forget_bias, lstm_gates, rnn_cell

KINDS = ("rnn", "lstm")


# ----------------------------------------------------------------------------- cells and their weights

def make_cell(kind: str, input_size: int, hidden_size: int, *, seed: int = 0, forget_bias: float = 0.0,
              dtype=torch.float64, device=None) -> nn.Module:
    r"""A freshly initialised ``RNNCell`` or ``LSTMCell`` (weights uniform in :math:`\pm 1/\sqrt{H}`),
    made from ``seed`` without touching the global random state; ``forget_bias`` is added to :math:`b_f`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be 'rnn' or 'lstm', got {kind!r}.")
    if kind == "rnn" and forget_bias:
        raise ValueError("A plain RNN has no forget gate: leave forget_bias at 0 for kind='rnn'.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cls = LSTMCell if kind == "lstm" else RNNCell
        cell = cls(input_size, hidden_size, dtype=dtype)
    if forget_bias:
        add_forget_bias(cell, forget_bias)
    return cell.to(device) if device is not None else cell


def cell_weights(module: nn.Module, layer: int = 0):
    """``(kind, (w_ih, w_hh, b_ih, b_hh))`` of a cell, or of layer ``layer`` of a stacked RNN/LSTM
    (this package's or torch's). ``kind`` is ``'rnn'`` or ``'lstm'``."""
    if isinstance(module, (LSTMCell, nn.LSTMCell, RNNCell, nn.RNNCell)):
        kind = "lstm" if isinstance(module, (LSTMCell, nn.LSTMCell)) else "rnn"
        weights = (module.weight_ih, module.weight_hh, module.bias_ih, module.bias_hh)
    elif isinstance(module, (LSTM, nn.LSTM, RNN, nn.RNN)):
        if not 0 <= layer < module.num_layers:
            raise ValueError(f"layer must be in 0..{module.num_layers - 1} for this "
                             f"{module.num_layers}-layer module, got {layer}.")
        kind = "lstm" if isinstance(module, (LSTM, nn.LSTM)) else "rnn"
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        weights = tuple(getattr(module, f"{n}_l{layer}", None) for n in names)
    else:
        raise TypeError(f"Expected an RNN/LSTM cell or layer stack, got {type(module).__name__}: "
                        "pass an LSTMCell, RNNCell, LSTM or RNN (this package's or torch.nn's).")
    if kind == "rnn" and getattr(module, "nonlinearity", "tanh") != "tanh":
        raise ValueError("Gradient flow is measured for tanh RNNs: build the RNN with nonlinearity='tanh'.")
    return kind, weights


# ----------------------------------------------------------------------------- the unrolled recurrence

def unroll(cell: nn.Module, inputs: torch.Tensor, *, layer: int = 0, detach_hidden: bool = False):
    r"""Run ``cell`` over ``inputs`` (T, B, I) from zero states, keeping every state in the graph.

    Returns a dict with ``h`` and, for an LSTM, ``c`` and ``f``: lists of T tensors (B, H) holding
    :math:`h_1 \dots h_T`, :math:`c_1 \dots c_T` and the forget gates :math:`f_1 \dots f_T`.
    ``detach_hidden=True`` feeds :math:`h_{t-1}` to the gates as a constant, which leaves the cell
    path :math:`c_{t-1} \to c_t` (factor :math:`\mathrm{diag}(f_t)`) as the only route between cell states.
    """
    kind, (w_ih, w_hh, b_ih, b_hh) = cell_weights(cell, layer)
    if not torch.is_tensor(inputs) or inputs.dim() != 3 or inputs.shape[-1] != w_ih.shape[1]:
        shape = tuple(inputs.shape) if torch.is_tensor(inputs) else type(inputs).__name__
        raise ValueError(f"inputs must be a tensor of shape (T, B, {w_ih.shape[1]}), got {shape}.")
    inputs = inputs.to(device=w_ih.device, dtype=w_ih.dtype)
    T, B, H = inputs.shape[0], inputs.shape[1], w_hh.shape[1]
    h = inputs.new_zeros(B, H)                                   # (B, H)
    c = inputs.new_zeros(B, H)                                   # (B, H)
    states = {"h": [], "c": [], "f": []} if kind == "lstm" else {"h": []}
    for t in range(T):  # the recurrence itself is sequential
        h_in = h.detach() if detach_hidden else h
        if kind == "rnn":
            h = rnn_cell(inputs[t], h_in, w_ih, w_hh, b_ih, b_hh)    # (B, H)
        else:
            i_t, f_t, g_t, o_t = lstm_gates(inputs[t], h_in, w_ih, w_hh, b_ih, b_hh)
            c = f_t * c + i_t * g_t                              # (B, H)
            h = o_t * torch.tanh(c)                              # (B, H)
            states["c"].append(c)
            states["f"].append(f_t)
        states["h"].append(h)
    return states


def random_inputs(T: int, batch_size: int, input_size: int, *, seed: int = 0, dtype=torch.float64, device=None):
    """Standard-normal inputs (T, B, I) drawn from their own generator (the same numbers on every device)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, batch_size, input_size, generator=g, dtype=dtype)  # (T, B, I)
    return x.to(device) if device is not None else x


# ----------------------------------------------------------------------------- the measurements

def grad_norm_vs_lag(kind: str = "lstm", hidden_size: int = 64, T: int = 100, seed: int = 0, *,
                     input_size: int | None = None, batch_size: int = 8, forget_bias: float = 0.0,
                     cell: nn.Module | None = None, inputs: torch.Tensor | None = None, layer: int = 0,
                     wrt: str = "h", dtype=torch.float64, device=None):
    r"""Gradient norm :math:`\lVert \partial L / \partial s_{T-\ell} \rVert` against the lag :math:`\ell`.

    :math:`L = \sum_b v^\top h_T^{(b)}` with a random unit vector :math:`v` (from ``seed``), and
    :math:`s` = ``h`` (default) or ``c`` (LSTM only). Each of the ``batch_size`` sequences gives its
    own norm (rows do not interact); the result is their geometric mean, the natural average on a
    log scale. Give your own ``cell`` (a cell or a layer stack, e.g. from a trained model) and
    ``inputs`` (T, B, I), or let them be made from ``seed``.

    Returns ``(lags, norms)``: ``lags`` = 0 .. T-1 (long), ``norms`` (T,) float64.
    """
    if cell is None:
        cell = make_cell(kind, input_size or hidden_size, hidden_size, seed=seed, forget_bias=forget_bias,
                         dtype=dtype, device=device)
    elif forget_bias:
        raise ValueError("forget_bias only applies to a freshly made cell: "
                         "call add_forget_bias on your own cell instead.")
    kind, (w_ih, w_hh, _, _) = cell_weights(cell, layer)
    if wrt not in ("h", "c") or (wrt == "c" and kind == "rnn"):
        raise ValueError(f"wrt must be 'h' or, for an LSTM, 'c'; got {wrt!r} for kind {kind!r}.")
    if inputs is None:
        if T < 1 or batch_size < 1:
            raise ValueError(f"T and batch_size must be positive, got T={T}, batch_size={batch_size}.")
        inputs = random_inputs(T, batch_size, w_ih.shape[1], seed=seed + 1, dtype=w_ih.dtype, device=w_ih.device)
    states = unroll(cell, inputs, layer=layer)
    g = torch.Generator().manual_seed(seed + 2)
    v = torch.randn(w_hh.shape[1], generator=g, dtype=torch.float64)
    v = (v / v.norm()).to(device=w_ih.device, dtype=w_ih.dtype)            # (H,)
    loss = (states["h"][-1] @ v).sum()
    grads = torch.autograd.grad(loss, states[wrt])                         # T tensors (B, H)
    norms = torch.stack(grads).double().norm(dim=-1)                       # (T, B)
    norms = norms.log().mean(dim=1).exp().flip(0)                          # (T,), lag 0 first
    return torch.arange(len(grads)), norms.cpu()


def forget_gate_product(cell: nn.Module, inputs: torch.Tensor, *, layer: int = 0) -> torch.Tensor:
    r"""Products of forget gates back from the last step: ``P[l] =`` :math:`\prod_{t=T-l+1}^{T} f_t`.

    ``P`` is (T, B, H) with ``P[0] = 1``; ``P[l]`` is the diagonal of :math:`\partial c_T / \partial c_{T-l}`
    along the cell path alone. Computed for all lags at once with a reversed cumulative product.
    """
    kind, _ = cell_weights(cell, layer)
    if kind != "lstm":
        raise ValueError("forget_gate_product needs an LSTM: a plain RNN has no forget gate.")
    with torch.no_grad():
        f = torch.stack(unroll(cell, inputs, layer=layer)["f"])               # (T, B, H)
    back = torch.cumprod(f.flip(0), dim=0)                                 # back[j] = f_T ... f_{T-j}
    return torch.cat([torch.ones_like(f[:1]), back[:-1]])                  # (T, B, H), lag 0 first


def per_step_factor(lags: torch.Tensor, norms: torch.Tensor) -> float:
    r"""The geometric decay rate :math:`\rho` of a norm curve, from a least-squares fit of
    :math:`\log \lVert g_\ell \rVert \approx a + \ell \log \rho` (1 means no decay)."""
    lags, y = torch.as_tensor(lags, dtype=torch.float64), torch.as_tensor(norms, dtype=torch.float64).log()
    if lags.numel() < 2 or not torch.isfinite(y).all():
        raise ValueError("per_step_factor needs at least two lags with positive, finite norms.")
    x = lags - lags.mean()
    slope = float((x * (y - y.mean())).sum() / (x * x).sum())
    return math.exp(slope)
