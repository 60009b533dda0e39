"""The attention of lesson 10 and its Transformer: the equations against torch's fused kernel, the causal
mask, shapes, tying, and the state carried across chunks within the window."""
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

