"""The recurrent LM: shapes, cells, tying, parameter counts, the scoring interface, checkpoints."""
import os

import pytest
import torch
import torch.nn.functional as F

from lmcourse.networks.models import HEADS, RNNLM, LMConfig, register_head
from lmcourse.training.checkpoint import load_checkpoint, save_checkpoint
from lmcourse.vocab import Vocab

V = 23


def vocab(n=V):
    return Vocab(["<eos>"] + [f"w{i}" for i in range(n - 1)])


def tiny(seed=0, **kw) -> RNNLM:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=V, emb_size=6, hidden_size=9, num_layers=3)
    cfg.update(kw)
    model = RNNLM(LMConfig(**cfg))
    model.vocab = vocab()
    return model


def stream(n, seed=1):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed))


def formula(V, E, H, L, tie, last=None):
    """Per layer 4(H(I+H) + 2H); embedding VE; decoder V*H_last + V, less VE when tied."""
    last = last or (E if tie else H)
    sizes = [(E, H)] + [(H, H)] * (L - 2) + [(H, last)] if L > 1 else [(E, last)]
    lstm = sum(4 * (o * (i + o) + 2 * o) for i, o in sizes)
    return V * E + lstm + V * last + V - (V * E if tie else 0)


# ------------------------------------------------------------------------------------ forward

@pytest.mark.parametrize("tie,layers", [(False, 1), (False, 3), (True, 2), (True, 3)])
def test_forward_shapes(tie, layers):
    model = tiny(tie=tie, num_layers=layers, dropout=0.3, dropouth=0.2, dropouti=0.2, dropoute=0.1, wdrop=0.2)
    x = stream(5 * 4).view(5, 4)
    out = model(x)
    last = 6 if tie else 9
    assert out.logits.shape == (5, 4, V)
    assert out.h.shape == (5, 4, last)
    assert len(out.state) == len(out.raw_outputs) == len(out.outputs) == layers
    sizes = [9] * (layers - 1) + [last]
    for (h, c), raw, dropped, size in zip(out.state, out.raw_outputs, out.outputs, sizes):
        assert h.shape == c.shape == (1, 4, size)
        assert raw.shape == dropped.shape == (5, 4, size)
    assert out.h is out.raw_outputs[-1]
    out2 = model(x[:2], model.detach_state(out.state))
    assert out2.logits.shape == (2, 4, V)


def test_state_is_carried():
    model = tiny().eval()
    x = stream(12).view(12, 1)
    whole = model(x).logits
    first = model(x[:5])
    second = model(x[5:], first.state).logits
    torch.testing.assert_close(torch.cat([first.logits, second]), whole)


def test_dropouts_train_only():
    model = tiny(dropout=0.4, dropouth=0.3, dropouti=0.3, dropoute=0.2, wdrop=0.5)
    x = stream(20).view(10, 2)
    assert not torch.equal(model(x).logits, model(x).logits)
    model.eval()
    assert torch.equal(model(x).logits, model(x).logits)
    plain = tiny()
    plain.load_state_dict({k.replace(".module.", "."): v for k, v in model.state_dict().items()})
    torch.testing.assert_close(plain.eval()(x).logits, model(x).logits)


def test_standard_dropout_changes_mask_over_time():
    x = stream(16).view(8, 2)
    for kind, same_over_time in (("locked", True), ("standard", False)):
        model = tiny(dropout=0.5, dropout_kind=kind).train()
        g = model(x).outputs[-1]  # (T, B, E)
        zero = g == 0
        assert zero.any()
        assert bool((zero == zero[:1]).all()) == same_over_time


def test_fast_and_equations_cells_agree():
    fast = tiny(tie=True).double().eval()
    slow = tiny(seed=5, tie=True, cell="equations").double().eval()
    slow.load_state_dict(fast.state_dict())
    x = stream(30).view(10, 3)
    a, b = fast(x), slow(x)
    assert (a.logits - b.logits).abs().max() < 1e-10
    for (h1, c1), (h2, c2) in zip(a.state, b.state):
        assert (h1 - h2).abs().max() < 1e-10 and (c1 - c2).abs().max() < 1e-10
    drops = dict(tie=True, dropout=0.3, dropouth=0.2, dropouti=0.2, dropoute=0.1, wdrop=0.4)
    fast, slow = tiny(**drops).double(), tiny(seed=5, cell="equations", **drops).double()
    slow.load_state_dict(fast.state_dict())
    torch.manual_seed(3)
    a = fast(x).logits
    torch.manual_seed(3)
    b = slow(x).logits
    assert (a - b).abs().max() < 1e-10  # same masks, same numbers
    b.sum().backward()
    assert slow.rnns[0].module.weight_hh_l0.grad is not None


# ------------------------------------------------------------------------------ tying and size

def test_tying_shares_one_matrix():
    model = tiny(tie=True)
    assert model.head.decoder.weight is model.embedding.weight
    assert model.head.decoder.weight.data_ptr() == model.embedding.weight.data_ptr()
    out = model(stream(8).view(4, 2))
    out.logits.sum().backward()
    assert model.embedding.weight.grad is not None
    assert model.num_parameters() == formula(V, 6, 9, 3, True)
    untied = tiny(tie=False)
    assert untied.head.decoder.weight is not untied.embedding.weight
    assert untied.num_parameters() == formula(V, 6, 9, 3, False)


def test_tied_last_layer_outputs_embedding_size():
    model = tiny(tie=True, emb_size=5, hidden_size=11)
    assert [r.hidden_size for r in model.rnns] == [11, 11, 5]
    with pytest.raises(ValueError, match="last_size"):
        LMConfig(vocab_size=V, emb_size=5, hidden_size=11, tie=True, last_size=11)


@pytest.mark.parametrize("V_,E,H,L,tie,expected", [
    (10000, 400, 1150, 3, True, 24_221_600),  # AWD-LSTM PTB (Merity et al. 2018: 24M)
    (33278, 400, 1150, 3, True, 33_556_078),  # AWD-LSTM WT2 (Merity et al. 2018: 33M)
])
def test_parameter_count_awd_lstm(V_, E, H, L, tie, expected):
    with torch.device("meta"):
        model = RNNLM(LMConfig(vocab_size=V_, emb_size=E, hidden_size=H, num_layers=L, tie=tie))
    assert model.num_parameters() == formula(V_, E, H, L, tie) == expected


@pytest.mark.parametrize("tie,millions", [(False, 19.78), (True, 13.28)])
def test_parameter_count_pytorch_example_650(tie, millions):
    """The 650-unit 2-layer PTB model of pytorch/examples: 19.78M untied, 13.28M tied (Press & Wolf 2017: 13M tied)."""
    with torch.device("meta"):
        model = RNNLM(LMConfig(vocab_size=10000, emb_size=650, hidden_size=650, num_layers=2, tie=tie))
    n = model.num_parameters()
    assert n == formula(10000, 650, 650, 2, tie)
    assert round(n / 1e6, 2) == millions


def test_weight_drop_keeps_parameter_count():
    assert tiny(wdrop=0.5).num_parameters() == tiny().num_parameters()


# ---------------------------------------------------------------------------- the interface

def manual_scores(model, tokens):
    x = torch.cat([torch.tensor([model.vocab.eos]), tokens[:-1]]).view(-1, 1)
    with torch.no_grad():
        logits = model.eval()(x).logits[:, 0]  # (N, V)
    return F.log_softmax(logits.double(), -1).gather(1, tokens.view(-1, 1)).squeeze(1)


def test_score_matches_log_softmax_and_restores_mode():
    model = tiny(tie=True, dropout=0.3, wdrop=0.3).double()
    tokens = stream(40)
    model.train()
    scores = model.score(tokens)
    assert model.training
    assert scores.dtype == torch.float64 and scores.shape == (40,)
    torch.testing.assert_close(scores, manual_scores(model, tokens), rtol=0, atol=1e-10)
    model.eval()
    model.score(tokens)
    assert not model.training


def test_chunked_score_equals_unchunked():
    model = tiny().double()
    tokens = stream(50)
    whole = model.score(tokens, bptt=1000)
    for bptt in (1, 7, 49):
        torch.testing.assert_close(model.score(tokens, bptt=bptt), whole, rtol=0, atol=1e-10)


def test_step_interface_agrees_with_score():
    model = tiny(tie=True).double()
    streams = torch.stack([stream(12, seed=s) for s in range(3)])  # (B, N)
    expected = torch.stack([model.score(s) for s in streams])  # (B, N)
    state = model.start(3)
    got = []
    for t in range(streams.shape[1]):
        logp = model.next_log_probs(state)  # (B, V)
        assert logp.shape == (3, V)
        got.append(logp.gather(1, streams[:, t:t + 1]).squeeze(1))
        state = model.advance(state, streams[:, t])
    torch.testing.assert_close(torch.stack(got, 1).double(), expected, rtol=0, atol=1e-10)


def test_reorder_keeps_rows():
    model = tiny().double()
    state = model.advance(model.start(3), torch.tensor([1, 2, 3]))
    kept = model.reorder(state, torch.tensor([2, 2, 0]))
    torch.testing.assert_close(kept.log_probs, state.log_probs[[2, 2, 0]])
    nxt = model.advance(kept, torch.tensor([4, 4, 4]))
    alone = model.advance(model.advance(model.start(1), torch.tensor([3])), torch.tensor([4]))
    torch.testing.assert_close(nxt.log_probs[0], alone.log_probs[0], rtol=0, atol=1e-12)


def test_bad_input_is_explained():
    model = tiny()
    with pytest.raises(ValueError, match="1-D"):
        model.score(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.score(torch.tensor([V]))
    with pytest.raises(ValueError, match=r"\(T, B\)"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="cell"):
        LMConfig(vocab_size=V, cell="gru")
    with pytest.raises(ValueError, match="dropout probability"):
        LMConfig(vocab_size=V, dropouth=1.5)
    with pytest.raises(ValueError, match="head"):
        RNNLM(LMConfig(vocab_size=V, head="no-such-head"))
    model.vocab = None
    with pytest.raises(ValueError, match="model.vocab"):
        model.score(torch.tensor([1, 2]))


def test_a_registered_head_takes_the_softmax_slot():
    class Doubled(torch.nn.Module):
        def __init__(self, in_size):
            super().__init__()
            self.proj = torch.nn.Linear(in_size, V)

        def forward(self, g):  # (T, B, E) -> (T, B, V)
            return 2 * self.proj(g)

    register_head("doubled", lambda config, embedding, in_size: Doubled(in_size))
    try:
        model = tiny(head="doubled")
        out = model(stream(6).view(3, 2))
        torch.testing.assert_close(out.logits, 2 * model.head.proj(out.outputs[-1]))
    finally:
        HEADS.pop("doubled")


# ------------------------------------------------------------------------------- checkpoints

def test_checkpoint_round_trip(tmp_path):
    model = tiny(tie=True, wdrop=0.3, dropout=0.2)
    path = tmp_path / "m.pt"
    save_checkpoint(path, model, history=[{"epoch": 1, "valid_ppl": 9.5}], extra={"note": "x", "where": tmp_path})
    assert os.listdir(tmp_path) == ["m.pt"]
    raw = torch.load(path, weights_only=True)  # plain data only
    shared = raw["state_dict"]["embedding.weight"]
    assert shared is raw["state_dict"]["head.decoder.weight"]  # the tied matrix is stored once
    assert raw["config"]["tie"] is True and raw["vocab"] == model.vocab.itos
    loaded, info = load_checkpoint(path, vocab=vocab(), map_location="cpu")
    assert loaded.config == model.config and loaded.vocab == model.vocab
    assert loaded.head.decoder.weight is loaded.embedding.weight
    assert info["history"] == [{"epoch": 1, "valid_ppl": 9.5}]
    assert info["extra"] == {"note": "x", "where": str(tmp_path)}
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), k
    tokens = stream(30)
    torch.testing.assert_close(loaded.score(tokens), model.score(tokens), rtol=0, atol=0)


def test_checkpoint_refuses_another_vocabulary(tmp_path):
    model = tiny()
    save_checkpoint(tmp_path / "m.pt", model)
    other = Vocab(model.vocab.itos[:5] + ["zzz"] + model.vocab.itos[6:])
    with pytest.raises(ValueError, match=r"first at id 5 \('w4' vs 'zzz'\): load with the corpus it was trained on"):
        load_checkpoint(tmp_path / "m.pt", vocab=other)
    with pytest.raises(ValueError, match=r"\(23 tokens\).*\(24 tokens\)"):
        load_checkpoint(tmp_path / "m.pt", vocab=Vocab(model.vocab.itos + ["extra"]))
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
