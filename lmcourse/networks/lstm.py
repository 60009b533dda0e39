r"""The LSTM and the plain tanh RNN, written from their equations.

One LSTM step reads the input :math:`x_t` and the previous state :math:`(h_{t-1}, c_{t-1})`:

.. math::

    i_t &= \sigma(W_{ii} x_t + b_{ii} + W_{hi} h_{t-1} + b_{hi})   &\text{input gate}\\
    f_t &= \sigma(W_{if} x_t + b_{if} + W_{hf} h_{t-1} + b_{hf})   &\text{forget gate}\\
    g_t &= \tanh(W_{ig} x_t + b_{ig} + W_{hg} h_{t-1} + b_{hg})    &\text{candidate cell}\\
    o_t &= \sigma(W_{io} x_t + b_{io} + W_{ho} h_{t-1} + b_{ho})   &\text{output gate}\\
    c_t &= f_t \odot c_{t-1} + i_t \odot g_t\\
    h_t &= o_t \odot \tanh(c_t)

The four gate matrices are stacked in the order (i, f, g, o) into ``weight_ih`` (4H, I) and
``weight_hh`` (4H, H), with biases ``bias_ih`` and ``bias_hh`` (4H,), exactly as in
``torch.nn.LSTM``; so are the names (``weight_ih_l{k}`` ...), the shapes and the initialisation
(every parameter uniform in :math:`\pm 1/\sqrt{H}`). ``load_state_dict`` moves weights both ways.

The plain RNN step is :math:`h_t = \tanh(W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh})`.

Speed. The input half :math:`W_{ih} x_t + b` does not depend on the recurrence, so a layer computes
it for all time steps in one matrix product; the loop over time then does one ``addmm`` and a
handful of element-wise operations per step. The LSTM layer's backward pass is written out by hand
(:class:`LSTMLayerBPTT`): it loops back over time for the two carried gradients only, and finds
:math:`\partial L / \partial W_{hh}` for all steps at once in a single product.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from .dropout import check_probability, check_recurrent_kind, recurrent_mask

# ----------------------------------------------------------------------------- the equations

def lstm_gates(x_t, h_prev, w_ih, w_hh, b_ih=None, b_hh=None):
    r"""The four gates of one step: :math:`z = W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh}` split into (i, f, g, o),
    returned as :math:`(\sigma(z_i), \sigma(z_f), \tanh(z_g), \sigma(z_o))`, each (B, H)."""
    z = F.linear(x_t, w_ih, b_ih) + F.linear(h_prev, w_hh, b_hh)  # (B, 4H)
    z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)                          # each (B, H)
    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)


def lstm_cell(x_t, h_prev, c_prev, w_ih, w_hh, b_ih=None, b_hh=None):
    r"""One LSTM step, term by term: :math:`c_t = f_t \odot c_{t-1} + i_t \odot g_t`,
    :math:`h_t = o_t \odot \tanh(c_t)` with the gates of :func:`lstm_gates`. Returns ``(h_t, c_t)``, each (B, H)."""
    i_t, f_t, g_t, o_t = lstm_gates(x_t, h_prev, w_ih, w_hh, b_ih, b_hh)
    c_t = f_t * c_prev + i_t * g_t                                   # (B, H)
    h_t = o_t * torch.tanh(c_t)                                      # (B, H)
    return h_t, c_t


def rnn_cell(x_t, h_prev, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
    r"""One plain RNN step: :math:`h_t = \phi(W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh})`,
    :math:`\phi` = tanh (or relu). Returns :math:`h_t` (B, H)."""
    z = F.linear(x_t, w_ih, b_ih) + F.linear(h_prev, w_hh, b_hh)  # (B, H)
    return torch.tanh(z) if nonlinearity == "tanh" else torch.relu(z)


# ----------------------------------------------------------------------------- the fast layers

class LSTMLayerBPTT(torch.autograd.Function):
    r"""One LSTM layer over a whole sequence, with backpropagation through time written out.

    Forward, given the precomputed input part :math:`u_t = W_{ih} x_t + b_{ih} + b_{hh}` (T, B, 4H):
    :math:`z_t = u_t + W_{hh} (m_t \odot h_{t-1})`, then the gates and states of the module docstring. The
    optional mask :math:`m` on the recurrent connection (dropout on :math:`h_{t-1}`, already scaled by
    :math:`1/(1-p)`) is either one mask per sequence, (B, H), the same :math:`m` at every step (locked or
    variational, Gal & Ghahramani 2016), or a fresh mask at every step, (T, B, H); None is :math:`m_t = 1`.

    Backward, with :math:`\delta h_t = \partial L/\partial h_t` and :math:`\delta c_t = \partial L/\partial c_t`
    (all paths), :math:`\bar{y}_t` the gradient arriving at output t, and :math:`a` a gate's activation:

    .. math::

        \delta h_t &= \bar{y}_t + m_{t+1} \odot W_{hh}^\top \delta z_{t+1}, \qquad
        \delta c_t = \delta c_{t+1} \odot f_{t+1} + \delta h_t \odot o_t \odot (1 - \tanh^2 c_t)\\
        \delta z_t &= \big[\delta c_t \odot g_t \odot \sigma'_i,\;
                        \delta c_t \odot c_{t-1} \odot \sigma'_f,\;
                        \delta c_t \odot i_t \odot (1 - g_t^2),\;
                        \delta h_t \odot \tanh(c_t) \odot \sigma'_o\big],
                   \quad \sigma' = a (1 - a)\\
        \partial L/\partial W_{hh} &= \textstyle\sum_t \delta z_t\, (m_t \odot h_{t-1})^\top, \qquad
        \partial L/\partial u_t = \delta z_t, \qquad
        \partial L/\partial h_0 = m_1 \odot W_{hh}^\top \delta z_1, \qquad
        \partial L/\partial c_0 = \delta c_1 \odot f_1

    Every factor that does not depend on the carried gradients is computed for all steps at once
    before the backward loop. Only first derivatives are available (no double backward).
    """

    @staticmethod
    def forward(ctx, u, h0, c0, w_hh, m=None):  # u: (T, B, 4H); h0, c0: (B, H); w_hh: (4H, H); m: (B, H) | (T, B, H)
        T, B, H = u.shape[0], u.shape[1], h0.shape[-1]
        m_s = _mask_steps(m, T)            # m_1 ... m_T, each (B, H), or None
        a = u.new_empty(T, B, 4, H)        # gate activations i, f, g, o
        out = u.new_empty(T, B, H)         # h_1 ... h_T
        c = u.new_empty(T + 1, B, H)       # c_0 ... c_T
        tanh_c = u.new_empty(T, B, H)      # tanh(c_1) ... tanh(c_T)
        c[0] = c0
        # Per-step views made once (unbind is one call), so the loop body indexes Python lists only.
        a_s, u_s, out_s, c_s, tc_s = (x.unbind(0) for x in (a.view(T, B, 4 * H), u, out, c, tanh_c))
        i_s, f_s, g_s, o_s = (x.unbind(0) for x in a.unbind(2))
        w_t = w_hh.t().contiguous()        # (H, 4H); a contiguous operand keeps addmm on its fast path
        h_prev = h0
        for t in range(T):
            h_in = h_prev if m_s is None else h_prev * m_s[t]    # (B, H): m_t ⊙ h_{t-1}
            z = torch.addmm(u_s[t], h_in, w_t)                   # (B, 4H)
            torch.sigmoid(z, out=a_s[t])
            torch.tanh(z[:, 2 * H:3 * H], out=g_s[t])            # g replaces its sigmoid
            torch.mul(f_s[t], c_s[t], out=c_s[t + 1]).addcmul_(i_s[t], g_s[t])
            torch.tanh(c_s[t + 1], out=tc_s[t])
            h_prev = torch.mul(o_s[t], tc_s[t], out=out_s[t])
        ctx.save_for_backward(a, c, tanh_c, out, h0, w_hh, m)
        return out, out[T - 1].clone(), c[T].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_hn, d_cn):  # (T, B, H), (B, H), (B, H)
        a, c, tanh_c, out, h0, w_hh, m = ctx.saved_tensors
        T, B, _, H = a.shape
        m_s = _mask_steps(m, T)                                              # m_1 ... m_T, each (B, H), or None
        i, f, g, o = a.unbind(2)                                             # each (T, B, H)
        sig_prime = torch.addcmul(a, a, a, value=-1)                         # a (1 - a), (T, B, 4, H)
        p_ifg = torch.stack([g * sig_prime[:, :, 0], c[:-1] * sig_prime[:, :, 1],
                             i * (1 - g * g)], dim=2)                        # (T, B, 3, H)
        q_o = tanh_c * sig_prime[:, :, 3]                                    # (T, B, H)
        r_c = o * (1 - tanh_c * tanh_c)                                      # (T, B, H)
        dz = a.new_empty(T, B, 4, H)
        dz_s, dz_ifg_s, dz_o_s = (x.unbind(0) for x in (dz.view(T, B, 4 * H), dz[:, :, :3], dz[:, :, 3]))
        d_out_s, p_s, q_s, r_s, f_s = (x.unbind(0) for x in (d_out, p_ifg, q_o, r_c, f))
        dh, dc_next = d_out_s[T - 1] + d_hn, d_cn                            # (B, H) each
        for t in range(T - 1, -1, -1):
            dc = torch.addcmul(dc_next, dh, r_s[t])                          # (B, H)
            torch.mul(dc.unsqueeze(1), p_s[t], out=dz_ifg_s[t])              # (B, 3, H)
            torch.mul(dh, q_s[t], out=dz_o_s[t])                             # (B, H)
            if m_s is None:
                dh = torch.addmm(d_out_s[t - 1], dz_s[t], w_hh) if t else dz_s[0].mm(w_hh)  # (B, H)
            else:                                                            # m_t ⊙ W_hh^T δz_t (+ ȳ_{t-1})
                dh = torch.addcmul(d_out_s[t - 1], dz_s[t].mm(w_hh), m_s[t]) if t else dz_s[0].mm(w_hh) * m_s[0]
            dc_next = dc * f_s[t]                                            # (B, H)
        dz = dz.view(T, B, 4 * H)
        d_w_hh = None
        if ctx.needs_input_grad[3]:
            h_prev = torch.cat([h0.unsqueeze(0), out[:-1]])                  # (T, B, H)
            if m is not None:
                h_prev = h_prev * m                                          # m_t ⊙ h_{t-1}, (T, B, H)
            d_w_hh = dz.reshape(T * B, 4 * H).t().mm(h_prev.reshape(T * B, H))  # (4H, H)
        return dz, dh, dc_next, d_w_hh, None


def _mask_steps(m, T: int):
    """The mask on :math:`h_{t-1}` as a list of T (B, H) tensors: a locked mask (B, H) repeated, a per-step
    mask (T, B, H) unbound; None stays None."""
    if m is None:
        return None
    return [m] * T if m.dim() == 2 else list(m.unbind(0))


def lstm_layer(x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, m=None):
    r"""One LSTM layer over ``x`` (T, B, I): returns ``(output (T, B, H), (h_T, c_T))``.

    ``m``: an optional mask on the recurrent connection, :math:`z_t = u_t + W_{hh} (m_t \odot h_{t-1})`: (B, H)
    for one mask per sequence, (T, B, H) for a fresh one per step (see :class:`LSTMLayerBPTT`)."""
    b = b_ih + b_hh if b_ih is not None else None
    u = F.linear(x, w_ih, b)                                         # (T, B, 4H), all steps at once
    if m is not None:
        _check_float(m, "recurrent mask", w_hh)
        T, B, H = u.shape[0], u.shape[1], h0.shape[-1]
        if tuple(m.shape) not in ((B, H), (T, B, H)):
            raise ValueError(f"The mask on h_(t-1) must have shape ({B}, {H}) (one per sequence) or ({T}, {B}, {H}) "
                             f"(one per step), got {tuple(m.shape)}.")
    out, h_n, c_n = LSTMLayerBPTT.apply(u, h0, c0, w_hh, m)
    return out, (h_n, c_n)


def rnn_layer(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
    """One plain RNN layer over ``x`` (T, B, I): returns ``(output (T, B, H), h_T)``; autograd does BPTT."""
    b = b_ih + b_hh if b_ih is not None else None
    u = F.linear(x, w_ih, b)                                         # (T, B, H), all steps at once
    phi = torch.tanh if nonlinearity == "tanh" else torch.relu
    w_t = w_hh.t().contiguous()                                      # (H, H)
    h, hs = h0, []
    for t in range(u.shape[0]):
        h = phi(torch.addmm(u[t], h, w_t))                           # (B, H)
        hs.append(h)
    return torch.stack(hs), h


# ----------------------------------------------------------------------------- checks

def _check_float(x: torch.Tensor, what: str, like: torch.Tensor) -> None:
    if not torch.is_tensor(x):
        raise TypeError(f"The {what} must be a torch.Tensor, got {type(x).__name__}.")
    if x.dtype != like.dtype:
        raise TypeError(f"The {what} is {x.dtype} but the weights are {like.dtype}: "
                        f"convert one of them (module.to(dtype) or tensor.to(dtype)).")
    if x.device != like.device:
        raise ValueError(f"The {what} is on {x.device} but the weights are on {like.device}: "
                         f"move them to one device (module.to(device) or tensor.to(device)).")


def _check_sizes(input_size: int, hidden_size: int, num_layers: int = 1) -> None:
    for name, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")


def _check_nonlinearity(nonlinearity: str) -> None:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}.")


# ----------------------------------------------------------------------------- the modules

class _Recurrent(nn.Module):
    """Parameters, initialisation, shapes and layer stacking shared by :class:`LSTM` and :class:`RNN`."""

    gates = 1      # rows of weight_ih per hidden unit: 4 for the LSTM, 1 for the plain RNN
    n_states = 1   # (h,) or (h, c)

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, *, device=None, dtype=None):
        super().__init__()
        _check_sizes(input_size, hidden_size, num_layers)
        if not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"dropout is a probability between 0 and 1, got {dropout!r}.")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        kw = {"device": device, "dtype": dtype}
        G, H = self.gates * hidden_size, hidden_size
        for k in range(num_layers):  # registration order = nn.LSTM's, so one seed gives the same weights
            I = input_size if k == 0 else hidden_size
            setattr(self, f"weight_ih_l{k}", nn.Parameter(torch.empty(G, I, **kw)))  # (gH, I)
            setattr(self, f"weight_hh_l{k}", nn.Parameter(torch.empty(G, H, **kw)))  # (gH, H)
            if self.bias:
                setattr(self, f"bias_ih_l{k}", nn.Parameter(torch.empty(G, **kw)))  # (gH,)
                setattr(self, f"bias_hh_l{k}", nn.Parameter(torch.empty(G, **kw)))  # (gH,)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Every weight and bias uniform in :math:`[-1/\sqrt{H}, 1/\sqrt{H}]` (PyTorch's RNN default)."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def layer_weights(self, k: int):
        """``(w_ih, w_hh, b_ih, b_hh)`` of layer ``k`` (biases None when ``bias=False``)."""
        return tuple(getattr(self, f"{name}_l{k}", None) for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        return s

    def _prepare(self, input, hx):
        """Check shapes; return the input as (T, B, I), the initial states as (L, B, H) each, and whether unbatched."""
        w = self.weight_ih_l0
        _check_float(input, "input", w)
        if input.dim() not in (2, 3):
            raise ValueError(f"Expected input of shape (T, B, {self.input_size}) or unbatched (T, {self.input_size}), "
                             f"got {tuple(input.shape)}.")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        T, B, I = x.shape
        if I != self.input_size:
            raise ValueError(f"The input has {I} features per step but the module expects "
                             f"input_size={self.input_size}.")
        if T == 0:
            raise ValueError("The input sequence is empty: give at least one time step.")
        want = (self.num_layers, B, self.hidden_size)
        if hx is None:
            return x, [x.new_zeros(want) for _ in range(self.n_states)], unbatched
        states = [hx] if torch.is_tensor(hx) else list(hx)
        if len(states) != self.n_states:
            want_hx = "(h_0, c_0)" if self.n_states == 2 else "h_0"
            raise ValueError(f"hx must be {want_hx}, got {len(states)} tensor(s).")
        for s in states:
            _check_float(s, "initial state", w)
        states = [s.unsqueeze(1) if unbatched else s for s in states]
        for s in states:
            if tuple(s.shape) != want:
                raise ValueError(f"Each initial state must have shape {want} (layers, batch, hidden), "
                                 f"got {tuple(s.shape)}.")
        return x, states, unbatched

    def _run_layer(self, x, states, k):  # -> (output, [final states])
        raise NotImplementedError

    def _forward(self, input, hx):
        x, states, unbatched = self._prepare(input, hx)
        finals = []
        for k in range(self.num_layers):
            if k > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)                # between layers only
            x, last = self._run_layer(x, [s[k] for s in states], k)          # (T, B, H)
            finals.append(last)
        final = [torch.stack(layer_states) for layer_states in zip(*finals)]  # each (L, B, H)
        if unbatched:
            return x.squeeze(1), [s.squeeze(1) for s in final]
        return (x.transpose(0, 1) if self.batch_first else x), final


class LSTM(_Recurrent):
    r"""A stacked LSTM with ``torch.nn.LSTM``'s constructor, parameters and forward signature.

    ``forward(input (T, B, I), hx=None | (h_0, c_0) each (L, B, H)) -> (output (T, B, H), (h_n, c_n))``;
    ``batch_first=True`` reads and returns (B, T, .). ``dropout`` acts on every layer's output but
    the last, in training mode only.

    ``dropoutr`` (keyword only) drops units of the recurrent connection, which cuDNN's LSTM cannot do:
    :math:`z_t = W_{ih} x_t + b + W_{hh} (m_t \odot h_{t-1})` with :math:`m_t` a Bernoulli(1 - p) mask scaled by
    :math:`1/(1-p)` (:func:`lmcourse.networks.dropout.recurrent_mask`), drawn on every forward call in training
    mode only: ``recurrent_kind="locked"`` draws one mask per sequence, the same at every step (Gal &
    Ghahramani 2016), ``"step"`` a fresh mask at every step.
    """

    gates, n_states = 4, 2

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, *,
                 dropoutr: float = 0.0, recurrent_kind: str = "locked", device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, device=device, dtype=dtype)
        self.dropoutr = check_probability(dropoutr)
        self.recurrent_kind = check_recurrent_kind(recurrent_kind)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (f", dropoutr={self.dropoutr}, recurrent_kind={self.recurrent_kind!r}" if self.dropoutr else "")

    def _run_layer(self, x, states, k):
        m = None
        if self.training and self.dropoutr > 0:
            m = recurrent_mask(x, x.shape[0], x.shape[1], self.hidden_size, self.dropoutr, self.recurrent_kind)
        out, (h_n, c_n) = lstm_layer(x, states[0], states[1], *self.layer_weights(k), m=m)
        return out, [h_n, c_n]

    def forward(self, input, hx=None):
        out, (h_n, c_n) = self._forward(input, hx)
        return out, (h_n, c_n)


class RNN(_Recurrent):
    r"""A stacked plain RNN, :math:`h_t = \tanh(W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh})`, like ``torch.nn.RNN``.

    ``forward(input (T, B, I), hx=None | h_0 (L, B, H)) -> (output (T, B, H), h_n (L, B, H))``.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, *, device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, device=device, dtype=dtype)

    def _run_layer(self, x, states, k):
        out, h_n = rnn_layer(x, states[0], *self.layer_weights(k), nonlinearity=self.nonlinearity)
        return out, [h_n]

    def forward(self, input, hx=None):
        out, (h_n,) = self._forward(input, hx)
        return out, h_n


class _Cell(nn.Module):
    """Parameters and checks shared by :class:`LSTMCell` and :class:`RNNCell` (names as in ``torch.nn``)."""

    gates = 1

    def __init__(self, input_size, hidden_size, bias=True, *, device=None, dtype=None):
        super().__init__()
        _check_sizes(input_size, hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bool(bias)
        kw = {"device": device, "dtype": dtype}
        G = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(G, input_size, **kw))   # (gH, I)
        self.weight_hh = nn.Parameter(torch.empty(G, hidden_size, **kw))  # (gH, H)
        self.bias_ih = nn.Parameter(torch.empty(G, **kw)) if self.bias else None  # (gH,)
        self.bias_hh = nn.Parameter(torch.empty(G, **kw)) if self.bias else None  # (gH,)
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")

    def _prepare(self, x, states, n_states):
        """Check shapes; return x as (B, I), the states as (B, H) each, and whether unbatched."""
        _check_float(x, "input", self.weight_ih)
        if x.dim() not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"Expected input of shape (B, {self.input_size}) or ({self.input_size},), "
                             f"got {tuple(x.shape)}.")
        unbatched = x.dim() == 1
        x = x.unsqueeze(0) if unbatched else x
        if states is None:
            return x, [x.new_zeros(x.shape[0], self.hidden_size) for _ in range(n_states)], unbatched
        states = [s.unsqueeze(0) if unbatched else s for s in states]
        for s in states:
            _check_float(s, "state", self.weight_ih)
            if tuple(s.shape) != (x.shape[0], self.hidden_size):
                raise ValueError(f"Each state must have shape ({x.shape[0]}, {self.hidden_size}), "
                                 f"got {tuple(s.shape)}.")
        return x, states, unbatched


class LSTMCell(_Cell):
    r"""One LSTM step with ``torch.nn.LSTMCell``'s parameters: ``forward(x (B, I), (h, c)) -> (h', c')``.

    :math:`c' = f \odot c + i \odot g`, :math:`h' = o \odot \tanh(c')`, gates as in :func:`lstm_gates`;
    ``hx=None`` starts from zeros. Plain autograd, one step at a time: the readable reference.
    """

    gates = 4

    def forward(self, input, hx=None):
        if hx is not None and (torch.is_tensor(hx) or len(hx) != 2):
            raise ValueError("hx must be a pair (h, c) of tensors for an LSTMCell.")
        x, (h, c), unbatched = self._prepare(input, hx, 2)
        h, c = lstm_cell(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)  # (B, H) each
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class RNNCell(_Cell):
    r"""One plain RNN step with ``torch.nn.RNNCell``'s parameters: ``forward(x (B, I), h) -> h'``,
    :math:`h' = \tanh(W_{ih} x + b_{ih} + W_{hh} h + b_{hh})`; ``hx=None`` starts from zeros."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", *, device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._prepare(input, None if hx is None else [hx], 1)
        h = rnn_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity)  # (B, H)
        return h.squeeze(0) if unbatched else h


# ----------------------------------------------------------------------------- a common initialisation trick

@torch.no_grad()
def add_forget_bias(module: nn.Module, value: float = 1.0) -> nn.Module:
    r"""Add ``value`` to the forget-gate bias :math:`b_f` of every LSTM layer or cell in ``module``.

    A positive :math:`b_f` starts training with :math:`f_t \approx \sigma(b_f)` near 1, so the cell
    state, and the gradient along it, is kept over many steps (Jozefowicz, Zaremba and Sutskever
    2015, "An Empirical Exploration of Recurrent Network Architectures", recommend :math:`b_f = 1`).
    Works on this module's LSTM/LSTMCell and on ``torch.nn``'s, and on any module holding them.
    """
    found = False
    for m in module.modules():
        if isinstance(m, (LSTM, LSTMCell, nn.LSTM, nn.LSTMCell)):
            for name, p in m.named_parameters(recurse=False):
                if name.startswith("bias_ih"):
                    H = p.shape[0] // 4
                    p[H:2 * H] += value                      # rows of f in (i, f, g, o)
                    found = True
    if not found:
        raise ValueError("No LSTM input-to-hidden bias (bias_ih...) found: "
                         "give an LSTM or LSTMCell built with bias=True.")
    return module
