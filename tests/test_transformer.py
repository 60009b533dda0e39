"""The attention of lesson 10 and its Transformer: the equations against torch's fused kernel, the causal
mask, shapes, tying, and the state carried across chunks within the window."""
import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmcourse.networks.attention import (
    CausalSelfAttention,
    allowed_positions,
    attention_equations,
    attention_fused,
)
from lmcourse.networks.transformer import (
    PHASE_BLOCK,
    TransformerConfig,
    TransformerLM,
    count_parameters,
    sinusoidal_positions,
)
from lmcourse.vocab import Vocab

V = 23


def small(**changes) -> TransformerLM:
    torch.manual_seed(0)
    config = TransformerConfig(**{**dict(vocab_size=V, emb_size=16, num_layers=2, n_heads=4, ffn_size=24, window=6,
                                         dropout=0.0), **changes})
    model = TransformerLM(config).eval()
    model.vocab = Vocab([f"w{i}" for i in range(V - 1)] + ["<eos>"])
    return model


def qkv(T=7, S=None, dtype=torch.float64):
    g = torch.Generator().manual_seed(1)
    S = S or T
    return tuple(torch.randn(2, 3, n, 5, generator=g, dtype=dtype) for n in (T, S, S))


def test_equations_match_torch_causal_kernel_in_float64():
    q, k, v = qkv()
    y, a = attention_equations(q, k, v, allowed_positions(7, 0, None))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (y - expected).abs().max() < 1e-12
    assert torch.allclose(a.sum(-1), torch.ones_like(a.sum(-1)))
    assert (a.triu(1) == 0).all()  # no weight on a later position


def test_fused_matches_equations_with_memory_window_and_bias():
    q, k, v = qkv(T=4, S=9)
    allowed = allowed_positions(4, 5, 3)  # four queries after five remembered keys, three back at most
    bias = torch.randn(3, 4, 9, dtype=torch.float64)
    y, a = attention_equations(q, k, v, allowed, bias)
    assert (attention_fused(q, k, v, allowed, bias) - y).abs().max() < 1e-12
    assert ((a > 0) == allowed).all()  # exactly the allowed keys get weight


def test_allowed_positions_is_causal_and_windowed():
    allowed = allowed_positions(3, 2, 1)
    expected = torch.tensor([[0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=torch.bool)
    assert allowed.equal(expected)


def test_layer_fused_and_equations_agree_in_float32():
    torch.manual_seed(2)
    layer = CausalSelfAttention(16, 4)
    x, past = torch.randn(5, 3, 16), torch.randn(4, 3, 16)
    allowed = allowed_positions(5, 4, 6)
    fused = layer(x, past, allowed)
    layer.attention = "equations"
    assert torch.allclose(layer(x, past, allowed), fused, atol=1e-6)


def test_layer_rejects_a_size_that_does_not_split_into_heads():
    with pytest.raises(ValueError, match="split into 3 heads"):
        CausalSelfAttention(16, 3)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_shapes_and_a_future_token_changes_no_earlier_output(positions):
    model = small(positions=positions)
    x = torch.randint(0, V, (12, 3))
    out = model(x)
    assert out.logits.shape == (12, 3, V) and out.h.shape == (12, 3, 16)
    assert [p.shape for p in out.state.past] == [(6, 3, 16)] * 2 and out.state.position.tolist() == [[12] * 3]
    y = x.clone()
    y[8] = (y[8] + 1) % V
    changed = model(y).logits
    assert torch.equal(changed[:8], out.logits[:8])
    assert not torch.allclose(changed[8], out.logits[8])


def test_window_bounds_what_one_layer_reads():
    model = small(num_layers=1, window=3)
    x = torch.randint(0, V, (10, 1))
    y = x.clone()
    y[2] = (y[2] + 1) % V  # position 9 reads 6..9 only
    a, b = model(x).logits, model(y).logits
    assert torch.equal(a[6:], b[6:]) and not torch.allclose(a[2:6], b[2:6])


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("attention", ["fused", "equations"])
def test_chunks_score_as_the_whole_stream(positions, attention):
    model = small(positions=positions, attention=attention)
    tokens = torch.randint(0, V, (40,))
    whole = model.score(tokens, bptt=40)
    for bptt in (1, 5, 13):
        assert torch.allclose(model.score(tokens, bptt=bptt), whole, atol=1e-5)


def test_step_interface_matches_score():
    model = small()
    tokens = torch.randint(0, V, (15,))
    state = model.start(2)
    logp = []
    for t in tokens:
        logp.append(model.next_log_probs(state)[1, t])
        state = model.advance(state, torch.stack([t, t]))
    assert torch.allclose(torch.stack(logp).double(), model.score(tokens), atol=1e-5)
    kept = model.reorder(state, torch.tensor([1]))
    assert kept.inner.past[0].shape[1] == 1 and kept.log_probs.shape == (1, V)


def test_tying_shares_one_matrix_and_counts_it_once():
    tied, untied = small(tie=True), small(tie=False)
    assert tied.head.decoder.weight is tied.embedding.weight
    assert untied.num_parameters() - tied.num_parameters() == V * 16
    assert count_parameters(tied.config) == tied.num_parameters()


def test_sinusoidal_positions_follow_their_formula():
    t = torch.tensor([[0], [3]])
    p = sinusoidal_positions(t, 6)  # (2, 1, 6)
    assert torch.allclose(p[0, 0], torch.tensor([0.0, 1, 0, 1, 0, 1]))
    omega = torch.tensor([1.0, 10000 ** (-2 / 6), 10000 ** (-4 / 6)])
    assert torch.allclose(p[1, 0, 0::2], torch.sin(3 * omega)) and torch.allclose(p[1, 0, 1::2], torch.cos(3 * omega))


def _formula_in_numpy(t, size: int) -> np.ndarray:
    """An independent float64 reading of the formula, written from the paper: P[t, 2i] = sin(t / 10000^(2i/E)),
    P[t, 2i+1] = cos(t / 10000^(2i/E))."""
    t = np.asarray(t, dtype=np.float64)[..., None]
    out = np.empty(t.shape[:-1] + (size,))
    out[..., 0::2] = np.sin(t / 10000.0 ** (np.arange(0, size, 2) / size))
    out[..., 1::2] = np.cos(t / 10000.0 ** (np.arange(1, size, 2) // 2 * 2 / size))
    return out


def _exact(positions, size: int) -> np.ndarray:
    """The sinusoid at 40 digits (mpmath), rounded to float64 at the end: the reference for long streams."""
    mpmath.mp.dps = 40
    omega = [mpmath.power(10000, mpmath.mpf(-2 * (j // 2)) / size) for j in range(size)]
    return np.array([[float(mpmath.sin(t * w) if j % 2 == 0 else mpmath.cos(t * w)) for j, w in enumerate(omega)]
                     for t in positions])


def test_sinusoidal_angles_are_computed_in_the_model_dtype():
    """A float64 model's positions are float64 ones: within a few roundings of the angle of an independent float64
    formula (about 1e-15 near the start); a float32 model's are the direct float32 product, bit for bit, below
    PHASE_BLOCK (so a float32 model trained inside it reads the same numbers as before)."""
    t = torch.arange(64).view(-1, 1) + torch.tensor([[0, 1000]])  # (64, 2): two columns, one far along
    p64 = sinusoidal_positions(t, 16, torch.float64)
    assert p64.dtype == torch.float64
    bound = 4 * np.finfo(np.float64).eps * (1 + t.numpy()[..., None])  # a few roundings of an angle of size t
    assert (np.abs(p64.numpy() - _formula_in_numpy(t.numpy(), 16)) <= bound).all()
    assert np.abs(p64[:8, 0].numpy() - _formula_in_numpy(np.arange(8), 16)).max() <= 2e-15
    model = small().double()
    x = torch.randint(0, V, (12, 2))
    start = torch.tensor([[0, 3]])  # (1, B): where each column's stream stands
    positions = model.embed(x, start) - math.sqrt(16) * model.embedding(x)  # eval mode: no dropout
    expected = _formula_in_numpy((start + torch.arange(12).view(-1, 1)).numpy(), 16)
    assert positions.dtype == torch.float64 and np.abs(positions.detach().numpy() - expected).max() <= 2e-15
    t = torch.randint(0, PHASE_BLOCK, (50, 3))
    omega = torch.exp(torch.arange(0, 16, 2) * (-math.log(10000.0) / 16))  # the direct float32 product, as before
    angle = t.unsqueeze(-1).float() * omega
    direct = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
    p32 = sinusoidal_positions(t, 16)
    assert p32.dtype == torch.float32 and torch.equal(p32, direct)


def test_a_long_stream_keeps_accurate_angles():
    """Positions far into a stream (the Penn Treebank test text read as one stream ends at 82,430; a million; either
    side of a block's edge) against the sinusoid at 40 digits: float32 stays within 2e-4 everywhere, where the
    direct float32 product is off by more than 1e-3, and float64 within t * 1e-15."""
    positions = ([0, 1, 7, PHASE_BLOCK - 1, PHASE_BLOCK, PHASE_BLOCK + 1, 2 * PHASE_BLOCK + 3]
                 + list(range(82_400, 82_431)) + [10**6, 10**6 + 1])
    t = torch.tensor(positions).view(-1, 1)  # (N, 1)
    exact = _exact(positions, 64)
    err32 = np.abs(sinusoidal_positions(t, 64)[:, 0].double().numpy() - exact)
    err64 = np.abs(sinusoidal_positions(t, 64, torch.float64)[:, 0].numpy() - exact)
    assert err32.max() < 2e-4, err32.max()
    assert (err64 <= 1e-15 * (1 + np.array(positions)[:, None])).all(), err64.max()
    omega = torch.exp(torch.arange(0, 64, 2) * (-math.log(10000.0) / 64))
    angle = t.unsqueeze(-1).float() * omega  # the direct product in float32: the test can tell it apart
    direct = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)[:, 0].double().numpy()
    assert np.abs(direct - exact)[positions.index(82_430)].max() > 1e-3


def test_dropout_is_active_in_training_only():
    model = small(dropout=0.5)
    x = torch.randint(0, V, (6, 2))
    model.train()
    assert not torch.equal(model(x).logits, model(x).logits)
    model.eval()
    assert torch.equal(model(x).logits, model(x).logits)


def test_detach_cuts_the_graph_and_the_state_carries_gradients_within_a_window():
    model = small().train()
    out = model(torch.randint(0, V, (5, 2)))
    assert out.state.past[0].requires_grad
    assert not any(p.requires_grad for p in model.detach_state(out.state).past)


@pytest.mark.parametrize("bad, message", [
    (dict(emb_size=10, n_heads=4), "does not split"),
    (dict(window=0), "window must be a positive integer"),
    (dict(positions="rotary"), "positions='rotary' is unknown"),
    (dict(dropout=1.0), "not a dropout probability"),
    (dict(tie=True, vector_size=8), "tied decoder"),
])
def test_bad_settings_are_one_sentence(bad, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(vocab_size=V, **bad)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_every_tensor_follows_the_model_to_its_device(positions):
    """On the meta device a tensor made on the CPU (an arange or mask without ``device=``) that meets the model's
    raises, as it would on CUDA: training, a carried state, the backward pass and the kept weights all run.
    (The fused path asks its mask's values whether it is plain causal, which meta tensors cannot answer.)"""
    model = small(positions=positions, attention="equations", dropout=0.1).to("meta").train()
    x = torch.zeros(5, 2, dtype=torch.long, device="meta")
    out = model(x)
    again = model(x, model.detach_state(out.state))  # the remembered window and the positions carried on
    (out.logits.sum() + again.logits.sum()).backward()
    assert again.logits.device.type == "meta" and model.embedding.weight.grad.device.type == "meta"
    model.eval().attention_weights(True)
    model(x)
    assert all(block.attn.weights.device.type == "meta" for block in model.blocks)


@pytest.mark.cuda
def test_cuda_paths_agree():
    model = small().cuda()
    tokens = torch.randint(0, V, (30,))
    assert torch.allclose(model.score(tokens, bptt=7), small().score(tokens), atol=1e-4)
    q, k, v = (t.cuda() for t in qkv(T=4, S=9, dtype=torch.float32))
    allowed = allowed_positions(4, 5, 3, "cuda")
    assert torch.allclose(attention_fused(q, k, v, allowed), attention_equations(q, k, v, allowed)[0], atol=1e-5)


@pytest.mark.cuda
def test_cuda_trains_and_shows_its_heads():
    from lmcourse.training.trainer import TrainConfig, Trainer
    from lmcourse.widgets.heads_explorer import head_weights

    model = small(dropout=0.1).cuda()
    tokens = torch.randint(0, V, (400,))
    history = Trainer(model, tokens, tokens[:100], TrainConfig(epochs=1, batch_size=4, bptt=10, lr=1e-3,
                                                              optimizer="adam", progress=False, live_plot=False)).fit()
    assert history.rows and model.device.type == "cuda"
    a, h = head_weights(model, tokens[:50], chunk=7)
    assert a.shape == (2, 4, 50, 7) and torch.allclose(a.sum(-1), torch.ones(2, 4, 50), atol=1e-5)

