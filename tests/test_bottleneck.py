"""The softmax bottleneck: rank facts, the exact-fit dimension, the KL fit, and the matrices read from
the oracle and from a model."""
import base64

import numpy as np
import pytest
import torch

from lmcourse.corpora.embedded import ensure
from lmcourse.corpora.grammar import Params
from lmcourse.corpora.oracle import Oracle
from lmcourse.networks import bottleneck as bn
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.vocab import Vocab

cuda = pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)


def low_rank(N, M, d, bias=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    H, W = torch.randn(N, d, generator=g, dtype=torch.float64), torch.randn(M, d, generator=g, dtype=torch.float64)
    logits = H @ W.T                                                     # (N, M)
    if bias:
        logits = logits + torch.randn(M, generator=g, dtype=torch.float64)
    return logits


# ------------------------------------------------------------------------------------ rank facts

@pytest.mark.parametrize("d", [1, 3, 7])
def test_rank_of_logits_and_log_probs(d):
    logits = low_rank(40, 30, d)
    assert bn.numerical_rank(logits) == d == int(torch.linalg.matrix_rank(logits))
    assert bn.numerical_rank(torch.log_softmax(logits, 1)) == d + 1          # the normaliser: a row shift
    with_bias = low_rank(40, 30, d, bias=True)
    assert bn.numerical_rank(with_bias) == d + 1
    assert bn.numerical_rank(torch.log_softmax(with_bias, 1)) == d + 2


def test_numerical_rank_sees_noise_and_tolerance():
    logits = low_rank(40, 30, 4)
    noisy = logits + 1e-5 * torch.randn(40, 30, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert bn.numerical_rank(noisy) == 30                          # above the default tolerance
    assert bn.numerical_rank(noisy, rtol=1e-3) == 4                # below a looser one
    assert bn.numerical_rank(torch.zeros(5, 4)) == 0
    assert bn.numerical_rank(1e-12 * logits) == 4                 # relative: the scale does not matter


@pytest.mark.parametrize("seed", range(5))
def test_a_row_shift_changes_rank_by_at_most_one(seed):
    g = torch.Generator().manual_seed(seed)
    M = low_rank(20, 15, 5, seed=seed)
    lam = torch.randn(20, 1, generator=g, dtype=torch.float64)
    shifted = M + lam                                              # M + lambda 1^T
    assert bn.numerical_rank(shifted) == 6                         # generic: one more
    assert bn.numerical_rank(shifted - lam) == 5                   # and back: one less
    for _ in range(5):
        r = bn.numerical_rank(shifted + torch.randn(20, 1, generator=g, dtype=torch.float64))
        assert abs(r - bn.numerical_rank(shifted)) <= 1


def test_min_softmax_dim_with_and_without_bias():
    A = torch.log_softmax(low_rank(50, 40, 6, bias=True), 1)
    assert bn.numerical_rank(A) == 8
    assert bn.min_softmax_dim(A) == 6                              # with a bias: exactly the d that made it
    assert bn.min_softmax_dim(A, bias=False) == 7                  # without: the bias costs one dimension
    c = bn.centre(A)
    assert torch.allclose(c.sum(0), torch.zeros(40, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(c.sum(1), torch.zeros(50, dtype=torch.float64), atol=1e-10)
    s = bn.spectrum(A)
    assert s[0] == 1 and s[5] > 1e-3 and s[6] < 1e-12


def test_bad_matrices_are_refused_with_one_sentence():
    with pytest.raises(ValueError, match="2-D"):
        bn.numerical_rank(torch.zeros(3))
    with pytest.raises(ValueError, match="support"):
        bn.numerical_rank(torch.tensor([[0.0, -float("inf")], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="rtol"):
        bn.numerical_rank(torch.eye(3), rtol=2)
    with pytest.raises(ValueError, match="non-negative integer"):
        bn.fit_softmax(torch.zeros(3, 3), -1)
    with pytest.raises(ValueError, match="same shape"):
        bn.kl_rows(torch.zeros(3, 3), torch.zeros(3, 4))


# ------------------------------------------------------------------------------------- fitting

def test_kl_rows_matches_torch_and_ignores_impossible_words():
    g = torch.Generator().manual_seed(0)
    A = torch.log_softmax(torch.randn(6, 9, generator=g, dtype=torch.float64), 1)
    logits = torch.randn(6, 9, generator=g, dtype=torch.float64)
    ref = torch.nn.functional.kl_div(torch.log_softmax(logits, 1), A, log_target=True, reduction="none").sum(1)
    assert torch.allclose(bn.kl_rows(A, logits), ref, atol=1e-12)
    A[:, 0] = -float("inf")                                         # a word no context produces
    A = A - torch.logsumexp(A, 1, keepdim=True)
    kl = bn.kl_rows(A, logits)
    assert torch.isfinite(kl).all() and (kl > 0).all()
    assert bn.kl_rows(A, A.clamp_min(-1e9)).abs().max() < 1e-6


def test_fit_is_exact_from_the_minimal_dimension_and_positive_below():
    A = torch.log_softmax(low_rank(30, 25, 5, bias=True) / 2, 1)    # min_softmax_dim = 5
    kls = {d: bn.fit_softmax(A, d).kl for d in (1, 2, 3, 4, 5, 6)}
    assert kls[5] < 1e-12 and kls[6] < 1e-12
    assert all(kls[d] > 1e-6 for d in (1, 2, 3, 4))
    assert all(kls[d] > kls[d + 1] for d in (1, 2, 3, 4))
    fit = bn.fit_softmax(A, 5)
    assert torch.allclose(fit.log_probs(), A, atol=1e-6)
    assert fit.H.shape == (30, 5) and fit.W.shape == (25, 5) and fit.b.shape == (25,)


def test_fit_improves_on_the_svd_start_and_repeats_exactly():
    g = torch.Generator().manual_seed(3)
    A = torch.log_softmax(2 * torch.randn(20, 20, generator=g, dtype=torch.float64), 1)
    H, W, b = bn.svd_init(A, 4)
    start = float(bn.kl_rows(A, H @ W.T + b).mean())
    fit = bn.fit_softmax(A, 4)
    assert fit.kl < 0.9 * start and fit.steps > 1
    again = bn.fit_softmax(A, 4)
    assert again.kl == fit.kl and torch.equal(again.H, fit.H)
    assert bn.fit_softmax(A, 4, max_iter=0).kl == pytest.approx(start)


def test_lookup_table_has_full_rank_and_sharpness_only_scales_it():
    A = bn.lookup_log_probs(Params())
    p = Params()
    assert A.shape == (p.n_keys, p.n_values)
    assert torch.allclose(A.exp().sum(1), torch.ones(p.n_keys, dtype=torch.float64))
    assert bn.numerical_rank(A) == min(p.n_keys, p.n_values)
    assert bn.min_softmax_dim(A) == min(p.n_keys, p.n_values) - 1
    small = bn.lookup_log_probs(Params(n_values=20))
    assert bn.min_softmax_dim(small) == 19
    soft = bn.lookup_log_probs(Params(lookup_sharpness=0.5))
    assert bn.min_softmax_dim(soft) == bn.min_softmax_dim(A)       # rank does not depend on sharpness


# -------------------------------------------------------------- matrices from the oracle and a model

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    params = Params(train_tokens=20_000, valid_tokens=6_000, test_tokens=2_000)
    folder = ensure(tmp_path_factory.mktemp("embedded") / "small", params)
    vocab = Vocab((folder / "vocab.txt").read_text().splitlines())
    words = []
    for line in (folder / "valid.txt").read_text().splitlines():
        words += line.split() + ["<eos>"]
    return Oracle(vocab, params), vocab, vocab.encode(words)


def test_oracle_rows_equal_stepping_the_oracle(corpus):
    oracle, _, x = corpus
    x = x[:300]
    state, rows = oracle.start(1), []
    for t in range(len(x)):
        rows.append(oracle.next_log_probs(state)[0])
        state = oracle.advance(state, x[t:t + 1])
    stepped = torch.stack(rows)                                      # (T, V)
    positions = torch.arange(len(x)).flip(0)                       # every position, in any order
    got = bn.oracle_rows(oracle, x, positions, chunk=16)
    ref = stepped[positions]
    assert oracle.is_name[x.numpy()].sum() >= 3                     # names recur: their counts matter
    assert torch.equal(torch.isfinite(got), torch.isfinite(ref))
    finite = torch.isfinite(ref)
    assert (got[finite] - ref[finite]).abs().max() < 1e-10


def test_lookup_rows_are_the_key_rows_of_the_table(corpus):
    oracle, _, x = corpus
    pos = bn.lookup_positions(oracle, x)
    assert len(pos) > 10
    rows = bn.oracle_rows(oracle, x, pos)
    keep = bn.support(rows)
    assert int(keep.sum()) == oracle.params.n_values
    keys = oracle.lex.key_index[x[pos - 1].numpy()]
    assert (keys >= 0).all()
    table = bn.lookup_log_probs(oracle.params)
    assert torch.allclose(rows[:, keep], table[keys], atol=1e-9)


def test_state_positions_pick_the_named_states(corpus):
    oracle, _, x = corpus
    pos = bn.state_positions(oracle, x, ["OVAL"])                   # right after a key
    assert torch.equal(pos, bn.lookup_positions(oracle, x))
    with pytest.raises(ValueError, match="not a state"):
        bn.state_positions(oracle, x, ["NOPE"])
    with pytest.raises(ValueError, match="outside the stream"):
        bn.oracle_rows(oracle, x[:10], [3, 10])


def small_model(vocab, d=4):
    torch.manual_seed(0)
    model = RNNLM(LMConfig(len(vocab), emb_size=d, hidden_size=12, num_layers=2, tie=True, init_range=2.0))
    model.vocab = vocab
    return model


def test_model_rows_are_what_score_gives(corpus):
    _, vocab, x = corpus
    model = small_model(vocab)
    x = x[:200]
    positions = torch.tensor([65, 0, 199, 5, 64, 5])               # any order, repeats allowed
    rows = bn.model_rows(model, x, positions, bptt=64, dtype=torch.float32)
    assert rows.dtype == torch.float32 and rows.shape == (6, len(vocab))
    picked = rows.gather(1, x[positions].view(-1, 1)).squeeze(1).double()
    assert torch.allclose(picked, model.score(x, bptt=64)[positions], atol=1e-5)
    assert model.embedding.weight.dtype == torch.float32           # the model itself is untouched


def test_model_log_probs_have_rank_at_most_d_plus_two(corpus):
    _, vocab, x = corpus
    model = small_model(vocab, d=4)
    positions = torch.arange(20, 400, 3)
    assert bn.numerical_rank(bn.model_rows(model, x[:400], positions)) == 4 + 1   # the bias starts at 0
    with torch.no_grad():
        model.head.decoder.bias.normal_()
    rows = bn.model_rows(model, x[:400], positions)                 # (127, V) float64
    assert bn.numerical_rank(rows) == 4 + 2                         # logits d + 1, the normaliser one more
    assert bn.min_softmax_dim(rows) <= 4


@cuda
def test_fit_and_model_rows_on_cuda(corpus):
    _, vocab, x = corpus
    A = torch.log_softmax(low_rank(20, 15, 3, bias=True), 1)
    cpu, gpu = bn.fit_softmax(A, 2), bn.fit_softmax(A.cuda(), 2)
    assert gpu.H.is_cuda and gpu.kl == pytest.approx(cpu.kl, rel=1e-4, abs=1e-9)
    model = small_model(vocab)
    positions = torch.tensor([1, 50, 99])
    ref = bn.model_rows(model, x[:100], positions)
    got = bn.model_rows(model.cuda(), x[:100], positions)
    assert torch.allclose(got, ref, atol=1e-9)


def test_svd_curve_is_the_svd_start_for_every_d():
    A = torch.log_softmax(low_rank(25, 20, 6, bias=True) / 3, 1)       # exact from d = 6
    curve = bn.svd_curve(A)
    assert curve.shape == (21,)
    for d in (0, 2, 5, 6, 9):
        H, W, b = bn.svd_init(A, d)
        assert float(curve[d]) == pytest.approx(float(bn.kl_rows(A, H @ W.T + b).mean()), abs=1e-12)
    assert (curve[:6] > 1e-8).all() and (curve[6:] < 1e-12).all()
    assert bn.fit_softmax(A, 3).kl <= float(curve[3])                  # the optimiser starts there


def test_explorer_draws_the_default_state_and_follows_the_knobs():
    from lmcourse.widgets.bottleneck_explorer import BottleneckExplorer

    explorer = BottleneckExplorer(d=8, max_iter=20)
    fig = explorer.figure()
    assert len(fig.axes) == 3
    assert "needs d >= 99" in fig._suptitle.get_text() and "d = 8" in fig._suptitle.get_text()
    explorer.set(n_values=30, d=40)
    assert explorer.table().shape == (100, 30)
    assert "needs d >= 29" in explorer.figure()._suptitle.get_text()  # d is capped at the table's size
    assert explorer.fit(29).kl < 1e-12 and explorer.fit(5).kl > 1e-3
    assert explorer.fit(5) is explorer.fit(5)                            # remembered, not refitted
    shown = explorer.widget()
    box = shown.widget
    assert [type(w).__name__ for w in box.children[0].children] == ["IntSlider", "FloatSlider", "IntSlider"]
    bundle = shown._repr_mimebundle_()  # the widget's view and, in the same output, a picture of it
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == box.model_id
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "children=" not in bundle["text/plain"]


def test_the_kl_panel_spends_no_height_on_rounding_noise():
    from lmcourse.widgets.bottleneck_explorer import EXACT, BottleneckExplorer

    explorer = BottleneckExplorer(d=8, max_iter=20).set(n_values=30, d=29)
    fig = explorer.figure()
    bottom, top = fig.axes[1].get_ylim()
    curve = explorer.curve().numpy()
    assert (curve < EXACT).any()                                          # exact fits exist past the rank ...
    assert bottom >= curve[curve > EXACT].min() / 10 and bottom > EXACT  # ... yet the axis stops above the noise
    assert top >= curve.max()
