"""lmcourse.networks.gradflow: gradient norm against lag, plain RNN against LSTM, and the forget-gate path."""
import math

import pytest
import torch
from torch import nn

from lmcourse.networks.gradflow import (
    cell_weights,
    forget_gate_product,
    grad_norm_vs_lag,
    make_cell,
    per_step_factor,
    random_inputs,
    unroll,
)
from lmcourse.networks.lstm import LSTM, add_forget_bias


def test_rnn_gradient_vanishes_long_before_the_lstm_one():
    lags, rnn = grad_norm_vs_lag("rnn", hidden_size=64, T=100, seed=0)
    _, lstm = grad_norm_vs_lag("lstm", hidden_size=64, T=100, seed=0, forget_bias=1.0)
    assert lags.tolist() == list(range(100))
    for norms in (rnn, lstm):
        assert norms.dtype == torch.float64 and norms.shape == (100,)
        assert torch.isfinite(norms).all() and (norms > 0).all()
        assert norms[0] == pytest.approx(1.0, rel=1e-12)  # dL/dh_T = v, a unit vector, for every sequence
    assert lstm[99] > 1e10 * rnn[99]         # many orders of magnitude apart at the largest lag
    assert lstm[50] > 1e5 * rnn[50]
    assert per_step_factor(lags, lstm) > per_step_factor(lags, rnn) + 0.2


def test_forget_bias_slows_the_decay():
    lags, plain = grad_norm_vs_lag("lstm", hidden_size=32, T=60, seed=1)
    _, biased = grad_norm_vs_lag("lstm", hidden_size=32, T=60, seed=1, forget_bias=2.0)
    assert biased[-1] > 100 * plain[-1]
    assert per_step_factor(lags, biased) > per_step_factor(lags, plain)


@pytest.mark.parametrize("kind,wrt", [("rnn", "h"), ("lstm", "h"), ("lstm", "c")])
def test_norms_match_torch_rnn_restarted_at_the_lagged_state(kind, wrt):
    """dL/ds_k in the unrolled graph, from torch.nn's gradient with respect to its initial state s_k."""
    T, lag, Hs = 30, 12, 16
    cell = make_cell(kind, 8, Hs, seed=4, forget_bias=1.0 if kind == "lstm" else 0.0)
    x = random_inputs(T, 1, 8, seed=9)
    lags, norms = grad_norm_vs_lag(cell=cell, inputs=x, wrt=wrt, seed=2)
    states = unroll(cell, x)
    k = T - lag                                                   # s_k is states[...][k - 1]
    ref = (nn.LSTM if kind == "lstm" else nn.RNN)(8, Hs).double()
    ref.load_state_dict({f"{n}_l0": getattr(cell, n) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")})
    h_k = states["h"][k - 1].detach().unsqueeze(0).requires_grad_()
    c_k = states["c"][k - 1].detach().unsqueeze(0).requires_grad_() if kind == "lstm" else None
    out, _ = ref(x[k:], (h_k, c_k) if kind == "lstm" else h_k)
    v = torch.randn(Hs, generator=torch.Generator().manual_seed(2 + 2), dtype=torch.float64)
    loss = out[-1, 0] @ (v / v.norm())
    if wrt == "h":
        (grad,) = torch.autograd.grad(loss, [h_k])
    else:  # in the unrolled graph c_k also reaches the loss through h_k = o_k tanh(c_k)
        g_h, g_c = torch.autograd.grad(loss, [h_k, c_k])
        tanh_c = torch.tanh(c_k)
        grad = g_c + g_h * (h_k / tanh_c) * (1 - tanh_c ** 2)
    assert float(norms[lag]) == pytest.approx(float(grad.detach().norm()), rel=1e-10)


def test_forget_gate_product_is_the_cell_path_jacobian():
    cell = make_cell("lstm", 6, 10, seed=3, forget_bias=1.0)
    x = random_inputs(25, 4, 6, seed=5)
    P = forget_gate_product(cell, x)                                     # (T, B, H)
    assert P.shape == (25, 4, 10) and torch.equal(P[0], torch.ones(4, 10, dtype=P.dtype))
    assert ((P[1:] > 0) & (P[1:] < 1)).all() and (P[1:] <= P[:-1]).all()
    # With h_{t-1} held constant inside the gates, dc_T/dc_k is diagonal, so the gradient of
    # sum(c_T) with respect to c_k is its diagonal: the product of the forget gates in between.
    cut = unroll(cell, x, detach_hidden=True)
    grads = torch.autograd.grad(cut["c"][-1].sum(), cut["c"])            # k = 1 .. T
    jac_diag = torch.stack(grads).flip(0)                                # lag 0 first
    assert torch.allclose(jac_diag, P, rtol=1e-12, atol=1e-15)
    # Through the full graph the h path adds terms, so the product alone is not the whole story.
    full = unroll(cell, x)
    full_grads = torch.stack(torch.autograd.grad(full["c"][-1].sum(), full["c"])).flip(0)
    assert not torch.allclose(full_grads, P, rtol=1e-3)


def test_a_stacked_or_torch_module_can_be_measured():
    torch.manual_seed(0)
    stack = LSTM(7, 12, num_layers=2).double()
    add_forget_bias(stack, 1.0)
    x = random_inputs(20, 3, 12, seed=1)
    lags, norms = grad_norm_vs_lag(cell=stack, inputs=x, layer=1)
    assert norms.shape == (20,) and torch.isfinite(norms).all() and (norms > 0).all()
    kind, weights = cell_weights(stack, layer=1)
    assert kind == "lstm" and weights[0] is stack.weight_ih_l1
    ref = nn.LSTM(7, 12, num_layers=2).double()
    ref.load_state_dict(stack.state_dict())
    assert torch.equal(grad_norm_vs_lag(cell=ref, inputs=x, layer=1)[1], norms)
    assert forget_gate_product(ref, x, layer=1).shape == (20, 3, 12)


def test_seeded_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a = grad_norm_vs_lag("lstm", hidden_size=16, T=20, seed=5, forget_bias=1.0)[1]
    b = grad_norm_vs_lag("lstm", hidden_size=16, T=20, seed=5, forget_bias=1.0)[1]
    c = grad_norm_vs_lag("lstm", hidden_size=16, T=20, seed=6, forget_bias=1.0)[1]
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(state, torch.get_rng_state())


def test_per_step_factor_recovers_a_geometric_rate():
    lags = torch.arange(40)
    assert per_step_factor(lags, 3.0 * 0.7 ** lags.double()) == pytest.approx(0.7, rel=1e-12)
    assert per_step_factor(lags, torch.full((40,), 2.0)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        per_step_factor(lags, torch.zeros(40))


def test_bad_requests_get_a_clear_message():
    with pytest.raises(ValueError, match="kind"):
        grad_norm_vs_lag("gru")
    with pytest.raises(ValueError, match="wrt"):
        grad_norm_vs_lag("rnn", hidden_size=4, T=3, wrt="c")
    with pytest.raises(ValueError, match="forget gate"):
        make_cell("rnn", 4, 4, forget_bias=1.0)
    with pytest.raises(ValueError, match="forget gate"):
        forget_gate_product(make_cell("rnn", 4, 4), random_inputs(3, 1, 4))
    with pytest.raises(ValueError, match=r"\(T, B, 4\)"):
        unroll(make_cell("lstm", 4, 4), torch.zeros(3, 4))
    with pytest.raises(TypeError, match="LSTMCell"):
        cell_weights(nn.Linear(3, 3))
    with pytest.raises(ValueError, match="add_forget_bias"):
        grad_norm_vs_lag(cell=make_cell("lstm", 4, 4), forget_bias=1.0)
    assert math.isfinite(float(grad_norm_vs_lag("rnn", hidden_size=4, T=3)[1].sum()))
