"""lmcourse.networks.lstm against torch.nn: same weights give the same outputs, states and gradients."""
import pytest
import torch
from torch import nn

from lmcourse.networks.lstm import LSTM, RNN, LSTMCell, LSTMLayerBPTT, RNNCell, add_forget_bias

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
I, H = 5, 6


def _max_err(a, b):
    return max(float((x - y).detach().abs().max()) for x, y in zip(a, b))


def _max_scaled_err(a, b):
    """The largest error of each tensor in units of its magnitude (at least 1): float rounding grows with the
    values summed, so a gradient of size 13 carries 13 times the absolute error of one of size 1."""
    return max(float((x - y).detach().abs().max()) / max(1.0, float(y.detach().abs().max())) for x, y in zip(a, b))


def _pair(ours_cls, torch_cls, args, direction, dtype, device="cpu", **kw):
    """Two modules with equal weights, moved by load_state_dict in the given direction."""
    gen = torch.Generator().manual_seed(7)
    ref, ours = torch_cls(*args, **kw).to(device, dtype), ours_cls(*args, **kw).to(device, dtype)
    src, dst = (ref, ours) if direction == "torch->ours" else (ours, ref)
    with torch.no_grad():  # fresh random weights at the source so no init coincidence helps
        for p in src.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=dtype).to(device) * 0.8 - 0.4)
    dst.load_state_dict(src.state_dict())
    return ref, ours


def _outputs_and_grads(module, x, hx, n_states):
    """Forward, then a loss that weights every output and final state differently; returns values and grads."""
    out, final = module(x, None if hx is None else (hx if n_states == 2 else hx[0]))
    final = list(final) if n_states == 2 else [final]
    gen = torch.Generator().manual_seed(3)
    loss = sum((t * torch.randn(t.shape, generator=gen, dtype=t.dtype).to(t.device)).sum() for t in [out] + final)
    leaves = [x] + list(hx or ()) + [p for _, p in sorted(module.named_parameters())]
    grads = torch.autograd.grad(loss, leaves)
    return [out] + final + list(grads)


def _inputs(T, B, L, n_states, with_hx, dtype, device="cpu"):
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(T, B, I, generator=gen, dtype=dtype).to(device).requires_grad_()
    hx = None
    if with_hx:
        hx = tuple(torch.randn(L, B, H, generator=gen, dtype=dtype).to(device).requires_grad_()
                   for _ in range(n_states))
    return x, hx


def _compare_stacks(ours_cls, torch_cls, L, B, T, with_hx, dtype, direction, device="cpu", **kw):
    n_states = 2 if ours_cls is LSTM else 1
    ref, ours = _pair(ours_cls, torch_cls, (I, H, L), direction, dtype, device, **kw)
    assert sorted(ref.state_dict()) == sorted(ours.state_dict())
    x, hx = _inputs(T, B, L, n_states, with_hx, dtype, device)
    a, b = (_outputs_and_grads(m, x, hx, n_states) for m in (ref, ours))
    assert [t.shape for t in a] == [t.shape for t in b]
    assert _max_scaled_err(a, b) <= TOL[dtype] * (10 if device == "cuda" else 1)  # cuDNN sums in another order


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("direction", ["torch->ours", "ours->torch"])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("T", [1, 7, 20])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("L", [1, 2, 3])
def test_lstm_equals_torch(L, B, T, with_hx, direction, dtype):
    _compare_stacks(LSTM, nn.LSTM, L, B, T, with_hx, dtype, direction)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("direction", ["torch->ours", "ours->torch"])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("T", [1, 7, 20])
@pytest.mark.parametrize("L", [1, 2, 3])
def test_rnn_equals_torch(L, T, with_hx, direction, dtype):
    _compare_stacks(RNN, nn.RNN, L, 3, T, with_hx, dtype, direction)


def test_rnn_relu_and_no_bias_equal_torch():
    _compare_stacks(RNN, nn.RNN, 2, 3, 7, True, torch.float64, "torch->ours", nonlinearity="relu")
    _compare_stacks(RNN, nn.RNN, 2, 3, 7, True, torch.float64, "ours->torch", bias=False)
    _compare_stacks(LSTM, nn.LSTM, 2, 3, 7, True, torch.float64, "torch->ours", bias=False)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("direction", ["torch->ours", "ours->torch"])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_cells_equal_torch(kind, B, with_hx, direction, dtype):
    ours_cls, torch_cls, n = (LSTMCell, nn.LSTMCell, 2) if kind == "lstm" else (RNNCell, nn.RNNCell, 1)
    ref, ours = _pair(ours_cls, torch_cls, (I, H), direction, dtype)
    assert sorted(ref.state_dict()) == sorted(ours.state_dict())
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(B, I, generator=gen, dtype=dtype).requires_grad_()
    hx = [torch.randn(B, H, generator=gen, dtype=dtype).requires_grad_() for _ in range(n)] if with_hx else []
    results = []
    for m in (ref, ours):
        arg = (tuple(hx) if n == 2 else hx[0]) if with_hx else None
        out = m(x, arg)
        out = list(out) if n == 2 else [out]
        loss = sum((t * torch.linspace(-1, 2, t.numel(), dtype=dtype).view_as(t)).sum() for t in out)
        grads = torch.autograd.grad(loss, [x] + hx + [p for _, p in sorted(m.named_parameters())])
        results.append(out + list(grads))
    assert _max_err(*results) <= TOL[dtype]


def test_unbatched_cell_and_stack_match_torch():
    torch.manual_seed(0)
    ref, ours = _pair(LSTMCell, nn.LSTMCell, (I, H), "torch->ours", torch.float64)
    x = torch.randn(I, dtype=torch.float64)
    assert _max_err(ref(x), ours(x)) <= 1e-12 and ours(x)[0].shape == (H,)
    ref, ours = _pair(LSTM, nn.LSTM, (I, H, 2), "torch->ours", torch.float64)
    x = torch.randn(4, I, dtype=torch.float64)
    hx = (torch.randn(2, H, dtype=torch.float64), torch.randn(2, H, dtype=torch.float64))
    (ya, (ha, ca)), (yb, (hb, cb)) = ref(x, hx), ours(x, hx)
    assert yb.shape == (4, H) and hb.shape == (2, H)
    assert _max_err([ya, ha, ca], [yb, hb, cb]) <= 1e-12


def test_batch_first_matches_torch():
    ref, ours = _pair(LSTM, nn.LSTM, (I, H, 2), "torch->ours", torch.float64, batch_first=True)
    x = torch.randn(3, 9, I, dtype=torch.float64)
    (ya, (ha, ca)), (yb, (hb, cb)) = ref(x), ours(x)
    assert yb.shape == (3, 9, H)
    assert _max_err([ya, ha, ca], [yb, hb, cb]) <= 1e-12


def test_same_seed_gives_torch_init():
    for ours_cls, torch_cls, args in [(LSTM, nn.LSTM, (I, H, 3)), (RNN, nn.RNN, (I, H, 2)),
                                      (LSTMCell, nn.LSTMCell, (I, H)), (RNNCell, nn.RNNCell, (I, H))]:
        torch.manual_seed(123)
        ref = torch_cls(*args)
        torch.manual_seed(123)
        ours = ours_cls(*args)
        a, b = ref.state_dict(), ours.state_dict()
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)
        bound = H ** -0.5
        assert all(float(p.detach().abs().max()) <= bound for p in ours.parameters())


def test_bptt_function_passes_gradcheck():
    gen = torch.Generator().manual_seed(1)
    T, B, Hs = 4, 2, 3
    u = torch.randn(T, B, 4 * Hs, generator=gen, dtype=torch.float64, requires_grad=True)
    h0, c0 = (torch.randn(B, Hs, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(2))
    w = (0.5 * torch.randn(4 * Hs, Hs, generator=gen, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(LSTMLayerBPTT.apply, (u, h0, c0, w))


def test_frozen_recurrent_weights_and_partial_losses():
    ref, ours = _pair(LSTM, nn.LSTM, (I, H, 2), "torch->ours", torch.float64)
    for m in (ref, ours):
        m.weight_hh_l1.requires_grad_(False)
    x = torch.randn(6, 2, I, dtype=torch.float64, requires_grad=True)
    grads = []
    for m in (ref, ours):
        _, (h_n, c_n) = m(x)
        loss = c_n.sin().sum()  # the output sequence itself is unused
        grads.append(torch.autograd.grad(loss, [x, m.weight_ih_l0, m.weight_hh_l0]))
    assert _max_err(*grads) <= 1e-10


def test_eval_no_grad_and_dropout():
    ref, ours = _pair(LSTM, nn.LSTM, (I, H, 3), "torch->ours", torch.float64, dropout=0.5)
    x = torch.randn(5, 2, I, dtype=torch.float64)
    ref.eval(), ours.eval()
    with torch.no_grad():
        assert _max_err(ref(x)[0:1], ours(x)[0:1]) <= 1e-12
    ours.train()
    torch.manual_seed(0)
    y1 = ours(x)[0]
    torch.manual_seed(0)
    y2 = ours(x)[0]
    assert torch.equal(y1, y2)                       # one seed, one dropout mask
    assert not torch.allclose(y1, ours.eval()(x)[0])  # and the mask does act in training


def test_add_forget_bias_touches_only_f():
    for m in (LSTM(I, H, 2), nn.LSTM(I, H, 2), LSTMCell(I, H)):
        before = {k: v.clone() for k, v in m.state_dict().items()}
        add_forget_bias(m, 1.0)
        for k, v in m.state_dict().items():
            delta = v - before[k]
            if k.startswith("bias_ih"):
                assert torch.allclose(delta[H:2 * H], torch.ones(H)) and not delta[:H].any() and not delta[2 * H:].any()
            else:
                assert not delta.any()
    with pytest.raises(ValueError, match="LSTM"):
        add_forget_bias(RNN(I, H))


def test_bad_input_gets_a_clear_message():
    m = LSTM(I, H, 2)
    with pytest.raises(ValueError, match="input_size=5"):
        m(torch.randn(3, 2, I + 1))
    with pytest.raises(ValueError, match="shape"):
        m(torch.randn(3, 2, 1, I))
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(3, 2, I, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(2, 2, 6\)"):
        m(torch.randn(3, 2, I), (torch.zeros(1, 2, H), torch.zeros(1, 2, H)))
    with pytest.raises(ValueError, match=r"\(h_0, c_0\)"):
        m(torch.randn(3, 2, I), torch.zeros(2, 2, H))
    with pytest.raises(ValueError, match="empty"):
        m(torch.randn(0, 2, I))
    with pytest.raises(ValueError, match="hidden_size"):
        LSTM(I, 0)
    with pytest.raises(ValueError, match="dropout"):
        LSTM(I, H, 2, dropout=1.5)
    with pytest.raises(ValueError, match="nonlinearity"):
        RNN(I, H, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match=r"\(B, 5\)"):
        LSTMCell(I, H)(torch.randn(2, I + 2))


@pytest.fixture
def no_tf32():
    """Full float32 matmuls in cuDNN and cuBLAS, so float32 results compare at 1e-5."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("L", [1, 3])
def test_lstm_equals_torch_on_cuda(L, dtype, no_tf32):
    _compare_stacks(LSTM, nn.LSTM, L, 3, 20, True, dtype, "torch->ours", device="cuda")
    _compare_stacks(RNN, nn.RNN, L, 3, 20, True, dtype, "ours->torch", device="cuda")
