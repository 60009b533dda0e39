"""The dropouts of lesson 03 and AR/TAR: masks, scaling, identity in eval, and WeightDrop's contract."""
import copy
import io
import math
import warnings

import pytest
import torch
from torch import nn

from lmcourse.networks.dropout import (
    LockedDropout,
    StandardDropout,
    WeightDrop,
    activation_regularization,
    embedding_dropout,
    temporal_activation_regularization,
)
from lmcourse.networks.lstm import LSTM as CourseLSTM

P = 0.4
N_SAMPLES = 2000
Z = 6.0  # tolerance in standard errors; with fixed seeds the checks are deterministic anyway


def _mean_tolerance(x: torch.Tensor, p: float, n: int) -> torch.Tensor:
    """Z standard errors of the mean of n draws of x * m / (1-p); one error is |x| sqrt(p / (1-p) / n)."""
    return Z * x.abs() * math.sqrt(p / (1 - p) / n) + 1e-6


def _is_zero_or_scaled(y: torch.Tensor, x: torch.Tensor, p: float) -> bool:
    """Every entry of y is 0 or x / (1-p)."""
    return bool(((y == 0) | torch.isclose(y, x / (1 - p))).all())


class EquationLSTM(nn.Module):
    """A one-layer LSTM written from the gate equations, with nn.LSTM's parameter names."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        H = hidden_size
        self.weight_ih_l0 = nn.Parameter(torch.empty(4 * H, input_size).uniform_(-0.3, 0.3))
        self.weight_hh_l0 = nn.Parameter(torch.empty(4 * H, H).uniform_(-0.3, 0.3))
        self.bias_ih_l0 = nn.Parameter(torch.empty(4 * H).uniform_(-0.3, 0.3))
        self.bias_hh_l0 = nn.Parameter(torch.empty(4 * H).uniform_(-0.3, 0.3))

    def forward(self, x, hx=None):  # (T, B, I) -> (T, B, H), ((1, B, H), (1, B, H))
        T, B, _ = x.shape
        H = self.weight_hh_l0.shape[1]
        h_t, c_t = (x.new_zeros(B, H), x.new_zeros(B, H)) if hx is None else (hx[0][0], hx[1][0])
        a_x = x @ self.weight_ih_l0.T + self.bias_ih_l0 + self.bias_hh_l0  # (T, B, 4H)
        outputs = []
        for t in range(T):  # the recurrence itself
            i, f, g, o = (a_x[t] + h_t @ self.weight_hh_l0.T).chunk(4, dim=1)
            c_t = torch.sigmoid(f) * c_t + torch.sigmoid(i) * torch.tanh(g)
            h_t = torch.sigmoid(o) * torch.tanh(c_t)
            outputs.append(h_t)
        return torch.stack(outputs), (h_t[None], c_t[None])


def _lstm_and_input(seed=0, I=6, H=8, T=7, B=3, dtype=torch.float32):
    torch.manual_seed(seed)
    lstm = nn.LSTM(I, H).to(dtype)
    x = torch.randn(T, B, I, dtype=dtype)
    hx = (torch.randn(1, B, H, dtype=dtype), torch.randn(1, B, H, dtype=dtype))
    return lstm, x, hx


def _with_weights(module: nn.Module, weights: dict) -> nn.Module:
    """A copy of module whose named parameters are set to the given tensors."""
    plain = copy.deepcopy(module)
    with torch.no_grad():
        for name, w in weights.items():
            plain.get_parameter(name).copy_(w)
    if isinstance(plain, nn.RNNBase):  # a deep copy's weights are separate tensors: cuDNN would warn on each call
        plain.flatten_parameters()  # one contiguous block again (nothing to do on the CPU)
    return plain


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("p", [-0.1, 1.0, 1.2, float("nan")])
def test_invalid_probability_is_refused_everywhere(p):
    lstm = nn.LSTM(3, 4)
    for make in (lambda: LockedDropout(p), lambda: StandardDropout(p), lambda: WeightDrop(lstm, p),
                 lambda: embedding_dropout(nn.Embedding(5, 2), torch.tensor([1, 2]), p)):
        with pytest.raises(ValueError, match=r"outside \[0, 1\): use 0 <= p < 1"):
            make()


def test_non_numeric_probability_and_bad_inputs_are_refused():
    with pytest.raises(TypeError, match="must be a number"):
        LockedDropout("0.5")
    with pytest.raises(TypeError, match="must be a number"):
        LockedDropout(True)
    with pytest.raises(TypeError, match="nn.Embedding"):
        embedding_dropout(nn.Linear(2, 2), torch.tensor([0]), 0.1)
    with pytest.raises(TypeError, match="LongTensor"):
        embedding_dropout(nn.Embedding(5, 2), torch.tensor([0.0, 1.0]), 0.1)
    with pytest.raises(ValueError, match="no parameter 'weight_hh_l9'"):
        WeightDrop(nn.LSTM(3, 4), 0.5, weights=("weight_hh_l9",))
    with pytest.raises(ValueError, match="no weight names"):
        WeightDrop(nn.LSTM(3, 4), 0.5, weights=())
    with pytest.raises(TypeError, match="wraps an nn.Module"):
        WeightDrop("lstm", 0.5)
    with pytest.raises(ValueError, match=r"\(T, B, H\)"):
        LockedDropout(0.5)(torch.ones(4))


@pytest.mark.parametrize("fn, name", [(activation_regularization, "alpha"),
                                      (temporal_activation_regularization, "beta")])
def test_negative_coefficients_are_refused(fn, name):
    with pytest.raises(ValueError, match=f"{name}=-1.0 is negative"):
        fn(torch.ones(3, 2, 2), -1)
    with pytest.raises(TypeError, match="floating-point tensor"):
        fn(torch.ones(3, 2, 2, dtype=torch.long), 1.0)


# ---------------------------------------------------------------- locked and standard dropout

def test_locked_mask_is_shared_over_time_and_differs_between_sequences():
    torch.manual_seed(0)
    x = torch.randn(12, 5, 64)  # (T, B, H)
    y = LockedDropout(P)(x)
    assert _is_zero_or_scaled(y, x, P)
    ratio = y / x  # (T, B, H): the mask m / (1-p)
    assert torch.allclose(ratio, ratio[:1].expand_as(ratio))  # same at every step
    mask = ratio[0] != 0  # (B, H)
    for b in range(1, mask.shape[0]):
        assert not torch.equal(mask[0], mask[b])  # each sequence has its own mask
    frac_dropped = 1 - mask.float().mean().item()
    assert abs(frac_dropped - P) < Z * math.sqrt(P * (1 - P) / mask.numel())


def test_locked_mask_changes_between_calls():
    torch.manual_seed(1)
    x = torch.ones(3, 4, 32)
    drop = LockedDropout(P)
    assert not torch.equal(drop(x), drop(x))


def test_standard_dropout_draws_a_fresh_mask_at_each_step():
    torch.manual_seed(0)
    x = torch.ones(10, 4, 64)
    y = StandardDropout(P)(x)
    assert isinstance(StandardDropout(P), nn.Dropout)
    assert _is_zero_or_scaled(y, x, P)
    for t in range(1, x.shape[0]):
        assert not torch.equal(y[0], y[t])


@pytest.mark.parametrize("cls", [LockedDropout, StandardDropout])
def test_dropout_modules_are_identity_in_eval_and_at_p0(cls):
    x = torch.randn(6, 3, 5)
    assert torch.equal(cls(P).eval()(x), x)
    assert torch.equal(cls(0.0).train()(x), x)


@pytest.mark.parametrize("cls", [LockedDropout, StandardDropout])
def test_dropout_modules_preserve_the_expected_activation(cls):
    torch.manual_seed(2)
    x = torch.randn(3, 1, 4) + 1.0  # (T, 1, H)
    y = cls(P)(x.expand(3, N_SAMPLES, 4))  # each column is an independent draw
    assert torch.all((y.mean(dim=1, keepdim=True) - x).abs() <= _mean_tolerance(x, P, N_SAMPLES))


def test_locked_mask_keeps_its_values_in_low_precision():
    torch.manual_seed(3)
    x = torch.ones(4, 3, 16, dtype=torch.bfloat16)
    y = LockedDropout(0.5)(x)
    assert y.dtype == torch.bfloat16 and set(y.unique().tolist()) == {0.0, 2.0}


# ---------------------------------------------------------------- embedding dropout

def _embedding_case(seed=0, V=40, D=6):
    torch.manual_seed(seed)
    emb = nn.Embedding(V, D)
    words = torch.randint(0, V, (25, 4))  # (T, B), many repeats
    return emb, words


def test_embedding_dropout_drops_whole_word_types():
    emb, words = _embedding_case()
    torch.manual_seed(3)
    e = embedding_dropout(emb, words, P)  # (T, B, D)
    W = emb.weight.detach()
    zero = (e == 0).all(dim=-1)  # (T, B)
    dropped = set(words[zero].tolist())
    kept = set(words[~zero].tolist())
    assert dropped and kept and not (dropped & kept)  # every occurrence of a type shares its fate
    assert torch.allclose(e[~zero], W[words[~zero]] / (1 - P))  # nothing else is changed
    (e.sum()).backward()
    counts = torch.bincount(words.flatten(), minlength=W.shape[0]).float()  # (V,)
    keep = torch.zeros(W.shape[0])
    keep[sorted(kept)] = 1.0
    expected = (counts * keep / (1 - P))[:, None].expand_as(W)  # d/dW_v of sum_x m_x W_x / (1-p)
    assert torch.allclose(emb.weight.grad, expected)


def test_embedding_dropout_is_a_plain_lookup_in_eval_and_at_p0():
    emb, words = _embedding_case()
    assert torch.equal(embedding_dropout(emb, words, P, training=False), emb(words))
    assert torch.equal(embedding_dropout(emb, words, 0.0, training=True), emb(words))


def test_embedding_dropout_draws_a_new_mask_per_call_and_preserves_the_mean():
    emb, words = _embedding_case(V=10, D=3)
    torch.manual_seed(4)
    with torch.no_grad():
        draws = torch.stack([embedding_dropout(emb, words[:5, 0], P) for _ in range(N_SAMPLES)])
        base = emb(words[:5, 0])  # (5, D)
    assert not torch.equal(draws[0], draws[1])
    assert torch.all((draws.mean(0) - base).abs() <= _mean_tolerance(base, P, N_SAMPLES))


# ---------------------------------------------------------------- WeightDrop

def test_weight_drop_changes_w_hh_only_with_one_mask_for_all_steps():
    lstm, x, hx = _lstm_and_input()
    wd = WeightDrop(lstm, P)
    torch.manual_seed(10)
    out, (h_n, c_n) = wd(x, hx)
    torch.manual_seed(10)
    W = wd.sample_weights()["weight_hh_l0"].detach()
    raw = lstm.weight_hh_l0.detach()
    assert _is_zero_or_scaled(W, raw, P)  # DropConnect of the raw matrix
    frac = (W == 0).float().mean().item()
    assert abs(frac - P) < Z * math.sqrt(P * (1 - P) / W.numel())
    # A plain LSTM holding W as its fixed W_hh, and W_ih, biases untouched, gives the same run.
    plain = _with_weights(lstm, {"weight_hh_l0": W})
    out2, (h2, c2) = plain(x, hx)
    assert torch.allclose(out, out2, atol=1e-6) and torch.allclose(c_n, c2, atol=1e-6)


def test_weight_drop_gradient_reaches_the_raw_weight_through_the_mask():
    lstm, x, hx = _lstm_and_input()
    before = copy.deepcopy(lstm.state_dict())
    wd = WeightDrop(lstm, P)
    torch.manual_seed(11)
    out, _ = wd(x, hx)
    out.pow(2).sum().backward()
    for name, value in lstm.state_dict().items():  # forward and backward wrote nothing
        assert torch.equal(value, before[name]), name
    torch.manual_seed(11)
    W = wd.sample_weights()["weight_hh_l0"].detach()
    plain = _with_weights(lstm, {"weight_hh_l0": W})
    plain(x, hx)[0].pow(2).sum().backward()
    expected = plain.weight_hh_l0.grad * (W != 0) / (1 - P)  # chain rule through W~ = M W / (1-p)
    assert lstm.weight_hh_l0.grad is not None and lstm.weight_hh_l0.grad.abs().sum() > 0
    assert torch.allclose(lstm.weight_hh_l0.grad, expected, atol=1e-6)
    assert torch.allclose(lstm.weight_ih_l0.grad, plain.weight_ih_l0.grad, atol=1e-6)


def test_weight_drop_draws_one_new_mask_per_forward_and_repeats_under_a_seed():
    lstm, x, hx = _lstm_and_input()
    wd = WeightDrop(lstm, P)
    runs = []
    for seed in (5, 6, 5):
        torch.manual_seed(seed)
        runs.append(wd(x, hx)[0])
    assert not torch.allclose(runs[0], runs[1])
    assert torch.equal(runs[0], runs[2])


def test_weight_drop_is_inert_in_eval_and_at_p0():
    lstm, x, hx = _lstm_and_input()
    expected = lstm(x, hx)[0]
    assert torch.equal(WeightDrop(lstm, P).eval()(x, hx)[0], expected)
    assert torch.equal(WeightDrop(lstm, 0.0).train()(x, hx)[0], expected)


def test_wrapped_lstm_still_works_alone_after_training_steps():
    lstm, x, hx = _lstm_and_input()
    wd = WeightDrop(lstm, P)
    optimiser = torch.optim.SGD(wd.parameters(), lr=0.5)
    for _ in range(2):
        optimiser.zero_grad()
        wd(x, hx)[0].sum().backward()
        optimiser.step()
    # The updated raw weights are what both the wrapper (eval) and the bare module use now.
    fresh = nn.LSTM(lstm.input_size, lstm.hidden_size)
    fresh.load_state_dict(lstm.state_dict())
    expected = fresh(x, hx)[0]
    assert torch.equal(lstm(x, hx)[0], expected)
    assert torch.equal(wd.eval()(x, hx)[0], expected)


def test_weight_drop_preserves_the_expected_weight():
    lstm = nn.LSTM(3, 4)
    wd = WeightDrop(lstm, P)
    torch.manual_seed(7)
    with torch.no_grad():
        mean = torch.stack([wd.sample_weights()["weight_hh_l0"] for _ in range(N_SAMPLES)]).mean(0)
    raw = lstm.weight_hh_l0.detach()
    assert torch.all((mean - raw).abs() <= _mean_tolerance(raw, P, N_SAMPLES))


def test_weight_drop_emits_no_warnings():
    lstm, x, hx = _lstm_and_input()
    wd = WeightDrop(lstm, P)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            wd.train()(x, hx)[0].sum().backward()
            with torch.no_grad():
                wd.eval()(x, hx)
    assert not caught, [str(w.message) for w in caught]


def test_weight_drop_follows_double_and_round_trips_its_state_dict():
    lstm, x, hx = _lstm_and_input()
    wd = WeightDrop(lstm, P).double()
    assert wd.weight_hh_l0_raw.dtype == torch.float64 and wd.weight_hh_l0_raw is lstm.weight_hh_l0
    x64, hx64 = x.double(), tuple(h.double() for h in hx)
    torch.manual_seed(15)
    out = wd(x64, hx64)[0]
    torch.manual_seed(15)
    out32 = WeightDrop(copy.deepcopy(lstm).float(), P)(x, hx)[0]
    assert torch.allclose(out32.double(), out, atol=1e-5)  # a seed gives the same mask in both dtypes
    out.sum().backward()
    assert out.dtype == torch.float64 and lstm.weight_hh_l0.grad.dtype == torch.float64
    buffer = io.BytesIO()
    torch.save(wd.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert "module.weight_hh_l0" in state
    other = WeightDrop(nn.LSTM(lstm.input_size, lstm.hidden_size).double(), P)
    other.load_state_dict(state)
    assert torch.equal(other.eval()(x64, hx64)[0], wd.eval()(x64, hx64)[0])
    torch.manual_seed(8)
    a = wd.train()(x64, hx64)[0]
    torch.manual_seed(8)
    assert torch.equal(other.train()(x64, hx64)[0], a)


def test_weight_drop_raw_alias_and_repr():
    lstm = nn.LSTM(3, 4)
    wd = WeightDrop(lstm, P)
    assert wd.weight_hh_l0_raw is lstm.weight_hh_l0
    assert wd.raw_weights == {"weight_hh_l0": lstm.weight_hh_l0}
    with pytest.raises(AttributeError):
        wd.weight_ih_l0_raw  # not dropped, so no raw alias
    assert "p=0.4" in repr(wd)


def test_weight_drop_several_layers_and_batch_first():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True)
    x = torch.randn(3, 6, 4)  # (B, T, I)
    names = ("weight_hh_l0", "weight_hh_l1")
    wd = WeightDrop(lstm, P, weights=names)
    torch.manual_seed(9)
    out = wd(x)[0]
    torch.manual_seed(9)
    dropped = {k: v.detach() for k, v in wd.sample_weights().items()}
    assert set(dropped) == set(names)
    assert torch.allclose(out, _with_weights(lstm, dropped)(x)[0], atol=1e-6)
    packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([6, 4, 2]), batch_first=True)
    out_packed, (h_n, _) = wd(packed)
    assert isinstance(out_packed, nn.utils.rnn.PackedSequence) and h_n.shape == (2, 3, 5)


@pytest.mark.parametrize("make", [EquationLSTM, CourseLSTM], ids=["test-file LSTM", "lmcourse.networks.lstm.LSTM"])
def test_weight_drop_wraps_any_lstm_with_torch_parameter_names(make):
    torch.manual_seed(0)
    other = make(6, 8)
    fast = nn.LSTM(6, 8)
    fast.load_state_dict(other.state_dict())  # the same parameter names as nn.LSTM
    x = torch.randn(7, 3, 6)
    assert torch.allclose(other(x)[0], fast(x)[0], atol=1e-5)  # the same LSTM, two implementations
    torch.manual_seed(12)
    out_other = WeightDrop(other, P)(x)[0]
    torch.manual_seed(12)
    out_fast = WeightDrop(fast, P)(x)[0]
    assert torch.allclose(out_other, out_fast, atol=1e-5)   # the same mask on W_hh
    out_other.sum().backward()
    assert other.weight_hh_l0.grad.abs().sum() > 0


# ---------------------------------------------------------------- AR and TAR

def test_activation_regularization_is_alpha_times_mean_square():
    torch.manual_seed(0)
    h = torch.randn(4, 3, 2, requires_grad=True)
    values = h.detach().flatten().tolist()
    expected = 2.0 * sum(v * v for v in values) / len(values)
    ar = activation_regularization(h, 2.0)
    assert ar.item() == pytest.approx(expected, rel=1e-6)
    ar.backward()
    assert torch.allclose(h.grad, 2.0 * 2 * h.detach() / h.numel())


def test_temporal_activation_regularization_is_beta_times_mean_squared_step():
    torch.manual_seed(0)
    h = torch.randn(5, 3, 2)
    T = h.shape[0]
    total = sum(float(((h[t] - h[t - 1]) ** 2).sum()) for t in range(1, T))
    expected = 1.5 * total / ((T - 1) * h[0].numel())
    assert temporal_activation_regularization(h, 1.5).item() == pytest.approx(expected, rel=1e-6)
    constant = torch.ones(6, 2, 3) * 0.7
    assert temporal_activation_regularization(constant, 1.0).item() == 0.0
    assert temporal_activation_regularization(torch.randn(1, 2, 3), 1.0).item() == 0.0


# ---------------------------------------------------------------- CUDA

cuda = pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)


@cuda
def test_weight_drop_on_cuda_matches_a_plain_lstm_and_stays_quiet():
    lstm, x, hx = _lstm_and_input(H=32)
    lstm, x, hx = lstm.cuda(), x.cuda(), tuple(h.cuda() for h in hx)
    wd = WeightDrop(lstm, P)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(14)
        out = wd(x, hx)[0]
        out.sum().backward()
        torch.manual_seed(14)
        W = wd.sample_weights()["weight_hh_l0"].detach()
        assert torch.allclose(out, _with_weights(lstm, {"weight_hh_l0": W})(x, hx)[0], atol=1e-5)
        with torch.no_grad():
            assert torch.allclose(wd.eval()(x, hx)[0], lstm(x, hx)[0])
    assert not caught, [str(w.message) for w in caught]
    assert lstm.weight_hh_l0.grad.abs().sum() > 0


@cuda
def test_locked_and_embedding_dropout_on_cuda():
    torch.manual_seed(0)
    x = torch.randn(5, 3, 16, device="cuda")
    y = LockedDropout(P)(x)
    assert y.device.type == "cuda" and _is_zero_or_scaled(y, x, P)
    emb = nn.Embedding(20, 4).cuda()
    words = torch.randint(0, 20, (6, 2), device="cuda")
    assert embedding_dropout(emb, words, P).device.type == "cuda"
