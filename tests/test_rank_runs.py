"""Heads of a chosen rank after a wide network, mixtures with linear latent contexts, and the runs of
lessons 05 and 06 where the head's rank binds (lmcourse.course.rank_runs)."""
import pytest
import torch

from lmcourse.corpora.grammar import Params
from lmcourse.networks import bottleneck as bn
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.networks.mos import MixtureOfSoftmaxes
from lmcourse.course import rank_runs

AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global)

V = 40


def contexts(model: RNNLM, n=300, seed=0) -> torch.Tensor:
    """The last layer's output at ``n`` random contexts, (n, 1, E_last), float64."""
    x = torch.randint(0, V, (n, 1), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return model(x).h.double()


def test_head_size_bounds_the_rank_of_a_wide_network():
    torch.manual_seed(0)
    wide = RNNLM(LMConfig(V, emb_size=8, hidden_size=24, num_layers=1, head_size=3)).double()
    plain = RNNLM(LMConfig(V, emb_size=8, hidden_size=24, num_layers=1)).double()
    for model, low in ((wide, True), (plain, False)):
        with torch.no_grad():
            logits = model.head(contexts(model))[:, 0]                      # (n, V)
        assert (bn.numerical_rank(logits) <= 3 + 1) == low                  # d, plus one for the bias
        assert (bn.min_softmax_dim(torch.log_softmax(logits, -1)) <= 3) == low
    assert wide.config.last_size == 24 and wide.head.project.weight.shape == (3, 24)


def test_without_head_size_the_softmax_head_is_unchanged():
    keys = set(RNNLM(LMConfig(V, emb_size=8, hidden_size=16, num_layers=1)).state_dict())
    assert {"head.decoder.weight", "head.decoder.bias"} <= keys and not any("project" in k for k in keys)


def test_a_softmax_tied_through_a_projection():
    model = RNNLM(LMConfig(V, emb_size=4, hidden_size=16, num_layers=1, tie=True, head_size=4))
    assert model.head.decoder.weight is model.embedding.weight and model.config.last_size == 16
    assert not any("up" in k for k in model.state_dict())  # d = E: nothing between the head and the vectors
    with pytest.raises(ValueError, match="last_size=3"):
        LMConfig(V, emb_size=4, hidden_size=16, tie=True, last_size=3)


def test_a_tied_softmax_narrower_than_its_word_vectors_keeps_rank_d():
    torch.manual_seed(2)
    model = RNNLM(LMConfig(V, emb_size=12, hidden_size=16, num_layers=1, tie=True, head_size=3)).double()
    head = model.head
    assert head.decoder.weight is model.embedding.weight and head.up.weight.shape == (12, 3)  # U (E, d)
    g = contexts(model)                                                       # (n, 1, 16)
    with torch.no_grad():
        logits = head(g)[:, 0]                                                # (n, V)
        want = g[:, 0] @ head.project.weight.T @ head.up.weight.T @ model.embedding.weight.T + head.decoder.bias
    torch.testing.assert_close(logits, want)                                  # z = E (U P g) + b
    assert bn.numerical_rank(logits) <= 3 + 1 < bn.numerical_rank(model.embedding.weight @ torch.randn(12, 40,
                                                                                         dtype=torch.float64))


@pytest.mark.parametrize("bad", [0, -2, True, 2.5, "4"])
def test_head_size_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="head_size"):
        LMConfig(V, head_size=bad)


def test_mos_latent_must_be_known():
    with pytest.raises(ValueError, match="mos_latent"):
        LMConfig(V, head="mos", n_experts=2, mos_latent="relu")
    with pytest.raises(ValueError, match="activation"):
        MixtureOfSoftmaxes(4, 3, V, 2, activation="relu")


def test_linear_latent_contexts_are_the_formula_without_tanh():
    torch.manual_seed(1)
    tanh = MixtureOfSoftmaxes(6, 3, V, 4).double().eval()
    linear = MixtureOfSoftmaxes(6, 3, V, 4, activation="linear").double().eval()
    linear.load_state_dict(tanh.state_dict())
    g = torch.randn(20, 1, 6, dtype=torch.float64)
    log_pi = torch.log_softmax(g[:, 0] @ tanh.prior.weight.T, -1)                    # (20, K)
    h = (g[:, 0] @ tanh.latent.weight.T + tanh.latent.bias).view(20, 4, 3)          # (20, K, d), no tanh
    want = torch.logsumexp(log_pi[..., None] + torch.log_softmax(h @ tanh.weight.T + tanh.bias, -1), 1)
    torch.testing.assert_close(linear(g)[:, 0], want)
    assert not torch.allclose(tanh(g)[:, 0], want)
    rows = linear(torch.randn(200, 1, 6, dtype=torch.float64))[:, 0]               # still not bound by d
    assert bn.numerical_rank(rows) > 3 + 2


def test_mos_head_size_sets_each_latent_context():
    model = RNNLM(LMConfig(V, emb_size=8, hidden_size=16, num_layers=1, head="mos", n_experts=2, head_size=3,
                           mos_latent="linear"))
    assert model.head.weight.shape == (V, 3) and model.head.latent.out_features == 2 * 3
    assert model.head.activation == "linear" and model.config.last_size == 16


def test_a_tied_mixture_narrower_than_its_word_vectors():
    torch.manual_seed(3)
    model = RNNLM(LMConfig(V, emb_size=8, hidden_size=16, num_layers=1, tie=True, head="mos", n_experts=2,
                           head_size=3)).double().eval()
    head = model.head
    assert head.weight is model.embedding.weight and head.up.weight.shape == (8, 3)
    g = torch.randn(50, 1, 16, dtype=torch.float64)
    z = torch.tanh(g[:, 0] @ head.latent.weight.T + head.latent.bias).view(50, 2, 3)     # (n, K, d)
    logits = z @ head.up.weight.T @ head.weight.T + head.bias                               # (n, K, V): E U z_k + b
    log_pi = torch.log_softmax(g[:, 0] @ head.prior.weight.T, -1)                           # (n, K)
    with torch.no_grad():
        torch.testing.assert_close(head(g)[:, 0], torch.logsumexp(log_pi[..., None] + logits.log_softmax(-1), 1))
    assert all(bn.numerical_rank(logits[:, k]) <= 3 + 1 for k in range(2))                 # each softmax: rank d


def test_the_lookup_rich_corpus_and_the_models():
    params = rank_runs.lookup_rich(1000, 200, seed=5)
    assert isinstance(params, Params) and params.seed == 5 and params.train_tokens == 1000
    assert (params.valid_tokens, params.test_tokens) == (200, 200)
    assert params.lookup_rate > Params().lookup_rate and params.n_keys == params.n_values == 100
    softmax, mixture = rank_runs.model_config(V, 4), rank_runs.model_config(V, 4, n_experts=3)
    assert (softmax.head, softmax.head_size, softmax.last_size) == ("softmax", 4, softmax.hidden_size)
    assert (mixture.head, mixture.n_experts, mixture.mos_latent, mixture.head_size) == ("mos", 3, "linear", 4)
    training = rank_runs.train_config(3)
    assert training.optimizer == "adam" and training.decay_after == 2 and training.lr_decay == 4.0


def test_how_a_run_is_shown_does_not_change_its_key():
    class Corpus:
        name, train = "embedded-demo", torch.zeros(100, dtype=torch.long)
    model = rank_runs.model_config(V, 4)
    key = rank_runs.run_settings(Corpus, model, rank_runs.train_config(3), 100)
    assert key == rank_runs.run_settings(Corpus, model, rank_runs.train_config(3, progress=False, live_plot=False), 100)
    assert key != rank_runs.run_settings(Corpus, model, rank_runs.train_config(3, lr=0.1), 100)
    assert key != rank_runs.run_settings(Corpus, rank_runs.model_config(V, 2), rank_runs.train_config(3), 100)


def test_weighted_fit_equals_the_fit_of_repeated_rows():
    table = bn.lookup_log_probs(Params(n_keys=12, n_values=10))                      # (12, 10)
    counts = torch.tensor([1, 3, 1, 2, 5, 1, 1, 2, 1, 4, 1, 2])
    repeated = bn.fit_softmax(table.repeat_interleave(counts, 0), 3, max_iter=400)
    weighted = bn.fit_softmax(table, 3, max_iter=400, weights=counts)
    uniform = bn.fit_softmax(table, 3, max_iter=400)
    assert weighted.kl == pytest.approx(repeated.kl, rel=1e-4)
    assert abs(uniform.kl - repeated.kl) > 1e-4                                      # the weights matter
    for bad in (torch.ones(5), -counts, torch.zeros(12), torch.full((12,), float("nan"))):
        with pytest.raises(ValueError, match="weights"):
            bn.fit_softmax(table, 3, weights=bad)


def test_a_run_can_be_kept_out_of_the_reference_folder(monkeypatch, tmp_path):
    from lmcourse import config
    from lmcourse.store import reference_runs as reference
    from lmcourse.store import stored_runs
    from lmcourse.vocab import Vocab

    vocab = Vocab(["<eos>", "a", "b"])
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.setenv(reference.STORE_ENV, "1")
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.setattr(config, "SCALE", "cpu")

    def fit():
        torch.manual_seed(0)
        model = RNNLM(LMConfig(vocab_size=len(vocab), emb_size=4, hidden_size=4, num_layers=1))
        model.vocab = vocab
        return model, [{"epoch": 1, "valid_ppl": 3.0}]

    kept_out = stored_runs.train_or_load("05-short", {"d": 1}, fit, vocab, reference_run=False, **AT)
    assert kept_out.path.is_file() and reference.read_manifest() == []
    stored_runs.train_or_load("05-long", {"d": 1}, fit, vocab, **AT)
    assert [r["name"] for r in reference.read_manifest()] == ["05-long"]


def test_untied_word_vectors_as_wide_as_the_tied_ones():
    config = dict(emb_size=12, hidden_size=16, num_layers=1, head_size=3)
    untied, tied = RNNLM(LMConfig(V, vector_size=12, **config)), RNNLM(LMConfig(V, tie=True, **config))
    assert untied.head.decoder.weight.shape == tied.head.decoder.weight.shape == (V, 12)
    assert untied.head.up.weight.shape == tied.head.up.weight.shape == (12, 3)
    assert untied.head.decoder.weight is not untied.embedding.weight
    assert untied.num_parameters() - tied.num_parameters() == V * 12  # tying removes the vectors, nothing else
    mos = RNNLM(LMConfig(V, vector_size=12, head="mos", n_experts=2, **config))
    assert mos.head.weight.shape == (V, 12) and mos.head.up.weight.shape == (12, 3)
    with pytest.raises(ValueError, match="vector_size=8"):
        LMConfig(V, tie=True, vector_size=8, **config)
    with pytest.raises(ValueError, match="vector_size"):
        LMConfig(V, vector_size=0)


def test_a_runs_key_names_the_embedded_corpus_whatever_LMCOURSE_DATASET_says(monkeypatch):
    """Lessons 05 and 06 read only variants of the embedded corpus: LMCOURSE_DATASET=ptb must find their runs
    under the same key, never train them again under another name."""
    from types import SimpleNamespace

    from lmcourse import config
    from lmcourse.store.stored_runs import CachedRun

    seen = []

    def store(name, settings, fit, vocab, **key):
        seen.append(key)
        return CachedRun(SimpleNamespace(), [], True, None)

    monkeypatch.setattr(rank_runs, "train_or_load", store)
    corpus = SimpleNamespace(name="embedded-demo", train=torch.zeros(100, dtype=torch.long),
                             valid=torch.zeros(50, dtype=torch.long), vocab=object())
    for dataset in ("ptb", "embedded"):
        monkeypatch.setattr(config, "DATASET", dataset)
        rank_runs.train("demo", corpus, rank_runs.model_config(V, 4), rank_runs.train_config(1), plot=False,
                        scale="ci")
    assert [k["dataset"] for k in seen] == [rank_runs.DATASET] * 2 == ["embedded"] * 2
    rank_runs.train("demo", corpus, rank_runs.model_config(V, 4), rank_runs.train_config(1), plot=False, scale="ci",
                    dataset="other")
    assert seen[-1]["dataset"] == "other"                                   # an explicit dataset is kept
