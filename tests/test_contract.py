"""The neural-model contract of lmcourse.lm: models that are not an RNNLM (a GRU language model
written here, and lesson 10's Transformer) train, checkpoint, resume bit for bit, are scored under the
neural cache and dynamic evaluation, and generate text, with nothing in training/ or adapt/ knowing their class."""
import copy
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
import torch
import torch.nn as nn

from lmcourse import lm
from lmcourse.adapt.cache import NeuralCache
from lmcourse.adapt.dyneval import DynamicEval, gradient_stats
from lmcourse.errors import CheckpointError
from lmcourse.lm import MAX_LOG, check_neural, perplexity_from_nll, register_model
from lmcourse.networks import generate
from lmcourse.networks.base import NeuralLM
from lmcourse.networks.transformer import TransformerConfig, TransformerLM
from lmcourse.training.checkpoint import load_checkpoint, save_checkpoint
from lmcourse.training.trainer import TrainConfig, Trainer
from lmcourse.vocab import Vocab

V = 12
PACKAGE = Path(lm.__file__).parent


@dataclass
class GRUConfig:
    vocab_size: int
    emb_size: int = 8
    hidden_size: int = 16

    def as_dict(self) -> dict:
        return asdict(self)


class GRUOutput(NamedTuple):
    logits: torch.Tensor  # (T, B, V)
    h: torch.Tensor  # (T, B, H)
    state: torch.Tensor  # (1, B, H)


class GRULM(NeuralLM):
    """Embedding, one torch GRU layer, a linear decoder: the smallest model that keeps the contract."""

    kind = "test-gru"

    def __init__(self, config: GRUConfig):
        super().__init__()
        self.config, self.vocab = config, None
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        self.rnn = nn.GRU(config.emb_size, config.hidden_size)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, x, state=None) -> GRUOutput:
        state = self.init_state(x.shape[1]) if state is None else state
        h, state = self.rnn(self.embedding(x), state)  # (T, B, H), (1, B, H)
        return GRUOutput(self.decoder(h), h, state)

    def init_state(self, batch_size: int) -> torch.Tensor:
        return self.embedding.weight.new_zeros(1, batch_size, self.config.hidden_size)

    def detach_state(self, state: torch.Tensor) -> torch.Tensor:
        return state.detach()


register_model(GRULM.kind, lambda settings: GRULM(GRUConfig(**settings)))


def periodic(n, seed=0):
    """A random cycle of 5 tokens, one token in ten resampled."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randperm(V, generator=g)[:5].repeat(n // 5 + 1)[:n].clone()
    noise = torch.rand(n, generator=g) < 0.1
    x[noise] = torch.randint(0, V, (int(noise.sum()),), generator=g)
    return x


TRAIN, VALID = periodic(1500), periodic(300)


def gru(seed=0) -> GRULM:
    torch.manual_seed(seed)
    model = GRULM(GRUConfig(V))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def transformer(seed=0) -> TransformerLM:
    torch.manual_seed(seed)
    model = TransformerLM(TransformerConfig(V, emb_size=8, n_heads=2, ffn_size=16, window=6, dropout=0.1))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


MAKERS = {"gru": gru, "transformer": transformer}


def settings(**kw) -> TrainConfig:
    cfg = dict(epochs=3, batch_size=10, eval_batch_size=5, bptt=10, lr=2.0, optimizer="ntasgd", nonmono=1,
               variable_bptt=True, progress=False, live_plot=False)
    cfg.update(kw)
    return TrainConfig(**cfg)


def fit(model, resume=False, **kw):
    with mock.patch("lmcourse.training.trainer.device", lambda: torch.device("cpu")):  # bit identity: the CPU
        return Trainer(model, TRAIN, VALID, settings(**kw)).fit(resume=resume)


@pytest.fixture(scope="module", params=sorted(MAKERS))
def make(request):
    return MAKERS[request.param]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make):
    out = tmp_path_factory.mktemp("run")
    model = make()
    history = fit(model, out_dir=out)
    return model, history, out


def test_the_model_keeps_the_contract_and_others_are_told_what_they_lack(make):
    for purpose in ("train", "checkpoint", "cache", "dyneval"):
        check_neural(make(), purpose)
    for purpose, who in (("train", "Trainer"), ("checkpoint", "checkpoint"), ("dyneval", "DynamicEval")):
        with pytest.raises(TypeError, match=who) as err:
            check_neural(nn.Linear(2, 2), purpose)
        text = str(err.value)
        assert "init_state" in text and text.endswith(".") and "\n" not in text
    with pytest.raises(TypeError, match="lacks stream"):
        check_neural(type("NoStream", (), {"vocab": None})(), "cache")
    with pytest.raises(ValueError, match="purpose='fly'"):
        check_neural(gru(), "fly")
    stray = type("Stray", (GRULM,), {"kind": "never-registered"})(GRUConfig(V))
    check_neural(stray, "train")  # training needs no registration; storing does
    with pytest.raises(TypeError, match=r"lacks a registered kind \('never-registered' is not; call lmcourse.lm.register"):
        check_neural(stray, "checkpoint")
    with pytest.raises(TypeError, match="registered kind"):  # before any training, not at the first save
        Trainer(stray, TRAIN, VALID, settings(checkpoint="never-written.pt"))


def test_no_class_test_is_left_in_training_or_adapt():
    for folder in ("training", "adapt"):
        for path in (PACKAGE / folder).rglob("*.py"):
            found = re.search(r"isinstance\([^)]*RNNLM", path.read_text())
            assert found is None, f"{path.name} tests for the RNNLM class instead of the contract: {found.group(0)}"
    assert re.search(r"isinstance\([^)]*RNNLM", "if not isinstance(model, RNNLM):")  # the pattern does catch one


def test_the_model_trains(trained):
    _, history, _ = trained
    assert history.stop_reason == "completed" and len(history.rows) == 3
    assert history.best["valid_ppl"] < 0.5 * history.start["valid_ppl"]  # a uniform guess: 12; the cycle: ~2


def test_ar_and_tar_need_the_layers_outputs():
    with pytest.raises(ValueError, match="AR and TAR read the layers' outputs.*train it with alpha=0 and beta=0"):
        fit(gru(), epochs=1, alpha=2.0)


def test_the_model_checkpoints_and_loads_as_itself(trained, tmp_path):
    model, history, out = trained
    path = save_checkpoint(tmp_path / "model.pt", model, history=history)
    loaded, info = load_checkpoint(path, map_location="cpu")
    assert type(loaded) is type(model) and info["kind"] == model.kind and info["config"] == model.config
    assert torch.equal(loaded.score(VALID), model.score(VALID))
    best, _ = load_checkpoint(out / "best.pt", map_location="cpu")  # the run's own best weights
    assert type(best) is type(model) and torch.equal(best.score(VALID), model.score(VALID))


def test_an_unknown_kind_is_one_sentence_naming_the_known_ones(trained, tmp_path):
    model, _, _ = trained
    path = save_checkpoint(tmp_path / "model.pt", model)
    with mock.patch.dict(lm.MODELS, clear=False):
        del lm.MODELS[model.kind]
        with pytest.raises(CheckpointError, match=rf"kind '{model.kind}'.*known: .*rnnlm") as err:
            load_checkpoint(path)
    assert "\n" not in str(err.value) and str(err.value).endswith(".")


def test_the_model_resumes_bit_for_bit(trained, make, tmp_path):
    straight, _, _ = trained
    first = make()
    fit(first, out_dir=tmp_path, epochs=2)
    again = make(seed=5)  # other starting weights: every number must come from last.pt
    history = fit(again, resume=True, out_dir=tmp_path)
    assert [row["epoch"] for row in history.rows] == [1, 2, 3]
    for (name, a), b in zip(straight.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), f"{name} differs from the uninterrupted run's"


def test_the_model_is_scored_under_the_cache(trained):
    model, _, _ = trained
    assert torch.equal(NeuralCache(model, lam=0.0).score(VALID), model.score(VALID))
    cached = NeuralCache(model, theta=1.0, lam=0.3, window=50)
    scores = cached.score(VALID)
    assert not torch.allclose(scores, model.score(VALID))
    state, steps = cached.start(1), []  # the step interface gives the same numbers, token by token
    for x in VALID[:30]:
        steps.append(float(cached.next_log_probs(state)[0, x]))
        state = cached.advance(state, x.view(1))
    assert torch.allclose(torch.tensor(steps, dtype=torch.float64), scores[:30], atol=1e-5)
    glob = NeuralCache(model, theta=1.0, mode="global", alpha=0.5, window=50)
    state = glob.start(2)
    assert torch.allclose(glob.next_log_probs(state).exp().sum(1), torch.ones(2), atol=1e-5)


def test_the_model_is_scored_under_dynamic_evaluation(trained):
    model, _, _ = trained
    before = {k: v.clone() for k, v in model.state_dict().items()}
    dyn = DynamicEval(model, "sgd", lr=0.5, decay=0.0, bptt=5)
    scores, static = dyn.score(VALID), model.score(VALID, bptt=5)  # read in the same segments of 5
    assert torch.allclose(scores[:5], static[:5], rtol=0, atol=1e-10)  # segment 1: the trained weights
    assert not torch.allclose(scores[5:10], static[5:10], rtol=0, atol=1e-6)  # then the adapted ones
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the model is not changed
    stats = gradient_stats(model, TRAIN, batch_size=5, bptt=5, progress=False)
    rms = DynamicEval(model, "rms", lr=1e-3, decay=0.01, eps=1e-4, bptt=5, stats=stats)
    assert math.isfinite(lm.perplexity(rms, VALID))
    state, steps = dyn.start(1), []
    for x in VALID[:12]:
        steps.append(float(dyn.next_log_probs(state)[0, x]))
        state = dyn.advance(state, x.view(1))
    assert torch.allclose(torch.tensor(steps, dtype=torch.float64), scores[:12], atol=1e-5)
    under_both = NeuralCache(dyn, lam=0.0).score(VALID)
    assert torch.allclose(under_both, scores, rtol=0, atol=1e-10)


def test_the_model_generates(trained):
    model, _, _ = trained
    rows = generate.sample(model, max_tokens=8, num_samples=3, seed=1)
    assert len(rows) == 3 and all(len(r) == 8 and all(0 <= t < V for t in r) for r in rows)
    assert rows == generate.sample(model, max_tokens=8, num_samples=3, seed=1)
    beams = generate.beam_search(model, beam_size=3, max_tokens=6, stop_at_eos=False)
    assert len(beams) == 3


def test_perplexity_from_a_mean_nll_has_one_overflow_rule():
    assert perplexity_from_nll(math.log(7.0)) == pytest.approx(7.0)
    assert perplexity_from_nll(709.0) == math.exp(709.0)
    assert perplexity_from_nll(MAX_LOG) == math.inf and perplexity_from_nll(1e9) == math.inf
    assert perplexity_from_nll(math.inf) == math.inf and math.isnan(perplexity_from_nll(math.nan))


@pytest.mark.cuda
def test_the_gru_trains_stores_and_is_scored_on_cuda(trained, tmp_path):
    model, _, _ = trained
    cuda = copy.deepcopy(model).to("cuda")
    assert torch.allclose(cuda.score(VALID), model.score(VALID), atol=1e-4)
    cache = {m: NeuralCache(m, lam=0.3, window=50).score(VALID) for m in (model, cuda)}
    assert torch.allclose(cache[cuda], cache[model], atol=1e-4)
    dyn = {m: DynamicEval(m, "sgd", lr=0.5, bptt=5).score(VALID[:60]) for m in (model, cuda)}
    assert torch.allclose(dyn[cuda], dyn[model], atol=1e-3)
    fresh = gru()
    with mock.patch("lmcourse.training.trainer.device", lambda: torch.device("cuda")):
        history = Trainer(fresh, TRAIN, VALID, settings(epochs=1)).fit()
    assert fresh.device.type == "cuda" and history.best["valid_ppl"] < history.start["valid_ppl"]
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "cuda.pt", fresh), map_location="cuda")
    assert loaded.device.type == "cuda" and torch.equal(loaded.score(VALID), fresh.score(VALID))
