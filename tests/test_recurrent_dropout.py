"""Dropout on the recurrent connection h_(t-1) of the from-the-equations LSTM: the hand-written backward with a
mask against autograd through a loop of lstm_cell with the same masks; what each kind of mask covers; p = 0,
evaluation mode, bad values, and the refusal with the cuDNN cell."""
import pytest
import torch

from lmcourse.networks.dropout import recurrent_mask
from lmcourse.networks.lstm import LSTM, lstm_cell, lstm_layer
from lmcourse.networks.models import LMConfig, RNNLM

T, B, I, H = 7, 3, 4, 5
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]  # tests/conftest.py skips it, with its reason, without a GPU


def _weights(device, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = dict(x=(T, B, I), h0=(B, H), c0=(B, H), w_ih=(4 * H, I), w_hh=(4 * H, H), b_ih=(4 * H,), b_hh=(4 * H,))
    return {k: (torch.rand(s, generator=g, dtype=dtype) - 0.5).to(device).requires_grad_() for k, s in shapes.items()}


def _by_loop(w, m):
    """The reference: lstm_cell step by step, z_t = W_ih x_t + b + W_hh (m_t * h_(t-1)), autograd for the rest."""
    h, c, outs = w["h0"], w["c0"], []
    for t in range(T):
        m_t = m if m.dim() == 2 else m[t]                                            # (B, H)
        h, c = lstm_cell(w["x"][t], m_t * h, c, w["w_ih"], w["w_hh"], w["b_ih"], w["b_hh"])
        outs.append(h)
    return torch.stack(outs), h, c                                                   # (T, B, H), (B, H), (B, H)


def _grads(outputs, w):
    g = torch.Generator().manual_seed(1)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device)).sum() for o in outputs)
    return torch.autograd.grad(loss, list(w.values()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["locked", "step"])
def test_backward_with_a_mask_matches_autograd_through_the_cell(kind, device):
    w = _weights(device)
    torch.manual_seed(2)
    m = recurrent_mask(w["x"], T, B, H, 0.4, kind)                                   # (B, H) or (T, B, H)
    assert m.shape == ((B, H) if kind == "locked" else (T, B, H))
    out, (h_n, c_n) = lstm_layer(w["x"], w["h0"], w["c0"], w["w_ih"], w["w_hh"], w["b_ih"], w["b_hh"], m=m)
    ref = _by_loop(w, m)
    for a, b in zip((out, h_n, c_n), ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    for a, b in zip(_grads((out, h_n, c_n), w), _grads(ref, w)):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


def test_gradcheck_with_a_step_mask():
    w = _weights("cpu")
    m = recurrent_mask(w["x"], T, B, H, 0.3, "step")
    assert torch.autograd.gradcheck(lambda x, h0, c0, w_ih, w_hh: lstm_layer(x, h0, c0, w_ih, w_hh, m=m)[0],
                                    (w["x"], w["h0"], w["c0"], w["w_ih"], w["w_hh"]))


def test_the_locked_mask_is_one_over_time_and_the_step_mask_is_not():
    torch.manual_seed(0)
    like = torch.zeros(1)
    locked = recurrent_mask(like, 50, 4, 32, 0.5, "locked")                         # (B, H), applied at every t
    step = recurrent_mask(like, 50, 4, 32, 0.5, "step")                             # (T, B, H)
    assert locked.shape == (4, 32) and set(locked.unique().tolist()) == {0.0, 2.0}
    assert step.shape == (50, 4, 32) and not torch.equal(step[0], step[1])
    # the module: a unit dropped at one step of a locked sequence gives the same h_t as a weight row of zeros
    lstm = LSTM(3, 6, dropoutr=0.5, recurrent_kind="locked").double().train()
    x = torch.randn(9, 2, 3, dtype=torch.float64)
    torch.manual_seed(4)
    y, _ = lstm(x)
    torch.manual_seed(4)
    m = recurrent_mask(x, 9, 2, 6, 0.5, "locked")
    y_ref, _ = lstm_layer(x, x.new_zeros(2, 6), x.new_zeros(2, 6), *lstm.layer_weights(0), m=m)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=0)


def test_p_zero_is_no_mask_and_eval_draws_none():
    torch.manual_seed(0)
    plain = LSTM(3, 6).double()
    x = torch.randn(8, 2, 3, dtype=torch.float64)
    for kind in ("locked", "step"):
        zero = LSTM(3, 6, dropoutr=0.0, recurrent_kind=kind).double().train()
        zero.load_state_dict(plain.state_dict())
        assert torch.equal(zero(x)[0], plain(x)[0])
        dropped = LSTM(3, 6, dropoutr=0.5, recurrent_kind=kind).double()
        dropped.load_state_dict(plain.state_dict())
        state = torch.get_rng_state()
        assert torch.equal(dropped.eval()(x)[0], plain(x)[0])
        assert torch.equal(torch.get_rng_state(), state), "evaluation draws no mask"
        assert not torch.allclose(dropped.train()(x)[0], plain(x)[0])


def test_the_model_applies_it_in_training_only():
    config = LMConfig(30, emb_size=6, hidden_size=5, num_layers=2, cell="equations", dropoutr=0.5,
                      recurrent_kind="step")
    torch.manual_seed(0)
    model = RNNLM(config)
    x = torch.randint(0, 30, (6, 2))
    assert all(rnn.dropoutr == 0.5 and rnn.recurrent_kind == "step" for rnn in model.rnns)
    model.eval()
    assert torch.equal(model(x).logits, model(x).logits)
    model.train()
    assert not torch.equal(model(x).logits, model(x).logits)


@pytest.mark.parametrize("changes, words", [
    (dict(dropoutr=1.0), "dropout probability"),
    (dict(dropoutr=-0.1), "dropout probability"),
    (dict(recurrent_kind="fresh"), "recurrent_kind"),
    (dict(dropoutr=0.3, cell="fast"), "cell='equations'"),
])
def test_bad_config_one_sentence(changes, words):
    base = dict(cell="equations", dropoutr=0.2)
    with pytest.raises(ValueError, match=words) as error:
        LMConfig(30, emb_size=6, hidden_size=5, num_layers=1, **{**base, **changes})
    assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")


def test_bad_module_arguments_and_mask_shape():
    with pytest.raises(ValueError, match="recurrent_kind"):
        LSTM(3, 6, dropoutr=0.2, recurrent_kind="per-step")
    with pytest.raises(ValueError, match=r"outside \[0, 1\)"):
        LSTM(3, 6, dropoutr=1.5)
    w = _weights("cpu")
    with pytest.raises(ValueError, match="must have shape"):
        lstm_layer(w["x"], w["h0"], w["c0"], w["w_ih"], w["w_hh"], m=torch.ones(T, H, dtype=torch.float64))
